"""``linview explain``: the program and its triggers in the notation of the thesis'
Listing 6.4 (``ON UPDATE A BY (U, V): U_B := [...]; ...; A += U Vᵀ; ...``).

``after`` names the pass whose output to show:

* ``lower``     the SSA program as lowered (loops unrolled, ``^k`` expanded, inverses named);
* a program pass of :data:`.passes.PROGRAM_PASSES` (``materialize_products``,
  ``propagate_copies``, ...): the program after it;
* ``optimize``  after every program pass;
* ``delta``     the triggers as derived by the ops' delta rules, before simplification;
* ``triggers``  (default) the optimized triggers that the backend emits.
"""

from __future__ import annotations

from linview.compiler import ir, keys, maintenance, passes, printer
from linview.compiler.delta import Strategy, Trigger, build_trigger
from linview.errors import CompileError

PASSES = ("lower", *passes.PROGRAM_PASS_NAMES, "optimize", "delta", "triggers")


def _open_sizes(d: ir.InputDecl) -> bool:
    """Whether an input's shape holds sizes named after it (``rows_X``): no pragma gave
    them, so the data will."""
    names = {str(x) for e in d.shape for x in getattr(e, "free_symbols", ())}
    return bool(names & {f"rows_{d.name}", f"cols_{d.name}"})


def _program(prog: ir.Program, symmetric=frozenset()) -> list[str]:
    out = [f"program {prog.name} ({prog.filename})", "inputs:"]
    for d in prog.inputs:
        kind = "dynamic" if d.dynamic else "static"
        if d.scalar:
            kind += ", scalar"
        elif _open_sizes(d):
            kind += ", sizes from the data"
        out.append(f"  {d.name:<12} {printer.fmt_shape(d.ref):<12} {kind}")
    if any(_open_sizes(d) and not d.scalar for d in prog.inputs):
        out += ["  (sizes rows_X, cols_X come from the data at load(): a 1×1 input is then a",
                "   scalar; to plan without data, declare `%#linview dims` or `%#linview scalar`)"]
    out.append("views:")
    width = max((len(s.name) for s in prog.statements), default=4)
    for st in prog.statements:
        tags = []
        if st.name in symmetric:
            tags.append("symmetric")
        tag = f"  [{', '.join(tags)}]" if tags else ""
        where = f"  % line {st.line}" if st.line else ""
        out.append(f"  {st.name:<{width}} := {printer.fmt(st.expr)}    "
                   f"{printer.fmt_shape(st.expr)}{tag}{where}")
    out.append("outputs: " + ", ".join(f"{k} = {printer.fmt(v)}" for k, v in prog.outputs))
    return out


def trigger_listing(trig: Trigger, transient=frozenset()) -> list[str]:
    first = trig.deltas[0]
    out = [f"ON UPDATE {trig.input} BY (U, V):    "
           f"U: {printer.fmt_shape(first.left)}, V: {printer.fmt_shape(first.right)}"]
    if trig.reevaluate:
        return out + [f"  {trig.input} += U Vᵀ; re-evaluate every view    -- whole-trigger "
                      f"re-evaluation: {trig.reevaluate}"]
    applies = [f"{trig.input} += U Vᵀ"]
    for vd in trig.deltas[1:]:
        if vd.strategy is Strategy.INCR:
            tag = "  -- Woodbury" if vd.inverse_of else ""
            ps = ", ".join(printer.fmt(t.P) for t in vd.terms)
            qs = ", ".join(printer.fmt(t.Q) for t in vd.terms)
            out.append(f"  {vd.left.attr} := [{ps}];    rank {vd.rank}{tag}")
            out.append(f"  {vd.right.attr} := [{qs}];")
            if vd.name not in transient:  # not kept: only its inverse reads it
                applies.append(f"{vd.name} += {vd.left.attr} {vd.right.attr}ᵀ")
        elif vd.strategy is Strategy.HYBRID:
            out.append(f"  {vd.left.attr} := {printer.fmt(vd.dense)};    dense "
                       f"{printer.fmt_shape(vd.left)} (hybrid)")
            applies.append(f"{vd.name} += {vd.left.attr}")
        else:
            out.append(f"  {vd.name}' := {printer.fmt(vd.new_value)};    re-evaluated: "
                       f"{vd.reason}")
            applies.append(f"{vd.name} := {vd.name}'")
    out.append("  " + "; ".join(applies) + ";")
    return out


def switch_listing(stats: dict) -> list[str]:
    """The strategy switches a running module made (``views.stats["switches"]``, see
    ``backends/numpy/adaptive.py``), one line each."""
    switches = stats.get("switches") or []
    if not switches:
        return ["strategy switches while running: none"]
    def now(s: dict) -> str:
        threads = s.get("threads")
        verb = "re-evaluates" if s["to"].startswith("reeval") else "maintains"
        return verb + ("" if s["to"] in ("maintain", "reeval") else
                              " on one BLAS thread" if threads == 1 else
                              " on every idle core" if threads is None else
                              f" on {threads} BLAS threads")

    def when(s: dict) -> str:  # a trial at load (backends/numpy/aswritten.py), or a window
        return "at load" if s.get("at") == "load" else f"after update {s['update'] + 1}"

    return ["strategy switches while running (measured, not predicted):"] + [
        f"  {when(s)}: trigger of {s['input']} now {now(s)} ({s['because']})"
        for s in switches]


def explain(compiled, after: str | None = None, views=None) -> str:
    """The text of ``linview explain`` for a :class:`~linview.api.CompiledProgram`; with
    ``views`` (its loaded module), also the strategy switches they made while running."""
    after = after or "triggers"
    plan = compiled.plan
    if after == "lower":
        lines = _program(compiled.lowered)
    elif after in passes.PROGRAM_PASS_NAMES:
        lines = _program(passes.run_program(compiled.lowered, plan.sizes, upto=after))
    elif after == "optimize":
        lines = _program(plan.program, plan.symmetric)
    elif after == "delta":
        lines = _program(plan.program, plan.symmetric)
        for x in plan.program.dynamic:
            raw = build_trigger(plan.program, x, compiled.options.get("trigger_options"))
            lines += [""] + trigger_listing(raw)
    elif after == "triggers":
        lines = _program(plan.program, plan.symmetric)
        for trig in plan.triggers.values():
            lines += [""] + trigger_listing(trig, getattr(plan, "transient", frozenset()))
        if getattr(plan, "transient", None):
            lines += ["", "not kept (read only through their inverse): "
                      + ", ".join(sorted(plan.transient))]
        if not plan.triggers:
            lines += ["", "no dynamic inputs: nothing to maintain"]
        lines += [""] + key_listing(plan.program)
        if plan.triggers:  # which statements each update maintains or re-evaluates
            lines += [""] + maintenance.listing(plan)
    else:
        raise CompileError(f"unknown pass '{after}'", hint="passes: " + ", ".join(PASSES))
    if plan.notes and after in ("delta", "triggers"):
        lines += ["", "notes:"] + [f"  {n}" for n in plan.notes]
    if views is not None and after == "triggers":
        lines += [""] + switch_listing(getattr(views, "stats", {}))
    return "\n".join(lines)


def key_listing(prog: ir.Program) -> list[str]:
    """Each view's short key (:mod:`.keys`; inputs by name here, by content at load):
    what a program edit or a store reuses views by."""
    ks = keys.structural(prog)
    width = max((len(st.name) for st in prog.statements), default=0)
    return ["view keys (inputs by name here; by their content at load):"] + [
        f"  {st.name:<{width}}  {keys.short(ks[st.name])}" for st in prog.statements]
