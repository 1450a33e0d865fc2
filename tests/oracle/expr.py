"""Generated expressions: Octave source text paired with an independent NumPy evaluator.

Sizes are symbolic multisets of size names (``("n",)``, ``("1",)`` for the literal 1,
``("n", "p")`` for ``n + p`` after block concatenation).  An :class:`Ex` carries its
source text, printing precedence, shape and a function ``env -> 2-D array`` that records
the magnitude of every intermediate value, so tests can reject programs whose values grow
beyond a bound.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

Dim = tuple[str, ...]  # sorted multiset of size symbols; ("1",) is the literal size 1
Shape = tuple[Dim, Dim]
ONE: Dim = ("1",)
SCALAR: Shape = (ONE, ONE)

# printing precedence (loosest first), as in grammar/linview.lark
SUM, PROD, UNARY, POSTFIX, ATOM = 1, 2, 3, 4, 5


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


def neg_src(e: Ex) -> str:
    s = wrap(e, UNARY)
    return "- " + s if s[:1] in "-+" else "-" + s
