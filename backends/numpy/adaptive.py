"""Correction while running: a trigger module that measures its own updates and switches
strategy or BLAS threads when the measurements contradict the cost model (``docs/auto.md``).

The seconds model chose, at compile time, to maintain each trigger's views or to
re-evaluate; that is a prior.  Per trigger there are up to four modes: "maintain" (as
compiled), "threads" (maintaining on the other BLAS thread setting: one thread for a
trigger compiled for every idle core, and the other way round), "reeval" (the program *as
written* re-run after the input's update, on the thread setting measured faster: see
:mod:`.aswritten`) and "reeval_threads" (that on the other setting); a trigger compiled
to re-evaluate has only the last two.  At ``load()`` the modes are timed
(:meth:`.aswritten.AsWrittenRuns._load_trials`) and each trigger starts in the fastest;
then every update is timed and, at the end of every window of :data:`WINDOW` updates of
one input, the window's median is compared with the other modes' measurements: more than
:data:`SLOWER` times slower than the fastest of them switches to it, and a maintaining mode
more than :data:`TO_WRITTEN` times slower than the program as written switches to that
(what ``auto`` promises is not to be slower than the program as written; maintenance first
tries its other threads when they were never measured; leaving the program as written
for maintenance pays one re-evaluation of every view, counted over a window); on the
other threads and not :data:`SLOWER` times faster than the compiled ones, back; and the
mode that only its trial at load (a few runs) measured :data:`NEAR` times faster, inside
the dead band, is run for one window, once (modes closer than that are a tie); several
threads are tried again for a window when more cores are idle now than when they were
measured (a thread count measured on a busy machine is stale on a quiet one).

Hysteresis: a decision is taken only at the end of a window and the window then starts
anew, so there is at most one switch per window, and each mode is measured over a whole
window before the next decision; the factor :data:`SLOWER` either way leaves a dead band
where nothing switches.  The median, not the mean: one slow update (another process, a fold
of pending low-rank terms, a page fault) does not switch.  Each switch is recorded in
``views.stats["switches"]`` and shown by ``linview.compiler.explain.switch_listing``.

A module whose re-evaluation was never timed (restored from a state file) never switches
strategy.  Threads switch only under the automatic thread policy (``blas_threads="auto"``,
no thread variable set).  Nor does anything switch where decisions must not depend on the
machine: under ``LINVIEW_CALIBRATION=off`` (the reference rates: the test suite) or
``LINVIEW_ADAPT=off``; ``views.adaptation.enabled`` turns it on or off for one module.
On Spark, :mod:`linview.backends.spark.reevaluation` uses this class with two modes,
maintenance and re-evaluation on the cluster.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from linview.backends.numpy import aswritten, threads

#: updates of one input per window (a decision at the end of each)
WINDOW = 8
#: a mode is left when its window's median is this much slower than the other's measurement
SLOWER = 1.2
#: ... except that maintenance is left for the program as written (the promise: ``auto`` at
#: least 0.95× the program as written) when only this much slower than it; the way back
#: to maintenance still needs :data:`SLOWER` (and the catch-up), so a dead band of about
#: 1.26× remains between the two
TO_WRITTEN = 1.05
#: modes measured less than this factor apart are a tie: a mode that only its trial at load
#: measured faster than the current one gets a window only when it is this much faster
#: (gradient_descent_ls went over to one BLAS thread, 10.2 ms in its trial against 10.5 ms
#: for both threads' window, and back after that window, 10.3 ms, every stream: two switches
#: between modes 3% apart)
NEAR = 1.05


class Adaptation:
    """The measurements and modes of one trigger module (``views.adaptation``).

    Per input, ``mode`` is "maintain" (as compiled), "threads" (maintaining on the other
    BLAS thread setting: one thread for a trigger compiled for every idle core, and the
    other way round), "reeval" (re-running the program as written, on
    ``written_threads``) or "reeval_threads" (that on the other setting); a trigger
    compiled to re-evaluate only the last two.  ``measured`` holds per input the last
    window's median of each mode tried (or its trial at load, :meth:`seed`); ``reeval_s``
    the re-evaluation at load, the alternative of a mode never measured.
    ``injected``: when set (tests), a function ``(input, mode) -> seconds`` that
    replaces the measured time of each update and of each trial at load."""

    def __init__(self, inputs, reeval_s: float | None, threads: dict | None = None,
                 reevaluated=frozenset()):
        threads = threads or {}
        #: triggers compiled to re-evaluate whose threads may switch (nothing else may)
        self.reevaluated = frozenset(x for x in reevaluated if x in threads)
        self.inputs = frozenset(inputs) | self.reevaluated  # the candidates to switch
        self.reeval_s = reeval_s
        #: {input: compiled BLAS threads} of the triggers whose threads may switch
        self.threads = {x: t for x, t in threads.items() if x in self.inputs}
        #: {input: BLAS threads of its re-evaluation} (measured at load: the faster)
        self.written_threads = {x: self.threads[x] if x in self.reevaluated else None
                                for x in self.threads}
        self.measured: dict[str, dict[str, float]] = {x: {} for x in self.inputs}
        self.mode: dict[str, str] = {x: "reeval" if x in self.reevaluated else "maintain"
                                     for x in self.inputs}
        self.window: dict[str, list[float]] = {x: [] for x in self.inputs}
        #: seconds of re-evaluating every view (the program as compiled), what leaving the
        #: program as written for maintenance costs once (0: no view is left behind)
        self.catch_up_s = 0.0
        self.injected: Callable[[str, str], float] | None = None
        #: idle cores now (tests inject a function; None: ``threads.idle_cores`` unless
        #: timings are injected) and {input: {mode: idle cores when it was measured}}
        self.idle: Callable[[], int] | None = None
        self.idle_at: dict[str, dict[str, int | None]] = {x: {} for x in self.inputs}
        #: {input: idle cores when the mode it runs now was tried again for them}
        self.retried_at: dict[str, int] = {}
        #: {input: modes measured only by their trial at load (a few runs, not a window)}
        self.trialed: dict[str, set[str]] = {x: set() for x in self.inputs}
        #: {input: {mode: seconds of its trial at load}} (kept when windows measure it)
        self.trial_s: dict[str, dict[str, float]] = {x: {} for x in self.inputs}
        self.enabled = all(os.environ.get(v, "").lower() not in ("off", "0", "no")
                           for v in ("LINVIEW_ADAPT", "LINVIEW_CALIBRATION"))

    def reevaluates(self, name: str) -> bool:
        """Whether a trigger compiled to maintain re-evaluates after a switch."""
        return self.mode.get(name, "").startswith("reeval") and name not in self.reevaluated

    def threads_of(self, name: str, compiled):
        """The BLAS threads the trigger of ``name`` runs on now (``compiled``: its own)."""
        mode = self.mode.get(name, "maintain")
        if name not in self.threads:  # the user's threads, or none managed: as compiled
            return compiled
        own = self.written_threads.get(name) if mode.startswith("reeval") else compiled
        return own if mode in ("maintain", "reeval") else _other(own)

    def _mode_threads(self, name: str, mode: str):
        """The BLAS threads of ``mode`` for the trigger of ``name`` (as :meth:`threads_of`)."""
        own = self.written_threads.get(name) if mode.startswith("reeval") \
            else self.threads.get(name)
        return own if mode in ("maintain", "reeval") else _other(own)

    def modes(self, name: str) -> list[str]:
        """The modes the trigger of ``name`` may run in (the thread switches only under
        the automatic thread policy)."""
        out = ["reeval"] if name in self.reevaluated else ["maintain", "reeval"]
        if name in self.threads:
            out += ["reeval_threads"] if name in self.reevaluated else ["threads",
                                                                        "reeval_threads"]
        return out

    def seed(self, name: str, trials: dict[str, float], written_threads=None,
             margin: float = 1.0) -> dict | None:
        """Record the trials at load (``{mode: seconds}``; the re-evaluation's on
        ``written_threads``) and start in the fastest mode when it is ``margin`` times
        faster than the compiled one; returns that switch, or None."""
        if name not in self.inputs or not self.enabled:
            return None
        if name in self.threads and any(m.startswith("reeval") for m in trials):
            self.written_threads[name] = written_threads
        if self.injected is not None:
            trials = {m: self.injected(name, m) for m in trials}
        seen = self.measured[name]
        seen.update({m: t for m, t in trials.items() if t is not None and m in self.modes(name)})
        self.idle_at[name].update(dict.fromkeys(seen, self._idle_now()))
        self.trialed[name] = set(seen)
        self.trial_s[name] = dict(seen)
        mode = self.mode[name]
        best = min(seen, key=seen.get, default=mode)
        if best == mode or seen[best] * margin >= seen.get(mode, float("inf")):
            return None
        self.mode[name] = best
        return self._switch(name, mode, best, seen.get(mode), seen[best], "trial at load")

    def observe(self, name: str, seconds: float) -> dict | None:
        """Record one update of ``name`` that took ``seconds``; at the end of a window,
        decide; returns the switch made (a dict for ``stats["switches"]``) or None."""
        if name not in self.inputs or not self.enabled:
            return None
        mode = self.mode[name]
        if self.injected is not None:
            seconds = self.injected(name, mode)
        w = self.window[name]
        w.append(seconds)
        if len(w) < WINDOW:
            return None
        median = sorted(w)[len(w) // 2]
        w.clear()
        to, other = self._decide(name, mode, median)
        if to == mode:
            return None
        self.mode[name] = to
        return self._switch(name, mode, to, median, other, f"median of {WINDOW}")

    def _switch(self, name, mode, to, measured, other, how) -> dict:
        return {"input": name, "from": mode, "to": to, "measured_s": measured,
                "other_s": other, "threads": self.threads_of(name, self.threads.get(name)),
                "because": f"{_NAMES[mode]} " + (f"measured {measured * 1e3:.3g} ms per "
                                                  f"update ({how}), " if measured is not None
                                                  else "not measured, ")
                + f"{_NAMES[to]} " + (f"{other * 1e3:.3g} ms" if other is not None else
                                      "measured under another load, tried again"
                                      if to in self.measured[name] else "untried")}

    def _decide(self, name: str, mode: str, median: float) -> tuple[str, float | None]:
        """The mode for the next window and the measurement it was compared with: the
        fastest other mode measured when this one is :data:`SLOWER` times slower than it
        (maintenance first tries its other threads when they were never measured; a
        trigger compiled to re-evaluate tries its other threads once; maintenance after
        the program as written pays :attr:`catch_up_s` once, counted over a window);
        else the program as written when maintenance is :data:`TO_WRITTEN` times slower
        than it; else back to the compiled threads when the other ones are not :data:`SLOWER`
        times faster; else a mode measured :data:`NEAR` times faster only by its trial at
        load (inside the dead band) for a window, once; else the other thread setting,
        when it is several threads, for a window when more cores are idle now than when
        it was measured (the machine quietened since)."""
        seen = self.measured[name]
        seen[mode] = median
        self.trialed[name].discard(mode)
        idle = self.idle_at[name][mode] = self._idle_now()
        if name in self.retried_at:  # a window tried again for more idle cores: measured
            idle = self.idle_at[name][mode] = max(  # for them (retried only beyond that:
                idle or 0, self.retried_at.pop(name))  # no retry and back every window)
        known = dict(seen)
        if self.reeval_s is not None and name not in self.reevaluated:
            known.setdefault("reeval", self.reeval_s)  # timed at load, all threads
        if mode.startswith("reeval") and self.catch_up_s:  # views behind: maintaining
            for m in ("maintain", "threads"):  # again first re-evaluates them, paid back
                if m in known:  # within a window or not worth it
                    known[m] += self.catch_up_s / WINDOW
        modes = self.modes(name)
        if name in self.reevaluated and "reeval_threads" in modes and "reeval_threads" not in known:
            return "reeval_threads", None
        best = min((m for m in modes if m != mode and m in known), key=known.get, default=None)
        if best is not None and median > SLOWER * known[best]:
            if mode == "maintain" and "threads" in modes and "threads" not in known:
                return "threads", None  # slower: first the other threads, for a window
            return best, known[best]
        written = min((m for m in modes if m.startswith("reeval") and m in known),
                      key=known.get, default=None)
        if not mode.startswith("reeval") and written is not None \
                and median > TO_WRITTEN * known[written]:
            return written, known[written]  # the promise: not slower than as written
        base = {"threads": "maintain", "reeval_threads": "reeval"}.get(mode)
        if base in known and median * SLOWER >= known[base]:
            return base, known[base]  # the compiled threads were not worse
        # faster in its trial at load than this mode in both its trial and its window,
        # inside the dead band: a window of it (a trial is the best of a few runs, a
        # window's median is slower than that for every mode alike: compared with this
        # mode's window alone, every trial looked faster; markov_steps left the program
        # as written on one thread, 9.9 ms in its trial, for all threads, 12.1 ms in
        # theirs, because its window measured 13.7 ms, and ran a window at 31 ms)
        own = self.trial_s[name].get(mode, float("inf"))
        tried = [m for m in modes if m in self.trialed[name]
                 and NEAR * known[m] < min(median, own)]
        if tried:
            best = min(tried, key=known.get)
            return best, known[best]
        other = base or {"maintain": "threads", "reeval": "reeval_threads"}[mode]
        if other in modes and other in seen and idle is not None \
                and idle > (self.idle_at[name].get(other) or idle) \
                and self._mode_threads(name, other) != 1:
            self.retried_at[name] = idle
            return other, None  # more cores idle than when it was measured: tried again
        return mode, None

    def _idle_now(self) -> int | None:
        """Idle cores now (None where timings are injected and the idle cores not)."""
        if self.idle is not None:
            return self.idle()
        return None if self.injected is not None else threads.idle_cores()


def _other(threads):
    """The other BLAS thread setting: one thread for every thread, and the other way round."""
    return 1 if threads is None or threads > 1 else None


_NAMES = {"maintain": "maintenance", "threads": "maintenance on the other BLAS threads",
          "reeval": "re-evaluation", "reeval_threads": "re-evaluation on the other BLAS threads"}


class Adaptive(aswritten.AsWrittenRuns):
    """What the runtime's ``TriggerModule`` calls (a mixin): :meth:`_adapt_start` at load,
    :meth:`_run_trigger` for each update, :meth:`_observe` after it."""

    def _adapt_start(self, reeval_s: float | None) -> None:
        """Start measuring; ``reeval_s``: the seconds the evaluation at load took (None
        when nothing was evaluated: then nothing is tried at load either)."""
        candidates = [x for x in self.DYNAMIC if x not in self.REEVALUATED]
        # the threads switch only under the automatic policy (not the user's choice)
        self.adaptation = Adaptation(candidates, reeval_s, self._threads if self._wide else {},
                                     self.REEVALUATED)
        self.stats["switches"] = []
        if reeval_s is not None:  # the program as written leaves views behind (aswritten)
            self.adaptation.catch_up_s = reeval_s  # the evaluation at load: every view
        if self.adaptation.enabled and reeval_s is not None and self.AS_WRITTEN:
            self._load_trials()  # NumPy modules planned with numeric sizes (not Spark)

    def _run_trigger(self, name: str, U, V) -> None:
        """The trigger of ``name``: as compiled, or the program as written (compiled to
        re-evaluate, or after a switch: :mod:`.aswritten`)."""
        if self._reevaluating(name):
            self._run_written(name, U, V)
        else:
            if self._behind:  # views left behind by the program as written: fresh first
                self._catch_up()
            getattr(self, f"on_update_{name}")(U, V)

    def _reevaluating(self, name: str) -> bool:
        """Whether the trigger of ``name`` re-runs the program now (compiled so, or
        switched)."""
        return name in self.REEVALUATED or self.adaptation.reevaluates(name)

    def _trigger_threads(self, name: str):
        """The BLAS threads of the trigger of ``name`` now (compiled, or switched)."""
        return self.adaptation.threads_of(name, self._threads[name])

    def _observe(self, name: str, seconds: float) -> None:
        """Count an update of ``name`` that took ``seconds`` (``stats["trigger_seconds"]``)
        and let the adaptation decide."""
        self.stats["trigger_seconds"] += seconds
        switch = self.adaptation.observe(name, seconds)
        if switch is not None:
            self.stats["switches"].append({"update": int(self.updates), **switch})
