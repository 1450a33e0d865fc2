"""Which statements a trigger maintains and which it re-evaluates, per source line.

``linview explain`` prints this table after the triggers, so that a user sees at a glance
what the compiler made of each statement of the program: *maintained* (a factored or
dense delta, INCR or HYBRID), *re-evaluated* (REEVAL: recomputed inside the trigger from
the new operands, with the reason), or untouched by an update of that input.
"""

from __future__ import annotations

from linview.compiler.delta import Strategy
from linview.compiler.ir import Op

MAINTAINED = "maintained"
REEVALUATED = "re-evaluated"
SOLVED = "kept by its solver"


def table(plan) -> dict[str, dict[str, str]]:
    """``{view: {dynamic input: "maintained" | "re-evaluated"}}``; views an update of
    that input does not touch are left out of its entry."""
    out: dict[str, dict[str, str]] = {st.name: {} for st in plan.program.statements}
    for x, trig in plan.triggers.items():
        for vd in trig.deltas[1:]:
            out[vd.name][x] = REEVALUATED if vd.strategy is Strategy.REEVAL else MAINTAINED
    return out


def listing(plan) -> list[str]:
    """The ``maintenance:`` section of ``linview explain``."""
    if not plan.triggers:
        return []
    status = table(plan)
    reasons = {(x, vd.name): vd.reason for x, trig in plan.triggers.items()
               for vd in trig.deltas[1:] if vd.strategy is Strategy.REEVAL}
    width = max((len(s.name) for s in plan.program.statements), default=4)
    lines = ["maintenance (per statement and updated input):"]
    for st in plan.program.statements:
        parts = []
        for x in plan.triggers:
            got = status[st.name].get(x)
            if got is None:
                continue
            why = reasons.get((x, st.name))
            if st.expr.op is Op.SOLVE:  # the module's solve side (backends/numpy/solve_*)
                got, why = SOLVED, "the changes of A and B update its residual"
            parts.append(f"{got} on {x}" + (f" ({why})" if why else ""))
        where = f"line {st.line}" if st.line else "auxiliary"
        lines.append(f"  {st.name:<{width}}  {where:<9} " + ("; ".join(parts) or
                                                             "unchanged by updates"))
    return lines
