"""No silent wrong answer on Spark: the randomized probe of maintained inverses runs on the
distributed views (matrix-vector products), with the NumPy backend's decisions, and a
failed probe refreshes the inverse's chain.  Few and small: Spark tests are slow."""

import numpy as np
import pytest

import linview

try:  # tests/ may or may not be a package
    from tests.test_reliability import INV_SUM, OLS, _truth, near_singular_stream
except ImportError:  # pragma: no cover - depends on how pytest set sys.path
    from test_reliability import INV_SUM, OLS, _truth, near_singular_stream

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

DIST = {"distribute_min": 2, "partitions": 2}  # every matrix view in distributed blocks


def test_near_singular_then_separated_ols_ends_at_lstsq_on_spark(spark):
    prog = linview.compile(OLS, name="ols", backend="spark")
    v, refused, err = near_singular_stream(prog, 0, rows=5, spark=spark, **DIST)
    assert {"X", "beta_inv"} <= set(v.distributed())
    assert "beta_arg" not in v._views  # XᵀX: read only through its inverse, not kept
    assert err < 1e-8 and np.linalg.cond(v["X"]) < 10
    assert refused == 2  # ε = 1e-9 and 1e-5: cond(XᵀX) over the limit
    assert v.stats["probe_failures"] >= 1 and v.probes["beta_inv"]["residual"] < 1e-12
    assert v.stats["fallbacks"] == v.stats["partial_refreshes"] >= 1
    assert v.last_fallback["refreshed"] == ("beta_arg", "beta_inv", "beta")
    assert v.verify() < 1e-8


@pytest.mark.parametrize("scale", [1e3, 1e12, 1e200])
def test_huge_updates_on_spark_are_correct_or_refused_with_nothing_changed(spark, scale):
    prog = linview.compile(INV_SUM, name="f", backend="spark")
    rng = np.random.default_rng(int(np.log10(scale)))
    A = rng.standard_normal((10, 10)) + 8 * np.eye(10)
    B = rng.standard_normal((10, 10))
    v = prog.load(A=A, B=B, spark=spark, **DIST)
    before = {k: v[k] for k in (*v.INPUTS, *v.VIEWS)}
    try:
        v.update("A", scale * rng.standard_normal(10), rng.standard_normal(10))
    except linview.NumericalError as e:
        assert "Z_inv" in str(e) and "condition estimate" in str(e)
        for k, a in before.items():
            np.testing.assert_array_equal(v[k], a)
        assert v.updates == 0 and scale >= 1e12
        return
    T = _truth(v["A"], B)
    assert np.abs(v["Z"] - T).max() / np.abs(T).max() < 1e-8
    assert v.probes["Z_inv"]["residual"] < 1e-12 and scale < 1e12
