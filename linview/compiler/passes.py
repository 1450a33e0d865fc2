"""The pipeline: the passes as named lists, and the one driver every user of them calls.

::

    Program ─PROGRAM_PASSES─> Program ─derive (delta.build_trigger)─> {input: Trigger}
            ─EXPR_PASSES on every factor expression─> {input: Trigger}

* :data:`PROGRAM_PASSES` rewrite the lowered program (``Program -> Program``);
* :data:`EXPR_PASSES` rewrite one expression, in the context of a trigger (the symmetric
  views, and one :class:`~.optimize.ChainPlanner` so that products computed once in a
  trigger are shared).  :func:`simplify` runs them on a single expression (the cost model
  and re-evaluation use it); :func:`optimize_trigger` on every expression of a trigger.

``plan.make_plan``, ``cost``, ``explain --after PASS`` and the IR checker all go through
:func:`run_program` and :func:`optimize_trigger`; the checker (:mod:`.check`) runs after
every pass when it is enabled (always in the test suite).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from linview.compiler import check, ir
from linview.compiler.delta import Trigger, emitted_exprs
from linview.compiler.ir import Node, Op
from linview.compiler.ops import Term
from linview.compiler.optimize import (
    ChainPlanner,
    Sizes,
    distribute,
    eliminate_dead_views,
    materialize_products,
    propagate_copies,
    push_transposes,
)


@dataclass(frozen=True)
class Context:
    """What passes may consult: planning sizes, symmetric views, the shared chain planner."""

    sizes: Sizes
    symmetric: frozenset[str] = frozenset()
    planner: ChainPlanner | None = None

    def chain_planner(self) -> ChainPlanner:
        return self.planner or ChainPlanner(self.sizes)


def materialize_outputs(program: ir.Program) -> ir.Program:
    """Outputs that are constants become views, so every output is a view or an input."""
    stmts = list(program.statements)
    outputs = []
    names = {s.name for s in stmts} | {d.name for d in program.inputs}
    for name, n in program.outputs:
        if n.op in (Op.VIEW, Op.INPUT):
            outputs.append((name, n))
            continue
        vname = name if name not in names else f"{name}_out"
        stmts.append(ir.Statement(vname, n))
        names.add(vname)
        outputs.append((name, ir.view(vname, n.shape)))
    return program.with_statements(stmts, outputs)


ProgramPass = Callable[[ir.Program, Context], ir.Program]
ExprPass = Callable[[Node, Context], Node]

#: program passes, in order
PROGRAM_PASSES: tuple[tuple[str, ProgramPass], ...] = (
    ("materialize_products", lambda p, ctx: materialize_products(p, ctx.sizes)),
    ("propagate_copies", lambda p, ctx: propagate_copies(p)),
    ("eliminate_dead_views", lambda p, ctx: eliminate_dead_views(p)),
    ("materialize_outputs", lambda p, ctx: materialize_outputs(p)),
)

#: expression passes, in order (on trigger factor expressions and re-evaluation)
EXPR_PASSES: tuple[tuple[str, ExprPass], ...] = (
    ("push_transposes", lambda n, ctx: push_transposes(n, ctx.symmetric)),
    ("distribute", lambda n, ctx: distribute(n)),
    ("order_chains", lambda n, ctx: ctx.chain_planner().order(n)),
)

PROGRAM_PASS_NAMES = tuple(name for name, _ in PROGRAM_PASSES)


def run_program(program: ir.Program, sizes: Sizes, upto: str | None = None) -> ir.Program:
    """Run :data:`PROGRAM_PASSES` (up to and including ``upto``), checking after each."""
    ctx = Context(sizes)
    if check.enabled():
        check.check_program(program, "lower")
    for name, run in PROGRAM_PASSES:
        program = run(program, ctx)
        if check.enabled():
            check.check_program(program, name)
        if name == upto:
            break
    return program


def simplify(n: Node, ctx: Context) -> Node:
    """``n`` after every expression pass."""
    for _, run in EXPR_PASSES:
        n = run(n, ctx)
    return n


def optimize_trigger(trigger: Trigger, program: ir.Program, ctx: Context) -> Trigger:
    """Every expression of ``trigger`` simplified with one shared chain planner, so that a
    product computed for one view is reused by the next.  ``(X + U Vᵀ) x`` in a
    re-evaluated view becomes ``X x + U (Vᵀ x)``."""
    ctx = replace(ctx, planner=ctx.chain_planner())
    if check.enabled():
        check.check_trigger(trigger, program, "delta")

    def fix(n: Node | None, c: Context = ctx) -> Node | None:
        return None if n is None else simplify(n, c)

    def fix_delta(vd):
        # what the backend evaluates shares the trigger's planner (a product built for
        # one view is free for the next); the rest (a HYBRID view's factors, which no
        # backend evaluates) gets a planner of its own, so that the emitted expressions
        # do not take its products as already computed
        emitted = {id(e) for e in emitted_exprs(vd)}
        aside = replace(ctx, planner=ChainPlanner(ctx.sizes))

        def one(n):
            return fix(n, ctx if n is None or id(n) in emitted else aside)
        return replace(vd, terms=tuple(Term(one(t.P), one(t.Q)) for t in vd.terms),
                       new_value=one(vd.new_value), dense=one(vd.dense))

    deltas = tuple(fix_delta(vd) for vd in trigger.deltas)
    out = replace(trigger, deltas=deltas)
    if check.enabled():
        check.check_trigger(out, program, "optimize_trigger")
    return out


def evaluation_order(program: ir.Program, sizes: Sizes) -> tuple[tuple[str, Node], ...]:
    """Each statement as re-evaluation computes it: transposes pushed down, chains ordered
    by one planner (shared products computed once)."""
    ctx = Context(sizes, planner=ChainPlanner(sizes))
    return tuple((st.name, ctx.planner.order(push_transposes(st.expr)))
                 for st in program.statements)
