"""The compiled form handed to a backend: optimized program, triggers and evaluation order.

:func:`make_plan` runs the middle of the pipeline (DESIGN.md §4)::

    Program ─optimize_program─> Program ─build_triggers─> {input: Trigger}
            ─optimize_trigger─> {input: Trigger}   (+ chain-ordered evaluation)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy as sp

from linview.compiler import check, ir
from linview.compiler.delta import Strategy, Trigger, TriggerOptions, build_trigger
from linview.compiler.ir import Node, Op
from linview.compiler.optimize import (
    ChainPlanner,
    Sizes,
    optimize_program,
    optimize_trigger,
    push_transposes,
    symmetric_views,
)


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

    @property
    def class_name(self) -> str:
        parts = [p for p in self.program.name.replace("-", "_").split("_") if p]
        name = "".join(p[:1].upper() + p[1:] for p in parts) or "Program"
        return name if name[0].isalpha() else f"P{name}"


def _materialize_outputs(program: ir.Program) -> ir.Program:
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


def make_plan(program: ir.Program, *, bindings: dict[str, int] | None = None,
              rank: int = 1, trigger_options: TriggerOptions | None = None,
              source_hash: str = "") -> Plan:
    sizes = Sizes(dict(bindings or {}), rank)
    checking = check.enabled()
    if checking:
        check.check_program(program, "lower")
    program = _materialize_outputs(optimize_program(program, sizes))
    if checking:
        check.check_program(program, "optimize")
    symmetric = frozenset(symmetric_views(program))
    triggers = {}
    for x in program.dynamic:
        raw = build_trigger(program, x, trigger_options)
        if checking:
            check.check_trigger(raw, program, "delta")
        triggers[x] = optimize_trigger(raw, sizes, set(symmetric))
        if checking:
            check.check_trigger(triggers[x], program, "optimize_trigger")
    planner = ChainPlanner(sizes)
    evaluation = tuple((st.name, planner.order(push_transposes(st.expr)))
                       for st in program.statements)
    notes = []
    for x, t in triggers.items():
        for vd in t.deltas:
            if vd.strategy is Strategy.REEVAL:
                notes.append(f"on update of {x}: {vd.name} is re-evaluated ({vd.reason})")
    return Plan(program, triggers, evaluation, symmetric, sizes, source_hash, tuple(notes))


def size_code(e, dims_var: str = "d") -> str:
    """A size expression as Python code over ``d["n"]`` and the rank ``k``."""
    e = sp.sympify(e)
    mapping = {s: sp.Symbol(s.name if s.name == "k" else f'{dims_var}["{s.name}"]')
               for s in e.free_symbols}
    return str(e.subs(mapping))
