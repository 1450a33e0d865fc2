"""Pending low-rank terms (``backends/numpy/lowrank.py``): a large view that a trigger only
multiplies and updates keeps its updates as terms ``P Qᵀ``, folded at a rank budget.  Here
every view qualifies by size (``MIN_ELEMENTS = 0``) and the budget is tiny, so that terms
wait across updates, fold in the middle of streams, and meet every other path: reads of
outputs, other triggers, saving, verification, refused updates and partial refreshes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import Case, cases
from test_differential import SETTINGS, assert_close, check_views, compile_case, good_inputs

import linview
from linview.backends.numpy import lowrank
from linview.errors import UpdateError


@pytest.fixture(autouse=True)
def every_view_waits(monkeypatch):
    monkeypatch.setattr(lowrank, "MIN_ELEMENTS", 0)
    monkeypatch.setattr(lowrank, "FOLD_RANK", 3)


def _pending_ranks(views) -> dict[str, int]:
    return {n: p.rank for n, p in views._pending.items() if p.rank}


@settings(max_examples=60, **SETTINGS)
@given(case=cases(), fold=st.sampled_from([1, 3, 8]), read_at=st.integers(0, 6))
def test_views_with_pending_terms_track_reevaluation(case: Case, fold: int, read_at: int):
    """Random programs and update sequences; outputs read once in the middle (that read
    folds only what it reads), every view checked against re-evaluation at the end."""
    lowrank.FOLD_RANK = fold
    p = case.prog
    compiled = compile_case(case)
    inputs = good_inputs(p, case.seed)
    current = {k: v.copy() for k, v in inputs.items()}
    views = compiled.load(**inputs)
    for i, up in enumerate(case.updates):
        U, V = p.make_update(up.name, up.rank, up.seed, up.kind)
        current[up.name] = current[up.name] + U @ V.T
        views.update(up.name, U, V)
        if i == read_at:
            for o, value in views.outputs.items():
                assert np.all(np.isfinite(value)), o
    check_views(views, compiled, p, current, "after the stream")


def _powers(n=24, seed=0):
    prog = linview.compile_file("examples/powers.m", dims={"n": n}, strategy="incr")
    A = np.random.default_rng(seed).standard_normal((n, n)) / np.sqrt(n)
    return prog, A


def _dense_update(rng, n, k=1):
    return 0.05 * rng.standard_normal((n, k)), 0.05 * rng.standard_normal((n, k))


def test_terms_wait_then_fold_and_reads_see_them():
    prog, A = _powers()
    views = prog.load(A=A)
    rng = np.random.default_rng(1)
    U, V = _dense_update(rng, 24)
    views.update("A", U, V)
    assert _pending_ranks(views) == {"A": 1, "B": 2}  # C (rank 4), D (16) fold at once
    assert "self._lazy('B')" in prog.source
    A1 = A + U @ V.T
    np.testing.assert_allclose(views["C"], np.linalg.matrix_power(A1, 4), atol=1e-12)
    assert _pending_ranks(views) == {"A": 1, "B": 2}  # reading C folds nothing else
    U2, V2 = _dense_update(rng, 24)
    views.update("A", U2, V2)  # B: rank 4 > 3, folded
    assert _pending_ranks(views) == {"A": 2}
    A2 = A1 + U2 @ V2.T
    np.testing.assert_allclose(views["D"], np.linalg.matrix_power(A2, 16), atol=1e-10)
    assert views.verify() < 1e-10
    views.flush()
    assert _pending_ranks(views) == {}


def test_save_and_restore_keep_pending_terms(tmp_path):
    prog, A = _powers()
    views = prog.load(A=A)
    rng = np.random.default_rng(2)
    U, V = _dense_update(rng, 24)
    views.update("A", U, V)
    views.save(tmp_path / "s.npz")
    back = linview.restore(tmp_path / "s.npz")
    np.testing.assert_allclose(back["D"], views["D"], rtol=1e-13)
    assert back.verify() < 1e-10


def test_a_refused_update_changes_nothing_pending():
    prog, A = _powers()
    views = prog.load(A=A)
    rng = np.random.default_rng(3)
    views.update("A", *_dense_update(rng, 24))
    before = {n: p.rank for n, p in views._pending.items()}
    bad_U, V = _dense_update(rng, 24)
    bad_U[3, 0] = np.nan
    with pytest.raises(UpdateError):
        views.update("A", bad_U, V)
    assert {n: p.rank for n, p in views._pending.items()} == before
    assert views.verify() < 1e-10


def test_partial_refresh_with_pending_terms():
    """A corrupted inverse whose trigger keeps pending terms: the probe (with its vector
    in the trigger's pass) catches it and only its chain is re-evaluated."""
    src = ("function [P, Q] = two(X, A, B, C)\n  %#linview dynamic X\n"
           "  P = inv(X + A) * C;\n  Q = inv(X + B) * C;\nend\n")
    prog = linview.compile(src, name="two", strategy="incr")
    rng = np.random.default_rng(4)
    n = 12
    v = prog.load(X=rng.standard_normal((n, n)), A=rng.standard_normal((n, n)) + 5 * np.eye(n),
                  B=rng.standard_normal((n, n)) + 9 * np.eye(n), C=rng.standard_normal((n, 2)))
    for _ in range(2):
        v.update("X", *_dense_update(rng, n))
    assert _pending_ranks(v)
    v._current("Q_inv").base[2, 4] += 1e-6  # a silent error in one maintained inverse
    v.update("X", *_dense_update(rng, n))
    assert v.stats["probe_failures"] == 1 and v.stats["partial_refreshes"] == 1
    assert v.verify() < 1e-10


def test_small_views_are_updated_in_place_as_before(monkeypatch):
    monkeypatch.setattr(lowrank, "MIN_ELEMENTS", 10_000)
    prog, A = _powers()
    views = prog.load(A=A)
    views.update("A", *_dense_update(np.random.default_rng(5), 24))
    assert views._pending == {}
    assert views.verify() < 1e-10


def test_transposed_products_of_pending_views():
    rng = np.random.default_rng(6)
    base = rng.standard_normal((30, 20))
    p = lowrank.Pending(np.asfortranarray(base.copy()))
    P, Q = rng.standard_normal((30, 2)), rng.standard_normal((20, 2))
    p.add(P, Q)
    value = base + P @ Q.T
    B, C = rng.standard_normal((20, 3)), rng.standard_normal((30, 2))
    got = lowrank.fused_dot(p, B, C, ops="NT")
    assert_close(got[0], value @ B, 1e-13, "N")
    assert_close(got[1], value.T @ C, 1e-13, "T")
    got = lowrank.fused_dot(p.T, C, B, ops="NT")
    assert_close(got[0], value.T @ C, 1e-13, "Tᵀ N")
    assert_close(got[1], value @ B, 1e-13, "Tᵀ T")
    assert_close(lowrank.dot(p.T, C), value.T @ C, 1e-13, "dot of the transpose")
    assert_close(p @ B, value @ B, 1e-13, "@")
    assert_close(p.column(4), value[:, 4:5], 1e-13, "a column")
    assert p.T.shape == (20, 30) and p.T.T is p


def test_a_refused_chain_leaves_no_pending_term():
    """The chain's re-evaluation is refused after the trigger ran again (adding terms):
    the rollback drops them, and every view reads as before, bit for bit."""
    from test_reliability_refresh import TWO, two_inputs

    prog = linview.compile(TWO, name="two", strategy="incr")
    _, inputs = two_inputs(3)
    v = prog.load(**inputs, condition_limit=1e6)
    rng = np.random.default_rng(5)
    v.update("X", rng.standard_normal(8), 0.1 * rng.standard_normal(8))
    before = {k: a.copy() for k, a in v._views.items()}
    M = v["X"] + inputs["A"]
    with pytest.raises(linview.NumericalError, match="refused, nothing changed"):
        v.update("X", np.eye(8)[1], M[0] + 1e-7 * rng.standard_normal(8) - M[1])
    assert _pending_ranks(v) == {}
    for k, a in before.items():
        np.testing.assert_array_equal(v._views[k], a)
