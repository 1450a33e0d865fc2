"""A driver that runs out of memory is an immediate, clear error, never a hang (issue 24).

Each case is its own Python process with its own driver JVM of 512 MB
(``spark.driver.memory``), in ``local[1]``:

* by default linview refuses, before any collect, a matrix that a third of the driver's
  heap beyond Spark's reserve cannot hold (``driver_max_elements`` from the heap);
* with that limit raised by hand, the collect of a 288 MB matrix exhausts the JVM's heap:
  the JVM ends at once (``-XX:+ExitOnOutOfMemoryError`` in the sessions linview starts;
  before, the driver logged ``java.lang.OutOfMemoryError`` and the caller waited forever)
  and the caller gets a ``BackendError`` that says so.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

JOB = '''
import sys, time
import numpy as np
import linview
from linview.backends.spark.session import local_session

spark = local_session("local[1]", spark_driver_memory="512m")
prog = linview.compile("function B = twice(A)\\n  %#linview dims A(n,n)\\n  B = 2 * A;\\nend\\n",
                       name="twice", backend="spark")
n, limit = int(sys.argv[1]), sys.argv[2]
A = np.random.default_rng(0).standard_normal((n, n))
opts = {} if limit == "default" else {"driver_max_elements": int(limit)}
t0 = time.monotonic()
try:
    views = prog.load(A=A, spark=spark, distribute_min=2, **opts)
    print("loaded", sorted(views.distributed()), flush=True)
    t0 = time.monotonic()
    B = views["B"]
    print("read", float(np.max(np.abs(B - 2 * A))))
except linview.LinviewError as e:
    print("refused after %.1f s" % (time.monotonic() - t0), flush=True)
    print(type(e).__name__, "|", e.message, "|", e.hint, flush=True)
'''


def _job(tmp_path, n: int, limit: str, timeout: float = 300):
    (tmp_path / "job.py").write_text(JOB)
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "job.py", str(n), limit], cwd=tmp_path,
                         capture_output=True, text=True, timeout=timeout, check=False)
    return out, time.monotonic() - t0


def test_a_matrix_above_a_third_of_the_small_driver_is_refused_before_collecting(tmp_path):
    out, _ = _job(tmp_path, 3200, "default")  # 82 MB: above (heap - 300 MB) / 3
    assert out.returncode == 0, out.stderr[-3000:]
    assert "loaded ['A', 'B']" in out.stdout, out.stdout + out.stderr[-2000:]
    line = out.stdout.strip().splitlines()[-1]
    assert line.startswith("BackendError | cannot collect a distributed view on the driver: "
                           "3200×3200 = 10,240,000 elements is above"), line
    assert "driver's JVM heap is" in line and "--driver-memory" in line


@pytest.mark.slow
def test_the_driver_out_of_memory_is_an_immediate_clear_error_not_a_hang(tmp_path):
    out, _ = _job(tmp_path, 6000, str(10**9))  # 288 MB collected through a 512 MB JVM
    assert out.returncode == 0, out.stderr[-3000:]
    line = out.stdout.strip().splitlines()[-1]
    # the 288 MB input of the hang: its blocks fill the heap while loading, or the
    # collect does while reading B; either way the JVM ends and the caller is told why
    assert re.match(r"BackendError \| (loading twice|reading B): the Spark driver ran out "
                    r"of memory \(java.lang.OutOfMemoryError in its JVM, "
                    r"spark.driver.memory = 512m\) and stopped", line), \
        out.stdout + out.stderr[-3000:]
    assert "Terminating due to java.lang.OutOfMemoryError" in out.stdout + out.stderr
