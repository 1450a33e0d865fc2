"""Every program of the corpus ``tests/programs/`` on the Spark backend, against GNU
Octave running the same file and against the NumPy backend.

One ``local[2]`` session serves every program.  Views are distributed block matrices
(``distribute_min=2``: every matrix of two or more rows and columns, in two blocks per
dimension) except for the programs in :data:`ON_THE_DRIVER`, whose evaluation is a loop
of hundreds of small Spark jobs (a ``while`` loop, many unrolled steps or factorizations
re-run on every update): they run with their views on the driver, which is what
``linview run`` does with views this small, so that the corpus stays within a few
minutes on two cores.  Their ops run distributed in the other programs and in
``tests/test_spark_parity.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

import linview

try:  # tests/ may or may not be a package
    from tests.octave_runner import function_signature, octave_available, run_octave_many
    from tests.test_programs import NAMES, PROGRAMS, rel_err, scenario, spec, updates
except ImportError:  # pragma: no cover - depends on how pytest set sys.path
    from octave_runner import function_signature, octave_available, run_octave_many
    from test_programs import NAMES, PROGRAMS, rel_err, scenario, spec, updates

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

#: program -> why its views stay on the driver here (each took 10 s to 2 min distributed)
ON_THE_DRIVER = {
    "fixed_point": "a while loop: one Spark job per iteration",
    "power_method_tol": "a while loop: one Spark job per iteration",
    "jacobi_groups": "a while loop: one Spark job per iteration",
    "gauss_seidel": "a while loop: one Spark job per iteration",
    "newton_schulz": "twelve unrolled steps, each a distributed product",
    "qr_iteration": "six QR steps, each collected to the driver and distributed again",
    "chol_ridge": "chol and two inverses of a re-evaluated 4x4 on every update",
    "lu_solve": "lu and two inverses of a re-evaluated 5x5 on every update",
    "elementwise": "a dozen elementwise statements re-evaluated on every update",
    "train_test": "a re-evaluated inverse behind an index on every update",
    "wls": "a re-evaluated inverse on every update",
}


@pytest.fixture(scope="session")
def spark_session():
    from linview.backends.spark import runtime as srt

    session = srt.local_session("local[2]")
    yield session
    session.stop()



@pytest.mark.parametrize("name", NAMES)
def test_program_on_spark_agrees_with_octave_and_numpy(name, spark_session):
    path = PROGRAMS[NAMES.index(name)]
    inputs, spd = spec(path)
    _, _, numpy_views, current, numpy_first = scenario(name)
    prog = linview.compile_file(path, backend="spark")
    options = ({"driver_view_elements": 1 << 20} if name in ON_THE_DRIVER
               else {"distribute_min": 2, "partitions": 2})
    views = prog.load(spark=spark_session, **inputs, **options)
    matrices = any(min(np.shape(np.atleast_2d(v))) >= 2 for v in inputs.values())
    assert bool(views.distributed()) == (matrices and name not in ON_THE_DRIVER)
    first = {k: np.array(v) for k, v in views.outputs.items()}
    for x, u, v in updates(path, inputs, spd, type(views).DYNAMIC):
        views.update(x, u, v)
    for out in numpy_views.outputs:
        assert rel_err(first[out], numpy_first[out]) <= 1e-8, f"{out} before the updates"
        assert rel_err(views[out], numpy_views[out]) <= 1e-8, f"{out} after the updates"
    if octave_available():
        _, _, outs = function_signature(path)
        before, after = run_octave_many(path, [inputs, current], outs)
        for out in outs:
            assert rel_err(first[out], before[out]) <= 1e-8, f"{out}: Octave, initial inputs"
            assert rel_err(views[out], after[out]) <= 1e-8, f"{out}: Octave, after updates"
    views.release()
