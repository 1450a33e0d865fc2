"""A failed probe refreshes only the failing inverse's chain (``REFRESH`` in the generated
module): the inverse, the views computed from it, and the views it needs that are not kept.
Every other view keeps being maintained, in place; all views still match re-evaluation."""

import numpy as np
import pytest

import linview
from linview.compiler.plan import refresh_sets

TWO = ("function [P, Q, R] = two(X, A, B, C)\n  %#linview dynamic X\n"
       "  P = inv(X + A) * C;\n  Q = inv(X + B) * C;\n  R = X * C;\nend\n")
CHAINED = ("function [W, Z, S] = g(A, B)\n  W = inv(A);\n  Z = inv(A' * A + B) * W;\n"
           "  S = A + B;\nend\n")


@pytest.fixture(scope="module")
def two():
    return linview.compile(TWO, name="two")


def two_inputs(seed, n=8):
    rng = np.random.default_rng(seed)
    return rng, {"X": rng.standard_normal((n, n)),
                 "A": rng.standard_normal((n, n)) + 4 * np.eye(n),
                 "B": rng.standard_normal((n, n)) + 10 * np.eye(n),
                 "C": rng.standard_normal((n, 2))}


def test_refresh_sets_are_the_chains_of_each_inverse(two):
    sets = refresh_sets(two.plan, two.plan.transient)
    assert sets == {"P_inv": ("P_arg", "P_inv", "P"), "Q_inv": ("Q_arg", "Q_inv", "Q")}
    assert two.module_class.REFRESH == sets
    chained = linview.compile(CHAINED, name="g")
    sets = chained.module_class.REFRESH
    assert sets["W_inv"] == ("W_inv", "Z")  # the output W is the view W_inv
    assert sets["Z_inv"] == ("Z_arg", "Z_inv", "Z")


@pytest.mark.parametrize("seed", range(4))
def test_near_singular_inverse_refreshes_only_its_chain(two, seed):
    """Row 1 of X + A is driven towards row 0 (ε = 1e-8 to 1e-6), then separated, twice: the
    probes of P_inv fail and only P's chain is re-evaluated; Q_inv, Q and R are the same
    arrays from load to end (never re-evaluated, always maintained), and every view ends
    at re-evaluation and at numpy.linalg.solve."""
    rng, inputs = two_inputs(seed)
    v = two.load(**inputs)
    v._prober.rng = np.random.default_rng(100 + seed)
    unrelated = {k: v._views[k] for k in ("Q_inv", "Q", "R")}
    e1 = np.eye(8)[1]
    for eps in (1e-8, 1e-7, 1e-6, 1.0, 1e-8, 1e-6, 1.0):
        M = v["X"] + inputs["A"]
        before = v._views["P_inv"]
        try:
            v.update("X", e1, M[0] + eps * rng.standard_normal(8) - M[1])
        except linview.NumericalError as e:  # over the condition limit: nothing changed
            assert "P_inv" in str(e) and "condition estimate" in str(e)
            assert v._views["P_inv"] is before
            continue
        if v.last_fallback is not None:
            assert v.last_fallback["refreshed"] == ("P_arg", "P_inv", "P")
    assert v.stats["partial_refreshes"] >= 1
    assert v.stats["fallbacks"] == v.stats["partial_refreshes"]
    for k, a in unrelated.items():
        assert v._views[k] is a, f"{k} was re-evaluated"
    assert v.verify() < 1e-8
    X, A, B, C = (v[n] for n in "XABC")
    for out, M in (("P", X + A), ("Q", X + B)):
        ref = np.linalg.solve(M, C)
        assert np.abs(v[out] - ref).max() / np.abs(ref).max() < 1e-8
    np.testing.assert_allclose(v["R"], X @ C, rtol=1e-12, atol=1e-12)


def test_a_corrupted_inverse_is_refreshed_alone(two):
    _, inputs = two_inputs(7)
    v = two.load(**inputs)
    rng = np.random.default_rng(1)
    v.update("X", rng.standard_normal(8), 0.1 * rng.standard_normal(8))
    v._views["Q_inv"][2, 4] += 1e-6  # a silent error in one maintained inverse
    P_inv, Q_inv = v._views["P_inv"], v._views["Q_inv"]
    v.update("X", rng.standard_normal(8), 0.1 * rng.standard_normal(8))
    assert v.stats["probe_failures"] == 1 and v.stats["partial_refreshes"] == 1
    assert v.last_fallback["refreshed"] == ("Q_arg", "Q_inv", "Q")
    assert v._views["P_inv"] is P_inv and v._views["Q_inv"] is not Q_inv
    assert v.verify() < 1e-12
    v.update("X", rng.standard_normal(8), 0.1 * rng.standard_normal(8))  # Woodbury again
    assert v.stats["fallbacks"] == 1 and v.probes["Q_inv"]["residual"] < 1e-13


def test_a_refused_chain_changes_nothing(two):
    """The probe fails (condition estimate over the limit), the chain's re-evaluation is
    refused by rt.inv after the trigger ran again: every view is restored bit for bit."""
    _, inputs = two_inputs(3)
    v = two.load(**inputs, condition_limit=1e6)
    rng = np.random.default_rng(5)
    v.update("X", rng.standard_normal(8), 0.1 * rng.standard_normal(8))
    before = {k: a.copy() for k, a in v._views.items()}
    M = v["X"] + inputs["A"]
    with pytest.raises(linview.NumericalError, match=r"refused, nothing changed: cannot "
                       r"invert P_inv: its condition estimate .*would have condition"):
        v.update("X", np.eye(8)[1], M[0] + 1e-7 * rng.standard_normal(8) - M[1])
    for k, a in before.items():
        np.testing.assert_array_equal(v._views[k], a)
    assert v.updates == 1 and v.stats["fallbacks"] == 0
    v.update("X", rng.standard_normal(8), 0.1 * rng.standard_normal(8))
    assert v.verify() < 1e-10


def test_two_failing_probes_refresh_both_chains():
    """A chain whose re-run trigger fails another probe takes that inverse's chain too."""
    prog = linview.compile(CHAINED, name="g")
    rng = np.random.default_rng(2)
    v = prog.load(A=rng.standard_normal((6, 6)) + 5 * np.eye(6),
                  B=rng.standard_normal((6, 6)) + 5 * np.eye(6))
    v._views["W_inv"][1, 1] += 1e-6
    v._views["Z_inv"][0, 3] += 1e-6
    S = v._views["S"]
    v.update("A", rng.standard_normal(6), 0.1 * rng.standard_normal(6))
    assert v.stats["probe_failures"] == 2 and v.stats["partial_refreshes"] == 1
    assert set(v.last_fallback["refreshed"]) == {"W_inv", "Z", "Z_arg", "Z_inv"}
    assert v._views["S"] is S and v.verify() < 1e-12


def test_the_probe_rides_along_in_the_triggers_pass_and_still_sees_a_corrupted_inverse(
        monkeypatch):
    """OLS multiplies the probe's vector by inv(XᵀX) in the trigger's own pass over it (no
    extra pass); the stored inverse is still what is read, so a corruption is caught."""
    from linview.backends.numpy import probe as probe_mod

    prog = linview.compile_file("examples/ols.m", dims={"m": 60, "n": 40, "p": 1},
                                strategy="incr", least_squares="normal")  # Woodbury's probe
    assert "Wa=Wz_beta_inv" in prog.source
    rng = np.random.default_rng(2)
    v = prog.load(X=rng.standard_normal((60, 40)), Y=rng.standard_normal((60, 1)))
    passes = []
    real = probe_mod.matmul
    monkeypatch.setattr(probe_mod, "matmul",
                        lambda M, x: passes.append(M.shape) or real(M, x))
    for _ in range(3):
        v.update("X", np.eye(60)[:, rng.integers(60)], 0.1 * rng.standard_normal(40))
    assert passes.count((40, 40)) <= 1  # at most the first update's fresh vector
    assert v.verify() < 1e-10 and v.stats["probe_failures"] == 0
    v._views["beta_inv"][3, 5] += 1e-6  # a silent error in the maintained inverse
    v.update("X", np.eye(60)[:, 7], 0.1 * rng.standard_normal(40))
    assert v.stats["probe_failures"] == 1 and v.verify() < 1e-10
