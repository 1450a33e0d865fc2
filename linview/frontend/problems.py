"""Syntax problems found while parsing, before they are located in the source.

The post-lexer, the transformer, the pragma reader and the error diagnosis raise
:class:`Problem` (line and column only); :func:`linview.frontend.parser.parse` turns it into
a :class:`~linview.errors.ParseError` with :func:`locate_problem`.
"""

from __future__ import annotations

from lark import Token

from linview.errors import SourceLocation, locate

SUPPORTED_HINT = (
    "linview programs are assignments 'name = expr' and 'for' loops with literal bounds"
)

OPERATORS_HINT = ("supported operators: + - * / \\ .* ./ ^ .^ ' .', comparisons and "
                   "&& || in conditions")

END_TOKENS = frozenset({"_END", "_ENDFOR", "_ENDFUNCTION", "_ENDIF", "_ENDWHILE"})

BLOCK_OPENERS = ("FOR", "FUNCTION", "IF", "WHILE")

SEPARATORS = frozenset({"_NL", "_SEMI", "_COMMA"})


class Problem(Exception):
    """A syntax error found by the post-lexer or the transformer, before it is located.

    They know the line and column but not the source text or the file name; :func:`parse`
    turns them into :class:`ParseError`.
    """

    def __init__(self, message: str, line: int, column: int, hint: str | None = None):
        super().__init__(message)
        self.message, self.line, self.column, self.hint = message, line, column, hint


def at(tok: Token, message: str, hint: str | None = None) -> Problem:
    return Problem(message, tok.line, tok.column, hint)




_LINE_BREAKS = str.maketrans({c: " " for c in "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"})


def locate_problem(source: str, filename: str, line: int, column: int) -> SourceLocation:
    return locate(source.translate(_LINE_BREAKS), filename, line, column)


# ---------------------------------------------------------------- entry point
