"""Abstract syntax of the linview dialect: frozen dataclasses built by the parser.

Every node carries ``pos = (line, column)`` (1-based) so that later stages can point at the
source when they reject something.  The AST is purely syntactic: names are not resolved,
shapes are unknown and calls to unknown functions are still representable (the lowering
stage rejects them with a located error).
"""

from __future__ import annotations

from dataclasses import dataclass, field

Pos = tuple[int, int]


# ---------------------------------------------------------------- expressions
@dataclass(frozen=True)
class Num:
    """A numeric literal such as ``1``, ``0.85`` or ``1e-3``."""

    value: float
    text: str
    pos: Pos = field(default=(0, 0), compare=False)


@dataclass(frozen=True)
class Name:
    """A reference to a variable (input, earlier assignment or loop variable)."""

    id: str
    pos: Pos = field(default=(0, 0), compare=False)


@dataclass(frozen=True)
class Unary:
    """``-E``, ``+E`` or ``!E`` (``~E`` is read as ``!E``)."""

    op: str  # "-" | "+" | "!"
    operand: Expr
    pos: Pos = field(default=(0, 0), compare=False)


@dataclass(frozen=True)
class Binary:
    """A binary operator: ``+ - * / \\ .* ./ ^ .^``, a comparison ``== ~= < <= > >=``
    (``!=`` is read as ``~=``) or ``&& ||``."""

    op: str
    left: Expr
    right: Expr
    pos: Pos = field(default=(0, 0), compare=False)


@dataclass(frozen=True)
class Transpose:
    """``E'`` (``conjugate=True``) or ``E.'``; identical for real matrices."""

    operand: Expr
    conjugate: bool = True
    pos: Pos = field(default=(0, 0), compare=False)


@dataclass(frozen=True)
class Call:
    """``f(a, b, ...)``: a built-in function call (or, if ``f`` is a variable, indexing)."""

    func: str
    args: tuple[Expr, ...]
    pos: Pos = field(default=(0, 0), compare=False)


@dataclass(frozen=True)
class Matrix:
    """Block concatenation ``[A, B; C, D]``: a tuple of block rows."""

    rows: tuple[tuple[Expr, ...], ...]
    pos: Pos = field(default=(0, 0), compare=False)


@dataclass(frozen=True)
class Colon:
    """A lone ``:`` as an index: every row or every column (``X(:, j)``)."""

    pos: Pos = field(default=(0, 0), compare=False)


@dataclass(frozen=True)
class Span:
    """A range ``start:stop`` or ``start:step:stop`` as an index (``X(2:end, :)``)."""

    start: Expr
    stop: Expr
    step: Expr | None = None
    pos: Pos = field(default=(0, 0), compare=False)


@dataclass(frozen=True)
class End:
    """``end`` inside an index: the last row or column of the matrix being indexed."""

    pos: Pos = field(default=(0, 0), compare=False)


@dataclass(frozen=True)
class Str:
    """A quoted word as a function argument: ``norm(X, 'fro')``."""

    value: str
    pos: Pos = field(default=(0, 0), compare=False)


Expr = Num | Name | Unary | Binary | Transpose | Call | Matrix | Colon | Span | End | Str


# ---------------------------------------------------------------- statements
@dataclass(frozen=True)
class Assign:
    """``target = value``."""

    target: str
    value: Expr
    pos: Pos = field(default=(0, 0), compare=False)


@dataclass(frozen=True)
class MultiAssign:
    """``[a, b, ...] = f(...)``: the outputs of a function with several results
    (``[Q, R] = qr(A)``, ``[L, U, P] = lu(A)``, ``[r, c] = size(A)``)."""

    targets: tuple[str, ...]
    value: Expr
    pos: Pos = field(default=(0, 0), compare=False)

    @property
    def target(self) -> str:
        """The targets as the source writes them, for messages."""
        return "[" + ", ".join(self.targets) + "]"


@dataclass(frozen=True)
class For:
    """``for var = start:stop ... end`` (or ``start:step:stop``); bounds are expressions
    here and must be integer literals by the time the loop is lowered."""

    var: str
    start: Expr
    stop: Expr
    body: tuple[Stmt, ...]
    step: Expr | None = None
    pos: Pos = field(default=(0, 0), compare=False)


@dataclass(frozen=True)
class If:
    """``if c1 ... elseif c2 ... else ... end``: ``branches`` holds ``(condition, body)``
    pairs in order, ``orelse`` the ``else`` body (empty when there is none)."""

    branches: tuple[tuple[Expr, tuple[Stmt, ...]], ...]
    orelse: tuple[Stmt, ...] = ()
    pos: Pos = field(default=(0, 0), compare=False)


@dataclass(frozen=True)
class While:
    """``while cond ... end``."""

    cond: Expr
    body: tuple[Stmt, ...]
    pos: Pos = field(default=(0, 0), compare=False)


Stmt = Assign | MultiAssign | For | If | While


# ---------------------------------------------------------------- pragmas
@dataclass(frozen=True)
class DimSpec:
    """``X(m, n)`` inside a pragma; each size is a dimension name or an integer literal."""

    name: str
    sizes: tuple[str | int, ...]
    pos: Pos = field(default=(0, 0), compare=False)


@dataclass(frozen=True)
class Pragma:
    """A ``%#linview KIND ...`` line.

    kinds: ``dynamic NAMES``, ``static NAMES``, ``scalar NAMES``,
    ``dims X(m,n) ...``, ``input X(n,n) ...`` (scripts only), ``sparse NAMES``,
    ``stochastic NAMES``, ``solve METHOD``, ``tolerance VALUE`` (one value in ``names``).
    ``names`` holds bare names, ``specs`` holds ``X(m,n)`` items.
    """

    kind: str
    names: tuple[str, ...] = ()
    specs: tuple[DimSpec, ...] = ()
    pos: Pos = field(default=(0, 0), compare=False)


# ---------------------------------------------------------------- files
@dataclass(frozen=True)
class Function:
    """A function file: ``function [outs] = name(params) body end``."""

    name: str
    params: tuple[str, ...]
    outputs: tuple[str, ...]
    body: tuple[Stmt, ...]
    pragmas: tuple[Pragma, ...]
    pos: Pos = field(default=(0, 0), compare=False)


@dataclass(frozen=True)
class Script:
    """A script (no ``function`` line); inputs come from ``%#linview input`` pragmas and
    outputs are the variables assigned last (or named by ``%#linview output``)."""

    body: tuple[Stmt, ...]
    pragmas: tuple[Pragma, ...]
    pos: Pos = field(default=(0, 0), compare=False)


Module = Function | Script


# ---------------------------------------------------------------- source form
def show(e) -> str:
    """An expression in source form, for messages."""
    if isinstance(e, Num):
        return e.text
    if isinstance(e, Name):
        return e.id
    if isinstance(e, End):
        return "end"
    if isinstance(e, Colon):
        return ":"
    if isinstance(e, Span):
        mid = f"{show(e.step)}:" if e.step is not None else ""
        return f"{show(e.start)}:{mid}{show(e.stop)}"
    if isinstance(e, Unary):
        return f"{e.op}{show(e.operand)}"
    if isinstance(e, Binary):
        sep = "" if e.op in ("^", ".^") else " "
        return f"{show(e.left)}{sep}{e.op}{sep}{show(e.right)}"
    if isinstance(e, Transpose):
        return f"{show(e.operand)}{chr(39) if e.conjugate else '.' + chr(39)}"
    if isinstance(e, Call):
        return f"{e.func}({', '.join(show(a) for a in e.args)})"
    if isinstance(e, Str):
        return f"'{e.value}'"
    if isinstance(e, Matrix):
        return "[" + "; ".join(", ".join(show(x) for x in row) for row in e.rows) + "]"
    return "..."
