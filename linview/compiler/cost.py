"""Cost model: flops, bytes and memory of re-evaluation and of each trigger strategy.

Counts are sympy expressions in the program's sizes and the update rank ``k`` (symbolic
formulas), evaluated numerically under bound sizes for decisions.  Conventions: a product
(a×b)(b×c) costs 2abc flops, an inverse 2n³, elementwise work one flop per entry, and
applying ``V += P Qᵀ`` costs 2·rows·cols·rank.  Bytes count 8 per float64 read or written
by each operation (inputs read once, result written once).

The per-view strategy chooser (:func:`strategy_chooser`) is greedy in program order:

* an inverse is maintained by Woodbury (INCR) while that is cheaper than re-inverting;
* a view whose delta rank reaches its column count is kept as a dense delta (HYBRID), as
  for thin iterates ``T`` of n×p with small p (thesis §6.4.3, Figure 6.7);
* otherwise the cheapest of INCR, HYBRID and REEVAL by estimated flops.
"""

from __future__ import annotations

from collections.abc import Callable

import sympy as sp

from linview.compiler import ir, passes
from linview.compiler.delta import Strategy, TriggerOptions, build_trigger
from linview.compiler.ir import Node, Op
from linview.compiler.lower import Options, lower
from linview.compiler.ops import OPS, Term, sum_terms
from linview.compiler.optimize import ChainPlanner, Sizes
from linview.errors import CompileError

SizeFn = Callable[[sp.Expr], object]


def count(n: Node, size: SizeFn, seen: set[int] | None = None) -> tuple[object, object]:
    """``(flops, bytes)`` to evaluate ``n`` once; shared subexpressions count once.
    ``size`` maps a size expression to a number (numeric) or itself (symbolic).  Flops are
    each op's ``flops`` entry (:data:`.ops.OPS`); bytes are its operands read and its result
    written (constants are free)."""
    seen = set() if seen is None else seen
    fl, by = 0, 0
    for m in n.walk():
        if id(m) in seen or m.op in ir.LEAVES:
            continue
        seen.add(id(m))
        fl += OPS[m.op].flops(m, size)
        ins = [size(x.rows) * size(x.cols) for x in m.children
               if x.op not in ir.CONSTANT_LEAVES]
        by += 8 * (sum(ins) + size(m.rows) * size(m.cols))
    return fl, by


def symbolic(e):
    return sp.sympify(e)


# ------------------------------------------------------------------ strategy choice
def _plan_terms(terms, sizes: Sizes) -> list[Node]:
    ctx = passes.Context(sizes, planner=ChainPlanner(sizes))
    return [passes.simplify(x, ctx) for t in terms for x in (t.P, t.Q)]


#: a rough machine model for decisions: sustained flop rate of BLAS-3 and memory bandwidth.
#: Matrix-vector work is bound by bytes, matrix-matrix work by flops; the estimated time of
#: an operation is ``flops / FLOP_RATE + bytes / BYTE_RATE``.
FLOP_RATE = 5e10
BYTE_RATE = 1e10


def seconds(flops, nbytes):
    """Estimated time of ``flops`` and ``nbytes`` under the machine model above."""
    return flops / FLOP_RATE + nbytes / BYTE_RATE


def strategy_costs(st: ir.Statement, terms: list[Term] | None, sizes: Sizes,
                   changed: set[str] = frozenset(),
                   size: SizeFn | None = None) -> dict[Strategy, object]:
    """Estimated seconds of keeping ``st`` fresh by each applicable strategy.

    REEVAL pays for forming the new value of each changed operand (``V + P Qᵀ``) and for
    evaluating the statement; INCR for its factor expressions and ``V += P Qᵀ``; HYBRID for
    summing the terms into one dense delta and ``V += D``."""
    return {s: seconds(*fb) for s, fb in strategy_counts(st, terms, sizes, changed,
                                                         size).items()}


def strategy_counts(st: ir.Statement, terms: list[Term] | None, sizes: Sizes,
                    changed: set[str] = frozenset(), size: SizeFn | None = None
                    ) -> dict[Strategy, tuple[object, object]]:
    """``{strategy: (flops, bytes)}`` for keeping ``st`` fresh (see :func:`strategy_costs`)."""
    size = size or sizes.value
    rows, cols = size(st.expr.rows), size(st.expr.cols)

    def new_value(leaf: Node) -> Node | None:  # the operand's new value, as a trigger has it
        if leaf.op not in (Op.VIEW, Op.INPUT) or leaf.attr not in changed:
            return None
        u = ir.factor(f"dU_{leaf.attr}", (leaf.rows, 1))
        v = ir.factor(f"dV_{leaf.attr}", (leaf.cols, 1))
        return ir.add(leaf, ir.matmul(u, ir.transpose(v)))

    new = ir.map_leaves(st.expr, new_value)
    fl, by = count(passes.simplify(new, passes.Context(sizes)), size, set())
    out = {Strategy.REEVAL: (fl + rows * cols, by + 16 * rows * cols)}
    if terms is None:
        return out
    seen: set[int] = set()
    fl = by = 0
    for n in _plan_terms(terms, sizes):
        f, b = count(n, size, seen)
        fl, by = fl + f, by + b
    rank = sum((size(t.rank) for t in terms), 0)
    out[Strategy.INCR] = (fl + 2 * rows * cols * rank, by + 16 * rows * cols)
    dense = passes.simplify(sum_terms(list(terms)), passes.Context(sizes))
    f, b = count(dense, size, set())
    out[Strategy.HYBRID] = (f + rows * cols, b + 24 * rows * cols)
    return out


def strategy_chooser(bindings: dict[str, int], rank: int = 1):
    """The default per-view chooser for :func:`linview.compiler.delta.build_trigger` (by estimated
    seconds, see :func:`seconds`)."""
    sizes = Sizes(dict(bindings), rank)

    def choose(st: ir.Statement, terms: list[Term] | None, inverse_of: str,
               changed: set[str] = frozenset()) -> Strategy:
        costs = strategy_costs(st, terms, sizes, changed)
        if inverse_of:
            return Strategy.INCR if costs[Strategy.INCR] < costs[Strategy.REEVAL] \
                else Strategy.REEVAL
        r = sum(sizes.value(t.rank) for t in terms)
        cols, rows = sizes.value(st.expr.cols), sizes.value(st.expr.rows)
        if r >= min(cols, rows):
            best = min((Strategy.HYBRID, Strategy.REEVAL), key=lambda s: costs[s])
            return best
        return min(costs, key=lambda s: costs[s])

    return choose


MODEL_CANDIDATES = (Options("exp"), Options("linear"), Options("skip", 2), Options("skip", 4),
                    Options("skip", 8))


def choose_model(module_ast, source, filename, dims, rank) -> tuple[ir.Program, Options]:
    """``--model auto``: lower once with each iterative model and keep the program with the
    cheapest total trigger cost (the first, ``exp``, on ties).  Returns the lowered program
    it chose, so the caller does not lower again."""
    sizes = Sizes(dict(dims), rank)
    best = None
    seen: set[tuple] = set()
    for opts in MODEL_CANDIDATES:
        lowered = lower(module_ast, source, filename, opts)
        program = passes.run_program(lowered, sizes)
        key = tuple((s.name, id(s.expr)) for s in program.statements)
        if key in seen:  # no powers or recurrences: every model gives this program
            continue
        seen.add(key)
        chooser = strategy_chooser(dims, rank)
        total = 0.0
        for x in program.dynamic:
            trig = build_trigger(program, x, TriggerOptions(choose=chooser))
            for vd in trig.deltas[1:]:
                st = program.statement(vd.name)
                total += float(strategy_costs(st, list(vd.terms) if vd.terms else None,
                                              sizes)[vd.strategy])
        if best is None or total < best[0]:
            best = (total, lowered, opts)
    return best[1], best[2]


# ------------------------------------------------------------------ reports
def _num(x) -> float:
    return float(x)


def program_counts(program: ir.Program, size: SizeFn,
                   sizes: Sizes | None = None) -> tuple[object, object]:
    """``(flops, bytes)`` of evaluating every view of ``program`` once (products in the
    order chosen for ``sizes``)."""
    planner = ChainPlanner(sizes or Sizes())
    seen: set[int] = set()
    fl = by = 0
    for st in program.statements:
        f, b = count(planner.order(st.expr), size, seen)
        fl, by = fl + f, by + b
    return fl, by


def view_memory(program: ir.Program, size: SizeFn, reeval: bool) -> object:
    """Bytes held: inputs and every view (incremental strategies keep them all), or for
    re-evaluation inputs, outputs and the two largest intermediates (thesis §6.4)."""
    inputs = sum((size(d.shape[0]) * size(d.shape[1]) for d in program.inputs), 0)
    views = [size(s.expr.rows) * size(s.expr.cols) for s in program.statements]
    if not reeval:
        return 8 * (inputs + sum(views, 0))
    outs = {n.attr for _, n in program.outputs}
    out_size = sum((size(s.expr.rows) * size(s.expr.cols) for s in program.statements
                    if s.name in outs), 0)
    inter = [size(s.expr.rows) * size(s.expr.cols) for s in program.statements
             if s.name not in outs]
    if size is symbolic:
        return 8 * (inputs + out_size + sum(inter[-2:], 0))
    return 8 * (inputs + out_size + sum(sorted(inter)[-2:], 0))


def cost_report(compiled, formulas: bool = False) -> dict:
    """The data behind ``linview cost``: per trigger and view, flops/bytes of REEVAL, INCR
    and HYBRID, the chosen strategy, totals and the predicted speedup.  Numbers use the
    compiled ``dims`` (and rank); ``formulas`` adds symbolic expressions."""
    plan = compiled.plan
    prog = plan.program
    sizes = plan.sizes
    missing = sorted({s.name for s in prog.dim_symbols} - set(sizes.bindings))
    report = {"program": prog.name, "dims": dict(sizes.bindings), "rank": sizes.rank,
              "model": compiled.options.get("model"), "triggers": []}
    if missing:
        raise CompileError("cost needs a value for every size; missing: " + ", ".join(missing),
                           hint="give them with --dims " + ",".join(f"{m}=..." for m in missing))
    re_fl, re_by = program_counts(prog, sizes.value, sizes)
    report["memory"] = {"reeval": view_memory(prog, sizes.value, True),
                        "incr": view_memory(prog, sizes.value, False)}
    for x, trig in plan.triggers.items():
        decl = prog.input(x)
        apply = 2 * sizes.value(decl.shape[0]) * sizes.value(decl.shape[1]) * sizes.rank
        rows = []
        totals = {"chosen": [apply, 0.0]}
        raw = build_trigger(prog, x, compiled.options.get("trigger_options"))
        changed = {x}
        for vd_raw, vd in zip(raw.deltas[1:], trig.deltas[1:], strict=True):
            st = prog.statement(vd.name)
            counts = strategy_counts(st, list(vd_raw.terms) if vd_raw.terms else None,
                                     sizes, changed)
            changed.add(vd.name)
            row = {"view": vd.name, "shape": [_num(sizes.value(st.expr.rows)),
                                              _num(sizes.value(st.expr.cols))],
                   "chosen": vd.strategy.value,
                   "rank": _num(sizes.value(vd.rank)),
                   "reason": vd.reason}
            for s_, (f, b) in counts.items():
                row[s_.value] = {"flops": _num(f), "bytes": _num(b)}
            rows.append(row)
            f, b = counts[vd.strategy]
            totals["chosen"][0] += _num(f)
            totals["chosen"][1] += _num(b)
        reeval_total = _num(re_fl) + apply
        entry = {"input": x, "views": rows,
                 "reeval": {"flops": reeval_total, "bytes": _num(re_by)},
                 "trigger": {"flops": totals["chosen"][0], "bytes": totals["chosen"][1]},
                 "predicted_speedup": reeval_total / max(totals["chosen"][0], 1.0)}
        if formulas:
            entry["formulas"] = symbolic_formulas(compiled, x)
        report["triggers"].append(entry)
    return report


def symbolic_formulas(compiled, x: str) -> dict:
    """Symbolic flop counts for ``x``'s trigger: re-evaluation, and each view under each
    strategy, as strings (sympy, leading terms first)."""
    plan = compiled.plan
    prog = plan.program
    raw = build_trigger(prog, x, compiled.options.get("trigger_options"))
    out = {"reeval": str(sp.expand(program_counts(prog, symbolic, plan.sizes)[0]))}
    changed = {x}
    views = {}
    for vd in raw.deltas[1:]:
        st = prog.statement(vd.name)
        c = strategy_counts(st, list(vd.terms) if vd.terms else None, plan.sizes, changed,
                            size=symbolic)
        changed.add(vd.name)
        views[vd.name] = {s_.value: str(sp.expand(f)) for s_, (f, _) in c.items()}
    out["views"] = views
    return out
