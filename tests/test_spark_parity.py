"""The Spark backend at parity with NumPy: every op of the op table has a Spark rendering,
every ``rt.<name>`` the NumPy generator emits exists in the Spark runtime, the wider
language's ops give the reference interpreter's values on distributed block matrices
(every layout, odd block boundaries), sums of sizes compile, and what Spark refuses says
where, with file:line:col and a caret, in the user's words."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import linview
from linview.backends.spark import octave as spark_octave
from linview.backends.spark import runtime as srt
from linview.backends.spark.blocks import DistMatrix
from linview.backends.spark.context import BlockContext
from linview.backends.spark.render import SPARK_RENDER
from linview.compiler import ir
from linview.compiler.ir import Op
from linview.compiler.ops import OPS
from linview.compiler.ops_octave import EBIN_FUNCTIONS, ENTRIES, MAP_FUNCTIONS
from linview.errors import BackendError

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------ the op table
def test_every_op_of_the_table_has_a_spark_rendering():
    missing = [op.value for op in OPS if op not in SPARK_RENDER]
    assert not missing, f"ops with no Spark rendering: {missing}"
    unplaced = [op.value for op in (*ENTRIES, Op.SOLVE) if op not in spark_octave.PLACES]
    assert not unplaced, f"ops with no place (distributed/driver) on Spark: {unplaced}"


def test_a_solve_op_is_rendered_as_a_solve_view_on_spark():
    """``Op.SOLVE`` (``A \\ B`` under a solve pragma) prints as the Spark module's solve
    view, which knows where its ``\\`` is (tests/test_spark_solve.py runs them)."""
    src = "function x = f(A, b)\n  %#linview solve auto\n  x = A \\ b;\nend\n"
    prog = linview.compile(src, name="f", filename="f.m", backend="spark")
    assert any(st.expr.op is Op.SOLVE for st in prog.program.statements)
    assert "class F(sv.SparkSolveModule):" in prog.source
    assert "self._solve_view('x', B=b, A=lambda: A)" in prog.source
    assert "SOLVE_AT = {'x': (3, 9)}" in prog.source


def test_every_runtime_name_the_numpy_generator_emits_exists_on_spark():
    """The generated code is the NumPy backend's: an ``rt.X`` it prints (``rt.Size`` for
    a sum of sizes, ``rt.chol``...) that the Spark runtime lacks crashes at import or
    load, so each one must exist there."""
    sources = [*(ROOT / "backends" / "numpy").glob("*.py"), ROOT / "linview/compiler/plan.py",
               *(ROOT / "backends" / "spark").glob("render.py")]
    names = {m for f in sources for m in re.findall(r"\brt\.([A-Za-z_]\w*)\(", f.read_text())}
    assert {"Size", "chol", "norm", "core_inv"} <= names
    missing = sorted(n for n in names if not hasattr(srt, n))
    assert not missing, f"rt names the Spark runtime lacks: {missing}"


# ------------------------------------------------------------------ values
@pytest.fixture(scope="module")
def ctx(spark):
    return BlockContext(spark.sparkContext, partitions=3, distribute_min=2)


def _reference(op, attr, *arrays):
    """The reference interpreter's value of the op (``ops_octave``'s evaluate)."""
    leaves = [ir.view(f"a{i}", tuple(sp.Integer(d) for d in a.shape))
              for i, a in enumerate(arrays)]
    return np.asarray(OPS[op].evaluate(ir.node(op, *leaves, attr=attr), *arrays), dtype=float)


def _dist(ctx, a, layout):
    return DistMatrix.from_numpy(ctx, a, layout)


def test_elementwise_functions_and_operators_block_by_block(ctx):
    """Every function and operator against the reference interpreter, on row and column
    blocks in turn, with a lazy scale, against a driver array, a distributed matrix and a
    number on either side."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((7, 5))
    a[1, 2] = 0.0
    b = rng.standard_normal((7, 5))
    b[3, 1] = a[3, 1]  # equal entries for ==, <=, >=
    layouts = ["row", "col"]
    for i, fn in enumerate(MAP_FUNCTIONS):
        param = 3.0 if fn == "power" else None
        x, s = (np.abs(a) + 0.1, 2.0) if fn in ("sqrt", "log") else (a, -2.0)
        X = _dist(ctx, x, layouts[i % 2]).scaled(s)  # the scale applies in the tasks
        got = srt.elementwise(fn, X, exponent=param)
        np.testing.assert_allclose(np.asarray(got), _reference(Op.MAP, (fn, param), s * x),
                                   err_msg=fn)
    A = {lay: _dist(ctx, a, lay).scaled(-2.0) for lay in layouts}
    others = [(b, b), (_dist(ctx, b, "row"), b), (0.5, np.full_like(a, 0.5))]
    for i, fn in enumerate(EBIN_FUNCTIONS):
        other, dense = others[i % 3]
        ref = _reference(Op.EBIN, fn, -2.0 * a, dense)
        got = srt.elementwise(fn, A[layouts[i % 2]], other)
        np.testing.assert_allclose(np.asarray(got), ref, err_msg=fn)
        if i % 3 == 2:  # the number on the left
            got = srt.elementwise(fn, other, A[layouts[i % 2]])
            ref = _reference(Op.EBIN, fn, dense, -2.0 * a)
            np.testing.assert_allclose(np.asarray(got), ref, err_msg=fn)


@pytest.mark.parametrize("layout", ["row", "col", "both"])
def test_reductions_norms_and_diagonals(ctx, layout):
    rng = np.random.default_rng(4)
    a = rng.standard_normal((8, 6))
    A = _dist(ctx, a, layout)
    A.add_outer(np.ones((8, 1)), np.arange(6.0).reshape(-1, 1))  # a pending term
    a = a + np.ones((8, 1)) @ np.arange(6.0).reshape(1, -1)
    for fn in ("max", "min"):
        for dim in (1, 2):
            np.testing.assert_allclose(srt.reduce(fn, A, axis=dim - 1),
                                       _reference(Op.REDUCE, (fn, dim), a))
    for p in ("1", "2", "fro", "inf"):
        np.testing.assert_allclose(srt.norm(A, p, False), _reference(Op.NORM, (p, False), a))
    np.testing.assert_allclose(srt.diag(A, "get"), _reference(Op.DIAG, "get", a))
    np.testing.assert_allclose(srt.diag(A.T, "get"), _reference(Op.DIAG, "get", a.T))


_SLICE = st.tuples(st.integers(0, 8), st.integers(1, 9), st.sampled_from([1, 1, 2, 3]))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(rows=_SLICE, cols=_SLICE, layout=st.sampled_from(["row", "col"]),
       keep=st.booleans())
def test_indexing_ranges_of_a_distributed_matrix(ctx, spark, rows, cols, layout, keep):
    """``A(r0:r1, c0:c1)`` with steps: small results come to the driver, large ones stay
    in blocks (``keep``: every result distributed)."""
    a = np.arange(9 * 9, dtype=float).reshape(9, 9) / 7
    (r0, r1, rs), (c0, c1, cs) = rows, cols
    r1, c1 = max(r1, r0 + 1), max(c1, c0 + 1)
    c = ctx if keep else BlockContext(spark.sparkContext, partitions=3, distribute_min=9)
    got = DistMatrix.from_numpy(c, a, layout)[r0:r1:rs, c0:c1:cs]
    assert isinstance(got, DistMatrix) == (not c.small(got.shape))
    np.testing.assert_array_equal(np.asarray(got), a[r0:r1:rs, c0:c1:cs])


# ------------------------------------------------------------------ programs
SUMS = """function [C, D] = sums(A, B, Y, W)
  %#linview dynamic A
  Z = [A, B];
  C = Z * Y;
  D = Z(:, 1:columns(A)+columns(B)-rows(A))' * W;
end
"""


@pytest.fixture(scope="module")
def sums():
    """Compiled without data: sizes like ``cols(A)+cols(B)-rows(A)`` print as ``rt.Size``."""
    prog = linview.compile(SUMS, name="sums", backend="spark")
    assert "rt.Size('cols_A + cols_B - rows_W'" in prog.source
    return prog, linview.compile(SUMS, name="sums")


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.function_scoped_fixture])
@given(n=st.integers(2, 4), p=st.integers(2, 5), q=st.integers(2, 5))
def test_block_sizes_that_are_sums_of_sizes(spark, sums, n, p, q):
    """The Spark module loads and updates to NumPy's values whatever the sizes (an empty
    range ``1:0`` when ``cols(A)+cols(B) = rows(A)`` selects no column, as in Octave)."""
    rng = np.random.default_rng(n * 100 + p * 10 + q)
    inputs = {"A": rng.standard_normal((n, p)), "B": rng.standard_normal((n, q)),
              "Y": rng.standard_normal((p + q, 2)), "W": rng.standard_normal((n, 3))}
    spark_prog, numpy_prog = sums
    want = numpy_prog.load(**inputs)
    got = spark_prog.load(spark=spark, distribute_min=2, partitions=2, **inputs)
    u, v = rng.standard_normal((n, 1)), rng.standard_normal((p, 1))
    for views in (want, got):
        views.update("A", u, v)
    for out in ("C", "D"):
        assert got[out].shape == want[out].shape == ((n, 2) if out == "C" else (p + q - n, 3))
        np.testing.assert_allclose(got[out], want[out], rtol=1e-10, atol=1e-12)


def test_a_driver_op_above_the_limit_says_where_with_a_caret(spark):
    src = ("function R = f(X)\n  %#linview dynamic X\n"
           "  R = chol(X' * X + eye(columns(X)));\nend\n")
    prog = linview.compile(src, name="f", filename="f.m", backend="spark")
    X = np.random.default_rng(0).standard_normal((20, 6))
    with pytest.raises(BackendError) as e:
        prog.load(X=X, spark=spark, distribute_min=2, driver_max_elements=30)
    text = str(e.value)
    assert text.startswith("f.m:3:7: chol() in R runs on the Spark driver"), text
    assert "\n      R = chol(X' * X + eye(columns(X)));\n          ^\n" in text
    assert "index" not in text


def test_indexing_as_written_never_an_internal_name(spark):
    """``P(1:20, 1:20)`` runs distributed (no refusal); the explain text and the module
    say ``P(1:20, 1:20)``, never 'index'."""
    src = ("function S = f(P)\n  %#linview dynamic P\n  S = P(1:20, 1:20) * P(1:20, 1:20);\n"
           "end\n")
    P = np.random.default_rng(1).standard_normal((30, 30)) / 30
    prog = linview.compile(src, name="f", backend="spark", shapes=(("P", 30, 30),))
    views = prog.load(P=P, spark=spark, distribute_min=2, partitions=3)
    views.update("P", np.ones((30, 1)), np.linspace(0, 1, 30).reshape(-1, 1))
    P2 = P + np.ones((30, 1)) @ np.linspace(0, 1, 30).reshape(1, -1)
    np.testing.assert_allclose(views["S"], P2[:20, :20] @ P2[:20, :20], rtol=1e-12)
    assert "P(1:20, 1:20)" in prog.source


def test_the_readme_language_table_says_spark_on_every_row():
    """Every construct of the README's language table compiles and runs on Spark (its
    last column: ✓, with where it runs when that is the driver)."""
    lines = (ROOT / "README.md").read_text().splitlines()
    start = lines.index("| construct | maintained / re-evaluated | Spark |")
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    assert len(rows) > 20
    cells = [re.split(r"(?<!\\)\|", row.strip().strip("|"))[-1].strip() for row in rows]
    bad = [row for row, cell in zip(rows, cells, strict=True) if not cell.startswith("✓")]
    assert not bad, "rows of the language table that Spark does not run:\n" + "\n".join(bad)
