"""Push's dense round in one pass (:mod:`linview.solve.sweep_kernel`) against SciPy: the
product, its L1 norm and the count above the threshold, with and without the correction
of changed columns, on one thread and on two (the same bits), and a push solver driven on
one thread and on two to the same bits after the same edge batches."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sps
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from linview.solve import sweep_kernel
from linview.solve.solvers import PushSolver
from linview.solve.stochastic import StochasticMatrix


def random_csr(n: int, per_row: float, rng) -> sps.csr_matrix:
    m = int(n * per_row)
    return sps.csr_matrix((rng.random(m), (rng.integers(n, size=m), rng.integers(n, size=m))),
                          shape=(n, n))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.sampled_from([1, 7, sweep_kernel.ROWS - 1, sweep_kernel.ROWS + 1, 20_000]),
       per_row=st.sampled_from([0.0, 0.5, 3.0]), fixed=st.booleans(),
       s=st.floats(0.0, 0.99), seed=st.integers(0, 2**16))
def test_sweep_matches_scipy_on_any_thread_count(n, per_row, fixed, s, seed):
    rng = np.random.default_rng(seed)
    A = random_csr(n, per_row, rng)
    fix = random_csr(n, 0.05, rng) if fixed else None
    v = rng.standard_normal(n)
    add = float(rng.standard_normal()) * 1e-3
    want = s * (A @ v + (fix @ v if fixed else 0.0) + add)
    theta = float(np.median(np.abs(want))) if n else 0.0
    outs = []
    for threads in (1, 2):
        out = np.full(n, np.nan)
        l1, above = sweep_kernel.sweep(A, fix, v, s, add, theta, out, threads)
        np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)
        assert np.isclose(l1, np.abs(out).sum(), rtol=1e-12, atol=0)
        assert above == int((np.abs(out) > theta).sum())
        outs.append((out, l1, above))
    (o1, l1a, c1), (o2, l1b, c2) = outs
    assert np.array_equal(o1, o2) and l1a == l1b and c1 == c2  # the same bits


def test_push_is_the_same_to_the_bit_on_one_thread_and_two():
    rng = np.random.default_rng(3)
    n = 3 * sweep_kernel.ROWS
    src, dst = rng.integers(n, size=8 * n), rng.integers(n, size=8 * n)
    keep = src != dst
    solvers, graphs = [], []
    for threads in (1, 2):
        M = StochasticMatrix(n, src[keep], dst[keep])
        graphs.append(M)
        solvers.append(PushSolver(M, 0.85, np.full(n, 0.15 / n), 1e-9,
                                  threads=lambda t=threads: t))
    loaded = solvers[0].stats["sweeps"]
    for _ in range(5):
        batch, seen = [], set()
        while len(batch) < 20:
            j, i = (int(x) for x in rng.integers(n, size=2))
            if i != j and (j, i) not in seen and graphs[0].edge_weight(j, i) is None:
                seen.add((j, i))
                batch.append(("insert", j, i))
        for M, solver in zip(graphs, solvers, strict=True):
            solver.change_columns(M.change_edges(batch))
    a, b = solvers
    assert a.stats["sweeps"] > loaded  # the batches made dense rounds
    assert np.array_equal(a.X, b.X) and np.array_equal(a.R, b.R)
    assert a.error_bound() <= 1e-9


def test_a_drive_stopped_after_a_wide_dense_round_is_taken_up_by_the_next_change():
    """After a dense round that leaves more than n/32 nodes above the threshold the
    frontier's list is not built (``cand`` None: the next round is dense again).  A drive
    stopped there (an exception before the next round) leaves it so; the next change
    rebuilds it from the residual, and the bound and the error are certified again."""
    rng = np.random.default_rng(5)
    n = 2000
    src, dst = rng.integers(n, size=6 * n), rng.integers(n, size=6 * n)
    keep = src != dst
    M = StochasticMatrix(n, src[keep], dst[keep])
    solver = PushSolver(M, 0.85, np.full(n, 0.15 / n), 1e-8, threads=lambda: 2)

    def batch(size):
        out, seen = [], set()
        while len(out) < size:
            j, i = (int(x) for x in rng.integers(n, size=2))
            if i != j and (j, i) not in seen and M.edge_weight(j, i) is None:
                seen.add((j, i))
                out.append(("insert", j, i))
        return out

    rounds, dense = [], solver._dense_round

    def stop_at_the_second(c):
        rounds.append(c)
        if len(rounds) == 2:
            raise KeyboardInterrupt
        dense(c)

    solver._dense_round = stop_at_the_second
    with pytest.raises(KeyboardInterrupt):
        solver.change_columns(M.change_edges(batch(200)))
    assert solver.cand[0] is None  # the first round left a wide frontier
    solver._dense_round = dense
    solver.change_columns(M.change_edges(batch(3)))
    assert solver.error_bound() <= 1e-8
    exact = np.linalg.solve(np.eye(n) - 0.85 * M.toarray(), np.full(n, 0.15 / n))
    assert np.abs(solver.X[:, 0] - exact).sum() <= solver.error_bound() + 1e-13
