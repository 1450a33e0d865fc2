"""Lowering of control flow (issue 14): ``if`` on conditions fixed at compile time, and
``while`` loops with data-dependent conditions, evaluated as a whole.

An ``if`` picks its branch while lowering (sizes and literals only).  A ``for`` loop inside
a ``while`` body is unrolled there; a ``while`` inside a ``while`` is refused.  A ``while`` loop
becomes one ``LOOP`` view per variable it assigns (:class:`linview.compiler.ops_octave.LoopSpec`):
inside a trigger it is re-evaluated from its new inputs, and every statement around it
stays maintained.  Loops are compiled for the data's shapes (the program is deferred to
``load()`` when sizes are open).
"""

from __future__ import annotations

import sympy as sp

from linview.compiler import ir
from linview.compiler.ir import Node, Op
from linview.compiler.lower_language import NeedsData, number_value, show
from linview.frontend import syntax


# ------------------------------------------------------------------ if / else
def decide(lw, cond: syntax.Expr) -> bool:
    """The value of an ``if`` condition, which must be known at compile time."""
    v = lw.expr(cond, "cond")
    if v.op is Op.CONST and number_value(lw.uni.resolve(v.attr)) is not None:
        return lw.uni.resolve(v.attr) != 0
    if v.op is Op.CONST:
        raise NeedsData(f"the 'if' condition '{show(cond)}' depends on sizes")
    raise lw.parse_error(f"the 'if' condition '{show(cond)}' depends on the data",
                         getattr(cond, "pos", (0, 0)),
                         "conditions must be fixed at compile time (sizes and literals); "
                         "for a data-dependent choice compute both values and combine "
                         "them, e.g. c*X + (1 - c)*Y")


# ------------------------------------------------------------------ while
def _assigned(body) -> list[str]:
    out: list[str] = []
    for st in body:
        if isinstance(st, syntax.Assign | syntax.MultiAssign):
            targets = st.targets if isinstance(st, syntax.MultiAssign) else (st.target,)
            out += [t for t in targets if t not in out]
        elif isinstance(st, syntax.If):
            for _, branch in st.branches:
                out += [v for v in _assigned(branch) if v not in out]
            out += [v for v in _assigned(st.orelse) if v not in out]
        elif isinstance(st, syntax.For):
            out += [v for v in _assigned(st.body) if v not in out]
    return out


def _inner_while(body) -> syntax.While | None:
    """A ``while`` loop nested anywhere in ``body`` (branches and ``for`` bodies too)."""
    for st in body:
        if isinstance(st, syntax.While):
            return st
        inner = [b for _, b in st.branches] + [st.orelse] if isinstance(st, syntax.If) \
            else [st.body] if isinstance(st, syntax.For) else []
        for b in inner:
            found = _inner_while(b)
            if found is not None:
                return found
    return None


def while_loop(lw, st: syntax.While) -> None:
    """``while cond ... end``: one ``LOOP`` view per variable it assigns, each the whole
    loop evaluated on its inputs (re-evaluated inside a trigger when they change)."""
    from linview.compiler.ops_octave import LoopSpec

    if any(sp.sympify(x).free_symbols for v in lw.env.values() for x in v.shape):
        raise NeedsData(f"the 'while' loop of line {st.pos[0]} is compiled for the data's "
                        "shapes")
    inner = _inner_while(st.body)
    if inner is not None:
        raise lw.parse_error("a 'while' loop inside a 'while' loop is not supported",
                             inner.pos, "move the inner loop out, or give it a fixed "
                             "number of steps: 'for i = 1:k' (unrolled)")
    carried = _assigned(st.body)
    saved_env, saved_emit = dict(lw.env), lw.in_loop
    holders = {}
    for v in carried:
        if v in lw.env:
            value = lw.env[v]
            holders[v] = Node(Op.INPUT, (), f"@{v}", value.shape)
            lw.env[v] = holders[v]
    lw.in_loop = True
    try:
        cond = lw.expr(st.cond, "cond")
        lw.block(st.body)
        ends = {v: lw.env[v] for v in carried if v in lw.env}
    finally:
        lw.in_loop = saved_emit
        body_env, lw.env = lw.env, saved_env
    for v in carried:
        if v not in ends:
            raise lw.parse_error(f"'{v}' is assigned in only some branches of the loop",
                                 st.pos, "assign it before the loop")
        if v in holders:
            for a, b in zip(holders[v].shape, ends[v].shape, strict=True):
                lw.unify(a, b, st.pos, f"'{v}' changes size in the 'while' loop",
                         holders[v].shape, ends[v].shape)
    del body_env
    outer: dict[int, Node] = {}
    for root in [cond, *ends.values()]:
        for n in root.walk():
            if n.op in (Op.VIEW, Op.INPUT) and not str(n.attr).startswith("@"):
                outer.setdefault(id(n), n)
    outer_nodes = list(outer.values())
    rename = {id(n): Node(Op.INPUT, (), f"@{i}", n.shape) for i, n in enumerate(outer_nodes)}

    def swap(leaf: Node) -> Node | None:
        return rename.get(id(leaf))

    cond = ir.map_leaves(cond, swap)
    updates = tuple(ir.map_leaves(ends[v], swap) for v in carried)
    init = [saved_env[v] if v in saved_env else ir.zeros(*ends[v].shape) for v in carried]
    for v in carried:
        spec = LoopSpec(tuple(f"@{i}" for i in range(len(outer_nodes))), tuple(carried),
                        cond, updates, v, st.pos[0])
        node = lw.build(Op.LOOP, *outer_nodes, *init, pos=st.pos, attr=spec)
        j = lw.version.get(v, 0)
        lw.version[v] = j + 1
        name = v if lw.total.get(v, 1) == 1 else f"{v}_{j}"
        lw.env[v] = lw.emit(name, node, syntax.Assign(v, st.cond, pos=st.pos))
