"""How the Spark backend prints the wider Octave language: the NumPy backend's printer
(:mod:`linview.backends.numpy.render`) with the ops of ``ops_octave.py`` sent to the Spark
runtime's functions (:mod:`.octave`), which run them block by block or on the driver.

Indexing (``A[0:20, 0:20]``), ``diag`` and ``while`` loops print as on NumPy; elementwise
functions and operators print as ``rt.elementwise("abs", A)``, ``rt.elementwise("lt", A,
B)``, ``max(A, [], 1)`` as ``rt.reduce("max", A, axis=0)``; an op that runs on the driver
carries ``at=(line, column)``, where the user wrote it, for its error message.
"""

from __future__ import annotations

from linview.backends.numpy import octave as numpy_octave
from linview.backends.numpy.render import RENDER, ExprPrinter
from linview.compiler.ir import Node, Op
from linview.compiler.ops_octave import describe

_ATOM = 10
#: the ops printed differently from NumPy (every other op prints as in ``RENDER``)
_WORDS = {Op.KRON: "kron", Op.CHOL: "chol", Op.PINV: "pinv", Op.QR: "qr", Op.LU: "lu",
          Op.NORM: "norm"}


def _map(e: SparkPrinter, n: Node):
    fn, param = n.attr
    extra = f", exponent={float(param)!r}" if fn == "power" else ""
    return f'rt.elementwise("{fn}", {e.code(n.children[0])}{extra})', _ATOM


def _ebin(e: SparkPrinter, n: Node):
    a, b = (e.code(c) for c in n.children)
    return f'rt.elementwise("{n.attr}", {a}, {b})', _ATOM


def _reduce(e: SparkPrinter, n: Node):
    return (f'rt.reduce("{n.attr[0]}", {e.code(n.children[0])}, axis={n.attr[1] - 1})',
            _ATOM)


def _with_at(render):
    """The NumPy rendering of a runtime call, with ``at=(line, column)`` added."""
    def out(e: SparkPrinter, n: Node):
        at = e.at(n)
        before = len(e.lines)
        code, prec = render(e, n)
        if at is None:
            return code, prec
        if code.startswith("rt.") and code.endswith(")"):
            return f"{code[:-1]}, at={at!r})", prec
        for i in range(before, len(e.lines)):  # qr/lu: the factorization's own line
            line = e.lines[i]
            if line.rstrip().endswith(")") and " = rt." in line:
                e.lines[i] = f"{line.rstrip()[:-1]}, at={at!r})"
        return code, prec
    return out


def _kron(e: SparkPrinter, n: Node):
    a, b = (e.code(c) for c in n.children)
    return f"rt.kron({a}, {b})", _ATOM


SPARK_RENDER = {
    **RENDER,
    Op.MAP: _map, Op.EBIN: _ebin, Op.REDUCE: _reduce,
    Op.KRON: _with_at(_kron),
    **{op: _with_at(numpy_octave.RENDER[op]) for op in (Op.CHOL, Op.PINV, Op.QR, Op.LU,
                                                         Op.NORM)},
}


class SparkPrinter(ExprPrinter):
    """The NumPy printer with :data:`SPARK_RENDER`; ``statements`` maps a view to its
    statement (for the place of a construct), set by the generator's subclass."""

    statements: dict = {}
    source: str = ""

    def _render(self, n: Node):
        return SPARK_RENDER[n.op](self, n)

    def at(self, n: Node) -> tuple[int, int] | None:
        """``(line, column)`` of ``n``'s function in the statement being printed."""
        st = self.statements.get(self.label)
        if st is None or not st.line:
            return None
        return locate_word(self.source, st.line, _WORDS.get(n.op, describe(n)))


def locate_word(source: str, line: int, word: str) -> tuple[int, int]:
    """``(line, column)`` of ``word(`` in that line (column 1 when it is not there)."""
    lines = source.splitlines()
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    col = text.find(f"{word}(") if word[0].isalpha() else text.find(word)
    return line, col + 1 if col >= 0 else 1
