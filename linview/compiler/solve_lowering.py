"""Lowering of solve views, mixed into the lowerer (:mod:`linview.compiler.lower`).

``A \\ B`` (and ``B / A``) becomes ``x := solve(A, B)``, a view of its own, when the program
has a ``%#linview solve`` or ``tolerance`` pragma or when A reads an input declared
``sparse`` or ``stochastic``; A stays an expression so that its structure (``I - s·M``)
reaches the generated module (``backends/numpy/solve_codegen.py``).  The pragmas' values are read by
:mod:`linview.frontend.pragmas`.
"""

from __future__ import annotations

from linview.compiler import ir
from linview.compiler.ir import Node, Op


class SolveLowering:
    """Methods of the lowerer for solve views; it provides ``solve``, ``storage``,
    ``unify``, ``build`` and ``materialize``."""

    solve: tuple[str, float] | None
    storage: dict[str, str]
    statements: list[ir.Statement]

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
        return self.reads_sparse(a)

    def reads_sparse(self, a: Node) -> bool:
        """Whether ``a`` reads a sparse or stochastic input, directly or through views
        (``D = eye(n) - d*M; D \\ b``)."""
        exprs = {st.name: st.expr for st in self.statements}
        todo, seen = [a], set()
        while todo:
            for leaf in ir.leaves(todo.pop(), Op.INPUT, Op.VIEW):
                if leaf.op is Op.INPUT and leaf.attr in self.storage:
                    return True
                if leaf.op is Op.VIEW and leaf.attr not in seen and leaf.attr in exprs:
                    seen.add(leaf.attr)
                    todo.append(exprs[leaf.attr])
        return False

    def solve_statement(self, a: Node, b: Node, e, hint: str) -> Node:
        """``x := solve(A, B)`` as a view of its own; A stays an expression so that its
        structure (``I - s·M``) reaches the runtime."""
        self.unify(a.rows, a.cols, e.pos, "only square systems can be solved", a.shape)
        if a.is_scalar:
            return self.build(Op.EDIV, b, a, pos=e.pos)
        method, tol = self.solve or ("auto", 1e-8)
        node_ = self.build(Op.SOLVE, a, b, pos=e.pos, attr=(method, tol))
        return self.materialize(node_, hint)
