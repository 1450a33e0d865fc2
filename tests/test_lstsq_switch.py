"""The rule of ``least_squares="auto"`` beyond a plain ``load()`` (issue 25): loads through a
view store or reusing views (``store=``, ``reuse=``) apply it, and views kept by the
normal equations switch to the stable form when their data become ill-conditioned during
updates (``linview/lstsq_switch.py``).  Differential: every answer against the exact
least-squares solution of the current float data (50 digits), within 10× the error of
``numpy.linalg.lstsq`` on the same data (``tests/test_lstsq_auto.py``'s measure)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import linview
from linview import lstsq_switch
from linview.errors import NumericalError

try:  # tests/ may or may not be a package
    from tests.test_lstsq_auto import EPS, data, error, exact, lstsq_error
except ImportError:  # pragma: no cover - depends on how pytest set sys.path
    from test_lstsq_auto import EPS, data, error, exact, lstsq_error

OLS = "function beta = ols(X, Y)\n  %#linview dynamic X Y\n" \
      "  beta = (X' * X) \\ (X' * Y);\nend\n"


def as_accurate_as_lstsq(views, F, y, rng) -> None:
    truth = exact(F, y)
    got = error(views["beta"], truth)
    assert got <= 10 * max(lstsq_error(F, y, truth, rng), F.shape[1] * EPS), got


def stable(views) -> bool:
    return getattr(views, "SOLVES", {}).get("beta", ("",))[0] == "cholesky"


# ------------------------------------------------------------------ (a) store=, reuse=
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(decades=st.floats(1.5, 3.5), how=st.sampled_from(["store", "store-again",
                                                         "reuse-live", "reuse-file"]),
       seed=st.integers(0, 2**16))
def test_loads_through_a_store_or_reusing_views_apply_the_rule(decades, how, seed,
                                                               tmp_path_factory):
    """κ = cond(F) from 30 to 1e4: over the rule's 10, under the 1e8 where the normal
    equations are refused (that path switched before); each way of offering views."""
    rng = np.random.default_rng(seed)
    F, y = data(rng, 40, 8, decades, 1e-3)
    prog = linview.compile(OLS, name="ols")
    tmp = tmp_path_factory.mktemp("offer")
    if how == "store":
        views = prog.load(X=F, Y=y, store=tmp / "store")
    elif how == "store-again":  # the second load reads the first one's entries
        prog.load(X=F, Y=y, store=tmp / "store").wait_for_store()
        views = prog.load(X=F, Y=y, store=tmp / "store")
        assert "beta" in views.reuse_report.reused
    elif how == "reuse-live":
        views = prog.load(X=F, Y=y, reuse=linview.compile(OLS, name="ols").load(X=F, Y=y))
    else:
        prog.load(X=F, Y=y).save(tmp / "s.npz")
        views = prog.load(X=F, Y=y, reuse=str(tmp / "s.npz"))
    assert stable(views), views.least_squares
    assert "chosen at load()" in views.least_squares
    as_accurate_as_lstsq(views, F, y, rng)
    row = np.zeros(40)
    row[3] = 1.0
    v = 0.1 * rng.standard_normal(8)
    views.update("X", row, v)
    F[3] += v
    as_accurate_as_lstsq(views, F, y, rng)


def test_well_conditioned_data_through_a_store_keep_the_normal_equations(tmp_path):
    rng = np.random.default_rng(1)
    F, y = rng.standard_normal((60, 5)), rng.standard_normal((60, 1))
    views = linview.compile(OLS, name="ols").load(X=F, Y=y, store=tmp_path / "s")
    assert not stable(views) and "by the normal equations" in views.least_squares


# ------------------------------------------------------------------ (b) during updates
def drift(views, F, rng, steps: int, gap: float, start: int = 0) -> None:
    """Row by row (from row ``start``), column 1 of F moved next to column 0 (``gap``
    apart): κ grows with every row changed."""
    m = F.shape[0]
    for i in range(start, start + steps):
        r = i % m
        d = np.zeros(F.shape[1])
        d[1] = F[r, 0] + gap * rng.standard_normal() - F[r, 1]
        u = np.zeros(m)
        u[r] = 1.0
        views.update("X", u, d)
        F[r] += d


@settings(max_examples=6, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**16), gap=st.sampled_from([1e-2, 1e-3, 1e-5]),
       every=st.sampled_from([4, 16]))
def test_data_that_become_ill_conditioned_switch_to_the_stable_form(seed, gap, every,
                                                                     monkeypatch):
    monkeypatch.setattr(lstsq_switch, "CHECK_EVERY", every)  # (the same for every input)
    rng = np.random.default_rng(seed)
    m, n = 48, 5
    F, y = rng.standard_normal((m, n)), rng.standard_normal((m, 1))
    views = linview.compile(OLS, name="ols").load(X=F, Y=y)
    assert not stable(views)
    drift(views, F, rng, 2 * m, gap)
    assert stable(views), views.least_squares
    sw = views.stats["least_squares_switch"]
    assert sw["update"] % every == 0 or "refused" in sw["because"], sw
    assert f"after update {sw['update']}" in views.least_squares
    assert views.updates == 2 * m
    as_accurate_as_lstsq(views, F, y, rng)
    views.update("Y", np.eye(m)[0], np.ones(1))  # the stable form's updates go on
    y[0] += 1.0
    as_accurate_as_lstsq(views, F, y, rng)


def test_an_update_the_normal_equations_refuse_switches_instead(monkeypatch):
    """One dense change makes two columns 1e-9 apart: the inverse's condition is past its
    limit at once, and the update is taken by the stable form, not refused."""
    monkeypatch.setattr(lstsq_switch, "CHECK_EVERY", 10**9)  # no scheduled check
    rng = np.random.default_rng(5)
    F, y = rng.standard_normal((30, 4)), rng.standard_normal((30, 1))
    prog = linview.compile(OLS, name="ols")
    views = prog.load(X=F, Y=y)
    d = F[:, 0] + 1e-9 * rng.standard_normal(30) - F[:, 1]
    views.update("X", d, np.eye(4)[1])
    F[:, 1] += d
    assert stable(views)
    assert "refused" in views.stats["least_squares_switch"]["because"]
    assert "switched from the normal equations" in prog.explain(views=views)
    as_accurate_as_lstsq(views, F, y, rng)


def test_the_normal_form_asked_for_is_never_switched(monkeypatch):
    monkeypatch.setattr(lstsq_switch, "CHECK_EVERY", 1)
    rng = np.random.default_rng(6)
    F, y = rng.standard_normal((30, 4)), rng.standard_normal((30, 1))
    views = linview.compile(OLS, name="ols", least_squares="normal").load(X=F, Y=y)
    d = F[:, 0] + 1e-9 * rng.standard_normal(30) - F[:, 1]
    with pytest.raises(NumericalError, match="refused, nothing changed"):
        views.update("X", d, np.eye(4)[1])
    assert not stable(views)


def test_a_restored_run_switches_at_the_same_update(tmp_path, monkeypatch):
    """The check runs at fixed update counts on the data alone (power iterations from a
    fixed start), so a run saved before the switch and restored switches where the run
    that never stopped did."""
    monkeypatch.setattr(lstsq_switch, "CHECK_EVERY", 8)
    rng = np.random.default_rng(7)
    F0, y = rng.standard_normal((40, 5)), rng.standard_normal((40, 1))
    prog = linview.compile(OLS, name="ols")
    runs = []
    for stop in (None, 5):
        F = F0.copy()
        views = prog.load(X=F, Y=y)
        r = np.random.default_rng(70)
        if stop is not None:
            drift(views, F, r, stop, 1e-4)
            views.save(tmp_path / "s.npz")
            views = linview.restore(tmp_path / "s.npz")
        drift(views, F, r, 80 - (stop or 0), 1e-4, start=stop or 0)
        runs.append(views)
        as_accurate_as_lstsq(views, F, y, rng)
    a, b = runs
    assert stable(a) and stable(b)
    assert a.stats["least_squares_switch"] == b.stats["least_squares_switch"]
    np.testing.assert_allclose(b["beta"], a["beta"], rtol=1e-9)
