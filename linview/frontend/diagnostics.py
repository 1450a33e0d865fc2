"""Diagnosis of a failed parse: what was found and what was expected, in plain words.

Lark reports an unexpected token or character; :func:`unexpected_token` replays the parse
(with the parser it is given) to learn every terminal that would have been accepted, and
names the construct the user probably meant.
"""

from __future__ import annotations

from dataclasses import dataclass

from lark import Lark, Token
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedToken

from linview.frontend.problems import (
    BLOCK_OPENERS,
    END_TOKENS,
    OPERATORS_HINT,
    SEPARATORS,
    SUPPORTED_HINT,
    Problem,
    at,
)

_TOKEN_WORDS = {
    "NAME": "a name", "NUMBER": "a number", "$END": "the end of the input",
    "_NL": "the end of the line", "LSQB": "'['", "_RSQB": "']'", "_LPAR": "'('",
    "_RPAR": "')'", "_COMMA": "','", "_SEMI": "';'", "_EQUAL": "'='", "_COLON": "':'",
    "PLUS": "'+'", "MINUS": "'-'", "STAR": "'*'", "SLASH": "'/'", "BACKSLASH": "'\\'",
    "DOTSTAR": "'.*'", "DOTSLASH": "'./'", "CARET": "'^'", "QUOTE": '"\'"',
    "DOTQUOTE": "\".'\"", "FOR": "'for'", "FUNCTION": "'function'", "_END": "'end'",
    "_ENDFOR": "'endfor'", "_ENDFUNCTION": "'endfunction'", "PRAGMA": "a '%#linview' pragma",
    "IF": "'if'", "ELSEIF": "'elseif'", "ELSE": "'else'", "WHILE": "'while'",
    "_ENDIF": "'endif'", "_ENDWHILE": "'endwhile'", "END_INDEX": "'end'",
}
_OPERATORS = frozenset({"PLUS", "MINUS", "STAR", "SLASH", "BACKSLASH", "DOTSTAR",
                        "DOTSLASH", "CARET", "QUOTE", "DOTQUOTE", "DOTCARET", "EQ", "NE",
                        "LT", "LE", "GT", "GE", "ANDAND", "OROR"})
_STATEMENT_START = frozenset({"NAME", "NUMBER", "LSQB", "_LPAR", "PLUS", "MINUS", "FOR",
                              "PRAGMA", "IF", "WHILE", "NOT"})
# The order in which expected things are listed: closers first, separators last.
_ORDER = ["_RPAR", "_RSQB", "_EQUAL", "_COLON", "_COMMA", "_SEMI", "an operator",
          "an expression", "a statement", "NAME", "_LPAR", "_END", "_ENDFOR", "_ENDFUNCTION",
          "_NL", "$END"]
_MAX_EXPECTED = 5


def _describe(tok: Token) -> str:
    if tok.type == "NAME":
        return f"the name '{tok}'"
    if tok.type == "NUMBER":
        return f"the number {tok}"
    if tok.type in _TOKEN_WORDS:
        return _TOKEN_WORDS[tok.type]
    return f"'{tok}'"


def _expected_words(expected: set[str]) -> str:
    """Say what the parser expected, grouping terminals into "an expression" etc."""
    left = set(expected)
    groups: list[str] = []
    if {"FOR", "NAME", "NUMBER"} <= left:
        groups.append("a statement")
        left -= _STATEMENT_START
    elif {"NAME", "NUMBER"} <= left:
        groups.append("an expression")
        left -= {"NAME", "NUMBER", "LSQB", "_LPAR", "PLUS", "MINUS", "NOT", "END_INDEX"}
    if len(left & _OPERATORS) >= 3:
        groups.append("an operator")
        left -= _OPERATORS | {"_LPAR"}  # '(' after a name (a call) is not worth listing
    items = sorted([*groups, *left], key=lambda t: (_ORDER.index(t) if t in _ORDER else 99, t))
    words = [_TOKEN_WORDS.get(t, t) for t in items][:_MAX_EXPECTED]
    if not words:
        return "something else"
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


@dataclass
class _Context:
    """Blocks and brackets still open at some point of the source (for error messages)."""

    blocks: list[Token]
    brackets: list[Token]
    function_closed: bool


def _context(source: str, upto: int, parser: Lark) -> _Context:
    blocks: list[Token] = []
    brackets: list[Token] = []
    closed = False
    try:
        for tok in parser.lex(source):
            if tok.start_pos is None or tok.start_pos >= upto:
                break
            if tok.type in BLOCK_OPENERS:
                blocks.append(tok)
            elif tok.type in END_TOKENS and blocks:
                closed = closed or blocks.pop().type == "FUNCTION"
            elif tok.type in ("_LPAR", "LSQB"):
                brackets.append(tok)
            elif tok.type in ("_RPAR", "_RSQB") and brackets:
                brackets.pop()
    except (LarkError, Problem):
        pass  # only the tokens before the error matter, and those lexed fine
    return _Context(blocks, brackets, closed)


def _end_of_input(source: str) -> tuple[int, int]:
    """The position just after the last non-blank character (line 1, column 1 if none)."""
    text = source.rstrip()
    line = text.count("\n") + 1
    return line, len(text) - (text.rfind("\n") + 1) + 1


def _replay(source: str, tok: Token, parser: Lark) -> tuple[set[str] | None, Token | None]:
    """The terminals the parser would accept in place of ``tok``, where it failed, and the
    token before it.

    ``UnexpectedToken.expected`` is taken after LALR default reductions, which can lose
    choices (in ``(A + B y`` the parser has reduced ``A + B`` before it sees ``y`` and then
    expects only ``)``); replaying the parse up to ``tok`` and asking Lark's interactive
    parser gives the full set.
    """
    before = None
    try:
        ip = parser.parse_interactive(source)
        for t in ip.iter_parse():
            if t.start_pos == tok.start_pos and t.type == tok.type:
                break
            before = t
        return set(ip.accepts()), before
    except (LarkError, Problem):
        return None, before


def unexpected_token(e: UnexpectedToken, source: str, parser: Lark) -> Problem:
    """Long on purpose: An ordered list of diagnoses, the first that matches wins."""
    tok: Token = e.token
    kind = tok.type
    accepted, before = _replay(source, tok, parser)
    expected = accepted or set(e.expected)
    operand = {"NAME", "NUMBER"} <= expected  # an operand (or a statement) may come here
    if kind == "$END":
        ctx = _context(source, len(source) + 1, parser)
        if ctx.brackets:
            b = ctx.brackets[-1]
            closer = ")" if b.value == "(" else "]"
            return at(b, f"this '{b.value}' is never closed",
                       f"the input ended where '{closer}' was expected")
        if ctx.blocks and ctx.blocks[-1].type in ("FOR", "IF", "WHILE"):
            b = ctx.blocks[-1]
            what = {"FOR": "'for' loop", "IF": "'if'", "WHILE": "'while' loop"}[b.type]
            closer = {"FOR": "endfor", "IF": "endif", "WHILE": "endwhile"}[b.type]
            return at(b, f"this {what} has no 'end'",
                       f"close it with 'end' or '{closer}'")
        # Lark's end token borrows the position of the last token the parser saw.
        end = (tok.end_line, tok.end_column)
        line, column = end if all(isinstance(v, int) for v in end) else _end_of_input(source)
        return Problem(f"the input ended too early: expected {_expected_words(expected)}",
                        line, column)
    if kind == "QUOTE" and operand:
        return at(tok, "strings are not supported",
                   "a quote here starts a string in Octave; " + SUPPORTED_HINT
                   + " over numeric matrices (A' is the transpose)")
    ctx = _context(source, tok.start_pos, parser)
    if kind in END_TOKENS:
        if operand and kind == "_END" and "FOR" not in expected:
            return at(tok, "'end' inside an index or an expression is not supported",
                       "write sizes explicitly, e.g. size(X, 1)")
        if not ctx.blocks:
            return at(tok, f"'{tok}' does not close anything",
                       "there is no open 'for' loop or function here")
        opener = ctx.blocks[-1]
        return at(tok, f"'{tok}' cannot close the '{opener}' of line {opener.line}",
                   "close a 'for' loop with 'end' or 'endfor', an 'if' with 'end' or "
                   "'endif', a 'while' with 'end' or 'endwhile', a function with 'end' or "
                   "'endfunction'")
    if kind == "FUNCTION":
        return at(tok, "'function' may only start the file",
                   "a file holds one function, and a script cannot define functions")
    if kind == "_COLON":
        return at(tok, "':' is only supported in a 'for' loop range or an index",
                   "write 'for i = 1:n', or index with X(:, 1) or X(2:end, :)")
    if ctx.function_closed and not ctx.blocks and expected <= SEPARATORS | {"$END"}:
        return at(tok, f"found {_describe(tok)} after the end of the function",
                   "a function file holds one function, and only comments may follow its "
                   "'end'")
    hint = None
    if "_COLON" in expected and not ctx.brackets:
        hint = "a 'for' loop runs over a range: 'for i = a:b' or 'for i = a:step:b'"
    if ctx.brackets and ctx.brackets[-1].line < tok.line:
        b = ctx.brackets[-1]
        hint = f"the '{b.value}' at line {b.line}, column {b.column} is still open"
    message = f"found {_describe(tok)}, expected {_expected_words(expected)}"
    if kind == "_NL" and before is not None and before.end_line == tok.line:
        # Point just after the last token, not after a comment that may follow it.
        return Problem(message, before.end_line, before.end_column, hint)
    return at(tok, message, hint)


def unexpected_character(e: UnexpectedCharacters, source: str) -> Problem:
    char = e.char
    shown = f"'{char}'" if char.isprintable() and not char.isspace() else f"U+{ord(char):04X}"
    hint = None
    if char.isalpha():
        hint = "names use ASCII letters, digits and '_'"
    elif char == "." and e.pos_in_stream and source.startswith("...", e.pos_in_stream - 1):
        hint = "a number right before '...' reads as '1.' and '..': write '1 ...'"
    elif char == ".":
        hint = OPERATORS_HINT
    return Problem(f"unexpected character {shown}", e.line, e.column, hint)


# Characters str.splitlines() breaks at but Lark does not: hidden from locate() so that the
# line it copies is the line Lark counted.
