"""Row updates (``U = e_i``: one observation of X, one row of A changes) take the gather
paths of the NumPy runtime (``kernels.dot``, single-entry columns of stacked factors in
``kernels.fused_dot``, rows added to a view in place); the same change written as a
dense factorisation takes the passes.  Both must give the views re-evaluation gives, at
sizes where the views are large (``kernels.WIDE_MIN``), pending low-rank terms included."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import linview

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

N = 1100  # n² above WIDE_MIN: the one-pass kernel, gathers and pending terms
POW16 = """function D = pow16(A)
  %#linview dims A(n,n)
  D = A^16;
end
"""


def _as_dense(U, V, rng):
    """The change ``U Vᵀ`` as ``[U + w, -w] [V, V]ᵀ``: no factor is one-hot."""
    w = rng.standard_normal(U.shape)
    return np.hstack([U + w, -w]), np.hstack([V, V])


def _row_update(rng, rows, cols, scale):
    U = np.zeros((rows, 1))
    U[rng.integers(rows)] = rng.choice([-1.0, 1.0]) * rng.uniform(0.5, 2.0)  # c·e_i
    return U, scale * rng.standard_normal((cols, 1)) / np.sqrt(cols)


@settings(max_examples=4, deadline=None)
@given(st.integers(0, 2**32 - 1), st.lists(st.booleans(), min_size=3, max_size=6))
def test_pow16_row_and_dense_updates_give_the_same_views(seed, dense):
    rng = np.random.default_rng(seed)
    prog = linview.compile(POW16, name="pow16", dims={"n": N})
    A = 0.6 * np.eye(N) + 0.3 * rng.standard_normal((N, N)) / np.sqrt(N)
    rows, other = prog.load(A=A), prog.load(A=A)
    for d in dense:
        U, V = _row_update(rng, N, N, 0.1)
        rows.update("A", U, V)
        other.update("A", *(_as_dense(U, V, rng) if d else (U, V)))
        A = A + U @ V.T
    want = np.linalg.matrix_power(A, 16)
    scale = np.abs(want).max()
    for views in (rows, other):
        assert np.abs(views["D"] - want).max() <= 1e-11 * scale
    assert np.abs(rows["D"] - other["D"]).max() <= 1e-11 * scale


@settings(max_examples=3, deadline=None)
@given(st.integers(0, 2**32 - 1), st.lists(st.booleans(), min_size=3, max_size=5))
def test_ols_row_and_dense_updates_give_the_same_views(seed, dense):
    rng = np.random.default_rng(seed)
    prog = linview.compile_file(EXAMPLES / "ols.m", dims={"m": N, "n": N, "p": 1},
                                least_squares="normal")  # the Woodbury trigger's paths
    X = rng.standard_normal((N, N)) + 2 * np.sqrt(N) * np.eye(N)
    Y = rng.standard_normal((N, 1))
    rows, other = prog.load(X=X, Y=Y), prog.load(X=X, Y=Y)
    for d in dense:
        U, V = _row_update(rng, N, N, np.sqrt(N))
        rows.update("X", U, V)
        other.update("X", *(_as_dense(U, V, rng) if d else (U, V)))
        X = X + U @ V.T
    want = np.linalg.solve(X.T @ X, X.T @ Y)
    for views in (rows, other):
        np.testing.assert_allclose(views["beta"], want, rtol=1e-8, atol=1e-12)
        assert views.verify() < 1e-8
    np.testing.assert_allclose(rows["beta"], other["beta"], rtol=1e-8, atol=1e-12)


def test_the_memory_floor_reads_what_a_row_update_must_read():
    """``linview bench``'s floor: one pass over each large view the trigger multiplies by a
    dense block.  OLS's row update reads inv(XᵀX) once and only a row of X (Xᵀ U is a
    gather); A^16's reads A, A², A⁴, A⁸ and never D, whose updates wait as pending terms."""
    from linview.app.bench import floor_views

    ols = linview.compile_file(EXAMPLES / "ols.m", dims={"m": 4000, "n": 4000, "p": 1})
    assert floor_views(ols.plan.triggers["X"], ols.plan.sizes.value) == {"beta_inv"}
    pow16 = linview.compile(POW16, name="pow16", dims={"n": 4000})
    assert floor_views(pow16.plan.triggers["A"], pow16.plan.sizes.value) == {
        "A", "A_pow2", "A_pow4", "A_pow8"}
