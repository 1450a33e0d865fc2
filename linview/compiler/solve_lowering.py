"""Lowering of solve views, mixed into the lowerer (:mod:`linview.compiler.lower`).

``A \\ B`` (and ``B / A``) becomes ``x := solve(A, B)``, a view of its own, when the program
has a ``%#linview solve`` or ``tolerance`` pragma or when A reads an input declared
``sparse`` or ``stochastic``; A stays an expression so that its structure (``I - s·M``)
reaches the generated module (``backends/numpy/solve_codegen.py``).  The pragmas' values are read by
:mod:`linview.frontend.pragmas`.
"""

from __future__ import annotations

from linview.compiler import ir, solve_choice
from linview.compiler.ir import Node, Op


class SolveLowering:
    """Methods of the lowerer for solve views; it provides ``solve``, ``storage``,
    ``unify``, ``build`` and ``materialize``."""

    solve: tuple[str, float] | None
    storage: dict[str, str]
    statements: list[ir.Statement]
    notes: list[str]

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

    def solve_view(self, a: Node, b: Node, pos=(0, 0)) -> bool:
        """Is ``a \\ b`` a solve view?  When the program asks for them; when A reads a
        sparse or stochastic input, as the cost model chooses between a solve view and a
        Woodbury inverse (:mod:`.solve_choice`, noted for ``explain``)."""
        if self.solve is not None:
            return True
        if not self.reads_sparse(a):
            return False
        exprs = {st.name: st.expr for st in self.statements}

        def expand(n: Node) -> Node:  # A through the views it is written with
            return ir.map_leaves(n, lambda x: expand(exprs[x.attr]) if x.op is Op.VIEW
                                 and x.attr in exprs else None)

        full = expand(a)
        nnz = dict(self.options.nnz)
        sparse = {x.attr for x in ir.leaves(full, Op.INPUT) if x.attr in self.storage}
        if sparse - set(nnz):
            return True  # declared sparse by a pragma: a solve view, as written
        push = (full.op is Op.SUB and full.children[0].op is Op.EYE
                and full.children[1].op is Op.SCALE
                and full.children[1].children[1].op is Op.INPUT
                and full.children[1].children[1].attr in self.storage)
        choice = solve_choice.choose(full, b, self.storage, nnz, dict(self.options.dims),
                                     push, line=pos[0])
        note = choice.note
        if not choice.solve_view:  # Woodbury needs the inputs dense: kept so from here on
            for name in sorted(sparse):
                self.storage.pop(name, None)
            note += f"; {', '.join(sorted(sparse))} kept dense for it"
        self.notes.append(note)
        return choice.solve_view

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
