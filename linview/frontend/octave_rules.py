"""Transformer rules of the wider Octave language (issue 14): ``if``/``elseif``/``else``,
``while``, subscripts (``:``, ``a:b``, ``end``) and the option words of ``norm``.

A mixin of the parser's transformer (``linview/frontend/parser.py``), which provides
``body()`` to build a block of statements and pragmas.
"""

from __future__ import annotations

from lark import Token, Transformer, v_args

from linview.frontend import syntax


def _pos(tok: Token) -> syntax.Pos:
    return (tok.line, tok.column)


def _start(e: syntax.Expr) -> syntax.Pos:
    """Where an expression starts (a binary node sits at its operator)."""
    while isinstance(e, syntax.Binary | syntax.Transpose):
        e = e.left if isinstance(e, syntax.Binary) else e.operand
    return e.pos


@v_args(inline=True)
class OctaveRules(Transformer):
    """Rules for ``if_stmt``, ``elseif``, ``else_``, ``while_stmt``, ``colon``, ``span``,
    ``string`` and ``end_index`` (the grammar's names)."""

    def if_stmt(self, tok: Token, cond: syntax.Expr, body, *rest):
        branches = [(cond, body.stmts)]
        pragmas = list(body.pragmas)
        orelse: tuple[syntax.Stmt, ...] = ()
        for item in rest:
            if item[0] == "elseif":
                branches.append((item[1], item[2].stmts))
                pragmas += item[2].pragmas
            else:
                orelse = item[1].stmts
                pragmas += item[1].pragmas
        return self.body(syntax.If(tuple(branches), orelse, pos=_pos(tok)), *pragmas)

    def elseif(self, tok: Token, cond: syntax.Expr, body):
        return ("elseif", cond, body)

    def else_(self, tok: Token, body):
        return ("else", body)

    def while_stmt(self, tok: Token, cond: syntax.Expr, body):
        return self.body(syntax.While(cond, body.stmts, pos=_pos(tok)), *body.pragmas)

    def colon(self, *tokens: Token) -> syntax.Colon:
        return syntax.Colon()

    def span(self, start: syntax.Expr, *rest: syntax.Expr) -> syntax.Span:
        if len(rest) == 1:
            return syntax.Span(start, rest[0], pos=_start(start))
        return syntax.Span(start, rest[1], rest[0], pos=_start(start))

    def string(self, tok: Token) -> syntax.Str:
        return syntax.Str(str(tok), pos=_pos(tok))

    def end_index(self, tok: Token) -> syntax.End:
        return syntax.End(pos=_pos(tok))
