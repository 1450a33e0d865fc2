"""The seconds model: predicted time of re-evaluation and of each trigger strategy.

Every operation is timed by a roofline over the calibrated rates (:mod:`linview.calibrate`):
``max(flops / gemm rate, bytes / streaming rate) + call overhead``, with the one-thread
rates for a maintaining trigger (it runs with :data:`linview.runtime.TRIGGER_THREADS` BLAS
threads) and the all-thread rates for re-evaluation.  Flops and bytes per operation are
those of :func:`node_counts`, which knows that a product ``A·U`` with a one-hot update factor
``U`` (a row update, the planning assumption, see :data:`ONE_HOT`) reads only ``k`` columns
of ``A``, as :func:`linview.runtime.dot` does, and that applying a row update to an input
touches only its rows.

Decisions made here (DESIGN.md §4: ``auto`` must never be slower than re-evaluation):

* :func:`choose_threads` and :func:`decide_triggers`: for each trigger, the maintenance it
  would run (per view the chooser's strategy) against re-evaluating the program; when
  maintenance is predicted slower the whole trigger re-evaluates (``Trigger.reevaluate``);
* :func:`model_seconds`: what ``--model auto`` minimises, per trigger the cheaper of the two.
"""

from __future__ import annotations

from dataclasses import replace

from linview import ir
from linview.calibrate import Rates, rates
from linview.ir import Node, Op

#: update factors assumed one-hot when planning: ``U`` of a row update (what ``bench`` and
#: the update helpers for rows and observations produce)
ONE_HOT = frozenset({"U"})
#: a trigger uses every BLAS thread only when that is predicted this much faster
THREADS_GAIN = 1.25


def _one_hot(n: Node, one_hot) -> bool:
    return n.op is Op.FACTOR and n.attr in one_hot


def _leaf(n: Node) -> bool:
    n = n.children[0] if n.op is Op.T else n
    return n.op in (Op.VIEW, Op.INPUT)


def node_counts(m: Node, size, one_hot=ONE_HOT) -> tuple[object, object]:
    """``(flops, bytes)`` of the operation at ``m`` alone (its children already computed).
    A product of a view with a one-hot update factor reads ``k`` of its columns."""
    r, c = size(m.rows), size(m.cols)
    ins = [size(x.rows) * size(x.cols) for x in m.children
           if x.op not in ir.CONSTANT_LEAVES]
    if m.op is Op.MUL:
        a, b = m.children
        if _one_hot(b, one_hot) and _leaf(a):
            k = size(b.cols)
            return 2 * size(a.rows) * k * k, 8 * (size(a.rows) * k + size(b.rows) * k + r * c)
        return 2 * size(a.rows) * size(a.cols) * c, 8 * (sum(ins) + r * c)
    if m.op is Op.INV:
        fl = 2 * r ** 3
    elif m.op is Op.T or m.op is Op.CONCAT:
        fl = 0
    elif m.op in (Op.SUM, Op.TRACE):
        fl = ins[0] if ins else 0
    else:
        fl = r * c
    return fl, 8 * (sum(ins) + r * c)


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
    :func:`linview.cost.strategy_counts` for what each strategy pays)."""
    from linview.cost import _plan_terms
    from linview.delta import Strategy, _sum_terms
    from linview.optimize import ChainPlanner, distribute, push_transposes

    r = r or rates()
    g, s, call = rt3 = _rates(r, one_thread)
    size = sizes.value
    rows, cols = size(st.expr.rows), size(st.expr.cols)

    def new_value(leaf: Node) -> Node | None:
        if leaf.op not in (Op.VIEW, Op.INPUT) or leaf.attr not in changed:
            return None
        u = ir.factor(f"dU_{leaf.attr}", (leaf.rows, 1))
        v = ir.factor(f"dV_{leaf.attr}", (leaf.cols, 1))
        return ir.add(leaf, ir.matmul(u, ir.transpose(v)))

    new = ir.map_leaves(st.expr, new_value)
    planned = ChainPlanner(sizes).order(distribute(push_transposes(new)))
    out = {Strategy.REEVAL: expr_seconds(planned, size, rt3, set(), one_hot)
           + _roof(0, 16 * rows * cols, g, s, call)}
    if terms is None:
        return out
    seen: set[int] = set()
    t = sum(expr_seconds(n, size, rt3, seen, one_hot) for n in _plan_terms(terms, sizes))
    rank = sum((size(x.rank) for x in terms), 0)
    out[Strategy.INCR] = t + _roof(2 * rows * cols * rank, 16 * rows * cols, g, s, call)
    dense = ChainPlanner(sizes).order(distribute(push_transposes(_sum_terms(list(terms)))))
    out[Strategy.HYBRID] = expr_seconds(dense, size, rt3, set(), one_hot) \
        + _roof(rows * cols, 24 * rows * cols, g, s, call)
    return out


def solvable(program: ir.Program) -> frozenset[str]:
    """Inverse views that re-evaluation replaces by a solve when no trigger reads them
    (:func:`linview.plan.solved_inverses`): not outputs, read only as ``W·R``."""
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
    from linview.optimize import ChainPlanner

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
    from linview.delta import Strategy, build_trigger

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
