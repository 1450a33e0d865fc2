"""Front end: ``.m`` source text -> :mod:`linview.frontend.syntax` (a ``Function`` or a ``Script``).

The grammar lives in ``grammar/linview.lark`` (shipped as ``linview.grammar``) and is parsed
by Lark's LALR(1) parser with the basic lexer; a :class:`lark.Transformer` runs inline
(during the parse) and builds the frozen AST dataclasses, so no parse tree is kept.

Between the lexer and the parser sits a small post-lexer that handles the three things a
context-free grammar cannot say cleanly:

* **Newlines inside parentheses** are dropped (Octave allows ``f(a,`` newline ``b)``), while
  inside square brackets they separate rows and elsewhere they end statements.
* **Whitespace inside brackets.**  Octave reads ``[A -B]`` as two elements and ``[A - B]``
  as one, ``[A (1)]`` as two, and ``[A 'x']`` as a matrix and a string.  The post-lexer
  follows these rules: where Octave starts a new whitespace-separated element it puts a
  comma, so ``[ones(m,1) X]`` is ``[ones(m,1), X]``; a quote after a space (a string) is
  rejected with a located error.  (The outputs of a ``function [a b] = ...`` line are a
  plain list of names, which the grammar reads as such.)
* **Tokens outside the dialect** (``==``, ``.^``, ``"``, ``if``, ``while``, an unterminated
  ``%{`` ...) are lexed on purpose so that the error can name them.

Every failure, from Lark or from here, becomes a :class:`linview.errors.ParseError` whose
rendering shows ``file:line:col``, the source line and a caret, and whose message names
what was found and what was expected in plain words.
"""

from __future__ import annotations

import functools
import importlib.resources
from collections.abc import Iterator
from dataclasses import dataclass, replace

from lark import Lark, Token, v_args
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from linview.errors import ParseError
from linview.frontend import syntax
from linview.frontend.diagnostics import unexpected_character, unexpected_token
from linview.frontend.octave_rules import OctaveRules
from linview.frontend.pragmas import PRAGMA_KINDS, parse_pragma
from linview.frontend.problems import (
    OPERATORS_HINT,
    SEPARATORS,
    SUPPORTED_HINT,
    Problem,
    at,
    locate_problem,
)

__all__ = ["PRAGMA_KINDS", "parse"]


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
_OPERAND_START = frozenset({"NAME", "NUMBER", "LSQB", "_LPAR", "NOT"})
# The only strings of the dialect: option words of norm(X, 'fro') and qr(X, 'econ'), in
# single or double quotes (STRING tokens).
_WORDS = frozenset({"fro", "inf", "Inf", "econ"})

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
            if kind == "_NL" and brackets and brackets[-1] == "(":
                continue
            if (kind in ("QUOTE", "DQUOTE") and brackets and brackets[-1] == "("
                    and prev is not None and prev.type in ("_COMMA", "_LPAR")):
                word = next(tokens, None)
                close = next(tokens, None) if word is not None else None
                if (word is not None and close is not None and word.value in _WORDS
                        and close.type == kind and word.start_pos == tok.end_pos
                        and close.start_pos == word.end_pos):
                    tok = Token.new_borrow_pos("STRING", str(word), tok)
                    kind = tok.type
                else:
                    pending += [t for t in (close, word) if t is not None]
            _reject_foreign(tok)
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
                if _starts_element(tok, nxt):
                    prev = Token.new_borrow_pos("_COMMA", ",", tok)
                    yield prev
            if kind in ("_LPAR", "LSQB"):
                brackets.append(tok.value)
            elif kind in ("_RPAR", "_RSQB") and brackets:
                brackets.pop()
            if kind == "FUNCTION":
                header = True
            elif header and (kind == "_EQUAL" or (kind in SEPARATORS and not brackets)):
                header = False
            prev = tok
            yield tok


def _reject_foreign(tok: Token) -> None:
    """Raise for tokens that exist only to be reported: foreign operators, strings, ..."""
    kind, text = tok.type, tok.value
    if kind == "UNSUPPORTED_OP":
        hint = _UNSUPPORTED_OP_HINTS.get(text, OPERATORS_HINT)
        raise at(tok, f"operator '{text}' is not supported", hint)
    if kind == "DQUOTE":
        raise at(tok, "strings are not supported", SUPPORTED_HINT + " over numeric matrices")
    if kind == "UNTERMINATED_BLOCK":
        lead = len(text) - len(text.lstrip(" \t"))
        opener = text.strip()
        closer = opener[0] + "}"
        raise Problem(f"unterminated block comment: no line '{closer}' closes this "
                       f"'{opener}'", tok.line, tok.column + lead,
                       f"put '{closer}' alone on a line to end the comment")
    if kind == "TRAILING_PRAGMA":
        raise at(tok, "a '%#linview' pragma must be on a line of its own",
                  "move it to its own line, e.g. right after the 'function' line")
    if kind == "NAME" and text in _OCTAVE_KEYWORDS:
        raise at(tok, f"'{text}' is not supported", SUPPORTED_HINT)


def _starts_element(tok: Token, nxt: Token | None) -> bool:
    """Inside ``[ ]``, ``tok`` follows an operand after whitespace: whether Octave reads it
    as the start of a new element (then the post-lexer puts a comma before it).

    Octave's rules: a name, a number, ``[``, ``(`` or ``~``/``!`` start an element
    (``[a b]``, ``[f (x)]`` is ``[f, (x)]``); ``+`` or ``-`` start one when they touch the
    operand that follows (``[a -b]`` is ``[a, -b]``, ``[a - b]`` and ``[a -  b]`` are one
    element); a quote after whitespace starts a string, which is rejected."""
    kind = tok.type
    if kind in _OPERAND_START:
        return True
    if kind == "QUOTE":
        raise at(tok, "strings are not supported",
                  "inside [ ], a quote after a space starts a string in Octave; "
                  "write the transpose right after its operand: A'")
    return kind in ("PLUS", "MINUS") and nxt is not None and nxt.start_pos == tok.end_pos


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
    parse; it reports dialect errors as :class:`Problem`.
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
            raise Problem("the program has no statements", *where,
                           "write at least one assignment 'name = expr'")
        return syntax.Script(main.stmts, pragmas, pos=main.stmts[0].pos)

    def prelude(self, *pragmas: syntax.Pragma) -> _Block:
        return _Block((), pragmas)

    def script(self, *items) -> _Block:
        return self.body(*items)

    def function(self, tok: Token, header: tuple, body: _Block) -> syntax.Function:
        outputs, name, params = header
        if not body.stmts:
            raise at(tok, f"function '{name}' has no statements",
                      "its body must assign the outputs: " + ", ".join(outputs))
        return syntax.Function(name, params, outputs, body.stmts, body.pragmas, pos=_pos(tok))

    def fheader(self, outputs: tuple[str, ...], name: Token, params: tuple[str, ...] = ()):
        if not outputs:
            raise at(name, f"function '{name}' has no outputs",
                      f"write 'function out = {name}(...)'")
        return outputs, str(name), params

    def no_outputs(self, name: Token, params: tuple[str, ...] = ()):
        raise at(name, f"function '{name}' has no outputs",
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

    def assign(self, target: syntax.Expr, value: syntax.Expr):
        if isinstance(target, syntax.Name):
            return syntax.Assign(target.id, value, pos=target.pos)
        line, column = _leftmost(target)
        if isinstance(target, syntax.Call):
            raise Problem(f"indexed assignment '{target.func}(...) = ...' is not supported",
                           line, column, "assign whole matrices: 'name = expr'")
        if isinstance(target, syntax.Matrix):
            names = target.rows[0] if len(target.rows) == 1 else ()
            if len(names) == 1 and isinstance(names[0], syntax.Name):  # [x] = f(...)
                return syntax.Assign(names[0].id, value, pos=names[0].pos)
            if not names or not all(isinstance(n, syntax.Name) for n in names):
                raise Problem("the left side of a multiple assignment must be names in one "
                               "row", line, column, "write e.g. '[Q, R] = qr(A)'")
            ids = tuple(n.id for n in names)
            if len(set(ids)) != len(ids):
                raise Problem("a multiple assignment names a variable twice", line, column,
                               "write e.g. '[Q, R] = qr(A)'")
            return syntax.MultiAssign(ids, value, pos=target.pos)
        raise Problem("the left side of '=' must be a name", line, column,
                       "write 'name = expr'")

    def op_assign(self, target: syntax.Expr, op: Token, value: syntax.Expr):
        """``A += B`` (``-=``, ``*=``, ``/=``) is ``A = A + (B)``, as in Octave."""
        if not isinstance(target, syntax.Name):
            raise Problem(f"the left side of '{op}' must be a name", *_leftmost(target),
                           f"write 'name {op} expr'")
        return syntax.Assign(target.id, syntax.Binary(str(op)[0], target, value, pos=_pos(op)),
                             pos=target.pos)

    def expr_stmt(self, expr: syntax.Expr):
        raise Problem("expression statements are not supported", *_leftmost(expr),
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
        return parse_pragma(tok)

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
    except Problem as p:
        problem = p
    except UnexpectedToken as e:
        problem = unexpected_token(e, source, _parser())
    except UnexpectedCharacters as e:
        problem = unexpected_character(e, source)
    except (UnexpectedInput, LarkError) as e:  # pragma: no cover - not raised by LALR
        problem = Problem(f"syntax error: {e}", getattr(e, "line", 1) or 1,
                          getattr(e, "column", 1) or 1)
    where = locate_problem(source, filename, problem.line, problem.column)
    raise ParseError(problem.message, where, problem.hint) from None
