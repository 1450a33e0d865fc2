"""Correction while running: a trigger module that measures its own updates and switches
strategy when the measurements contradict the cost model.

The seconds model chose, at compile time, to maintain each trigger's views because it
predicted maintenance faster than re-evaluating the program.  That is a prior.  The module
knows the measured cost of the alternative, re-evaluation: the evaluation of every view at
``load()`` (or the last :meth:`~.runtime.TriggerModule.refresh`) is timed.  It times each
update of a maintaining trigger, and at the end of every window of :data:`WINDOW`
updates of one input compares the window's median with it:

* maintaining, and the median is more than :data:`SLOWER` times the measured
  re-evaluation: the trigger re-evaluates from the next update on (on every BLAS thread,
  as it was measured);
* re-evaluating after such a switch, and the median is more than :data:`SLOWER` times the
  maintenance measured before it: the trigger maintains again (the views are fresh, every
  one re-evaluated by the last update).

Hysteresis: a decision is taken only at the end of a window and the window then starts
anew, so there is at most one switch per window, and each mode is measured over a whole
window before the next decision; the factor :data:`SLOWER` either way leaves a dead band
where nothing switches.  The median, not the mean: one slow update (another process, a fold
of pending low-rank terms, a page fault) does not switch.  Each switch is recorded in
``views.stats["switches"]`` and shown by ``linview.compiler.explain.switch_listing``.

A trigger compiled to re-evaluate, or a module whose re-evaluation was never timed (restored
from a state file), never switches.  Nor does anything switch where decisions must not
depend on the machine: under ``LINVIEW_CALIBRATION=off`` (the reference rates: the test
suite) or ``LINVIEW_ADAPT=off``; ``views.adaptation.enabled`` turns it on or off for one
module.  The Spark backend does not switch (not done yet).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from linview.backends.numpy import threads

#: updates of one input per window (a decision at the end of each)
WINDOW = 8
#: a mode is left when its window's median is this much slower than the other's measurement
SLOWER = 1.2


class Adaptation:
    """The measurements and modes of one trigger module (``views.adaptation``).

    ``reeval_s``: the measured seconds of re-evaluating every view; ``maintain_s``: per
    input, the last window's median while maintaining; ``mode``: per input, "maintain"
    (as compiled) or "reeval" (after a switch).  ``injected``: when set (tests), a function
    ``(input, mode) -> seconds`` that replaces the measured time of each update."""

    def __init__(self, inputs, reeval_s: float | None):
        self.inputs = frozenset(inputs)  # the maintaining triggers (candidates to switch)
        self.reeval_s = reeval_s
        self.maintain_s: dict[str, float] = {}
        self.mode: dict[str, str] = dict.fromkeys(self.inputs, "maintain")
        self.window: dict[str, list[float]] = {x: [] for x in self.inputs}
        self.injected: Callable[[str, str], float] | None = None
        self.enabled = all(os.environ.get(v, "").lower() not in ("off", "0", "no")
                           for v in ("LINVIEW_ADAPT", "LINVIEW_CALIBRATION"))

    def reevaluates(self, name: str) -> bool:
        """Whether the trigger of ``name`` runs as re-evaluation after a switch."""
        return self.mode.get(name) == "reeval"

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
        if mode == "maintain":
            self.maintain_s[name] = median
            if self.reeval_s is None or median <= SLOWER * self.reeval_s:
                return None
            other = self.reeval_s
        else:
            self.reeval_s = median  # re-evaluation, as it runs now
            other = self.maintain_s[name]
            if median <= SLOWER * other:
                return None
        self.mode[name] = to = "reeval" if mode == "maintain" else "maintain"
        return {"input": name, "to": to, "measured_s": median, "other_s": other,
                "because": f"{mode} measured {median * 1e3:.3g} ms per update (median of "
                           f"{WINDOW}), {to} {other * 1e3:.3g} ms"}


class Adaptive:
    """What the runtime's ``TriggerModule`` calls (a mixin): :meth:`_adapt_start` at load,
    :meth:`_run_trigger` for each update, :meth:`_observe` after it."""

    def _adapt_start(self, reeval_s: float | None) -> None:
        """Start measuring; ``reeval_s``: the seconds the evaluation at load took (None
        when nothing was evaluated)."""
        candidates = [x for x in self.DYNAMIC if x not in self.REEVALUATED]
        self.adaptation = Adaptation(candidates, reeval_s)
        self.stats["switches"] = []
        if self._wide:  # memory passes on several threads, from the calibrated rates
            threads.set_stream_gain(_stream_gain())

    def _run_trigger(self, name: str, U, V) -> None:
        """The trigger of ``name``: as compiled, or re-evaluation after a switch."""
        if self.adaptation.reevaluates(name):
            self._reevaluate_trigger(name, U, V)
        else:
            getattr(self, f"on_update_{name}")(U, V)

    def _switched(self, name: str) -> bool:
        return self.adaptation.reevaluates(name)

    def _observe(self, name: str, seconds: float) -> None:
        """Count an update of ``name`` that took ``seconds`` (``stats["trigger_seconds"]``)
        and let the adaptation decide."""
        self.stats["trigger_seconds"] += seconds
        switch = self.adaptation.observe(name, seconds)
        if switch is not None:
            self.stats["switches"].append({"update": int(self.updates), **switch})


def _stream_gain() -> float:
    """The calibrated ratio of the all-thread to the one-thread streaming rate (1 where
    calibration is off or the machine has one core)."""
    if (os.cpu_count() or 1) < 2:
        return 1.0
    from linview.compiler.calibrate import rates

    r = rates()
    return r.stream_bytes / r.stream1_bytes
