"""The IR checker: validates programs and triggers between passes.

Shapes are inferred by construction (:data:`linview.compiler.ir.SHAPE_RULES`); the checker verifies
what construction cannot: every reference names something defined earlier with the same
shape, SSA names are unique, statements hold no trigger temporaries, and every delta term
``P Qᵀ`` has the view's shape with ``P`` and ``Q`` of the same rank.  It runs after every
pass when enabled: always in the test suite (``tests/conftest.py``), or with
``LINVIEW_CHECK=1``.
"""

from __future__ import annotations

import os

from linview.compiler import ir
from linview.compiler.delta import Strategy, Trigger
from linview.compiler.ir import Node, Op, same_dim

_enabled = os.environ.get("LINVIEW_CHECK", "") not in ("", "0")


class CheckError(AssertionError):
    """An internal invariant of the IR is broken (a compiler bug, never a user error)."""


def enable(on: bool = True) -> None:
    global _enabled
    _enabled = on


def enabled() -> bool:
    return _enabled


def _same_shape(a, b) -> bool:
    return same_dim(a[0], b[0]) and same_dim(a[1], b[1])


def _refs(n: Node, scope: dict, where: str, factors: dict | None = None) -> None:
    for m in n.walk():
        if m.op in (Op.VIEW, Op.INPUT):
            if m.attr not in scope:
                raise CheckError(f"{where}: reference to undefined {m.op.value} {m.attr}")
            if not _same_shape(scope[m.attr], m.shape):
                raise CheckError(f"{where}: {m.attr} used as {m.shape}, defined as "
                                 f"{scope[m.attr]}")
        elif m.op is Op.FACTOR:
            if factors is None or m.attr not in factors:
                raise CheckError(f"{where}: trigger temporary {m.attr} used out of place")
            if not _same_shape(factors[m.attr], m.shape):
                raise CheckError(f"{where}: factor {m.attr} used as {m.shape}, defined as "
                                 f"{factors[m.attr]}")


def check_program(program: ir.Program, after: str = "") -> None:
    where = f"after {after}" if after else "program"
    scope: dict[str, tuple] = {}
    for d in program.inputs:
        if d.name in scope:
            raise CheckError(f"{where}: input {d.name} declared twice")
        scope[d.name] = d.shape
    for st in program.statements:
        if st.name in scope:
            raise CheckError(f"{where}: {st.name} defined twice (SSA)")
        _refs(st.expr, scope, f"{where}, statement {st.name}")
        scope[st.name] = st.expr.shape
    for name, n in program.outputs:
        _refs(n, scope, f"{where}, output {name}")


def check_trigger(trigger: Trigger, program: ir.Program, after: str = "") -> None:
    where = f"after {after}, trigger {trigger.input}"
    scope = {d.name: d.shape for d in program.inputs}
    scope.update({s.name: s.expr.shape for s in program.statements})
    first = trigger.deltas[0]
    factors: dict[str, tuple] = {first.left.attr: first.left.shape,
                                 first.right.attr: first.right.shape}
    for vd in trigger.deltas:
        w = f"{where}, Δ{vd.name}"
        if not _same_shape(vd.target.shape, scope[vd.name]):
            raise CheckError(f"{w}: target shape differs from the view")
        for t in vd.terms:
            _refs(t.P, scope, w, factors)
            _refs(t.Q, scope, w, factors)
            if not (same_dim(t.P.rows, vd.target.rows) and same_dim(t.Q.rows, vd.target.cols)
                    and same_dim(t.P.cols, t.Q.cols)):
                raise CheckError(f"{w}: term {t.P.shape}·{t.Q.shape}ᵀ does not fit "
                                 f"{vd.target.shape}")
        for e in (vd.dense, vd.new_value):
            if e is not None:
                _refs(e, scope, w, factors)
                if not _same_shape(e.shape, vd.target.shape):
                    raise CheckError(f"{w}: {e.shape} does not fit {vd.target.shape}")
        if vd.strategy is Strategy.INCR and not same_dim(vd.left.cols, vd.right.cols):
            raise CheckError(f"{w}: factor blocks of different rank")
        factors[vd.left.attr] = vd.left.shape
        if vd.right.op is Op.FACTOR:
            factors[vd.right.attr] = vd.right.shape


__all__ = ["CheckError", "check_program", "check_trigger", "enable", "enabled"]
