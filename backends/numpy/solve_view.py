"""Solve views of a generated NumPy module: ``x := A \\ B`` kept with its residual.

The generated ``_evaluate`` builds one :class:`SolveView` per solve view
(``self._solve_view(...)``, :mod:`.solve_module`), and each trigger that changes its A or B
passes it the derived low-rank changes (``ΔA = Σ P Qᵀ``, ``ΔB = Σ P Qᵀ``, rendered from
:func:`linview.compiler.delta.derive`).  The solvers themselves live in
:mod:`linview.solve.solvers`:

``push``      A = I - s·M with M stochastic, or a plain sparse M that is non-negative with
              column sums at most 1, and ``0 ≤ s < 1``: residual push, certified L1 bound;
``krylov``    any nonsingular A (sparse or dense): warm-started GMRES;
``cholesky``  ``(Fᵀ F) \\ (Fᵀ Y)`` of inputs F and Y: QR updates of F.

``auto`` (the default) picks push where its conditions hold at load, else Krylov.
"""

from __future__ import annotations

import numpy as np

from linview.backends.numpy.threads import idle_cores
from linview.compiler.designs import layout_change
from linview.errors import InputError
from linview.solve.krylov import KrylovSolver
from linview.solve.links import SparseLinks, substochastic
from linview.solve.solvers import CholeskySolver, PushSolver
from linview.solve.stochastic import StochasticMatrix

METHODS = (None, "auto", "push", "krylov", "cholesky")


def scalar(x) -> float:
    """A 1x1 value as a float (a scalar input is kept as a 1x1 array)."""
    return float(np.asarray(x, dtype=float).reshape(-1)[0])


class SolveView:
    """One solve view: its solver, the way its A is formed, and how changes reach it.

    ``B`` is the right-hand side's value; ``A`` a function returning A (sparse where A is,
    called only when the solver needs A itself); ``M``/``s`` are given when A is written
    ``I - s·M`` with M a sparse or stochastic input, ``gram`` ``(F, Y)`` (values) when the
    statement is ``(Fᵀ F) \\ (Fᵀ Y)`` of a design F and an input ``rhs`` = Y, ``design``
    F's blocks with their widths (``(1, ('X', 30))`` for ``[ones(m,1) X]``,
    :func:`linview.compiler.designs.layout_change`); ``saved`` the solver state a state
    file kept for the ``cholesky`` method (:func:`.solve_state.factors_of`)."""

    def __init__(self, name: str, method: str, tol: float, B, A, M=None, s=None,
                 gram=None, design=(), rhs=None, x0=None, weights=None, saved=None):
        if method not in METHODS:
            raise InputError(f"unknown solve method {method!r}",
                             hint="methods: auto, push, krylov, cholesky")
        self.name = name
        self.pagerank = M is not None
        s = scalar(s) if s is not None else None
        links = M if isinstance(M, StochasticMatrix) else (
            SparseLinks(M) if M is not None and substochastic(M) else None)
        if method == "auto":
            method = "push" if links is not None and 0 <= s < 1 else "krylov"
        if method == "cholesky":
            if gram is None:
                raise InputError(f"solve view {name}: cholesky mode needs the normal "
                                 "equations (F'*F) \\ (F'*Y) of inputs F and Y",
                                 hint="use '%#linview solve krylov' for other systems")
            self.design, self.rhs = design, rhs
            self.weights = weights[0] if weights is not None else None
            self.solver = CholeskySolver(*gram, tol, threads=idle_cores,
                                         weights=None if weights is None else weights[1],
                                         saved=saved)  # a saved state: continued as it was
        elif method == "push":
            if links is None:
                raise InputError(f"solve view {name}: push needs A = I - s*M with M "
                                 "declared '%#linview stochastic', or sparse, non-negative "
                                 "with column sums at most 1",
                                 hint="use '%#linview solve krylov' (or auto)")
            self.solver = PushSolver(links, s, B, tol, x0, threads=idle_cores)
        else:
            self.solver = KrylovSolver(A(), B, tol, x0)

    @property
    def X(self) -> np.ndarray:  # noqa: N802 - the solution, updated in place
        return self.solver.X

    @property
    def method(self) -> str:
        return self.solver.method

    def change(self, dA: list, dB: list, what: tuple | None = None, columns=None,
               M=None) -> None:
        """Bring the solution up to date after ``A += Σ P Qᵀ`` (``dA``) and ``B += Σ P Qᵀ``
        (``dB``), both computed from the old values.  ``what`` is ``(input, U, V)`` of the
        update (the QR updates of cholesky take it as it is); ``columns`` the changed
        columns of a stochastic M (push takes them as they are); ``M`` the new value of a
        plain sparse M (push reads its links again)."""
        solver = self.solver
        if isinstance(solver, CholeskySolver):
            name, U, V = what
            if any(not isinstance(b, int) and b[0] == name for b in self.design):
                solver.change_matrix(U, layout_change(self.design, name, V))  # F += U Wᵀ
            elif name == self.rhs:
                solver.change_rhs(U, V)
            if name == self.weights:  # w += U Vᵀ: the rows whose weight changed
                solver.change_weights(np.asarray(U, dtype=float) @ np.asarray(V).T)
            return
        if dA is None:  # compiled for the Cholesky method, loaded with another
            raise Rebuild(self.name)
        if isinstance(solver, PushSolver) and dA:
            if columns is not None:
                solver.change_columns(columns)
            elif M is not None and substochastic(M):
                links = SparseLinks(M)
                for P, Q in dA:
                    solver.change_matrix(P, Q, links)
            else:
                raise Rebuild(self.name)  # A changed other than through M: solve again
        elif dA:
            for P, Q in dA:
                solver.change_matrix(P, Q)
        for P, Q in dB:
            solver.change_rhs(P, Q)

    design: tuple = ()
    rhs: str | None = None
    weights: str | None = None

    def error_bound(self) -> float:
        return self.solver.error_bound()

    def refresh(self) -> None:
        self.solver.refresh()

    def memory_bytes(self) -> int:
        return self.solver.memory_bytes()


class Rebuild(Exception):  # noqa: N818 - a signal, not an error
    """A change a solve view's solver cannot take as a change: the module solves again,
    warm-started from the current solution (:mod:`.solve_module`)."""


__all__ = ["SolveView", "Rebuild", "scalar"]
