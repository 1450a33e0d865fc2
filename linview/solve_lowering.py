"""Lowering of solve views, mixed into the lowerer (:mod:`linview.compiler.lower`).

``A \\ B`` (and ``B / A``) becomes ``x := solve(A, B)``, a view of its own, when the program
has a ``%#linview solve`` or ``tolerance`` pragma or when A reads an input declared
``sparse`` or ``stochastic``; A stays an expression so that its structure (``I - s·M``)
reaches the runtime (:mod:`linview.solve_program`).
"""

from __future__ import annotations

from linview.compiler import ir
from linview.compiler.ir import Node, Op

#: maintenance methods of solve views (``%#linview solve METHOD``)
SOLVE_METHODS = ("auto", "push", "krylov", "cholesky")


class PragmaProblem(Exception):
    """A bad value pragma; ``index`` is the offending item (0: the first after the kind)."""

    def __init__(self, message: str, index: int, hint: str | None = None):
        super().__init__(message)
        self.message, self.index, self.hint = message, index, hint


def pragma_value(kind: str, items: list[tuple[str, str]]) -> str:
    """The one value of ``%#linview solve METHOD`` or ``%#linview tolerance 1e-10``;
    ``items`` are the (token kind, text) pairs after the pragma's kind."""
    want = "a method (" + ", ".join(SOLVE_METHODS) + ")" if kind == "solve" else \
        "a positive number"
    if len(items) != 1:
        raise PragmaProblem(f"'%#linview {kind}' takes exactly one value, {want}",
                            1 if items else 0)
    group, word = items[0]
    if kind == "solve" and (group != "name" or word not in SOLVE_METHODS):
        raise PragmaProblem(f"unknown solve method '{word}'", 0,
                            "valid methods: " + ", ".join(SOLVE_METHODS))
    if kind == "tolerance":
        try:
            ok = float(word) > 0
        except ValueError:
            ok = False
        if not ok:
            raise PragmaProblem(f"'%#linview tolerance' needs {want}, found '{word}'", 0,
                                "write e.g. '%#linview tolerance 1e-10'")
    return word


class SolveLowering:
    """Methods of the lowerer for solve views; it provides ``solve``, ``storage``,
    ``unify``, ``build`` and ``materialize``."""

    solve: tuple[str, float] | None
    storage: dict[str, str]

    def solve_options(self, pragmas) -> None:
        """``%#linview solve``, ``tolerance``, ``sparse`` and ``stochastic`` pragmas."""
        method = [p for p in pragmas if p.kind == "solve"]
        tol = [p for p in pragmas if p.kind == "tolerance"]
        for kind in ("sparse", "stochastic"):
            for p in pragmas:
                if p.kind == kind:
                    self.storage.update({n: kind for n in p.names})
        if method or tol:
            self.solve = (method[-1].names[0] if method else "auto",
                          float(tol[-1].names[0]) if tol else 1e-8)

    def solve_view(self, a: Node) -> bool:
        """Is ``a \\ ...`` a solve view?  When the program asks for them, or when A reads a
        sparse or stochastic input (an inverse would be dense)."""
        if self.solve is not None:
            return True
        return any(leaf.attr in self.storage for leaf in ir.leaves(a, Op.INPUT))

    def solve_statement(self, a: Node, b: Node, e, hint: str) -> Node:
        """``x := solve(A, B)`` as a view of its own; A stays an expression so that its
        structure (``I - s·M``) reaches the runtime."""
        self.unify(a.rows, a.cols, e.pos, "only square systems can be solved", a.shape)
        if a.is_scalar:
            return self.build(Op.EDIV, b, a, pos=e.pos)
        method, tol = self.solve or ("auto", 1e-8)
        node_ = self.build(Op.SOLVE, a, b, pos=e.pos, attr=(method, tol))
        return self.materialize(node_, hint)
