"""Optimisation passes.

Program passes (``Program -> Program``): common views (CSE over statements: interning makes
equal expressions identical objects), copy propagation and dead-view elimination.

Trigger passes (on the factor expressions of a :class:`~linview.compiler.delta.Trigger`):

* ``push_transposes``: ``(AB)ᵀ = BᵀAᵀ`` etc., down to the leaves; ``Sᵀ = S`` for views
  known to be symmetric (``XᵀX``, inverses of symmetric views, ...);
* ``distribute``: a sum multiplied by a thin factor is distributed, so ``(A + U Vᵀ) P``
  becomes ``A P + U (Vᵀ P)`` and no n×n sum is ever formed;
* ``order_chains``: each product chain is re-associated by the matrix-chain dynamic
  program on estimated flops (sizes from ``dims``; unknown sizes are taken as large and
  update ranks as small), preferring subchains already computed elsewhere in the same
  trigger so they are shared.  With thin factors at either end this never materializes an
  n×n product of thin factors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import sympy as sp

from linview.compiler import ir
from linview.compiler.delta import Strategy, Term, Trigger, ViewDelta
from linview.compiler.ir import Node, Op

DEFAULT_SIZE = 1000  # an unbound size is assumed large ...
DEFAULT_RANK = 1  # ... and an update's rank small, when planning


# ------------------------------------------------------------------ size estimates
@dataclass
class Sizes:
    """Numeric values for planning: bound dims, else :data:`DEFAULT_SIZE`; rank ``k``."""

    bindings: Mapping[str, int] = field(default_factory=dict)
    rank: int = DEFAULT_RANK

    def value(self, e) -> float:
        e = sp.sympify(e)
        if e.is_Number:
            return float(e)
        sub = {s: self.bindings.get(s.name, self.rank if s.name == "k" else DEFAULT_SIZE)
               for s in e.free_symbols}
        return float(e.subs(sub))

    def shape(self, n: Node) -> tuple[float, float]:
        return self.value(n.rows), self.value(n.cols)


# ------------------------------------------------------------------ program passes
def propagate_copies(program: ir.Program) -> ir.Program:
    """Statements that merely copy a leaf, or repeat an earlier statement's expression,
    become aliases of it."""
    alias: dict[str, Node] = {}
    seen: dict[int, Node] = {}
    kept: list[ir.Statement] = []

    def fix(n: Node) -> Node:
        return ir.map_leaves(n, lambda leaf: alias.get(leaf.attr)
                             if leaf.op is Op.VIEW else None)

    for st in program.statements:
        expr = fix(st.expr)
        if expr.op in ir.LEAVES:
            alias[st.name] = expr
        elif id(expr) in seen:
            alias[st.name] = seen[id(expr)]
        else:
            st = replace(st, expr=expr)
            seen[id(expr)] = st.ref
            kept.append(st)
    outputs = [(k, fix(v)) for k, v in program.outputs]
    return program.with_statements(kept, outputs)


def eliminate_dead_views(program: ir.Program) -> ir.Program:
    """Drop statements that no output depends on."""
    live: set[str] = set()
    for _, n in program.outputs:
        live |= {leaf.attr for leaf in ir.leaves(n, Op.VIEW)}
    kept = []
    for st in reversed(program.statements):
        if st.name in live:
            kept.append(st)
            live |= {leaf.attr for leaf in ir.leaves(st.expr, Op.VIEW)}
    return program.with_statements(reversed(kept))


def materialize_products(program: ir.Program, sizes: Sizes) -> ir.Program:
    """Give long product chains auxiliary views for their inner products.

    A chain of three or more factors is ordered by the matrix-chain dynamic program on
    evaluation cost; every inner product of that order becomes a view of its own.  In
    ``beta = inv(X'X) X' Y`` this materializes ``X'Y``, so a trigger multiplies the delta
    of the inverse by an n×p view instead of recomputing ``X'Y`` from X and Y each time.
    """
    out: list[ir.Statement] = []
    taken = {d.name for d in program.inputs} | {s.name for s in program.statements}

    def fresh(base: str) -> str:
        i = 1
        while f"{base}_p{i}" in taken:
            i += 1
        taken.add(f"{base}_p{i}")
        return f"{base}_p{i}"

    def lift(st: ir.Statement, t: Node, factors: set[int], root: bool) -> Node:
        """Views for the inner products of the ordered chain ``t``."""
        if t.op is not Op.MUL or id(t) in factors:
            return t
        m = ir.matmul(lift(st, t.children[0], factors, False),
                      lift(st, t.children[1], factors, False))
        if root:
            return m
        name = fresh(st.name)
        out.append(ir.Statement(name, m, st.origin, st.line))
        return ir.view(name, m.shape)

    def process(st: ir.Statement, n: Node, planner: ChainPlanner) -> Node:
        if n.op is Op.MUL:
            fs = [process(st, f, planner) for f in _chain(n)]
            chain = fs[0]
            for f in fs[1:]:
                chain = ir.matmul(chain, f)
            if len(fs) < 3:
                return chain
            return lift(st, planner.order(chain), {id(f) for f in fs}, True)
        if n.op in ir.LEAVES:
            return n
        return n.replace(children=tuple(process(st, c, planner) for c in n.children))

    for st in program.statements:
        out.append(replace(st, expr=process(st, st.expr, ChainPlanner(sizes))))
    return program.with_statements(out)


def optimize_program(program: ir.Program, sizes: Sizes | None = None) -> ir.Program:
    if sizes is not None:
        program = materialize_products(program, sizes)
    return eliminate_dead_views(propagate_copies(program))


# ------------------------------------------------------------------ symmetry
def _chain(n: Node) -> list[Node]:
    if n.op is Op.MUL:
        return _chain(n.children[0]) + _chain(n.children[1])
    return [n]


def is_symmetric(n: Node, symmetric: set[str]) -> bool:
    """A sufficient syntactic test: palindromic chains ``Fᵀ S F``, sums, inverses..."""
    op = n.op
    if op in (Op.VIEW, Op.INPUT):
        return n.attr in symmetric
    if op is Op.EYE:
        return n.rows == n.cols
    if op in (Op.CONST, Op.ZEROS, Op.ONES):
        return n.rows == n.cols
    if op in (Op.ADD, Op.SUB, Op.EMUL, Op.EDIV):
        return all(is_symmetric(c, symmetric) for c in n.children)
    if op in (Op.NEG, Op.INV):
        return is_symmetric(n.children[0], symmetric)
    if op is Op.SCALE:
        return is_symmetric(n.children[1], symmetric)
    if op is Op.MUL:
        fs = _chain(n)
        half = len(fs) // 2
        if any(ir.transpose(fs[i]) is not fs[-1 - i] for i in range(half)):
            return False
        return len(fs) % 2 == 0 or is_symmetric(fs[half], symmetric)
    return False


def symmetric_views(program: ir.Program) -> set[str]:
    out: set[str] = set()
    for st in program.statements:
        if is_symmetric(st.expr, out):
            out.add(st.name)
    return out


# ------------------------------------------------------------------ trigger passes
def push_transposes(n: Node, symmetric: set[str] = frozenset()) -> Node:
    def rule(m: Node) -> Node:
        if m.op is not Op.T:
            return m
        a = m.children[0]
        if a.op in (Op.VIEW, Op.INPUT) and a.attr in symmetric:
            return a
        if a.op is Op.MUL:
            return ir.matmul(rule(ir.transpose(a.children[1])), rule(ir.transpose(a.children[0])))
        if a.op in (Op.ADD, Op.SUB):
            return ir.node(a.op, *(rule(ir.transpose(c)) for c in a.children))
        if a.op is Op.NEG:
            return ir.neg(rule(ir.transpose(a.children[0])))
        if a.op is Op.SCALE:
            return ir.scale(a.children[0], rule(ir.transpose(a.children[1])))
        if a.op is Op.INV:
            return ir.node(Op.INV, rule(ir.transpose(a.children[0])))
        if a.op is Op.CONCAT and all(k == a.attr[0] for k in a.attr):
            per_row = a.attr[0]
            rows = [a.children[i:i + per_row] for i in range(0, len(a.children), per_row)]
            cols = [[rule(ir.transpose(r[j])) for r in rows] for j in range(per_row)]
            return ir.Node(Op.CONCAT, tuple(x for c in cols for x in c),
                           (len(rows),) * per_row)
        return m
    return ir.rebuild(n, rule)


def has_factor(n: Node, memo: dict[int, bool]) -> bool:
    hit = memo.get(id(n))
    if hit is None:
        hit = n.op is Op.FACTOR or any(has_factor(c, memo) for c in n.children)
        memo[id(n)] = hit
    return hit


def distribute(n: Node) -> Node:
    """Distribute products over sums, negations and scalings next to a thin factor."""
    memo: dict[int, bool] = {}

    def mul(a: Node, b: Node) -> Node:
        if has_factor(b, memo) or has_factor(a, memo):
            for left, x, y in ((True, a, b), (False, b, a)):
                if x.op in (Op.ADD, Op.SUB) and has_factor(y, memo):
                    p, q = (mul(c, y) if left else mul(y, c) for c in x.children)
                    return ir.add(p, q) if x.op is Op.ADD else ir.sub(p, q)
                if x.op is Op.NEG:
                    return ir.neg(mul(x.children[0], y) if left else mul(y, x.children[0]))
                if x.op is Op.SCALE and not x.is_scalar:
                    s, inner = x.children
                    return ir.scale(s, mul(inner, y) if left else mul(y, inner))
        return ir.matmul(a, b)

    return ir.rebuild(n, lambda m: mul(*m.children) if m.op is Op.MUL else m)


class ChainPlanner:
    """Matrix-chain ordering shared by all expressions of one trigger."""

    def __init__(self, sizes: Sizes):
        self.sizes = sizes
        self.built: dict[tuple[int, ...], Node] = {}

    def order(self, n: Node) -> Node:
        """``n`` with every maximal product chain re-associated."""
        memo: dict[int, Node] = {}

        def go(m: Node) -> Node:
            hit = memo.get(id(m))
            if hit is None:
                if m.op is Op.MUL:
                    # scalings and signs float out of the chain: d·(M r), not (d·M) r
                    scalars, negate, factors = [], False, []
                    for f in _chain(m):
                        while f.op in (Op.SCALE, Op.NEG) and not f.is_scalar:
                            if f.op is Op.NEG:
                                negate, f = not negate, f.children[0]
                            else:
                                scalars.append(go(f.children[0]))
                                f = f.children[1]
                        factors.extend(_chain(f) if f.op is Op.MUL else [f])
                    hit = self.order_factors([go(f) for f in factors])
                    for sc in scalars:
                        hit = ir.scale(sc, hit)
                    if negate:
                        hit = ir.neg(hit)
                elif m.op in ir.LEAVES:
                    hit = m
                else:
                    hit = m.replace(children=tuple(go(c) for c in m.children))
                memo[id(m)] = hit
            return hit

        return go(n)

    def order_factors(self, fs: list[Node]) -> Node:
        """The cheapest association of the product ``fs[0] fs[1] ...``."""
        if len(fs) == 1:
            return fs[0]
        dims = [self.sizes.value(f.rows) for f in fs] + [self.sizes.value(fs[-1].cols)]
        m = len(fs)
        cost = [[0.0] * m for _ in range(m)]
        split = [[0] * m for _ in range(m)]
        for length in range(2, m + 1):
            for i in range(m - length + 1):
                j = i + length - 1
                if tuple(map(id, fs[i:j + 1])) in self.built:
                    cost[i][j] = 0.0
                    continue
                best, arg = None, i
                # scan left to right so ties associate to the right: A (B x)
                for s in range(i, j):
                    c = cost[i][s] + cost[s + 1][j] + 2 * dims[i] * dims[s + 1] * dims[j + 1]
                    if best is None or c < best * (1 - 1e-12):
                        best, arg = c, s
                cost[i][j], split[i][j] = best, arg

        def build(i: int, j: int) -> Node:
            key = tuple(map(id, fs[i:j + 1]))
            if key in self.built:
                return self.built[key]
            if i == j:
                return fs[i]
            s = split[i][j]
            out = ir.matmul(build(i, s), build(s + 1, j))
            self.built[key] = out
            return out

        return build(0, m - 1)


def optimize_trigger(trigger: Trigger, sizes: Sizes, symmetric: set[str]) -> Trigger:
    """Simplify every factor expression of ``trigger`` (see the module docstring)."""
    planner = ChainPlanner(sizes)

    def fix(n: Node) -> Node:
        return planner.order(distribute(push_transposes(n, symmetric)))

    deltas = []
    for vd in trigger.deltas:
        terms = tuple(Term(fix(t.P), fix(t.Q)) for t in vd.terms)
        new_value = dense = None
        if vd.new_value is not None:
            new_value = fix(vd.new_value)  # (X + U Vᵀ) x becomes X x + U (Vᵀ x)
        if vd.dense is not None:
            dense = fix(vd.dense)
        deltas.append(replace(vd, terms=terms, new_value=new_value, dense=dense))
    return replace(trigger, deltas=tuple(deltas))


def flops(n: Node, sizes: Sizes, seen: set[int] | None = None) -> float:
    """Estimated floating-point operations to evaluate ``n`` once (shared nodes once)."""
    seen = set() if seen is None else seen
    total = 0.0
    for m in n.walk():
        if id(m) in seen:
            continue
        seen.add(id(m))
        r, c = sizes.shape(m)
        if m.op is Op.MUL:
            total += 2 * sizes.value(m.children[0].rows) * sizes.value(m.children[0].cols) * c
        elif m.op is Op.INV:
            total += 2 * r ** 3
        elif m.op is Op.SOLVE:
            total += 2 * r ** 3 / 3 + 2 * r * r * c
        elif m.op in (Op.ADD, Op.SUB, Op.NEG, Op.SCALE, Op.EMUL, Op.EDIV):
            total += r * c
        elif m.op in (Op.SUM, Op.TRACE):
            total += sizes.value(m.children[0].rows) * sizes.value(m.children[0].cols)
    return total


__all__ = ["Sizes", "optimize_program", "optimize_trigger", "symmetric_views", "flops",
           "Strategy", "ViewDelta"]
