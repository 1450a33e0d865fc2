"""Hypothesis strategies: random well-typed linview programs and update sequences.

A generated program is the **source text** of an Octave function file in the linview
dialect (DESIGN.md §3) together with everything a test needs to run it:

* the sizes of its dimension symbols and how to build well-scaled inputs from a seed;
* an independent NumPy evaluation of every statement, built by the generator itself from
  the same random choices that produced the text (it never looks at linview's AST or IR),
  so it can serve as an oracle for the front end, the interpreter and the backends;
* which inputs are dynamic, and how to build small low-rank updates for them.

The generator is typed: every expression is produced for a requested shape
``(rows, cols)``, where a dimension is a multiset of size symbols (``('n',)``,
``('1',)`` for 1, ``('n', 'p')`` for ``n + p`` after block concatenation).  Inverses and
divisions are only ever taken of expressions that are well conditioned by construction:

* ``inv`` / ``\\`` / ``/`` apply to ``eye(k) + c*E'*E`` (eigenvalues >= 1), to square
  inputs the test makes diagonally dominant (``I + 0.2 N/sqrt(n)``, updates stay small),
  to transposes, positive multiples and inverses of those;
* ``./`` divides by ``ones(r, c) + E .* E`` (>= 1 elementwise), and ``/ s`` by positive
  literals, scalar inputs (drawn in [0.5, 1.2]) or ``1 + x*x``.

Magnitudes are not bounded by construction (powers, sums); tests should reject programs
whose intermediates exceed a bound with :func:`GenProgram.max_magnitude`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

Dim = tuple[str, ...]  # sorted multiset of size symbols; ("1",) is the literal size 1
Shape = tuple[Dim, Dim]
ONE: Dim = ("1",)
SCALAR: Shape = (ONE, ONE)

# printing precedence (loosest first), as in grammar/linview.lark
SUM, PROD, UNARY, POSTFIX, ATOM = 1, 2, 3, 4, 5

SIZE_SYMBOLS = ("n", "m", "p")
MATRIX_INPUT_NAMES = ("A", "B", "X", "Y", "G", "Hm")
SCALAR_INPUT_NAMES = ("s", "alpha")
TARGET_NAMES = ("C", "D", "F", "R", "S", "T", "W", "Z", "Kx", "Mt", "P1", "Q2")

# An input left out of '%#linview dims' gets symbolic sizes; for a vector one of them is 1 at
# run time, and then sum(E) without a dimension means something else in Octave than what
# linview resolved at compile time (see test_sum_without_dimension_follows_octave_on_a_row,
# an open bug).  Set to True to let the properties generate such programs again.
UNDECLARED_VECTORS = False

# Valid Octave identifiers that a code generator may well use for itself (update factors,
# dims dict, rank, temporaries, modules, Python keywords, keyword arguments of the API).
# Used only with ``programs(tricky_names=True)``.
TRICKY_SIZE_SYMBOLS = ("d", "r", "rows_A", "K")  # "k" is reserved (a ParseError)
TRICKY_INPUT_NAMES = ("U", "V", "d", "k", "np", "rt", "inputs", "lambda", "self", "tolerance",
                      "U_C", "D_C", "t0", "None", "sp")
TRICKY_SCALAR_NAMES = ("k", "d", "lambda", "in", "is")
TRICKY_TARGET_NAMES = ("t0", "t1", "U", "V", "k", "d", "inputs", "self", "U_C", "V_C", "D_C",
                       "def", "class", "np", "rt", "out", "views")


def dim(*syms: str) -> Dim:
    return tuple(sorted(syms))


def dim_add(a: Dim, b: Dim) -> Dim:
    return tuple(sorted(a + b))


# ---------------------------------------------------------------------------- expressions
Fn = Callable[[dict], np.ndarray]


@dataclass(frozen=True)
class Ex:
    """A generated expression: its source text, printing precedence, shape and an
    independent NumPy evaluator ``fn(env) -> 2-D array``."""

    src: str
    prec: int
    shape: Shape
    fn: Fn = field(compare=False, repr=False)


def _track(f: Fn) -> Fn:
    """Record the magnitude of every intermediate value in ``env['__max__']``."""

    def run(env: dict) -> np.ndarray:
        v = np.asarray(f(env), dtype=float)
        assert v.ndim == 2, v.shape
        if v.size:
            m = float(np.max(np.abs(v)))
            if not np.isfinite(m):
                m = np.inf
            env["__max__"][0] = max(env["__max__"][0], m)
        return v

    return run


def mk(src: str, prec: int, shape: Shape, f: Fn) -> Ex:
    return Ex(src, prec, shape, _track(f))


def wrap(e: Ex, level: int) -> str:
    return e.src if e.prec >= level else f"({e.src})"


def _neg_src(e: Ex) -> str:
    s = wrap(e, UNARY)
    return "- " + s if s[:1] in "-+" else "-" + s


# ---------------------------------------------------------------------------- programs
@dataclass
class InputSpec:
    name: str
    shape: Shape
    kind: str  # "dense" | "dd" (diagonally dominant square) | "scalar"
    declared: bool = True  # sizes given in '%#linview dims'


@dataclass
class GenProgram:
    """A generated program: source text plus an independent NumPy oracle."""

    source: str
    name: str
    sizes: dict[str, int]
    inputs: dict[str, InputSpec]
    dynamic: tuple[str, ...]
    outputs: tuple[str, ...]
    steps: list = field(repr=False)  # ("assign", name, Ex) | ("loop", trips, [(name, Ex)])

    # -- sizes and data
    def size(self, d: Dim) -> int:
        return sum(1 if s == "1" else self.sizes[s] for s in d)

    def shape_of(self, name: str) -> tuple[int, int]:
        r, c = self.inputs[name].shape
        return self.size(r), self.size(c)

    @property
    def compile_dims(self) -> dict[str, int]:
        """Sizes of the symbols that appear in '%#linview dims' (safe to pass to compile)."""
        used = {s for spec in self.inputs.values() if spec.declared and spec.kind != "scalar"
                for d in spec.shape for s in d if s != "1"}
        return {s: v for s, v in self.sizes.items() if s in used}

    def make_inputs(self, seed: int) -> dict[str, np.ndarray]:
        """Well-scaled inputs: dense ~ N(0, 0.25/n) (norm ~1), dd = I + 0.2 N/sqrt(n),
        scalars uniform in [0.5, 1.2].  Every array is 2-D float64."""
        rng = np.random.default_rng(seed)
        out = {}
        for name, spec in self.inputs.items():
            r, c = self.shape_of(name)
            if spec.kind == "scalar":
                out[name] = np.array([[rng.uniform(0.5, 1.2)]])
            elif spec.kind == "dd":
                out[name] = np.eye(r) + 0.2 * rng.standard_normal((r, c)) / np.sqrt(r)
            else:
                out[name] = 0.5 * rng.standard_normal((r, c)) / np.sqrt(max(r, c))
        return out

    def make_update(self, name: str, rank: int, seed: int,
                    kind: str = "dense") -> tuple[np.ndarray, np.ndarray]:
        """Small factors ``U (rows×rank)``, ``V (cols×rank)``: entries ~ 0.1 N/sqrt(size), so
        that ``‖U Vᵀ‖ ≈ 0.01·rank`` and well-conditioned inputs stay well conditioned.

        ``kind`` shapes the update as users make them: ``dense``; ``row`` (U one-hot: whole
        rows change), ``col`` (V one-hot: whole columns change), ``cell`` (both one-hot)."""
        rng = np.random.default_rng(seed)
        r, c = self.shape_of(name)
        U = 0.1 * rng.standard_normal((r, rank)) / np.sqrt(r)
        V = 0.1 * rng.standard_normal((c, rank)) / np.sqrt(c)

        def one_hot(n: int) -> np.ndarray:
            E = np.zeros((n, rank))
            E[rng.integers(0, n, size=rank), np.arange(rank)] = 1.0
            return E

        if kind in ("row", "cell"):
            U = one_hot(r) * 0.1
        if kind in ("col", "cell"):
            V = one_hot(c) * (0.1 if kind == "col" else 1.0)
        return U, V

    # -- the oracle
    def _run(self, inputs: dict[str, np.ndarray]) -> dict:
        env = {k: np.array(v, dtype=float, ndmin=2) for k, v in inputs.items()}
        env["__max__"] = [0.0]
        for step in self.steps:
            if step[0] == "assign":
                _, name, ex = step
                env[name] = ex.fn(env)
            else:
                _, trips, body = step
                for _ in range(trips):
                    for name, ex in body:
                        env[name] = ex.fn(env)
        return env

    def evaluate(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The program's outputs computed directly with NumPy."""
        with np.errstate(all="ignore"):
            env = self._run(inputs)
        return {o: env[o] for o in self.outputs}

    def max_magnitude(self, inputs: dict[str, np.ndarray]) -> float:
        """The largest absolute value of any intermediate result (inf if non-finite)."""
        with np.errstate(all="ignore"):
            env = self._run(inputs)
        return env["__max__"][0]

    def __repr__(self) -> str:
        return f"GenProgram(\n{self.describe()}\n)"

    def _repr_pretty_(self, printer, cycle) -> None:  # Hypothesis's pretty printer
        printer.text(repr(self))

    def describe(self) -> str:
        return (f"{self.source}\n% sizes {self.sizes}; dynamic {self.dynamic}; "
                f"inputs " + ", ".join(f"{n}:{s.kind}" for n, s in self.inputs.items()))


# ---------------------------------------------------------------------------- generator
class _Gen:
    """Draws a typed random program; every choice goes through Hypothesis's ``draw`` so
    failing examples shrink (choices shrink towards the first option / False)."""

    def __init__(self, draw, sizes: dict[str, int], inputs: dict[str, InputSpec],
                 targets: tuple[str, ...] = TARGET_NAMES):
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
        return mk(_neg_src(a), UNARY, shape, lambda env: -a.fn(env))

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


def _stmt_text(name: str, ex: Ex, semicolon: bool) -> str:
    return f"{name} = {ex.src}{';' if semicolon else ''}"


def _names(draw, plain: tuple[str, ...], tricky: tuple[str, ...], count: int,
           use_tricky: bool, taken: set[str]) -> list[str]:
    """``count`` distinct names; with ``use_tricky`` each may come from ``tricky``."""
    out = []
    for _ in range(count):
        pool = [n for n in plain if n not in taken]
        if use_tricky and draw(st.integers(0, 99)) < 50:
            pool = [n for n in tricky if n not in taken] or pool
        name = pool[0] if not use_tricky and pool else draw(st.sampled_from(pool))
        taken.add(name)
        out.append(name)
    return out


@st.composite
def programs(draw, max_statements: int = 7, max_depth: int = 3,
             tricky_names: bool = False) -> GenProgram:
    """A random well-typed linview function file with its NumPy oracle.

    ``tricky_names``: inputs, statements and size symbols are sometimes named like things
    a code generator uses itself (``U``, ``V``, ``k``, ``d``, ``t0``, ``self``, ``lambda``...).
    """
    nsyms = draw(st.integers(1, 3))
    syms = _names(draw, SIZE_SYMBOLS, TRICKY_SIZE_SYMBOLS, nsyms, tricky_names, set())
    # mostly tiny; sometimes large enough for the BLAS (size > 64) and one-hot paths
    sizes = {s: draw(st.integers(2, 9)) if draw(st.integers(0, 99)) < 90 else
             draw(st.integers(10, 16)) for s in syms}

    # inputs: the first is square n×n; others random shapes over the symbols (or vectors)
    n_mat = draw(st.integers(1, 4))
    n_scal = draw(st.integers(0, 2))
    taken: set[str] = set()
    names = _names(draw, MATRIX_INPUT_NAMES, TRICKY_INPUT_NAMES, n_mat, tricky_names, taken)
    scalar_names = _names(draw, SCALAR_INPUT_NAMES, TRICKY_SCALAR_NAMES, n_scal,
                          tricky_names, taken)
    inputs: dict[str, InputSpec] = {}
    for i, nm in enumerate(names):
        if i == 0:
            shape = (dim(syms[0]), dim(syms[0]))
        else:
            r = dim(draw(st.sampled_from(syms)))
            c = draw(st.sampled_from([dim(s) for s in syms] + [ONE]))
            shape = (r, c)
        square = shape[0] == shape[1]
        kind = "dd" if square and draw(st.integers(0, 99)) >= 55 else "dense"
        declared = i == 0 or draw(st.integers(0, 99)) < 85
        if ONE in shape and not UNDECLARED_VECTORS:
            declared = True
        inputs[nm] = InputSpec(nm, shape, kind, declared)
    for nm in scalar_names:
        inputs[nm] = InputSpec(nm, SCALAR, "scalar")
    # symbols nobody carries are dropped (sizes come from size(X, d))
    carried = {s for spec in inputs.values() for d in spec.shape for s in d if s != "1"}
    sizes = {s: v for s, v in sizes.items() if s in carried}

    targets = TARGET_NAMES
    if tricky_names:
        targets = tuple(draw(st.permutations(TRICKY_TARGET_NAMES + TARGET_NAMES)))
    g = _Gen(draw, sizes, inputs, targets)
    lines: list[str] = []
    steps: list = []
    assigned: list[str] = []
    taken = set(inputs)
    n_st = draw(st.integers(2, max_statements))
    for _ in range(n_st):
        kind = g.pick(["assign", "assign", "assign", "loop", "reassign"])
        if kind == "reassign" and assigned:
            name = g.pick(assigned)
            ex = g.expr(g.vars[name], g.int_(1, max_depth))
            lines.append("  " + _stmt_text(name, ex, g.chance(80)))
            steps.append(("assign", name, ex))
            continue
        if kind == "loop":
            _gen_loop(g, draw, lines, steps, assigned, taken, max_depth)
            continue
        name = g.fresh_name(taken)
        taken.add(name)
        shape = g.target_shape()
        ex = g.expr(shape, g.int_(1, max_depth))
        lines.append("  " + _stmt_text(name, ex, g.chance(80)))
        steps.append(("assign", name, ex))
        g.vars[name] = shape
        assigned.append(name)

    if not assigned:  # (only loops over existing names cannot happen, but be safe)
        name = g.fresh_name(taken)
        ex = g.expr((g.simple_dims[0], g.simple_dims[0]), 1)
        lines.append("  " + _stmt_text(name, ex, True))
        steps.append(("assign", name, ex))
        g.vars[name] = ex.shape
        assigned.append(name)

    outs = draw(st.lists(st.sampled_from(assigned), min_size=1, max_size=len(assigned),
                         unique=True))
    if draw(st.integers(0, 99)) >= 92:
        outs.append(draw(st.sampled_from(sorted(n for n in inputs))))
    outs = list(dict.fromkeys(outs))

    # header and pragmas
    params = draw(st.permutations(list(inputs)))
    if len(outs) == 1 and draw(st.booleans()) is False:
        head = f"function {outs[0]} = prog({', '.join(params)})"
    else:
        head = f"function [{', '.join(outs)}] = prog({', '.join(params)})"
    pragmas = []
    specs = [f"{n}({','.join(_dim_spec(d) for d in s.shape)})" for n, s in inputs.items()
             if s.kind != "scalar" and s.declared]
    if specs:
        pragmas.append("  %#linview dims " + " ".join(specs))
    scal = [n for n, s in inputs.items() if s.kind == "scalar"]
    if scal:
        pragmas.append("  %#linview scalar " + " ".join(scal))
    matrix_names = [n for n, s in inputs.items() if s.kind != "scalar"]
    if draw(st.integers(0, 99)) < 25:
        dynamic = tuple(matrix_names)  # default: every matrix input
    else:
        dyn = draw(st.lists(st.sampled_from(list(inputs)), min_size=1, unique=True))
        pragmas.append("  %#linview dynamic " + " ".join(dyn))
        dynamic = tuple(n for n in inputs if n in dyn)
    end = draw(st.sampled_from(["end", "endfunction", ""]))
    source = "\n".join([head, *pragmas, *lines, end]) + "\n"
    return GenProgram(source, "prog", sizes, inputs, dynamic, tuple(outs), steps)


def _dim_spec(d: Dim) -> str:
    assert len(d) == 1
    return d[0]


def _gen_loop(g: _Gen, draw, lines, steps, assigned, taken, max_depth) -> None:
    """``for i = 1:K`` whose body updates 1-2 carried variables affinely:
    ``T = L(T) + F`` with ``L(T)`` one of ``M*T``, ``T*M``, ``a*T``, ``T``, and ``F`` an
    expression over the other variables (so the iterates stay bounded)."""
    n_carried = g.int_(1, 2)
    carried: list[str] = []
    for _ in range(n_carried):
        if assigned and g.chance(40):
            name = g.pick(assigned)
            if name in carried:
                continue
        else:
            name = g.fresh_name(taken)
            taken.add(name)
            shape = g.target_shape()
            init = g.expr(shape, g.int_(0, 2))
            lines.append("  " + _stmt_text(name, init, True))
            steps.append(("assign", name, init))
            g.vars[name] = shape
            assigned.append(name)
        carried.append(name)
    lo = g.int_(1, 2)
    trips = g.int_(1, 4)
    hi = lo + trips - 1
    rng_src = g.pick([f"{lo}:{hi}", f"{lo}:1:{hi}", f"({lo}:{hi})"])
    if rng_src.startswith("("):
        head = f"  for (i = {lo}:{hi})"
    else:
        head = f"  for i = {rng_src}"
    body: list[tuple[str, Ex]] = []
    body_lines = []
    g.hidden = set(carried)
    try:
        for name in carried:
            r, c = g.vars[name]
            T = mk(name, ATOM, (r, c), lambda env, n=name: env[n])
            form = g.pick(["left", "right", "scale", "plain"])
            f_ex = g.expr((r, c), g.int_(0, max_depth - 1))
            others = [o for o in carried if o != name and g.vars[o] == (r, c)]
            if others and g.chance(50):
                o = g.pick(others)
                O = mk(o, ATOM, (r, c), lambda env, n=o: env[n])
                f_ex = mk(f"{wrap(f_ex, SUM)} + 0.5 * {O.src}", SUM, (r, c),
                          lambda env, f=f_ex, O=O: f.fn(env) + 0.5 * O.fn(env))
            if form == "left":
                M = g.expr((r, r), g.int_(0, 1))
                lin = mk(f"{wrap(M, PROD)} * {T.src}", PROD, (r, c),
                         lambda env, M=M, T=T: M.fn(env) @ T.fn(env))
            elif form == "right":
                M = g.expr((c, c), g.int_(0, 1))
                lin = mk(f"{T.src} * {wrap(M, UNARY)}", PROD, (r, c),
                         lambda env, M=M, T=T: T.fn(env) @ M.fn(env))
            elif form == "scale":
                a = g.pick(["0.5", "-0.5", "0.9"])
                lin = mk(f"{a} * {T.src}", PROD, (r, c),
                         lambda env, a=a, T=T: float(a) * T.fn(env))
            else:
                lin = T
            op = g.pick(["+", "-"])
            if op == "+":
                ex = mk(f"{wrap(lin, SUM)} + {wrap(f_ex, PROD)}", SUM, (r, c),
                        lambda env, lin=lin, f=f_ex: lin.fn(env) + f.fn(env))
            else:
                ex = mk(f"{wrap(lin, SUM)} - {wrap(f_ex, PROD)}", SUM, (r, c),
                        lambda env, lin=lin, f=f_ex: lin.fn(env) - f.fn(env))
            body.append((name, ex))
            body_lines.append("    " + _stmt_text(name, ex, g.chance(80)))
    finally:
        g.hidden = set()
    end = g.pick(["end", "endfor"])
    lines.extend([head, *body_lines, f"  {end}"])
    steps.append(("loop", trips, body))


# ---------------------------------------------------------------------------- updates
@dataclass(frozen=True)
class Update:
    name: str
    rank: int
    seed: int
    kind: str = "dense"  # dense | row | col | cell (see GenProgram.make_update)


UPDATE_KINDS = ("dense", "row", "col", "cell")


def update_sequences(prog: GenProgram, min_size: int = 1, max_size: int = 4):
    """Lists of updates to the program's dynamic inputs (rank 1..3, small entries)."""
    if not prog.dynamic:
        return st.just([])
    item = st.builds(Update, st.sampled_from(prog.dynamic), st.integers(1, 3),
                     st.integers(0, 2**32 - 1), st.sampled_from(UPDATE_KINDS))
    return st.lists(item, min_size=min_size, max_size=max_size)


MODELS = ("auto", "exp", "linear", "skip=2", "skip=3")


@dataclass
class Case:
    """A program, an input seed, an update sequence and the compile options to use."""

    prog: GenProgram
    seed: int
    updates: list[Update]
    model: str = "auto"  # iterative model passed to linview.compile
    plan_dims: bool = True  # pass the sizes to linview.compile (else plan symbolically)

    def __repr__(self) -> str:  # what Hypothesis prints for a falsifying example
        ups = ", ".join(f"{u.name}(rank {u.rank}, seed {u.seed}, {u.kind})"
                        for u in self.updates)
        return (f"Case(seed={self.seed}, model={self.model!r}, plan_dims={self.plan_dims}, "
                f"updates=[{ups}])\n{self.prog.describe()}")

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(repr(self))


@st.composite
def cases(draw, max_updates: int = 4, **kwargs) -> Case:  # kwargs: see programs()
    """A program, an input seed, an update sequence and compile options."""
    prog = draw(programs(**kwargs))
    seed = draw(st.integers(0, 2**32 - 1))
    ups = draw(update_sequences(prog, 1, max_updates))
    model = draw(st.sampled_from(MODELS))
    plan_dims = draw(st.integers(0, 99)) < 80
    return Case(prog, seed, ups, model, plan_dims)


__all__ = ["MODELS", "UPDATE_KINDS", "Case", "GenProgram", "InputSpec", "Update", "cases",
           "programs", "update_sequences"]
