"""A micro-batch of row changes (``linview.app.batches``): its factors written once at
their size, the same arrays ``np.hstack`` of the ops' own factors gives; applied without a
dense factor (``kernels.unit_columns``, ``reevaluate_updates(..., rows)``), the same
numbers as ``X += U Vᵀ`` bit for bit, however many rows; refused batches leave nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import linview
from linview.app.batches import BatchBuilder
from linview.app.records import Op
from linview.backends.numpy import kernels

OLS = linview.compile_file(Path(__file__).resolve().parent.parent / "examples/ols.m")


def _ops(rng, m, n, k, mixed):
    """k row adds of distinct rows; ``mixed``: also a row set, a column add and a cell."""
    rows = rng.choice(m, size=k, replace=False)
    ops = [Op("X", "row", "add", (int(i),), rng.standard_normal(n)) for i in rows]
    if mixed:
        ops += [Op("X", "row", "set", (int(rows[0]),), rng.standard_normal(n)),
                Op("X", "col", "add", (int(rng.integers(n)),), rng.standard_normal(m)),
                Op("X", "cell", "add", (int(rng.integers(m)), int(rng.integers(n))), 0.5)]
    return ops


def _by_hand(X, ops):
    """Each op's own factor, as a one-op batch writes it, stacked by ``np.hstack``."""
    Us, Vs = [], []
    for op in ops:
        now = X + sum((U @ V.T for U, V in zip(Us, Vs, strict=True)), 0 * X)
        b = BatchBuilder(lambda _n, Y=now: Y, {"X": X.shape})
        b.add([op])
        U, V = b.updates()["X"]
        Us.append(U)
        Vs.append(V)
    return np.hstack(Us), np.hstack(Vs)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 40), st.booleans())
def test_a_batch_is_the_hstack_of_its_ops(seed, k, mixed):
    rng = np.random.default_rng(seed)
    m, n = int(rng.integers(k + 1, 3 * k + 8)), int(rng.integers(1, 9))
    X = rng.standard_normal((m, n))
    ops = _ops(rng, m, n, k, mixed)
    b = BatchBuilder(lambda _n: X, {"X": (m, n)})
    b.add(ops)
    U, V = b.updates()["X"]
    U0, V0 = _by_hand(X, ops)
    np.testing.assert_allclose(U @ V.T, U0 @ V0.T, rtol=1e-12, atol=1e-12)
    if not mixed:  # one term per op: the very arrays, in C order
        assert np.array_equal(U, U0) and np.array_equal(V, V0)
        assert U.flags.c_contiguous and V.flags.c_contiguous
    plain, rows = b.updates(rows=True)
    if mixed:  # a row twice, a column: the general form
        assert not rows and np.array_equal(plain["X"][0], U)
    else:
        i, D = rows["X"]
        assert not plain and np.array_equal(i, np.argmax(U, axis=0))
        assert np.array_equal(D, V.T)
        A = X.copy()
        A[i] += D
        assert np.array_equal(A, X + U @ V.T)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 60), st.booleans())
def test_unit_columns_add_exactly_however_many_rows(seed, k, fortran):
    """More rows than ``one_hot`` takes (a quarter of A) too: A + P Qᵀ as NumPy's product
    gives it, bit for bit, and the kept rows put A back."""
    rng = np.random.default_rng(seed)
    m, n = int(rng.integers(k, 2 * k + 3)), int(rng.integers(1, 12))
    A = rng.standard_normal((m, n))
    A = np.asfortranarray(A) if fortran else A
    P = np.zeros((m, k))
    P[rng.choice(m, size=k, replace=False), rng.permutation(k)] = 1.0
    Q = rng.standard_normal((n, k))
    assert kernels.unit_columns(P) is not None
    before = A.copy()
    kernels.add_outer(A, P, Q)
    assert np.array_equal(A, before + P @ Q.T)
    B = before.copy(order="K")
    where, old = kernels.add_outer_keeping(B, P, Q)
    assert np.array_equal(B, A)
    B[where] = old
    assert np.array_equal(B, before)
    P2 = P.copy()
    P2[np.flatnonzero(P[:, 0])[0], 0] = 2.0  # not a unit column: the general path
    assert kernels.unit_columns(P2) is None
    if k > 1:
        P3 = P.copy()
        P3[:, 1] = P[:, 0]  # two columns on one row
        assert kernels.unit_columns(P3) is None


@settings(max_examples=6, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 30))
def test_reevaluating_row_changes_equals_the_dense_factor(seed, k):
    """``reevaluate_updates({}, rows)`` leaves every view as ``reevaluate_updates`` with
    the dense (U, V) does, bit for bit."""
    rng = np.random.default_rng(seed)
    m, n = 40, 6
    X, Y = rng.standard_normal((m, n)), rng.standard_normal((m, 1))
    i = rng.choice(m, size=k, replace=False)
    D, E = rng.standard_normal((k, n)), rng.standard_normal((k, 1))
    U = np.zeros((m, k))
    U[i, np.arange(k)] = 1.0
    a, b = OLS.load(X=X, Y=Y), OLS.load(X=X, Y=Y)
    a.reevaluate_updates({"X": (U, D.T), "Y": (U, E.T)})
    b.reevaluate_updates({}, {"X": (i, D), "Y": (i, E)})
    for name in ("X", "Y", "beta"):
        assert np.array_equal(a._views[name], b._views[name]), name


def test_refused_row_changes_change_nothing():
    """X'X singular after the batch, or a change that is not finite: refused, with the
    inputs and every view as they were (the rows put back)."""
    views = OLS.load(X=np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),
                     Y=np.array([[1.0], [2.0], [3.0]]))
    before = {n: np.array(v) for n, v in views._views.items()}
    rows = {"X": (np.array([1, 2]), np.array([[0.0, -1.0], [-1.0, -1.0]])),
            "Y": (np.array([0]), np.array([[5.0]]))}
    with pytest.raises(linview.errors.LinviewError):
        views.reevaluate_updates({}, rows)
    assert all(np.array_equal(views._views[n], v) for n, v in before.items())
    with pytest.raises(linview.errors.LinviewError, match="NaN or Inf"):
        views.reevaluate_updates({}, {"Y": (np.array([0]), np.array([[np.inf]]))})
    assert all(np.array_equal(views._views[n], v) for n, v in before.items())
    views.reevaluate_updates({}, {"Y": (np.array([0]), np.array([[5.0]]))})
    assert views._views["Y"][0, 0] == 6.0
