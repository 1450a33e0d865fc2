"""Runtime support for generated NumPy trigger modules.

A generated module defines one subclass of :class:`TriggerModule`; this base class holds
everything that is the same for every program: input validation, the two-phase update
protocol, verification against re-evaluation, drift policy, and save/restore.  It also
re-exports the in-place BLAS kernels (:mod:`.kernels`) and numerical guards (:mod:`.guards`)
the generated code calls as ``rt.<name>``.

The generated code only ever imports numpy, scipy and this module."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping

import numpy as np

from linview.backends.numpy import adaptive, fallback, input_shapes, lowrank, numeric, reuse, store
from linview.backends.numpy import probe as _probe
from linview.backends.numpy.guards import (  # noqa: F401 - part of the runtime's interface
    CORE_CONDITION_LIMIT,
    INV_CONDITION_LIMIT,
    OVERFLOW_GUARD,
    IllConditioned,
    ProbeFailed,
    check_deltas,
    core_inv,
    inv,
    real_dtype_problem,
    solve,
    update_factor,
)
from linview.backends.numpy.kernels import (  # noqa: F401 - part of the runtime's interface
    THREAD_ENV,
    TRIGGER_THREADS,
    Size,
    as_matrix,
    blas_limit,
    blas_threads,
    one_hot,
    owned,
    pools,
    size_text,
    source_hash,
    trigger_limit,
    user_threads,
    warm,
    wide_products,
)
from linview.backends.numpy.lowrank import dot, fused_dot  # noqa: F401 - rt.*
from linview.backends.numpy.octave_rt import chol, diag, lu, norm, pinv, qr  # noqa: F401 - rt.norm...
from linview.backends.numpy.phase2 import (  # noqa: F401 - rt.*
    add_dense,
    add_outer,
    added_or_restored,
    assign,
)
from linview.errors import InputError, MemoryBudgetError, NumericalError, StateError, UpdateError


class TriggerModule(adaptive.Adaptive, lowrank.PendingViews, store.Writing):
    """Keeps every view of one compiled program fresh.  Generated subclasses define:

    ``PROGRAM``   program name;           ``SOURCE_HASH`` hash of the .m source + options
    ``INPUTS``    {name: (rows, cols)} sizes as Python expressions over dims ``d[...]``
    ``DYNAMIC``   names of inputs with triggers
    ``VIEWS``     {name: (rows, cols)} of the materialized views, in program order
    ``OUTPUTS``   {output name: view or input name}
    ``_evaluate(d, inputs) -> views`` and ``on_update_<X>(U, V)`` per dynamic input.
    """

    PROGRAM = ""
    SOURCE_HASH = ""
    INPUTS: Mapping[str, tuple] = {}  # name -> (rows, cols), each a name, an int or a Size
    DYNAMIC: tuple[str, ...] = ()
    VIEWS: Mapping[str, tuple] = {}
    OUTPUTS: Mapping[str, str] = {}
    #: (size, reason) of sizes the program was compiled assuming are not 1
    NOT_ONE: tuple[tuple[object, str], ...] = ()
    #: the generated module's own source text (set by the loader; used by save())
    MODULE_SOURCE = ""
    #: the program's .m source, name, file name and compile options (set by
    #: ``linview.compile``; stored by save() so that restore() can compile it again)
    PROGRAM_INFO: Mapping[str, object] = {}
    #: the program as planned (set by ``linview.compile``): what view keys are made of
    KEY_PROGRAM = None
    #: what a load with ``reuse=``/``store=`` reused and recomputed (``reuse.Report``)
    reuse_report = None

    #: {input: BLAS threads} of triggers that differ from TRIGGER_THREADS (a trigger that
    #: re-evaluates the program keeps every thread: None)
    TRIGGER_BLAS = {}
    #: {input: reason} of triggers that re-evaluate the program instead of maintaining views
    REEVALUATED = {}
    #: views the re-evaluation computes but the module does not keep (``Plan.transient``)
    TRANSIENT: tuple[str, ...] = ()
    #: {maintained inverse: the views a failed probe of it re-evaluates (its chain)} and
    #: {input: the views its trigger changes}; see :mod:`.fallback`
    REFRESH: Mapping[str, tuple[str, ...]] = {}
    CHANGES: Mapping[str, tuple[str, ...]] = {}

    #: keyword options of the constructor; an input of the same name takes precedence.
    #: ``blas_threads``: "auto" (maintaining triggers run single-threaded unless the user
    #: set BLAS threads in the environment), an int for every trigger, or None (no change)
    OPTIONS = {"refresh_every": None, "check_every": None, "tolerance": 1e-6,
               "probe": True, "probe_tolerance": 1e-9,
               "condition_limit": INV_CONDITION_LIMIT, "blas_threads": "auto"}

    @numeric.quiet("the inputs' values", numeric.given_inputs)
    def __init__(self, /, _state=None, _reuse=None, **kwargs):
        opts = {k: kwargs.pop(k) if k in kwargs and k not in self.INPUTS else v
                for k, v in self.OPTIONS.items()}
        inputs = kwargs
        self._configure(opts)
        self.stats = {"updates": 0, "fallbacks": 0, "refreshes": 0, "trigger_seconds": 0.0,
                      "probe_failures": 0, "probe_seconds": 0.0, "partial_refreshes": 0}
        self._prober = _probe.Prober()
        #: the last update that fell back: {"update", "because", "refreshed": views}
        self.last_fallback: dict | None = None
        #: the last error check: {"by": "probe" | "verify", "error", "ok", "at" (time.time())}
        self.last_check: dict | None = None
        self.saved_meta: dict = {}
        if _state is not None:
            self.dims, self._views, self.updates = _state
            reeval_s = None
        elif _reuse is not None:  # views by key from another load (see .reuse)
            self.dims, self.updates, reeval_s = {}, 0, None
            self._views = self._load_reusing(self._validate_inputs(*_reuse.own(inputs)), _reuse)
        else:
            self.dims, t0 = {}, time.perf_counter()
            self._views = self._reevaluate(self._validate_inputs(inputs))
            reeval_s, self.updates = time.perf_counter() - t0, 0  # measured (.adaptive)
        warm(self._views.values())
        self._adapt_start(reeval_s)

    def _load_reusing(self, arrays: dict, offer) -> dict:  # views by key (.reuse)
        return reuse.evaluate(self, arrays, offer)

    def _configure(self, opts: dict) -> None:
        """Apply the constructor's options (``OPTIONS`` keys) before any input is read."""
        self.refresh_every = opts["refresh_every"]
        self.check_every = opts["check_every"]
        self.tolerance = opts["tolerance"]
        self.probe = bool(opts["probe"])
        self.probe_tolerance = float(opts["probe_tolerance"])
        self.condition_limit = float(opts["condition_limit"])
        threads = opts.get("blas_threads", "auto")
        # large thin products may widen to every core only under the automatic policy
        self._wide = threads == "auto" and not user_threads()
        if threads == "auto":
            self._threads = {} if user_threads() else {
                x: self.TRIGGER_BLAS.get(x, TRIGGER_THREADS) for x in self.DYNAMIC}
        elif threads is None:
            self._threads = {}
        elif isinstance(threads, int) and not isinstance(threads, bool) and threads >= 1:
            self._threads = dict.fromkeys(self.DYNAMIC, threads)
        else:
            raise InputError(f"blas_threads must be 'auto', None or a positive int, "
                             f"not {threads!r}")
        if self._threads or self._wide:
            pools()  # finding the BLAS libraries takes milliseconds: at load, not in an update

    # -------------------------------------------------------------- inputs
    def _validate_inputs(self, inputs: Mapping[str, object], keep=()) -> dict[str, np.ndarray]:
        missing = [n for n in self.INPUTS if n not in inputs]
        extra = [n for n in inputs if n not in self.INPUTS]
        if missing or extra:
            parts = []
            if missing:
                parts.append("missing " + ", ".join(missing))
            if extra:
                parts.append("unexpected " + ", ".join(extra))
            raise InputError(f"{self.PROGRAM}: " + "; ".join(parts),
                             hint="inputs: " + ", ".join(self.INPUTS))
        # copies (updated in place), but arrays this load owns (``keep``: see reuse.Offer.own)
        arrays = {n: as_matrix(inputs[n], f"input {n}", copy=n not in keep) for n in self.INPUTS}
        self.dims = self._bind_dims(arrays)
        return arrays

    def _bind_dims(self, arrays: Mapping[str, np.ndarray]) -> dict[str, int]:
        """Bind every bare size from the inputs' shapes; check literal and compound ones."""
        return input_shapes.bind(self, arrays)

    def _reevaluate(self, arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        self._prober.reset()
        views = dict(arrays)
        kept, transient = self._kept_values(self._evaluate(self.dims, arrays))
        for name, val in transient.items():  # evaluated to be inverted; no trigger keeps it
            self._prober.seed(name, val)
        views.update(kept)
        return views

    def _kept_values(self, computed: Mapping[str, object]):
        """Evaluated views as the module keeps them (Fortran-ordered float64 matrices that
        own their memory, checked finite), and the ``TRANSIENT`` ones apart."""
        kept, transient = {}, {}
        for name, val in computed.items():
            val = np.asarray(val, dtype=np.float64)
            if name in self.TRANSIENT:
                transient[name] = val
                continue
            if val.ndim < 2:  # a constant statement such as C = 0.5
                val = val.reshape(1, -1)
            # a view that is a transpose or slice of another array (D = B') must own its
            # memory: it is updated in place
            val = np.array(val, order="F") if val.base is not None else \
                np.asfortranarray(val)
            if not np.all(np.isfinite(val)):
                raise NumericalError(f"{self.PROGRAM}: view {name} is not finite after "
                                     "evaluation", hint="check the inputs' conditioning")
            kept[name] = val
        return kept, transient

    # -------------------------------------------------------------- reading
    def __getitem__(self, name: str) -> np.ndarray:
        self._check_fresh()
        key = self.OUTPUTS.get(name, name)
        if key not in self._store:
            raise KeyError(f"{name!r} is not an output, view or input of {self.PROGRAM} "
                           f"(outputs: {', '.join(self.OUTPUTS)})")
        out = self._view(key).copy(order="K")  # a snapshot: views change in place
        out.flags.writeable = False
        return out

    def __contains__(self, name: str) -> bool:
        return name in self.OUTPUTS or name in self._store

    @property
    def outputs(self) -> dict[str, np.ndarray]:
        return {name: self[name] for name in self.OUTPUTS}

    @property
    def least_squares(self) -> str | None:
        """Which least-squares form ``load()`` chose and why (``linview.lstsq``), worked
        out when first read (a condition estimate reads the views: not on every load)."""
        if callable(why := self.__dict__.get("_least_squares")):
            self._least_squares = why = why()
        return why

    @least_squares.setter
    def least_squares(self, why) -> None:
        self._least_squares = why

    @property
    def probes(self) -> dict[str, dict[str, float]]:
        """The last probe of each maintained inverse (the running error estimate):
        ``{view: {"residual", "condition", "allowed"}}`` (see ``probe.py``)."""
        return {k: dict(v) for k, v in self._prober.last.items()}

    @property
    def inputs(self) -> dict[str, np.ndarray]:
        return {name: self[name] for name in self.INPUTS}

    @property
    def views(self) -> dict[str, np.ndarray]:
        return {name: self[name] for name in self.VIEWS}

    # -------------------------------------------------------------- updating
    @numeric.quiet("the update's values")
    def update(self, name: str, U, V) -> None:
        """``name += U Vᵀ`` and bring every view up to date (two phases: all deltas are
        computed from the old views and checked before any view changes)."""
        U, V = self._validate_update(name, U, V)
        t0 = time.perf_counter()
        if self.updates % _probe.RENEW_EVERY == 0:
            self._prober.reset(keep=frozenset(self.TRANSIENT))  # fresh vectors now and then
        try:
            with self._blas(name), wide_products(self._wide):
                self._run_trigger(name, U, V)  # as compiled, or switched (.adaptive)
            self._prober.commit()
        except IllConditioned as why:
            # a Woodbury core is (nearly) singular or a probe failed: nothing was applied;
            # refresh the failing chain or every view instead (refused with nothing
            # changed if that is unsafe too)
            fallback.recover(self, name, U, V, why)
        except MemoryError as e:  # the views may hold part of it: refused until refresh()
            self._stale = f"{self.PROGRAM}: out of memory during the update of {name}"
            raise MemoryBudgetError(f"{self._stale} ({e or 'MemoryError'})", hint=(
                "views.refresh() re-evaluates every view; a lower memory budget refuses "
                "such loads before allocating (docs/memory.md)")) from None
        self._observe(name, time.perf_counter() - t0)  # stats["trigger_seconds"] too
        self.updates += 1
        self.stats["updates"] += 1
        self._drift_policy()

    def _blas(self, name: str):
        """The BLAS threads of the trigger of ``name`` (:func:`.threads.trigger_limit`)."""
        if name not in self._threads:  # the user's environment chose
            return contextlib.nullcontext()
        return trigger_limit(self._trigger_threads(name), self._reevaluating(name))

    def _probe(self, W: str, A: str, dA, dW, Wa=None) -> None:
        """Phase-1 probe of the maintained inverse ``W = inv(A)`` (see
        :mod:`.probe`); generated triggers call it after ``rt.check_deltas``, with ``Wa``
        the old W times :meth:`_probe_rider`'s vector when their pass over W computed it."""
        _probe.probe(self, W, A, dA, dW, Wa)

    def _probe_rider(self, W: str, A: str, dA) -> np.ndarray:
        """The vector the probe of ``W = inv(A)`` needs multiplied by W, for the trigger's
        own pass over W (no columns when the probe makes its own passes)."""
        return _probe.rider(self, W, A, dA)

    def _refresh_chains(self, name: str, U, V, failed: set[str]):
        """Apply the update, re-evaluating only the chains of the inverses ``failed``
        (:func:`.fallback.refresh_chains`); None: re-evaluate everything instead."""
        return fallback.refresh_chains(self, name, U, V, failed)

    def _undo_log(self, name: str) -> fallback.Snapshot:
        """What restores the views ``on_update_<name>`` changes (a partial refresh)."""
        return fallback.Snapshot(self._views, (name, *self.CHANGES.get(name, ())),
                                 self._pending)

    _stale = None  # why the views cannot be trusted until refresh() (an update cut short)

    def _check_fresh(self) -> None:
        if self._stale:
            raise StateError(f"{self._stale}: the views may hold part of it",
                             hint="views.refresh() re-evaluates every view from the inputs")

    def _validate_update(self, name: str, U, V) -> tuple[np.ndarray, np.ndarray]:
        self._check_fresh()
        store.settle(self)  # a load's store entries written from views about to change
        if name not in self.INPUTS:
            raise UpdateError(f"{self.PROGRAM} has no input {name!r}",
                              hint="dynamic inputs: " + ", ".join(self.DYNAMIC))
        if name not in self.DYNAMIC:
            raise UpdateError(f"input {name} is not dynamic: the program was compiled "
                              "without a trigger for it",
                              hint="mark it with '%#linview dynamic ...'; dynamic inputs: "
                              + (", ".join(self.DYNAMIC) or "none"))
        rows, cols = self._store[name].shape
        out = []
        for what, x, n in (("U", U, rows), ("V", V, cols)):
            if type(x) is np.ndarray and x.dtype == np.float64:  # the usual case, at once
                a = np.array(x, order="F")  # a copy: the caller may change x afterwards
            else:
                a = update_factor(name, what, x)
            if a.ndim == 1:
                a = a.reshape(-1, 1)
            if a.ndim != 2 or a.shape[0] != n:
                raise UpdateError(
                    f"update of {name}: {what} has shape {a.shape}, expected ({n}, k)",
                    hint=f"{name} is {rows}x{cols}; ΔX = U Vᵀ with U: {rows}×k, V: {cols}×k")
            if not np.isfinite(a).all():
                raise UpdateError(f"update of {name}: {what} contains NaN or Inf; nothing "
                                  "was changed")
            out.append(a)
        if out[0].shape[1] != out[1].shape[1]:
            raise UpdateError(f"update of {name}: U has {out[0].shape[1]} columns but V has "
                              f"{out[1].shape[1]}; both must have rank k")
        if out[0].shape[1] == 0:
            raise UpdateError(f"update of {name}: rank 0 (U and V have no columns)")
        return out[0], out[1]

    def reevaluate_update(self, name: str, U: np.ndarray, V: np.ndarray) -> None:
        """Apply ``name += U Vᵀ`` in place and re-evaluate every view from the inputs (the
        program re-run: the baseline incremental maintenance is measured against, and the
        fallback when a Woodbury core is refused).  On an error the old state is kept."""
        self._reevaluate_trigger(name, U, V)

    def _reevaluate_trigger(self, name: str, U: np.ndarray, V: np.ndarray) -> None:
        """A trigger that re-evaluates (the cost model found maintenance slower): ``name +=
        U Vᵀ`` in place, then every view from the inputs.  On an error the input is restored
        (exactly: the touched rows, or a copy) and nothing else has changed."""
        store.settle(self)
        with added_or_restored(self._views[name], U, V):
            self._views = self._reevaluate({n: self._views[n] for n in self.INPUTS})

    def reevaluate_updates(self, updates: Mapping[str, tuple], rows=None) -> None:
        """Every ``name += U Vᵀ`` of ``updates`` and ``name[i] += D`` of ``rows``
        ({input: (i, D)}), then every view re-evaluated once."""
        fallback.reevaluate_updates(self, updates, rows)

    def _drift_policy(self) -> None:
        if self.refresh_every and self.updates % self.refresh_every == 0:
            self.refresh()
        elif self.check_every and self.updates % self.check_every == 0:
            if self.verify() > self.tolerance:
                self.refresh()

    def refresh(self) -> None:
        """Re-evaluate every view from the current inputs."""
        arrays = {n: self._views[n] for n in self.INPUTS}
        self._views = self._reevaluate(arrays)
        self._stale = None
        self.stats["refreshes"] += 1

    def verify(self, detail: bool = False):
        """Max relative error of every view against re-evaluation from the current inputs
        (``detail=True``: a dict per view).  Costs one full re-evaluation.  It reports and
        never raises: when the inputs cannot be re-evaluated (e.g. a matrix to invert is
        singular) every error is ``inf`` and ``self.verify_error`` says why."""
        self.verify_error = None
        try:
            fresh = self._evaluate(self.dims, {n: self._views[n] for n in self.INPUTS})
        except NumericalError as e:
            self.verify_error = e.message
            errs = dict.fromkeys(self.VIEWS, float("inf"))
            self._checked(errs)
            return errs if detail else max(errs.values(), default=0.0)
        errs = numeric.relative_errors(self._views, fresh, skip=self.TRANSIENT)
        self._checked(errs)
        return errs if detail else max(errs.values(), default=0.0)

    def _checked(self, errs: dict) -> None:
        """Record a verification as the last error check."""
        worst = max(errs.values(), default=0.0)
        self.last_check = {"by": "verify", "error": worst, "ok": worst <= self.tolerance,
                           "at": time.time()}

    # -------------------------------------------------------------- persistence
    def save(self, path, extra: dict | None = None) -> None:
        """Write inputs, views, dims, update count, the program's ``.m`` source and its
        compile options to an ``.npz`` state file, atomically (see
        :mod:`linview.statefile`: data and checksums, never code).  ``extra`` (JSON
        values) is stored with them and comes back as ``saved_meta["extra"]``."""
        from linview import statefile

        manifest = {"program": self.PROGRAM, "hash": self.SOURCE_HASH,
                    "updates": int(self.updates), "dims": dict(self.dims),
                    "extra": dict(extra or {}), "keys": reuse.module_keys(self),
                    **self.PROGRAM_INFO}
        manifest.update({"least_squares": why} if (why := self.least_squares) else {})
        vectors, manifest["probe"] = _probe.saved(self._prober)  # guards as strict on restore
        statefile.write(path, self._views_for_saving(), manifest, vectors)

    def _views_for_saving(self) -> dict[str, np.ndarray]:
        return self._views

    @classmethod
    def _from_saved(cls, meta: dict, views: dict[str, np.ndarray], **options):
        if meta.get("hash") != cls.SOURCE_HASH:
            raise StateError(f"the saved state was written by program {meta.get('program')!r}"
                             f" (hash {meta.get('hash')}), not by {cls.PROGRAM!r} "
                             f"(hash {cls.SOURCE_HASH})",
                             hint="restore it with the program that saved it")
        want = set(cls.INPUTS) | set(cls.VIEWS)
        if set(views) != want:
            raise StateError("the saved state does not hold the views this program needs")
        for k, v in views.items():
            if v.ndim != 2 or not np.all(np.isfinite(v)):
                raise StateError(f"the saved view {k} is not a finite matrix")
        views = {k: np.asfortranarray(v.astype(np.float64, copy=False)) for k, v in views.items()}
        out = cls(_state=(dict(meta["dims"]), views, int(meta["updates"])), **options)
        out.saved_meta = meta
        return out

