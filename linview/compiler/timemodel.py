"""The seconds model: predicted time of re-evaluation and of each trigger strategy.

Every operation is timed by a roofline over the calibrated rates (:mod:`.calibrate`):
``max(flops / gemm rate, bytes / streaming rate) + call overhead``.  Each trigger is
priced on one BLAS thread and on all of them (the one-thread and all-thread rates, both
measured: nothing assumes that one core saturates memory; the runtime's one-pass kernel
runs on the threads the trigger holds, see :func:`fused_seconds`), and
:func:`trigger_choice` takes the better.  Flops and bytes per operation are
those of :func:`.counts.node_counts`, which knows that a product ``A·U`` with a one-hot
update factor ``U`` (a row update, the planning assumption, see :data:`ONE_HOT`) reads only
``k`` columns of ``A``, as the runtime's ``dot`` does, and that applying a row update to an
input touches only its rows.

Decisions made here (``auto`` must never be slower than re-evaluation):

* :func:`choose_threads` and :func:`decide_triggers`: for each trigger, the maintenance it
  would run (per view the chooser's strategy) against re-evaluating the program; when
  maintenance is predicted slower the whole trigger re-evaluates (``Trigger.reevaluate``);
* :func:`trigger_scores`: what ``--model auto`` compares, per trigger the cheaper of the two
  (maintenance counted 1.25× slower: the model must not make ``auto`` lose).
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

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

#: a trigger uses every BLAS thread only when that is predicted this much faster
THREADS_GAIN = 1.25
#: a trigger maintains its views only when that is predicted this much faster than
#: re-evaluating the program: the model's error on thin passes is of this order, and
#: ``auto`` must not lose to the program as written (general_form n=2000, p=1: maintaining
#: predicted 10.8 ms, measured 18.6, against 12.4 ms to re-evaluate)
MAINTAIN_GAIN = 1.25
#: ``--model auto`` rewrites the program (an iterative model) only when that is predicted
#: this much faster than the program as written: the rewritten program maintains more and
#: larger views, whose passes the model prices optimistically (pagerank n=4000: the skip
#: model predicted 25 ms per update, measured 32.8 ms, against 26 ms to re-run the 10 steps)
MODEL_GAIN = 1.25


#: the NumPy runtime's kernels (``linview.backends.numpy.kernels``), mirrored here: the
#: products of a view of at least ``WIDE_MIN`` elements at one trigger level with at most
#: ``ONE_PASS_MAX`` columns in all run as one pass over it, a wider block of
#: one kind as one ``dgemm`` on every core of an idle machine, a single column, or a
#: block of at most ``GEMV_MAX`` columns outside a pass, as matrix-vector products
#: (tests/test_timemodel.py checks that the two agree)
WIDE_MIN = 1 << 20
WIDE_RANK = 8
GEMV_MAX = 2
ONE_PASS_MAX = 16
#: the rank at which a large view's pending low-rank terms are added to it
FOLD_RANK = 64
#: the one-pass kernel's flops run at this share of ``dgemm``'s rate, beyond the pass over
#: the view (measured n = 4000, one thread: 3 columns 0.8 ms, 2+2 3.5, 4+4 10 ms beyond it;
#: on two threads the pass and the flops both about halve)
ONE_PASS_FLOP_SHARE = 0.5
#: a block of at most this many columns is thin: its product is bound by the passes over
#: the view (``thin_bytes``), not by flops
THIN_MAX = 64


class Roof(NamedTuple):
    """The rates one operation runs at: a roofline ``max(flops / gemm, bytes / stream)``
    plus a call, and the rate of thin products over a large view."""

    gemm: float
    stream: float
    thin: float
    call: float

    def seconds(self, fl, by) -> float:
        return max(float(fl) / self.gemm, float(by) / self.stream) + self.call


def _rates(r: Rates, one_thread: bool) -> Roof:
    if one_thread:  # a trigger's large thin dgemm still widens to every core (kernels.wide)
        return Roof(r.gemm1_flops, r.stream1_bytes, r.thin_bytes, r.call_s)
    return Roof(r.gemm_flops, r.stream_bytes, r.thin_bytes, r.call_s)


def thin_seconds(rows: int, cols: int, k: int, roof: Roof) -> float:
    """``A·B`` (or ``Aᵀ·B``) for a large ``rows×cols`` view A and a block of ``k`` columns,
    as the runtime runs it: ``k`` matrix-vector passes, or one packing ``dgemm``."""
    if k <= GEMV_MAX:
        return k * roof.seconds(2 * rows * cols, 8 * (rows * cols + rows + cols))
    return max(2 * rows * cols * k / roof.gemm, 8 * rows * cols / roof.thin) + roof.call


def one_pass_seconds(rows: int, cols: int, k: int, roof: Roof) -> float:
    """The products of a large ``rows×cols`` view with ``k`` columns in all (``A·B`` and
    ``Aᵀ·C``), as the runtime's ``pass_dot`` runs them: one pass over the view, the
    columns multiplied while a few of its columns are in cache."""
    return (8 * rows * cols / roof.stream
            + k * 2 * rows * cols / (roof.gemm * ONE_PASS_FLOP_SHARE) + roof.call)


def thin_product(m: Node, size, one_hot=ONE_HOT) -> tuple | None:
    """``((view, "N"|"T"), rows, cols, k, factor)`` when ``m`` is a large view (or its
    transpose) times a thin block that is not a one-hot update factor, else None;
    ``factor`` names the block when it is a factor leaf (what the runtime fuses)."""
    if m.op is not Op.MUL:
        return None
    a, b = m.children
    kind = "N"
    if a.op is Op.T:
        a, kind = a.children[0], "T"
    if a.op not in (Op.VIEW, Op.INPUT) or (b.op is Op.FACTOR and b.attr in one_hot):
        return None
    try:
        rows, cols, k = (float(size(e)) for e in (a.rows, a.cols, b.cols))
    except TypeError:  # symbolic sizes: no decision here
        return None
    if rows * cols < WIDE_MIN or not 1 <= k <= THIN_MAX:
        return None
    return (a.attr, kind), rows, cols, k, (b.attr if b.op is Op.FACTOR else None)


def expr_seconds(n: Node, size, rt3: Roof, seen: set[int], one_hot=ONE_HOT,
                 reads: dict | None = None, levels: dict | None = None) -> float:
    """Seconds to evaluate ``n`` (operations in ``seen`` are already computed).  Thin
    products of a large view with a factor block are collected in ``reads`` (``{(view,
    kind, level): [rows, cols, k]}``) when it is given, for the caller to charge one fused
    pass per view, kind and level, as the runtime's ``fused_dot`` runs the products that
    are ready together (a block's ``level`` in ``levels``: see :func:`factor_level`);
    else each is charged by :func:`thin_seconds`."""
    t = 0.0
    for m in n.walk():
        if id(m) in seen or m.op in ir.LEAVES:
            continue
        seen.add(id(m))
        if m.op is Op.T:  # a transpose is a view of its operand in NumPy
            continue
        thin = thin_product(m, size, one_hot)
        if thin is None:
            t += rt3.seconds(*node_counts(m, size, one_hot))
        elif reads is not None and thin[4] is not None:
            (view, kind), rows, cols, k, factor = thin
            key = (view, kind, (levels or {}).get(factor, 0))
            reads.setdefault(key, [rows, cols, 0])[2] += k
        else:
            t += thin_seconds(*thin[1:4], rt3)
    return t


def factor_level(nodes, levels: dict, size, one_hot=ONE_HOT) -> int:
    """When the factor blocks computed from ``nodes`` are ready: after the thin products
    they need (a product of a block of level L runs in the fused pass of level L), so the
    blocks of a delta whose products read blocks of level L are of level L + 1; the
    update's own factors are of level 0.  Products of one level are fused."""
    level = 0
    for n in nodes:
        for m in n.walk():
            if m.op is Op.FACTOR:
                level = max(level, levels.get(m.attr, 0))
            thin = thin_product(m, size, one_hot)
            if thin is not None and thin[4] is not None:
                level = max(level, levels.get(thin[4], 0) + 1)
    return level


def fused_seconds(reads: dict, rt3: Roof) -> float:
    """The fused products of each view and level (:func:`expr_seconds`'s ``reads``, by view,
    kind and level): one pass for both kinds together when they have two to
    ``ONE_PASS_MAX`` columns in all, split over the trigger's threads (its rates ``rt3``),
    as the runtime's ``fused_dot`` runs it; else one product per kind."""
    levels: dict = {}
    for (view, _kind, level), (rows, cols, k) in reads.items():
        levels.setdefault((view, level), []).append((rows, cols, k))
    t = 0.0
    for parts in levels.values():
        width = sum(k for _, _, k in parts)
        rows, cols, _ = parts[0]
        if not 1 < width <= ONE_PASS_MAX:
            t += sum(thin_seconds(r, c, k, rt3) for r, c, k in parts)
        else:
            t += one_pass_seconds(rows, cols, width, rt3)
    return t


def strategy_seconds(st: ir.Statement, terms, sizes, changed=frozenset(),
                     r: Rates | None = None, one_thread: bool = True,
                     one_hot=ONE_HOT, reads: dict | None = None,
                     chosen: Strategy | None = None, levels: dict | None = None) -> dict:
    """``{strategy: seconds}`` of keeping ``st`` fresh inside a trigger (see
    :func:`linview.compiler.cost.strategy_counts` for what each strategy pays).  The
    ``chosen`` strategy's thin products of large views go to ``reads`` (see
    :func:`expr_seconds`) instead of being charged."""
    r = r or rates()
    rt3 = _rates(r, one_thread)
    size = sizes.value
    rows, cols = size(st.expr.rows), size(st.expr.cols)

    def fused(strategy):
        return reads if strategy is chosen else None

    planned = passes.simplify(with_new_operands(st.expr, changed), passes.Context(sizes))
    out = {Strategy.REEVAL: expr_seconds(planned, size, rt3, set(), one_hot,
                                         fused(Strategy.REEVAL), levels)
           + rt3.seconds(0, 16 * rows * cols)}
    if terms is None:
        return out
    seen: set[int] = set()
    t = sum(expr_seconds(n, size, rt3, seen, one_hot, fused(Strategy.INCR), levels)
            for n in plan_terms(terms, sizes))
    rank = sum((size(x.rank) for x in terms), 0)
    if rows * cols < WIDE_MIN:  # in place, on the trigger's threads
        out[Strategy.INCR] = t + rt3.seconds(2 * rows * cols * rank, 16 * rows * cols)
    else:  # pending terms, folded past FOLD_RANK in one dgemm on every core: per update,
        # its flops and its share of the fold's pass (backends/numpy/lowrank.py)
        out[Strategy.INCR] = t + _rates(r, False).seconds(
            2 * rows * cols * rank, 16 * rows * cols * min(1.0, rank / FOLD_RANK))
    dense = passes.simplify(sum_terms(list(terms)), passes.Context(sizes))
    out[Strategy.HYBRID] = expr_seconds(dense, size, rt3, set(), one_hot,
                                        fused(Strategy.HYBRID), levels) \
        + rt3.seconds(rows * cols, 24 * rows * cols)
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
    a :func:`solvable` inverse costs its LU factorisation (2n³/3), its product a solve.
    Each statement is priced as re-evaluation computes it (:func:`.passes.evaluation_order`:
    transposes pushed down, so ``(A A)ᵀ p`` is two matrix-vector products, not a product)."""
    r = r or rates()
    seen: set[int] = set()
    rt3 = _rates(r, one_thread)
    solved = solvable(program)
    t = 0.0
    for st, (_, expr) in zip(program.statements, passes.evaluation_order(program, sizes),
                             strict=True):
        if st.name in solved:
            n = sizes.value(st.expr.rows)
            seen |= {id(st.expr)}
            t += expr_seconds(st.expr.children[0], sizes.value, rt3, seen, frozenset()) \
                + rt3.seconds(2 * n ** 3 / 3, 16 * n * n)
            continue
        t += expr_seconds(expr, sizes.value, rt3, seen, frozenset())
    return t


def input_update_seconds(program: ir.Program, x: str, sizes, r: Rates, one_thread: bool,
                         one_hot=ONE_HOT) -> float:
    """``X += U Vᵀ`` in place: on the touched rows (a one-hot U), else a pass over X."""
    d = program.input(x)
    rows, cols, k = (sizes.value(d.shape[0]), sizes.value(d.shape[1]), sizes.rank)
    roof = _rates(r, one_thread)
    if "U" in one_hot:
        return roof.seconds(2 * k * cols * k, 16 * k * cols)
    return roof.seconds(2 * rows * cols * k, 16 * rows * cols)


#: small calls a trigger makes besides its formulas: validating the update, entering the
#: BLAS thread limit, dispatch; per delta part, the phase-1 guard's checks
TRIGGER_CALLS = 10
CHECK_CALLS = 4


def evaluation_overhead(program: ir.Program, sizes, r: Rates, one_thread: bool) -> float:
    """What re-evaluation pays per view besides its formula: the finiteness check and the
    Fortran-order copy (``TriggerModule._reevaluate``)."""
    roof = _rates(r, one_thread)
    s, call = roof.stream, roof.call
    t = TRIGGER_CALLS * call
    for st in program.statements:
        t += CHECK_CALLS * call + 8 * sizes.value(st.expr.rows) * sizes.value(st.expr.cols) / s
    return t


def maintenance_seconds(program: ir.Program, x: str, trigger_options, sizes,
                        r: Rates | None = None, one_thread: bool = True) -> float:
    """Seconds of the maintaining trigger of ``x`` (each view by its chosen strategy; the
    thin products of one large view fused into one pass per kind, as the NumPy runtime's
    ``fused_dot`` runs them; a probe pass per maintained inverse)."""
    r = r or rates()
    raw = build_trigger(program, x, trigger_options)
    roof = _rates(r, one_thread)
    s, call = roof.stream, roof.call
    t = input_update_seconds(program, x, sizes, r, one_thread) + TRIGGER_CALLS * call
    changed = {x}
    probed = []  # maintained inverses and their sizes
    reads: dict = {}  # the thin products of each large view, fused as the runtime does
    levels: dict = {}  # when each factor block is ready (factor_level)
    for vd in raw.deltas[1:]:
        st = program.statement(vd.name)
        t += strategy_seconds(st, list(vd.terms) if vd.terms else None, sizes, changed, r,
                              one_thread, reads=reads, chosen=vd.strategy,
                              levels=levels)[vd.strategy]
        # as planned (distributed: (A + U Vᵀ) D becomes A D + U (Vᵀ D)), the products show
        level = factor_level(plan_terms(list(vd.terms), sizes), levels, sizes.value) \
            if vd.terms else 1 + max(levels.values(), default=0)
        levels[vd.left.attr] = levels[vd.right.attr] = level
        changed.add(vd.name)
        if vd.strategy is Strategy.INCR and st.expr.op is Op.INV:
            probed.append((vd.name, sizes.value(st.expr.rows)))
            t += 2 * CHECK_CALLS * call
        # the phase-1 guard reads every part of the delta (rt.check_deltas)
        rows, cols = sizes.value(st.expr.rows), sizes.value(st.expr.cols)
        if vd.strategy is Strategy.INCR:
            k = sum((sizes.value(term.rank) for term in vd.terms), 0)
            t += 2 * CHECK_CALLS * call + 8 * (rows + cols) * k / s
        else:
            t += CHECK_CALLS * call + 8 * rows * cols / s
    for w, n in probed:  # the probe's vector: one more column of W's first fused pass
        first = min((key for key in reads if key[0] == w), key=lambda k: k[2], default=None)
        if first is not None:
            reads[first][2] += 1
        else:  # or a matrix-vector pass of its own
            t += roof.seconds(2 * n * n, 8 * n * n)
    return t + fused_seconds(reads, roof)


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
    def score(c):
        return c[0] * (THREADS_GAIN if c[2] is None else 1.0) \
            * (MAINTAIN_GAIN if c[1] == "maintain" else 1.0)

    best = min(cands, key=score)
    return {"maintain_s": min(c[0] for c in cands if c[1] == "maintain"),
            "reeval_s": min(c[0] for c in cands if c[1] == "reeval"),
            "choice": best[1], "threads": best[2], "seconds": best[0],
            "score": score(best)}


def trigger_scores(program: ir.Program, trigger_options, sizes,
                   r: Rates | None = None) -> dict[str, float]:
    """Per dynamic input, what ``--model auto`` compares: the cheaper of maintaining and
    re-evaluating its trigger, with the margins the choice itself applies."""
    return {x: trigger_choice(program, x, trigger_options, sizes, r)["score"]
            for x in program.dynamic}


def model_seconds(program: ir.Program, trigger_options, sizes, r: Rates | None = None) -> float:
    """The total of :func:`trigger_scores`."""
    return sum(trigger_scores(program, trigger_options, sizes, r).values())


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
