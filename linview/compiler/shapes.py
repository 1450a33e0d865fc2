"""Symbolic sizes: fresh dimension symbols and a unifier for them.

Sizes are sympy expressions over dimension symbols (``m``, ``n``, ``p`` or generated
``rows_X``/``cols_X`` for inputs without a ``dims`` pragma).  Type checking a statement
such as ``X' * X`` *unifies* the inner dimensions; the unifier keeps a substitution from
symbols to expressions and reports a :class:`Conflict` when two sizes cannot be equal.
"""

from __future__ import annotations

import sympy as sp

_SYMBOLS: dict[str, sp.Symbol] = {}


def dim(name: str | int) -> sp.Expr:
    """The size called ``name`` (an integer literal gives a number)."""
    if isinstance(name, int):
        return sp.Integer(name)
    sym = _SYMBOLS.get(name)
    if sym is None:
        sym = _SYMBOLS[name] = sp.Symbol(name, integer=True, positive=True)
    return sym


RANK = dim("k")  # the rank of an update, symbolic in cost formulas


class Conflict(Exception):
    """Two sizes that must be equal cannot be."""

    def __init__(self, a: sp.Expr, b: sp.Expr):
        self.a, self.b = a, b
        super().__init__(f"{a} != {b}")


class Unifier:
    """A substitution ``symbol -> size`` grown by :meth:`unify`.

    ``rigid`` symbols are sizes the user named in a pragma: they are never bound, so two
    different declared sizes can never be made equal (``A(m,n)`` is not square)."""

    def __init__(self, rigid: set[sp.Symbol] | None = None) -> None:
        self.subst: dict[sp.Symbol, sp.Expr] = {}
        self.rigid: set[sp.Symbol] = set(rigid or ())

    def resolve(self, e: sp.Expr) -> sp.Expr:
        e = sp.sympify(e)
        for _ in range(64):
            if not (e.free_symbols & self.subst.keys()):
                return e
            e = sp.expand(e.subs(self.subst))
        return e

    def unify(self, a: sp.Expr, b: sp.Expr) -> None:
        a, b = self.resolve(a), self.resolve(b)
        if a == b or sp.expand(a - b) == 0:
            return
        if isinstance(a, sp.Symbol) and a not in self.rigid and a not in b.free_symbols:
            self._bind(a, b)
        elif isinstance(b, sp.Symbol) and b not in self.rigid and b not in a.free_symbols:
            self._bind(b, a)
        else:
            free = sorted((a - b).free_symbols - self.rigid, key=str)
            if len(free) == 1:
                sol = sp.solve(sp.Eq(a, b), free[0])
                if len(sol) == 1 and (sol[0].is_Integer is False or sol[0] > 0):
                    self._bind(free[0], sol[0])
                    return
            elif free and self._solve_linear(sp.expand(a - b), free):
                return
            raise Conflict(a, b)

    def _solve_linear(self, diff: sp.Expr, free: list[sp.Symbol]) -> bool:
        """``diff = 0`` with several open sizes (``cols_A + cols_B = rows_A + cols_C``
        from a block matrix): bind the last open size whose coefficient is ±1 to the
        rest, which is the general solution; the data's sizes are checked at load."""
        if not diff.is_polynomial(*free) or sp.Poly(diff, *free).total_degree() != 1:
            return False
        for sym in reversed(free):
            coeff = diff.coeff(sym)
            if coeff in (1, -1) and sym not in (diff - coeff * sym).free_symbols:
                value = sp.expand(-(diff - coeff * sym) / coeff)
                if value.is_Number and value <= 0:
                    continue
                self._bind(sym, value)
                return True
        return False

    def _bind(self, sym: sp.Symbol, value: sp.Expr) -> None:
        if value.is_Number and (not value.is_Integer or value <= 0):
            raise Conflict(sym, value)
        self.subst[sym] = value
        # keep the substitution idempotent
        for k, v in list(self.subst.items()):
            self.subst[k] = sp.expand(v.subs(sym, value))

    def solution(self) -> dict[sp.Symbol, sp.Expr]:
        return {k: self.resolve(v) for k, v in self.subst.items()}
