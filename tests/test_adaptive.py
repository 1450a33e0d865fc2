"""Correction while running (backends/numpy/adaptive.py): a trigger module switches between
maintaining and re-evaluating from measured update times, at most once per window, records
each switch, and its answers stay those of re-evaluation.  Timings are injected
(``views.adaptation.injected``): nothing here depends on the speed of the machine."""

from __future__ import annotations

import contextlib
import functools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import linview
from linview.backends.numpy import adaptive
from linview.backends.numpy.adaptive import NEAR, SLOWER, TO_WRITTEN, WINDOW, Adaptation

PROGRAMS = {  # example file, dims, the input updated
    "ols": ("ols.m", {"m": 40, "n": 12, "p": 2}, "X"),
    "powers": ("powers.m", {"n": 10}, "A"),
    "general_form": ("general_form.m", {"n": 9, "p": 2}, "A"),
    "markov": ("markov.m", {"n": 8}, "P"),
}


@functools.cache
def program(name: str):
    from conftest import EXAMPLES

    file, dims, _ = PROGRAMS[name]
    # maintained (the cost model re-evaluates such small programs as a whole)
    return linview.compile_file(EXAMPLES / file, dims=dims, strategy="incr")


def inputs(name: str, rng: np.random.Generator) -> dict:
    prog = program(name)
    out = {}
    for d in prog.program.inputs:
        if d.scalar:
            out[d.name] = 0.5
            continue
        r, c = (int(prog.plan.sizes.value(e)) for e in d.shape)
        out[d.name] = (0.6 * np.eye(r) + 0.3 * rng.standard_normal((r, c)) / np.sqrt(r)
                       if r == c else rng.standard_normal((r, c)))
    return out


def update(views, x: str, rng: np.random.Generator, kind: str):
    rows, cols = views[x].shape
    if kind == "row":
        U = np.zeros((rows, 1))
        U[rng.integers(rows), 0] = 1.0
    else:
        U = rng.standard_normal((rows, 1)) / np.sqrt(rows)
    V = 0.1 * rng.standard_normal((cols, 1)) / np.sqrt(cols)
    views.update(x, U, V)


def test_injected_timings_force_a_switch_to_reevaluation_and_back():
    prog = program("ols")
    rng = np.random.default_rng(1)
    views = prog.load(**inputs("ols", rng))
    compiled = views._threads["X"]
    timings = {"maintain": 2.0, "threads": 2.0, "reeval": 1.0}
    views.adaptation.reeval_s = 1.0
    views.adaptation.injected = lambda name, mode: timings[mode]
    views.adaptation.enabled = True  # off under the reference rates the suite plans with
    for i in range(WINDOW):
        assert views.stats["switches"] == [], i  # no decision before a window is full
        update(views, "X", rng, "dense")
    # maintenance slower than re-evaluation: first the other BLAS threads, for a window
    [switch] = views.stats["switches"]
    assert (switch["input"], switch["from"], switch["to"]) == ("X", "maintain", "threads")
    assert switch["update"] == WINDOW - 1
    assert views._trigger_threads("X") == (1 if compiled is None or compiled > 1 else None)
    for _ in range(WINDOW):  # no better there: re-evaluation
        update(views, "X", rng, "dense")
    assert [s["to"] for s in views.stats["switches"]] == ["threads", "reeval"]
    assert views.adaptation.reevaluates("X")
    assert views.verify() < 1e-9
    # re-evaluation measured slower than the maintenance measured before: back, a window on
    timings["reeval"] = 2.0 * SLOWER * timings["maintain"]
    for _ in range(WINDOW):
        update(views, "X", rng, "row")
    assert [s["to"] for s in views.stats["switches"]] == ["threads", "reeval", "maintain"]
    assert views._trigger_threads("X") == compiled
    for _ in range(3):  # maintained again from fresh views
        update(views, "X", rng, "dense")
    assert views.verify() < 1e-9
    text = prog.explain(views=views)
    assert "strategy switches while running" in text
    assert "after update 16: trigger of X now re-evaluates" in text
    assert "after update 8: trigger of X now maintains on " in text
    assert "now maintains" in text


def test_other_threads_that_pay_are_kept_and_ones_that_do_not_are_left():
    better = adaptation(["X"], 1.0, {"X": None})
    modes = {"maintain": 2.0, "threads": 0.5, "reeval": 1.0}
    for _ in range(4 * WINDOW):
        better.observe("X", modes[better.mode["X"]])
    assert better.mode["X"] == "threads" and better.threads_of("X", None) == 1
    same = adaptation(["X"], 1.15, {"X": 1})
    modes = {"maintain": 1.4, "threads": 1.2, "reeval": 1.15}
    for _ in range(2 * WINDOW):  # maintain (slower than 1.2x re-evaluation), threads
        same.observe("X", modes[same.mode["X"]])  # (within TO_WRITTEN of re-evaluation)
    assert same.mode["X"] == "maintain"  # not 1.2x better than the compiled threads


def adaptation(inputs, reeval_s, threads=None):
    a = Adaptation(inputs, reeval_s, threads)
    a.enabled = True
    return a


def test_nothing_switches_where_decisions_must_not_depend_on_the_machine(monkeypatch):
    monkeypatch.delenv("LINVIEW_ADAPT", raising=False)
    monkeypatch.setenv("LINVIEW_CALIBRATION", "off")
    assert not Adaptation(["X"], 1.0).enabled
    monkeypatch.setenv("LINVIEW_CALIBRATION", "on")
    assert Adaptation(["X"], 1.0).enabled
    monkeypatch.setenv("LINVIEW_ADAPT", "off")
    a = Adaptation(["X"], 1.0)
    assert not a.enabled and all(a.observe("X", 100.0) is None for _ in range(3 * WINDOW))


def test_no_switch_inside_the_dead_band_or_without_a_measured_alternative():
    a = adaptation(["X"], reeval_s=1.0)
    for _ in range(3 * WINDOW):
        assert a.observe("X", 0.99 * TO_WRITTEN) is None  # slower, but within the band
    b = adaptation(["X"], reeval_s=None)  # restored from a state file: nothing measured
    assert all(b.observe("X", 100.0) is None for _ in range(3 * WINDOW))
    c = adaptation(["X"], reeval_s=1.0)
    assert all(c.observe("Y", 100.0) is None for _ in range(3 * WINDOW))  # re-evaluates


def test_one_slow_update_in_a_window_does_not_switch():
    a = adaptation(["X"], reeval_s=1.0)
    seen = [a.observe("X", 50.0 if i == 3 else 0.5) for i in range(WINDOW)]
    assert seen == [None] * WINDOW


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([0.1, 1.0, 10.0]), min_size=1, max_size=6 * WINDOW))
def test_at_most_one_switch_per_window(times):
    a = adaptation(["X"], reeval_s=1.0)
    switched = [i for i, t in enumerate(times) if a.observe("X", t) is not None]
    assert all(j - i >= WINDOW for i, j in zip(switched, switched[1:], strict=False))
    assert all((i + 1) % WINDOW == 0 for i in switched)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(PROGRAMS)), seed=st.integers(0, 2 ** 16),
       steps=st.lists(st.tuples(st.sampled_from(["row", "dense"]),
                                st.sampled_from([0.1, 1.0, 10.0]),
                                st.sampled_from([0.1, 1.0, 10.0]),
                                st.sampled_from([0.1, 1.0, 10.0])),
                      min_size=1, max_size=3 * WINDOW))
def test_answers_equal_reevaluation_whatever_the_switches(name, seed, steps):
    """Random updates under random injected timings (so switches happen at random
    points, both ways): after every update every view equals re-evaluation."""
    _, _, x = PROGRAMS[name]
    rng = np.random.default_rng(seed)
    views = program(name).load(**inputs(name, rng))
    views.adaptation.reeval_s = 1.0
    now = {}
    views.adaptation.injected = lambda _name, mode: now[mode]
    views.adaptation.enabled = True
    for kind, maintain, threads, reeval in steps:
        now.update(maintain=maintain, threads=threads, reeval=reeval)
        update(views, x, rng, kind)
        assert views.verify() < 1e-8, views.stats["switches"]


def test_a_reevaluating_trigger_tries_the_other_threads_once_and_never_maintains():
    prog = linview.compile_file(_example("ols.m"), dims={"m": 40, "n": 12, "p": 2},
                                strategy="reeval")
    rng = np.random.default_rng(2)
    views = prog.load(**inputs("ols", rng))
    compiled = views._threads["X"]
    timings = {"reeval": 1.0, "reeval_threads": 1.0}
    views.adaptation.injected = lambda name, mode: timings[mode]
    views.adaptation.enabled = True
    for _ in range(4 * WINDOW):
        update(views, "X", rng, "dense")
        assert views._trigger_threads("X") in (compiled, 1 if compiled is None else None)
    # one window on the other threads, not faster: back, and no more switches
    assert [s["to"] for s in views.stats["switches"]] == ["reeval_threads", "reeval"]
    assert views.verify() < 1e-9
    assert "now re-evaluates on " in prog.explain(views=views)
    faster = prog.load(**inputs("ols", rng))  # the other threads 1.2x faster: kept
    faster.adaptation.injected = lambda name, mode: {"reeval": 1.0, "reeval_threads": 0.5}[mode]
    faster.adaptation.enabled = True
    for _ in range(4 * WINDOW):
        update(faster, "X", rng, "row")
    assert [s["to"] for s in faster.stats["switches"]] == ["reeval_threads"]
    assert faster.verify() < 1e-9
    chosen = prog.load(**inputs("ols", rng), blas_threads=1)  # the user's threads: kept
    chosen.adaptation.injected = lambda name, mode: 100.0
    chosen.adaptation.enabled = True
    for _ in range(2 * WINDOW):
        update(chosen, "X", rng, "dense")
    assert chosen.stats["switches"] == []


def test_a_module_with_solve_views_records_no_switch_it_would_not_run():
    """Its triggers run as compiled (a solve view's update is its warm-started solver):
    however slow they measure, no switch to re-evaluation is recorded, none is run."""
    src = "function x = f(A, b)\n  %#linview solve krylov\n  x = A \\ b;\nend\n"
    rng = np.random.default_rng(5)
    n = 12
    views = linview.compile(src, name="f").load(
        A=4 * np.eye(n) + 0.1 * rng.standard_normal((n, n)), b=rng.standard_normal(n))
    views.adaptation.injected = lambda name, mode: 100.0 if mode == "maintain" else 0.001
    views.adaptation.enabled = True
    for _ in range(3 * WINDOW):
        views.update("b", rng.standard_normal((n, 1)), np.ones((1, 1)))
    assert views.stats["switches"] == [] and not views._reevaluating("b")
    np.testing.assert_allclose(views["x"], np.linalg.solve(views["A"], views["b"]), atol=1e-8)


def _example(file: str):
    from conftest import EXAMPLES

    return EXAMPLES / file


def test_adaptive_module_is_the_runtime_mixin():
    from linview.backends.numpy.runtime import TriggerModule

    assert issubclass(TriggerModule, adaptive.Adaptive)


@pytest.mark.parametrize("widths", [(1, 1), (2,), (1, 0), (3, 4), (7, 9)])
@pytest.mark.parametrize("held", [1, 2, 3])
def test_fused_products_on_the_threads_a_trigger_holds_equal_the_separate_products(
        widths, held):
    """The one-pass kernel split over the threads the trigger holds (column ranges, each
    range's share of A·B summed) gives the products to rounding."""
    from linview.backends.numpy import kernels, threads

    rng = np.random.default_rng(3)
    n = 1100  # more than WIDE_MIN elements: a large view
    A = np.asfortranarray(rng.standard_normal((n, n)))
    blocks = [rng.standard_normal((n, w)) for w in widths if w]
    ops = "NT"[:len(blocks)]
    with threads.holding(held, contextlib.nullcontext()):
        assert threads.pass_threads() == held
        got = kernels.fused_dot(A, *blocks, ops=ops)
    assert threads.pass_threads() == 1  # outside a trigger
    for g, B, o in zip(got, blocks, ops, strict=True):
        np.testing.assert_allclose(g, (A.T if o == "T" else A) @ B, rtol=1e-12, atol=1e-10)


@pytest.mark.parametrize("two_copies", [True, False])
def test_workers_a_trigger_woke_are_parked_when_it_ends(monkeypatch, two_copies):
    """Quiet BLAS after a trigger: a trigger that held several BLAS threads parks the
    workers of the kernels' library when it ends, where that library is a copy of its
    own (SciPy's wheel), never NumPy's pool (the user's next NumPy call runs on those
    workers; parking makes it start them again); one on a single thread has none to
    park; with one library for both, nothing is parked."""
    from linview.backends.numpy import threads

    kernels, rest = threads.pools()
    monkeypatch.setattr(threads, "pools", lambda: (kernels, rest if two_copies else None))
    parked = []
    monkeypatch.setattr(threads, "park", lambda which="kernels": parked.append(which))
    rng = np.random.default_rng(4)
    ins = inputs("ols", rng)
    views = program("ols").load(**ins, blas_threads=2)
    update(views, "X", rng, "dense")
    assert parked == (["kernels"] if two_copies else [])
    views = program("ols").load(**ins, blas_threads=1)
    update(views, "X", rng, "dense")
    assert len(parked) == (1 if two_copies else 0)
    monkeypatch.setitem(threads.PARK, "on", False)
    views = program("ols").load(**ins, blas_threads=2)
    update(views, "X", rng, "dense")
    assert len(parked) == (1 if two_copies else 0)


def test_the_pools_see_scipys_blas_loaded_after_the_first_call():
    """The pools are found once; SciPy's BLAS is loaded before, so that a process that
    asks first (a bench, a thread limit) still controls and parks SciPy's copy."""
    import subprocess
    import sys

    code = ("from linview.backends.numpy import threads\n"
            "k, r = threads.pools()\n"
            "seen = {c.filepath for p in (k, r) if p is not None for c in p.lib_controllers}\n"
            "import scipy.linalg.blas\n"
            "from threadpoolctl import threadpool_info\n"
            "every = {i['filepath'] for i in threadpool_info() if i['user_api'] == 'blas'}\n"
            "assert every and every <= seen, (every, seen)\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_blas_works_after_its_workers_are_parked():
    import scipy.linalg.blas as blas

    from linview.backends.numpy import threads

    rng = np.random.default_rng(5)
    A = np.asfortranarray(rng.standard_normal((300, 300)))
    want = A @ A
    for which in ("kernels", "all", "kernels"):
        threads.park(which)
        np.testing.assert_allclose(blas.dgemm(1.0, A, A), want, rtol=1e-12, atol=1e-10)
        np.testing.assert_allclose(A @ A, want, rtol=1e-12, atol=1e-10)


@pytest.mark.parametrize("form", ["normal", "qr"])
def test_a_switch_with_pending_low_rank_terms_on_large_views(form):
    """Views of 2^20 elements and more keep low-rank terms pending (lowrank.py): switching
    to re-evaluation and back with terms pending still gives re-evaluation's answers, for
    the Woodbury trigger (``inv(XᵀX)`` pending) and for the stable form (X pending: its
    ``verify()`` read X without them and reported 7e-4)."""
    from conftest import EXAMPLES

    prog = linview.compile_file(EXAMPLES / "ols.m", dims={"m": 1100, "n": 1030, "p": 1},
                                strategy="incr", least_squares=form)
    rng = np.random.default_rng(6)
    views = prog.load(X=rng.standard_normal((1100, 1030)), Y=rng.standard_normal((1100, 1)))
    timings = {"maintain": 1.0, "threads": 1.0, "reeval": 0.1}
    views.adaptation.reeval_s = 0.1
    views.adaptation.injected = lambda name, mode: timings[mode]
    views.adaptation.enabled = True
    for i in range(3 * WINDOW):
        if i == WINDOW:
            assert views._pending  # terms pending when it switches
        if i == 2 * WINDOW:
            timings["reeval"] = 10.0  # back to maintaining
        update(views, "X", rng, "dense")
    assert [s["to"] for s in views.stats["switches"]] == ["threads", "reeval", "maintain"]
    assert views.verify() < 1e-8
    for _ in range(3):  # maintained again: new terms pending on fresh views
        update(views, "X", rng, "dense")
    assert views._pending and views.verify() < 1e-8


def test_the_other_threads_are_tried_again_when_the_load_changed():
    """A thread setting measured while another number of cores was idle is stale: tried
    again for a window (and kept only if it pays); under the same load, nothing moves."""
    idle = {"now": 1}
    a = adaptation(["X"], 10.0, {"X": 1})
    a.idle = lambda: idle["now"]
    modes = {"maintain": 1.0, "threads": 2.0}
    a.seed("X", {"maintain": 1.0, "threads": 2.0})  # both measured with one idle core
    for _ in range(2 * WINDOW):
        assert a.observe("X", modes[a.mode["X"]]) is None
    idle["now"] = 2  # the other process stopped
    switched = [a.observe("X", modes[a.mode["X"]]) for _ in range(WINDOW)]
    assert switched[-1]["to"] == "threads" and "tried again" in switched[-1]["because"]
    modes["threads"] = 0.5  # and it pays now: kept
    for _ in range(2 * WINDOW):
        assert a.observe("X", modes[a.mode["X"]]) is None
    assert a.mode["X"] == "threads"


def test_a_mode_faster_in_its_trial_at_load_gets_one_window_inside_the_dead_band():
    """A few runs at load are not a window: an alternative they measured NEAR times faster,
    but not SLOWER times faster, is run for one window once, then judged on that window."""
    a = adaptation(["X"], None, {"X": 1})
    a.idle = lambda: 1
    a.seed("X", {"maintain": 1.0, "threads": 0.9}, None, SLOWER)  # inside the start's margin
    assert a.mode["X"] == "maintain" and NEAR * 0.9 < 1.0 < SLOWER * 0.9
    modes = {"maintain": 1.0, "threads": 0.95}  # running, the other threads are not 1.2x
    switched = [a.observe("X", modes[a.mode["X"]]) for _ in range(WINDOW)]
    assert switched[-1]["to"] == "threads"
    switched = [a.observe("X", modes[a.mode["X"]]) for _ in range(WINDOW)]
    assert switched[-1]["to"] == "maintain"  # judged on its window: back, not 1.2x faster
    assert not any(a.observe("X", modes[a.mode["X"]]) for _ in range(3 * WINDOW))
    b = adaptation(["X"], None, {"X": 1})
    b.idle = lambda: 1
    b.seed("X", {"maintain": 1.0, "threads": 0.9}, None, SLOWER)
    modes = {"maintain": 0.85, "threads": 1.0}  # maintenance faster than that trial: stays
    assert not any(b.observe("X", modes[b.mode["X"]]) for _ in range(3 * WINDOW))


def test_one_thread_is_not_re_tried_because_the_machine_got_busier():
    idle = {"now": 2}
    a = adaptation(["X"], 10.0, {"X": None})  # compiled for every core
    a.idle = lambda: idle["now"]
    a.seed("X", {"maintain": 1.0, "threads": 1.1})  # one thread measured, two cores idle
    idle["now"] = 1
    assert not any(a.observe("X", 1.0) for _ in range(3 * WINDOW))
    assert a.mode["X"] == "maintain"


def test_a_trial_slower_than_this_modes_own_trial_gets_no_window():
    """A trial at load is the best of a few runs, a window's median is slower than that
    for every mode: an alternative whose trial was slower than this mode's own trial is
    not run for a window because this mode's window is slower than that trial."""
    a = adaptation(["X"], None, {"X": 1})
    a.idle = lambda: 1
    a.seed("X", {"maintain": 2.0, "threads": 2.1, "reeval": 1.0, "reeval_threads": 1.2}, 1,
           1.05)
    assert a.mode["X"] == "reeval"  # started as written on one thread: its trial fastest
    assert not any(a.observe("X", 1.35) for _ in range(3 * WINDOW))  # 1.2 < 1.35, yet stays
    assert a.mode["X"] == "reeval"
    b = adaptation(["X"], None)
    b.idle = lambda: 1
    b.seed("X", {"maintain": 1.0, "reeval": 0.97}, None, 1.05)
    assert [s for s in (b.observe("X", 1.1) for _ in range(WINDOW)) if s][0]["to"] == "reeval"


def test_maintenance_slower_than_the_program_as_written_inside_the_old_band_leaves():
    """``auto`` promises not to be slower than the program as written: maintenance
    measured 1.1x slower than it (inside SLOWER's band) hands over to it after one
    window; the way back needs SLOWER, so a mode within that stays (hysteresis)."""
    assert TO_WRITTEN < 1.1 < SLOWER
    a = adaptation(["X"], reeval_s=1.0)
    switched = [s for s in (a.observe("X", 1.1) for _ in range(WINDOW)) if s]
    assert [s["to"] for s in switched] == ["reeval"] and a.mode["X"] == "reeval"
    assert (switched[0]["measured_s"], switched[0]["other_s"]) == (1.1, 1.0)
    modes = {"maintain": 1.1, "reeval": 1.05}  # as written slower than before, not 1.2x
    assert not any(a.observe("X", modes[a.mode["X"]]) for _ in range(3 * WINDOW))
    assert a.mode["X"] == "reeval"
    b = adaptation(["X"], reeval_s=1.0)  # a thread setting's mode is held to it too
    b.measured["X"]["threads"] = 1.5
    assert [s for s in (b.observe("X", 1.1) for _ in range(WINDOW)) if s][0]["to"] == "reeval"

