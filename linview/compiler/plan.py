"""The compiled form handed to a backend: optimized program, triggers and evaluation order.

:func:`make_plan` runs the middle of the pipeline (:mod:`.passes`): the program passes, one
trigger per dynamic input, the expression passes on every trigger, and the chain-ordered
re-evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy as sp

from linview.compiler import ir, passes
from linview.compiler.delta import Strategy, Trigger, TriggerOptions, build_trigger
from linview.compiler.ir import Node
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
    notes = tuple(f"on update of {x}: {vd.name} is re-evaluated ({vd.reason})"
                  for x, t in triggers.items() for vd in t.deltas
                  if vd.strategy is Strategy.REEVAL)
    return Plan(program, triggers, passes.evaluation_order(program, sizes), symmetric, sizes,
                source_hash, notes)


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
