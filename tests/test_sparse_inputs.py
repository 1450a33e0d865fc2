"""Sparse follows the data: an input given to ``load()`` as ``scipy.sparse`` stays sparse
with no pragma, where GNU Octave keeps it sparse (checked against octave-cli's
``issparse`` on the same triplets), ``A \\ b`` with a sparse A is a solve view (against
networkx ``pagerank`` and ``scipy.sparse.linalg.spsolve``), dense inputs keep the
generated module, and nothing of n² is allocated for a sparse input."""

from __future__ import annotations

import tracemalloc

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sps
import scipy.sparse.linalg as spla

import linview
from linview.backends.numpy.runtime import TriggerModule
from linview.backends.numpy.solve_module import SolveModule

try:
    from tests.octave_runner import octave_available, run_octave
except ImportError:  # pragma: no cover - run from inside tests/
    from octave_runner import octave_available, run_octave

D = 0.85

#: the README's program, with no pragma about storage
README = """function r = pr(M, d)
  %#linview scalar d
  n = size(M, 1);
  r = (eye(n) - d * M) \\ ((1 - d) / n * ones(n, 1));
end
"""

OPS = """function [B, C, E, y, r, s] = sparse_ops(M, x, d)
  %#linview scalar d
  %#linview dynamic M x
  n = size(M, 1);
  B = M + M';
  C = 2 * M - M' * M;
  A = eye(n) - d * M;
  E = M .* M;
  y = M * x;
  r = A \\ x;
  s = sum(M' * x);
end
"""


def link_matrix(rng, n: int, m: int, dangling: bool = False):
    """A column-stochastic (with zero columns for dangling nodes: substochastic) M, as
    scipy.sparse CSR, and the edges it was built from."""
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    if not dangling:  # every node links somewhere
        src = np.concatenate([src, np.arange(n)])
        dst = np.concatenate([dst, (np.arange(n) + 1) % n])
    pairs = np.unique(np.stack([src, dst]), axis=1)
    src, dst = pairs
    deg = np.bincount(src, minlength=n)
    M = sps.csr_matrix((1.0 / deg[src], (dst, src)), shape=(n, n))
    return M, src, dst


def spsolve_pagerank(M, d=D):
    n = M.shape[0]
    return spla.spsolve(sps.identity(n, format="csc") - d * M.tocsc(),
                        np.full(n, (1 - d) / n)).reshape(-1, 1)


def test_readme_program_with_sparse_input_matches_networkx_and_spsolve():
    rng = np.random.default_rng(0)
    n = 60
    M, src, dst = link_matrix(rng, n, 200)
    prog = linview.compile(README, name="pr")
    views = prog.load(M=M, d=D)
    # M is non-negative with column sums 1: push, with its certified L1 bound
    assert isinstance(views, SolveModule) and views.solver("r").method == "push"
    assert sps.issparse(views["M"])
    G = nx.DiGraph()
    G.add_nodes_from(range(n))
    G.add_edges_from(zip(src.tolist(), dst.tolist(), strict=True))
    pr = nx.pagerank(G, alpha=D, tol=1e-14, max_iter=10_000)
    want = np.array([pr[i] for i in range(n)]).reshape(-1, 1)
    np.testing.assert_allclose(views["r"], want, atol=1e-8)
    np.testing.assert_allclose(views["r"], spsolve_pagerank(M), atol=1e-8)
    # the bound is tight here (a non-negative residual): allow the reference's rounding
    err = np.abs(views["r"] - spsolve_pagerank(M)).sum()
    assert err <= views.error_bound("r") * (1 + 1e-6) + 1e-14


def test_a_hub_whose_column_sum_rounds_above_one_is_still_pushed():
    """A node with many out-links: its column of k entries 1/k sums to 1 only within the
    rounding of k terms (1 + 1.03e-12 for a column of the 10⁶-node benchmark graph, whose
    largest hub has 199,837 out-links: that load went to Krylov).  Within ``2·k·eps`` it
    is pushed, and the bound still holds against spsolve; an excess beyond the rounding
    is refused."""
    from linview.solve.links import substochastic

    n, k = 3000, 2900
    src = np.concatenate([np.zeros(k, int), np.arange(1, n)])
    dst = np.concatenate([np.arange(1, k + 1), (np.arange(1, n) + 1) % n])
    deg = np.bincount(src, minlength=n)
    M = sps.csr_matrix((1.0 / deg[src], (dst, src)), shape=(n, n))
    col = M.indices == 0
    M.data[col] *= 1 + 1.6e-12  # the hub's sum: 1 + 1.6e-12, under 1e-12 + 2·k·eps
    assert np.asarray(M.sum(axis=0)).max() > 1 + 1e-12  # over the old, flat slack
    assert substochastic(M) and substochastic(M.tocsc()) and substochastic(M.tocoo())
    views = linview.compile(README, name="pr").load(M=M, d=D, tolerance=1e-9)
    assert views.solver("r").method == "push"
    err = np.abs(views["r"] - spsolve_pagerank(M)).sum()
    assert err <= views.error_bound("r") <= 1e-9
    small = sps.csr_matrix(np.array([[0.0, 0.5], [1.0 + 1e-11, 0.5]]))
    assert not substochastic(small)  # 1e-11 over with 1 entry: not rounding


def test_no_pragma_at_all_a_number_for_d_is_a_scalar():
    """The program as a SciPy user writes it: no pragma for M nor for d (a Python float)."""
    rng = np.random.default_rng(3)
    M, _, _ = link_matrix(rng, 80, 300)
    plain = README.replace("  %#linview scalar d\n", "")
    views = linview.compile(plain, name="pr").load(M=M, d=D)
    assert isinstance(views, SolveModule) and sps.issparse(views["M"])
    np.testing.assert_allclose(views["r"], spsolve_pagerank(M), atol=1e-8)


@pytest.mark.parametrize("method, norm", [("auto", 1), ("krylov", 2)])
def test_sparse_updates_of_sparse_input_match_spsolve(method, norm):
    """Dangling nodes as zero columns (substochastic M), dense and sparse update factors;
    push (auto: M non-negative, column sums at most 1) with its L1 bound, and krylov
    with its 2-norm bound (certified by column diagonal dominance)."""
    rng = np.random.default_rng(1)
    n = 80
    M, _, _ = link_matrix(rng, n, 160, dangling=True)
    src = "function r = pr(M, d)\n  %#linview scalar d\n  %#linview dynamic M\n" + \
        README.split("\n", 2)[2]
    views = linview.compile(src, name="pr").load(M=M, d=D, method=method)
    want_method = "push" if method == "auto" else method
    assert views.solver("r").method == want_method and views.solver("r").certified \
        if method == "krylov" else views.solver("r").method == want_method
    for step in range(12):
        j = int(rng.integers(n))
        new = np.zeros(n)
        new[rng.choice(n, size=1 + step % 3, replace=False)] = 1.0 / (1 + step % 3)
        old = views["M"][:, [j]].toarray().ravel()
        u, v = new - old, np.eye(n)[:, j]
        if step % 2:
            views.update("M", sps.csc_matrix(u.reshape(-1, 1)), sps.csc_matrix(v.reshape(-1, 1)))
        else:
            views.update("M", u, v)
        assert sps.issparse(views["M"])
        want = spsolve_pagerank(views["M"])
        err = np.linalg.norm((views["r"] - want).ravel(), norm)
        assert err <= views.error_bound("r") * (1 + 1e-6) + 1e-14
        assert views.error_bound("r") <= 1e-8
        assert views.solver("r").method == want_method
    assert views.verify() < 1e-6
    # a change that leaves M with a column summing to 2: push no longer applies, so the
    # view is solved again by krylov, and still right
    views.update("M", np.eye(n)[:, 5] * 2.0, np.eye(n)[:, 9])
    assert views.solver("r").method == "krylov"
    np.testing.assert_allclose(views["r"], spsolve_pagerank(views["M"]), atol=1e-8)


def test_dense_input_keeps_the_generated_module_and_pragmas_stay_overrides():
    rng = np.random.default_rng(2)
    M, _, _ = link_matrix(rng, 20, 60)
    prog = linview.compile(README, name="pr")
    dense = prog.load(M=M.toarray(), d=D)
    assert isinstance(dense, TriggerModule)
    np.testing.assert_allclose(dense["r"], spsolve_pagerank(M), atol=1e-10)
    stochastic = linview.compile_file("examples/pagerank_solve.m").load(M=M, d=D)
    assert stochastic.solver("r").method == "push"  # the pragma wins over the data
    np.testing.assert_allclose(stochastic["r"], spsolve_pagerank(M), atol=1e-9)


def test_explain_says_which_values_are_sparse_and_why():
    rng = np.random.default_rng(3)
    M, _, _ = link_matrix(rng, 10, 30)
    prog = linview.compile(OPS, name="sparse_ops")
    special = prog.specialize(M=M, x=np.ones((10, 1)), d=D)
    text = special.explain()
    assert "input M: sparse (given as scipy.sparse at load)" in text
    for view in ("B", "C", "E"):
        assert f"  {view}: sparse: reads sparse input M (given as scipy.sparse at load)" in text
    assert "y: sparse" not in text and "r: solve view" in text


def test_sparse_ops_agree_with_octave_values_and_sparsity(tmp_path):
    """Values and which outputs are sparse, against Octave on ``sparse()`` of the same
    triplets; then the same after an update of M and of x."""
    rng = np.random.default_rng(4)
    n = 25
    M, src, dst = link_matrix(rng, n, 70, dangling=True)
    x = rng.random((n, 1))
    views = linview.compile(OPS, name="sparse_ops").load(M=M, x=x, d=D)
    names = ["B", "C", "E", "y", "r", "s"]
    ours = [sps.issparse(views[k]) for k in names]
    assert ours == [True, True, True, False, False, False]
    u = np.zeros(n)
    u[[3, 7]] = [0.5, -0.25]
    views.update("M", sps.csc_matrix(u.reshape(-1, 1)), np.eye(n)[:, 2])
    views.update("x", rng.random(n), np.ones(1))
    if not octave_available():
        pytest.skip("octave-cli (GNU Octave) is not installed")
    prog_file = tmp_path / "sparse_ops.m"
    prog_file.write_text(OPS)
    wrapper = tmp_path / "wrap_ops.m"
    wrapper.write_text(
        "function [B, C, E, y, r, s, flags] = wrap_ops(rows, cols, vals, n, x, d)\n"
        "  M = sparse(rows, cols, vals, n(1), n(1));\n"
        "  [B, C, E, y, r, s] = sparse_ops(M, x, d);\n"
        "  flags = [issparse(B), issparse(C), issparse(E), issparse(y), issparse(r), "
        "issparse(s)];\n"
        "  B = full(B); C = full(C); E = full(E);\n"
        "end\n")
    coo = views["M"].tocoo()
    out = run_octave(wrapper, {"rows": coo.row + 1.0, "cols": coo.col + 1.0,
                               "vals": coo.data, "n": float(n), "x": views["x"], "d": D},
                     names + ["flags"])
    assert out["flags"].ravel().astype(bool).tolist() == ours
    for k in names:
        got = views[k].toarray() if sps.issparse(views[k]) else views[k]
        np.testing.assert_allclose(got, out[k], atol=1e-8, err_msg=k)


def test_sparse_input_allocates_nothing_of_n_squared():
    """n = 20000: one dense n×n float array would be 3.2 GB; load and an update of the
    README program with a sparse M stay within a few times the graph."""
    rng = np.random.default_rng(5)
    n = 20_000
    M, _, _ = link_matrix(rng, n, 5 * n, dangling=True)
    src = "function r = pr(M, d)\n  %#linview scalar d\n  %#linview dynamic M\n" + \
        README.split("\n", 2)[2]
    prog = linview.compile(src, name="pr")
    tracemalloc.start()
    try:
        views = prog.load(M=M, d=D)
        old = views["M"][:, [7]].toarray().ravel()
        new = np.zeros(n)
        new[[1, 2]] = 0.5
        views.update("M", sps.csc_matrix((new - old).reshape(-1, 1)),
                     sps.csc_matrix(([1.0], ([7], [0])), shape=(n, 1)))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    graph = M.data.nbytes + M.indices.nbytes + M.indptr.nbytes
    assert peak < 100 * 2**20, f"peak {peak / 2**20:.0f} MiB for a {graph / 2**20:.1f} MiB graph"
    assert views.error_bound("r") <= 1e-8
    r = np.asarray(views["r"]).ravel()
    resid = r - D * (views["M"] @ r) - (1 - D) / n
    assert np.abs(resid).sum() / (1 - D) <= 1e-8


def test_save_and_restore_keep_a_given_sparse_input_sparse(tmp_path):
    rng = np.random.default_rng(6)
    M, _, _ = link_matrix(rng, 30, 90)
    src = "function r = pr(M, d)\n  %#linview scalar d\n  %#linview dynamic M\n" + \
        README.split("\n", 2)[2]
    views = linview.compile(src, name="pr").load(M=M, d=D)
    views.save(tmp_path / "s.npz")
    back = linview.restore(tmp_path / "s.npz")
    assert isinstance(back, SolveModule) and sps.issparse(back["M"])
    np.testing.assert_allclose(back["r"], spsolve_pagerank(M), atol=1e-8)
    u = np.zeros(30)
    u[[0, 1]] = [0.1, -0.1]
    back.update("M", u, np.eye(30)[:, 4])
    np.testing.assert_allclose(back["r"], spsolve_pagerank(back["M"]), atol=1e-8)


def test_inverse_of_a_sparse_input_is_dense_because_the_program_asks(capsys):
    rng = np.random.default_rng(7)
    M, _, _ = link_matrix(rng, 12, 40)
    A = sps.identity(12, format="csr") - D * M
    src = "function Y = f(A, B)\n  Y = inv(A) * B;\nend\n"
    prog = linview.compile(src, name="f")
    B = rng.random((12, 2))
    views = prog.load(A=A, B=B)
    np.testing.assert_allclose(views["Y"], np.linalg.solve(A.toarray(), B), atol=1e-10)
    assert "needs a dense value of a sparse operand" in prog.specialize(A=A, B=B).explain()


def test_cost_takes_nnz_as_sparse_storage(capsys, tmp_path):
    from linview.app.cli import main

    path = tmp_path / "pr.m"
    path.write_text(README.replace("%#linview scalar d", "%#linview scalar d\n  B = M + M';"))
    assert main(["cost", str(path), "--dims", "cols_M=100000,nnz_M=700000"]) == 0
    out = capsys.readouterr().out
    assert "input M: sparse (its non-zeros given by nnz_M), 700,000 non-zeros" in out
    assert "view B: sparse: reads sparse input M" in out


@pytest.mark.parametrize("suffix", [".npz", ".mat"])
def test_run_reads_a_sparse_file_and_keeps_it_sparse(tmp_path, capsys, suffix):
    """``linview run --input M=M.npz`` (scipy.sparse.save_npz) or a sparse ``.mat``, the
    README program with no pragma, factor records of M: the result is spsolve's."""
    import json

    import scipy.io

    from linview.app.cli import main

    rng = np.random.default_rng(8)
    n = 40
    M, _, _ = link_matrix(rng, n, 120, dangling=True)
    path = tmp_path / f"M{suffix}"
    if suffix == ".npz":
        sps.save_npz(path, M.tocsc())
    else:
        scipy.io.savemat(path, {"M": M.tocsc()})
    prog = tmp_path / "pr.m"
    prog.write_text(README.replace("%#linview scalar d", "%#linview scalar d\n  "
                                   "%#linview dynamic M"))
    recs, cur = [], M.toarray()
    for _ in range(6):
        j = int(rng.integers(n))
        new = np.zeros(n)
        new[rng.choice(n, size=2, replace=False)] = 0.5
        recs.append({"input": "M", "u": (new - cur[:, j]).tolist(),
                     "v": np.eye(n)[:, j].tolist()})
        cur[:, j] = new
    (tmp_path / "u.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert main(["run", str(prog), "--input", f"M={path}", "--input", f"d={D}",
                 "--updates", str(tmp_path / "u.jsonl"), "--out", str(tmp_path / "out")]) \
        == 0, capsys.readouterr().err
    r = np.load(tmp_path / "out" / "latest.npz")["r"]
    np.testing.assert_allclose(r, spsolve_pagerank(sps.csr_matrix(cur)), atol=1e-8)


def test_mixed_program_solve_view_and_inverse_under_updates_of_both():
    """One solve view on a sparse M and an inverse of a dense X in one program, updated
    through both inputs: every output against a direct re-evaluation (the inverse is kept
    by Woodbury; tests/test_solve_module.py has the same under Hypothesis)."""
    rng = np.random.default_rng(9)
    n, m, k = 30, 20, 4
    M, _, _ = link_matrix(rng, n, 90, dangling=True)
    X = rng.standard_normal((m, k))
    src = """function [r, beta] = mixed(M, X, y, d)
  %#linview scalar d
  %#linview dynamic M X
  n = size(M, 1);
  r = (eye(n) - d * M) \\ ((1 - d) / n * ones(n, 1));
  beta = inv(X' * X) * (X' * y);
end
"""
    y = rng.standard_normal((m, 1))
    views = linview.compile(src, name="mixed").load(M=M, X=X, y=y, d=D)
    for step in range(6):
        if step % 2:
            views.update("X", rng.standard_normal(m) * 0.1, rng.standard_normal(k))
        else:
            j = int(rng.integers(n))
            new = np.zeros(n)
            new[rng.choice(n, size=2, replace=False)] = 0.5
            views.update("M", new - views["M"][:, [j]].toarray().ravel(), np.eye(n)[:, j])
        Xc = views["X"]
        np.testing.assert_allclose(views["beta"], np.linalg.lstsq(Xc, y, rcond=None)[0],
                                   atol=1e-10)
        np.testing.assert_allclose(views["r"], spsolve_pagerank(views["M"]), atol=1e-8)
