"""Solve views (``A \\ B`` kept with a residual): push and Krylov against direct solves,
edge streams against networkx, the certified bound under Hypothesis, bad input, Octave."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sps
import scipy.sparse.linalg as spla
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import linview
from linview.errors import InputError, ParseError, UpdateError
from linview.solve.stochastic import StochasticMatrix
from linview.updates import edge_records

try:
    from tests.octave_runner import octave_available, run_octave
except ImportError:  # pragma: no cover - run from inside tests/
    from octave_runner import octave_available, run_octave

PAGERANK = "examples/pagerank_solve.m"
PERSONAL = "examples/pagerank_personalised.m"
D = 0.85


def random_graph(rng, n: int, m: int, dangling: int = 2):
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    src[src < dangling] = dangling  # nodes 0..dangling-1 have no out-links
    pairs = np.unique(np.stack([src, dst]), axis=1)  # a simple graph, as networkx's DiGraph
    return StochasticMatrix(n, pairs[0], pairs[1])


def exact_pagerank(M: StochasticMatrix, S=None, d=D):
    n = M.n
    A = sps.identity(n, format="csc") - d * M.tocsc()
    B = np.full((n, 1), (1 - d) / n) if S is None else (1 - d) * S
    return spla.spsolve(A, B).reshape(B.shape)


def nx_pagerank(M: StochasticMatrix):
    G = nx.DiGraph()
    G.add_nodes_from(range(M.n))
    for j in range(M.n):
        rows, _, _ = M.column(j)
        G.add_edges_from((j, int(i)) for i in rows)
    pr = nx.pagerank(G, alpha=D, tol=1e-14, max_iter=10_000)
    return np.array([pr[i] for i in range(M.n)]).reshape(-1, 1)


def random_edge_record(rng, M: StochasticMatrix):
    j = int(rng.integers(M.n))
    rows, _, _ = M.column(j)
    if rows.size and (rng.random() < 0.5 or rows.size == M.n):
        return ("delete", j, int(rows[rng.integers(rows.size)]))
    free = np.setdiff1d(np.arange(M.n), rows)
    return ("insert", j, int(free[rng.integers(free.size)]))


# ------------------------------------------------------------------ push / PageRank
def test_pagerank_solve_matches_networkx_through_edge_changes():
    rng = np.random.default_rng(1)
    M = random_graph(rng, 40, 120, dangling=3)
    views = linview.compile_file(PAGERANK).load(M=M, d=D)
    assert views.solver("r").method == "push"
    np.testing.assert_allclose(views["r"], nx_pagerank(M), atol=1e-9)
    # the first out-link of a dangling node, then the deletion of its last one
    views.update_edges("M", [("insert", 0, 5)])
    assert not M.dangling[0]
    np.testing.assert_allclose(views["r"], nx_pagerank(M), atol=1e-9)
    views.update_edges("M", [("delete", 0, 5)])
    assert M.dangling[0]
    np.testing.assert_allclose(views["r"], nx_pagerank(M), atol=1e-9)
    for _ in range(20):  # micro-batches of 3 random edge changes
        batch = []
        for _ in range(3):
            rec = random_edge_record(rng, M)
            if all(rec[1:] != b[1:] for b in batch):
                batch.append(rec)
        views.update_edges("M", batch)
        np.testing.assert_allclose(views["r"], nx_pagerank(M), atol=1e-9)
        assert abs(views["r"].sum() - 1) <= views.error_bound("r")
    assert views.error_bound("r") <= 1e-10


def test_sparse_factor_updates_match_spsolve():
    """``views.update`` with scipy.sparse factors of a column change (p = 1 and p = 3)."""
    rng = np.random.default_rng(2)
    n = 60
    M = random_graph(rng, n, 240)
    S = rng.random((n, 3))
    S /= S.sum(axis=0)
    one = linview.compile_file(PAGERANK).load(M=M, d=D)
    many = linview.compile_file(PERSONAL).load(M=StochasticMatrix.from_matrix(M.tocsc()), S=S,
                                               d=D)
    for step in range(10):
        j = int(rng.integers(n))
        old = M.toarray()[:, j]
        new = np.zeros(n)
        targets = rng.choice(n, size=1 + step % 3, replace=False)
        new[targets] = 1.0 / targets.size
        U = sps.csc_matrix((new - old).reshape(-1, 1))
        V = sps.csc_matrix(([1.0], ([j], [0])), shape=(n, 1))
        one.update("M", U, V)
        many.update("M", U, V)
        if step % 2:  # a change of the seeds too: S += u vᵀ, each column still sums to 1
            u = np.zeros(n)
            u[[step, step + 1]] = [0.01, -0.01]
            many.update("S", sps.csc_matrix(u.reshape(-1, 1)), np.ones(3))
            S = S + np.outer(u, np.ones(3))
        np.testing.assert_allclose(one["r"], exact_pagerank(one["M"]), atol=1e-9)
        np.testing.assert_allclose(many["R"], exact_pagerank(many["M"], S), atol=1e-9)
    assert one.verify() < 1e-7 and many.verify() < 1e-7


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(3, 30), st.integers(0, 2**31 - 1), st.integers(1, 25),
       st.sampled_from([1e-4, 1e-7, 1e-10]))
def test_certified_bound_never_violated(n, seed, steps, tol):
    rng = np.random.default_rng(seed)
    M = random_graph(rng, n, int(rng.integers(0, 3 * n + 1)), dangling=int(rng.integers(0, n)))
    views = linview.compile_file(PAGERANK).load(M=M, d=D, tolerance=tol)
    for _ in range(steps):
        batch = [random_edge_record(rng, M)]
        views.update_edges("M", batch)
        err = np.abs(views["r"] - exact_pagerank(M)).sum()
        bound = views.error_bound("r")
        assert bound <= tol
        assert err <= bound * (1 + 1e-6) + 1e-14


# ------------------------------------------------------------------ krylov
SOLVE_DENSE = """function X = lin(A, B)
  %#linview dims A(n,n) B(n,p)
  %#linview solve krylov
  %#linview tolerance 1e-10
  X = A \\ B;
end
"""

SOLVE_SPARSE = """function X = lin(A, B)
  %#linview dims A(n,n) B(n,p)
  %#linview sparse A
  X = A \\ B;
end
"""


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("p", [1, 3])
def test_krylov_after_low_rank_updates(sparse, p):
    rng = np.random.default_rng(10 * p + sparse)
    n = 40
    A = sps.random(n, n, density=0.1, random_state=rng, format="csr") + 4 * sps.identity(n)
    A = A if sparse else A.toarray()
    B = rng.standard_normal((n, p))
    prog = linview.compile(SOLVE_SPARSE if sparse else SOLVE_DENSE, name="lin")
    views = prog.load(A=A, B=B, tolerance=1e-10)
    assert views.solver("X").method == "krylov"
    Ad = A.toarray() if sparse else A.copy()
    for step in range(8):
        k = 1 + step % 2
        if step % 3 == 2:
            U, V = rng.standard_normal((n, k)), rng.standard_normal((p, k))
            views.update("B", U, V)
            B = B + U @ V.T
        else:
            U = 0.3 * rng.standard_normal((n, k))
            V = np.zeros((n, k))
            V[rng.integers(n, size=k), np.arange(k)] = 1.0
            if sparse:
                U, V = sps.csc_matrix(U), sps.csc_matrix(V)
            views.update("A", U, V)
            Ad = Ad + (U @ V.T if not sparse else (U @ V.T).toarray())
        want = np.linalg.solve(Ad, B)
        got = views["X"]
        assert np.linalg.norm(got - want, axis=0).max() <= views.error_bound("X") * 1.001
        assert views.error_bound("X") <= 1e-10
    if sparse:
        np.testing.assert_allclose(got, spla.spsolve(sps.csc_matrix(Ad), B).reshape(n, p),
                                   atol=1e-9)


def test_solve_view_without_pragma_stays_an_inverse():
    prog = linview.compile("function X = f(A, B)\n  X = A \\ B;\nend\n", name="f")
    assert "inv" in prog.explain() and "solve views" not in prog.explain()


# ------------------------------------------------------------------ bad input
def test_bad_edge_records_change_nothing():
    rng = np.random.default_rng(3)
    M = random_graph(rng, 20, 60)
    views = linview.compile_file(PAGERANK).load(M=M, d=D)
    before = np.array(views["r"])
    j = 5
    rows, _, _ = M.column(j)
    present, absent = int(rows[0]), int(np.setdiff1d(np.arange(20), rows)[0])
    cases = [
        ([("insert", j, absent), ("insert", 3, 20)], "record 1: edge 3 -> 20 is out of range"),
        ([("insert", j, absent), ("delete", j, absent), ("delete", j, absent)],
         f"record 2: edge 5 -> {absent} is not in M"),
        ([("insert", j, present)], f"record 0: edge 5 -> {present} is already in M"),
        ([("insert", j, absent, float("nan"))], "record 0: weight nan"),
        ([("move", j, absent)], "record 0: unknown op"),
    ]
    for records, message in cases:
        with pytest.raises(UpdateError, match=message):
            views.update_edges("M", records)
        np.testing.assert_array_equal(views["r"], before)
        assert M.column(j)[0].tolist() == rows.tolist()
    with pytest.raises(UpdateError, match="declared stochastic"):  # a column summing to 2
        views.update("M", np.eye(20)[:, [1]], np.eye(20)[:, [j]])
    with pytest.raises(UpdateError, match="NaN"):
        views.update("M", np.full(20, np.nan), np.eye(20)[:, j])
    np.testing.assert_array_equal(views["r"], before)


def test_non_stochastic_input_is_refused():
    M = np.ones((4, 4)) / 4
    M[0, 0] = 0.5
    with pytest.raises(InputError, match="column 0 of the stochastic matrix sums to 1.25"):
        linview.compile_file(PAGERANK).load(M=M, d=D)


@pytest.mark.parametrize("line, message", [
    ("%#linview solve magic", "unknown solve method 'magic'"),
    ("%#linview tolerance -1", "a positive number"),
    ("%#linview tolerance abc", "needs a positive number, found .abc."),
    ("%#linview tolerance 1e-8 1e-9", "exactly one value"),
])
def test_solve_pragma_errors(line, message):
    with pytest.raises(ParseError, match=message):
        linview.compile(f"function X = f(A, B)\n  {line}\n  X = A \\ B;\nend\n", name="f")


def test_edge_records_helper_batches_and_checks():
    recs = edge_records([{"edge": [1, 2], "op": "insert"}, {"edge": [2, 1], "op": "delete"}],
                        base=1)
    assert recs == [("insert", 0, 1), ("delete", 1, 0)]
    with pytest.raises(UpdateError, match="record 0"):
        edge_records([{"edge": [0, 1], "op": "insert"}], base=1)


# ------------------------------------------------------------------ Octave
OCTAVE_WRAPPER = """function r = pr_triplets(src, dst, n, d)
  %% the column-stochastic M built in Octave from the same (1-based) edge triplets
  addpath('{examples}');
  n = n(1);
  A = sparse(dst, src, ones(size(src)), n, n);
  outdeg = full(sum(A, 1));
  M = A * spdiags((1 ./ max(outdeg, 1))', 0, n, n);
  M(:, outdeg == 0) = 1 / n;
  r = pagerank_solve(M, d);
end
"""


@pytest.mark.octave
def test_sparse_pagerank_agrees_with_octave(tmp_path):
    if not octave_available():
        pytest.skip("octave-cli (GNU Octave) is not installed")
    from pathlib import Path

    rng = np.random.default_rng(4)
    n = 30
    M = random_graph(rng, n, 90, dangling=3)
    views = linview.compile_file(PAGERANK).load(M=M, d=D)
    views.update_edges("M", [("insert", 0, 7), ("insert", 9, 1)])
    src, dst = [], []
    for j in range(n):
        rows, _, _ = M.column(j)
        src += [j + 1] * rows.size
        dst += (rows + 1).tolist()
    wrapper = tmp_path / "pr_triplets.m"
    examples = Path(PAGERANK).resolve().parent
    wrapper.write_text(OCTAVE_WRAPPER.format(examples=str(examples).replace("'", "''")))
    out = run_octave(wrapper, {"src": np.array(src, float), "dst": np.array(dst, float),
                               "n": float(n), "d": D}, ["r"])
    np.testing.assert_allclose(views["r"], out["r"], atol=1e-9)


# ------------------------------------------------------------------ edge record batches
def test_edge_record_batch_is_one_residual_update():
    """``linview.updates.apply_edge_batch``: what a stream's micro-batch of edge records
    does (1-based ids here), and the stream position of a bad record."""
    from linview.updates import apply_edge_batch

    rng = np.random.default_rng(5)
    M = random_graph(rng, 12, 30)
    views = linview.compile_file(PAGERANK).load(M=M.toarray(), d=D)
    batch = [{"input": "M", "edge": [1, 3], "op": "insert", "base": 1},
             {"input": "M", "edge": [1, 2], "op": "insert", "base": 1},
             {"input": "M", "edge": [1, 3], "op": "delete", "base": 1}]
    apply_edge_batch(views, 40, batch)
    assert views.updates == 1
    M.change_edges([("insert", 0, 1)])
    np.testing.assert_allclose(views["r"], exact_pagerank(M), atol=1e-9)
    before = np.array(views["r"])
    bad = [{"input": "M", "edge": [2, 5], "op": "insert"},
           {"input": "M", "edge": [0, 99], "op": "insert"}]
    with pytest.raises(UpdateError, match="update record 41: edge 0 -> 99 is out of range"):
        apply_edge_batch(views, 40, bad)
    np.testing.assert_array_equal(views["r"], before)


# ------------------------------------------------------------------ cholesky (stable mode)
def exact_lstsq(X, Y, digits: int = 50) -> np.ndarray:
    """The least-squares solution in 50-digit arithmetic (mpmath, a sympy dependency)."""
    import mpmath

    with mpmath.workdps(digits):
        Xm = mpmath.matrix(X.tolist())
        G = Xm.T * Xm
        cols = [mpmath.lu_solve(G, Xm.T * mpmath.matrix(Y[:, [c]].tolist()))
                for c in range(Y.shape[1])]
        return np.array([[float(c[i]) for c in cols] for i in range(X.shape[1])])


def test_cholesky_mode_near_singular_regression():
    """Column 1 of X driven towards column 0 (ε = 1e-9, 1e-5, 1e-1), then separated again
    and replaced by a fresh column: the solution is as accurate as lstsq's (against a
    50-digit solve), within 1e-8 where lstsq is, and the residual norm is the least one
    within 1e-8 (or within 4x of lstsq's excess where lstsq misses 1e-8 too)."""
    rng = np.random.default_rng(6)
    m, n = 40, 10
    X, Y = rng.standard_normal((m, n)), rng.standard_normal((m, 2))
    views = linview.compile_file("examples/ols_stable.m").load(X=X, Y=Y)
    assert views.solver("beta").method == "cholesky"
    w = rng.standard_normal(m)
    w /= np.linalg.norm(w)
    e1 = np.eye(n)[:, 1]
    steps = [X[:, 0] + eps * w for eps in (1e-9, 1e-5, 1e-1)]
    steps += [X[:, 0] + 0.5 * rng.standard_normal(m), rng.standard_normal(m)]
    for new in steps:
        views.update("X", new - X[:, 1], e1)
        X[:, 1] = new
        exact = exact_lstsq(X, Y)
        lstsq = np.linalg.lstsq(X, Y, rcond=None)[0]
        got = views["beta"]
        err = np.linalg.norm(got - exact) / np.linalg.norm(exact)
        err_lstsq = np.linalg.norm(lstsq - exact) / np.linalg.norm(exact)
        assert err <= max(1e-8, 4 * err_lstsq)
        res, res_min = np.linalg.norm(Y - X @ got), np.linalg.norm(Y - X @ exact)
        res_lstsq = np.linalg.norm(Y - X @ lstsq)
        # least within 1e-8, or within 4x of LAPACK's lstsq where that is worse (cond 1e10)
        assert res - res_min <= max(1e-8 * res_min, 4 * (res_lstsq - res_min))
        if np.linalg.cond(X) < 1e6:
            assert np.linalg.norm(got - lstsq) <= 1e-8 * np.linalg.norm(lstsq)
    views.update("Y", rng.standard_normal(m), np.ones(2))
    np.testing.assert_allclose(views["beta"], np.linalg.lstsq(X, views["Y"], rcond=None)[0],
                               atol=1e-10)


def test_cholesky_mode_needs_normal_equations():
    src = "function x = f(A, b)\n  %#linview solve cholesky\n  x = A \\ b;\nend\n"
    with pytest.raises(InputError, match="cholesky mode needs the normal equations"):
        linview.compile(src, name="f").load(A=np.eye(3), b=np.ones(3))


def test_save_and_restore_warm_start(tmp_path):
    rng = np.random.default_rng(8)
    n = 30
    M = random_graph(rng, n, 90)
    S = rng.random((n, 2))
    S /= S.sum(axis=0)
    prog = linview.compile_file(PERSONAL)
    views = prog.load(M=M, S=S, d=D, tolerance=1e-9)
    views.update_edges("M", [("insert", 0, 4), random_edge_record(rng, M)])
    views.save(tmp_path / "state.npz", extra={"offset": 7})
    again = linview.restore(tmp_path / "state.npz", program=prog)
    assert again.saved_meta["extra"] == {"offset": 7} and again.updates == 1
    np.testing.assert_allclose(again["R"], views["R"], atol=1e-9)
    assert again.error_bound("R") <= 1e-9
    rec = random_edge_record(rng, M)
    for v in (views, again):
        v.update_edges("M", [rec])
    np.testing.assert_allclose(again["R"], exact_pagerank(M, S), atol=1e-8)
    plain = linview.restore(tmp_path / "state.npz")  # the program compiled from the file
    assert plain.solver("R").method == "push"
