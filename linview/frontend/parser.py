"""Front end: ``.m`` source text -> :mod:`linview.frontend.syntax` (a ``Function`` or a ``Script``).

The grammar lives in ``grammar/linview.lark`` (shipped as ``linview.grammar``) and is parsed
by Lark's LALR(1) parser with the basic lexer; a :class:`lark.Transformer` runs inline
(during the parse) and builds the frozen AST dataclasses, so no parse tree is kept.

Between the lexer and the parser sits a small post-lexer that handles the three things a
context-free grammar cannot say cleanly:

* **Newlines inside parentheses** are dropped (Octave allows ``f(a,`` newline ``b)``), while
  inside square brackets they separate rows and elsewhere they end statements.
* **Whitespace inside brackets.**  Octave reads ``[A -B]`` as two elements and ``[A - B]``
  as one, ``[A (1)]`` as two, and ``[A 'x']`` as a matrix and a string.  linview requires
  commas between elements, so any token that Octave would take as the start of a new
  whitespace-separated element is rejected with a located error, instead of being read
  with a meaning different from Octave's.  (The outputs of a ``function [a b] = ...`` line
  are the exception: there ``[a b]`` is a plain list of names.)
* **Tokens outside the dialect** (``==``, ``.^``, ``"``, ``if``, ``while``, an unterminated
  ``%{`` ...) are lexed on purpose so that the error can name them.

Every failure, from Lark or from here, becomes a :class:`linview.errors.ParseError` whose
rendering shows ``file:line:col``, the source line and a caret, and whose message names
what was found and what was expected in plain words.
"""

from __future__ import annotations

import functools
import importlib.resources
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace

from lark import Lark, Token, v_args
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from linview.errors import ParseError, SourceLocation, locate
from linview.frontend import syntax
from linview.frontend.octave_rules import OctaveRules
from linview.solve_lowering import PragmaProblem, pragma_value

__all__ = ["PRAGMA_KINDS", "parse"]

#: Pragma kinds and what they list: bare names, or ``X(m, n)`` size specs.
PRAGMA_KINDS: dict[str, str] = {
    "dynamic": "names",
    "static": "names",
    "scalar": "names",
    "output": "names",
    "dims": "specs",
    "input": "specs",
    "sparse": "names",  # inputs kept as scipy.sparse (solve views: linview/solve.py)
    "stochastic": "names",  # column-stochastic inputs kept as links (linview/stochastic.py)
    "solve": "word",  # how solve views are maintained: auto, push, krylov
    "tolerance": "number",  # the error bound solve views keep
}

_SUPPORTED = (
    "linview programs are assignments 'name = expr' and 'for' loops with literal bounds"
)
_OPERATORS_HINT = ("supported operators: + - * / \\ .* ./ ^ .^ ' .', comparisons and "
                   "&& || in conditions")

# Octave's reserved words that linview does not support (iskeyword() in Octave 8, minus
# function/for/if/elseif/else/while and their ends, which the grammar knows).
_OCTAVE_KEYWORDS = frozenset("""
    __FILE__ __LINE__ break case catch classdef continue do end_try_catch
    end_unwind_protect endarguments endclassdef endenumeration endevents endmethods
    endparfor endproperties endspmd endswitch global otherwise parfor persistent
    return spmd switch try until unwind_protect unwind_protect_cleanup
""".split())

# Tokens after which Octave, inside [ ], starts a new element when whitespace follows.
_OPERAND_END = frozenset({"NAME", "NUMBER", "_RPAR", "_RSQB", "QUOTE", "DOTQUOTE",
                          "END_INDEX"})
_OPERAND_START = frozenset({"NAME", "NUMBER", "LSQB", "_LPAR"})
_END_TOKENS = frozenset({"_END", "_ENDFOR", "_ENDFUNCTION", "_ENDIF", "_ENDWHILE"})
_BLOCK_OPENERS = ("FOR", "FUNCTION", "IF", "WHILE")
# The only strings of the dialect: option words of norm(X, 'fro') (STRING tokens).
_WORDS = frozenset({"fro", "inf", "Inf"})
_SEPARATORS = frozenset({"_NL", "_SEMI", "_COMMA"})

_UNSUPPORTED_OP_HINTS = {
    "**": "write '^' for the matrix power",
    ".**": "elementwise power is not supported",
    ".\\": "elementwise left division is not supported; use './'",
    "++": "Octave reads '++' as an increment operator; write 'a + +b' with spaces",
    "--": "Octave reads '--' as a decrement operator; write 'a - -b' with spaces",
    "{": "cell arrays are not supported",
    "}": "cell arrays are not supported",
    "@": "function handles are not supported",
}


# ---------------------------------------------------------------- internal errors
class _Problem(Exception):
    """A syntax error found by the post-lexer or the transformer, before it is located.

    They know the line and column but not the source text or the file name; :func:`parse`
    turns them into :class:`ParseError`.
    """

    def __init__(self, message: str, line: int, column: int, hint: str | None = None):
        super().__init__(message)
        self.message, self.line, self.column, self.hint = message, line, column, hint


def _at(tok: Token, message: str, hint: str | None = None) -> _Problem:
    return _Problem(message, tok.line, tok.column, hint)


# ---------------------------------------------------------------- post-lexer
class _PostLexer:
    """Token filter between Lark's lexer and parser (see the module docstring).

    ``always_accept`` keeps the error-only terminals of the grammar, which no rule uses, in
    the lexer, so that they reach :meth:`process` and can be rejected by name.
    """

    always_accept = ("UNTERMINATED_BLOCK", "TRAILING_PRAGMA", "UNSUPPORTED_OP", "DQUOTE")

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        brackets: list[str] = []  # open "(" and "[", innermost last
        prev: Token | None = None  # the last token passed on
        header = False  # inside `function ... =`, where `[a b]` lists outputs
        pending: list[Token] = []
        tokens = iter(stream)
        while True:
            if pending:
                tok = pending.pop()
            else:
                tok = next(tokens, None)
                if tok is None:
                    return
            kind = tok.type
            _reject_foreign(tok)
            if kind == "_NL" and brackets and brackets[-1] == "(":
                continue
            if (kind == "QUOTE" and brackets and brackets[-1] == "(" and prev is not None
                    and prev.type in ("_COMMA", "_LPAR")):
                word = next(tokens, None)
                close = next(tokens, None) if word is not None else None
                if (word is not None and close is not None and word.value in _WORDS
                        and close.type == "QUOTE" and word.start_pos == tok.end_pos
                        and close.start_pos == word.end_pos):
                    tok = Token.new_borrow_pos("STRING", str(word), tok)
                    kind = tok.type
                else:
                    pending += [t for t in (close, word) if t is not None]
            if kind == "_END" and brackets and brackets[-1] == "(":
                tok = Token.new_borrow_pos("END_INDEX", tok.value, tok)
                kind = tok.type
            if (brackets and brackets[-1] == "[" and not header and prev is not None
                    and prev.type in _OPERAND_END and prev.end_pos != tok.start_pos):
                nxt = None
                if kind in ("PLUS", "MINUS"):
                    nxt = next(tokens, None)
                    if nxt is not None:
                        pending.append(nxt)
                _check_spacing(prev, tok, nxt)
            if kind in ("_LPAR", "LSQB"):
                brackets.append(tok.value)
            elif kind in ("_RPAR", "_RSQB") and brackets:
                brackets.pop()
            if kind == "FUNCTION":
                header = True
            elif header and (kind == "_EQUAL" or (kind in _SEPARATORS and not brackets)):
                header = False
            prev = tok
            yield tok


def _reject_foreign(tok: Token) -> None:
    """Raise for tokens that exist only to be reported: foreign operators, strings, ..."""
    kind, text = tok.type, tok.value
    if kind == "UNSUPPORTED_OP":
        hint = _UNSUPPORTED_OP_HINTS.get(text, _OPERATORS_HINT)
        raise _at(tok, f"operator '{text}' is not supported", hint)
    if kind == "DQUOTE":
        raise _at(tok, "strings are not supported", _SUPPORTED + " over numeric matrices")
    if kind == "UNTERMINATED_BLOCK":
        lead = len(text) - len(text.lstrip(" \t"))
        opener = text.strip()
        closer = opener[0] + "}"
        raise _Problem(f"unterminated block comment: no line '{closer}' closes this "
                       f"'{opener}'", tok.line, tok.column + lead,
                       f"put '{closer}' alone on a line to end the comment")
    if kind == "TRAILING_PRAGMA":
        raise _at(tok, "a '%#linview' pragma must be on a line of its own",
                  "move it to its own line, e.g. right after the 'function' line")
    if kind == "NAME" and text in _OCTAVE_KEYWORDS:
        raise _at(tok, f"'{text}' is not supported", _SUPPORTED)


def _check_spacing(prev: Token, tok: Token, nxt: Token | None) -> None:
    """Inside ``[ ]``, ``tok`` follows an operand after whitespace: reject every case that
    Octave would read as the start of a new element."""
    kind = tok.type
    if kind in _OPERAND_START:
        raise _at(tok, "matrix elements must be separated by commas",
                  "whitespace-separated elements like [A B] are not supported: write [A, B]")
    if kind == "QUOTE":
        raise _at(tok, "strings are not supported",
                  "inside [ ], a quote after a space starts a string in Octave; "
                  "write the transpose right after its operand: A'")
    if kind in ("PLUS", "MINUS") and nxt is not None and nxt.start_pos == tok.end_pos:
        op = tok.value
        raise _at(tok, f"ambiguous '{op}' inside [ ]",
                  f"Octave reads [A {op}B] as two elements [A, {op}B]; write [A {op} B] "
                  f"for the {'difference' if op == '-' else 'sum'} or [A, {op}B] for two "
                  "elements")


# ---------------------------------------------------------------- transformer
@dataclass(frozen=True)
class _Block:
    """Statements of a body, and the pragmas met in it (nested ones included)."""

    stmts: tuple[syntax.Stmt, ...]
    pragmas: tuple[syntax.Pragma, ...]


def _pos(tok: Token) -> syntax.Pos:
    return (tok.line, tok.column)


def _leftmost(e: syntax.Expr) -> syntax.Pos:
    """Where an expression starts (its own ``pos`` is its operator for binary nodes)."""
    while isinstance(e, syntax.Binary | syntax.Transpose):
        e = e.left if isinstance(e, syntax.Binary) else e.operand
    return e.pos


@v_args(inline=True)
class _ToAst(OctaveRules):
    """Builds :mod:`.syntax` nodes; method names are the grammar's rules and aliases.

    Positions come from tokens: a binary or unary node sits at its operator, a transpose at
    its quote, a call at the function name, a matrix at its ``[``, an assignment at its
    target, a loop at ``for``.  The transformer is stateless, so one instance serves every
    parse; it reports dialect errors as :class:`_Problem`.
    """

    # ----------------------------------------------------------- files
    def start(self, *parts: _Block | syntax.Function) -> syntax.Module:
        prelude = parts[0].pragmas if len(parts) == 2 else ()
        main = parts[-1]
        if isinstance(main, syntax.Function):
            return replace(main, pragmas=prelude + main.pragmas)
        pragmas = prelude + main.pragmas
        if not main.stmts:
            where = pragmas[0].pos if pragmas else (1, 1)
            raise _Problem("the program has no statements", *where,
                           "write at least one assignment 'name = expr'")
        return syntax.Script(main.stmts, pragmas, pos=main.stmts[0].pos)

    def prelude(self, *pragmas: syntax.Pragma) -> _Block:
        return _Block((), pragmas)

    def script(self, *items) -> _Block:
        return self.body(*items)

    def function(self, tok: Token, header: tuple, body: _Block) -> syntax.Function:
        outputs, name, params = header
        if not body.stmts:
            raise _at(tok, f"function '{name}' has no statements",
                      "its body must assign the outputs: " + ", ".join(outputs))
        return syntax.Function(name, params, outputs, body.stmts, body.pragmas, pos=_pos(tok))

    def fheader(self, outputs: tuple[str, ...], name: Token, params: tuple[str, ...] = ()):
        if not outputs:
            raise _at(name, f"function '{name}' has no outputs",
                      f"write 'function out = {name}(...)'")
        return outputs, str(name), params

    def no_outputs(self, name: Token, params: tuple[str, ...] = ()):
        raise _at(name, f"function '{name}' has no outputs",
                  f"write 'function out = {name}(...)' or 'function [a, b] = {name}(...)'")

    def outputs(self, *tokens: Token) -> tuple[str, ...]:
        return tuple(str(t) for t in tokens if t.type == "NAME")

    def params(self, *names: Token) -> tuple[str, ...]:
        return tuple(str(n) for n in names)

    # ----------------------------------------------------------- statements
    def body(self, *items) -> _Block:
        stmts: list[syntax.Stmt] = []
        pragmas: list[syntax.Pragma] = []
        for item in items:
            if isinstance(item, syntax.Pragma):
                pragmas.append(item)
            elif isinstance(item, _Block):
                stmts.extend(item.stmts)
                pragmas.extend(item.pragmas)
            else:
                stmts.append(item)
        return _Block(tuple(stmts), tuple(pragmas))

    def assign(self, target: syntax.Expr, value: syntax.Expr) -> syntax.Assign:
        if isinstance(target, syntax.Name):
            return syntax.Assign(target.id, value, pos=target.pos)
        line, column = _leftmost(target)
        if isinstance(target, syntax.Call):
            raise _Problem(f"indexed assignment '{target.func}(...) = ...' is not supported",
                           line, column, "assign whole matrices: 'name = expr'")
        if isinstance(target, syntax.Matrix):
            raise _Problem("multiple assignment '[a, b] = ...' is not supported", line,
                           column, "assign one name per statement: 'name = expr'")
        raise _Problem("the left side of '=' must be a name", line, column,
                       "write 'name = expr'")

    def expr_stmt(self, expr: syntax.Expr):
        raise _Problem("expression statements are not supported", *_leftmost(expr),
                       "assign the value to a name: 'result = ...'")

    def for_stmt(self, tok: Token, rng: tuple, body: _Block) -> _Block:
        var, start, step, stop = rng
        loop = syntax.For(var, start, stop, body.stmts, step, pos=_pos(tok))
        return _Block((loop,), body.pragmas)

    def range(self, var: Token, *bounds: syntax.Expr):
        if len(bounds) == 2:
            return str(var), bounds[0], None, bounds[1]
        return str(var), bounds[0], bounds[1], bounds[2]

    def pragma(self, tok: Token) -> syntax.Pragma:
        return _parse_pragma(tok)

    # ----------------------------------------------------------- expressions
    def binary(self, left: syntax.Expr, op: Token, right: syntax.Expr) -> syntax.Binary:
        text = "~=" if op.type == "NE" else str(op)
        return syntax.Binary(text, left, right, pos=_pos(op))

    def unary(self, op: Token, operand: syntax.Expr) -> syntax.Unary:
        return syntax.Unary("!" if op.type == "NOT" else str(op), operand, pos=_pos(op))

    def transpose(self, operand: syntax.Expr, op: Token) -> syntax.Transpose:
        return syntax.Transpose(operand, conjugate=op.type == "QUOTE", pos=_pos(op))

    def number(self, tok: Token) -> syntax.Num:
        return syntax.Num(float(tok), str(tok), pos=_pos(tok))

    def name(self, tok: Token) -> syntax.Name:
        return syntax.Name(str(tok), pos=_pos(tok))

    def call(self, name: Token, *args: syntax.Expr) -> syntax.Call:
        return syntax.Call(str(name), tuple(args), pos=_pos(name))

    def matrix(self, bracket: Token, *rows: tuple[syntax.Expr, ...]) -> syntax.Matrix:
        return syntax.Matrix(tuple(rows), pos=_pos(bracket))

    def empty_matrix(self, bracket: Token) -> syntax.Matrix:
        # only max(X, [], d) and min(X, [], d) take one; lowering rejects the others
        return syntax.Matrix((), pos=_pos(bracket))

    def row(self, *elements: syntax.Expr) -> tuple[syntax.Expr, ...]:
        return tuple(elements)


# ---------------------------------------------------------------- pragmas
_PRAGMA_PREFIX = "%#linview"
_PRAGMA_LEX = re.compile(
    r"(?P<space>\s+)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<int>\d+)(?![A-Za-z0-9_.])"
    r"|(?P<number>[0-9.]+(?:[eE][+-]?\d+)?\w*)|(?P<punct>[(),])|(?P<comment>[%#].*)"
    r"|(?P<bad>.)")
_KINDS_TEXT = ", ".join(PRAGMA_KINDS)


def _parse_pragma(tok: Token) -> syntax.Pragma:
    """Read ``%#linview KIND ITEMS`` (one line).

    Items are names, or ``X(size, size, ...)`` specs whose sizes are names or integer
    literals; spaces and commas separate items; a ``%`` or ``#`` starts a trailing comment.
    """
    text = str(tok).rstrip("\r")
    start = text.index(_PRAGMA_PREFIX)
    line, col0 = tok.line, tok.column  # column of text[0]
    words: list[tuple[str, str, int]] = []  # (kind, text, column)
    for m in _PRAGMA_LEX.finditer(text, start + len(_PRAGMA_PREFIX)):
        group = m.lastgroup
        if group == "comment":
            break
        if group != "space":
            words.append((group, m.group(), col0 + m.start()))
    end_col = col0 + len(text.rstrip())
    pos = (line, col0 + start)
    if not words or words[0][0] != "name":
        col = words[0][2] if words else end_col
        raise _Problem("a '%#linview' pragma needs a kind", line, col,
                       f"valid kinds: {_KINDS_TEXT}")
    kind, kind_col = words[0][1], words[0][2]
    if kind not in PRAGMA_KINDS:
        raise _Problem(f"unknown pragma kind '{kind}'", line, kind_col,
                       f"valid kinds: {_KINDS_TEXT}")
    if PRAGMA_KINDS[kind] in ("word", "number"):
        try:  # one value: linview/solve_lowering.py
            value = pragma_value(kind, [(g, w) for g, w, _ in words[1:]])
        except PragmaProblem as e:
            at = words[1 + e.index][2] if 1 + e.index < len(words) else end_col
            raise _Problem(e.message, line, at, e.hint) from None
        return syntax.Pragma(kind, (value,), (), pos=pos)
    names: list[str] = []
    specs: list[syntax.DimSpec] = []
    i = 1

    def fail(message: str, at: int, hint: str | None = None) -> _Problem:
        col = words[at][2] if at < len(words) else end_col
        return _Problem(message, line, col, hint)

    def found(at: int) -> str:
        return f"'{words[at][1]}'" if at < len(words) else "the end of the line"

    while i < len(words):
        group, word, col = words[i]
        if word == ",":
            i += 1
            continue
        if group != "name":
            raise fail(f"found {found(i)} in a '{kind}' pragma, expected a name", i)
        if i + 1 < len(words) and words[i + 1][1] == "(":
            sizes: list[str | int] = []
            i += 2
            while True:
                if i < len(words) and words[i][0] in ("name", "int"):
                    w = words[i][1]
                    sizes.append(int(w) if words[i][0] == "int" else w)
                    i += 1
                else:
                    raise fail(f"found {found(i)}, expected a size (a name or an integer)",
                               i, f"write {word}(m, n)")
                if i < len(words) and words[i][1] == ",":
                    i += 1
                elif i < len(words) and words[i][1] == ")":
                    i += 1
                    break
                else:
                    raise fail(f"found {found(i)}, expected ',' or ')' in {word}(...)", i)
            specs.append(syntax.DimSpec(word, tuple(sizes), pos=(line, col)))
        else:
            names.append(word)
            i += 1
    if PRAGMA_KINDS[kind] == "names" and specs:
        raise _Problem(f"'%#linview {kind}' takes names, not sizes", line, specs[0].pos[1],
                       f"write '%#linview {kind} {specs[0].name}' and give sizes in "
                       f"'%#linview dims {specs[0].name}(m, n)'")
    if PRAGMA_KINDS[kind] == "specs" and names:
        col = next(c for g, w, c in words[1:] if w == names[0])
        raise _Problem(f"'%#linview {kind}' needs sizes for '{names[0]}'", line, col,
                       f"write {names[0]}(m, n); scalar inputs go in '%#linview scalar'")
    if not names and not specs:
        what = "a name" if PRAGMA_KINDS[kind] == "names" else "an item like X(m, n)"
        raise _Problem(f"'%#linview {kind}' needs at least {what}", line, end_col)
    return syntax.Pragma(kind, tuple(names), tuple(specs), pos=pos)


# ---------------------------------------------------------------- error messages
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


def _context(source: str, upto: int) -> _Context:
    blocks: list[Token] = []
    brackets: list[Token] = []
    closed = False
    try:
        for tok in _parser().lex(source):
            if tok.start_pos is None or tok.start_pos >= upto:
                break
            if tok.type in _BLOCK_OPENERS:
                blocks.append(tok)
            elif tok.type in _END_TOKENS and blocks:
                closed = closed or blocks.pop().type == "FUNCTION"
            elif tok.type in ("_LPAR", "LSQB"):
                brackets.append(tok)
            elif tok.type in ("_RPAR", "_RSQB") and brackets:
                brackets.pop()
    except (LarkError, _Problem):
        pass  # only the tokens before the error matter, and those lexed fine
    return _Context(blocks, brackets, closed)


def _end_of_input(source: str) -> tuple[int, int]:
    """The position just after the last non-blank character (line 1, column 1 if none)."""
    text = source.rstrip()
    line = text.count("\n") + 1
    return line, len(text) - (text.rfind("\n") + 1) + 1


def _replay(source: str, tok: Token) -> tuple[set[str] | None, Token | None]:
    """The terminals the parser would accept in place of ``tok``, where it failed, and the
    token before it.

    ``UnexpectedToken.expected`` is taken after LALR default reductions, which can lose
    choices (in ``(A + B y`` the parser has reduced ``A + B`` before it sees ``y`` and then
    expects only ``)``); replaying the parse up to ``tok`` and asking Lark's interactive
    parser gives the full set.
    """
    before = None
    try:
        ip = _parser().parse_interactive(source)
        for t in ip.iter_parse():
            if t.start_pos == tok.start_pos and t.type == tok.type:
                break
            before = t
        return set(ip.accepts()), before
    except (LarkError, _Problem):
        return None, before


def _unexpected_token(e: UnexpectedToken, source: str) -> _Problem:
    tok: Token = e.token
    kind = tok.type
    accepted, before = _replay(source, tok)
    expected = accepted or set(e.expected)
    operand = {"NAME", "NUMBER"} <= expected  # an operand (or a statement) may come here
    if kind == "$END":
        ctx = _context(source, len(source) + 1)
        if ctx.brackets:
            b = ctx.brackets[-1]
            closer = ")" if b.value == "(" else "]"
            return _at(b, f"this '{b.value}' is never closed",
                       f"the input ended where '{closer}' was expected")
        if ctx.blocks and ctx.blocks[-1].type in ("FOR", "IF", "WHILE"):
            b = ctx.blocks[-1]
            what = {"FOR": "'for' loop", "IF": "'if'", "WHILE": "'while' loop"}[b.type]
            closer = {"FOR": "endfor", "IF": "endif", "WHILE": "endwhile"}[b.type]
            return _at(b, f"this {what} has no 'end'",
                       f"close it with 'end' or '{closer}'")
        # Lark's end token borrows the position of the last token the parser saw.
        end = (tok.end_line, tok.end_column)
        line, column = end if all(isinstance(v, int) for v in end) else _end_of_input(source)
        return _Problem(f"the input ended too early: expected {_expected_words(expected)}",
                        line, column)
    if kind == "QUOTE" and operand:
        return _at(tok, "strings are not supported",
                   "a quote here starts a string in Octave; " + _SUPPORTED
                   + " over numeric matrices (A' is the transpose)")
    ctx = _context(source, tok.start_pos)
    if kind in _END_TOKENS:
        if operand and kind == "_END" and "FOR" not in expected:
            return _at(tok, "'end' inside an index or an expression is not supported",
                       "write sizes explicitly, e.g. size(X, 1)")
        if not ctx.blocks:
            return _at(tok, f"'{tok}' does not close anything",
                       "there is no open 'for' loop or function here")
        opener = ctx.blocks[-1]
        return _at(tok, f"'{tok}' cannot close the '{opener}' of line {opener.line}",
                   "close a 'for' loop with 'end' or 'endfor', an 'if' with 'end' or "
                   "'endif', a 'while' with 'end' or 'endwhile', a function with 'end' or "
                   "'endfunction'")
    if kind == "FUNCTION":
        return _at(tok, "'function' may only start the file",
                   "a file holds one function, and a script cannot define functions")
    if kind == "_COLON":
        return _at(tok, "':' is only supported in a 'for' loop range or an index",
                   "write 'for i = 1:n', or index with X(:, 1) or X(2:end, :)")
    if ctx.function_closed and not ctx.blocks and expected <= _SEPARATORS | {"$END"}:
        return _at(tok, f"found {_describe(tok)} after the end of the function",
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
        return _Problem(message, before.end_line, before.end_column, hint)
    return _at(tok, message, hint)


def _unexpected_character(e: UnexpectedCharacters, source: str) -> _Problem:
    char = e.char
    shown = f"'{char}'" if char.isprintable() and not char.isspace() else f"U+{ord(char):04X}"
    hint = None
    if char.isalpha():
        hint = "names use ASCII letters, digits and '_'"
    elif char == "." and e.pos_in_stream and source.startswith("...", e.pos_in_stream - 1):
        hint = "a number right before '...' reads as '1.' and '..': write '1 ...'"
    elif char == ".":
        hint = _OPERATORS_HINT
    return _Problem(f"unexpected character {shown}", e.line, e.column, hint)


# Characters str.splitlines() breaks at but Lark does not: hidden from locate() so that the
# line it copies is the line Lark counted.
_LINE_BREAKS = str.maketrans({c: " " for c in "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"})


def _locate(source: str, filename: str, line: int, column: int) -> SourceLocation:
    return locate(source.translate(_LINE_BREAKS), filename, line, column)


# ---------------------------------------------------------------- entry point
@functools.cache
def _parser() -> Lark:
    grammar = importlib.resources.files("linview.grammar").joinpath("linview.lark")
    return Lark(grammar.read_text(encoding="utf-8"), parser="lalr", lexer="basic",
                postlex=_PostLexer(), transformer=_ToAst(), maybe_placeholders=False)


def parse(source: str, filename: str = "<string>") -> syntax.Module:
    """Parse linview source text into an AST :data:`linview.frontend.syntax.Module`.

    Raises :class:`linview.errors.ParseError` (and nothing else) when the text is not in
    the dialect; the error's location points at the offending token.
    """
    try:
        return _parser().parse(source)
    except _Problem as p:
        problem = p
    except UnexpectedToken as e:
        problem = _unexpected_token(e, source)
    except UnexpectedCharacters as e:
        problem = _unexpected_character(e, source)
    except (UnexpectedInput, LarkError) as e:  # pragma: no cover - not raised by LALR
        problem = _Problem(f"syntax error: {e}", getattr(e, "line", 1) or 1,
                           getattr(e, "column", 1) or 1)
    raise ParseError(problem.message, _locate(source, filename, problem.line, problem.column),
                     problem.hint) from None
