"""No silent wrong answer: the randomized probe of maintained inverses, the condition limit
of ``rt.inv``, huge updates, and ``verify()`` that reports instead of raising."""

from pathlib import Path

import mpmath
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import linview
from linview.backends.numpy import runtime as rt

try:  # tests/ may or may not be a package
    from tests.octave_runner import octave_available, run_octave
except ImportError:  # pragma: no cover - depends on how pytest set sys.path
    from octave_runner import octave_available, run_octave

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

OLS = "function beta = ols(X, Y)\n  beta = (X' * X) \\ (X' * Y);\nend\n"
INV_SUM = "function Z = f(A, B)\n  %#linview dynamic A\n  Z = inv(A + B) * A;\nend\n"


@pytest.fixture(scope="module")
def ols():
    # the subject is the Woodbury form's probe and condition limit: with the default
    # ("auto") an update they refuse switches to QR updates instead (test_lstsq_switch.py)
    return linview.compile(OLS, name="ols", least_squares="normal")


@pytest.fixture(scope="module")
def inv_sum():
    return linview.compile(INV_SUM, name="f")


def near_singular_stream(prog, seed, rows=30, **options):
    """X (40×10) has column 1 driven towards column 0 (ε = 1e-9, 1e-5, 1e-4, 1e-1), then
    separated (ε = 1) and replaced by a fresh random column, then ``rows`` row updates.  Each
    step sets the column from the current X, so a refused step leaves the stream going.
    Returns the views, the refusals and beta's relative error against lstsq."""
    rng = np.random.default_rng(seed)
    v = prog.load(X=rng.standard_normal((40, 10)), Y=rng.standard_normal((40, 1)), **options)
    e1 = np.eye(10)[1]
    refused = 0
    for eps in (1e-9, 1e-5, 1e-4, 1e-1, 1.0, None):
        x0 = v["X"][:, 0]
        new = rng.standard_normal(40) if eps is None else x0 + eps * rng.standard_normal(40)
        try:
            v.update("X", new - v["X"][:, 1], e1)
        except linview.NumericalError as e:
            assert "beta_inv" in str(e) and "condition estimate" in str(e)
            refused += 1
    for _ in range(rows):
        u = np.zeros(40)
        u[rng.integers(40)] = 1.0
        v.update("X", u, 0.1 * rng.standard_normal(10))
    ref = np.linalg.lstsq(v["X"], v["Y"], rcond=None)[0]
    return v, refused, float(np.abs(v["beta"] - ref).max() / np.abs(ref).max())


@pytest.mark.parametrize("seed", range(4))
def test_near_singular_then_separated_ols_ends_at_lstsq(ols, seed):
    v, refused, err = near_singular_stream(ols, seed)
    assert np.linalg.cond(v["X"]) < 10
    assert err < 1e-8
    assert refused == 2  # ε = 1e-9 and 1e-5: cond(XᵀX) over the limit
    assert v.stats["probe_failures"] >= 1  # the inverse carried from ε = 1e-4 is caught
    assert v.stats["fallbacks"] == v.stats["probe_failures"]
    # without the probe and the condition limit the same stream ends far from lstsq
    _, refused_old, err_old = near_singular_stream(ols, seed, probe=False,
                                                   condition_limit=1e300)
    assert refused_old == 0 and err_old > 1e-7


@pytest.mark.octave
def test_near_singular_stream_agrees_with_octave():
    """GNU Octave, running examples/ols.m on the stream's final inputs, is the second
    reference."""
    if not octave_available():
        pytest.skip("octave-cli (GNU Octave) is not installed")
    prog = linview.compile_file(EXAMPLES / "ols.m")
    v, _, err = near_singular_stream(prog, 5)
    octave = run_octave(EXAMPLES / "ols.m", {"X": v["X"], "Y": v["Y"]}, ["beta"])["beta"]
    ref = np.asarray(octave).reshape(v["beta"].shape)
    assert err < 1e-8
    assert np.abs(v["beta"] - ref).max() / np.abs(ref).max() < 1e-8


def _truth(A, B):
    """inv(A + B) A in 60-digit arithmetic."""
    with mpmath.workdps(60):
        Z = mpmath.matrix((A + B).tolist()) ** -1 * mpmath.matrix(A.tolist())
        return np.array(Z.tolist(), dtype=float)


@pytest.mark.parametrize("scale", [1e3, 1e12, 1e16, 1e50, 1e200])
def test_huge_updates_are_correct_or_refused_with_nothing_changed(inv_sum, scale):
    rng = np.random.default_rng(int(np.log10(scale)))
    A = rng.standard_normal((10, 10)) + 8 * np.eye(10)
    B = rng.standard_normal((10, 10))
    v = inv_sum.load(A=A, B=B)
    before = {k: a.copy() for k, a in v._views.items()}
    u, w = scale * rng.standard_normal(10), rng.standard_normal(10)
    try:
        v.update("A", u, w)
    except linview.NumericalError as e:
        assert "Z_inv" in str(e) and "condition estimate" in str(e)
        for k, a in before.items():
            np.testing.assert_array_equal(v._views[k], a)
        assert v.updates == 0 and v.verify() < 1e-12
        assert scale >= 1e12
        return
    T = _truth(v["A"], B)
    assert np.abs(v["Z"] - T).max() / np.abs(T).max() < 1e-8
    assert scale < 1e12


def test_a_huge_update_cannot_hide_from_the_probe_vector(inv_sum):
    """The condition estimate bounds ‖A'‖ ‖W'‖ from below with the columns the update
    changes most, so a probe vector nearly orthogonal to a huge rank-1 update (a chance
    event for one draw) does not let it through: 60 draws, every one refused."""
    for seed in range(60):
        rng = np.random.default_rng(seed)
        A = rng.standard_normal((10, 10)) + 8 * np.eye(10)
        v = inv_sum.load(A=A, B=rng.standard_normal((10, 10)))
        v._prober.rng = np.random.default_rng(1000 + seed)
        with pytest.raises(linview.NumericalError, match="condition estimate"):
            v.update("A", 1e12 * rng.standard_normal(10), rng.standard_normal(10))
        np.testing.assert_array_equal(v["A"], A)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 2), st.floats(-2, 14), st.integers(0, 2**31)),
                min_size=1, max_size=6))
def test_update_sequences_are_accurate_or_refused(updates):
    """Random streams of rank-1 updates of magnitude 10^e on ``inv(A + B) * A``: after each
    one Z is within max(1e-8, 100 ε κ(A + B)) of 60-digit truth (re-evaluation in double
    precision is accurate to about ε κ, no better), or the update was refused and nothing
    changed."""
    prog = linview.compile(INV_SUM, name="f")
    rng = np.random.default_rng(0)
    A = rng.standard_normal((6, 6)) + 6 * np.eye(6)
    B = rng.standard_normal((6, 6))
    v = prog.load(A=A, B=B)
    for row, e, seed in updates:
        r = np.random.default_rng(seed)
        u = np.zeros(6)
        u[row] = 10.0 ** e
        before = {k: a.copy() for k, a in v._views.items()}
        try:
            v.update("A", u, r.standard_normal(6))
        except linview.NumericalError:
            for k, a in before.items():
                np.testing.assert_array_equal(v._views[k], a)
            continue
        T = _truth(v["A"], B)
        bound = max(1e-8, 100 * np.finfo(float).eps * np.linalg.cond(v["A"] + B))
        assert np.abs(v["Z"] - T).max() / np.abs(T).max() < bound


INV2 = "function [W, Z] = g(A, B)\n  W = inv(A);\n  Z = inv(A' * A + B) * W;\nend\n"


@pytest.mark.parametrize("strategy", [None, "incr", "hybrid", "reeval"])
@pytest.mark.parametrize("src", [OLS, INV_SUM, INV2], ids=["ols", "inv_sum", "inv2"])
def test_probe_raises_no_false_alarms_under_every_strategy(src, strategy):
    """Every delta form of an inverse and its argument (factored, dense, new value) is
    probed: on well-conditioned streams the residual stays at rounding level, no update
    falls back, and the views match re-evaluation."""
    prog = linview.compile(src, name="p", strategy=strategy)
    rng = np.random.default_rng(3)
    shapes = {"X": (40, 8), "Y": (40, 2), "A": (8, 8), "B": (8, 8)}
    v = prog.load(**{n: rng.standard_normal(shapes[n]) + (5 * np.eye(8) if n in "AB" else 0)
                     for n in prog.module_class.INPUTS})
    for i in range(12):
        x = v.DYNAMIC[i % len(v.DYNAMIC)]
        r, c = shapes[x]
        k = 1 + i % 3
        v.update(x, 0.05 * rng.standard_normal((r, k)), 0.05 * rng.standard_normal((c, k)))
    assert v.stats["probe_failures"] == 0 and v.stats["fallbacks"] == 0
    maintained = any(vd.inverse_of and vd.strategy.value != "reeval" and not t.reevaluate
                     for t in prog.plan.triggers.values() for vd in t.deltas)
    assert bool(v.probes) == maintained  # a trigger that re-evaluates has nothing to probe
    assert all(p["residual"] < 1e-13 for p in v.probes.values())
    assert v.verify() < 1e-12


def test_probe_catches_a_corrupted_inverse_and_refreshes(ols):
    rng = np.random.default_rng(1)
    v = ols.load(X=rng.standard_normal((30, 6)), Y=rng.standard_normal((30, 1)))
    v.update("X", np.eye(30)[3], rng.standard_normal(6))
    v._views["beta_inv"][2, 4] += 1e-6  # a silent error in the maintained inverse
    v.update("X", np.eye(30)[5], rng.standard_normal(6))
    assert v.stats["probe_failures"] == 1 and v.stats["fallbacks"] == 1
    assert v.verify() < 1e-12
    seen = v.probes["beta_inv"]  # the failed probe: its residual, over the allowance
    assert seen["residual"] > seen["allowed"] and seen["residual"] > 1e-8
    v.update("X", np.eye(30)[7], rng.standard_normal(6))  # Woodbury again, on the fresh W
    assert v.probes["beta_inv"]["residual"] < 1e-13 and v.stats["fallbacks"] == 1


def test_inv_refuses_condition_over_the_limit():
    X = np.random.default_rng(0).standard_normal((40, 10))
    X[:, 1] = X[:, 0] * (1 + 1e-12)
    G = X.T @ X  # cond ≈ 1e22, as in the report that found rt.inv accepting it
    with pytest.raises(linview.NumericalError, match=r"cannot invert G_inv: .*(condition "
                       r"estimate is [0-9.e+]+, over the limit 1e\+10|singular)"):
        rt.inv(G, "G_inv")
    H = np.diag([1.0, 1e-9])  # cond 1e9: accepted by default, refused under a lower limit
    np.testing.assert_allclose(rt.inv(H, "H"), np.diag([1.0, 1e9]))
    with pytest.raises(linview.NumericalError, match="condition estimate is 1e\\+09"):
        rt.inv(H, "H", limit=1e8)


def test_verify_reports_and_never_raises(inv_sum):
    rng = np.random.default_rng(2)
    v = inv_sum.load(A=rng.standard_normal((5, 5)) + 5 * np.eye(5),
                     B=rng.standard_normal((5, 5)))
    v._views["Z"][0, 0] += 1.0
    assert v.verify() > 1e-3 and v.verify(detail=True)["Z"] > 1e-3
    v._views["A"][...] = -v._views["B"]  # A + B = 0: re-evaluation is impossible
    assert v.verify() == float("inf") and "Z_inv" in v.verify_error
    with pytest.raises(linview.NumericalError):
        v.refresh()
