"""Programs with solve views on the NumPy backend.

A program whose lowering produced ``x := solve(A, B)`` statements (``A \\ B`` with a
``%#linview solve``/``tolerance`` pragma, or with A reading a ``sparse`` or ``stochastic``
input) loads as :class:`SolveViews` (through ``linview.api.SolveProgram``) instead of a
generated dense module:

* inputs keep their storage: ``stochastic`` inputs become a
  :class:`~linview.solve.stochastic.StochasticMatrix` (links, dangling columns as a rank-1 term),
  ``sparse`` inputs a scipy CSR matrix, the others dense arrays;
* each solve view is a solver of :mod:`linview.solve` (``push`` for ``A = I - s·M`` with
  M stochastic and ``0 ≤ s < 1``, ``krylov`` otherwise; ``auto`` picks at load), kept with
  its residual and an error bound below the tolerance;
* an update ``ΔX = U Vᵀ`` (dense or scipy.sparse factors) reaches a solve view as the
  derived low-rank changes of its A and B (:func:`linview.compiler.delta.derive`); for a
  stochastic input it is the list of changed columns, which push turns into a local
  residual change;
* other statements are re-evaluated when something they read changed.
"""

from __future__ import annotations

import copy
import time

import numpy as np
import scipy.sparse as sps

from linview.backends.numpy import numeric
from linview.compiler import ir
from linview.compiler.delta import Strategy, ViewDelta, derive
from linview.compiler.designs import design_change, design_value, gram_design, inputs_of
from linview.compiler.interp import eval_node
from linview.compiler.ir import Op
from linview.compiler.shapes import RANK
from linview.errors import InputError, UpdateError
from linview.solve.evaluate import (
    change_factors,
    check_factor,
    evaluate_factor,
    pagerank_form,
    read_inputs,
    scalar_value,
    sparse_eval,
)
from linview.solve.links import SparseLinks, substochastic
from linview.solve.seminormal import add_low_rank
from linview.solve.solvers import CholeskySolver, KrylovSolver, PushSolver, direct_solve
from linview.solve.state import save_state
from linview.solve.stochastic import ColumnChange, StochasticMatrix


def has_solve(program: ir.Program) -> bool:
    """Whether ``program`` loads as :class:`SolveViews`: it has solve views or sparse
    (or stochastic) inputs."""
    return any(st.expr.op is Op.SOLVE for st in program.statements) or any(
        d.storage != "dense" for d in program.inputs)


def snapshot(val):
    """A copy of a value that later updates never change (solvers update their solution in
    place, a stochastic input changes its links in place): arrays read-only, sparse
    matrices and stochastic inputs copied."""
    if isinstance(val, np.ndarray):
        out = val.copy(order="K")
        out.flags.writeable = False
        return out
    if sps.issparse(val):
        return val.copy()
    if isinstance(val, StochasticMatrix):
        return copy.deepcopy(val)
    return val


class SolveViews:
    """The live views of a program with solve views (same API as a trigger module, plus
    :meth:`error_bound`, :meth:`update_edges` and :meth:`residual`)."""

    OPTIONS = ("tolerance", "method")

    @numeric.quiet("the inputs' values", lambda _self, args, kwargs: [
        v for k, v in kwargs.items() if k in {d.name for d in args[0].inputs}])
    def __init__(self, program: ir.Program, dims: dict, /, _warm=None, **kwargs):
        self.program = program
        opts = {k: kwargs.pop(k) for k in self.OPTIONS
                if k in kwargs and k not in {d.name for d in program.inputs}}
        self.tolerance = opts.get("tolerance")
        self.method = opts.get("method")
        if self.method not in (None, "auto", "push", "krylov"):
            raise InputError(f"unknown solve method {self.method!r}",
                             hint="methods: auto, push, krylov")
        if self.tolerance is not None and not float(self.tolerance) > 0:
            raise InputError("tolerance must be a positive number")
        self.stats = {"updates": 0, "fallbacks": 0, "trigger_seconds": 0.0}
        self.updates = 0
        self.env, self.bindings = read_inputs(self.program, kwargs, dims)
        self.solvers: dict[str, PushSolver | KrylovSolver] = {}
        self._evaluate(_warm)
        self.saved_meta: dict = {}
        self.owned: set[str] = set()  # dense inputs changed in place (_cholesky_only)

    # -------------------------------------------------------------- evaluation
    def _evaluate(self, warm: dict | None = None) -> None:
        for st in self.program.statements:
            if st.expr.op is Op.SOLVE:
                self.solvers[st.name] = self._make_solver(st, (warm or {}).get(st.name))
                self.env[st.name] = self.solvers[st.name].X
            else:
                self.env[st.name] = self._value(st)

    def _value(self, st: ir.Statement):
        """A statement's value: sparse (CSR) where :mod:`linview.solve.sparsity` keeps it
        sparse, else a dense 2-D array."""
        try:
            val = sparse_eval(st.expr, self.env, self.bindings)
        except (TypeError, AttributeError) as e:
            raise InputError(f"statement {st.name} uses a sparse or stochastic input in a way "
                             f"linview evaluates only densely: {e}",
                             hint="keep sparse inputs in solve views and products") from None
        if sps.issparse(val):
            return sps.csr_matrix(val)
        val = np.asarray(val, dtype=float)
        return val.reshape(-1, 1) if val.ndim < 2 else val

    def _make_solver(self, st: ir.Statement, x0=None):
        a, b = st.expr.children
        method, tol = st.expr.attr
        method = self.method or method
        tol = float(self.tolerance or tol)
        B = sparse_eval(b, self.env, self.bindings)
        form = pagerank_form(a, self.program, ("stochastic", "sparse"))
        s = scalar_value(eval_node(form[1], self.env, self.bindings)) if form else None
        M = self.env[form[0]] if form else None
        if form and not isinstance(M, StochasticMatrix):  # a plain sparse M (links.py)
            form = form if substochastic(M) else None
            M = SparseLinks(M) if form else None
        if method == "auto":
            method = "push" if form and 0 <= s < 1 else "krylov"
        if method == "cholesky":
            gram = gram_design(a, b)  # F: an input or [ones(m,1) X] (compiler/designs.py)
            if gram is None:
                raise InputError(f"solve view {st.name}: cholesky mode needs the normal "
                                 "equations (F'*F) \\ (F'*Y) of inputs F and Y",
                                 hint="use '%#linview solve krylov' for other systems")
            return CholeskySolver(design_value(gram[0], self.env), self.env[gram[1]], tol)
        if method == "push":
            if not form:
                raise InputError(f"solve view {st.name}: push needs A = I - s*M with M "
                                 "declared '%#linview stochastic', or sparse, non-negative "
                                 "with column sums at most 1",
                                 hint="use '%#linview solve krylov' (or auto)")
            return PushSolver(M, s, B, tol, x0)
        return KrylovSolver(sparse_eval(a, self.env, self.bindings), B, tol, x0)

    # -------------------------------------------------------------- reading
    @property
    def INPUTS(self) -> dict:  # noqa: N802 - the name trigger modules use
        return {d.name: self.env[d.name].shape for d in self.program.inputs}

    @property
    def DYNAMIC(self) -> tuple[str, ...]:  # noqa: N802 - the name trigger modules use
        return tuple(d.name for d in self.program.inputs if d.dynamic and not d.scalar)

    @property
    def _views(self) -> dict:  # what linview run reads input shapes from
        return self.env

    def __getitem__(self, name: str):
        key = dict(self.program.outputs).get(name)
        key = key.attr if key is not None and key.op in (Op.VIEW, Op.INPUT) else name
        if key not in self.env:
            raise KeyError(f"{name!r} is not an output, view or input of {self.program.name}")
        return snapshot(self.env[key])

    @property
    def outputs(self) -> dict:
        return {name: self[name] for name, _ in self.program.outputs}

    def error_bound(self, name: str) -> float:
        """The certified (push) or σ-based (krylov) bound on the error of solve view
        ``name``: max over its columns of ‖x - x*‖ (L1 for push, 2-norm for krylov)."""
        key = dict(self.program.outputs).get(name)
        key = key.attr if key is not None and key.op is Op.VIEW else name
        if key not in self.solvers:
            raise KeyError(f"{name!r} is not a solve view (solve views: "
                           f"{', '.join(self.solvers) or 'none'})")
        return self.solvers[key].error_bound()

    def solver(self, name: str):
        return self.solvers[name]

    # -------------------------------------------------------------- updating
    def _check_dynamic(self, name: str):
        decl = next((d for d in self.program.inputs if d.name == name), None)
        if decl is None:
            raise UpdateError(f"{self.program.name} has no input {name!r}")
        if not decl.dynamic:
            raise UpdateError(f"input {name} is not dynamic",
                              hint="mark it with '%#linview dynamic ...'")
        return decl

    @numeric.quiet("the update's values")
    def update(self, name: str, U, V) -> None:
        """``name += U Vᵀ`` (dense or scipy.sparse factors); every view brought up to date."""
        self._check_dynamic(name)
        rows, cols = self.env[name].shape
        U, V = (check_factor(x, n, w, name) for x, n, w in ((U, rows, "U"), (V, cols, "V")))
        if U.shape[1] != V.shape[1]:
            raise UpdateError(f"update of {name}: U has {U.shape[1]} columns but V has "
                              f"{V.shape[1]}; both must have rank k")
        t0 = time.perf_counter()
        x = self.env[name]
        if isinstance(x, StochasticMatrix):
            changes = x.apply_lowrank(U, V, what=name)  # validated, atomic
            self._propagate(name, (U, V), changes)
        else:
            self._propagate(name, (U, V), None)
        self._done(t0)

    def edge_weights(self, name: str, records, base: int = 0) -> list[float]:
        """The weight each record of an edge batch (node ids from ``base``) finds on its
        edge, or 1.0 where there is none: what a batch that undoes it must put back."""
        M = self.env.get(name)
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
        ``name`` (op ``insert``/``delete``, node ids from ``base``): one residual update per
        solve view.  Atomic: a bad record raises :class:`UpdateError` naming it (by
        ``labels[i]`` when given)."""
        self._check_dynamic(name)
        M = self.env[name]
        if not isinstance(M, StochasticMatrix):
            raise UpdateError(f"input {name} is not stochastic; edge records need "
                              f"'%#linview stochastic {name}'")
        t0 = time.perf_counter()
        changes = M.change_edges(records, base=base, what=name, labels=labels)
        if changes:
            self._propagate(name, None, changes)
        self._done(t0)

    def _terms(self, st: ir.Statement, decl) -> tuple:
        """The derived changes of a solve view's A and B for an update ``U Vᵀ`` of input
        ``decl`` (symbolic in U and V, so derived once per statement and input)."""
        key = (st.name, decl.name)
        cache = self.__dict__.setdefault("_derived", {})
        if key not in cache:
            first = ViewDelta(decl.name, decl.ref, Strategy.INCR, (),
                              ir.factor("U", (decl.shape[0], RANK)),
                              ir.factor("V", (decl.shape[1], RANK)))
            a, b = st.expr.children
            cache[key] = (derive(a, {decl.name: first}), derive(b, {decl.name: first}))
        return cache[key]

    def _done(self, t0: float) -> None:
        self.stats["trigger_seconds"] += time.perf_counter() - t0
        self.updates += 1
        self.stats["updates"] += 1

    def _propagate(self, name: str, factors, changes: list[ColumnChange] | None) -> None:
        decl = self.program.input(name)
        lazy: dict = {}

        def scope_of():  # U, V of the change (for a stochastic input: built only if read)
            if not lazy:
                U, V = factors if factors is not None else \
                    change_factors(changes, self.env[name].n)
                lazy.update(scope={**self.env, "U": U, "V": V},
                            bindings={**self.bindings, "k": U.shape[1]})
            return lazy["scope"], lazy["bindings"]

        def evaluate(terms):
            sc, bd = scope_of() if terms else (None, None)
            return [(evaluate_factor(t.P, sc, bd), evaluate_factor(t.Q, sc, bd))
                    for t in terms]

        # phase 1: every solve view's changes of A and B, from the old values
        pending = {}
        for st in self.program.statements:
            if st.expr.op is not Op.SOLVE:
                continue
            deps = {leaf.attr for leaf in ir.leaves(st.expr, Op.INPUT, Op.VIEW)}
            if not deps & {name}:
                continue
            if deps - {d.name for d in self.program.inputs}:
                pending[st.name] = "rebuild"  # reads other views: re-solved below
                continue
            if isinstance(self.solvers.get(st.name), CholeskySolver):
                pending[st.name] = ((), [], [])  # its QR update takes U and V as they are
                continue
            ta, tb = self._terms(st, decl)
            push = isinstance(self.solvers.get(st.name), PushSolver) and changes is not None
            pending[st.name] = (ta, [] if push else evaluate(ta), evaluate(tb))
        if factors is None and not isinstance(self.env[name], StochasticMatrix):
            factors = scope_of()[0]["U"], scope_of()[0]["V"]
        U, V = factors if factors is not None else (None, None)
        # phase 2: the input, then every statement in order
        x = self.env[name]
        if sps.issparse(x):  # the product of the factors' non-zeros only, never n×n dense
            self.env[name] = (x + sps.csr_matrix(U) @ sps.csr_matrix(V).T).tocsr()
        elif not isinstance(x, StochasticMatrix) and self._cholesky_only(name):
            if name not in self.owned:  # copied once (it may be the caller's array) ...
                self.env[name] = np.array(x, dtype=float, order="F")
                self.owned.add(name)
            self.env[name] = add_low_rank(self.env[name], U, V)  # ... then in place
        elif not isinstance(x, StochasticMatrix):
            D = U @ V.T
            self.env[name] = x + (D.toarray() if sps.issparse(D) else D)
        touched = {name}
        for st in self.program.statements:
            deps = {leaf.attr for leaf in ir.leaves(st.expr, Op.INPUT, Op.VIEW)}
            if not deps & touched:
                continue
            touched.add(st.name)
            if st.expr.op is not Op.SOLVE:
                self.env[st.name] = self._value(st)
                continue
            job = pending.get(st.name, "rebuild")
            solver = self.solvers[st.name]
            if job == "rebuild":
                solver = self.solvers[st.name] = self._make_solver(st)
                self.env[st.name] = solver.X
                continue
            ta, ev, eb = job
            if isinstance(solver, CholeskySolver):  # F or Y changed by U Vᵀ
                gram = gram_design(*st.expr.children)
                if name in inputs_of(gram[0]):  # F += U Wᵀ, W: V padded (designs.py)
                    widths = {n: self.env[n].shape[1] for n in inputs_of(gram[0])}
                    solver.change_matrix(U, design_change(gram[0], name, V, widths))
                if name == gram[1]:
                    solver.change_rhs(U, V)
                continue
            if isinstance(solver, PushSolver):
                form = pagerank_form(st.expr.children[0], self.program, ("sparse",))
                new = self.env[form[0]] if ta and form and changes is None else None
                if ta and new is not None and substochastic(new):  # a plain sparse M
                    links = SparseLinks(new)
                    for P, Q in ev:
                        solver.change_matrix(P, Q, links)
                elif ta and changes is None:  # A changed other than through M's columns
                    solver = self.solvers[st.name] = self._make_solver(st)
                    self.env[st.name] = solver.X
                    continue
                elif ta:
                    solver.change_columns(changes)
            else:
                for P, Q in ev:
                    solver.change_matrix(P, Q)
            for P, Q in eb:
                solver.change_rhs(P, Q)

    def _cholesky_only(self, name: str) -> bool:
        """Whether only Cholesky solvers (which keep copies of F and Y) read input
        ``name`` among the solve views, so that it may change in place."""
        readers = [self.solvers.get(st.name) for st in self.program.statements
                   if st.expr.op is Op.SOLVE and name in {
                       leaf.attr for leaf in ir.leaves(st.expr, Op.INPUT, Op.VIEW)}]
        return bool(readers) and all(isinstance(s, CholeskySolver) for s in readers) \
            and not sps.issparse(self.env[name])

    # -------------------------------------------------------------- checking
    def reference(self) -> dict[str, np.ndarray]:
        """Every view re-evaluated from the inputs by direct solves (sparse LU)."""
        env = dict((d.name, self.env[d.name]) for d in self.program.inputs)
        for st in self.program.statements:
            if st.expr.op is Op.SOLVE:
                a, b = st.expr.children
                A = sparse_eval(a, env, self.bindings)
                B = sparse_eval(b, env, self.bindings)
                env[st.name] = direct_solve(A, B, st.name)
            else:
                val = sparse_eval(st.expr, env, self.bindings)
                env[st.name] = val if sps.issparse(val) else np.asarray(val)
        return {st.name: env[st.name] for st in self.program.statements}

    def verify(self, detail: bool = False):
        """Max relative error of every view against direct solves (costs a sparse LU)."""
        errs = {}
        for k, ref in self.reference().items():
            scale = max(_max_abs(ref), 1e-300)
            got = self.env[k]
            diff = got - ref if sps.issparse(got) or sps.issparse(ref) else \
                np.asarray(got) - ref
            errs[k] = _max_abs(diff) / scale
        return errs if detail else max(errs.values(), default=0.0)

    def refresh(self) -> None:
        """Exact residuals again (rounding drift), driven below the tolerance."""
        for st in self.program.statements:
            if st.expr.op is Op.SOLVE:
                self.solvers[st.name].refresh()
            else:
                self.env[st.name] = self._value(st)

    def memory_bytes(self) -> int:
        total = sum(s.memory_bytes() for s in self.solvers.values())
        names = [d.name for d in self.program.inputs] + [
            st.name for st in self.program.statements if st.expr.op is not Op.SOLVE]
        for name in names:
            v = self.env[name]
            total += v.memory_bytes() if isinstance(v, StochasticMatrix) else (
                v.data.nbytes + v.indices.nbytes + v.indptr.nbytes if sps.issparse(v)
                else np.asarray(v).nbytes)
        return int(total)

    def save(self, path, extra: dict | None = None) -> None:
        """Inputs (stochastic ones as edge lists), solutions and the program text to an
        ``.npz``, atomically; :func:`linview.restore` warm-starts from it (residuals are
        recomputed exactly, so a restored view is certified again)."""
        save_state(self, path, extra)


def _max_abs(x) -> float:
    if sps.issparse(x):
        return float(abs(x).max()) if x.nnz else 0.0
    x = np.asarray(x)
    return float(np.max(np.abs(x))) if x.size else 0.0


__all__ = ["SolveViews", "has_solve", "sparse_eval"]
