"""Cost model decisions and reports: strategy per view, iterative model, ``linview cost``.

The counts come from :mod:`.counts`, the seconds from :mod:`.timemodel` (calibrated rates).

The per-view strategy chooser (:func:`strategy_chooser`) is greedy in program order:

* an inverse is maintained by Woodbury (INCR) while that is cheaper than re-inverting;
* a view whose delta rank reaches its column count is kept as a dense delta (HYBRID), as
  for thin iterates ``T`` of n×p with small p (thesis §6.4.3, Figure 6.7);
* otherwise the cheapest of INCR, HYBRID and REEVAL by estimated flops.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import sympy as sp

from linview.compiler import ir, passes
from linview.compiler.counts import (  # noqa: F401 - part of this module's interface
    SizeFn,
    count,
    node_counts,
    plan_terms,
    program_counts,
    strategy_counts,
    symbolic,
    view_memory,
)
from linview.compiler.delta import Strategy, TriggerOptions, build_trigger
from linview.compiler.lower import Options, TooLarge, lower
from linview.compiler.ops import Term
from linview.compiler.optimize import Sizes
from linview.errors import CompileError

# ------------------------------------------------------------------ strategy choice
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
    if size is None:  # numeric: the calibrated seconds model
        from linview.compiler.timemodel import strategy_seconds

        return strategy_seconds(st, terms, sizes, changed)
    return {s: seconds(*fb) for s, fb in strategy_counts(st, terms, sizes, changed,
                                                         size).items()}


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


MODEL_CANDIDATES = (Options("written"), Options("exp"), Options("linear"), Options("skip", 2),
                    Options("skip", 4), Options("skip", 8))
#: ``auto`` plans only the models whose lowered program has at most this many statements
#: (or the fewest, if none is that small)
AUTO_MAX_STATEMENTS = 200


def choose_model(module_ast, source, filename, dims, rank,
                 base: Options | None = None) -> tuple[ir.Program, Options]:
    """``--model auto``: lower once with each iterative model (the program as written
    first) and keep the cheapest total trigger cost, where a trigger costs the cheaper of
    maintaining and re-evaluating (:func:`.timemodel.trigger_scores`); a model that makes
    some trigger slower than the program as written is taken only when every model does.
    Returns the lowered program it chose, so the caller does not lower again.  Models
    whose program is over the size limit are skipped; if every one is, the default model's
    error is raised.  ``base`` carries the data's shapes and ``dims=`` of a specialised
    program (:mod:`linview.specialize`)."""
    from linview.compiler.timemodel import MODEL_GAIN, trigger_scores

    sizes = Sizes(dict(dims), rank)
    candidates = []
    for opts in MODEL_CANDIDATES:
        if base is not None:  # the data's shapes and dims= (linview.specialize)
            opts = replace(opts, shapes=base.shapes, dims=base.dims,
                           least_squares=base.least_squares, nnz=base.nnz)
        try:
            candidates.append((opts, lower(module_ast, source, filename, opts)))
        except TooLarge:
            continue
    if not candidates:  # every model is over the limit: say so for the default one
        first = Options("exp")
        lower(module_ast, source, filename, first if base is None else
              replace(first, shapes=base.shapes, dims=base.dims,
                      least_squares=base.least_squares, nnz=base.nnz))
    smallest = min(len(p.statements) for _, p in candidates)
    best, written = None, None
    seen: set[tuple] = set()
    for opts, lowered in candidates:
        if len(lowered.statements) > max(AUTO_MAX_STATEMENTS, smallest):
            continue  # planning cost grows with the statements; never chosen for size
        program = passes.run_program(lowered, sizes)
        key = tuple((s.name, id(s.expr)) for s in program.statements)
        if key in seen:  # no powers or recurrences: every model gives this program
            continue
        seen.add(key)
        # per trigger the cheaper of maintaining and re-evaluating (seconds model); a model
        # that would make some trigger slower than the program as written (the first
        # candidate) is taken only if no model keeps every trigger at least as fast, and
        # a rewritten program must be predicted MODEL_GAIN times faster than as written
        scores = trigger_scores(program, TriggerOptions(choose=strategy_chooser(dims, rank)),
                                sizes)
        gain = 1.0 if written is None else MODEL_GAIN
        written = written or scores
        loses = any(v > written[x] * (1 + 1e-9) for x, v in scores.items() if x in written)
        key = (loses, gain * sum(scores.values()))
        if best is None or key < best[0]:
            best = (key, lowered, opts)
    return best[1], best[2]


# ------------------------------------------------------------------ reports
def _num(x) -> float:
    return float(x)


def cost_report(compiled, formulas: bool = False) -> dict:
    """The data behind ``linview cost``: per trigger and view, flops/bytes of REEVAL, INCR
    and HYBRID, the chosen strategy, totals and the predicted speedup.  Numbers use the
    compiled ``dims`` (and rank); ``formulas`` adds symbolic expressions.

    Long on purpose: It assembles one report row by row (per trigger, per view); splitting it
    would pass the partial report around.
    """
    plan = compiled.plan
    prog = plan.program
    sizes = plan.sizes
    missing = sorted({s.name for s in prog.dim_symbols} - set(sizes.bindings))
    report = {"program": prog.name, "dims": dict(sizes.bindings), "rank": sizes.rank,
              "model": compiled.options.get("model"), "triggers": []}
    if missing:
        raise CompileError("cost needs a value for every size; missing: " + ", ".join(missing),
                           hint="give them with --dims " + ",".join(f"{m}=..." for m in missing))
    from linview.compiler import timemodel
    from linview.compiler.calibrate import rates

    r = rates()
    report["rates"] = r.as_dict()
    written = written_program(compiled)
    re_fl, re_by = program_counts(written, sizes.value, sizes)
    report["memory"] = {"reeval": view_memory(prog, sizes.value, True),
                        "incr": view_memory(prog, sizes.value, False)}
    topts = compiled.options.get("trigger_options")
    for x, trig in plan.triggers.items():
        decl = prog.input(x)
        apply = 2 * sizes.value(decl.shape[0]) * sizes.value(decl.shape[1]) * sizes.rank
        rows = []
        k_, cols_ = sizes.rank, _num(sizes.value(decl.shape[1]))
        # X += U Vᵀ with a one-hot U (a row update) touches k rows of X
        totals = {"chosen": [2.0 * k_ * cols_ * k_, 16.0 * k_ * cols_]}
        raw = build_trigger(prog, x, compiled.options.get("trigger_options"))
        changed = {x}
        for vd_raw, vd in zip(raw.deltas[1:], trig.deltas[1:], strict=True):
            st = prog.statement(vd.name)
            counts = strategy_counts(st, list(vd_raw.terms) if vd_raw.terms else None,
                                     sizes, changed, one_hot=timemodel.ONE_HOT)
            changed.add(vd.name)
            row = {"view": vd.name, "shape": [_num(sizes.value(st.expr.rows)),
                                              _num(sizes.value(st.expr.cols))],
                   "chosen": vd.strategy.value,
                   "rank": _num(sizes.value(vd.rank)),
                   "reason": vd.reason}
            secs = timemodel.strategy_seconds(st, list(vd_raw.terms) if vd_raw.terms else None,
                                              sizes, changed - {vd.name}, r)
            for s_, (f, b) in counts.items():
                row[s_.value] = {"flops": _num(f), "bytes": _num(b), "seconds": secs[s_]}
            rows.append(row)
            f, b = counts[vd.strategy]
            totals["chosen"][0] += _num(f)
            totals["chosen"][1] += _num(b)
        reeval_total = _num(re_fl) + apply
        # the baseline: the program as written, re-run after X += U Vᵀ in place
        base_s = timemodel.program_seconds(written, sizes, r) + \
            timemodel.input_update_seconds(prog, x, sizes, r, False) + \
            timemodel.evaluation_overhead(written, sizes, r, False)
        choice = timemodel.trigger_choice(prog, x, topts, sizes, r) if topts and \
            topts.choose else None
        whole = {"strategy": "reeval" if trig.reevaluate else "maintain",
                 "reason": trig.reevaluate, "blas_threads": trig.blas_threads}
        if choice:
            whole.update(maintain_s=choice["maintain_s"], reeval_s=choice["reeval_s"])
        if choice:
            trig_s = choice["seconds"]
        elif trig.reevaluate:  # forced: the program re-runs after X += U Vᵀ in place
            trig_s = timemodel.program_seconds(prog, sizes, r) + \
                timemodel.input_update_seconds(prog, x, sizes, r, False) + \
                timemodel.evaluation_overhead(prog, sizes, r, False)
        else:  # forced strategies: priced as the trigger runs them (one pass per view)
            trig_s = timemodel.maintenance_seconds(prog, x, topts, sizes, r,
                                                   trig.blas_threads == 1)
        if trig.reevaluate:  # the whole program runs: its flops and bytes
            fl, by = program_counts(prog, sizes.value, sizes)
            totals["chosen"] = [_num(fl), _num(by)]
        entry = {"input": x, "views": rows, "whole_trigger": whole,
                 "reeval": {"flops": reeval_total, "bytes": _num(re_by), "seconds": base_s,
                            "model": "written"},
                 "trigger": {"flops": totals["chosen"][0], "bytes": totals["chosen"][1],
                             "seconds": trig_s},
                 "predicted_speedup": base_s / max(trig_s, 1e-12),
                 "predicted_speedup_flops": reeval_total / max(totals["chosen"][0], 1.0)}
        if [st.name for st in prog.statements] != [st.name for st in written.statements]:
            t_s = timemodel.program_seconds(prog, sizes, r)
            if t_s < timemodel.program_seconds(written, sizes, r):
                # a transformed re-evaluation is cheaper: shown, labelled as such
                entry["reeval_transformed"] = {"seconds": t_s, "model": "as compiled"}
        if formulas:
            entry["formulas"] = symbolic_formulas(compiled, x)
        report["triggers"].append(entry)
    return report


def written_program(compiled) -> ir.Program:
    """The compiled program lowered as written (loops step by step, ``^`` by squaring,
    products in the best chain order): the re-evaluation baseline of ``cost`` and
    ``bench``."""
    from linview.frontend.parser import parse

    prog = compiled.plan.program
    if compiled.options.get("model") == "written":
        return prog
    module_ast = parse(prog.source, prog.filename)
    return passes.run_program(lower(module_ast, prog.source, prog.filename, Options("written")),
                              compiled.plan.sizes)


#: an as-written evaluation is emitted only for a program as written of at most this many
#: statements (the generated module stays readable; a longer one is never the faster)
WRITTEN_MAX_STATEMENTS = 400


@dataclass(frozen=True)
class AsWritten:
    """What a NumPy module needs to re-run the program as written (``Plan.written``):
    ``program``, the program lowered as written (loops step by step), or None when the
    compiled program is that one; ``predicted``, per dynamic input ``(maintain_s,
    written_s, threads)``: the predicted seconds of its maintaining trigger and of the
    input's update followed by the program as written, on the faster thread setting
    (``threads``: 1 or None for every thread), from the calibrated rates.  The runtime
    (``backends/numpy/adaptive.py``) measures both at load and switches while running."""

    program: ir.Program | None
    predicted: dict


def as_written(module_ast, source: str, filename: str, options: Options, plan,
               trigger_options) -> AsWritten | None:
    """:class:`AsWritten` of a compiled ``plan`` lowered from ``module_ast`` with
    ``options`` (the chosen model); None when the program as written cannot be lowered
    or is longer than :data:`WRITTEN_MAX_STATEMENTS`."""
    from linview.compiler import timemodel
    from linview.compiler.calibrate import rates

    prog, sizes = plan.program, plan.sizes
    written = None
    if options.model != "written":
        try:
            lowered = lower(module_ast, source, filename, replace(options, model="written"))
        except CompileError:  # over the size limit, or sizes only the data decides
            return None
        if len(lowered.statements) > WRITTEN_MAX_STATEMENTS:
            return None
        written = passes.run_program(lowered, sizes)
        if [(s.name, s.expr) for s in written.statements] == \
                [(s.name, s.expr) for s in prog.statements]:
            written = None  # no loops nor powers: the compiled program is the one written
    predicted = {}
    try:
        r = rates()
        run = written or prog
        for x in prog.dynamic:
            keep = min(timemodel.maintenance_seconds(prog, x, trigger_options, sizes, r, one)
                       for one in (True, False))
            again = {one: timemodel.program_seconds(run, sizes, r, one)
                     + timemodel.input_update_seconds(prog, x, sizes, r, one)
                     + timemodel.evaluation_overhead(run, sizes, r, one)
                     for one in (True, False)}
            fast = min(again, key=again.get)
            predicted[x] = (keep, again[fast], 1 if fast else None)
    except (TypeError, ValueError, KeyError):  # sizes left symbolic: nothing predicted
        predicted = {}
    return AsWritten(written, predicted)


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
