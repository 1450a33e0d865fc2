"""Optimisation passes (the order they run in is :mod:`.passes`).

Program passes (``Program -> Program``): auxiliary views for inner products of long chains,
common views (CSE over statements: interning makes equal expressions identical objects),
copy propagation and dead-view elimination.

Expression passes (on every factor expression of a trigger, and on re-evaluation):

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
from linview.compiler.ir import Node, Op
from linview.compiler.ops import OPS, chain_factors

DEFAULT_SIZE = 1000  # an unbound size is assumed large ...
DEFAULT_RANK = 1  # ... and an update's rank small, when planning


# ------------------------------------------------------------------ size estimates
@dataclass
class Sizes:
    """Numeric values for planning: bound dims, else :data:`DEFAULT_SIZE`; rank ``k``."""

    bindings: Mapping[str, int] = field(default_factory=dict)
    rank: int = DEFAULT_RANK

    _memo: dict = field(default_factory=dict, repr=False, compare=False)

    def value(self, e) -> float:
        try:
            return self._memo[e]
        except (KeyError, TypeError):
            pass
        key, e = e, sp.sympify(e)
        if e.is_Number:
            return float(e)
        sub = {s: self.bindings.get(s.name, self.rank if s.name == "k" else DEFAULT_SIZE)
               for s in e.free_symbols}
        out = self._memo[key] = float(e.subs(sub))
        return out


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
        """Views for the inner products of the ordered chain ``t``; the scalings and signs
        that :meth:`ChainPlanner.order` floated out of it stay outside."""
        if t.op is Op.NEG:
            return ir.neg(lift(st, t.children[0], factors, root))
        if t.op is Op.SCALE and id(t) not in factors:
            return ir.scale(t.children[0], lift(st, t.children[1], factors, root))
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
            fs = [process(st, f, planner) for f in chain_factors(n)]
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


# ------------------------------------------------------------------ symmetry
def is_symmetric(n: Node, symmetric: set[str]) -> bool:
    """A sufficient syntactic test (each op's ``symmetric`` entry): palindromic chains
    ``Fᵀ S F``, sums and inverses of symmetric matrices, square constants."""
    if n.op in (Op.VIEW, Op.INPUT):
        return n.attr in symmetric
    if n.op in ir.CONSTANT_LEAVES:
        return n.rows == n.cols
    rule = OPS[n.op].symmetric if n.op in OPS else None
    return rule is not None and rule(n, lambda c: is_symmetric(c, symmetric))


def symmetric_views(program: ir.Program) -> set[str]:
    out: set[str] = set()
    for st in program.statements:
        if is_symmetric(st.expr, out):
            out.add(st.name)
    return out


# ------------------------------------------------------------------ trigger passes
def push_transposes(n: Node, symmetric: set[str] = frozenset()) -> Node:
    """Transposes pushed down to the leaves by each op's ``transpose`` entry
    (``(A B)ᵀ = Bᵀ Aᵀ``...); a transposed symmetric view is the view itself."""
    def rule(m: Node) -> Node:
        if m.op is not Op.T:
            return m
        a = m.children[0]
        if a.op in (Op.VIEW, Op.INPUT) and a.attr in symmetric:
            return a
        push = OPS[a.op].transpose if a.op in OPS else None
        out = push(a, lambda c: rule(ir.transpose(c))) if push is not None else None
        return m if out is None else out
    return ir.rebuild(n, rule)


def has_factor(n: Node, memo: dict[int, bool]) -> bool:
    hit = memo.get(id(n))
    if hit is None:
        hit = n.op is Op.FACTOR or any(has_factor(c, memo) for c in n.children)
        memo[id(n)] = hit
    return hit


def _vector(n: Node, left: bool) -> bool:
    """``n`` is one column (``x`` in ``S x``) or, on the left, one row."""
    return (n.rows if left else n.cols) == 1


def distribute(n: Node) -> Node:
    """Distribute products over sums, negations and scalings next to a thin factor, or
    next to a vector in an expression with factors: ``(A + U Vᵀ) x`` becomes
    ``A x + U (Vᵀ x)``, and ``(Uᵀ A + Uᵀ V Uᵀ) p`` becomes ``Uᵀ (A p) + ...`` (a
    matrix-vector product, not a thin one of A)."""
    memo: dict[int, bool] = {}

    def mul(a: Node, b: Node) -> Node:
        if has_factor(b, memo) or has_factor(a, memo):
            for left, x, y in ((True, a, b), (False, b, a)):
                if x.op in (Op.ADD, Op.SUB) and (has_factor(y, memo)
                                                  or _vector(y, not left)):
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
                    for f in chain_factors(m):
                        while f.op in (Op.SCALE, Op.NEG) and not f.is_scalar:
                            if f.op is Op.NEG:
                                negate, f = not negate, f.children[0]
                            else:
                                scalars.append(go(f.children[0]))
                                f = f.children[1]
                        factors.extend(chain_factors(f) if f.op is Op.MUL else [f])
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
