"""Random IR expressions with numeric data, for unit tests of single optimiser passes.

Where :mod:`oracle.programs` draws whole programs as source text, this draws expression
DAGs directly in linview's IR (``linview.compiler.ir``), with symbolic sizes ``n, m, p``
and the update rank ``k`` bound to small numbers, so that a pass can be applied to one
expression and its result compared with the input on the reference interpreter.

Leaves are named by their shape and kind, and :meth:`World.data` gives each a value:

* ``A*``: dense inputs, entries ~ N(0, 1/size);
* ``S_*``: symmetric inputs (listed in :attr:`World.symmetric`);
* ``D_*``: diagonally dominant square inputs (safe to invert);
* ``F_*``: thin trigger factors (``FACTOR`` nodes, ``?×k``), as delta derivation makes them;
* ``s0``: a 1x1 input.

Inverses are only taken of ``D_*`` leaves and of ``I + Eᵀ E``, so values stay moderate.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import sympy as sp
from hypothesis import strategies as st

from linview.compiler import ir
from linview.compiler.ir import Node, Op
from linview.compiler.shapes import RANK, dim

n, m, p = dim("n"), dim("m"), dim("p")
k = RANK  # the update rank
ONE = sp.Integer(1)
DIMS = (n, m, p, k, ONE)


def dim_name(d) -> str:
    return str(d)


@dataclass
class World:
    """Size bindings and the data of every leaf an expression may use."""

    bindings: dict[str, int]
    seed: int
    symmetric: set[str] = field(default_factory=set)
    _cache: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def size(self, d) -> int:
        d = sp.sympify(d)
        return int(d.subs({s: self.bindings[s.name] for s in d.free_symbols}))

    def data(self, leaf: Node) -> np.ndarray:
        name = leaf.attr
        if name not in self._cache:
            r, c = self.size(leaf.rows), self.size(leaf.cols)
            rng = np.random.default_rng([self.seed, sum(map(ord, name)), len(name)])
            x = rng.standard_normal((r, c)) / np.sqrt(max(r, c))
            if name.startswith("S_"):
                x = (x + x.T) / 2
            elif name.startswith("D_"):
                x = np.eye(r) + 0.2 * x
            self._cache[name] = x
        return self._cache[name]

    def env(self, *roots: Node) -> dict[str, np.ndarray]:
        """Values of every named leaf under ``roots``."""
        out = {}
        for root in roots:
            for leaf in ir.leaves(root, Op.INPUT, Op.VIEW, Op.FACTOR):
                out[leaf.attr] = self.data(leaf)
        return out


@st.composite
def worlds(draw) -> World:
    bindings = {"n": draw(st.integers(1, 5)), "m": draw(st.integers(1, 5)),
                "p": draw(st.integers(1, 5)), "k": draw(st.integers(1, 3))}
    return World(bindings, draw(st.integers(0, 2**32 - 1)))


class ExprDraw:
    """Draws expressions of a requested shape (``draw`` is Hypothesis's)."""

    def __init__(self, draw, world: World, factors: bool = True, inverses: bool = True):
        self.draw = draw
        self.world = world
        self.factors = factors
        self.inverses = inverses

    def pick(self, seq):
        return self.draw(st.sampled_from(list(seq)))

    def leaf(self, r, c) -> Node:
        kinds = ["A0", "A1"]
        if r == c and r != ONE:
            kinds += ["S", "D"]
        if self.factors and c == k and r != k:
            kinds += ["F", "F"]
        if r == ONE and c == ONE:
            kinds += ["const", "s0"]
        kind = self.pick(kinds)
        if kind == "const":
            return ir.const(self.pick([2, -1, sp.Rational(1, 2)]))
        if kind == "s0":
            return ir.Node(Op.INPUT, (), "s0", (ONE, ONE))
        if kind == "F":
            return ir.factor(f"F_{dim_name(r)}", (r, c))
        if kind == "S":
            self.world.symmetric.add(f"S_{dim_name(r)}")
            return ir.Node(Op.INPUT, (), f"S_{dim_name(r)}", (r, c))
        if kind == "D":
            return ir.Node(Op.INPUT, (), f"D_{dim_name(r)}", (r, c))
        return ir.Node(Op.INPUT, (), f"{kind}_{dim_name(r)}_{dim_name(c)}", (r, c))

    def expr(self, r, c, depth: int) -> Node:
        if depth <= 0:
            return self.leaf(r, c)
        kinds = ["leaf", "add", "sub", "neg", "scale", "mul", "mul", "mul", "transpose"]
        if r == c and r != ONE:
            kinds += ["gram", "inv"] if self.inverses else ["gram"]
        kind = self.pick(kinds)
        sub = depth - 1
        if kind == "leaf":
            return self.leaf(r, c)
        if kind in ("add", "sub"):
            op = Op.ADD if kind == "add" else Op.SUB
            return ir.node(op, self.expr(r, c, sub), self.expr(r, c, sub))
        if kind == "neg":
            return ir.node(Op.NEG, self.expr(r, c, sub))
        if kind == "scale":
            s = self.expr(ONE, ONE, min(sub, 1))
            return ir.node(Op.SCALE, s, self.expr(r, c, sub))
        if kind == "mul":
            j = self.pick(DIMS)
            return ir.matmul(self.expr(r, j, sub), self.expr(j, c, sub))
        if kind == "transpose":
            return ir.transpose(self.expr(c, r, sub))
        if kind == "gram":  # Fᵀ S F, symmetric when S is
            j = self.pick(DIMS)
            f = self.expr(j, r, sub)
            middle = self.leaf(j, j) if j != ONE else ir.const(2)
            return ir.matmul(ir.matmul(ir.transpose(f), middle), f)
        # inv: of a diagonally dominant leaf, or of I + Eᵀ E
        if self.draw(st.booleans()):
            return ir.node(Op.INV, ir.Node(Op.INPUT, (), f"D_{dim_name(r)}", (r, r)))
        j = self.pick(DIMS)
        e = self.expr(j, r, min(sub, 1))
        return ir.node(Op.INV, ir.add(ir.eye(r), ir.matmul(ir.transpose(e), e)))


def shapes():
    return st.tuples(st.sampled_from(DIMS), st.sampled_from(DIMS))


@st.composite
def expressions(draw, world: World, max_depth: int = 3, factors: bool = True,
                shape=None) -> Node:
    """One random expression over ``world``'s leaves (of ``shape`` if given)."""
    r, c = shape if shape is not None else draw(shapes())
    return ExprDraw(draw, world, factors).expr(r, c, draw(st.integers(1, max_depth)))


def brute_force_min(d: list[int]) -> float:
    """Cheapest parenthesisation of matrices ``d[i]×d[i+1]`` by enumerating every tree."""

    def best(i: int, j: int) -> float:
        if i == j:
            return 0.0
        return min(best(i, s) + best(s + 1, j) + 2 * d[i] * d[s + 1] * d[j + 1]
                   for s in range(i, j))

    return best(0, len(d) - 2)
