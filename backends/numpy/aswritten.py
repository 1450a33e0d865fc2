"""The program as written inside a trigger module: what a trigger runs when it
re-evaluates (compiled so, or switched to it by :mod:`.adaptive`), and the trials at
``load()`` that measure it against maintenance.

Re-evaluation is the input's update in place followed by the program *as written* (its
own statements in order, loops step by step: ``_evaluate_written``, see
``written_code.py``), not the program as compiled: an iterative model's powers (``P'^2``,
``P'^4``) are matrix products the program as written never makes, and ``auto`` promises not
to lose to the program as written.  That method computes the outputs only; every other view
is then *behind* (``self._behind``) and is re-evaluated, all of them at once
(:meth:`AsWrittenRuns._catch_up`), when something reads one (``views[...]``, ``verify``,
``save``) or a maintaining trigger runs.  A module whose compiled program is the one
written runs ``_evaluate`` and keeps its outputs likewise, unless another input's trigger
maintains now: then it keeps every view (that trigger would catch up at every update).

Trials at load (:meth:`AsWrittenRuns._load_trials`, when adaptation is on): each
maintaining trigger runs :data:`TRIALS` times on a zero update (``U`` one-hot, ``V = 0``:
every delta is exactly zero, nothing changes; its pending low-rank terms, all zero, are
dropped), on its compiled threads and, under the automatic thread policy, on the other
ones; the program as written is timed on one BLAS thread and on all of them, unless the
cost model predicts it more than :data:`WRITTEN_TRIAL_MAX` times slower than the measured
maintenance (then its prediction, scaled by maintenance's measured over predicted time,
stands in).  Each trigger starts in the fastest mode measured (``stats["switches"]``,
``"at": "load"``).
"""

from __future__ import annotations

import time

import numpy as np

from linview.backends.numpy.guards import IllConditioned
from linview.backends.numpy.phase2 import added_or_restored
from linview.backends.numpy.threads import trigger_limit, wide_products
from linview.errors import NumericalError

#: runs of each trial at load (the fastest counts)
TRIALS = 3
#: the trial update's scale: ``U Vᵀ`` with ``|V| ~ 2^-200``, so every delta is below half
#: an ulp of every entry of normal size (views and input do not change; an exact zero
#: or an entry below 1e-44 may move by about 1e-60), yet no factor is zero: a zero one
#: would let the kernels skip its products (``kernels.one_hot``) and the trial lie
TINY = 2.0 ** -200
#: a trigger starts in another mode than compiled only when measured this much faster
LOAD_MARGIN = 1.05
#: the program as written is timed at load only when predicted at most this many times
#: slower than the measured maintenance (OLS with X 4000×4000: 2.6 s against 12 ms, never)
WRITTEN_TRIAL_MAX = 10.0


class AsWrittenRuns:
    """A mixin of the runtime's ``TriggerModule`` (through :class:`.adaptive.Adaptive`)."""

    #: {input: (maintain_s, written_s, threads)} predicted at compile time
    #: (``linview.compiler.cost.as_written``)
    AS_WRITTEN: dict = {}

    # ------------------------------------------------------------ running it
    def _run_written(self, name: str, U, V) -> None:
        """``name += U Vᵀ`` in place, then the program as written: the outputs, kept and
        checked (the other views are behind).  A module whose compiled program is the one
        written keeps every view instead while another input's trigger maintains (that
        trigger reads them).  On an error the input is restored and nothing else has
        changed."""
        if not hasattr(self, "_evaluate_written") and any(
                not self._reevaluating(x) for x in self.DYNAMIC if x != name):
            self._reevaluate_trigger(name, U, V)
            return
        arrays = {n: self._view(n) for n in self.INPUTS}  # pending terms added
        with added_or_restored(arrays[name], U, V):
            kept, _ = self._kept_values(self._written_outputs(arrays))
        self._pending.clear()  # the inputs' terms were added; every other view is behind
        self._store.update(kept)
        self._behind = frozenset(self.VIEWS) - set(kept)

    def _written_outputs(self, arrays: dict) -> dict:
        """The outputs of the program as written on ``arrays``, by the views that hold
        them: ``_evaluate_written``, or, where the compiled program is the one written,
        ``_evaluate``'s outputs (its other views are computed on the way, as the program
        computes them, but neither kept nor checked: ``bench/written_phases.py`` measured
        the checks of cg_steps' 17 views at about 60-75 µs of a 2 ms update)."""
        run = getattr(self, "_evaluate_written", None)
        if run is not None:
            return run(self.dims, arrays)
        every = self._evaluate(self.dims, arrays)
        return {v: every[v] for v in self.OUTPUTS.values() if v in every}

    def _catch_up(self) -> None:
        """Re-evaluate every view from the inputs (the program as compiled): the views the
        program as written left behind are read, or a maintaining trigger runs."""
        behind, self._behind = self._behind, frozenset()
        try:
            self._views = self._reevaluate({n: self._view(n) for n in self.INPUTS})
        except BaseException:
            self._behind = behind
            raise
        self.stats["caught_up"] = self.stats.get("caught_up", 0) + 1

    # ------------------------------------------------------------ trials at load
    def _load_trials(self) -> None:
        """Time each mode a trigger may run in (see the module docstring) and start each
        trigger in the fastest."""
        a = self.adaptation
        kept = dict(self.stats)
        maintained: dict[str, dict] = {}
        for x in sorted(a.inputs - a.reevaluated):
            maintained[x] = self._time_maintenance(
                x, [m for m in a.modes(x) if m in ("maintain", "threads")])
        self._pending.clear()  # the trial updates' terms: below half an ulp
        self.stats.update({k: v for k, v in kept.items() if k != "switches"})
        timed = [x for x in sorted(a.inputs) if self._worth_timing(x, maintained.get(x))]
        written = self._time_written(any(x in a.threads for x in timed)) if timed else {}
        for x in sorted(a.inputs):
            trials = {m: t for m, t in maintained.get(x, {}).items() if t is not None}
            fast = None
            if x in timed:
                fast = min(written, key=written.get)
                trials["reeval"] = written[fast]
                if len(written) > 1:
                    trials["reeval_threads"] = max(written.values())
            elif trials and x in self.AS_WRITTEN:  # predicted, scaled as maintenance was
                keep, again, fast = self.AS_WRITTEN[x]
                trials["reeval"] = again * min(trials.values()) / keep
            switch = a.seed(x, trials, fast, LOAD_MARGIN)
            if switch is not None:
                self.stats["switches"].append({"update": 0, "at": "load", **switch})

    def _worth_timing(self, x: str, maintained: dict | None) -> bool:
        """Whether the program as written is timed for the trigger of ``x``: compiled to
        re-evaluate, or predicted within :data:`WRITTEN_TRIAL_MAX` of its maintenance.
        The two predictions are compared with each other, not with the measured
        maintenance: they are priced at the sizes the program was compiled for, which may
        be far from the data's (an O(n³) program as written at n = 4000 is 64 times its
        price at n = 1000, its O(n²) maintenance 16 times)."""
        times = [t for t in (maintained or {}).values() if t is not None]
        if not times or x not in self.AS_WRITTEN:
            return True
        keep, again, _ = self.AS_WRITTEN[x]
        return again <= WRITTEN_TRIAL_MAX * keep

    def _time_maintenance(self, x: str, modes: list[str]) -> dict[str, float | None]:
        """``{mode: seconds}``: the fastest of :data:`TRIALS` runs of the maintaining
        trigger of ``x`` in each of ``modes`` on a vanishing row update (:data:`TINY`: the
        views do not change), the modes taking turns run by run (as
        :meth:`_time_written`); None for a mode a guard refused."""
        a = self.adaptation
        rows, cols = self._store[x].shape
        U = np.zeros((rows, 1), order="F")
        U[0, 0] = 1.0  # a row update, as planned
        V = np.asfortranarray(TINY * np.random.default_rng(0).standard_normal((cols, 1)))
        row = self._store[x][0].copy()
        compiled = a.mode[x]
        best: dict[str, float | None] = dict.fromkeys(modes, np.inf)
        try:
            for _ in range(TRIALS):
                for mode in [m for m in modes if best[m] is not None]:
                    a.mode[x] = mode
                    try:
                        t0 = time.perf_counter()
                        with self._blas(x), wide_products(self._wide):
                            getattr(self, f"on_update_{x}")(U, V)
                        self._prober.commit()
                        best[mode] = min(best[mode], time.perf_counter() - t0)
                    except (IllConditioned, NumericalError):
                        self._prober.discard()
                        best[mode] = None
        finally:
            a.mode[x] = compiled
            self._store[x][0] = row  # exactly as given
        return best

    def _time_written(self, both: bool) -> dict:
        """``{threads: seconds}`` of the program as written (the fastest of :data:`TRIALS`
        runs) on one BLAS thread and on every thread (``both``), else as the threads are.
        The settings take turns run by run (1, all, 1, all, ...): timed one setting after
        the other, a change in the machine's load between them (another process starting)
        decided the comparison (gradient_descent5 started on one thread at 27 ms per
        update when all threads took 13 ms)."""
        arrays = {n: self._view(n) for n in self.INPUTS}
        settings = (1, None) if both else (None,)
        out = dict.fromkeys(settings, np.inf)
        for _ in range(TRIALS):
            for threads in settings:
                with trigger_limit(threads, True) if both else _unchanged():
                    t0 = time.perf_counter()
                    self._kept_values(self._written_outputs(arrays))
                    out[threads] = min(out[threads], time.perf_counter() - t0)
        return out


def _unchanged():
    import contextlib

    return contextlib.nullcontext()
