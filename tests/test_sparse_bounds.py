"""The certified bound is never violated, at the tolerances users' tools use (1e-3 to
1e-6), on random graphs and update sequences: push on a ``stochastic`` M (L1 bound,
edge batches of 1 to 3 changes) and Krylov on a plain ``scipy.sparse`` M given with no
pragma (push's L1 bound, and Krylov's 2-norm bound from column diagonal dominance,
under column changes); the error is
measured against ``scipy.sparse.linalg.spsolve``.  Also: no bound is claimed where the
conditioning is not certified."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sps
import scipy.sparse.linalg as spla
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import linview
from linview.solve import bounds
from linview.solve.krylov import KrylovSolver
from linview.solve.solvers import PushSolver
from linview.solve.stochastic import StochasticMatrix

D = 0.85
TOLERANCES = [1e-3, 1e-4, 1e-5, 1e-6]
#: the bound is exact arithmetic on the kept residual, which carries the rounding of the
#: updates (about 1e-15 on ranks summing to 1; the factor-2 margin below the tolerance
#: is what covers it); the reference solve rounds too
ROUNDING = 1e-14
PUSH = "examples/pagerank_solve.m"
PLAIN = """function r = pr(M, d)
  %#linview scalar d
  %#linview dynamic M
  n = size(M, 1);
  r = (eye(n) - d * M) \\ ((1 - d) / n * ones(n, 1));
end
"""


def exact(M, d=D):
    n = M.shape[0]
    return spla.spsolve(sps.identity(n, format="csc") - d * sps.csc_matrix(M),
                        np.full(n, (1 - d) / n)).reshape(-1, 1)


def edges(rng, n: int):
    m = int(rng.integers(0, 3 * n + 1))
    pairs = np.unique(np.stack([rng.integers(0, n, m), rng.integers(0, n, m)]), axis=1)
    return pairs[0], pairs[1]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(3, 40), st.integers(0, 2**31 - 1), st.integers(1, 15),
       st.sampled_from(TOLERANCES))
def test_push_bound_holds_under_edge_batches(n, seed, steps, tol):
    rng = np.random.default_rng(seed)
    M = StochasticMatrix(n, *edges(rng, n))
    views = linview.compile_file(PUSH).load(M=M, d=D, tolerance=tol)
    for _ in range(steps):
        batch, seen = [], set()
        for _ in range(int(rng.integers(1, 4))):
            j = int(rng.integers(n))
            rows = M.column(j)[0]
            if rows.size and rng.random() < 0.5:
                rec = ("delete", j, int(rows[rng.integers(rows.size)]))
            else:
                free = np.setdiff1d(np.arange(n), rows)
                if not free.size:
                    continue
                rec = ("insert", j, int(free[rng.integers(free.size)]))
            if rec[1:] not in seen:
                seen.add(rec[1:])
                batch.append(rec)
        if batch:
            views.update_edges("M", batch)
        bound = views.error_bound("r")
        assert bound <= tol
        err = np.abs(views["r"] - exact(M.tocsc())).sum()
        assert err <= bound * (1 + 1e-6) + ROUNDING and err <= tol


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(3, 40), st.integers(0, 2**31 - 1), st.integers(1, 10),
       st.sampled_from(TOLERANCES), st.sampled_from(["push", "krylov"]))
def test_bound_holds_for_a_plain_sparse_input(n, seed, steps, tol, method):
    rng = np.random.default_rng(seed)
    src, dst = edges(rng, n)
    deg = np.bincount(src, minlength=n)
    M = sps.csr_matrix((1.0 / deg[src], (dst, src)), shape=(n, n))  # zero dangling columns
    views = linview.compile(PLAIN, name="pr").load(M=M, d=D, tolerance=tol, method=method)
    assert views.solver("r").method == method
    assert method == "push" or views.solver("r").certified
    norm = 1 if method == "push" else 2  # push bounds the L1 error, krylov the 2-norm
    for _ in range(steps):  # column j replaced by new links (or none)
        j = int(rng.integers(n))
        k = int(rng.integers(0, 4))
        new = np.zeros(n)
        if k:
            new[rng.choice(n, size=k, replace=False)] = 1.0 / k
        old = views["M"][:, [j]].toarray().ravel()
        views.update("M", sps.csc_matrix((new - old).reshape(-1, 1)),
                     sps.csc_matrix(([1.0], ([j], [0])), shape=(n, 1)))
        bound = views.error_bound("r")
        assert bound <= tol
        err = np.linalg.norm((views["r"] - exact(views["M"])).ravel(), norm)
        assert err <= bound * (1 + 1e-6) + ROUNDING and err <= tol


def test_no_bound_claimed_without_certified_conditioning(monkeypatch):
    """A sparse A over the dense-SVD size, not diagonally dominant, and an ARPACK
    estimate of σ_min 20 times too large (so the inertia test at τ = estimate/2 and /4
    finds negative pivots): the solution is still driven, but the bound is ``inf``."""
    monkeypatch.setattr(bounds, "DENSE_SVD_MAX", 10)
    rng = np.random.default_rng(1)
    n = 40
    A = sps.random(n, n, density=0.3, random_state=2, format="csr") + 0.5 * sps.identity(n)
    assert min(bounds.dominance(A)) < 0
    smin = np.linalg.svd(A.toarray(), compute_uv=False).min()
    monkeypatch.setattr(bounds.Conditioning, "_arpack", staticmethod(lambda A: 20 * smin))
    b = rng.random((n, 1))
    s = KrylovSolver(A, b, 1e-8)
    assert not s.certified and s.error_bound() == float("inf")
    np.testing.assert_allclose(s.X, spla.spsolve(A.tocsc(), b).reshape(-1, 1), atol=1e-6)
    monkeypatch.undo()  # a right estimate: the inertia test certifies it at any n
    monkeypatch.setattr(bounds, "DENSE_SVD_MAX", 10)
    s = KrylovSolver(A, b, 1e-8)
    assert s.certified and s.cond.how == bounds.INERTIA and s.error_bound() <= 1e-8
    assert np.linalg.norm(s.X - spla.spsolve(A.tocsc(), b).reshape(-1, 1)) <= \
        s.error_bound() + 1e-14


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 60), st.integers(0, 2**31 - 1), st.floats(0.0, 2.0),
       st.floats(0.05, 20.0))
def test_inertia_bound_never_exceeds_the_smallest_singular_value(n, seed, shift, scale):
    """The certified σ_min lower bound of :func:`bounds.inertia_bound` against a dense
    SVD, on random sparse matrices (ill-conditioned ones included), for estimates from
    far below to far above the true σ_min."""
    rng = np.random.default_rng(seed)
    A = sps.random(n, n, density=min(1.0, 3 / n), random_state=seed, format="csr") \
        + shift * sps.identity(n)
    smin = np.linalg.svd(A.toarray(), compute_uv=False).min()
    got = bounds.inertia_bound(A, scale * smin * (1 + rng.random()))
    assert got <= smin * (1 + 1e-12) + 1e-300


def test_dominance_bound_is_a_bound_on_the_inverse():
    """α_col of I - d·M is at least 1 - d, and ‖A⁻¹‖₁ ≤ 1/α_col, on random graphs."""
    rng = np.random.default_rng(2)
    for _ in range(20):
        n = int(rng.integers(3, 30))
        src, dst = edges(rng, n)
        deg = np.bincount(src, minlength=n)
        M = sps.csr_matrix((1.0 / deg[src], (dst, src)), shape=(n, n))
        A = sps.identity(n, format="csr") - D * M
        col, _ = bounds.dominance(A)
        assert col >= 1 - D - 1e-12
        inv = np.linalg.inv(A.toarray())
        assert np.abs(inv).sum(axis=0).max() <= 1 / col * (1 + 1e-12)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(3001, 4000), st.integers(0, 2**31 - 1), st.sampled_from([1e-4, 1e-8]))
def test_krylov_bound_is_certified_over_the_dense_svd_size(n, seed, tol):
    """A sparse A of n > 3000 (no dense SVD), not diagonally dominant (2·I plus about two
    entries ±0.8 per column): the Lanczos estimate and the inertia count certify σ_min, the
    solver claims a bound, and the bound holds against ``spsolve`` after the load and after
    a sparse rank-1 change of A."""
    rng = np.random.default_rng(seed)
    m = 2 * n
    A = sps.csc_matrix((rng.choice([-0.8, 0.8], m), (rng.integers(0, n, m),
                        rng.integers(0, n, m))), shape=(n, n)) + 2.0 * sps.identity(n)
    assert max(bounds.dominance(A)) < 0
    b = rng.standard_normal((n, 2))
    s = KrylovSolver(A, b, tol)
    assert s.certified and s.cond.how == bounds.INERTIA
    for step in range(2):
        bound = s.error_bound()
        assert bound <= tol
        ref = spla.spsolve(s.A.tocsc(), b)
        err = np.linalg.norm(s.X - ref, axis=0).max()
        assert err <= bound * (1 + 1e-6) + 1e-12
        if step == 0:  # column j of A changes in three places
            j = int(rng.integers(n))
            P = sps.csc_matrix((0.3 * rng.standard_normal(3), (rng.choice(n, 3, replace=False),
                                np.zeros(3, int))), shape=(n, 1))
            Q = sps.csc_matrix(([1.0], ([j], [0])), shape=(n, 1))
            s.change_matrix(P, Q)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(3, 600), st.integers(0, 2**31 - 1), st.integers(1, 12),
       st.integers(2, 5), st.sampled_from(TOLERANCES), st.booleans())
def test_block_push_bound_holds_per_column(n, seed, steps, p, tol, block):
    """Personalised PageRank (p seed columns, pushed all at once by
    ``linview.solve.blockpush``): after the load and after every edge batch, the bound
    is within the tolerance and the L1 error of every column within the bound, against
    ``spsolve`` column by column.  Over a few hundred nodes, frontiers are narrower than
    n/32 and rounds push (below, every round is a dense one)."""
    PushSolver.block = block  # all columns at once, or column by column (the default)
    try:
        rng = np.random.default_rng(seed)
        M = StochasticMatrix(n, *edges(rng, n))
        S = rng.random((n, p)) * (rng.random((n, p)) < 0.3)
        S[0, :] += 1.0
        S /= S.sum(axis=0)
        views = linview.compile_file("examples/pagerank_personalised.m").load(
            M=M, S=S, d=D, tolerance=tol)
        for step in range(steps + 1):
            if step:
                batch = []
                for _ in range(int(rng.integers(1, 4))):
                    j = int(rng.integers(n))
                    rows = M.column(j)[0]
                    if rows.size and rng.random() < 0.5:
                        rec = ("delete", j, int(rows[rng.integers(rows.size)]))
                    else:
                        free = np.setdiff1d(np.arange(n), rows)
                        if not free.size:
                            continue
                        rec = ("insert", j, int(free[rng.integers(free.size)]))
                    if all(rec[1:] != b[1:] for b in batch):
                        batch.append(rec)
                if batch:
                    views.update_edges("M", batch)
            bound = views.error_bound("R")
            assert bound <= tol
            A = sps.identity(n, format="csc") - D * M.tocsc()
            ref = spla.spsolve(A, (1 - D) * S).reshape(n, p)
            err = np.abs(np.asarray(views["R"]) - ref).sum(axis=0)
            assert np.all(err <= bound * (1 + 1e-6) + ROUNDING) and np.all(err <= tol)
    finally:
        PushSolver.block = False
