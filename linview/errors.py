"""The exceptions linview raises.  Every one derives from :class:`LinviewError`.

A user-facing error carries a message that says what is wrong and what is supported
instead.  Errors tied to a place in a ``.m`` file carry that place and render it the way
compilers do::

    ols.m:3:14: error: unknown function 'pinv'
        beta = pinv(X) * Y;
               ^
    supported functions: eye, zeros, ones, size, inv, transpose, sum, trace
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SourceLocation:
    """A 1-based line/column position in a named source text."""

    filename: str
    line: int
    column: int
    source_line: str = ""

    def render(self) -> str:
        head = f"{self.filename}:{self.line}:{self.column}"
        if not self.source_line:
            return head
        caret = " " * (self.column - 1) + "^"
        return f"{head}\n    {self.source_line.rstrip()}\n    {caret}"


def locate(source: str, filename: str, line: int, column: int) -> SourceLocation:
    """Build a :class:`SourceLocation`, copying the offending line out of ``source``."""
    lines = source.splitlines()
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    return SourceLocation(filename, line, column, text.expandtabs(1))


class LinviewError(Exception):
    """Base class of every error linview raises on purpose."""

    def __init__(self, message: str, location: SourceLocation | None = None,
                 hint: str | None = None):
        self.message = message
        self.location = location
        self.hint = hint
        super().__init__(self._render())

    def _render(self) -> str:
        if self.location is None:
            text = self.message
        else:
            loc = self.location
            first = f"{loc.filename}:{loc.line}:{loc.column}: {self.message}"
            if loc.source_line:
                caret = " " * (loc.column - 1) + "^"
                first += f"\n    {loc.source_line.rstrip()}\n    {caret}"
            text = first
        if self.hint:
            text += f"\n{self.hint}"
        return text


class ParseError(LinviewError):
    """The source is not in the linview dialect of Octave (syntax or unsupported construct)."""


class ShapeError(LinviewError):
    """Matrix dimensions do not agree, or a size cannot be determined."""


class CompileError(LinviewError):
    """The program is well-formed but cannot be compiled (e.g. unknown backend, bad option)."""


class InputError(LinviewError):
    """Inputs given to ``load()`` are missing, extra, of the wrong shape, dtype or non-finite."""


class UpdateError(LinviewError):
    """An update was rejected (wrong input, shape, rank, non-finite values); nothing changed."""


class NumericalError(LinviewError):
    """A numerically unsafe state (e.g. a singular matrix to invert); nothing changed."""


class MemoryBudgetError(LinviewError):
    """The inputs and views would need more memory than the budget (``memory_budget=``,
    ``--memory-budget``; default half the machine's memory): refused before anything was
    allocated, or out of memory anyway.  The message names the statements and their bytes."""


class StateError(LinviewError):
    """A saved state cannot be restored (different program, corrupt file)."""


class BackendError(LinviewError):
    """A backend could not run (e.g. Spark or Java missing); the message says what to install."""
