"""Least squares on Spark (issue 25): ``least_squares="auto"`` applies the rule of
:func:`linview.lstsq.loaded` to views loaded on Spark, and a load whose normal equations
are refused (condition estimate of XᵀX over 1e10) falls back to the stable form, whose
QR factor of X lives on the Spark driver (``backends/spark/solve_module.py``).

Differential: each answer, at load and after row updates of X, against the exact
least-squares solution of the float data (50-digit ``mpmath``), within 10× of
``numpy.linalg.lstsq``'s error measured the same way (:mod:`tests.test_lstsq_auto`).
Sizes are small (each Spark action costs 0.1-0.5 s); ``distribute_min=2`` puts X and the
other views in blocks, so the stable form collects them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import linview
from linview.backends.spark.octave import DriverLimit
from linview.backends.spark.solve_module import SparkSolveModule

try:  # tests/ may or may not be a package
    from tests.test_lstsq_auto import EPS, NORMAL, data, error, exact, lstsq_error
except ImportError:  # pragma: no cover - depends on how pytest set sys.path
    from test_lstsq_auto import EPS, NORMAL, data, error, exact, lstsq_error

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

OLS = Path(__file__).resolve().parent.parent / "examples" / "ols.m"
INV = "function beta = f(X, y)\n  beta = inv(X' * X) * (X' * y);\nend\n"
BACKSLASH = "function beta = f(X, y)\n  beta = X \\ y;\nend\n"
OPTIONS = {"distribute_min": 2, "partitions": 2}


def scaled(rng, n: int = 60, decades: float = 6.0):
    """A Gaussian n×n X with columns scaled from 1 to 10^-decades (cond(X) about
    10^decades, cond(XᵀX) its square) and a consistent y = X·beta."""
    X = rng.standard_normal((n, n)) * np.logspace(0, -decades, n)
    return X, X @ rng.standard_normal((n, 1))


def within_lstsq(views, X, y, rng, updates: int = 2) -> None:
    """The views' beta within 10× lstsq's error on the current data, at load and after
    ``updates`` row changes of X."""
    m, n = X.shape
    for step in range(updates + 1):
        truth = exact(X, y)
        theirs, ours = lstsq_error(X, y, truth, rng), error(views["beta"], truth)
        assert ours <= 10 * max(theirs, n * EPS), (step, ours, theirs)
        if step == updates:
            return
        i = rng.integers(m)
        u, v = np.zeros((m, 1)), 1e-2 * np.linalg.norm(X[i]) * rng.standard_normal((n, 1))
        u[i, 0] = 1.0
        views.update("X", u, v)
        X = X + u @ v.T


@pytest.mark.parametrize("source", ["ols.m", "inv"])
def test_a_refused_load_keeps_the_stable_form_on_spark(source, spark, tmp_path):
    """cond(X) about 1e7: the estimate of cond(XᵀX) is over the 1e10 limit, so the normal
    equations are refused; the load compiles the stable form for Spark and loads it with
    the same options, accurate as lstsq after row updates, and says why.  A state saved
    from it is restored by the program as the stable form on Spark, bit for bit."""
    rng = np.random.default_rng(1)
    X, y = scaled(rng)
    assert 1e5 < np.linalg.cond(X) < 1e8
    prog = (linview.compile_file(OLS, backend="spark") if source == "ols.m"
            else linview.compile(INV, name="f", backend="spark"))
    inputs = {"X": X, "Y" if source == "ols.m" else "y": y}
    views = prog.load(spark=spark, **inputs, **OPTIONS)
    assert isinstance(views, SparkSolveModule)
    assert views._ctx.sc is spark.sparkContext and views._ctx.partitions == 2
    assert views.least_squares.startswith("least squares of X by QR updates of the factor "
                                          "(the normal equations were refused: the "
                                          "condition estimate of XᵀX is ")
    assert "over the limit 1e+10" in views.least_squares
    within_lstsq(views, X, y, rng)
    views.save(tmp_path / "state.npz")
    back = linview.restore(tmp_path / "state.npz", program=prog, spark=spark, **OPTIONS)
    assert isinstance(back, SparkSolveModule) and back.least_squares == views.least_squares
    np.testing.assert_array_equal(back["beta"], views["beta"])
    views.release()
    back.release()


def test_the_auto_rule_on_spark(spark):
    """cond(X) = 1e3 (cond(XᵀX) 1e6, under the limit): the normal equations load, but
    their error is about κ = 1e3 times lstsq's, so the default keeps X's factor on the
    driver instead, within 10× of lstsq after row updates; ``least_squares="normal"``
    keeps Woodbury on Spark, and misses that by far."""
    rng = np.random.default_rng(3)
    X, y = data(rng, 16, 16, 3.0, 0.0)
    woodbury = linview.compile(NORMAL, name="f", backend="spark", least_squares="normal") \
        .load(X=X, y=y, spark=spark, **OPTIONS)
    assert not isinstance(woodbury, SparkSolveModule)
    truth = exact(X, y)
    assert error(woodbury["beta"], truth) > 10 * lstsq_error(X, y, truth, rng)
    woodbury.release()
    prog = linview.compile(NORMAL, name="f", backend="spark")
    views = prog.load(X=X, y=y, spark=spark, **OPTIONS)
    assert isinstance(views, SparkSolveModule)
    assert views.least_squares.startswith("least squares of X by QR updates of the factor "
                                          "(chosen at load(): the normal equations' error "
                                          "is about κ = ")
    assert views.least_squares in prog.explain(views=views)
    within_lstsq(views, X, y, rng)
    views.release()


def test_well_conditioned_data_keep_the_normal_equations_on_spark(spark):
    rng = np.random.default_rng(5)
    X, y = rng.standard_normal((60, 8)), rng.standard_normal((60, 1))
    views = linview.compile(NORMAL, name="f", backend="spark").load(
        X=X, y=y, spark=spark, **OPTIONS)
    assert not isinstance(views, SparkSolveModule)
    assert "within the 10× that keeps them" in views.least_squares
    within_lstsq(views, X, y, rng, updates=1)
    views.release()


def test_a_design_over_the_driver_limit(spark):
    """X (80×20, 1,600 entries) over ``driver_max_elements=1000``: with cond(X) = 1e3 the
    normal equations stay (the stable form could not hold X's factor on the driver) and
    say so; with cond(X) = 1e6 their refusal leads to the stable form's own refusal, made
    before X is collected."""
    rng = np.random.default_rng(7)
    prog = linview.compile(NORMAL, name="f", backend="spark")
    X, y = data(rng, 80, 20, 3.0, 0.0)
    views = prog.load(X=X, y=y, spark=spark, driver_max_elements=1000, **OPTIONS)
    assert not isinstance(views, SparkSolveModule)
    assert "X (80×20) is above the Spark driver limit driver_max_elements = 1,000" \
        in views.least_squares
    assert error(views["beta"], exact(X, y)) < 1e-6  # (cond(XᵀX)·eps: 1e-10)
    views.release()
    X, y = data(rng, 80, 20, 6.0, 0.0)
    with pytest.raises(DriverLimit, match=r"its design F \(80×20, 1,600 entries\) is "
                                          r"above the driver limit"):
        prog.load(X=X, y=y, spark=spark, driver_max_elements=1000, **OPTIONS)


def test_a_rank_deficient_tall_backslash_is_pinv_on_spark(spark):
    """A repeated column: ``X \\ y`` is Octave's minimum-norm answer (pinv) on Spark."""
    rng = np.random.default_rng(9)
    X = rng.standard_normal((30, 6))
    X[:, 5] = X[:, 4]
    y = rng.standard_normal((30, 1))
    views = linview.compile(BACKSLASH, name="f", backend="spark").load(
        X=X, y=y, spark=spark, **OPTIONS)
    assert views.least_squares.startswith("minimum-norm least squares of X by pinv")
    want = np.linalg.pinv(X) @ y
    assert error(views["beta"], want) < 1e-10
    views.release()
