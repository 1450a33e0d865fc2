"""Correction while running on Spark (backends/spark/reevaluation.py): a Spark trigger module
times its updates, knows the re-evaluation on the cluster measured at load, switches
between maintaining and re-evaluating at most once per window, records each switch, and
its answers stay those of re-evaluation.  Timings are injected
(``views.adaptation.injected``): nothing here depends on the speed of the machine.  One
local session for the whole file."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import linview
from linview.backends.numpy.adaptive import SLOWER, WINDOW

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

M, N, P = 24, 6, 2
#: small views distributed in 2×2 blocks, so that the triggers and the re-evaluation run
#: as Spark jobs
OPTS = {"distribute_min": 2, "partitions": 2}


@pytest.fixture(scope="module")
def ols():
    from conftest import EXAMPLES

    # maintained (the cost model re-evaluates such small programs as a whole)
    return linview.compile_file(EXAMPLES / "ols.m", dims={"m": M, "n": N, "p": P},
                                backend="spark", strategy="incr")


def load(prog, spark, seed: int):
    rng = np.random.default_rng(seed)
    X, Y = rng.standard_normal((M, N)), rng.standard_normal((M, P))
    return prog.load(X=X, Y=Y, spark=spark, **OPTS), rng


def update(views, rng, kind: str) -> None:
    x = "X" if kind != "Y" else "Y"
    cols = N if x == "X" else P
    U = np.eye(M)[:, [rng.integers(M)]] if kind == "row" else rng.standard_normal((M, 1))
    views.update(x, U, 0.1 * rng.standard_normal((cols, 1)) / np.sqrt(cols))


def reference(views) -> np.ndarray:
    """beta by NumPy's least squares from the module's own inputs (re-evaluation, by
    another road)."""
    return np.linalg.lstsq(views["X"], views["Y"], rcond=None)[0]


def test_the_reevaluation_on_the_cluster_is_measured_at_load_and_a_restore_has_none(
        ols, spark, tmp_path):
    views, rng = load(ols, spark, 1)
    a = views.adaptation
    assert set(a.inputs) == {"X", "Y"} and a.threads == {}  # strategy only, no threads
    assert a.reeval_s is not None and a.reeval_s > 0  # timed, not assumed
    assert set(a.modes("X")) == {"maintain", "reeval"}
    views.save(tmp_path / "s.npz")
    again = linview.restore(tmp_path / "s.npz", program=ols, spark=spark, **OPTS)
    assert again.adaptation.reeval_s is None  # nothing measured: it never switches
    again.adaptation.injected = lambda name, mode: 100.0
    again.adaptation.enabled = True
    for _ in range(WINDOW):  # a decision's point: slower than anything, and no switch
        update(again, rng, "dense")
    assert again.stats["switches"] == []


def test_slow_maintenance_switches_to_reevaluation_on_the_cluster_and_back(ols, spark):
    views, rng = load(ols, spark, 2)
    timings = {"maintain": 2.0, "reeval": 1.0}
    views.adaptation.reeval_s = 1.0
    views.adaptation.injected = lambda name, mode: timings[mode]
    views.adaptation.enabled = True  # off under the reference rates the suite plans with
    for i in range(WINDOW):
        assert views.stats["switches"] == [], i  # no decision before a window is full
        update(views, rng, "dense")
    [switch] = views.stats["switches"]
    assert (switch["input"], switch["from"], switch["to"]) == ("X", "maintain", "reeval")
    assert switch["update"] == WINDOW - 1
    assert views.adaptation.reevaluates("X") and not views.adaptation.reevaluates("Y")
    calls = []
    real = views._reevaluate_trigger
    views._reevaluate_trigger = lambda *a: calls.append(a[0]) or real(*a)
    update(views, rng, "row")  # re-evaluated on the cluster, the views still in blocks
    assert calls == ["X"] and {"X", "beta_inv"} <= set(views.distributed())
    np.testing.assert_allclose(views["beta"], reference(views), atol=1e-9)
    timings["reeval"] = 2.0 * SLOWER * timings["maintain"]  # measured slower: back
    for _ in range(WINDOW - 1):
        update(views, rng, "row")
    assert [s["to"] for s in views.stats["switches"]] == ["reeval", "maintain"]
    calls.clear()
    for _ in range(3):  # maintained again, from the re-evaluated views
        update(views, rng, "dense")
    assert calls == []
    np.testing.assert_allclose(views["beta"], reference(views), atol=1e-9)
    assert views.verify() < 1e-9
    text = ols.explain(views=views)
    assert f"after update {WINDOW}: trigger of X now re-evaluates" in text
    assert f"after update {2 * WINDOW}: trigger of X now maintains" in text


@settings(max_examples=4, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2 ** 16),
       steps=st.lists(st.tuples(st.sampled_from(["row", "dense", "Y"]),
                                st.sampled_from([0.1, 1.0, 10.0]),
                                st.sampled_from([0.1, 1.0, 10.0])),
                      min_size=WINDOW, max_size=2 * WINDOW + 2))
def test_answers_equal_reevaluation_whatever_the_switches(ols, spark, seed, steps):
    """Random updates of both inputs under random injected timings, so that switches
    happen at random points both ways: the answer equals least squares from the inputs
    after every update, and the views re-evaluation at the end."""
    views, rng = load(ols, spark, seed)
    views.adaptation.reeval_s = 1.0
    now = {}
    views.adaptation.injected = lambda _name, mode: now[mode]
    views.adaptation.enabled = True
    for kind, maintain, reeval in steps:
        now.update(maintain=maintain, reeval=reeval)
        update(views, rng, kind)
        np.testing.assert_allclose(views["beta"], reference(views), atol=1e-8,
                                   err_msg=str(views.stats["switches"]))
    assert views.verify() < 1e-8, views.stats["switches"]
