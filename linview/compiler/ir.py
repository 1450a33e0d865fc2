"""The intermediate representation: one immutable, interned node type with symbolic shapes.

A :class:`Node` is ``(op, children, attr)`` plus a shape ``(rows, cols)`` of sympy
expressions.  Nodes are *interned*: constructing the same node twice returns the same
object, so structural equality is identity and common subexpressions are shared by
construction.  A :class:`Program` is a list of SSA statements ``view := expr`` over declared
inputs, plus the outputs.

Nodes are built through the smart constructors below (``matmul``, ``add``, ``transpose``...),
which apply the cheap identities.  What each op means (shape rule, delta rule, evaluation,
printing, cost) is its entry in :mod:`linview.compiler.ops`.  The intern table holds nodes
weakly: a node lives as long as something (a program, a trigger, a parent node) refers to it.
"""

from __future__ import annotations

import atexit
import enum
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import sympy as sp

Dim = sp.Expr
Shape = tuple[sp.Expr, sp.Expr]
ONE = sp.Integer(1)


class Op(enum.Enum):
    INPUT = "input"  # attr: name
    VIEW = "view"  # attr: name of a materialized statement result
    FACTOR = "factor"  # attr: name of a trigger temporary (delta factor, dense delta)
    CONST = "const"  # attr: sympy number or size expression; shape (1, 1)
    EYE = "eye"
    ZEROS = "zeros"
    ONES = "ones"
    ADD = "add"
    SUB = "sub"
    NEG = "neg"
    MUL = "mul"  # matrix product
    SCALE = "scale"  # children (s, E): 1x1 s times E
    T = "transpose"
    INV = "inv"
    EMUL = "emul"  # elementwise product (1x1 operands broadcast)
    EDIV = "ediv"  # elementwise division (1x1 operands broadcast)
    SUM = "sum"  # attr: 1 (column sums) or 2 (row sums)
    TRACE = "trace"
    CONCAT = "concat"  # attr: tuple of block-row lengths; children row-major
    SOLVE = "solve"  # children (A, B): A \ B kept as a solve view; attr: (method, tolerance)
    # the wider Octave language (linview/compiler/ops_octave.py)
    MAP = "map"  # elementwise function, attr (name, parameter)
    EBIN = "ebin"  # elementwise binary function with 1x1 broadcasting, attr name
    REDUCE = "reduce"  # attr (max|min, dimension)
    NORM = "norm"  # attr (p, is_vector)
    DIAG = "diag"  # attr tomat | tovec
    KRON = "kron"
    CHOL = "chol"
    PINV = "pinv"
    QR = "qr"  # attr (part Q|R, economy): one output of [Q, R] = qr(A)
    LU = "lu"  # attr (part L|U|P, permuted): one output of [L, U] or [L, U, P] = lu(A)
    INDEX = "index"  # attr (rows, cols): (start, stop[, step]) zero-based half-open, or None
    LOOP = "loop"  # a while loop evaluated as a whole; attr a LoopSpec


LEAVES = frozenset({Op.INPUT, Op.VIEW, Op.FACTOR, Op.CONST, Op.EYE, Op.ZEROS, Op.ONES})
CONSTANT_LEAVES = frozenset({Op.CONST, Op.EYE, Op.ZEROS, Op.ONES})


class ShapeMismatch(Exception):
    """Raised by a shape rule; carries a sentence and the operand shapes involved."""

    def __init__(self, what: str, *shapes: Shape):
        self.what = what
        self.shapes = shapes
        super().__init__(what)


def same_dim(a: Dim, b: Dim) -> bool:
    return a == b or sp.expand(a - b) == 0


def is_scalar_shape(shape: Shape) -> bool:
    return shape[0] == 1 and shape[1] == 1


#: ``op -> (children, attr) -> shape`` for every non-leaf op, registered by
#: :mod:`linview.compiler.ops` (each op's definition lives there, in one entry)
SHAPE_RULES: dict[Op, Callable] = {}


# ------------------------------------------------------------------ nodes
class Node:
    """An interned IR node.  Build with :func:`node` (or the helpers below), never mutate.

    ``shape`` is inferred from the children by the op's shape rule; leaves carry theirs.
    """

    __slots__ = ("op", "children", "attr", "shape", "__weakref__")
    _table: weakref.WeakValueDictionary[tuple, Node] = weakref.WeakValueDictionary()

    op: Op
    children: tuple[Node, ...]
    attr: object
    shape: Shape

    def __new__(cls, op: Op, children: tuple[Node, ...] = (), attr: object = None,
                shape: Shape | None = None):
        if op in LEAVES:
            if shape is None:
                raise ValueError(f"leaf {op} needs a shape")
            shape = (sp.sympify(shape[0]), sp.sympify(shape[1]))
            key = (op, attr, shape)
        else:
            key = (op, children, attr)
        hit = cls._table.get(key)
        if hit is not None:
            return hit
        if op not in LEAVES:
            shape = SHAPE_RULES[op](children, attr)
        self = object.__new__(cls)
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "children", tuple(children))
        object.__setattr__(self, "attr", attr)
        object.__setattr__(self, "shape", shape)
        cls._table[key] = self
        return self

    def __setattr__(self, name, value):
        raise AttributeError("IR nodes are immutable; use replace()")

    def __reduce__(self):
        return (Node, (self.op, self.children, self.attr, self.shape))

    @property
    def rows(self) -> Dim:
        return self.shape[0]

    @property
    def cols(self) -> Dim:
        return self.shape[1]

    @property
    def is_scalar(self) -> bool:
        return is_scalar_shape(self.shape)

    def replace(self, **changes) -> Node:
        op = changes.get("op", self.op)
        children = changes.get("children", self.children)
        attr = changes.get("attr", self.attr)
        shape = changes.get("shape", self.shape if op in LEAVES else None)
        return Node(op, tuple(children), attr, shape)

    def walk(self) -> Iterator[Node]:
        """Every node of the DAG once, children before parents."""
        seen: set[int] = set()
        stack: list[tuple[Node, bool]] = [(self, False)]
        while stack:
            n, done = stack.pop()
            if done:
                yield n
                continue
            if id(n) in seen:
                continue
            seen.add(id(n))
            stack.append((n, True))
            stack.extend((c, False) for c in reversed(n.children))

    def __repr__(self) -> str:  # math notation: linview.compiler.printer.fmt
        if self.op in LEAVES:
            return f"{self.op.name}({self.attr!r}, {self.rows}x{self.cols})"
        return f"{self.op.name}({', '.join(map(repr, self.children))})"


# Drop the table before the interpreter tears sympy down: its removal callbacks re-hash keys.
atexit.register(Node._table.clear)


def node(op: Op, *children: Node, attr: object = None, shape: Shape | None = None) -> Node:
    return Node(op, tuple(children), attr, shape)


# ------------------------------------------------------------------ builders
def const(value) -> Node:
    v = sp.nsimplify(value) if isinstance(value, int) else sp.sympify(value)
    return Node(Op.CONST, (), v, (ONE, ONE))


def eye(rows: Dim, cols: Dim | None = None) -> Node:
    return Node(Op.EYE, (), None, (rows, rows if cols is None else cols))


def zeros(rows: Dim, cols: Dim) -> Node:
    return Node(Op.ZEROS, (), None, (rows, cols))


def ones(rows: Dim, cols: Dim) -> Node:
    return Node(Op.ONES, (), None, (rows, cols))


def view(name: str, shape: Shape) -> Node:
    return Node(Op.VIEW, (), name, shape)


def factor(name: str, shape: Shape) -> Node:
    return Node(Op.FACTOR, (), name, shape)


def transpose(a: Node) -> Node:
    """``aᵀ`` with the cheap identities applied (``(aᵀ)ᵀ = a``, ``Iᵀ = I``, 1x1)."""
    if a.op is Op.T:
        return a.children[0]
    if a.is_scalar or (a.op is Op.EYE and a.rows == a.cols):
        return a
    if a.op in (Op.ZEROS, Op.ONES, Op.EYE):
        return a.replace(shape=(a.cols, a.rows))
    return node(Op.T, a)


def is_zero(a: Node) -> bool:
    return a.op is Op.ZEROS or (a.op is Op.CONST and a.attr == 0)


def is_identity(a: Node) -> bool:
    return (a.op is Op.EYE and a.rows == a.cols) or (a.op is Op.CONST and a.attr == 1)


def matmul(a: Node, b: Node) -> Node:
    """``a·b`` with identity, zero and scalar shortcuts."""
    if a.op is Op.CONST:
        return scale(a, b)
    if b.op is Op.CONST:
        return scale(b, a)
    if a.is_scalar and b.is_scalar:  # 1x1 times 1x1: elementwise, also for plain numbers
        return node(Op.EMUL, a, b)
    if is_identity(a) and a.cols == b.rows:
        return b
    if is_identity(b) and b.rows == a.cols:
        return a
    if is_zero(a) or is_zero(b):
        return zeros(a.rows, b.cols)
    return node(Op.MUL, a, b)


def add(a: Node, b: Node) -> Node:
    if is_zero(a):
        return b
    if is_zero(b):
        return a
    return node(Op.ADD, a, b)


def neg(a: Node) -> Node:
    if a.op is Op.NEG:
        return a.children[0]
    if a.op is Op.CONST:
        return const(-a.attr)
    if is_zero(a):
        return a
    return node(Op.NEG, a)


def sub(a: Node, b: Node) -> Node:
    if is_zero(b):
        return a
    if is_zero(a):
        return neg(b)
    return node(Op.SUB, a, b)


def scale(s: Node, a: Node) -> Node:
    if s.op is Op.CONST and s.attr == 1:
        return a
    if s.op is Op.CONST and s.attr == -1:
        return neg(a)
    if a.is_scalar and s.op is Op.CONST and a.op is Op.CONST:
        return const(s.attr * a.attr)
    if is_zero(a) or is_zero(s):
        return zeros(a.rows, a.cols)
    return node(Op.SCALE, s, a)


def hstack(parts: list[Node]) -> Node:
    """``[p1, p2, ...]`` side by side (one block row)."""
    parts = [p for p in parts if p.cols != 0]
    if len(parts) == 1:
        return parts[0]
    return Node(Op.CONCAT, tuple(parts), (len(parts),))


def vstack(parts: list[Node]) -> Node:
    parts = [p for p in parts if p.rows != 0]
    if len(parts) == 1:
        return parts[0]
    return Node(Op.CONCAT, tuple(parts), (1,) * len(parts))


def map_leaves(root: Node, fn: Callable[[Node], Node | None]) -> Node:
    """Rebuild ``root`` with every leaf ``x`` replaced by ``fn(x)`` (``None`` keeps it)."""
    memo: dict[int, Node] = {}
    for n in root.walk():
        if n.op in LEAVES:
            out = fn(n)
            memo[id(n)] = n if out is None else out
        else:
            kids = tuple(memo[id(c)] for c in n.children)
            memo[id(n)] = n if kids == n.children else n.replace(children=kids)
    return memo[id(root)]


def rebuild(root: Node, fn: Callable[[Node], Node]) -> Node:
    """Bottom-up rewrite: ``fn`` sees each node with already-rewritten children."""
    memo: dict[int, Node] = {}
    for n in root.walk():
        kids = tuple(memo[id(c)] for c in n.children)
        m = n if kids == n.children else n.replace(children=kids)
        memo[id(n)] = fn(m)
    return memo[id(root)]


def substitute(root: Node, by: dict[int, Node]) -> Node:
    """``root`` with every node whose id is in ``by`` replaced by ``by[id]``."""
    memo: dict[int, Node] = {}
    for n in root.walk():
        if id(n) in by:
            memo[id(n)] = by[id(n)]
        else:
            kids = tuple(memo[id(c)] for c in n.children)
            memo[id(n)] = n if kids == n.children else n.replace(children=kids)
    return memo[id(root)]


def leaves(root: Node, *ops: Op) -> list[Node]:
    return [n for n in root.walk() if n.op in (ops or LEAVES)]


# ------------------------------------------------------------------ programs
@dataclass(frozen=True)
class InputDecl:
    """A program input.  ``scalar`` inputs are 1x1 parameters (e.g. a damping factor)."""

    name: str
    shape: Shape
    dynamic: bool
    scalar: bool = False
    storage: str = "dense"  # "sparse" or "stochastic" when declared by a pragma

    @property
    def ref(self) -> Node:
        return Node(Op.INPUT, (), self.name, self.shape)


@dataclass(frozen=True)
class Statement:
    """``name := expr``.  ``origin`` is the source text it came from, ``line`` its line."""

    name: str
    expr: Node
    origin: str = ""
    line: int = 0

    @property
    def ref(self) -> Node:
        return view(self.name, self.expr.shape)


@dataclass(frozen=True)
class Program:
    """A lowered program: inputs, SSA statements in dependency order, and outputs.

    ``outputs`` maps each output name to the node holding its value (a view or an input
    reference, or a constant).  ``dims`` lists the symbolic sizes; ``bindings`` holds the
    ones fixed so far (by pragmas with literals, ``--dims`` or data).
    """

    name: str
    inputs: tuple[InputDecl, ...]
    statements: tuple[Statement, ...]
    outputs: tuple[tuple[str, Node], ...]
    filename: str = "<string>"
    source: str = ""
    bindings: tuple[tuple[str, int], ...] = ()
    notes: tuple[str, ...] = field(default=())
    #: sizes the compiled program assumes are not 1, with the reason (checked at load)
    not_one: tuple[tuple[sp.Expr, str], ...] = ()

    def input(self, name: str) -> InputDecl:
        for d in self.inputs:
            if d.name == name:
                return d
        raise KeyError(name)

    def statement(self, name: str) -> Statement:
        for s in self.statements:
            if s.name == name:
                return s
        raise KeyError(name)

    @property
    def dynamic(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.inputs if d.dynamic)

    @property
    def dim_symbols(self) -> list[sp.Symbol]:
        syms: set[sp.Symbol] = set()
        for d in self.inputs:
            for e in d.shape:
                syms |= e.free_symbols
        return sorted(syms, key=lambda s: s.name)

    def with_statements(self, statements, outputs=None) -> Program:
        return replace(self, statements=tuple(statements),
                       outputs=self.outputs if outputs is None else tuple(outputs))

    def subs(self, mapping: dict) -> Program:
        """Substitute sizes everywhere (``{symbol: expr}``), rebuilding all nodes."""
        if not mapping:
            return self

        def fix_shape(shape: Shape) -> Shape:
            return (sp.sympify(shape[0]).subs(mapping), sp.sympify(shape[1]).subs(mapping))

        memo: dict[int, Node] = {}

        def fix(root: Node) -> Node:
            for n in root.walk():
                if id(n) in memo:
                    continue
                if n.op in LEAVES:
                    attr = n.attr
                    if n.op is Op.CONST:
                        attr = sp.sympify(attr).subs(mapping)
                    memo[id(n)] = Node(n.op, (), attr, fix_shape(n.shape))
                else:
                    attr = n.attr
                    if n.op is Op.INDEX:  # slice bounds are sizes
                        attr = tuple(None if sl is None else tuple(
                            sp.expand(sp.sympify(b).subs(mapping)) for b in sl) for sl in attr)
                    memo[id(n)] = n.replace(children=tuple(memo[id(c)] for c in n.children),
                                            attr=attr)
            return memo[id(root)]

        return replace(
            self,
            inputs=tuple(replace(d, shape=fix_shape(d.shape)) for d in self.inputs),
            statements=tuple(replace(s, expr=fix(s.expr)) for s in self.statements),
            outputs=tuple((k, fix(v)) for k, v in self.outputs),
            not_one=tuple((sp.sympify(e).subs(mapping), why) for e, why in self.not_one),
        )
