"""The base class of Spark modules with solve views or sparse inputs.

:class:`SparkSolveModule` is the NumPy backend's :class:`~..numpy.solve_module.SolveModule`
over the Spark module (:class:`~.runtime.SparkTriggerModule`): the views off the solve side
are placed in blocks and updated by Spark jobs as in any Spark module, and the solve side
lives on the driver:

* sparse and stochastic inputs stay in their storage (CSR, links) on the driver;
* each solve view keeps its solver (the same classes as on NumPy, :mod:`linview.solve`)
  and its operands on the driver: B, the dense A of a Krylov solve, the design F and Y of
  the normal equations are collected there, and refused beyond ``driver_max_elements``
  with the place of the ``\\`` in the ``.m`` file (:class:`~.octave.DriverLimit`), before
  anything is collected;
* the solution X (n×k) is a driver array that other views read as usual (products of a
  distributed view with it run in Spark);
* views of the solve side that a trigger re-evaluates are placed in blocks when large.

Push and Krylov are sequential sparse kernels (a frontier of residuals, one GMRES
iteration after the other): there is nothing for a cluster to do in them but wait.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sps

from linview.backends.numpy.solve_module import (  # noqa: F401 - sv.* of generated code
    SolveModule,
    dense,
    emul,
    scalar,
    speye,
    stored,
)
from linview.backends.spark.blocks import DistMatrix, Transposed
from linview.backends.spark.context import Transaction
from linview.backends.spark.octave import DriverLimit, view_shapes
from linview.backends.spark.runtime import SparkTriggerModule
from linview.solve.stochastic import StochasticMatrix

_DIST = (DistMatrix, Transposed)


def _shape(x) -> tuple[int, ...]:
    """A value's shape, never collecting a distributed one (``np.shape`` would)."""
    if isinstance(x, StochasticMatrix):
        return (x.n, x.n)
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def _entries(x) -> int:
    """The entries a value holds on the driver: stored non-zeros of a sparse one (the
    links of a stochastic one: its memory in 8-byte words)."""
    if sps.issparse(x):
        return int(x.nnz)
    if isinstance(x, StochasticMatrix):
        return int(x.memory_bytes() // 8)
    return int(np.prod(_shape(x)))


class SparkSolveModule(SolveModule, SparkTriggerModule):
    """A Spark module with solve views (see the module docstring).  Generated subclasses
    also define ``SOLVE_AT`` ({solve view: (line, column) of its ``\\``})."""

    SOLVE_AT: dict = {}
    OPTIONS = {**SparkTriggerModule.OPTIONS, "tolerance": None, "method": None}

    # -------------------------------------------------------------- inputs and placement
    def _validate_inputs(self, inputs, keep=()):
        if set(inputs) != set(self.INPUTS):
            return SolveModule._validate_inputs(self, inputs)  # the missing/unexpected error
        arrays = {n: stored(x, self.STORAGE[n], n) if n in self.STORAGE
                  else self._load_input(n, x) for n, x in inputs.items()}
        self.dims = self._bind_dims(arrays)
        dense_shapes = [a.shape for n, a in arrays.items()
                        if n not in self.STORAGE and np.ndim(a) == 2]
        if not any(isinstance(a, DistMatrix) for a in arrays.values()):
            self._ctx.size_for(dense_shapes + view_shapes(self.VIEWS, self.dims))
        return arrays

    def _place(self, name: str, val, input: bool = False):
        """Sparse values, links and solve views stay on the driver as they are (a solver
        updates its solution in place); every other value as in any Spark module."""
        if sps.issparse(val) or isinstance(val, StochasticMatrix) or name in self.SOLVES:
            return val
        return SparkTriggerModule._place(self, name, val, input=input)

    def _reevaluate(self, arrays):
        if self._restored:  # a state file: its dense inputs placed in blocks first
            arrays = {n: self._place(n, a, input=True) for n, a in arrays.items()}
        return SolveModule._reevaluate(self, arrays)

    # -------------------------------------------------------------- solve views
    def _on_driver(self, name: str, what: str, x):
        """Operand ``what`` of solve view ``name`` on the driver: refused (with the place
        of its ``\\``) above ``driver_max_elements`` before a distributed one is collected."""
        limit = self._ctx.driver_max_elements
        if _entries(x) > limit:
            rows, cols = (*_shape(x), 1)[:2]
            held = "non-zeros" if sps.issparse(x) or isinstance(x, StochasticMatrix) \
                else "entries"
            raise DriverLimit(
                f"the solve '\\' in {name} runs on the Spark driver: its {what} "
                f"({rows}×{cols}, {_entries(x):,} {held}) is above the driver limit "
                f"driver_max_elements = {limit:,}", at=self.SOLVE_AT.get(name),
                hint="solve views and their solvers run on the driver; raise the limit "
                     "with load(..., driver_max_elements=N) if the driver has the memory")
        if isinstance(x, _DIST):
            return x.to_numpy()
        return x

    def _solve_view(self, name: str, B, A, M=None, s=None, gram=None, design=(),
                    rhs=None, weights=None) -> np.ndarray:
        B = self._on_driver(name, "right-hand side B", B)  # the solution X is B's size
        if M is not None:
            self._on_driver(name, "matrix M", M)
        if gram is not None:
            gram = tuple(self._on_driver(name, what, g)
                         for what, g in zip(("design F", "right-hand side Y"), gram,
                                            strict=True))
        if weights is not None:
            weights = (weights[0], self._on_driver(name, "weights", weights[1]))

        def matrix():
            return self._on_driver(name, "matrix A", A())

        return SolveModule._solve_view(self, name, B, matrix, M=M, s=s, gram=gram,
                                       design=design, rhs=rhs, weights=weights)

    def _resolve(self, names: set[str]) -> None:
        """Views of the solve side re-evaluated, placed in blocks when large."""
        self._touched = True
        kept, _ = self._kept_values(self._evaluate_some(self.dims, self._store, names))
        self._store.update(kept)

    # -------------------------------------------------------------- updates
    #: whether the running update has changed the solve side (its solvers and sparse
    #: inputs live on the driver, outside the Spark transaction that rolls back the rest)
    _touched = False

    @property
    def _edge_changes(self):
        return self.__dict__.get("_edges_applied")

    @_edge_changes.setter
    def _edge_changes(self, changes) -> None:
        """Set by the NumPy module once a stochastic input's links have changed (before
        its trigger runs): the solve side has changed."""
        if changes is not None:
            self._touched = True
        self.__dict__["_edges_applied"] = changes

    def _change_input(self, name: str, U, V):
        self._touched = True
        return SolveModule._change_input(self, name, U, V)

    def _change_solve(self, name: str, dA: list, dB: list, what=None, columns=None) -> None:
        self._touched = True
        SolveModule._change_solve(self, name, dA, dB, what, columns)

    def _cut_short(self, name: str, apply) -> None:
        """Run ``apply()`` (an update of ``name``); if it fails after the solve side
        changed, the distributed views were rolled back but not the solvers: the views
        are refused until ``refresh()`` (a retry would apply the update twice there)."""
        self._touched = False
        try:
            apply()
        except BaseException:
            if self._touched:
                self._stale = (f"{self.PROGRAM}: the update of {name} failed after its solve "
                               "views changed")
            raise
        finally:
            self._touched = False

    def update(self, name: str, U, V) -> None:
        """``name += U Vᵀ`` (:meth:`.runtime.SparkTriggerModule.update`, the solve side
        as on NumPy)."""
        self._cut_short(name, lambda: SolveModule.update(self, name, U, V))

    def update_edges(self, name: str, records, base: int = 0,
                     labels: list[str] | None = None) -> None:
        """A micro-batch of edge records on a stochastic input (as on NumPy)."""
        self._cut_short(name, lambda: SolveModule.update_edges(self, name, records, base,
                                                               labels))

    def _run_trigger(self, name: str, U, V) -> None:
        """An edge batch's trigger: one transaction, as :meth:`update`'s."""
        txn = Transaction()
        with self._errors(f"update of {name}"), txn:
            try:
                getattr(self, f"on_update_{name}")(U, V)
            except BaseException:
                txn.rollback()
                raise
            txn.commit()
        self._sweep()

    # -------------------------------------------------------------- reading
    def __getitem__(self, name: str):
        if isinstance(self._store.get(self.OUTPUTS.get(name, name)), _DIST):
            return SparkTriggerModule.__getitem__(self, name)
        return SolveModule.__getitem__(self, name)

    def verify(self, detail: bool = False):
        """Max relative error of every view against a re-evaluation by direct solves on
        the driver (sparse LU); distributed views are compared block by block."""
        self._direct = True
        try:
            return SparkTriggerModule.verify(self, detail)
        finally:
            self._direct = False

    def memory_bytes(self) -> int:
        """Bytes held on the driver: the solve views' solvers, sparse and driver values
        (distributed views are in the executors)."""
        return self.held_bytes({n: v for n, v in self._store.items()
                                if not isinstance(v, _DIST)})

    def save(self, path, extra: dict | None = None) -> None:
        """The NumPy backend's state file of a module with solve views, distributed views
        collected first (restore with ``linview.restore(path, program=prog, spark=...)``)."""
        self._alive("save")
        store = self._store
        with self._errors("save"):
            self._store = {k: v.to_numpy() if isinstance(v, _DIST) else v
                           for k, v in store.items()}
        try:
            SolveModule.save(self, path, extra=extra)
        finally:
            self._store = store


__all__ = ["SparkSolveModule", "speye", "dense", "emul", "scalar"]
