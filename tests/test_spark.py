"""The Spark backend: generated module, hybrid partitioning, block-matrix triggers, lineage
cuts, save/restore and error reporting.

Every test runs against one ``local[2]`` session.  Programs are the examples with small
inputs (n around 6 to 20) and ``distribute_min=2``, so every matrix view is a distributed
block matrix in 2 or 3 blocks per dimension, and outputs are compared with the NumPy
backend and with re-evaluation.
"""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile

import numpy as np
import pytest

import linview
from linview.backends.spark import runtime as srt
from linview.backends.spark.blocks import DistMatrix
from linview.backends.spark.codegen import partitioning
from linview.errors import BackendError, LinviewError, NumericalError

try:  # tests/ may or may not be a package
    from tests.test_examples import BY_NAME, make_scenario, rel_err
except ImportError:  # pragma: no cover - depends on how pytest set sys.path
    from test_examples import BY_NAME, make_scenario, rel_err

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

N_UPDATES = 3  # ranks 1, 2, 1 (the first one as 1-D vectors)


_COMPILED: dict[tuple[str, str], linview.CompiledProgram] = {}


def compiled(name: str, backend: str) -> linview.CompiledProgram:
    if (name, backend) not in _COMPILED:
        _COMPILED[name, backend] = linview.compile_file(BY_NAME[name].path, backend=backend)
    return _COMPILED[name, backend]


def spark_load(name: str, spark, inputs, **options):
    options = {"distribute_min": 2, "partitions": 2, **options}
    return compiled(name, "spark").load(spark=spark, **inputs, **options)


# ------------------------------------------------------------------ generated code
def test_partitioning_of_powers_and_ols():
    powers = compiled("powers", "spark")
    parts = partitioning(powers.plan)
    assert parts["A"] == "both"  # A·U_B and Aᵀ·V_B in the trigger
    assert powers.module_class.PARTITIONING == parts
    assert "# Hybrid partitioning" in powers.source
    ols = compiled("ols", "spark")
    parts = partitioning(ols.plan)
    # the triggers read X only as Xᵀ·U (on X and on Y), re-evaluation as Xᵀ·X: columns
    assert parts["X"] == "col"
    assert parts["beta_inv"] == "row"  # beta_inv·U_beta_arg
    assert ols.module_class.PARTITIONING["X"] == "col"
    imports = [ln for ln in ols.source.splitlines() if ln.startswith(("import", "from"))]
    assert imports == ["import numpy as np", "from linview.backends.spark import runtime as rt"]


#: examples with solve views (``%#linview solve/tolerance/stochastic/sparse``): their
#: tests are in tests/test_spark_solve.py
SOLVE_EXAMPLES = [n for n, e in BY_NAME.items() if re.search(
    r"%#linview\s+(solve|tolerance|stochastic|sparse)\b", e.path.read_text())]
SPARK_EXAMPLES = [n for n in BY_NAME if n not in SOLVE_EXAMPLES]


@pytest.mark.parametrize("name", SPARK_EXAMPLES)
def test_trigger_code_is_the_numpy_backends(name):
    """Same expressions as the NumPy module; every ``rt.`` helper that either module
    calls exists in the Spark runtime (fused products included, should the generator emit them)."""
    spark_src, numpy_src = compiled(name, "spark").source, compiled(name, "numpy").source
    for helper in set(re.findall(r"\brt\.(\w+)", spark_src + numpy_src)) - {"TriggerModule"}:
        assert hasattr(srt, helper), helper
    # NumPy-only decisions (whole-trigger re-evaluation, views not kept) change the text
    if not any(w in numpy_src for w in ("fused_dot", "TRANSIENT", "REEVALUATED")):
        def body(src):
            return src[src.index("    def _evaluate"):]

        assert body(spark_src) == body(numpy_src)


@pytest.mark.parametrize("name", ["ols", "powers"])
def test_spark_module_takes_the_numpy_models_threads_and_keeps_no_transient_view(name):
    """The driver's share of a Spark trigger runs with the BLAS threads the seconds model
    chose for the NumPy module; views read only through their inverse are not kept."""
    spark_cls = compiled(name, "spark").module_class
    numpy_cls = compiled(name, "numpy").module_class
    assert spark_cls.TRIGGER_BLAS == numpy_cls.TRIGGER_BLAS
    assert spark_cls.TRANSIENT == numpy_cls.TRANSIENT
    assert not set(spark_cls.TRANSIENT) & set(spark_cls.VIEWS)
    assert not set(spark_cls.TRANSIENT) & set(spark_cls.PARTITIONING)


def test_package_zip_holds_the_subpackages(tmp_path):
    """What ``ship`` sends is importable on its own, as on an executor without linview."""
    path = srt.package_zip()
    names = zipfile.ZipFile(path).namelist()
    for want in ("linview/__init__.py", "linview/backends/spark/tasks.py",
                 "linview/backends/numpy/codegen.py", "linview/grammar/linview.lark"):
        assert want in names
    code = ("import sys, sysconfig; sys.path[:0] = [sys.argv[1]]; "
            "sys.path.append(sysconfig.get_paths()['purelib']); "
            "import linview.backends.spark.tasks, linview.backends.spark; "
            "assert linview.backends.spark.tasks.__file__.startswith(sys.argv[1]), "
            "linview.__file__")
    out = subprocess.run([sys.executable, "-S", "-c", code, path], cwd=tmp_path,
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr


# ------------------------------------------------------------------ examples
@pytest.mark.parametrize("name", SPARK_EXAMPLES)
def test_example_matches_numpy_and_reevaluation(name, spark):
    ex = BY_NAME[name]
    sc = make_scenario(ex, list(compiled(name, "numpy").program.dynamic))
    numpy_views = compiled(name, "numpy").load(**sc.inputs)
    # 3 blocks per dimension for OLS (uneven: 20 = 7+7+6 rows), 1 for the three programs
    # with the most views (speed; powers runs in blocks in test_verify_refresh_and_views and
    # on the cluster), 2 for the others
    parts = {"ols": 3, "sums_of_powers": 1, "general_form": 1, "powers": 1}.get(name, 2)
    # fold_rank=2: with updates of rank 1, 2, 1 some terms wait on the driver, some fold
    views = spark_load(name, spark, sc.inputs, partitions=parts, fold_rank=2)
    assert views.distributed(), "no view was distributed"
    for vname, U, V in sc.updates[:N_UPDATES]:
        numpy_views.update(vname, U, V)
        views.update(vname, U, V)
    assert views.stats["fallbacks"] == 0
    fresh = compiled(name, "numpy").load(**views.inputs)  # re-evaluation of the new inputs
    for out, want in numpy_views.outputs.items():
        assert rel_err(views[out], want) < 1e-8, out
        assert rel_err(views[out], fresh[out]) < 1e-8, out
    views.release()


def test_verify_refresh_and_views(spark):
    rng = np.random.default_rng(6)
    A = BY_NAME["powers"].make_inputs(rng)["A"]
    views = spark_load("powers", spark, {"A": A})
    u, v = rng.standard_normal(10) * 0.05, rng.standard_normal(10) * 0.05
    views.update("A", u, v)
    before = views.outputs
    assert views.verify() < 1e-8  # a distributed re-evaluation, compared block by block
    views.refresh()
    A2 = A + np.outer(u, v)
    for out, want in (("C", np.linalg.matrix_power(A2, 4)),
                      ("D", np.linalg.matrix_power(A2, 16))):
        assert rel_err(views[out], want) < 1e-8
        assert rel_err(before[out], want) < 1e-8
    assert rel_err(views["A"], A2) < 1e-14
    assert views["B"].flags.writeable is False
    # a row update (one-hot U): A·U reads only the column block that holds that column
    e = np.zeros(10)
    e[7] = 1.0
    views.update("A", e, v)
    A3 = A2 + np.outer(e, v)
    assert rel_err(views["C"], np.linalg.matrix_power(A3, 4)) < 1e-8


def test_layouts_follow_the_analysis(spark):
    rng = np.random.default_rng(1)
    views = spark_load("powers", spark, {"A": rng.standard_normal((8, 8)) / 8})
    layouts = {n: v.layout for n, v in views.distributed().items()}
    assert layouts == dict(views.PARTITIONING)
    assert layouts["A"] == "both" and layouts["D"] == "row"
    views.release()
    views = spark_load("powers", spark, {"A": rng.standard_normal((8, 8)) / 8}, layout="col")
    assert {v.layout for v in views.distributed().values()} == {"col"}
    views.release()
    with pytest.raises(LinviewError, match="layout='diagonal'"):
        spark_load("powers", spark, {"A": np.eye(8)}, layout="diagonal")


def test_an_input_named_like_an_option_is_an_input(spark):
    src = "function C = f(layout)\n %#linview dims layout(n,n)\n C = 2 * layout;\nend\n"
    prog = linview.compile(src, name="f", backend="spark")
    A = np.arange(9.0).reshape(3, 3)
    views = prog.load(spark=spark, layout=A, distribute_min=2)
    assert np.array_equal(views["C"], 2 * A)
    views.release()


@pytest.mark.parametrize("limit", [10_000, 50])  # op(R) gathered in one task, or tiles
def test_block_products_of_every_orientation(spark, limit):
    """``op(L) @ op(R)`` of two distributed matrices, both ways of assembling the result
    (uneven blocks: 11 = 4 + 4 + 3)."""
    from linview.backends.spark.blocks import matmul
    from linview.backends.spark.context import BlockContext

    ctx = BlockContext(spark.sparkContext, 3, driver_max_elements=limit, distribute_min=2)
    rng = np.random.default_rng(11)
    A, B = rng.standard_normal((11, 7)), rng.standard_normal((7, 11))
    dA, dB = DistMatrix.from_numpy(ctx, A, "row"), DistMatrix.from_numpy(ctx, B, "col")
    for left, right, want in ((dA, dB, A @ B), (dB.T, dA.T, B.T @ A.T),
                              (dA.scaled(2.0), dA.T, 2 * A @ A.T), (dB.T, dB, B.T @ B)):
        C = matmul(left, right)
        blocks = sorted(C.rows().collect(), key=lambda kv: kv[0])
        assert rel_err(np.vstack([b for _, b in blocks]), want) < 1e-14


@pytest.mark.parametrize("layout", ["row", "col", "both"])
def test_fused_products_read_each_layout_once(spark, layout):
    """``rt.fused_dot(A, X, Y, e, ops="NTN")``: one Spark job for every product of a view,
    stacked or summed per block whatever the layout, pending low-rank terms included, and
    the same values as NumPy's (a one-hot factor included)."""
    from linview.backends.spark.context import BlockContext

    sc = spark.sparkContext
    ctx = BlockContext(sc, 3, distribute_min=2, fold_rank=100)
    rng = np.random.default_rng(12)
    A = rng.standard_normal((10, 8))
    dA = DistMatrix.from_numpy(ctx, A, layout)
    P, Q = rng.standard_normal((10, 2)), rng.standard_normal((8, 2))
    dA.add_outer(P, Q)  # waits on the driver
    assert dA.pending_rank() == 2
    A = A + P @ Q.T
    X, Y, e = rng.standard_normal((8, 3)), rng.standard_normal((10, 2)), np.zeros((8, 1))
    e[5] = 1.0
    jobs = sc.statusTracker().getJobIdsForGroup()
    got = srt.fused_dot(dA.scaled(-0.5), X, Y, e, ops="NTN")
    new_jobs = set(sc.statusTracker().getJobIdsForGroup()) - set(jobs)
    want = [-0.5 * A @ X, -0.5 * A.T @ Y, -0.5 * A @ e]
    for g, w in zip(got, want, strict=True):
        assert rel_err(g, w) < 1e-14
    assert len(new_jobs) == 1, new_jobs  # (with both layouts: row and column blocks)


@pytest.mark.parametrize("layout", ["row", "both"])
def test_folds_that_carry_much_driver_data_cut_the_lineage_sooner(spark, layout):
    """Every fold's map function carries its P and Q, and the driver's JVM keeps them as
    long as the lineage reaches back to it (ranks of 120 at n = 300 filled a 1 GB driver):
    a fold carrying more than ``pass_bytes`` counts as that many passes towards the next
    cut, so the lineage is cut sooner, and the values are unchanged."""
    from linview.backends.spark.context import BlockContext

    ctx = BlockContext(spark.sparkContext, 2, checkpoint_every=10, distribute_min=2,
                       fold_rank=0)
    rng = np.random.default_rng(13)
    A = rng.standard_normal((12, 12))
    dA = DistMatrix.from_numpy(ctx, A, layout)
    layouts = 2 if layout == "both" else 1
    P, Q = rng.standard_normal((12, 3)), rng.standard_normal((12, 3))
    carried = 2 * 12 * 3 * 8 * layouts  # bytes of P and Q, in every layout's function
    ctx.pass_bytes = carried  # one pass: counted once
    dA.add_outer(P, Q)
    assert dA.updates == 1
    ctx.pass_bytes = -(-carried // 4)  # a quarter of it: four passes
    dA.add_outer(P, Q)
    assert dA.updates == 5
    depths = []
    for _ in range(6):  # 4 passes each: cut at every third fold (at 10 or more)
        dA.add_outer(P, Q)
        depths.append(dA.lineage_depth())
    A = A + 8 * P @ Q.T
    assert dA.updates == 4 and max(depths) <= 5, (dA.updates, depths)
    assert rel_err(dA.to_numpy(), A) < 1e-13


def test_deferred_folding_of_low_rank_terms(spark, tmp_path):
    """``fold_rank=5``: terms wait on the driver (products add ``P (Qᵀ x)``) until their
    total rank reaches 5, then are folded into the blocks in one pass.  ``B = A²`` gets a
    rank-2k term per update of rank k."""
    ex = BY_NAME["powers"]
    sc = make_scenario(ex, ["A"])
    numpy_views = compiled("powers", "numpy").load(**sc.inputs)
    views = spark_load("powers", spark, sc.inputs, fold_rank=5)
    pending, want, rank = [], [], 0
    for vname, U, V in sc.updates[:5]:
        numpy_views.update(vname, U, V)
        views.update(vname, U, V)
        pending.append(views.distributed()["B"].pending_rank())
        rank += 2 * (1 if np.ndim(U) == 1 else U.shape[1])
        want.append(0 if rank >= 5 else rank)
        rank = want[-1]
    assert pending == want and 0 in want and max(want) > 0, (pending, want)
    for out, want in numpy_views.outputs.items():
        assert rel_err(views[out], want) < 1e-8, out
    views.save(tmp_path / "p.npz")  # the saved values include the pending terms
    back = linview.restore(tmp_path / "p.npz", program=compiled("powers", "spark"),
                           spark=spark, distribute_min=2)
    assert rel_err(back["D"], numpy_views["D"]) < 1e-8
    assert views.verify() < 1e-8
    views.release()
    back.release()


# ------------------------------------------------------------------ lineage
def test_lineage_stays_bounded_over_many_updates(spark):
    n = 6
    rng = np.random.default_rng(2)
    src = "function C = twice(A)\n %#linview dims A(n,n)\n C = 2 * A;\nend\n"
    prog = linview.compile(src, name="twice", backend="spark")
    A = rng.standard_normal((n, n))
    # fold_rank=0: every update is a pass over the blocks, the lineage grows by one RDD
    # 60 updates, a cut every 5: without the cuts the lineage would be 60 deep
    views = prog.load(A=A, spark=spark, distribute_min=2, partitions=1, checkpoint_every=5,
                      fold_rank=0)
    jvm = spark.sparkContext._jsc
    depths, cached = [], []
    for i in range(60):
        u, v = rng.standard_normal(n), rng.standard_normal(n)
        views.update("A", u, v)
        A = A + np.outer(u, v)
        if i + 1 in (30, 60):
            depths.append(views.lineage_depth())
            cached.append(jvm.getPersistentRDDs().size())
    assert depths[0].keys() == {"A", "C"}
    assert max(max(d.values()) for d in depths) <= 5 + 3, depths
    assert cached[0] == cached[1]  # the old RDDs are unpersisted
    assert len(views._ctx.cached) == 2
    assert rel_err(views["C"], 2 * A) < 1e-12
    views.release()


def test_reliable_checkpoints_in_a_directory(spark, tmp_path):
    rng = np.random.default_rng(7)
    src = "function C = twice(A)\n %#linview dims A(n,n)\n C = 2 * A;\nend\n"
    prog = linview.compile(src, name="twice", backend="spark")
    A = rng.standard_normal((5, 5))
    views = prog.load(A=A, spark=spark, distribute_min=2, partitions=1, checkpoint_every=5,
                      checkpoint_dir=tmp_path / "ckpt", fold_rank=0)
    for _ in range(12):
        u, v = rng.standard_normal(5), rng.standard_normal(5)
        views.update("A", u, v)
        A = A + np.outer(u, v)
    assert max(views.lineage_depth().values()) <= 5 + 3
    assert any((tmp_path / "ckpt").rglob("part-*"))
    assert rel_err(views["C"], 2 * A) < 1e-12
    views.release()


# ------------------------------------------------------------------ persistence, inputs
def test_save_restore_round_trip(spark, tmp_path):
    rng = np.random.default_rng(3)
    ex = BY_NAME["ols"]
    inputs = ex.make_inputs(rng)
    views = spark_load("ols", spark, inputs)
    views.update("X", rng.standard_normal(20) * 0.1, rng.standard_normal(6) * 0.1)
    path = tmp_path / "ols.npz"
    views.save(path)
    saved = views["beta"].copy()
    back = linview.restore(path, program=compiled("ols", "spark"), spark=spark,
                           distribute_min=2)
    assert isinstance(back._views["X"], DistMatrix)
    assert np.array_equal(back["beta"], views["beta"])
    u, v = rng.standard_normal(20) * 0.1, rng.standard_normal(6) * 0.1
    back.update("X", u, v)
    views.update("X", u, v)
    assert rel_err(back["beta"], views["beta"]) < 1e-12
    plain = linview.restore(path, spark=spark)  # the module source is in the file
    assert np.array_equal(plain["beta"], saved)


def test_inputs_from_npy_and_parquet(spark, tmp_path):
    rng = np.random.default_rng(4)
    X, Y = rng.standard_normal((20, 6)), rng.standard_normal((20, 2))
    np.save(tmp_path / "X.npy", X)
    srt.write_parquet(Y, tmp_path / "Y.parquet")
    views = spark_load("ols", spark, {"X": str(tmp_path / "X.npy"),
                                      "Y": tmp_path / "Y.parquet"})
    want = np.linalg.lstsq(X, Y, rcond=None)[0]
    assert rel_err(views["beta"], want) < 1e-10
    assert np.array_equal(views["Y"], Y)


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize("bad", [object(), "stopped"])
def test_broken_session_is_a_backend_error(bad):
    if bad == "stopped":
        from pyspark import SparkContext

        class Stopped(SparkContext):
            def __init__(self):  # a context whose JVM side is gone
                self._jsc = None

        bad = Stopped()
    with pytest.raises(BackendError) as e:
        compiled("powers", "spark").load(A=np.eye(4), spark=bad)
    assert "Py4J" not in str(e.value) and "Traceback" not in str(e.value)


def test_missing_java_is_a_backend_error(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(BackendError, match="Java") as e:
        compiled("powers", "spark").load(A=np.eye(4))
    assert "openjdk" in str(e.value)


def test_a_failing_task_is_a_backend_error(spark):
    rdd = spark.sparkContext.parallelize([0], 1)
    with pytest.raises(BackendError) as e, srt.spark_errors("probe"):
        rdd.map(lambda x: 1 / x).collect()
    text = str(e.value)
    assert "ZeroDivisionError: division by zero" in text
    assert "Traceback" not in text and "py4j" not in text.lower()
    assert e.value.__cause__ is None and e.value.__suppress_context__


@pytest.mark.filterwarnings("ignore::scipy.linalg.LinAlgWarning")
def test_singular_update_leaves_the_views_unchanged(spark):
    rng = np.random.default_rng(8)
    inputs = BY_NAME["ols"].make_inputs(rng)
    X = inputs["X"]
    views = spark_load("ols", spark, inputs)
    before = views["beta"].copy()
    e = np.zeros(X.shape[1])
    e[2] = 1.0
    # X += (-X[:, 2]) e_2ᵀ zeroes a column: X'X turns singular, Sherman–Morrison refuses,
    # the fallback re-evaluation refuses too, and nothing changes
    with pytest.raises(NumericalError):
        views.update("X", -X[:, 2], e)
    assert np.array_equal(views["beta"], before)
    assert np.array_equal(views["X"], X)
    u, v = rng.standard_normal(20) * 0.1, rng.standard_normal(6) * 0.1
    views.update("X", u, v)
    want = np.linalg.lstsq(X + np.outer(u, v), inputs["Y"], rcond=None)[0]
    assert rel_err(views["beta"], want) < 1e-8


def test_inverse_beyond_the_driver_limit(spark):
    rng = np.random.default_rng(5)
    with pytest.raises(LinviewError, match="driver_max_elements = 20"):
        spark_load("ols", spark, BY_NAME["ols"].make_inputs(rng), driver_max_elements=20)


def test_driver_view_elements_keeps_small_views_on_the_driver(spark):
    """``driver_view_elements`` (what ``linview run --spark-driver-mib`` sets): views of at
    most that many entries are NumPy arrays on the driver, larger ones stay distributed;
    a row-update stream gives what the NumPy backend and re-evaluation give."""
    rng = np.random.default_rng(8)
    X, Y = rng.standard_normal((30, 8)), rng.standard_normal((30, 1))
    prog = linview.compile_file("examples/ols.m", backend="spark")
    ref = linview.compile_file("examples/ols.m").load(X=X, Y=Y)
    views = prog.load(X=X, Y=Y, spark=spark, distribute_min=2, driver_view_elements=64)
    kinds = {n: isinstance(v, DistMatrix) for n, v in views._views.items()}
    assert kinds["X"] and not kinds["beta_inv"]
    assert "beta_arg" not in kinds  # XᵀX: read only through its inverse, not kept
    for _ in range(4):
        U = np.zeros((30, 3))
        U[rng.choice(30, 3, replace=False), np.arange(3)] = 1.0
        V = 0.1 * rng.standard_normal((8, 3))
        views.update("X", U, V)
        ref.update("X", U, V)
    expect = np.linalg.solve(ref["X"].T @ ref["X"], ref["X"].T @ ref["Y"])
    assert rel_err(views["beta"], expect) < 1e-10
    assert rel_err(views["beta"], ref["beta"]) < 1e-10
    assert views.verify() < 1e-10
    # phase 2 on a driver array saves only the rows a row update touches; a rollback
    # (a later Spark job of the trigger failed) restores them exactly
    from linview.backends.spark.context import Transaction

    A = np.asfortranarray(rng.standard_normal((30, 8)))
    old = A.copy()
    with Transaction() as txn:
        srt.add_outer(A, U, V)
        srt.add_outer(A, np.ones((30, 1)), np.ones((8, 1)))  # a dense update: all saved
        assert not np.array_equal(A, old)
        assert txn.arrays[0][2].shape == (3, 8)
    txn.rollback()
    np.testing.assert_array_equal(A, old)
