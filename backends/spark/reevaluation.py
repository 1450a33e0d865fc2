"""Re-evaluation on the cluster, and the correction while running that switches a trigger
to it (``docs/auto.md``).

:class:`ClusterRuns` is a mixin of :class:`.runtime.SparkTriggerModule`: evaluating every
view from inputs in blocks (at load, in a refresh, in a trigger that re-evaluates), placing
and materializing the results in one job that checks they are finite, and the adaptation.

Correction while running (the NumPy backend's :mod:`..numpy.adaptive`, with the same
:class:`~..numpy.adaptive.Adaptation` and its rules): every update is timed, and at the end
of each window of updates of one input its median is compared with the re-evaluation's
seconds.  On Spark there are two modes per trigger, "maintain" (as compiled) and "reeval"
(every view evaluated again on the cluster from the updated inputs, as
:meth:`ClusterRuns._reevaluate_trigger` does); the driver's BLAS threads are not what a
Spark trigger's time is made of, so they never switch.  The re-evaluation's seconds are
measured at load: the evaluation alone, after the inputs were read into blocks and
cached (their first job, which also starts the executors' Python workers, is not
counted).  A re-evaluation leaves no view behind (every view is evaluated, unlike the
program as written on NumPy), so going back to maintenance costs nothing extra.
"""

from __future__ import annotations

import functools
import time

import numpy as np

from linview.backends.numpy import adaptive
from linview.backends.spark import tasks
from linview.backends.spark.blocks import DistMatrix
from linview.errors import InputError, NumericalError


class ClusterRuns:
    """Re-evaluation on the cluster and the switches to it (a mixin: the module's
    ``_place``, ``_evaluate``, ``_ctx``, ``_prober`` and ``_sweep`` are used)."""

    #: seconds of the last evaluation of every view, inputs already in blocks
    _evaluation_s: float | None = None

    def _materialize(self, views: dict) -> None:
        """Compute and cache every distributed view in one Spark job that also checks that
        all entries are finite (the NumPy backend's check after evaluation)."""
        bad = [n for n, v in views.items() if isinstance(v, np.ndarray)
               and not np.all(np.isfinite(v))]
        dist = [(n, v) for n, v in views.items() if isinstance(v, DistMatrix)]
        if dist:
            jobs = [r.map(functools.partial(tasks.w_reduce, n, "finite", 1.0))
                    for n, v in dist for r in v.rdds()]
            bad += sorted({n for n, ok in self._ctx.sc.union(jobs).collect() if not ok})
            for _, v in dist:
                v._rewrap()
        if bad:
            name = bad[0]
            if name in self.INPUTS:
                raise InputError(f"input {name} contains NaN or Inf")
            raise NumericalError(f"{self.PROGRAM}: view {name} is not finite after "
                                 "evaluation", hint="check the inputs' conditioning")

    def _reevaluate(self, arrays):
        self._prober.reset()
        try:
            placed = {n: self._place(n, a, input=True) for n, a in arrays.items()}
            # the inputs in blocks first, checked (NaN, Inf) and cached: what follows is
            # the evaluation alone, timed (what a trigger that re-evaluates costs)
            self._materialize({n: v for n, v in placed.items() if isinstance(v, DistMatrix)})
            t0 = time.perf_counter()
            kept, transient = self._kept_values(self._evaluate(self.dims, placed))
            # the products may have added a layout to an input (a relayout): drop it
            views = {n: self._place(n, v, input=True) for n, v in placed.items()}
            self._materialize(views)
            views.update(kept)
            for name, val in transient.items():  # evaluated to be inverted, not kept
                self._prober.seed(name, val)
            self._evaluation_s = time.perf_counter() - t0
        except BaseException:
            self._sweep()  # drop what this attempt cached; the old views stay
            raise
        return views

    def _kept_values(self, computed):
        """Re-evaluated views placed in blocks and materialized, and the ``TRANSIENT``
        ones apart (as computed: a transient one is read once, by the probe's seed)."""
        views = {n: self._place(n, v) for n, v in computed.items() if n not in self.TRANSIENT}
        self._materialize(views)
        return views, {n: v for n, v in computed.items() if n in self.TRANSIENT}

    def reevaluate_update(self, name: str, U: np.ndarray, V: np.ndarray) -> None:
        """Apply ``name += U Vᵀ`` by re-evaluating every view (old views kept on error)."""
        self._reevaluate_trigger(name, U, V)

    def _reevaluate_trigger(self, name: str, U: np.ndarray, V: np.ndarray) -> None:
        """A trigger that re-evaluates: every view from the updated inputs."""
        arrays = {n: self._views[n] for n in self.INPUTS}
        X = arrays[name]
        arrays[name] = X.plus_outer(U, V) if isinstance(X, DistMatrix) else X + U @ V.T
        self._views = self._reevaluate(arrays)

    # -------------------------------------------------------------- correction
    def _adapt_start(self, reeval_s: float | None) -> None:
        """Start measuring (:meth:`..numpy.adaptive.Adaptive._adapt_start`, strategy
        only): the alternative is the evaluation at load on the cluster (None when nothing
        was evaluated, a restored module: then nothing switches)."""
        if reeval_s is not None and self._evaluation_s is not None:
            reeval_s = self._evaluation_s  # without reading the inputs into blocks
        candidates = [x for x in self.DYNAMIC if x not in self.REEVALUATED]
        self.adaptation = adaptive.Adaptation(candidates, reeval_s)
        self.stats["switches"] = []

    def _spark_trigger(self, name: str, U, V) -> None:
        """The trigger of ``name``: as compiled, or every view evaluated again on the
        cluster after a switch."""
        if self.adaptation.reevaluates(name):
            self._reevaluate_trigger(name, U, V)
        else:
            getattr(self, f"on_update_{name}")(U, V)
