"""The seconds model: predicted time of re-evaluation and of each trigger strategy.

Every operation is timed by a roofline over the calibrated rates (:mod:`.calibrate`):
``max(flops / gemm rate, bytes / streaming rate) + call overhead``, with the one-thread
rates for a maintaining trigger (it runs with the NumPy runtime's ``TRIGGER_THREADS`` BLAS
threads) and the all-thread rates for re-evaluation.  Flops and bytes per operation are
those of :func:`.counts.node_counts`, which knows that a product ``A·U`` with a one-hot
update factor ``U`` (a row update, the planning assumption, see :data:`ONE_HOT`) reads only
``k`` columns of ``A``, as the runtime's ``dot`` does, and that applying a row update to an
input touches only its rows.

Decisions made here (``auto`` must never be slower than re-evaluation):

* :func:`choose_threads` and :func:`decide_triggers`: for each trigger, the maintenance it
  would run (per view the chooser's strategy) against re-evaluating the program; when
  maintenance is predicted slower the whole trigger re-evaluates (``Trigger.reevaluate``);
* :func:`model_seconds`: what ``--model auto`` minimises, per trigger the cheaper of the two.
"""

from __future__ import annotations

from dataclasses import replace

from linview.compiler import ir, passes
from linview.compiler.calibrate import Rates, rates
from linview.compiler.counts import (  # noqa: F401 - node_counts is part of this interface
    ONE_HOT,
    node_counts,
    plan_terms,
    with_new_operands,
)
from linview.compiler.delta import Strategy, build_trigger
from linview.compiler.ir import Node, Op
from linview.compiler.ops import sum_terms
from linview.compiler.optimize import ChainPlanner

#: a trigger uses every BLAS thread only when that is predicted this much faster
THREADS_GAIN = 1.25


def _roof(fl, by, g: float, s: float, call: float) -> float:
    return max(float(fl) / g, float(by) / s) + call


def _rates(r: Rates, one_thread: bool) -> tuple[float, float, float]:
    if one_thread:
        return r.gemm1_flops, r.stream1_bytes, r.call_s
    return r.gemm_flops, r.stream_bytes, r.call_s


def expr_seconds(n: Node, size, rt3, seen: set[int], one_hot=ONE_HOT) -> float:
    """Seconds to evaluate ``n`` (operations in ``seen`` are already computed)."""
    t = 0.0
    for m in n.walk():
        if id(m) in seen or m.op in ir.LEAVES:
            continue
        seen.add(id(m))
        if m.op is Op.T:  # a transpose is a view of its operand in NumPy
            continue
        t += _roof(*node_counts(m, size, one_hot), *rt3)
    return t


def strategy_seconds(st: ir.Statement, terms, sizes, changed=frozenset(),
                     r: Rates | None = None, one_thread: bool = True,
                     one_hot=ONE_HOT) -> dict:
    """``{strategy: seconds}`` of keeping ``st`` fresh inside a trigger (see
    :func:`linview.compiler.cost.strategy_counts` for what each strategy pays)."""
    r = r or rates()
    g, s, call = rt3 = _rates(r, one_thread)
    size = sizes.value
    rows, cols = size(st.expr.rows), size(st.expr.cols)

    planned = passes.simplify(with_new_operands(st.expr, changed), passes.Context(sizes))
    out = {Strategy.REEVAL: expr_seconds(planned, size, rt3, set(), one_hot)
           + _roof(0, 16 * rows * cols, g, s, call)}
    if terms is None:
        return out
    seen: set[int] = set()
    t = sum(expr_seconds(n, size, rt3, seen, one_hot) for n in plan_terms(terms, sizes))
    rank = sum((size(x.rank) for x in terms), 0)
    out[Strategy.INCR] = t + _roof(2 * rows * cols * rank, 16 * rows * cols, g, s, call)
    dense = passes.simplify(sum_terms(list(terms)), passes.Context(sizes))
    out[Strategy.HYBRID] = expr_seconds(dense, size, rt3, set(), one_hot) \
        + _roof(rows * cols, 24 * rows * cols, g, s, call)
    return out


def solvable(program: ir.Program) -> frozenset[str]:
    """Inverse views that re-evaluation replaces by a solve when no trigger reads them
    (:func:`linview.compiler.plan.solved_inverses`): not outputs, read only as ``W·R``."""
    outputs = {n.attr for _, n in program.outputs}
    ok = {st.name for st in program.statements if st.expr.op is Op.INV} - outputs
    for st in program.statements:
        e = st.expr
        left = e.children[0] if e.op is Op.MUL and e.children[0].op is Op.VIEW else None
        for n in e.walk() if left is None else e.children[1].walk():
            if n.op is Op.VIEW:
                ok.discard(n.attr)
    return frozenset(ok)


def program_seconds(program: ir.Program, sizes, r: Rates | None = None,
                    one_thread: bool = False) -> float:
    """Seconds to evaluate every view of ``program`` once (on every BLAS thread, or one);
    a :func:`solvable` inverse costs its LU factorisation (2n³/3), its product a solve."""


    r = r or rates()
    planner = ChainPlanner(sizes)
    seen: set[int] = set()
    g, s, call = rt3 = _rates(r, one_thread)
    solved = solvable(program)
    t = 0.0
    for st in program.statements:
        if st.name in solved:
            n = sizes.value(st.expr.rows)
            seen |= {id(st.expr)}
            t += expr_seconds(st.expr.children[0], sizes.value, rt3, seen, frozenset()) \
                + _roof(2 * n ** 3 / 3, 16 * n * n, g, s, call)
            continue
        t += expr_seconds(planner.order(st.expr), sizes.value, rt3, seen, frozenset())
    return t


def input_update_seconds(program: ir.Program, x: str, sizes, r: Rates, one_thread: bool,
                         in_place: bool = True, one_hot=ONE_HOT) -> float:
    """``X += U Vᵀ``: in place on the touched rows (a one-hot U), else a pass over X; the
    baseline (``reevaluate_update``) forms ``X + U Vᵀ`` in new memory (three passes)."""
    d = program.input(x)
    rows, cols, k = (sizes.value(d.shape[0]), sizes.value(d.shape[1]), sizes.rank)
    g, s, call = _rates(r, one_thread)
    if not in_place:
        return _roof(2 * rows * cols * k, 24 * rows * cols, g, s, call)
    if "U" in one_hot:
        return _roof(2 * k * cols * k, 16 * k * cols, g, s, call)
    return _roof(2 * rows * cols * k, 16 * rows * cols, g, s, call)


#: small calls a trigger makes besides its formulas: validating the update, entering the
#: BLAS thread limit, dispatch; per delta part, the phase-1 guard's checks
TRIGGER_CALLS = 10
CHECK_CALLS = 4


def evaluation_overhead(program: ir.Program, sizes, r: Rates, one_thread: bool) -> float:
    """What re-evaluation pays per view besides its formula: the finiteness check and the
    Fortran-order copy (``TriggerModule._reevaluate``)."""
    _, s, call = _rates(r, one_thread)
    t = TRIGGER_CALLS * call
    for st in program.statements:
        t += CHECK_CALLS * call + 8 * sizes.value(st.expr.rows) * sizes.value(st.expr.cols) / s
    return t


def maintenance_seconds(program: ir.Program, x: str, trigger_options, sizes,
                        r: Rates | None = None, one_thread: bool = True) -> float:
    """Seconds of the maintaining trigger of ``x`` (each view by its chosen strategy)."""


    r = r or rates()
    raw = build_trigger(program, x, trigger_options)
    _, s, call = _rates(r, one_thread)
    t = input_update_seconds(program, x, sizes, r, one_thread) + TRIGGER_CALLS * call
    changed = {x}
    for vd in raw.deltas[1:]:
        st = program.statement(vd.name)
        t += strategy_seconds(st, list(vd.terms) if vd.terms else None, sizes, changed, r,
                              one_thread)[vd.strategy]
        changed.add(vd.name)
        # the phase-1 guard reads every part of the delta (rt.check_deltas)
        rows, cols = sizes.value(st.expr.rows), sizes.value(st.expr.cols)
        if vd.strategy is Strategy.INCR:
            k = sum((sizes.value(term.rank) for term in vd.terms), 0)
            t += 2 * CHECK_CALLS * call + 8 * (rows + cols) * k / s
        else:
            t += CHECK_CALLS * call + 8 * rows * cols / s
    return t


def trigger_choice(program: ir.Program, x: str, trigger_options, sizes,
                   r: Rates | None = None) -> dict:
    """Predicted seconds of the trigger of ``x`` maintained and re-evaluated (in place),
    each with the better of one BLAS thread and all of them (``threads``: 1 or None for
    the chosen one); ``choice`` is ``"maintain"`` or ``"reeval"``."""
    r = r or rates()
    cands = []  # (seconds, strategy, threads)
    for one in (True, False):
        cands.append((maintenance_seconds(program, x, trigger_options, sizes, r, one),
                      "maintain", 1 if one else None))
        cands.append((program_seconds(program, sizes, r, one)
                      + input_update_seconds(program, x, sizes, r, one)
                      + evaluation_overhead(program, sizes, r, one), "reeval",
                      1 if one else None))
    # all threads only when clearly faster: on a loaded machine they spin (issue: INCR of
    # A^16 at n = 300 took 70 ms on two threads, 0.63 ms on one)
    best = min(cands, key=lambda c: c[0] * (THREADS_GAIN if c[2] is None else 1.0))
    return {"maintain_s": min(c[0] for c in cands if c[1] == "maintain"),
            "reeval_s": min(c[0] for c in cands if c[1] == "reeval"),
            "choice": best[1], "threads": best[2], "seconds": best[0]}


def model_seconds(program: ir.Program, trigger_options, sizes, r: Rates | None = None) -> float:
    """What ``--model auto`` minimises: over the dynamic inputs, the cheaper of maintaining
    and re-evaluating each trigger."""
    total = 0.0
    for x in program.dynamic:
        c = trigger_choice(program, x, trigger_options, sizes, r)
        total += c["seconds"]
    return total


def decide_triggers(plan, trigger_options, r: Rates | None = None):
    """``plan`` with every trigger whose maintenance is predicted slower than re-evaluation
    marked to re-evaluate, and each maintaining trigger's BLAS threads set."""
    r = r or rates()
    triggers = {}
    for x, trig in plan.triggers.items():
        c = trigger_choice(plan.program, x, trigger_options, plan.sizes, r)
        if c["choice"] == "reeval":
            why = (f"maintenance predicted {c['maintain_s'] * 1e3:.3g} ms, re-evaluation "
                   f"{c['reeval_s'] * 1e3:.3g} ms")
            triggers[x] = replace(trig, reevaluate=why, blas_threads=c["threads"])
        else:
            triggers[x] = replace(trig, blas_threads=c["threads"])
    notes = tuple(plan.notes) + tuple(f"on update of {x}: the whole trigger re-evaluates "
                                      f"({t.reevaluate})" for x, t in triggers.items()
                                      if t.reevaluate)
    return replace(plan, triggers=triggers, notes=notes)
