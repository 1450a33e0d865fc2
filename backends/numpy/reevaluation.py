"""The re-evaluation methods of a generated NumPy module: ``_evaluate`` (every view from
the inputs, the constructor's path), ``REFRESH``/``CHANGES`` and ``_evaluate_some`` (the
views named, from the inputs and the views at hand: a failed probe's chain, or the views a
program edit recomputes).  A mixin of :class:`~.codegen.NumpyGenerator`."""

from __future__ import annotations

from linview.backends.common import shared_nodes
from linview.backends.numpy.render import ExprPrinter
from linview.compiler import printer
from linview.compiler.ir import Node, Op
from linview.compiler.plan import refresh_sets, solved_inverses


class Reevaluation:
    """Uses the generator's ``plan``, ``prog``, ``names``, ``transient`` and ``PRINTER``."""

    def _not_formed(self) -> dict[str, Node]:
        """``{W: its argument}`` of the inverses re-evaluation replaces by solves."""
        solved = solved_inverses(self.plan) & self.transient
        return {st.name: st.expr.children[0] for st in self.prog.statements
                if st.name in solved}

    def _statement(self, ex: ExprPrinter, lines: list[str], ind: str, name: str, expr: Node,
                   st, inverses: dict[str, Node]) -> None:
        """One statement of re-evaluation (:func:`statement_lines`)."""
        statement_lines(ex, lines, ind, self.names, self.prog.filename, name, expr, st,
                        inverses)

    def evaluate_method(self) -> list[str]:
        lines = ["    def _evaluate(self, d, inputs):",
                 '        """Re-evaluation: every view from the inputs (the constructor\'s '
                 'path)."""']
        ind = " " * 8
        for dcl in self.prog.inputs:
            lines.append(f"{ind}{self.names('view', dcl.name)} = inputs[{dcl.name!r}]")
        roots = [e for _, e in self.plan.evaluation]
        ex = self.PRINTER(self.names, lines, ind, trigger=False, shared=shared_nodes(roots))
        inverses = self._not_formed()
        for (name, expr), st in zip(self.plan.evaluation, self.prog.statements, strict=True):
            self._statement(ex, lines, ind, name, expr, st, inverses)
        lines.append(f"{ind}return {{")
        for st in self.prog.statements:
            if st.name not in inverses:
                lines.append(f"{ind}    {st.name!r}: {self.names('view', st.name)},")
        lines.append(f"{ind}}}")
        return lines

    #: emit ``REFRESH``, ``CHANGES`` and ``_evaluate_some``: a failed probe re-evaluates
    #: only the failing inverse's chain (see ``backends/numpy/fallback.py``)
    PARTIAL_REFRESH = True

    def refresh_attributes(self) -> list[str]:
        """``REFRESH = {W: chain}`` (:func:`refresh_sets`) and ``CHANGES = {X: the views
        on_update_X changes}``, what a failed probe restores if the chain is refused."""
        sets = refresh_sets(self.plan, self.transient) if self.PARTIAL_REFRESH else {}
        if not sets:
            return []
        out = ["    # a failed probe of W re-evaluates REFRESH[W] (W and what reads it) only"]
        out.append("    REFRESH = {" + ", ".join(f"{w!r}: {c!r}" for w, c in sets.items()) + "}")
        changes = {x: tuple(vd.name for vd in t.deltas[1:] if vd.name not in self.transient)
                   for x, t in self.plan.triggers.items() if not t.reevaluate}
        out.append("    CHANGES = {" + ", ".join(f"{x!r}: {c!r}" for x, c in changes.items())
                   + "}")
        return out

    def evaluate_some_method(self) -> list[str]:
        """``_evaluate_some(d, views, names)``: the statements in ``names`` (a union of
        ``REFRESH`` entries, or the views a program edit must recompute: see
        ``backends/numpy/reuse.py``), reading every other view from ``views``."""
        if not self.PARTIAL_REFRESH:
            return []
        ind = " " * 8
        lines = ["    def _evaluate_some(self, d, views, names):",
                 '        """Partial re-evaluation: the views in ``names``, from the current '
                 'inputs and',
                 '        views (a view in ``names`` need not be in ``views``)."""']
        todo = [(name, expr, st) for (name, expr), st in zip(
            self.plan.evaluation, self.prog.statements, strict=True)]
        inputs = {d_.name for d_ in self.prog.inputs}
        read = {n.attr for _, e, _ in todo for n in e.walk() if n.op in (Op.VIEW, Op.INPUT)}
        for nm in [d_.name for d_ in self.prog.inputs] + [s.name for s in self.prog.statements]:
            if nm in read and nm not in self._not_formed():
                get = f"views[{nm!r}]" if nm in inputs else f"views.get({nm!r})"
                lines.append(f"{ind}{self.names('view', nm)} = {get}")
        lines.append(f"{ind}out = {{}}")
        inverses = self._not_formed()
        groups = _factored_groups(todo)
        for i, (name, expr, st) in enumerate(todo):
            if name in inverses:  # never formed: a comment, no code
                self._statement(None, lines, ind, name, expr, st, inverses)
                continue
            group = groups.get(name, [name])
            if name != group[0]:
                continue  # computed with the first of its group
            members = [t for t in todo[i:] if t[0] in group]
            test = f"{name!r} in names" if len(group) == 1 else \
                f"names & {{{', '.join(repr(g) for g in group)}}}"
            lines.append(f"{ind}if {test}:")
            ex = self.PRINTER(self.names, lines, ind + "    ", trigger=False,
                              shared=shared_nodes([e for _, e, _ in members]))
            for m_name, m_expr, m_st in members:
                self._statement(ex, lines, ind + "    ", m_name, m_expr, m_st, inverses)
                lines.append(f"{ind}    out[{m_name!r}] = {self.names('view', m_name)}")
        lines.append(f"{ind}return out")
        return lines


def statement_lines(ex: ExprPrinter, lines: list[str], ind: str, names, filename: str,
                    name: str, expr: Node, st, inverses: dict[str, Node]) -> None:
    """One statement of an evaluation: ``name = <code>`` (a solve for ``W·R`` with a ``W``
    in ``inverses``, never formed), after a comment with its math and its line."""
    where = f" ({filename}:{st.line})" if st.line else ""
    if name in inverses:  # never formed: its products are solves
        lines.append(f"{ind}# {name} := {printer.fmt(st.expr)}{where}: not formed")
        return
    lines.append(f"{ind}# {name} := {printer.fmt(st.expr)}{where}")
    ex.label = name
    a = expr.children[0] if expr.op is Op.MUL else None
    if a is not None and a.op is Op.VIEW and a.attr in inverses:
        lines.append(f"{ind}{names('view', name)} = rt.solve("
                     f"{ex.code(inverses[a.attr])}, {ex.code(expr.children[1])}, "
                     f"{a.attr!r})")
        return
    lines.append(f"{ind}{names('view', name)} = {ex.code(expr)}")


def _factored_groups(todo) -> dict[str, list[str]]:
    """``{view: its group}`` for the outputs of one factorisation (``[Q, R] = qr(A)``,
    ``[L, U, P] = lu(A)``: parts of the same operand), which partial re-evaluation computes
    together so that the matrix is factored once."""
    by_operand: dict[tuple, list[str]] = {}
    for name, expr, _ in todo:
        if expr.op in (Op.QR, Op.LU):
            key = (expr.op, expr.children, expr.attr[1:] if isinstance(expr.attr, tuple)
                   else None)
            by_operand.setdefault(key, []).append(name)
    return {n: g for g in by_operand.values() if len(g) > 1 for n in g}
