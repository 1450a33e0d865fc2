"""Random program generation, part 1: Hypothesis choices, sizes, leaves, and operands
that are well conditioned by construction (for ``inv``, ``\\``, ``/`` and ``./``)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from oracle.expr import (
    ATOM,
    ONE,
    POSTFIX,
    PROD,
    SCALAR,
    SUM,
    UNARY,
    Dim,
    Ex,
    Shape,
    dim,
    dim_add,
    mk,
    wrap,
)
from oracle.program import InputSpec


# ---------------------------------------------------------------------------- generator
class LeafGen:
    """Draws parts of a typed random program; every choice goes through Hypothesis's
    ``draw`` so failing examples shrink (choices shrink towards the first option / False).
    ``expr`` is provided by the subclass :class:`oracle.operators.ExprGen`."""

    def __init__(self, draw, sizes: dict[str, int], inputs: dict[str, InputSpec],
                 targets: tuple[str, ...]):
        self.draw = draw
        self.targets = targets
        self.sizes = sizes
        self.inputs = inputs
        self.vars: dict[str, Shape] = {n: s.shape for n, s in inputs.items()}
        self.hidden: set[str] = set()  # loop-carried names not to be used as leaves
        self.size_src: dict[str, str] = {}
        for name, spec in inputs.items():
            for axis, d in enumerate(spec.shape):
                if len(d) == 1 and d != ONE and d[0] not in self.size_src:
                    self.size_src[d[0]] = f"size({name}, {axis + 1})"
        self.simple_dims: list[Dim] = [dim(s) for s in sorted(self.size_src)]

    # -- choices
    def pick(self, seq):
        return self.draw(st.sampled_from(list(seq)))

    def chance(self, percent: int) -> bool:
        return self.draw(st.integers(0, 99)) >= 100 - percent

    def int_(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    # -- sizes
    def dsrc(self, d: Dim) -> str:
        return " + ".join("1" if s == "1" else self.size_src[s] for s in d)

    def dval(self, d: Dim) -> int:
        return sum(1 if s == "1" else self.sizes[s] for s in d)

    def any_dim(self, allow_one: bool = True, allow_compound: bool = False) -> Dim:
        opts = list(self.simple_dims)
        if allow_one:
            opts.append(ONE)
        if allow_compound:
            opts.append(dim_add(self.pick(self.simple_dims), self.pick(self.simple_dims + [ONE])))
        return self.pick(opts)

    # -- leaves
    def literal(self, nonzero: bool = False, positive: bool = False) -> Ex:
        lits = ["0.5", "2", "0.25", ".5", "1", "1.5", "5e-1", "3", "0.1", "1e-1", "0.75"]
        text = self.pick(lits)
        val = float(text)
        if not positive and self.chance(20):
            return mk(f"-{text}", UNARY, SCALAR, lambda env, v=-val: np.array([[v]]))
        return mk(text, ATOM, SCALAR, lambda env, v=val: np.array([[v]]))

    def constant(self, shape: Shape) -> Ex:
        r, c = shape
        R, C = self.dsrc(r), self.dsrc(c)
        kind = self.pick(["eye", "ones", "eye", "ones", "zeros"])
        nr, nc = self.dval(r), self.dval(c)
        if kind == "eye":
            src = f"eye({R})" if r == c and self.chance(50) else f"eye({R}, {C})"
            return mk(src, ATOM, shape, lambda env: np.eye(nr, nc))
        f = np.zeros if kind == "zeros" else np.ones
        return mk(f"{kind}({R}, {C})", ATOM, shape, lambda env: f((nr, nc)))

    def var(self, name: str) -> Ex:
        return mk(name, ATOM, self.vars[name], lambda env: env[name])

    def leaf(self, shape: Shape) -> Ex:
        visible = {n: s for n, s in self.vars.items() if n not in self.hidden}
        names = [n for n, s in visible.items() if s == shape]
        if names and self.chance(85):
            return self.var(self.pick(names))
        r, c = shape
        flipped = [n for n, s in visible.items() if s == (c, r)]
        if flipped and self.chance(70):
            a = self.var(self.pick(flipped))
            return mk(f"{a.src}'", POSTFIX, shape, lambda env: a.fn(env).T)
        pairs = [(x, y) for x, sx in visible.items() for y, sy in visible.items()
                 if sx[0] == r and sy[1] == c and sx[1] == sy[0]]
        if pairs and self.chance(70):
            x, y = self.pick(pairs)
            a, b = self.var(x), self.var(y)
            return mk(f"{x} * {y}", PROD, shape, lambda env: a.fn(env) @ b.fn(env))
        if shape == SCALAR:
            if self.simple_dims and self.chance(10):
                sym = self.pick(sorted(self.size_src))
                v = self.sizes[sym]
                return mk(self.size_src[sym], ATOM, SCALAR, lambda env: np.array([[float(v)]]))
            return self.literal()
        return self.constant(shape)

    # -- well-conditioned operands
    def safe_scalar(self, depth: int) -> Ex:
        """A 1x1 expression bounded away from zero."""
        scal = [n for n, s in self.vars.items()
                if s == SCALAR and n in self.inputs and n not in self.hidden]
        kind = self.pick(["lit", "input", "square"] if depth > 0 else ["lit", "input"])
        if kind == "input" and scal:
            return self.var(self.pick(scal))
        if kind == "square":
            x = self.expr(SCALAR, depth - 1)
            c = self.pick(["1", "2"])
            if self.chance(50):
                src = f"{c} + {wrap(x, PROD)} * {wrap(x, UNARY)}"
            else:
                src = f"{c} + {wrap(x, PROD)} .* {wrap(x, UNARY)}"
            return mk(src, SUM, SCALAR, lambda env: float(c) + x.fn(env) * x.fn(env))
        return self.literal(positive=True)

    def well_conditioned(self, k: Dim, depth: int) -> Ex:
        """A square k×k expression with condition number bounded by construction."""
        if k == ONE:
            return self.safe_scalar(depth)
        dd = [n for n, s in self.inputs.items() if s.kind == "dd" and s.shape == (k, k)
              and n not in self.hidden]
        kinds = ["gram", "gram_t"]
        if dd:
            kinds = ["dd", "dd"] + kinds
        if depth > 0:
            kinds += ["transpose", "scaled", "inverse"]
        kind = self.pick(kinds)
        if kind == "dd":
            return self.var(self.pick(dd))
        if kind in ("gram", "gram_t"):
            j = self.any_dim()
            e = self.expr((j, k) if kind == "gram" else (k, j), max(depth - 1, 0))
            c = self.pick(["0.1", "0.5", "1"])
            eye = f"eye({self.dsrc(k)})"
            n = self.dval(k)
            if kind == "gram":
                src = f"{eye} + {c} * {wrap(e, POSTFIX)}' * {wrap(e, UNARY)}"
                return mk(src, SUM, (k, k),
                          lambda env: np.eye(n) + float(c) * (e.fn(env).T @ e.fn(env)))
            src = f"{eye} + {c} * {wrap(e, PROD)} * {wrap(e, POSTFIX)}'"
            return mk(src, SUM, (k, k),
                      lambda env: np.eye(n) + float(c) * (e.fn(env) @ e.fn(env).T))
        w = self.well_conditioned(k, depth - 1)
        if kind == "transpose":
            return mk(f"{wrap(w, POSTFIX)}'", POSTFIX, (k, k), lambda env: w.fn(env).T)
        if kind == "scaled":
            c = self.pick(["2", "0.5"])
            return mk(f"{c} * {wrap(w, UNARY)}", PROD, (k, k),
                      lambda env: float(c) * w.fn(env))
        return mk(f"inv({w.src})", ATOM, (k, k), lambda env: np.linalg.inv(w.fn(env)))
