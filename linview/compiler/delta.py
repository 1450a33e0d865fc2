"""Delta derivation: for each dynamic input, a trigger of factored deltas ``ΔV = P·Qᵀ``.

Given an update ``ΔX = U·Vᵀ`` of one input, every view that depends on ``X`` changes by a
low-rank matrix.  We represent that change as a list of :class:`Term` ``(P, Q)`` whose sum
``Σ P Qᵀ`` is the delta, derived by each op's ``delta`` rule in :data:`.ops.OPS` (Nikolic,
*Efficient Incremental Data Analysis*, EPFL 2016, §6.3):

==========================  ==================================================
expression                  ΔE as terms (ΔA = Σ Pa Qaᵀ, ΔB = Σ Pb Qbᵀ)
==========================  ==================================================
``X`` updated by ``U Vᵀ``   ``(U, V)``
``A ± B``                   terms of ΔA, ±terms of ΔB
``s·A`` (s constant)        ``(s·Pa, Qa)``
``Aᵀ``                      ``(Qa, Pa)``
``A·B``                     ``(Pa, Bᵀ Qa)`` and ``(A' Pb, Qb)`` with ``A' = A + ΔA``
``inv(A)``, ``W = inv(A)``  ``(-W Pa K⁻¹, Wᵀ Qa)``, ``K = I + Qaᵀ W Pa`` (Woodbury)
``sum``, ``trace``          through ``1ᵀ A``, ``A 1`` and ``Σ P∘Q``
1x1 expressions             the dense difference ``new - old``
==========================  ==================================================

Using the *new* value ``A'`` for the left factor of a product (rather than adding a
separate ``ΔA·ΔB`` term) is what keeps ranks small: ``B = A·A`` gets rank 2 and ``C = B·B``
rank 4 for a rank-1 ``ΔA`` (thesis Listing 6.4), ``A^16`` by squaring ranks 2, 4, 8, 16.
Terms that share a factor are merged (``P1 Qᵀ + P2 Qᵀ = (P1 + P2) Qᵀ``).

Every term refers only to *old* view values and to the factor blocks of earlier views of
the same trigger, so a trigger computes all deltas first and applies them afterwards.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import sympy as sp

from linview.compiler import ir
from linview.compiler.ir import Node, Op
from linview.compiler.ops import OPS, Term, sum_terms
from linview.compiler.shapes import RANK


class Strategy(enum.Enum):
    """How a view is kept fresh by a trigger."""

    INCR = "incr"  # factored delta P·Qᵀ
    HYBRID = "hybrid"  # delta summed into one dense matrix D (V += D)
    REEVAL = "reeval"  # statement recomputed from the new operand values


STRATEGIES = tuple(s.value for s in Strategy)


@dataclass(frozen=True)
class ViewDelta:
    """How one view (or the updated input itself) changes in a trigger.

    ``terms`` is the derived delta (INCR, HYBRID); ``dense`` is their sum as one expression
    (HYBRID).  For REEVAL, ``new_value`` is the statement evaluated on new operand values.
    ``left``/``right`` are the leaves through which later statements see this delta:
    factor blocks ``U_v (rows×r)``, ``V_v (cols×r)`` for INCR; a dense ``D_v`` and the
    identity for HYBRID and REEVAL.
    """

    name: str
    target: Node
    strategy: Strategy
    terms: tuple[Term, ...]
    left: Node
    right: Node
    new_value: Node | None = None
    dense: Node | None = None
    inverse_of: str | None = None
    reason: str = ""

    @property
    def rank(self) -> sp.Expr:
        return self.left.cols

    @property
    def new(self) -> Node:
        """The new value ``V + ΔV`` as an expression (never materialized by INCR code)."""
        return ir.add(self.target, ir.matmul(self.left, ir.transpose(self.right)))


@dataclass(frozen=True)
class Trigger:
    """``ON UPDATE input BY (U, V)``: the deltas of every affected view, in program order
    (the first one is the input's own)."""

    input: str
    deltas: tuple[ViewDelta, ...]
    #: why the whole trigger re-evaluates the program instead of maintaining the views
    #: (the cost model found every maintenance slower); empty when it maintains them
    reevaluate: str = ""
    #: BLAS threads the trigger runs with (None: all of them)
    blas_threads: int | None = 1

    def delta(self, name: str) -> ViewDelta:
        for d in self.deltas:
            if d.name == name:
                return d
        raise KeyError(name)


def emitted_exprs(vd: ViewDelta) -> list[Node]:
    """The expressions a backend evaluates for ``vd``: the factor expressions (INCR), the
    dense delta (HYBRID) or the new value (REEVAL)."""
    if vd.strategy is Strategy.INCR:
        return [t.P for t in vd.terms] + [t.Q for t in vd.terms]
    if vd.strategy is Strategy.HYBRID:
        return [vd.dense] if vd.dense is not None else []
    return [vd.new_value] if vd.new_value is not None else []


class NotMaintainable(Exception):
    """The expression has no low-rank delta rule (``.*``, ``./`` on changing matrices...)."""


def _new(n: Node, ts: list[Term]) -> Node:
    return n if not ts else ir.add(n, sum_terms(ts))


def derive(expr: Node, changed: Mapping[str, ViewDelta]) -> list[Term]:
    """The terms of ``Δexpr`` given the deltas of the changed leaves."""
    memo: dict[int, list[Term]] = {}
    for n in expr.walk():
        if n.op in ir.LEAVES:
            vd = changed.get(n.attr) if n.op in (Op.VIEW, Op.INPUT) else None
            memo[id(n)] = [Term(vd.left, vd.right)] if vd is not None else []
            continue
        d = [memo[id(c)] for c in n.children]
        if not any(d):
            memo[id(n)] = []
            continue
        new = [_new(c, dc) for c, dc in zip(n.children, d, strict=True)]
        rule = OPS[n.op].delta
        if rule is not None:
            memo[id(n)] = rule(n, d, new)
        elif n.is_scalar:  # a 1x1 expression: its delta is simply new - old
            memo[id(n)] = [Term(ir.sub(n.replace(children=tuple(new)), n), ir.const(1))]
        else:
            raise NotMaintainable(f"'{n.op.value}' of changing matrices has no low-rank delta")
    return memo[id(expr)]


def merge_common_factors(terms: list[Term]) -> list[Term]:
    """Merge terms with the same right factor, then the same left factor (§6.3.3)."""
    def merge(ts: list[Term], key: Callable, join: Callable) -> list[Term]:
        groups: dict[int, list[Term]] = {}
        order: list[int] = []
        for t in ts:
            k = id(key(t))
            if k not in groups:
                groups[k] = []
                order.append(k)
            groups[k].append(t)
        return [join(groups[k]) if len(groups[k]) > 1 else groups[k][0] for k in order]

    def join_p(ts):
        p = ts[0].P
        for t in ts[1:]:
            p = ir.add(p, t.P)
        return Term(p, ts[0].Q)

    def unsigned(x: Node) -> Node:
        return x.children[0] if x.op is Op.NEG else x

    def join_q(ts):  # (-X) Aᵀ + X Bᵀ = X (B - A)ᵀ: the sign goes back to the right factor
        q = None
        for t in ts:
            qt = ir.neg(t.Q) if t.P.op is Op.NEG else t.Q
            q = qt if q is None else ir.add(q, qt)
        return Term(unsigned(ts[0].P), q)

    def strip(t: Term) -> Term:  # move signs to the left factor so Q's can match
        return Term(ir.neg(t.P), t.Q.children[0]) if t.Q.op is Op.NEG else t

    terms = [strip(t) for t in terms]
    return merge(merge(terms, lambda t: t.Q, join_p), lambda t: unsigned(t.P), join_q)


def woodbury_terms(w: Node, arg: ViewDelta) -> list[Term]:
    """Δ inv(A) for ΔA = P Qᵀ and W = inv(A): ``-W P (I + Qᵀ W P)⁻¹ Qᵀ W``.

    The r×r core ``K = I + Qᵀ W P`` is inverted in the trigger (guarded by a condition
    estimate); for r = 1 this is the Sherman–Morrison formula.
    """
    P, Q = arg.left, arg.right
    WP = ir.matmul(w, P)
    core = ir.add(ir.eye(P.cols), ir.matmul(ir.transpose(Q), WP))
    return [Term(ir.neg(ir.matmul(WP, ir.node(Op.INV, core))),
                 ir.matmul(ir.transpose(w), Q))]


# ------------------------------------------------------------------ triggers
#: ``choose(statement, terms or None, inverse_of, changed leaf names) -> Strategy``
Chooser = Callable[[ir.Statement, list[Term] | None, str, set], Strategy]


@dataclass
class TriggerOptions:
    """``strategies`` forces a strategy per view name; ``default`` for all views;
    ``choose`` decides the rest (the cost model plugs in here)."""

    strategies: dict[str, Strategy] = field(default_factory=dict)
    default: Strategy | None = None
    choose: Chooser | None = None


def build_trigger(program: ir.Program, input_name: str,
                  options: TriggerOptions | None = None) -> Trigger:
    """Derive the trigger for updates of ``input_name`` (thesis Algorithm 6.3)."""
    options = options or TriggerOptions()
    decl = program.input(input_name)
    rank = RANK
    first = ViewDelta(
        name=input_name, target=decl.ref, strategy=Strategy.INCR,
        terms=(Term(ir.factor("U", (decl.shape[0], rank)),
                    ir.factor("V", (decl.shape[1], rank))),),
        left=ir.factor("U", (decl.shape[0], rank)), right=ir.factor("V", (decl.shape[1], rank)))
    changed: dict[str, ViewDelta] = {input_name: first}
    out = [first]
    for st in program.statements:
        used = {leaf.attr for leaf in ir.leaves(st.expr, Op.VIEW, Op.INPUT)}
        if not used & changed.keys():
            continue
        vd = _statement_delta(st, changed, options)
        changed[st.name] = vd
        out.append(vd)
    return Trigger(input_name, tuple(out))


def _statement_delta(st: ir.Statement, changed: dict[str, ViewDelta],
                     options: TriggerOptions) -> ViewDelta:
    target = st.ref
    inverse_of = None
    reason = ""
    terms: list[Term] | None
    try:
        if st.expr.op is Op.INV:
            arg = st.expr.children[0]
            inverse_of = arg.attr
            terms = woodbury_terms(target, changed[arg.attr])
        else:
            terms = merge_common_factors(derive(st.expr, changed))
    except NotMaintainable as e:
        terms, reason = None, str(e)
    forced = options.strategies.get(st.name, options.default)
    if terms is None:
        strategy = Strategy.REEVAL
    elif forced is not None:
        strategy = forced
    elif options.choose is not None:
        strategy = options.choose(st, terms, inverse_of or "", set(changed))
    else:
        strategy = Strategy.HYBRID if st.expr.is_scalar else Strategy.INCR
    if st.expr.is_scalar and strategy is Strategy.INCR:
        strategy = Strategy.HYBRID  # 1x1 deltas are never kept factored
    if strategy is Strategy.INCR:
        rank = sp.Add(*[t.rank for t in terms])
        return ViewDelta(st.name, target, strategy, tuple(terms),
                         ir.factor(f"U_{st.name}", (target.rows, rank)),
                         ir.factor(f"V_{st.name}", (target.cols, rank)),
                         inverse_of=inverse_of, reason=reason)
    left = ir.factor(f"D_{st.name}", target.shape)
    right = ir.eye(target.cols)
    if strategy is Strategy.HYBRID:
        return ViewDelta(st.name, target, strategy, tuple(terms), left, right,
                         dense=sum_terms(terms), inverse_of=inverse_of, reason=reason)
    new_value = ir.map_leaves(
        st.expr, lambda leaf: changed[leaf.attr].new
        if leaf.op in (Op.VIEW, Op.INPUT) and leaf.attr in changed else None)
    return ViewDelta(st.name, target, Strategy.REEVAL, (), left, right, new_value=new_value,
                     inverse_of=inverse_of,
                     reason=reason or "cheapest by the cost model")
