"""Random program generation, part 2: typed expressions of every operator of the dialect,
each with its NumPy meaning (see :class:`oracle.leaves.LeafGen` for leaves and choices)."""

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
    mk,
    neg_src,
    wrap,
)
from oracle.leaves import LeafGen


class ExprGen(LeafGen):
    """The typed expression generator: ``expr(shape, depth)`` picks an operator and draws
    its operands for the shapes it needs."""

    # -- expressions
    def expr(self, shape: Shape, depth: int) -> Ex:
        r, c = shape
        if depth <= 0:
            return self.leaf(shape)
        kinds = ["leaf", "add", "sub", "mul", "scale", "neg", "transpose", "mul", "add"]
        if r == c:
            kinds += ["pow", "inv", "solve_left"]
        kinds += ["solve_right", "div_scalar", "emul", "ediv"]
        if r == ONE or c == ONE:
            kinds += ["sum"]
        if shape == SCALAR:
            kinds += ["trace", "sum", "sumsum"]
        if len(r) > 1 or len(c) > 1:
            kinds += ["concat", "concat"]
        kind = self.pick(kinds)
        return getattr(self, "x_" + kind)(shape, depth)

    def x_leaf(self, shape, depth):
        return self.leaf(shape)

    def x_add(self, shape, depth, op="+"):
        a, b = self.expr(shape, depth - 1), self.expr(shape, depth - 1)
        f = (lambda env: a.fn(env) + b.fn(env)) if op == "+" else \
            (lambda env: a.fn(env) - b.fn(env))
        return mk(f"{wrap(a, SUM)} {op} {wrap(b, PROD)}", SUM, shape, f)

    def x_sub(self, shape, depth):
        return self.x_add(shape, depth, "-")

    def x_neg(self, shape, depth):
        a = self.expr(shape, depth - 1)
        return mk(neg_src(a), UNARY, shape, lambda env: -a.fn(env))

    def x_transpose(self, shape, depth):
        a = self.expr((shape[1], shape[0]), depth - 1)
        form = self.pick(["'", ".'", "transpose"])
        if form == "transpose":
            return mk(f"transpose({a.src})", ATOM, shape, lambda env: a.fn(env).T)
        return mk(f"{wrap(a, POSTFIX)}{form}", POSTFIX, shape, lambda env: a.fn(env).T)

    def x_mul(self, shape, depth):
        r, c = shape
        k = self.any_dim(allow_compound=self.chance(15))
        a, b = self.expr((r, k), depth - 1), self.expr((k, c), depth - 1)
        return mk(f"{wrap(a, PROD)} * {wrap(b, UNARY)}", PROD, shape,
                  lambda env: a.fn(env) @ b.fn(env))

    def x_scale(self, shape, depth):
        form = self.pick(["lit", "var", "expr"])
        if form == "lit":
            s = self.literal()
        elif form == "var":
            s = self.leaf(SCALAR)
        else:
            s = self.expr(SCALAR, depth - 1)
        a = self.expr(shape, depth - 1)
        if self.chance(30):  # E * s
            return mk(f"{wrap(a, PROD)} * {wrap(s, UNARY)}", PROD, shape,
                      lambda env: a.fn(env) * s.fn(env)[0, 0])
        return mk(f"{wrap(s, PROD)} * {wrap(a, UNARY)}", PROD, shape,
                  lambda env: s.fn(env)[0, 0] * a.fn(env))

    def x_div_scalar(self, shape, depth):
        a = self.expr(shape, depth - 1)
        s = self.safe_scalar(depth - 1)
        op = self.pick(["/", "./"])
        return mk(f"{wrap(a, PROD)} {op} {wrap(s, UNARY)}", PROD, shape,
                  lambda env: a.fn(env) / s.fn(env)[0, 0])

    def x_pow(self, shape, depth):
        k = self.int_(2, 5)
        base = self.expr(shape, max(depth - 2, 0))
        return mk(f"{wrap(base, POSTFIX)}^{k}", POSTFIX, shape,
                  lambda env: np.linalg.matrix_power(base.fn(env), k))

    def x_inv(self, shape, depth):
        w = self.well_conditioned(shape[0], depth - 1)
        if shape == SCALAR:
            # inv of a 1x1 is 1 ./ x in linview and Octave
            return mk(f"inv({w.src})", ATOM, shape, lambda env: 1.0 / w.fn(env))
        return mk(f"inv({w.src})", ATOM, shape, lambda env: np.linalg.inv(w.fn(env)))

    def x_solve_left(self, shape, depth):
        r, c = shape
        w = self.well_conditioned(r, depth - 1)
        b = self.expr(shape, depth - 1)
        if r == ONE:
            f = lambda env: b.fn(env) / w.fn(env)[0, 0]  # noqa: E731
        else:
            f = lambda env: np.linalg.solve(w.fn(env), b.fn(env))  # noqa: E731
        return mk(f"{wrap(w, PROD)} \\ {wrap(b, UNARY)}", PROD, shape, f)

    def x_solve_right(self, shape, depth):
        r, c = shape
        w = self.well_conditioned(c, depth - 1)
        b = self.expr(shape, depth - 1)
        if c == ONE:
            f = lambda env: b.fn(env) / w.fn(env)[0, 0]  # noqa: E731
        else:
            f = lambda env: np.linalg.solve(w.fn(env).T, b.fn(env).T).T  # noqa: E731
        return mk(f"{wrap(b, PROD)} / {wrap(w, UNARY)}", PROD, shape, f)

    def x_emul(self, shape, depth):
        a, b = self.expr(shape, depth - 1), self.expr(shape, depth - 1)
        return mk(f"{wrap(a, PROD)} .* {wrap(b, UNARY)}", PROD, shape,
                  lambda env: a.fn(env) * b.fn(env))

    def x_ediv(self, shape, depth):
        a = self.expr(shape, depth - 1)
        e = self.expr(shape, max(depth - 2, 0))
        R, C = self.dsrc(shape[0]), self.dsrc(shape[1])
        den = f"ones({R}, {C}) + {wrap(e, PROD)} .* {wrap(e, UNARY)}"
        return mk(f"{wrap(a, PROD)} ./ ({den})", PROD, shape,
                  lambda env: a.fn(env) / (1.0 + e.fn(env) * e.fn(env)))

    def x_sum(self, shape, depth):
        r, c = shape
        if r == ONE and c == ONE:
            j = self.any_dim(allow_one=False)
            if self.chance(50):  # row vector: sum along dimension 2
                a = self.expr((ONE, j), depth - 1)
                return mk(f"sum({a.src})", ATOM, shape,
                          lambda env: a.fn(env).sum(axis=1, keepdims=True))
            a = self.expr((j, ONE), depth - 1)
            return mk(f"sum({a.src})", ATOM, shape,
                      lambda env: a.fn(env).sum(axis=0, keepdims=True))
        if r == ONE:  # column sums of a j×c matrix
            j = self.any_dim(allow_one=False, allow_compound=self.chance(10))
            a = self.expr((j, c), depth - 1)
            src = f"sum({a.src})" if self.chance(50) else f"sum({a.src}, 1)"
            return mk(src, ATOM, shape, lambda env: a.fn(env).sum(axis=0, keepdims=True))
        j = self.any_dim(allow_one=True)
        a = self.expr((r, j), depth - 1)
        return mk(f"sum({a.src}, 2)", ATOM, shape,
                  lambda env: a.fn(env).sum(axis=1, keepdims=True))

    def x_sumsum(self, shape, depth):
        r, c = self.any_dim(), self.any_dim()
        a = self.expr((r, c), depth - 1)
        if self.chance(50):
            return mk(f"sum(sum({a.src}))", ATOM, shape,
                      lambda env: np.array([[a.fn(env).sum()]]))
        return mk(f"sum(sum({a.src}, 2), 1)", ATOM, shape,
                  lambda env: np.array([[a.fn(env).sum()]]))

    def x_trace(self, shape, depth):
        k = self.any_dim(allow_one=False, allow_compound=self.chance(10))
        a = self.expr((k, k), depth - 1)
        return mk(f"trace({a.src})", ATOM, shape, lambda env: np.array([[np.trace(a.fn(env))]]))

    def split(self, d: Dim) -> tuple[Dim, Dim]:
        items = list(d)
        order = self.draw(st.permutations(items))
        cut = self.int_(1, len(items) - 1)
        return dim(*order[:cut]), dim(*order[cut:])

    def x_concat(self, shape, depth):
        r, c = shape
        rows = list(self.split(r)) if len(r) > 1 and self.chance(60) else [r]
        cols = list(self.split(c)) if len(c) > 1 and (len(rows) == 1 or self.chance(50)) \
            else [c]
        if len(rows) == 1 and len(cols) == 1:  # must split something
            if len(c) > 1:
                cols = list(self.split(c))
            else:
                rows = list(self.split(r))
        blocks = [[self.expr((ri, cj), depth - 1) for cj in cols] for ri in rows]
        src = "[" + "; ".join(", ".join(b.src for b in row) for row in blocks) + "]"
        return mk(src, ATOM, shape,
                  lambda env: np.block([[b.fn(env) for b in row] for row in blocks]))

    # -- statements
    def fresh_name(self, taken: set[str]) -> str:
        free = [n for n in self.targets if n not in taken]
        return self.pick(free) if free else f"V{len(taken)}"

    def target_shape(self) -> Shape:
        kind = self.pick(["matrix", "matrix", "matrix", "column", "column", "row", "scalar",
                          "compound"])
        if kind == "compound":
            return (self.any_dim(allow_compound=True), self.any_dim(allow_compound=True))
        if kind == "column":
            return (self.any_dim(allow_one=False), ONE)
        if kind == "row":
            return (ONE, self.any_dim(allow_one=False))
        if kind == "scalar":
            return SCALAR
        r = self.any_dim(allow_one=False)
        return (r, r) if self.chance(50) else (r, self.any_dim(allow_one=False))
