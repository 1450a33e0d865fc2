"""The Spark backend on a standalone cluster: a master and two workers (1 core, 1 GB each)
started on loopback from the ``spark-class`` that pyspark ships, once per test session,
and stopped by the process ids started here (:mod:`linview.app.spark_cluster`).

Each job runs as its own driver process (one SparkContext per process): the README's
``spark-submit`` recipe with a job that instantiates the compiled class, and a
``linview run --checkpoint`` stream during which one executor's JVM is killed at a
random point (the run goes on to NumPy's answer; five such kills:
``bench/spark_kill_soak.py``), and one driver that runs every example of ``examples/``
there (one update each), as ``tests/test_spark.py`` and ``tests/test_spark_solve.py``
run them on ``local[2]``, then a ``linview run`` (the CLI's ``main``) of a program with a
solve view and edge records.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pyspark = pytest.importorskip("pyspark")
pytestmark = [pytest.mark.spark, pytest.mark.slow]

from linview.app.spark_cluster import LoopbackCluster, cluster_env, killed_run  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SPARK_HOME = Path(pyspark.__file__).parent
ENV = cluster_env()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    """A master with two registered workers (``cluster.url`` is ``spark://127.0.0.1:PORT``)."""
    if not (SPARK_HOME / "bin" / "spark-class").exists():
        pytest.skip("pyspark ships no spark-class")
    with LoopbackCluster(workers=2, cores=1, memory="1g",
                         logs=tmp_path_factory.mktemp("cluster")) as c:
        yield c


def _run(args, cwd, timeout=600, **kw):
    out = subprocess.run(args, cwd=cwd, env=ENV, capture_output=True, text=True,
                         timeout=timeout, **kw)
    assert out.returncode == 0, out.stderr[-3000:]
    return out


JOB = '''
import sys
import numpy as np
from pyspark.sql import SparkSession
from powers_trigger import Powers   # the class `linview compile` wrote

spark = SparkSession.builder.appName("powers").getOrCreate()
A = np.load(sys.argv[1])
views = Powers(A=A, spark=spark, distribute_min=2)   # load: the inputs by name, options
import time
print("loaded at", time.strftime("%y/%m/%d %H:%M:%S"), flush=True)
u, v = np.ones((A.shape[0], 1)), np.linspace(0, 1, A.shape[0]).reshape(-1, 1)
views.update("A", u, v)
np.save(sys.argv[2], views["D"])
print("distributed:", sorted(views.distributed()))
spark.stop()
'''


def _powers_input(tmp_path: Path, n: int = 40) -> tuple[Path, np.ndarray]:
    rng = np.random.default_rng(5)
    A = rng.standard_normal((n, n)) / (2 * np.sqrt(n))
    np.save(tmp_path / "A.npy", A)
    return tmp_path / "A.npy", A


def test_the_readme_spark_submit_recipe_runs_on_the_cluster(cluster, tmp_path):
    url = cluster.url
    path, A = _powers_input(tmp_path)
    _run([str(Path(sys.executable).parent / "linview"), "compile", str(ROOT / "examples/powers.m"),
          "--backend", "spark", "-o", "powers_trigger.py"], tmp_path)
    zip_path = _run([sys.executable, "-c", "from linview.backends.spark.session import "
                     "package_zip as z; print(z('linview.zip'))"], tmp_path).stdout.strip()
    (tmp_path / "my_job.py").write_text(JOB)
    out = _run([str(SPARK_HOME / "bin" / "spark-submit"), "--master", url,
                "--executor-memory", "768m", "--driver-memory", "1g",
                "--py-files", f"{zip_path},powers_trigger.py", "my_job.py", str(path),
                "D.npy"], tmp_path)
    assert "distributed: ['A'" in out.stdout
    A2 = A + np.ones((40, 1)) @ np.linspace(0, 1, 40).reshape(1, -1)
    want = np.linalg.matrix_power(A2, 16)
    got = np.load(tmp_path / "D.npy")
    assert np.max(np.abs(got - want)) <= 1e-10 * max(np.max(np.abs(want)), 1e-300)
    assert "was already registered" not in out.stderr
    # linview quiets the session it is given: no INFO line a second after loading
    loaded = re.search(r"loaded at (\S+ \S+)", out.stdout).group(1)
    late = [ln for ln in out.stderr.splitlines() if " INFO " in ln and ln[:17] > loaded]
    assert not late, late[:5]


def test_a_killed_executor_costs_time_not_the_linview_run(cluster, tmp_path):
    """One executor's JVM is killed (SIGKILL, by pid) after a random number of applied
    batches plus a random delay; the run with --checkpoint ends at NumPy's A^16.  The seed
    is random (LINVIEW_KILL_SEED to repeat one) and printed on failure."""
    seed = int(os.environ.get("LINVIEW_KILL_SEED") or random.SystemRandom().randrange(10**6))
    got = killed_run(cluster, tmp_path / "run", ROOT / "examples/powers.m", seed=seed,
                     batches=6)
    what = {k: v for k, v in got.items() if k != "driver_log_tail"}
    assert got["returncode"] == 0, (what, got["driver_log_tail"])
    assert got["killed"] is not None, f"the run ended before the kill: {what}"
    assert got["kill_after_batches"] < got["batches"], what  # mid-stream
    assert got["batches_applied"] == got["batches"], what
    assert got["error"] <= 1e-10, what


def _pagerank_case(tmp: Path) -> list:
    """A personalised PageRank (a stochastic M, its solve view on the driver, S in blocks
    on the executors: 300×260, both sides at least 256, so it is distributed) and 6 edge
    records in ``tmp/upd``; the ``linview run`` arguments, and the edges at the end."""
    import json

    import scipy.sparse as sps

    from linview.solve.stochastic import StochasticMatrix

    rng = np.random.default_rng(8)
    n = 300
    src, dst = rng.integers(2, n, 3 * n), rng.integers(0, n, 3 * n)
    edges = {(int(a), int(b)) for a, b in zip(src, dst, strict=True)}
    M = StochasticMatrix(n, *np.array(sorted(edges)).T)
    sps.save_npz(tmp / "M.npz", M.tocsc())
    S = rng.random((n, 260))
    np.save(tmp / "S.npy", S / S.sum(axis=0))
    (tmp / "upd").mkdir()
    recs = []
    for _ in range(6):
        a, c = (int(x) for x in rng.integers(0, n, 2))
        op = "delete" if (a, c) in edges else "insert"
        edges.symmetric_difference_update({(a, c)})
        recs.append({"input": "M", "edge": [a + 1, c + 1], "op": op})
    (tmp / "upd" / "e.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return ["run", str(ROOT / "examples/pagerank_personalised.m"), "--backend", "spark",
            "--input", f"M={tmp / 'M.npz'}", "--input", f"S={tmp / 'S.npy'}", "--input",
            "d=0.85", "--spark-driver-mib", "0", "--partitions", "2", "--updates",
            str(tmp / "upd"), "--out", str(tmp / "out"), "--once"], sorted(edges)


#: one driver application (one SparkContext) for the examples and the ``linview run``
#: below: each application on the cluster starts a driver and two executor JVMs
EXAMPLES_JOB = '''
import contextlib, io, json, re, sys
sys.path[:0] = [sys.argv[2]]
import linview
from linview.app.cli import main
from linview.backends.spark import runtime as srt
from test_examples import BY_NAME, make_scenario, rel_err

spark = srt.local_session(sys.argv[1])
errors = {}
for name, ex in sorted(BY_NAME.items()):
    numpy_prog = linview.compile_file(ex.path)
    sc = make_scenario(ex, list(numpy_prog.program.dynamic))
    reference = numpy_prog.load(**sc.inputs)
    views = linview.compile_file(ex.path, backend="spark").load(
        spark=spark, distribute_min=2, partitions=2, **sc.inputs)
    what, U, V = sc.updates[0]
    reference.update(what, U, V)
    views.update(what, U, V)
    errors[name] = max(rel_err(views[o], want) for o, want in reference.outputs.items())
    views.release()
out = io.StringIO()  # linview run in this driver: the CLI keeps the session it finds
with contextlib.redirect_stdout(out):
    code = main([*sys.argv[3:], "--master", sys.argv[1]])
print(json.dumps({"errors": errors, "run": [code, out.getvalue()]}))
spark.stop()
'''


@pytest.fixture(scope="module")
def cluster_job(cluster, tmp_path_factory):
    """The examples' driver (:data:`EXAMPLES_JOB`) run once: what it printed, and the
    folder of its ``linview run`` with the edges that run ends at."""
    import json

    tmp = tmp_path_factory.mktemp("job")
    (tmp / "job.py").write_text(EXAMPLES_JOB)
    run_args, edges = _pagerank_case(tmp)
    out = _run([sys.executable, str(tmp / "job.py"), cluster.url, str(ROOT / "tests"),
                *run_args], ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1]), tmp, edges


def test_solve_views_run_on_the_cluster_with_edge_records(cluster_job):
    """``linview run`` of a personalised PageRank (a stochastic M, its solve view on the
    driver, S in blocks on the executors) with edge records: the dense ranks' solve.  It
    runs in the examples' driver (:data:`EXAMPLES_JOB`), through the CLI's ``main``."""
    import json

    from linview.solve.stochastic import StochasticMatrix

    printed, tmp, edges = cluster_job
    code, stdout = printed["run"]
    assert code == 0
    assert json.loads(stdout)["applied"] == 6
    n = 300
    dense = StochasticMatrix(n, *np.array(edges).T).tocsc().toarray()
    want = np.linalg.solve(np.eye(n) - 0.85 * dense, 0.15 * np.load(tmp / "S.npy"))
    got = np.load(tmp / "out" / "latest.npz")["R"]
    assert np.max(np.abs(got - want)) <= 1e-9


def test_every_example_runs_on_the_cluster(cluster_job):
    """Every example, its views distributed where large (solve views on the driver), on
    the standalone cluster: one update each, the outputs equal to NumPy's."""
    errors = cluster_job[0]["errors"]
    assert sorted(errors) == sorted(p.stem for p in (ROOT / "examples").glob("*.m"))
    assert max(errors.values()) < 1e-8, errors
