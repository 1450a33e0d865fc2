"""The compiled form handed to a backend: optimized program, triggers and evaluation order.

:func:`make_plan` runs the middle of the pipeline (:mod:`.passes`): the program passes, one
trigger per dynamic input, the expression passes on every trigger, and the chain-ordered
re-evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy as sp

from linview.compiler import ir, passes
from linview.compiler.delta import Strategy, Trigger, TriggerOptions, build_trigger, emitted_exprs
from linview.compiler.ir import Node, Op
from linview.compiler.optimize import Sizes, symmetric_views


@dataclass(frozen=True)
class Plan:
    """Everything a backend needs to emit a trigger module."""

    program: ir.Program
    triggers: dict[str, Trigger]
    evaluation: tuple[tuple[str, Node], ...]  # (view, chain-ordered expression)
    symmetric: frozenset[str]
    sizes: Sizes
    source_hash: str
    notes: tuple[str, ...] = field(default=())
    #: views that no trigger keeps: read only through their inverse, which every trigger
    #: maintains by Woodbury from the view's delta factors (see :func:`transient_views`)
    transient: frozenset[str] = field(default=frozenset())
    #: the program as written and the predicted seconds of re-running it
    #: (:class:`linview.compiler.cost.AsWritten`; None: not planned, e.g. on Spark)
    written: object = None

    @property
    def class_name(self) -> str:
        parts = [p for p in self.program.name.replace("-", "_").split("_") if p]
        name = "".join(p[:1].upper() + p[1:] for p in parts) or "Program"
        return name if name[0].isalpha() else f"P{name}"


def make_plan(program: ir.Program, *, bindings: dict[str, int] | None = None,
              rank: int = 1, trigger_options: TriggerOptions | None = None,
              source_hash: str = "") -> Plan:
    """Run the pipeline (:mod:`.passes`) on a lowered program."""
    sizes = Sizes(dict(bindings or {}), rank)
    program = passes.run_program(program, sizes)
    symmetric = frozenset(symmetric_views(program))
    ctx = passes.Context(sizes, symmetric)
    triggers = {x: passes.optimize_trigger(build_trigger(program, x, trigger_options),
                                           program, ctx)
                for x in program.dynamic}
    notes = tuple(program.notes)  # the lowering's, e.g. how least squares is kept
    solves = {st.name for st in program.statements if st.expr.op is Op.SOLVE}
    notes += tuple(f"on update of {x}: {vd.name} is re-evaluated ({vd.reason})"
                   for x, t in triggers.items() for vd in t.deltas
                   if vd.strategy is Strategy.REEVAL and vd.name not in solves)
    return Plan(program, triggers, passes.evaluation_order(program, sizes), symmetric, sizes,
                source_hash, notes)


def transient_views(plan: Plan) -> frozenset[str]:
    """Views needed only through another view: ``G`` (e.g. ``XᵀX``) read by no statement
    except ``W := inv(G)``, not an output, with every trigger maintaining ``W`` by Woodbury
    from ``G``'s delta factors and reading ``G`` itself nowhere.  Re-evaluation still
    computes ``G`` (to invert it); no trigger updates it, so it is not kept.  Also the
    :func:`solved_inverses`, which re-evaluation never forms."""
    prog = plan.program
    outputs = {n.attr for _, n in prog.outputs}
    readers: dict[str, list[ir.Statement]] = {}
    for st in prog.statements:
        for n in st.expr.walk():
            if n.op is Op.VIEW:
                readers.setdefault(n.attr, []).append(st)
    out = set()
    for st in prog.statements:
        g = st.name
        users = readers.get(g, [])
        if g in outputs or not users or not all(
                u.expr.op is Op.INV and u.expr.children[0].op is Op.VIEW
                and u.expr.children[0].attr == g for u in users):
            continue
        ok = True
        for trig in plan.triggers.values():
            names = {vd.name: vd for vd in trig.deltas}
            if trig.reevaluate or g not in names:
                continue
            if names[g].strategy is not Strategy.INCR or any(
                    u.name not in names or names[u.name].strategy is not Strategy.INCR
                    or names[u.name].inverse_of != g for u in users):
                ok = False
                break
            reads = {n.attr for vd in trig.deltas for e in emitted_exprs(vd) for n in e.walk()
                     if n.op is Op.VIEW}
            if g in reads:
                ok = False
                break
        if ok:
            out.add(g)
    return frozenset(out) | solved_inverses(plan)


def solved_inverses(plan: Plan) -> frozenset[str]:
    """Inverse views ``W := inv(G)`` that re-evaluation can replace by a solve, as Octave
    computes ``G \\ R``: not an output, read in the evaluation only as the left factor of
    products ``W·R`` (each the whole statement), and read or changed by no maintaining
    trigger."""
    prog = plan.program
    outputs = {n.attr for _, n in prog.outputs}
    inverses = {st.name for st in prog.statements if st.expr.op is Op.INV}
    ok = set(inverses - outputs)
    for _, expr in plan.evaluation:
        solved = expr.op is Op.MUL and expr.children[0].op is Op.VIEW \
            and expr.children[0].attr in ok
        # the right operand of W·R may read W too (W·W: the same interned leaf)
        for n in expr.walk() if not solved else expr.children[1].walk():
            if n.op is Op.VIEW and n.attr in ok:
                ok.discard(n.attr)
    for trig in plan.triggers.values():
        if trig.reevaluate:
            continue
        for vd in trig.deltas:
            ok.discard(vd.name)
            for e in emitted_exprs(vd):
                ok -= {n.attr for n in e.walk() if n.op is Op.VIEW}
    return frozenset(ok)


def size_entry(e) -> str:
    """How a generated module states a size: a bare size by its name (``'n'``), a literal
    as an int, a compound one as ``rt.Size("n + p", lambda d: d["n"] + d["p"])``."""
    e = sp.sympify(e)
    if e.is_Symbol:
        return repr(e.name)
    if e.is_Integer:
        return str(int(e))
    return f"rt.Size({str(e)!r}, lambda d: {size_code(e)})"


def size_code(e, dims_var: str = "d") -> str:
    """A size expression as Python code over ``d["n"]`` and the rank ``k``."""
    e = sp.sympify(e)
    mapping = {s: sp.Symbol(s.name if s.name == "k" else f'{dims_var}["{s.name}"]')
               for s in e.free_symbols}
    return str(e.subs(mapping))


def maintained_inverses(plan: Plan) -> frozenset[str]:
    """Inverse views that some maintaining trigger updates from the delta of their argument
    (Woodbury): the ones a generated trigger probes."""
    return frozenset(vd.name for t in plan.triggers.values() if not t.reevaluate
                     for vd in t.deltas[1:] if vd.inverse_of)


def refresh_sets(plan: Plan, transient: frozenset[str] = frozenset()) -> dict[str, tuple]:
    """``{W: views}`` for every :func:`maintained_inverses` ``W``: what a failed probe of
    ``W`` re-evaluates, in program order: ``W``, every view that reads it directly or
    through other views, and the views in ``transient`` (not kept) that these read.  Views
    outside the set read neither ``W`` nor anything computed from it."""
    order = [name for name, _ in plan.evaluation]
    reads = {name: {n.attr for n in expr.walk() if n.op is Op.VIEW}
             for name, expr in plan.evaluation}
    out = {}
    for w in sorted(maintained_inverses(plan), key=order.index):
        chain = {w}
        for name in order:  # SSA in program order: a reader comes after what it reads
            if reads[name] & chain:
                chain.add(name)
        todo = list(chain)
        while todo:  # transient views are not kept: the chain must compute them
            for r in (reads[todo.pop()] & transient) - chain:
                chain.add(r)
                todo.append(r)
        out[w] = tuple(n for n in order if n in chain)
    return out
