"""How the NumPy backend prints IR expressions: :class:`ExprPrinter` (named temporaries for
shared subexpressions, fused products of one view) and :data:`RENDER`, the NumPy meaning of
each op, one entry per op.
"""

from __future__ import annotations

import sympy as sp

from linview.backends.common import Namer
from linview.backends.numpy import octave
from linview.compiler import printer
from linview.compiler.ir import Node, Op
from linview.compiler.plan import size_code

_ATOM, _UNARY, _MUL, _ADD = 10, 8, 7, 6  # Python's precedence levels, as far as used
ATOM, MUL = _ATOM, _MUL  # for printers built on this one (solve_codegen.py)


class ExprPrinter:
    """Prints IR nodes as NumPy code, naming shared subexpressions as temporaries."""

    def __init__(self, names: Namer, lines: list[str], indent: str, trigger: bool,
                 shared: set[int] = frozenset(), update_factors=()):
        self.names = names
        self.lines = lines
        self.indent = indent
        self.trigger = trigger
        self.shared = shared
        self.update_factors = set(update_factors)
        self.temps: dict[int, str] = {}
        self.count = 0
        self.label = ""  # the view being computed, for error messages
        self.groups: dict[int, list[Node]] = {}  # products of one view, see fuse_products
        self.defined: set[str] = set(update_factors)  # factor blocks computed so far
        #: {view: (code, block, result)}: a vector to multiply in the view's next fused
        #: pass (a probe's, :meth:`NumpyGenerator._phase1`), and the results of those done
        self.riders: dict[str, tuple[str, str, str]] = {}
        self.riders_done: dict[str, str] = {}
        #: views known to be symmetric: their products read them by columns (``Wᵀ·B``)
        self.symmetric: set[str] = set()

    def fuse_products(self, roots: list[Node]) -> None:
        """Plan one pass per view and trigger level: the products ``W F1``, ``Wᵀ F2``... of
        one view with factor blocks become ``rt.fused_dot(W, F1, F2, ops="NT")`` (one read of
        W for all of them), emitted when the first is needed, with every member whose
        factor is already computed."""
        seen: set[int] = set()
        groups: dict[int, list[Node]] = {}
        for r in roots:
            for n in r.walk():
                if id(n) in seen or n.op is not Op.MUL:
                    continue
                seen.add(id(n))
                a, b = n.children
                leaf = a.children[0] if a.op is Op.T else a
                if leaf.op in (Op.VIEW, Op.INPUT) and b.op is Op.FACTOR:
                    groups.setdefault(id(leaf), []).append(n)
        for members in groups.values():
            if len(members) > 1:
                for n in members:
                    self.groups[id(n)] = members

    def _fused(self, n: Node) -> str | None:
        """The temporary holding ``n`` after emitting its group's ``rt.fused_dot``, or None
        when fewer than two products of the group are ready."""
        ready = [m for m in self.groups[id(n)] if id(m) not in self.temps
                 and m.children[1].attr in self.defined]
        if len(ready) < 2 or n not in ready:
            # computed on its own: later passes over the view must not compute it again
            members = self.groups.pop(id(n), [])
            if n in members:
                members.remove(n)
            return None
        names = [self.names("temp", f"t{self.count + i}") for i in range(len(ready))]
        self.count += len(ready)
        a = n.children[0]
        leaf = a.children[0] if a.op is Op.T else a
        view = self.code(leaf)
        blocks = [self.names("factor", m.children[1].attr) for m in ready]
        ops = "".join("T" if m.children[0].op is Op.T else "N" for m in ready)
        math = ", ".join(f"{printer.fmt(m.children[0])} {b}" for m, b in zip(ready, blocks,
                                                                           strict=True))
        rider = self.riders.pop(leaf.attr, None) if leaf.op is Op.VIEW else None
        if rider is not None:  # the probe's vector rides along in the same pass
            code, block, result = rider
            self.lines.append(f"{self.indent}{block} = {code}")
            math += f", {view} {block} (the probe's)"
            blocks, ops = blocks + [block], ops + "N"
            names.append(result)
            self.riders_done[leaf.attr] = result
        if leaf.op is Op.VIEW and leaf.attr in self.symmetric:
            ops = "T" * len(ops)  # W = Wᵀ: Wᵀ·B reads W's columns, the faster way
            math += f" ({view} is symmetric)"
        self.lines.append(f"{self.indent}# {math}: the products reading {view}, together")
        self.lines.append(f"{self.indent}{', '.join(names)} = rt.fused_dot({view}, "
                          f"{', '.join(blocks)}, ops={ops!r})")
        for m, name in zip(ready, names[:len(ready)], strict=True):
            self.temps[id(m)] = name
        return self.temps[id(n)]

    def code(self, n: Node) -> str:
        return self._code(n)[0]

    def _wrap(self, n: Node, level: int) -> str:
        s, p = self._code(n)
        return f"({s})" if p < level else s

    def _code(self, n: Node) -> tuple[str, int]:
        if id(n) in self.temps:
            return self.temps[id(n)], _ATOM
        if id(n) in self.groups:
            name = self._fused(n)
            if name is not None:
                return name, _ATOM
        if id(n) in self.shared:
            text = self._render(n)[0]
            name = self.names("temp", f"t{self.count}")
            self.count += 1
            self.lines.append(f"{self.indent}{name} = {text}  # {printer.fmt(n)}")
            self.temps[id(n)] = name
            return name, _ATOM
        return self._render(n)

    def _render(self, n: Node) -> tuple[str, int]:
        return RENDER[n.op](self, n)


# ------------------------------------------------------------------ how each op is printed
def _leaf_name(e: ExprPrinter, n: Node):
    return e.names("factor" if n.op is Op.FACTOR else "view", n.attr), _ATOM


def _const(e: ExprPrinter, n: Node):
    v = sp.sympify(n.attr)
    return (repr(float(v)) if v.is_Number else f"float({size_code(v)})"), _ATOM


def _eye(e: ExprPrinter, n: Node):
    if n.rows == n.cols:
        return f"np.eye({size_code(n.rows)})", _ATOM
    return f"np.eye({size_code(n.rows)}, {size_code(n.cols)})", _ATOM


def _filled(e: ExprPrinter, n: Node):
    return f"np.{n.op.value}(({size_code(n.rows)}, {size_code(n.cols)}))", _ATOM


def _infix(symbol: str, level: int):
    """A left-associative NumPy infix operator (1x1 operands broadcast)."""
    def render(e: ExprPrinter, n: Node):
        a, b = n.children
        return f"{e._wrap(a, level)} {symbol} {e._wrap(b, level + 1)}", level
    return render


def _matmul(e: ExprPrinter, n: Node):
    a, b = n.children
    reads_view = a.op in (Op.VIEW, Op.INPUT) or (
        a.op is Op.T and a.children[0].op in (Op.VIEW, Op.INPUT))
    if e.trigger and reads_view and b.op is Op.FACTOR and b.attr in e.update_factors:
        return f"rt.dot({e.code(a)}, {e.code(b)})", _ATOM  # one-hot factors: touched columns
    return f"{e._wrap(a, _MUL)} @ {e._wrap(b, _MUL + 1)}", _MUL


def _inv(e: ExprPrinter, n: Node):
    if e.trigger:  # a trigger's k×k core
        return f'rt.core_inv({e.code(n.children[0])}, "{e.label}")', _ATOM
    return f'rt.inv({e.code(n.children[0])}, "{e.label}", self.condition_limit)', _ATOM


def _concat(e: ExprPrinter, n: Node):
    blocks = [f"np.full((1, 1), {e.code(c)})" if c.op is Op.CONST else e.code(c)
              for c in n.children]
    if len(n.attr) == 1:
        return "np.hstack([" + ", ".join(blocks) + "])", _ATOM
    if all(k == 1 for k in n.attr):
        return "np.vstack([" + ", ".join(blocks) + "])", _ATOM
    rows, i = [], 0
    for k in n.attr:
        rows.append("[" + ", ".join(blocks[i:i + k]) + "]")
        i += k
    return "np.block([" + ", ".join(rows) + "])", _ATOM


#: op -> ``render(expr_printer, node) -> (code, precedence)``: the NumPy meaning of each op
RENDER = {
    Op.INPUT: _leaf_name, Op.VIEW: _leaf_name, Op.FACTOR: _leaf_name,
    Op.CONST: _const, Op.EYE: _eye, Op.ZEROS: _filled, Op.ONES: _filled,
    Op.ADD: _infix("+", _ADD), Op.SUB: _infix("-", _ADD), Op.SCALE: _infix("*", _MUL),
    Op.EMUL: _infix("*", _MUL), Op.EDIV: _infix("/", _MUL),
    Op.NEG: lambda e, n: (f"-{e._wrap(n.children[0], _UNARY)}", _UNARY),
    Op.MUL: _matmul,
    Op.T: lambda e, n: (f"{e._wrap(n.children[0], _ATOM)}.T", _ATOM),
    Op.INV: _inv,
    Op.SUM: lambda e, n: (f"{e._wrap(n.children[0], _ATOM)}.sum(axis={n.attr - 1}, "
                          "keepdims=True)", _ATOM),
    Op.TRACE: lambda e, n: (f"np.full((1, 1), np.trace({e.code(n.children[0])}))", _ATOM),
    Op.CONCAT: _concat,
    # re-solved through the guarded inverse; prog.load() keeps solve views with a residual
    Op.SOLVE: lambda e, n: (f'rt.inv({e.code(n.children[0])}, "{e.label}") @ '
                            f'{e._wrap(n.children[1], _MUL + 1)}', _MUL),
    **octave.RENDER,  # the wider Octave language (backends/numpy/octave.py)
}


def owned_code(ex: ExprPrinter, n: Node) -> str:
    """Code for ``n`` as an array of its own: a view (or its transpose) used as a factor or
    a new value is copied, because phase 2 updates views in place before reading it."""
    code = ex.code(n)
    leaf = n.children[0] if n.op is Op.T else n
    return f"rt.owned({code})" if leaf.op in (Op.VIEW, Op.INPUT) else code
