"""The base class of generated modules with solve views or sparse inputs.

A program whose lowering has ``x := solve(A, B)`` statements (``A \\ B`` with a sparse A,
or a ``%#linview solve``/``tolerance`` pragma), or inputs stored ``sparse``/``stochastic``,
is generated as a subclass of :class:`SolveModule` (``backends/numpy/solve_codegen.py``).
It is an ordinary trigger module: the views that read neither a solve view nor a sparse
input keep their normal triggers (Woodbury and the rest), and

* the inputs keep their storage: ``stochastic`` ones are a
  :class:`~linview.solve.stochastic.StochasticMatrix` (links), ``sparse`` ones a CSR matrix;
* each solve view is a :class:`~.solve_view.SolveView` (``self._solves``), built by the
  generated ``_evaluate`` through :meth:`SolveModule._solve_view` and changed by the
  triggers through :meth:`SolveModule._change_solve` with the derived changes of its A and B;
* the other views that read a solve view or a sparse value (the "solve side", ``SIDE``)
  are re-evaluated by the trigger, in program order (sparse where their value is).

Saving writes the inputs in their storage and the solve views' solutions in the one state
format (:mod:`linview.statefile`); restoring loads the inputs again, warm-started from the
solutions, so that every bound is certified again from exact residuals.  A least-squares
view (the ``cholesky`` method) saves and restores its solver's whole state instead (its
factor, solution and refinement scalars: :func:`.solve_state.factor_arrays`), so that a
restored run continues bit for bit.  Loads with
``reuse=``/``store=`` (and an edited program's restore) take views by key
(:mod:`.reuse`): sparse inputs keyed by their CSR arrays, a solve view taken over with its
solver built again, warm from the kept solution.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping

import numpy as np
import scipy.sparse as sps

from linview.backends.numpy import numeric, solve_state
from linview.backends.numpy.kernels import as_matrix
from linview.backends.numpy.runtime import TriggerModule
from linview.backends.numpy.solve_view import Rebuild, SolveView, scalar  # noqa: F401 - sv.*
from linview.compiler.ops_solve import direct_solve
from linview.errors import InputError, StateError, UpdateError
from linview.solve.evaluate import change_factors
from linview.solve.solvers import PushSolver
from linview.solve.stochastic import StochasticMatrix


def stored(x, kind: str | None, name: str):
    """Input ``x`` in its storage: a StochasticMatrix (the caller's own object, which
    edge updates change), a CSR matrix, or a dense Fortran array."""
    if kind is None:
        return as_matrix(x, f"input {name}")
    try:
        if kind == "stochastic":
            val = x if isinstance(x, StochasticMatrix) else StochasticMatrix.from_matrix(x)
            data = val.wts
        else:
            val = sps.csr_matrix(x, dtype=float)
            data = val.data
    except InputError as e:
        raise InputError(f"input {name}: {e.message}", hint=e.hint) from None
    except (TypeError, ValueError) as e:
        raise InputError(f"input {name} is not a numeric matrix: {e}") from None
    if not np.all(np.isfinite(data)):
        raise InputError(f"input {name} contains NaN or Inf")
    return val


def speye(n: int):
    """``eye(n)``, sparse as in Octave."""
    return sps.identity(int(n), format="csr")


def dense(x) -> np.ndarray:
    """A sparse value where the program asks for a dense one (``inv``, functions)."""
    return x.toarray() if sps.issparse(x) else x


def emul(a, b):
    """``a .* b``, sparse when either operand is."""
    if sps.issparse(a):
        return a.multiply(b).tocsr()
    return b.multiply(a).tocsr() if sps.issparse(b) else a * b


def snapshot(val):
    """A copy of a value that later updates never change."""
    if isinstance(val, np.ndarray):
        out = val.copy(order="K")
        out.flags.writeable = False
        return out
    return copy.deepcopy(val) if isinstance(val, StochasticMatrix) else val.copy()


class SolveModule(TriggerModule):
    """A trigger module with solve views (see the module docstring).  Generated subclasses
    also define ``STORAGE`` ({input: "sparse" | "stochastic"}), ``SOLVES`` ({solve view:
    (method, tolerance)}) and ``SIDE`` (the views kept by the solve side, program order)."""

    STORAGE: Mapping[str, str] = {}
    SOLVES: Mapping[str, tuple[str, float]] = {}
    SIDE: tuple[str, ...] = ()
    OPTIONS = {**TriggerModule.OPTIONS, "tolerance": None, "method": None}

    def __init__(self, /, _state=None, _reuse=None, _warm=None, _restored=None,
                 _factors=None, **kwargs):
        if _state is not None:
            raise InputError("a program with solve views is restored by linview.restore")
        self._solves: dict[str, SolveView] = {}
        self._warm = dict(_warm or {})
        self._factors = dict(_factors or {})  # least-squares solvers' saved states
        self._restored = dict(_restored or {})  # dense views of a state file, as saved
        self._direct = False  # verify(): direct solves, no solver is touched
        self._edge_changes = None
        # reuse=, store=, an edited program: views by key, solve views taken over warm
        super().__init__(_reuse=_reuse, **kwargs)  # (backends/numpy/reuse.py)
        self._warm, self._factors = {}, {}

    def _configure(self, opts: dict) -> None:
        self.solve_tolerance, self.method = opts["tolerance"], opts["method"]
        if self.method not in (None, "auto", "push", "krylov"):
            raise InputError(f"unknown solve method {self.method!r}",
                             hint="methods: auto, push, krylov")
        if self.solve_tolerance is not None and not float(self.solve_tolerance) > 0:
            raise InputError("tolerance must be a positive number")
        super()._configure({**opts, "tolerance": self.solve_tolerance or 1e-6})

    # -------------------------------------------------------------- inputs and views
    def _validate_inputs(self, inputs: Mapping[str, object], keep=()) -> dict:
        names = list(self.INPUTS)
        missing = [n for n in names if n not in inputs]
        extra = [n for n in inputs if n not in names]
        if missing or extra:
            what = "; ".join(p for p in (missing and "missing " + ", ".join(missing),
                                         extra and "unexpected " + ", ".join(extra)) if p)
            raise InputError(f"{self.PROGRAM}: {what}", hint="inputs: " + ", ".join(names))
        arrays = {n: stored(inputs[n], self.STORAGE.get(n), n) for n in names}
        self.dims = self._bind_dims(arrays)
        return arrays

    def _reevaluate(self, arrays: Mapping[str, object]) -> dict:
        """Every view from the inputs; restoring (``_restored``), the saved dense views as
        they are and only the others evaluated (solve views warm, sparse values), in
        program order, by the module's ``_evaluate_some``."""
        restored, self._restored = self._restored, {}
        if not restored:
            return super()._reevaluate(arrays)
        if set(restored) - set(self.VIEWS):
            raise StateError("the saved state holds views this program does not have: "
                             + ", ".join(sorted(set(restored) - set(self.VIEWS))))
        self._prober.reset()
        views = dict(arrays)
        kept, _ = self._kept_values(restored)  # checked finite, Fortran-ordered
        views.update(kept)
        missing = {n for n in self.VIEWS if n not in views}
        computed, transient = self._kept_values(
            self._evaluate_some(self.dims, views, missing))
        for name, val in transient.items():
            self._prober.seed(name, val)
        views.update(computed)
        return views

    def _kept_values(self, computed: Mapping[str, object]):
        own = {k: v for k, v in computed.items() if k in self.SOLVES or sps.issparse(v)}
        kept, transient = super()._kept_values(
            {k: v for k, v in computed.items() if k not in own})
        kept.update({k: v.tocsr() if sps.issparse(v) else v for k, v in own.items()})
        return kept, transient

    def _solve_view(self, name: str, B, A, M=None, s=None, gram=None, design=(),
                    rhs=None, weights=None) -> np.ndarray:
        """The solution of solve view ``name`` (``_evaluate``'s call): a new
        :class:`SolveView`, warm-started from the current (or restored) solution."""
        if self._direct:  # the reference of verify()
            return direct_solve(A(), B, name)
        method, tol = self.SOLVES[name]
        old = self._solves.get(name)
        x0 = self._warm.pop(name, None)
        x0 = old.X if x0 is None and old is not None and old.method != "cholesky" else x0
        saved = self._factors.pop(name, None)  # restored: the solver's whole state
        view = SolveView(name, self.method or method, float(self.solve_tolerance or tol),
                         B, A, M=M, s=s, gram=gram, design=design, rhs=rhs, x0=x0,
                         weights=weights, saved=saved)
        self._solves[name] = view
        return view.X

    # -------------------------------------------------------------- updates
    def _change_input(self, name: str, U, V):
        """Phase 2 of a sparse or stochastic input: ``name += U Vᵀ`` in its storage; the
        changed columns of a stochastic input (applied before the trigger: validated
        and atomic), else None."""
        if self._edge_changes is not None:
            changes, self._edge_changes = self._edge_changes, None
            return changes
        x = self._store[name]
        self._store[name] = (x + sps.csr_matrix(U) @ sps.csr_matrix(V).T).tocsr()
        return None

    def _change_solve(self, name: str, dA: list, dB: list, what=None, columns=None) -> None:
        """Phase 2 of solve view ``name``: its solver takes the changes of A and B; where it
        cannot (A changed other than through M), the view is solved again, warm."""
        view = self._solves[name]
        try:
            view.change(dA, dB, what, columns, M=self._plain_m(name))
        except Rebuild:
            self._store.update(self._evaluate_some(self.dims, self._store, {name}))

    def _plain_m(self, name: str):
        """The new value of the plain sparse M of a push view (its links are read again)."""
        m = self.PUSH_INPUT.get(name)
        val = self._store.get(m) if m else None
        return val if sps.issparse(val) else None

    #: {solve view: the input M of its ``I - s·M``} (set by the generated module)
    PUSH_INPUT: Mapping[str, str] = {}
    #: {stochastic input: the solve views its trigger changes, all ``(I - s·M) \\ B`` with
    #: s and B not reading it}: pushed, an edge batch reaches them as changed columns only
    COLUMNS_ONLY: Mapping[str, tuple[str, ...]] = {}

    def _resolve(self, names: set[str]) -> None:
        """Phase 2 of views of the solve side that are re-evaluated (solve views whose A or
        B read other views are solved again, warm-started)."""
        self._store.update(self._evaluate_some(self.dims, self._store, names))

    @numeric.quiet("the update's values")
    def update(self, name: str, U, V) -> None:
        if self.STORAGE.get(name) == "stochastic" and name in self.DYNAMIC:
            U, V = self._validate_update(name, U, V)
            self._edge_changes = self._store[name].apply_lowrank(U, V, what=name)
        try:
            super().update(name, U, V)
        finally:
            self._edge_changes = None

    def _run_trigger(self, name: str, U, V) -> None:
        getattr(self, f"on_update_{name}")(U, V)  # as compiled (no switch to re-evaluation)

    def _adapt_start(self, reeval_s: float | None) -> None:
        """No correction while running: the triggers run as compiled (:meth:`_run_trigger`;
        a solve view's update is its warm-started solver), so nothing is measured against
        a re-evaluation, and a switch to it, never run, is never recorded either."""
        super()._adapt_start(None)

    def _reevaluate_trigger(self, name: str, U, V) -> None:
        if name not in self.STORAGE:
            return super()._reevaluate_trigger(name, U, V)
        self._change_input(name, U, V)
        self._views = self._reevaluate({n: self._views[n] for n in self.INPUTS})

    def edge_weights(self, name: str, records, base: int = 0) -> list[float]:
        """The weight each record of an edge batch (node ids from ``base``) finds on its
        edge, or 1.0 where there is none: what a batch that undoes it must put back."""
        M = self._store.get(name)
        out, seen = [], {}
        for op, a, b, *w in records:
            key = (int(a) - base, int(b) - base)
            got = seen[key] if key in seen else (
                M.edge_weight(*key) if isinstance(M, StochasticMatrix) else None)
            out.append(1.0 if got is None else got)
            seen[key] = (float(w[0]) if w else 1.0) if op == "insert" else None
        return out

    @numeric.quiet("the edges' weights", lambda _self, args, _kwargs: [
        [float(r[3]) for r in args[1] if len(r) > 3]])
    def update_edges(self, name: str, records, base: int = 0,
                     labels: list[str] | None = None) -> None:
        """A micro-batch of edge records ``(op, from, to[, weight])`` on stochastic input
        ``name`` (node ids from ``base``): one residual update per solve view.  Atomic: a
        bad record raises :class:`UpdateError` naming it (by ``labels[i]`` when given)."""
        self._check_fresh()
        if name not in self.DYNAMIC:
            raise UpdateError(f"input {name} is not dynamic" if name in self.INPUTS else
                              f"{self.PROGRAM} has no input {name!r}",
                              hint="mark it with '%#linview dynamic ...'")
        M = self._store[name]
        if not isinstance(M, StochasticMatrix):
            raise UpdateError(f"input {name} is not stochastic; edge records need "
                              f"'%#linview stochastic {name}'")
        t0 = time.perf_counter()
        changes = M.change_edges(records, base=base, what=name, labels=labels)
        pushed = [self._solves[v] for v in self.COLUMNS_ONLY.get(name, ())]
        if changes and pushed and all(isinstance(v.solver, PushSolver) and v.solver.M is M
                                      for v in pushed):
            for view in pushed:  # all the trigger would do: no factors built
                view.solver.change_columns(changes)
        elif changes:
            self._edge_changes = changes
            try:
                self._run_trigger(name, *change_factors(changes, M.n))
            finally:
                self._edge_changes = None
        self.stats["trigger_seconds"] += time.perf_counter() - t0
        self.updates += 1
        self.stats["updates"] += 1

    # -------------------------------------------------------------- reading
    def __getitem__(self, name: str):
        self._check_fresh()
        key = self.OUTPUTS.get(name, name)
        if key not in self._store:
            raise KeyError(f"{name!r} is not an output, view or input of {self.PROGRAM} "
                           f"(outputs: {', '.join(self.OUTPUTS)})")
        return snapshot(self._view(key))

    def error_bound(self, name: str) -> float:
        """The certified (push) or σ-based (krylov) bound on the error of solve view
        ``name``: max over its columns of ‖x - x*‖ (L1 for push, 2-norm for krylov)."""
        key = self.OUTPUTS.get(name, name)
        if key not in self._solves:
            raise KeyError(f"{name!r} is not a solve view (solve views: "
                           f"{', '.join(self._solves) or 'none'})")
        return self._solves[key].error_bound()

    def solver(self, name: str):
        return self._solves[self.OUTPUTS.get(name, name)].solver

    @property
    def solvers(self) -> dict:
        return {k: v.solver for k, v in self._solves.items()}

    def verify(self, detail: bool = False):
        """Max relative error of every view against a re-evaluation by direct solves
        (sparse LU): costs a factorisation."""
        self._direct = True
        try:
            fresh = self._evaluate(self.dims, {n: self._view(n) for n in self.INPUTS})
        finally:
            self._direct = False
        errs = {}
        for name, ref in fresh.items():
            if name in self.TRANSIENT:
                continue
            got = self._view(name)
            diff = got - ref
            scale = max(_max_abs(ref), 1e-300)
            errs[name] = _max_abs(diff) / scale
        self._checked(errs)
        return errs if detail else max(errs.values(), default=0.0)

    def memory_bytes(self) -> int:
        return self.held_bytes(self._store)

    def held_bytes(self, store: dict) -> int:
        """Bytes of the solve views' solvers and of ``store``'s other values (sparse ones
        by their arrays)."""
        total = sum(v.memory_bytes() for v in self._solves.values())
        for name, v in store.items():
            if name in self._solves:
                continue
            total += v.memory_bytes() if isinstance(v, StochasticMatrix) else (
                v.data.nbytes + v.indices.nbytes + v.indptr.nbytes if sps.issparse(v)
                else np.asarray(v).nbytes)
        return int(total)

    # -------------------------------------------------------------- persistence
    def save(self, path, extra: dict | None = None) -> None:
        """The inputs in their storage, the solve views' solutions and the other dense
        views, in the one state format (:mod:`linview.statefile`); :func:`linview.restore`
        takes the dense views as saved and solves the solve views again, warm."""
        solve_state.write(path, self, extra)


def _max_abs(x) -> float:
    if sps.issparse(x):
        return float(abs(x).max()) if x.nnz else 0.0
    x = np.asarray(x)
    return float(np.max(np.abs(x))) if x.size else 0.0


__all__ = ["SolveModule", "stored", "snapshot", "speye", "dense", "emul", "scalar"]
