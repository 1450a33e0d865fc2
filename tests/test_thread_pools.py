"""The quiet-BLAS rule: an update never leaves the user's BLAS thread pools changed,
whatever mode each trigger runs in, whatever counts the user set, and however the update
ends (backends/numpy/threads.py: a pool already at a trigger's count is not set again)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import linview
from linview.backends.numpy import threads
from linview.errors import LinviewError

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(threads.user_threads(),
                                reason="BLAS threads set through the environment")


def _libs():
    kernels, rest = threads.pools()
    return [lib for p in (kernels, rest) if p is not None for lib in p.lib_controllers]


def _counts() -> list[int]:
    return [lib.get_num_threads() for lib in _libs()]


def _views():
    rng = np.random.default_rng(0)
    return linview.compile_file(ROOT / "examples" / "ols.m").load(
        X=rng.standard_normal((60, 5)), Y=rng.standard_normal((60, 1)))


VIEWS = {}
MODES = st.sampled_from(["maintain", "threads", "reeval", "reeval_threads"])
STEP = st.tuples(st.sampled_from(["X", "Y"]), MODES, st.sampled_from([1, None]),
                 st.lists(st.sampled_from([1, 2]), min_size=2, max_size=2),
                 st.booleans())


@settings(max_examples=40, deadline=None)
@given(steps=st.lists(STEP, min_size=1, max_size=6))
def test_the_pools_after_an_update_are_the_users(steps):
    """Each step: the user sets each pool's count, a trigger is put in a mode (its
    re-evaluation on one thread or on all), an update runs (a bad one is refused); the
    counts after it are the user's, and a trigger limited to one thread ran on one."""
    views = VIEWS.setdefault("ols", _views())
    libs = _libs()
    seen = []
    run = type(views)._run_trigger

    def spy(self, name, U, V):
        seen.append((self._trigger_threads(name), _counts()))
        return run(self, name, U, V)

    before_all = _counts()
    try:
        views._run_trigger = spy.__get__(views)
        for x, mode, written, users, bad in steps:
            for lib, n in zip(libs, users, strict=False):
                lib.set_num_threads(n)
            views.adaptation.mode[x] = mode
            views.adaptation.written_threads[x] = written
            rows, cols = views[x].shape
            U = np.zeros((rows, 1))
            U[2, 0] = 1.0
            V = np.full((cols, 1), np.nan if bad else 1e-3)
            want = _counts()
            seen.clear()
            if bad:
                with pytest.raises(LinviewError):
                    views.update(x, U, V)
            else:
                views.update(x, U, V)
            assert _counts() == want
            for limit, during in seen:
                if limit == 1:
                    assert set(during) == {1}
    finally:
        del views._run_trigger
        for lib, n in zip(libs, before_all, strict=True):
            lib.set_num_threads(n)
    assert _counts() == before_all


def test_a_limit_that_changes_nothing_sets_nothing(monkeypatch):
    """A pool already at the count asked for is read, not set; one that is not is set
    and set back."""
    libs = _libs()
    before = _counts()
    calls = []
    for lib in libs:
        real = lib.set_num_threads
        monkeypatch.setattr(lib, "set_num_threads",
                            lambda n, real=real: (calls.append(n), real(n))[1])
    try:
        for lib in libs:
            lib.set_num_threads(1)
        calls.clear()
        with threads.blas_limit(1):
            assert _counts() == [1] * len(libs)
        assert calls == []
        for lib in libs:
            lib.set_num_threads(2)
        calls.clear()
        with threads.blas_limit(1):
            assert _counts() == [1] * len(libs)
        assert calls == [1] * len(libs) + [2] * len(libs)
    finally:
        for lib, n in zip(libs, before, strict=True):
            lib.set_num_threads(n)


@settings(max_examples=50, deadline=None)
@given(flags=st.lists(st.booleans(), min_size=1, max_size=5), fail_at=st.integers(0, 5))
def test_wide_products_is_set_back_however_the_block_ends(flags, fail_at):
    """Nested ``wide_products`` blocks: inside each, ``wide`` sees its flag; after each
    (an exception raised at some depth or none), the flag outside is back."""

    class Stop(Exception):
        pass

    def nest(depth):
        if depth == len(flags):
            if fail_at < len(flags):
                raise Stop
            return
        outside = threads._WIDE["allowed"]
        try:
            with threads.wide_products(flags[depth]):
                assert threads._WIDE["allowed"] is flags[depth]
                nest(depth + 1)
        finally:
            assert threads._WIDE["allowed"] is outside

    start = threads._WIDE["allowed"]
    try:
        nest(0)
    except Stop:
        pass
    assert threads._WIDE["allowed"] is start
