"""NumPy's floating-point warnings never reach the command line: what they meant goes into
the error message (backends/numpy/numeric.py)."""

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import linview
from linview.backends.numpy import numeric
from linview.errors import NumericalError, UpdateError

ROOT = Path(__file__).resolve().parents[1]


def _run(tmp_path, X, records):
    rng = np.random.default_rng(0)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "Y.npy", rng.standard_normal((X.shape[0], 1)))
    (tmp_path / "u.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return subprocess.run(
        [sys.executable, "-m", "linview.app.cli", "run", str(ROOT / "examples" / "ols.m"),
         "--input", f"X={tmp_path / 'X.npy'}", "--input", f"Y={tmp_path / 'Y.npy'}",
         "--updates", str(tmp_path / "u.jsonl")],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONWARNINGS": "default"})


def test_a_record_of_1e200_gives_one_clean_error(tmp_path):
    """The issue's case: three RuntimeWarnings with source lines, then the error."""
    X = np.random.default_rng(1).standard_normal((40, 5))
    r = _run(tmp_path, X, [{"input": "X", "row": 3, "set": [1e200] * 5}])
    assert r.returncode == 2, r.stderr
    assert "RuntimeWarning" not in r.stderr and "<linview:" not in r.stderr
    assert r.stderr.count("\n") <= 2, r.stderr  # one error (and its hint), nothing else
    assert "refused, nothing changed" in r.stderr
    assert "NumPy reported overflow" in r.stderr and "reach 1e+200" in r.stderr


@pytest.mark.spark
def test_a_record_of_1e200_on_spark_gives_one_clean_error(tmp_path):
    pytest.importorskip("pyspark")
    rng = np.random.default_rng(1)
    np.save(tmp_path / "X.npy", rng.standard_normal((40, 5)))
    np.save(tmp_path / "Y.npy", rng.standard_normal((40, 1)))
    (tmp_path / "upd").mkdir()
    (tmp_path / "upd" / "u.jsonl").write_text(
        json.dumps({"input": "X", "row": 3, "set": [1e200] * 5}) + "\n")
    r = subprocess.run(
        [sys.executable, "-m", "linview.app.cli", "run", str(ROOT / "examples" / "ols.m"),
         "--input", f"X={tmp_path / 'X.npy'}", "--input", f"Y={tmp_path / 'Y.npy'}",
         "--updates", str(tmp_path / "upd"), "--backend", "spark", "--master", "local[1]",
         "--once", "--quiet"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONWARNINGS": "default"})
    assert r.returncode == 2, r.stderr
    assert "RuntimeWarning" not in r.stderr and "<linview:" not in r.stderr
    assert "NumPy reported overflow" in r.stderr and "reach 1e+200" in r.stderr


def test_inputs_of_1e200_give_one_clean_error(tmp_path):
    r = _run(tmp_path, np.full((40, 5), 1e200), [])
    assert r.returncode == 2, r.stderr
    assert "RuntimeWarning" not in r.stderr
    assert "overflow" in r.stderr and "the inputs' values reach 1e+200" in r.stderr


def test_the_api_error_says_what_the_warnings_meant():
    prog = linview.compile_file(ROOT / "examples" / "ols.m")
    rng = np.random.default_rng(2)
    views = prog.load(X=rng.standard_normal((30, 4)), Y=rng.standard_normal((30, 1)))
    before = views["beta"]
    U = np.zeros((30, 1))
    U[3] = 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning that escapes fails the test
        with pytest.raises((NumericalError, UpdateError), match="reach 1e\\+200"):
            views.update("X", U, np.full((4, 1), 1e200))
    np.testing.assert_array_equal(views["beta"], before)


class Toy:
    """A views object whose method warns, and fails or not."""

    @numeric.quiet("the update's values")
    def update(self, name, U, fail):
        with np.errstate(over="warn"):
            np.float64(1e308) * np.asarray(U)
        warnings.warn("an API is old", DeprecationWarning, stacklevel=1)
        if fail:
            raise UpdateError("no")


def test_only_floating_point_warnings_are_taken():
    toy = Toy()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        toy.update("X", [10.0], False)  # succeeds: the warning is counted
        with pytest.raises(UpdateError) as e:
            toy.update("X", [10.0], True)
    assert [w.category for w in seen] == [DeprecationWarning, DeprecationWarning]
    assert toy.numeric_warnings == 2
    assert e.value.message == "no; NumPy reported overflow (past 1.8e308, the largest " \
                              "float64): the update's values reach 10"


class Repeats:
    """A views object whose method overflows ``times`` times on one source line."""

    @numeric.quiet("the update's values")
    def update(self, name, times):
        for _ in range(times):
            with np.errstate(over="warn"):
                np.float64(1e308) * np.float64(10.0)


@settings(max_examples=30, deadline=None)
@given(outer=st.sampled_from(["error", "ignore", "default", "once", "module", "always"]),
       calls=st.lists(st.integers(0, 3), min_size=1, max_size=4))
def test_every_floating_warning_is_counted_whatever_the_callers_filters(outer, calls):
    """The wrapper records every warning (``simplefilter("always")``'s result, reached
    without it): the caller's filter neither raises nor hides one, a warning repeated on
    one line is counted each time, and the caller's filters are as they were after."""
    toy = Repeats()
    with warnings.catch_warnings():
        warnings.simplefilter(outer)
        before = list(warnings.filters)
        for times in calls:
            toy.update("X", times)
        assert warnings.filters == before
    assert getattr(toy, "numeric_warnings", 0) == sum(calls)
