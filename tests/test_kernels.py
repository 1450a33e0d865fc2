"""The NumPy runtime's product kernels against plain NumPy products
(``backends/numpy/kernels.py``): fused products of one view (the one-pass kernel, reduced
columns, one-hot blocks) and the BLAS thread pools a trigger uses."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linview.backends.numpy import kernels

#: a view large enough for the one-pass kernel and the column reduction (kernels.WIDE_MIN)
N_LARGE = 1100


def _reference(A, blocks, ops):
    return [(A.T if o == "T" else A) @ B for B, o in zip(blocks, ops, strict=True)]


def _close(got, want):
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape
        scale = max(1.0, float(np.max(np.abs(w))))
        assert float(np.max(np.abs(g - w))) <= 1e-12 * scale * np.sqrt(w.shape[0])


@st.composite
def block_sets(draw):
    """Factor blocks as triggers stack them: random columns, repeats, scaled repeats,
    combinations of earlier columns (``Xᵀu + V s``) and one-hot columns."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = draw(st.sampled_from([40, N_LARGE]))
    pool = [rng.standard_normal(n)]
    blocks, ops = [], ""
    for _ in range(draw(st.integers(1, 4))):
        cols = []
        for _ in range(draw(st.integers(1, 4))):
            kind = draw(st.sampled_from(["new", "repeat", "combo", "onehot"]))
            if kind == "new":
                cols.append(rng.standard_normal(n) * 10.0 ** rng.integers(-8, 8))
            elif kind == "repeat":
                cols.append(pool[rng.integers(len(pool))].copy())
            elif kind == "combo":
                a, b = (pool[rng.integers(len(pool))] for _ in range(2))
                cols.append(a + b * rng.standard_normal())
            else:
                e = np.zeros(n)
                e[rng.integers(n)] = rng.standard_normal()
                cols.append(e)
            pool.append(cols[-1])
        blocks.append(np.column_stack(cols))
        ops += draw(st.sampled_from("NT"))
    return n, blocks, ops


@settings(max_examples=40, deadline=None)
@given(block_sets(), st.integers(0, 2**32 - 1))
def test_fused_products_equal_numpy_products(case, seed):
    n, blocks, ops = case
    A = np.asfortranarray(np.random.default_rng(seed).standard_normal((n, n)))
    _close(kernels.fused_dot(A, *blocks, ops=ops), _reference(A, blocks, ops))


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("cn, ct", [(0, 2), (1, 1), (3, 4), (0, 8), (5, 0)])
def test_one_pass_equals_both_products(cn, ct, threads):
    rng = np.random.default_rng(cn * 10 + ct)
    A = np.asfortranarray(rng.standard_normal((N_LARGE, 903)))
    BN = rng.standard_normal((903, cn)) if cn else None
    BT = rng.standard_normal((N_LARGE, ct)) if ct else None
    outN, outT = kernels.pass_dot(A, BN, BT, threads=threads)
    if cn:
        np.testing.assert_allclose(outN, A @ BN, rtol=1e-12, atol=1e-11)
    else:
        assert outN is None
    if ct:
        np.testing.assert_allclose(outT, A.T @ BT, rtol=1e-12, atol=1e-11)
    else:
        assert outT is None


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.integers(0, 9), st.integers(0, 9),
       st.integers(0, 2**32 - 1), st.booleans(), st.integers(1, 4))
def test_one_pass_kernel_on_every_shape(rows, cols, cn, ct, seed, poison, threads):
    """The compiled kernel (blocks of four columns of A, three of Bᵀ, and what is left over)
    against NumPy for every small shape and column count, on one thread or split into
    column ranges on several (ranges of at least four columns here); a NaN or infinity
    in A reaches exactly the results it enters, as in NumPy (fastmath keeps IEEE special
    values)."""
    from linview.backends.numpy import fused

    rng = np.random.default_rng(seed)
    before, fused.MIN_RANGE = fused.MIN_RANGE, 4
    try:
        _one_pass_case(rng, rows, cols, cn, ct, poison, threads)
    finally:
        fused.MIN_RANGE = before


def _one_pass_case(rng, rows, cols, cn, ct, poison, threads):
    from linview.backends.numpy import fused

    A = np.asfortranarray(rng.standard_normal((rows, cols)) * 10.0 ** rng.integers(-6, 6))
    if poison:
        A[rng.integers(rows), rng.integers(cols)] = rng.choice([np.nan, np.inf, -np.inf])
    BN = rng.standard_normal((cols, cn)) if cn else None
    BT = rng.standard_normal((rows, ct)) if ct else None
    outN, outT = fused.pass_dot(A, BN, BT, threads)
    with np.errstate(invalid="ignore"):
        for got, want in ((outN, None if BN is None else A @ BN),
                          (outT, None if BT is None else A.T @ BT)):
            if want is None:
                assert got is None
                continue
            assert got.shape == want.shape
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
            np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
            fin = np.isfinite(want)
            scale = np.abs(A[np.isfinite(A)]).max(initial=1.0) * 40
            np.testing.assert_allclose(got[fin], want[fin], rtol=1e-12, atol=1e-13 * scale)


def test_dependent_columns_are_computed_once_as_combinations():
    rng = np.random.default_rng(3)
    n = 500
    V, t0 = rng.standard_normal((n, 1)), rng.standard_normal((n, 1))
    # the OLS trigger's blocks: [V, Xᵀu + V s], [Xᵀu, V], [V c]
    blocks = [np.hstack([V, t0 + 0.37 * V]), np.hstack([t0, V]), 2.5 * V]
    B, expand = kernels.distinct_columns(blocks)
    assert B.shape[1] == 2  # V and Xᵀu: every other column is a combination of these
    A = rng.standard_normal((n, n))
    full = expand(A @ B)
    np.testing.assert_allclose(full, A @ np.hstack(blocks), rtol=1e-13, atol=1e-12)
    # independent columns stay, and small views only merge exact repeats
    W = rng.standard_normal((n, 3))
    assert kernels.distinct_columns([W, W[:, :1]])[0].shape[1] == 3
    assert kernels.distinct_columns(blocks, dependent=False)[0].shape[1] == 4  # V repeated


def test_a_nearly_dependent_column_is_kept():
    """Dependence must hold to rounding: a column off by 1e-10 is a column of its own."""
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((300, 1)), rng.standard_normal((300, 1))
    c = a + 2 * b + 1e-10 * rng.standard_normal((300, 1))
    assert kernels.distinct_columns([np.hstack([a, b, c])])[0].shape[1] == 3


def _kept_by_one_solve_per_column(Bt):
    """The columns an independent reference keeps: one least-squares solve against the
    columns kept so far per column, with the residual test of ``distinct_columns``."""
    eps = np.finfo(float).eps
    kept = []
    for j, b in enumerate(Bt):
        if kept:
            K = Bt[kept].T
            x = np.linalg.lstsq(K, b, rcond=None)[0]
            mass = np.abs(x) @ np.linalg.norm(Bt[kept], axis=1)
            if mass <= kernels.CANCEL_MAX * np.linalg.norm(b) and \
                    np.linalg.norm(b - K @ x) <= 8 * eps * (mass + np.linalg.norm(b)):
                continue
        kept.append(j)
    return kept


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.lists(st.sampled_from(
    ["new", "combo", "zero", "scaled", "near"]), min_size=2, max_size=10))
def test_column_reduction_agrees_with_least_squares(seed, kinds):
    """The QR-based reduction finds every combination that one least-squares solve per
    column finds (random, combined, zero, scaled and nearly dependent columns; with
    scales 1e-6..1e6 it may find more, its solves being the more accurate), and its expansion
    reproduces every column's product to rounding: a nearly dependent column (1e-9 off)
    dropped would miss by far more."""
    rng = np.random.default_rng(seed)
    n, cols = 200, []
    for kind in kinds:
        if kind == "new" or not cols:
            cols.append(rng.standard_normal(n) * 10.0 ** rng.integers(-6, 6))
        elif kind == "zero":
            cols.append(np.zeros(n))
        elif kind == "scaled":
            cols.append(cols[rng.integers(len(cols))] * rng.standard_normal())
        else:
            a, b = (cols[rng.integers(len(cols))] for _ in range(2))
            c = a + rng.standard_normal() * b
            cols.append(c + 1e-9 * np.linalg.norm(c) * rng.standard_normal(n)
                        if kind == "near" else c)
    Bt = np.vstack(cols)
    cand = np.arange(len(cols))
    kept, coef = kernels._independent(Bt, cand)
    kept_ls = _kept_by_one_solve_per_column(Bt)
    # a nearly dependent column (1e-9 off) sits at both methods' thresholds: either may
    # keep it (keeping a column is always safe); everything else the solves drop, QR drops
    assert len(kept) <= len(kept_ls) + kinds.count("near")
    A = rng.standard_normal((n, n))
    full = A @ Bt[kept].T @ (np.eye(len(kept)) if coef is None else coef)
    want = A @ Bt.T
    scale = np.abs(A) @ np.abs(Bt.T)
    assert np.all(np.abs(full - want) <= 1e-12 * scale + 1e-300)


def test_transposed_operands_are_read_in_place():
    rng = np.random.default_rng(5)
    A = np.asfortranarray(rng.standard_normal((60, 40)))
    x, B = rng.standard_normal(60), rng.standard_normal((60, 3))
    np.testing.assert_allclose(kernels.matmul(A.T, x), A.T @ x)
    np.testing.assert_allclose(kernels.matmul(A.T, B), A.T @ B)
    np.testing.assert_allclose(kernels.matmul(A.T, B[:, :1]), A.T @ B[:, :1])
    ints = np.arange(12).reshape(3, 4)  # not float64: NumPy's product
    np.testing.assert_array_equal(kernels.matmul(ints, np.ones((4, 1))), ints @ np.ones((4, 1)))


def test_one_pool_gets_the_threads():
    """blas_limit(t, None) limits only the library the kernels call; blas_limit(t) every
    one; where NumPy and SciPy bundle one library each (pip wheels) the other keeps its
    threads."""
    from threadpoolctl import threadpool_info

    def counts():
        return {i["filepath"]: i["num_threads"] for i in threadpool_info()
                if i.get("user_api") == "blas"}

    mine, rest = kernels.pools()
    before = counts()
    with kernels.blas_limit(1):
        assert set(counts().values()) == {1}
    with kernels.blas_limit(1, None):
        now = counts()
        for lib in mine.lib_controllers:
            assert now[lib.filepath] == 1
        for lib in (rest.lib_controllers if rest is not None else []):
            assert now[lib.filepath] == before[lib.filepath]
    assert counts() == before


def test_single_entry_columns_are_gathers_not_pass_columns(monkeypatch):
    """A block ``[e_i·c, dense]`` (a row update's ``[U, A U + …]``) is not one-hot as a
    whole; its single-entry column is a gather of A's column (row for Aᵀ), so the pass
    over A carries only the dense columns, and the products equal NumPy's."""
    rng = np.random.default_rng(5)
    n = N_LARGE
    A = np.asfortranarray(rng.standard_normal((n, n)))
    e = np.zeros((n, 1))
    e[17] = -2.5
    BN = np.hstack([e, rng.standard_normal((n, 2))])
    f = np.zeros((n, 1))
    f[n - 1] = 0.75
    BT = np.hstack([rng.standard_normal((n, 1)), f])
    widths = []
    real = kernels.pass_dot

    def spy(A, BN, BT, threads=1):
        widths.append(sum(0 if b is None else b.shape[1] for b in (BN, BT)))
        return real(A, BN, BT, threads)

    monkeypatch.setattr(kernels, "pass_dot", spy)
    got = kernels.fused_dot(A, BN, BT, ops="NT")
    assert widths == [3]  # two dense columns of BN, one of BT
    _close(got, _reference(A, [BN, BT], "NT"))
    # only single-entry columns: no pass at all
    widths.clear()
    only = np.hstack([e, f])
    got = kernels.fused_dot(A, only, only, ops="NT")
    assert widths == []
    _close(got, _reference(A, [only, only], "NT"))


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
def test_split_pass_works_in_a_forked_child():
    """A child forked after the pass's threads started has none of them: it starts its
    own (a pool that kept the parent's dead threads would wait for ever)."""
    import os
    import signal

    from linview.backends.numpy import fused

    rng = np.random.default_rng(9)
    A = np.asfortranarray(rng.standard_normal((600, 600)))
    B = rng.standard_normal((600, 3))
    fused.pass_dot(A, None, B, 2)  # the parent's threads
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        signal.alarm(30)
        got = fused.pass_dot(A, None, B, 2)[1]
        os._exit(0 if np.allclose(got, A.T @ B) else 3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["row", "column", "dense"]),
       st.integers(1, 3), st.booleans())
def test_add_outer_keeping_adds_and_restores_exactly(seed, kind, k, fortran):
    """``add_outer_keeping`` leaves ``A + P Qᵀ`` (NumPy's, bit for bit in the touched rows
    or columns of a row or column update) and what it returns puts A back exactly."""
    rng = np.random.default_rng(seed)
    m, n = int(rng.integers(k * 4 + 1, 30)), int(rng.integers(k * 4 + 1, 30))
    A = rng.standard_normal((m, n))
    A = np.asfortranarray(A) if fortran else A
    P, Q = rng.standard_normal((m, k)), rng.standard_normal((n, k))
    if kind == "row":
        P[rng.permutation(m)[k:]] = 0.0
    elif kind == "column":
        Q[rng.permutation(n)[k:]] = 0.0
    before = A.copy()
    where, old = kernels.add_outer_keeping(A, P, Q)
    want = before + P @ Q.T
    if kind == "row":
        touched = np.flatnonzero(P.any(axis=1))
        assert np.array_equal(A[touched], before[touched] + P[touched] @ Q.T)
        assert np.array_equal(np.delete(A, touched, 0), np.delete(before, touched, 0))
    assert np.allclose(A, want, rtol=1e-13, atol=1e-13)
    A[where] = old
    assert np.array_equal(A, before)


def test_blas_limits_nest_restore_on_errors_and_let_go_of_openblas():
    """Nested limits restore each level, an error inside a limit restores it too, and
    after the last one another Python thread can set OpenBLAS's threads (threadpoolctl
    lets one thread at a time control OpenBLAS while limits are in force)."""
    import threading

    from threadpoolctl import threadpool_info, threadpool_limits

    def counts():
        return sorted(i["num_threads"] for i in threadpool_info() if i.get("user_api") == "blas")

    before = counts()
    with kernels.blas_limit(1):
        with kernels.blas_limit(2, None):
            assert max(counts()) == 2 or before == [1] * len(before)
        assert set(counts()) == {1}
    assert counts() == before
    with pytest.raises(KeyError), kernels.blas_limit(1):
        raise KeyError("inside")
    assert counts() == before
    seen = []

    def other():
        with threadpool_limits(1, user_api="blas"):
            seen.append(counts())

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen and set(seen[0]) == {1}
    assert counts() == before
