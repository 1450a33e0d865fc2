"""Solve views and sparse inputs on the Spark backend (docs/spark.md): each solve view, its
solver and its operands live on the driver, every other view in blocks.

Differential: the examples with solve pragmas and the examples given ``scipy.sparse``
inputs (no pragma) against their own references and the NumPy module; a program mixing a
solve view, a Woodbury inverse and distributed views under random updates of both inputs
against the NumPy module (Hypothesis); edge records through ``update_edges`` and through
``linview run --backend spark`` against networkx; a Krylov solve whose dense A is a
distributed view; save and restore.  One ``local[2]`` session serves every test; sizes are
small (n about 20 to 40) and ``distribute_min=2`` puts every other matrix in blocks.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sps
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import linview
from linview.backends.spark.solve_module import SparkSolveModule
from linview.errors import BackendError
from linview.solve.stochastic import StochasticMatrix

try:  # tests/ may or may not be a package
    from tests.test_examples import BY_NAME, NAMES, rel_err, scenario
    from tests.test_solve_module import MIXED, mixed_inputs, reference
except ImportError:  # pragma: no cover - depends on how pytest set sys.path
    from test_examples import BY_NAME, NAMES, rel_err, scenario
    from test_solve_module import MIXED, mixed_inputs, reference

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

#: the examples with ``%#linview solve/tolerance/stochastic/sparse`` pragmas
SOLVE_EXAMPLES = [n for n, e in BY_NAME.items() if re.search(
    r"%#linview\s+(solve|tolerance|stochastic|sparse)\b", e.path.read_text())]
OPTIONS = {"distribute_min": 2, "partitions": 2}


_COMPILED: dict = {}


def compiled(name: str, backend: str) -> linview.CompiledProgram:
    if (name, backend) not in _COMPILED:
        _COMPILED[name, backend] = linview.compile_file(BY_NAME[name].path, backend=backend)
    return _COMPILED[name, backend]


def dense(x) -> np.ndarray:
    return x.toarray() if sps.issparse(x) else np.asarray(x)


# ------------------------------------------------------------------ examples
def test_the_examples_have_solve_views():
    assert {"ols_stable", "pagerank_solve", "pagerank_personalised"} <= set(SOLVE_EXAMPLES)


@pytest.mark.parametrize("name", SOLVE_EXAMPLES)
def test_solve_example_matches_numpy_and_its_reference(name, spark):
    """The example's updates give NumPy's values and the example's own reference."""
    ex, sc = BY_NAME[name], scenario(name)
    numpy_views = compiled(name, "numpy").load(**sc.inputs)
    views = compiled(name, "spark").load(spark=spark, **sc.inputs, **OPTIONS)
    assert isinstance(views, SparkSolveModule)
    assert set(views.solvers) == set(numpy_views.solvers)
    assert all(isinstance(x, np.ndarray) for x in (views._store[n] for n in views.solvers))
    for (vname, U, V), inputs in zip(sc.updates, sc.after, strict=True):
        numpy_views.update(vname, U, V)
        views.update(vname, U, V)
        for out, want in ex.reference(inputs).items():
            assert rel_err(views[out], numpy_views[out]) < 1e-8, out
            assert rel_err(np.reshape(views[out], np.shape(want)), want) < 1e-6, out
    assert views.verify() < 1e-6
    views.release()


def _as_sparse(inputs: dict) -> dict:
    return {k: sps.csr_matrix(v) if isinstance(v, np.ndarray) and v.ndim == 2
            and v.shape[1] > 1 else v for k, v in inputs.items()}


@pytest.mark.parametrize("name", NAMES)
def test_example_with_scipy_sparse_inputs_and_no_pragma(name, spark):
    """A ``scipy.sparse`` input keeps the program's matrix sparse on Spark as on NumPy
    (a solve view where the program solves with it): the example's reference."""
    ex, sc = BY_NAME[name], scenario(name)
    given_ = _as_sparse(sc.inputs)
    if not any(sps.issparse(v) for v in given_.values()):
        pytest.skip(f"{name} has no matrix input")
    views = linview.compile_file(ex.path, backend="spark").load(spark=spark, **given_,
                                                                **OPTIONS)
    assert isinstance(views, SparkSolveModule)
    assert any(sps.issparse(views._store[n]) or isinstance(views._store[n], StochasticMatrix)
               for n in views.INPUTS)

    def check(inputs):
        for out, want in ex.reference(inputs).items():
            assert rel_err(dense(views[out]).reshape(np.shape(want)), want) < 1e-6, out

    check(sc.inputs)
    for (inp, U, V), inputs in zip(sc.updates, sc.after, strict=True):
        views.update(inp, U, V)
        check(inputs)
    views.release()


# ------------------------------------------------------------------ a mixed program
def _step(views, what: str, s: int, n: int, m: int, k: int) -> None:
    r = np.random.default_rng(s)
    if what == "X":
        views.update("X", r.standard_normal(m) * 0.2, r.standard_normal(k))
        return
    j = int(r.integers(n))
    new = np.zeros(n)
    new[r.choice(n, size=int(r.integers(0, 4)), replace=False)] = 0.3
    views.update("M", new - dense(views["M"][:, [j]]).ravel(), np.eye(n)[:, j])


@settings(max_examples=4, deadline=None, phases=(Phase.explicit, Phase.reuse, Phase.generate),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**16), steps=st.lists(
    st.tuples(st.sampled_from(["X", "M"]), st.integers(0, 10_000)), min_size=1, max_size=4))
def test_mixed_program_matches_numpy_under_updates_of_both_inputs(spark, seed, steps):
    """Solve views on the driver, X and the Woodbury inverse's views in blocks."""
    rng = np.random.default_rng(seed)
    inputs = mixed_inputs(rng)
    want = linview.compile(MIXED, name="mixed").load(**inputs)
    got = linview.compile(MIXED, name="mixed", backend="spark").load(spark=spark, **inputs,
                                                                     **OPTIONS)
    assert "X" in got.distributed() and got.solver("r").method == "push"
    n, m, k = inputs["P"].shape[0], *inputs["X"].shape
    for what, s in steps:
        for views in (want, got):
            _step(views, what, s, n, m, k)
        for name in ("r", "beta", "q", "share"):
            np.testing.assert_allclose(got[name], want[name], atol=1e-9, rtol=1e-8)
    assert got.verify() < 1e-6
    got.release()


KRYLOV = """function x = f(A, b)
  %#linview dynamic A b
  %#linview solve krylov
  %#linview tolerance 1e-12
  x = (A + A' + 4 * rows(A) * eye(rows(A))) \\ b;
end
"""


def test_krylov_solve_of_a_distributed_matrix_is_collected_to_the_driver(spark):
    rng = np.random.default_rng(5)
    n = 24
    A, b = rng.standard_normal((n, n)), rng.standard_normal((n, 2))
    views = linview.compile(KRYLOV, name="f", backend="spark").load(A=A, b=b, spark=spark,
                                                                    **OPTIONS)
    assert "A" in views.distributed() and views.solver("x").method == "krylov"
    for _ in range(3):
        u, v = rng.standard_normal((n, 1)), rng.standard_normal((n, 1))
        views.update("A", u, v)
        A = A + u @ v.T
        views.update("b", rng.standard_normal((n, 1)), np.ones((2, 1)))
        b = np.asarray(views["b"])
        want = np.linalg.solve(A + A.T + 4 * n * np.eye(n), b)
        assert rel_err(views["x"], want) < 1e-9
    views.release()


# ------------------------------------------------------------------ edges, limits, state
def _graph(rng, n: int):
    src, dst = rng.integers(2, n, 3 * n), rng.integers(0, n, 3 * n)
    pairs = np.unique(np.stack([src, dst]), axis=1)
    G = nx.DiGraph()
    G.add_nodes_from(range(n))
    G.add_edges_from(zip(pairs[0].tolist(), pairs[1].tolist(), strict=True))
    return StochasticMatrix(n, pairs[0], pairs[1]), G


def _pagerank(G, n: int) -> np.ndarray:
    pr = nx.pagerank(G, alpha=0.85, tol=1e-14, max_iter=10_000)
    return np.array([pr[i] for i in range(n)]).reshape(-1, 1)


def _toggle(rng, G, n: int):
    """A random link of ``G`` removed if present, else added: ``(op, src, dst)``, 0-based."""
    a, c = (int(x) for x in rng.integers(0, n, 2))
    op = "delete" if G.has_edge(a, c) else "insert"
    G.remove_edge(a, c) if op == "delete" else G.add_edge(a, c)
    return op, a, c


def test_edge_batches_on_spark_match_networkx_and_numpy(spark):
    rng = np.random.default_rng(2)
    n = 30
    M, G = _graph(rng, n)
    S = np.full((n, 2), 1.0 / n)
    inputs = {"M": M.tocsc(), "S": S, "d": 0.85}
    want = compiled("pagerank_personalised", "numpy").load(**inputs)
    got = compiled("pagerank_personalised", "spark").load(spark=spark, **inputs, **OPTIONS)
    assert "S" in got.distributed()
    for _ in range(4):
        recs = [_toggle(rng, G, n) for _ in range(3)]
        for views in (want, got):
            views.update_edges("M", recs)
        np.testing.assert_allclose(got["R"], want["R"], atol=1e-12)
        np.testing.assert_allclose(got["R"][:, [0]], _pagerank(G, n), atol=1e-8)
    got.release()


def test_linview_run_with_edge_records_on_spark(tmp_path):
    """``linview run --backend spark`` on a directory of edge records: networkx's ranks."""
    rng = np.random.default_rng(3)
    n = 30
    M, G = _graph(rng, n)
    sps.save_npz(tmp_path / "M.npz", M.tocsc())
    (tmp_path / "upd").mkdir()
    for f in range(2):
        lines = [{"input": "M", "edge": [a + 1, c + 1], "op": op}
                 for op, a, c in (_toggle(rng, G, n) for _ in range(4))]
        path = tmp_path / "upd" / f"e{f}.jsonl"
        path.write_text("".join(json.dumps(x) + "\n" for x in lines))
        os.utime(path, (1e9 + f, 1e9 + f))
    cmd = [sys.executable, "-m", "linview.app.cli", "run", "examples/pagerank_solve.m",
           "--backend", "spark", "--master", "local[2]", "--input", f"M={tmp_path / 'M.npz'}",
           "--input", "d=0.85", "--updates", str(tmp_path / "upd"), "--out",
           str(tmp_path / "out"), "--once"]
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["applied"] == 8
    r = np.load(tmp_path / "out" / "latest.npz")["r"]
    np.testing.assert_allclose(r, _pagerank(G, n), atol=1e-9)


def test_a_solve_operand_above_the_driver_limit_is_refused_at_the_backslash(spark):
    """Before anything is collected: file:line:col, the caret under the ``\\``."""
    rng = np.random.default_rng(4)
    n = 30
    M, _ = _graph(rng, n)
    prog = linview.compile_file("examples/pagerank_personalised.m", backend="spark")
    with pytest.raises(BackendError) as e:
        prog.load(M=M, S=rng.random((n, 4)), d=0.85, spark=spark, driver_max_elements=100,
                  **OPTIONS)
    text = str(e.value)
    assert text.startswith("pagerank_personalised.m:10:24: the solve '\\' in R runs on the "
                           "Spark driver: its right-hand side B (30×4, 120 entries) is above"), text
    assert "\n      R = (eye(n) - d * M) \\ ((1 - d) * S);\n" in text
    assert text.split("\n")[2].index("^") == text.split("\n")[1].index("\\")
    with pytest.raises(BackendError, match=r"its matrix M \(30×30, .* non-zeros\)"):
        prog.load(M=M, S=rng.random((n, 1)), d=0.85, spark=spark, driver_max_elements=60,
                  **OPTIONS)


def test_save_and_restore_on_spark(spark, tmp_path):
    rng = np.random.default_rng(9)
    inputs = mixed_inputs(rng)
    prog = linview.compile(MIXED, name="mixed", backend="spark")
    views = prog.load(spark=spark, **inputs, **OPTIONS)
    _step(views, "X", 1, 25, 18, 3)
    views.save(tmp_path / "s.npz")
    back = linview.restore(tmp_path / "s.npz", program=prog, spark=spark, **OPTIONS)
    assert isinstance(back, SparkSolveModule) and "X" in back.distributed()
    for name in ("r", "beta", "q", "share"):
        np.testing.assert_allclose(back[name], views[name], atol=1e-9, rtol=1e-9)
    for v in (views, back):
        _step(v, "M", 2, 25, 18, 3)
    for name in ("r", "beta", "q", "share"):
        np.testing.assert_allclose(back[name], views[name], atol=1e-9, rtol=1e-9)
    back.release()


def test_an_update_that_fails_after_its_solve_views_changed_is_refused_until_refresh(
        spark, monkeypatch):
    """Spark rolls back the distributed views, not the solvers on the driver: reads and
    updates are refused (a retry would apply the update twice there); refresh() mends."""
    from linview.backends.spark import context
    from linview.errors import StateError

    rng = np.random.default_rng(11)
    inputs = mixed_inputs(rng)
    views = linview.compile(MIXED, name="mixed", backend="spark").load(spark=spark, **inputs,
                                                                       **OPTIONS)
    real = context.Transaction.commit

    def lost(txn):
        real(txn)
        raise RuntimeError("an executor was lost")

    monkeypatch.setattr(context.Transaction, "commit", lost)
    with pytest.raises(Exception, match="executor was lost"):
        _step(views, "M", 3, 25, 18, 3)
    monkeypatch.setattr(context.Transaction, "commit", real)
    with pytest.raises(StateError, match="failed after its solve views changed"):
        views["r"]
    with pytest.raises(StateError):
        _step(views, "X", 4, 25, 18, 3)
    views.refresh()  # warm-started solvers: within their tolerance of direct solves
    want = reference(views, linview.compile(MIXED, name="mixed"))
    for name in ("r", "beta", "q", "share"):
        np.testing.assert_allclose(views[name], want[name], atol=1e-6, rtol=1e-7)
    views.release()


STABLE_OLS = "function beta = ols(X, Y)\n  %#linview dynamic X Y\n" \
             "  beta = (X' * X) \\ (X' * Y);\nend\n"


def test_stable_least_squares_resumes_bit_for_bit_on_spark(spark, tmp_path):
    """The stable form's solver runs on the driver (NumPy's ``CholeskySolver``) and saves
    its whole state (the factor as updated, not formed again): a restored Spark module
    continues to the same bits as the one that never stopped, and as NumPy's."""
    rng = np.random.default_rng(4)
    X = rng.standard_normal((30, 5))
    X[:, 1] = X[:, 0] + 1e-6 * X[:, 1]  # κ about 1e6
    inputs = {"X": X, "Y": rng.standard_normal((30, 1))}
    changes = []
    for i in range(8):
        u = np.zeros(30)
        u[int(rng.integers(30))] = 1.0
        changes.append(("X", u, rng.standard_normal(5)) if i % 2 else
                       ("Y", u, rng.standard_normal(1)))
    prog = linview.compile(STABLE_OLS, name="ols", backend="spark", least_squares="qr")
    ref = linview.compile(STABLE_OLS, name="ols", least_squares="qr").load(**inputs)
    whole = prog.load(spark=spark, **inputs, **OPTIONS)
    part = prog.load(spark=spark, **inputs, **OPTIONS)
    assert part.solver("beta").method == "cholesky"
    for i, (name, U, V) in enumerate(changes):
        if i in (3, 6):
            part.save(tmp_path / "s.npz")
            part.release()
            part = linview.restore(tmp_path / "s.npz", program=prog, spark=spark, **OPTIONS)
        for views in (ref, whole, part):
            views.update(name, U, V)
        assert np.array_equal(part["beta"], whole["beta"]), i
        assert np.array_equal(whole["beta"], ref["beta"]), i
    whole.release()
    part.release()
