"""The threaded one-pass kernels of the stable least-squares form
(``linview/solve/seminormal_kernels.py``) against plain NumPy/SciPy, at sizes that cross
their blocks (64 columns, four at a time, rows split over threads)."""

from __future__ import annotations

import numba
import numpy as np
import scipy.linalg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from linview.solve import seminormal_kernels as K
from linview.solve.seminormal import CholeskySolver

SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
SIZES = st.integers(1, 150)
PARTS = st.integers(1, 3)


def factor(rng, m, n):
    F = rng.standard_normal((m, n))
    return F, np.asfortranarray(np.linalg.cholesky(F.T @ F + n * np.eye(n)))


@settings(max_examples=40, **SETTINGS)
@given(st.integers(1, 120), SIZES, st.integers(1, 3), PARTS, st.booleans(),
       st.integers(0, 2 ** 16))
def test_residual_gradient_is_ft_times_the_residual(m, n, p, parts, weighted, seed):
    rng = np.random.default_rng(seed)
    F, Y, X = (rng.standard_normal(s) for s in ((m, n), (m, p), (n, p)))
    d = rng.uniform(0, 2, m) if weighted else np.zeros(0)  # Fᵀ diag(d) (Y - F X)
    numba.set_num_threads(K.threads_for(parts))
    got = K.residual_gradient(np.ascontiguousarray(F), Y, np.ascontiguousarray(X.T), parts,
                              d)
    D = d[:, None] if weighted else 1.0
    want = F.T @ (D * (Y - F @ X))
    scale = np.abs(F).T @ (D * (np.abs(Y) + np.abs(F) @ np.abs(X)))  # the sums' magnitudes
    assert np.all(np.abs(got - want) <= 4 * n * np.finfo(float).eps * (scale + 1e-300))


@settings(max_examples=40, **SETTINGS)
@given(SIZES, PARTS, st.booleans(), st.integers(0, 2 ** 16))
def test_update_downdate_is_the_cholesky_factor_of_the_changed_gram(n, parts, solve, seed):
    rng = np.random.default_rng(seed)
    _, L = factor(rng, n + 5, n)
    p, q, b = (rng.standard_normal(n) for _ in range(3))
    q *= 0.5 * np.sqrt(n) / max(np.linalg.norm(q), 1e-300)  # a downdate that keeps L SPD
    A = L @ L.T + np.outer(p, p) - np.outer(q, q)
    new = L.copy(order="F")
    bb = b.copy() if solve else np.zeros(0)
    numba.set_num_threads(K.threads_for(parts))
    kept = K.update_downdate(new, p.copy(), q.copy(), bb, solve, parts)
    assert 0 < kept <= 1
    assert np.allclose(new, np.linalg.cholesky(A), rtol=1e-9, atol=1e-9 * np.abs(L).max())
    if solve:  # b became L⁻¹ b for the new L, in the same pass
        assert np.allclose(bb, scipy.linalg.solve_triangular(np.tril(new), b, lower=True),
                           rtol=1e-9, atol=1e-9 * np.abs(b).max())


def test_update_downdate_says_when_the_downdate_is_not_positive_definite():
    rng = np.random.default_rng(3)
    _, L = factor(rng, 80, 70)
    q = 10 * L[:, 0] * np.sqrt(70)  # more than the Gram matrix holds
    assert K.update_downdate(L.copy(order="F"), np.zeros(70), q, np.zeros(0), False, 2) < 0


@settings(max_examples=40, **SETTINGS)
@given(SIZES, PARTS, st.integers(0, 2 ** 16))
def test_backward_solve_by_blocks_is_a_triangular_solve(n, parts, seed):
    rng = np.random.default_rng(seed)
    _, L = factor(rng, n + 3, n)
    z = rng.standard_normal(n)
    numba.set_num_threads(K.threads_for(parts))
    got = K.solve_lower_t(L, z.copy())
    want = scipy.linalg.solve_triangular(L, z, lower=True, trans="T")
    assert np.allclose(got, want, rtol=1e-10, atol=1e-10 * np.abs(want).max())


@settings(max_examples=15, **SETTINGS)
@given(st.integers(70, 140), st.integers(0, 2 ** 16))
def test_solver_over_blocks_stays_as_accurate_as_lstsq(n, seed):
    """The solver with the kernels, at sizes past one block, after row changes (one
    refinement step each, mostly) and a dense change: within 10× lstsq's error."""
    rng = np.random.default_rng(seed)
    F = rng.standard_normal((n + 20, n)) @ np.diag(np.logspace(0, -3, n))
    beta = rng.standard_normal((n, 1))
    s = CholeskySolver(F, F @ beta, 1e-10, threads=lambda: 2)
    for k in range(6):
        U = np.zeros((n + 20, 1))
        U[rng.integers(n + 20)] = 1.0
        if k == 4:
            U = rng.standard_normal((n + 20, 1))
        V = 1e-2 * rng.standard_normal((n, 1))
        s.change_matrix(U, V)
        s.change_rhs(U, V.T @ beta)
        F = F + U @ V.T
        ours = np.linalg.norm(s.X - beta) / np.linalg.norm(beta)
        theirs = np.linalg.norm(np.linalg.lstsq(F, F @ beta, rcond=None)[0] - beta) \
            / np.linalg.norm(beta)
        assert ours <= 10 * max(theirs, 1e-14), (k, ours, theirs)


@settings(max_examples=6, **SETTINGS)
@given(st.integers(70, 140), st.integers(0, 2 ** 16))
def test_the_answer_does_not_depend_on_the_threads_at_each_change(n, seed):
    """The threads follow the idle cores at every pass; the bits do not (a resumed or
    repeated run gives the same bits whatever the machine's load was)."""
    rng = np.random.default_rng(seed)
    F = rng.standard_normal((n + 20, n))
    Y = rng.standard_normal((n + 20, 1))
    turns = iter([1, 2] * 100)
    varying = CholeskySolver(F, Y, 1e-10, threads=lambda: next(turns))
    fixed = CholeskySolver(F, Y, 1e-10, threads=lambda: 1)
    for _ in range(4):
        U = np.zeros((n + 20, 1))
        U[rng.integers(n + 20)] = 1.0
        V = 1e-2 * rng.standard_normal((n, 1))
        for s in (varying, fixed):
            s.change_matrix(U, V)
        np.testing.assert_array_equal(varying.X, fixed.X)
