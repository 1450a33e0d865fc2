"""Tests of the front end: linview/parser.py with grammar/linview.lark.

Expected ASTs are built by hand; positions take no part in equality (``compare=False``), so
the few tests that care about positions check them explicitly.
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from linview.errors import ParseError
from linview.frontend import syntax
from linview.frontend.parser import PRAGMA_KINDS, parse

# ---------------------------------------------------------------- helpers
A, B, C, D, X, Y = (syntax.Name(n) for n in "ABCDXY")


def num(text: str) -> syntax.Num:
    return syntax.Num(float(text), text)


def bin_(op: str, left: syntax.Expr, right: syntax.Expr) -> syntax.Binary:
    return syntax.Binary(op, left, right)


def neg(e: syntax.Expr) -> syntax.Unary:
    return syntax.Unary("-", e)


def tr(e: syntax.Expr, conjugate: bool = True) -> syntax.Transpose:
    return syntax.Transpose(e, conjugate)


def expr(text: str) -> syntax.Expr:
    """Parse ``text`` as the right-hand side of an assignment."""
    module = parse(f"z = {text}")
    assert isinstance(module, syntax.Script) and len(module.body) == 1
    return module.body[0].value


def error(source: str) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse(source, "t.m")
    assert type(info.value) is ParseError
    return info.value


def assert_located(err: ParseError, source: str, line: int, column: int) -> None:
    """``str(err)`` starts with ``t.m:LINE:COL:``, then shows the line and a caret."""
    text = str(err)
    assert text.startswith(f"t.m:{line}:{column}: "), text
    assert (err.location.line, err.location.column) == (line, column)
    src_line = source.split("\n")[line - 1].rstrip("\r").expandtabs(1)
    lines = text.split("\n")
    assert lines[1] == "    " + src_line.rstrip(), text
    assert lines[2] == "    " + " " * (column - 1) + "^", text


# ---------------------------------------------------------------- expressions
PRECEDENCE = [
    ("-A'", neg(tr(A))),
    ("-A^2", neg(bin_("^", A, num("2")))),
    ("A'^2", bin_("^", tr(A), num("2"))),
    ("A^2'", tr(bin_("^", A, num("2")))),
    ("2*A'*B", bin_("*", bin_("*", num("2"), tr(A)), B)),
    ("A*B+C*D", bin_("+", bin_("*", A, B), bin_("*", C, D))),
    ("A-B-C", bin_("-", bin_("-", A, B), C)),
    ("A-(B-C)", bin_("-", A, bin_("-", B, C))),
    ("A^2^3", bin_("^", bin_("^", A, num("2")), num("3"))),
    ("A\\B*C", bin_("*", bin_("\\", A, B), C)),
    ("X'*X \\ X'*Y", bin_("*", bin_("\\", bin_("*", tr(X), X), tr(X)), Y)),
    ("(X'*X) \\ (X'*Y)", bin_("\\", bin_("*", tr(X), X), bin_("*", tr(X), Y))),
    ("-2*A", bin_("*", neg(num("2")), A)),
    ("A.*B./C", bin_("./", bin_(".*", A, B), C)),
    ("A'.'", tr(tr(A), conjugate=False)),
    ("A.'", tr(A, conjugate=False)),
    ("A''", tr(tr(A))),
    ("A^-1", bin_("^", A, neg(num("1")))),
    ("A^+1", bin_("^", A, syntax.Unary("+", num("1")))),
    ("2^-1^2", bin_("^", bin_("^", num("2"), neg(num("1"))), num("2"))),
    ("A^-1'", tr(bin_("^", A, neg(num("1"))))),
    ("2*-A", bin_("*", num("2"), neg(A))),
    ("A - -B", bin_("-", A, neg(B))),
    ("- -A", neg(neg(A))),
    ("+A", syntax.Unary("+", A)),
    ("A/2 + B", bin_("+", bin_("/", A, num("2")), B)),
    ("A+B'*C", bin_("+", A, bin_("*", tr(B), C))),
    ("(A+B)'", tr(bin_("+", A, B))),
    ("-(A)^2", neg(bin_("^", A, num("2")))),
    ("A ^ 2", bin_("^", A, num("2"))),
]


@pytest.mark.parametrize(("text", "tree"), PRECEDENCE, ids=[t for t, _ in PRECEDENCE])
def test_precedence(text, tree):
    assert expr(text) == tree


NUMBERS = [("1", 1.0), ("0.85", 0.85), ("1e-3", 1e-3), (".5", 0.5), ("1E+3", 1000.0),
           ("12.", 12.0), ("1.5e2", 150.0), ("007", 7.0)]


@pytest.mark.parametrize(("text", "value"), NUMBERS)
def test_numbers(text, value):
    assert expr(text) == syntax.Num(value, text)


@pytest.mark.parametrize(("text", "tree"), [
    ("1./x", bin_("./", num("1"), syntax.Name("x"))),
    ("1.*x", bin_(".*", num("1"), syntax.Name("x"))),
    ("1.'", tr(num("1"), conjugate=False)),
    ("1.5.'", tr(num("1.5"), conjugate=False)),
    ("1.5./x", bin_("./", num("1.5"), syntax.Name("x"))),
    ("1'", tr(num("1"))),
    ("2\\x", bin_("\\", num("2"), syntax.Name("x"))),
])
def test_number_does_not_swallow_operator_dot(text, tree):
    assert expr(text) == tree


def test_calls_and_names():
    assert expr("f()") == syntax.Call("f", ())
    assert expr("inv(A)") == syntax.Call("inv", (A,))
    assert expr("eye(n, 2)") == syntax.Call("eye", (syntax.Name("n"), num("2")))
    assert expr("transpose(A)") == syntax.Call("transpose", (A,))
    assert expr("size(X, 1) * _a1") == bin_("*", syntax.Call("size", (X, num("1"))),
                                            syntax.Name("_a1"))
    assert expr("f (A)") == syntax.Call("f", (A,))  # outside brackets a space is fine
    assert expr("f(g(A)', -B)") == syntax.Call("f", (tr(syntax.Call("g", (A,))), neg(B)))
    assert expr("endx + fork") == bin_("+", syntax.Name("endx"), syntax.Name("fork"))


def test_newlines_inside_parentheses_are_ignored():
    assert expr("f(A,\n  B)") == syntax.Call("f", (A, B))
    assert expr("(A +\n B)") == bin_("+", A, B)
    assert expr("f([A\n B])") == syntax.Call("f", (syntax.Matrix(((A,), (B,))),))


MATRICES = [
    ("[A, B; C, D]", ((A, B), (C, D))),
    ("[A]", ((A,),)),
    ("[A, B]", ((A, B),)),
    ("[A; B]", ((A,), (B,))),
    ("[A, B,]", ((A, B),)),
    ("[A, ; B]", ((A,), (B,))),
    ("[;A;;B;]", ((A,), (B,))),
    ("[A, B\n C, D]", ((A, B), (C, D))),
    ("[A,\n B]", ((A,), (B,))),
    ("[\n A\n]", ((A,),)),
    ("[A, ...\n B]", ((A, B),)),
    ("[A, B % comment\n C, D]", ((A, B), (C, D))),
    ("[A', B.']", ((tr(A), tr(B, conjugate=False)),)),
    ("[A' , B']", ((tr(A), tr(B)),)),
    ("[-A, +B]", ((neg(A), syntax.Unary("+", B)),)),
    ("[A - B]", ((bin_("-", A, B),),)),
    ("[A-B]", ((bin_("-", A, B),),)),
    ("[A- B]", ((bin_("-", A, B),),)),
    ("[A * -B]", ((bin_("*", A, neg(B)),),)),
    ("[f(A, -B)]", ((syntax.Call("f", (A, neg(B))),),)),
    ("[(A -B)]", ((bin_("-", A, B),),)),
    ("[[A, B]; C]", ((syntax.Matrix(((A, B),)),), (C,))),
]


@pytest.mark.parametrize(("text", "rows"), MATRICES, ids=[t for t, _ in MATRICES])
def test_matrices(text, rows):
    assert expr(text) == syntax.Matrix(rows)


def test_transposed_matrix_and_matrix_in_expression():
    assert expr("[A, B]' * 2") == bin_("*", tr(syntax.Matrix(((A, B),))), num("2"))


# ---------------------------------------------------------------- statements and files
def assign(target: str, value: syntax.Expr) -> syntax.Assign:
    return syntax.Assign(target, value)


def test_script_statements_and_separators():
    src = "a = A;b = B, c = C\n\n;;d = D;"
    assert parse(src) == syntax.Script(
        (assign("a", A), assign("b", B), assign("c", C), assign("d", D)), ())


@pytest.mark.parametrize("src", [
    "a = A % comment\n# another\nb = B  # trailing\n",
    "a = A\r\nb = B\r\n",
    "\ta\t=\tA\n  b =  B  \n",
    "a = ...\n  A\nb = B ... ignored text\n",
    "%{\nanything = [at all\n%}\na = A\nb = B",
    "  %{\r\n  a = 1;\r\n  %}\r\na = A\nb = B\n",
    "#{\nx\n#}\na = A\n%{ not a block comment\nb = B",
    "a = A; b = B",
    "\n\n% lead\na = A\nb = B",
    "a = A\nb = B;,;",
])
def test_comments_continuations_and_layout(src):
    assert parse(src) == syntax.Script((assign("a", A), assign("b", B)), ())


def test_block_comment_lines_keep_positions():
    m = parse("%{\nx = 1\n%}\ny = 2")
    assert m.body[0].pos == (4, 1)


def test_function_file():
    src = """% leading comment

function beta = ols(X, Y)
  %#linview dynamic X Y          % which inputs change
  %#linview dims X(m,n) Y(m,p)   % optional symbolic sizes
  beta = (X' * X) \\ (X' * Y);
end
"""
    beta = bin_("\\", bin_("*", tr(X), X), bin_("*", tr(X), Y))
    expected = syntax.Function(
        "ols", ("X", "Y"), ("beta",), (assign("beta", beta),),
        (syntax.Pragma("dynamic", ("X", "Y")),
         syntax.Pragma("dims", (), (syntax.DimSpec("X", ("m", "n")),
                                    syntax.DimSpec("Y", ("m", "p"))))))
    m = parse(src)
    assert m == expected
    assert m.pos == (3, 1)
    assert m.pragmas[0].pos == (4, 3)
    assert m.pragmas[1].specs[1].pos == (5, 25)
    assert m.body[0].pos == (6, 3)


@pytest.mark.parametrize(("src", "outputs", "params"), [
    ("function [a, b] = f(X)\na = X; b = X;\nend", ("a", "b"), ("X",)),
    ("function [a b] = f(X)\na = X; b = X;\nendfunction\n", ("a", "b"), ("X",)),
    ("function [a,b]=f(X,Y)\na = X; b = X;\n", ("a", "b"), ("X", "Y")),
    ("function a = f\na = 1; b = 1;", ("a",), ()),
    ("function a = f()\na = 1; b = 1;\nend % done\n\n", ("a",), ()),
    ("function a = f(X) a = X, b = X, end", ("a",), ("X",)),
])
def test_function_headers_and_ends(src, outputs, params):
    m = parse(src)
    assert isinstance(m, syntax.Function)
    assert (m.name, m.outputs, m.params) == ("f", outputs, params)
    assert [s.target for s in m.body] == ["a", "b"]


def test_for_loops():
    src = """T = A;
for i = 1:16
  T = A * T + B;
end
for k = 1:2:9, for j = 1:3 S = T; endfor, end
for (i = 1:3) U = T end
"""
    inner = syntax.For("j", num("1"), num("3"), (assign("S", syntax.Name("T")),))
    expected = syntax.Script((
        assign("T", A),
        syntax.For("i", num("1"), num("16"),
                (assign("T", bin_("+", bin_("*", A, syntax.Name("T")), B)),)),
        syntax.For("k", num("1"), num("9"), (inner,), step=num("2")),
        syntax.For("i", num("1"), num("3"), (assign("U", syntax.Name("T")),)),
    ), ())
    m = parse(src)
    assert m == expected
    assert m.body[1].pos == (2, 1)


def test_for_bounds_are_expressions():
    m = parse("for i = n-1:-1:f(2)\n x = 1;\nend")
    loop = m.body[0]
    assert loop.start == bin_("-", syntax.Name("n"), num("1"))
    assert loop.step == neg(num("1"))
    assert loop.stop == syntax.Call("f", (num("2"),))


def test_empty_for_body():
    assert parse("for i = 1:3\nend\nx = 1").body[0] == syntax.For("i", num("1"), num("3"), ())


# ---------------------------------------------------------------- pragmas
def test_pragmas_of_every_kind_in_order():
    src = """%#linview input X(n,n) Y(n,1)
%#linview dims Z(m, 2), W(k,k)
  %#linview dynamic X, Y,Z
%#linview static d
%#linview scalar d   % a comment
x = X;
for i = 1:2
  %#linview output x
  x = x * X;
end
"""
    m = parse(src)
    assert isinstance(m, syntax.Script)
    assert m.pragmas == (
        syntax.Pragma("input", (), (syntax.DimSpec("X", ("n", "n")),
                                    syntax.DimSpec("Y", ("n", 1)))),
        syntax.Pragma("dims", (), (syntax.DimSpec("Z", ("m", 2)), syntax.DimSpec("W", ("k", "k")))),
        syntax.Pragma("dynamic", ("X", "Y", "Z")),
        syntax.Pragma("static", ("d",)),
        syntax.Pragma("scalar", ("d",)),
        syntax.Pragma("output", ("x",)),
    )
    assert [p.pos for p in m.pragmas] == [(1, 1), (2, 1), (3, 3), (4, 1), (5, 1), (8, 3)]
    assert m.pragmas[0].specs[1].sizes == ("n", 1)
    assert isinstance(m.pragmas[0].specs[1].sizes[1], int)
    assert len(m.body) == 2 and len(m.body[1].body) == 1


def test_pragmas_before_the_function_line():
    src = "%#linview dynamic X\n\n%#linview dims X(n,n)\nfunction y = f(X)\n" \
          "%#linview static d\ny = X;"
    m = parse(src)
    assert isinstance(m, syntax.Function)
    assert [p.kind for p in m.pragmas] == ["dynamic", "dims", "static"]
    assert m.body == (assign("y", X),)


def test_pragma_lookalikes_are_comments():
    m = parse("% #linview dynamic X\n#linview dynamic X\n%#linviewer x\nx = 1")
    assert m.pragmas == ()


def test_pragma_kinds_are_documented():
    assert set(PRAGMA_KINDS) == {"dynamic", "static", "scalar", "output", "dims", "input",
                                 "sparse", "stochastic", "solve", "tolerance"}


# ---------------------------------------------------------------- positions
def test_positions():
    m = parse("x = -A' * f(B) + [C]\n")
    plus = m.body[0].value
    assert plus.pos == (1, 16)
    times = plus.left
    assert times.pos == (1, 9)
    assert times.left.pos == (1, 5)  # unary minus
    assert times.left.operand.pos == (1, 7)  # the quote
    assert times.right.pos == (1, 11)  # call at its name
    assert plus.right.pos == (1, 18)  # matrix at its bracket
    assert plus.right.rows[0][0].pos == (1, 19)


def test_multiple_assignment():
    m = parse("[Q, R] = qr(A, 0);\n[L, U, P] = lu(A)\n[y] = A;\nx = norm(A, \"fro\")")
    first, second, third, fourth = m.body
    assert first == syntax.MultiAssign(("Q", "R"), syntax.Call("qr", (syntax.Name("A"),
                                                                    syntax.Num(0.0, "0"))))
    assert first.pos == (1, 1) and first.target == "[Q, R]"
    assert second.targets == ("L", "U", "P")
    assert third == syntax.Assign("y", syntax.Name("A"))
    assert fourth.value.args[1] == syntax.Str("fro")


# ---------------------------------------------------------------- errors
ERRORS = [
    # (source, line, column, words the message must contain)
    ("x = (A + B;", 1, 11, "found ';', expected ')' or an operator"),
    ("x = f(A, B\n", 1, 6, "this '(' is never closed"),
    ("x = (A + B\ny = 2", 2, 1, "found the name 'y', expected ')'"),
    ("A = = B", 1, 5, "found '=', expected an expression"),
    ("x = [A 'B']", 1, 8, "strings are not supported"),
    ("x = [1, 2", 1, 5, "this '[' is never closed"),
    ("disp('hi')", 1, 6, "strings are not supported"),
    ('x = "hi"', 1, 5, "strings are not supported"),
    ("x = 1;\n  %{\nx = 2", 2, 3, "unterminated block comment"),
    ("for i = 1:3\n  x = 1;\n", 1, 1, "this 'for' loop has no 'end'"),
    ("function y = f(x)\n  for i = 1:3\n    y = x;\n", 2, 3, "'for' loop has no 'end'"),
    ("%#linview dynamik X\nx = 1", 1, 11, "unknown pragma kind 'dynamik'"),
    ("x = 1;\nend\n", 2, 1, "'end' does not close anything"),
    ("function y = f(x)\n y = x;\nend\nend\n", 4, 1, "'end' does not close anything"),
    ("x = A;\nA * B", 2, 1, "expression statements are not supported"),
    ("x = 1;\n  (A) * B;", 2, 4, "expression statements are not supported"),
    ("x = A + end", 1, 9, "'end' inside an index or an expression"),
    ("x = A :", 1, 7, "':' is only supported in a 'for' loop range or an index"),
    ("A(1) = 2", 1, 1, "indexed assignment"),
    ("[a, b + 1] = f(X)", 1, 1, "the left side of a multiple assignment must be names"),
    ("[a; b] = f(X)", 1, 1, "the left side of a multiple assignment must be names"),
    ("x = a & b", 1, 7, "operator '&' is not supported"),
    ("x = a .\\ b", 1, 7, "operator '.\\' is not supported"),
    ("x = a--b", 1, 6, "operator '--' is not supported"),
    ("x = {a}", 1, 5, "operator '{' is not supported"),
    ("if x\n y = 1;\n", 1, 1, "this 'if' has no 'end'"),
    ("x = 1;\nwhile 1\n", 2, 1, "this 'while' loop has no 'end'"),
    ("x = 1;\nswitch x\n", 2, 1, "'switch' is not supported"),
    ("x = 1; %#linview output x", 1, 8, "pragma must be on a line of its own"),
    ("x = 1;\nfunction y = f(x)\n y = x;\n", 2, 1, "'function' may only start the file"),
    ("function y = f(x)\ny = x;\nend\nfunction z = g(x)\n", 4, 1, "'function' may only"),
    ("function y = f(x)\ny = x;\nend\nz = 1\n", 4, 1, "after the end of the function"),
    ("function f(x)\n y = x;\n", 1, 10, "function 'f' has no outputs"),
    ("function y = f(x)\nend\n", 1, 1, "function 'f' has no statements"),
    ("function y = f(x)", 1, 1, "function 'f' has no statements"),
    ("for i = 1\n x = 1;\nend", 1, 10, "expected ':' or an operator"),
    ("x = 3 +", 1, 8, "the input ended too early: expected an expression"),
    ("x = 3 + % comment\n\n", 1, 8, "found the end of the line, expected an expression"),
    ("x = 3;\ny = -", 2, 6, "the input ended too early"),
    ("x = 1 2", 1, 7, "found the number 2"),
    ("x = $", 1, 5, "unexpected character '$'"),
    ("x = 1...\n + 2", 1, 7, "unexpected character '.'"),
    ("x = y = 2", 1, 7, "found '='"),
    ("function y = f(x)\nfor i=1:2\ny = x;\nendfunction", 4, 1, "cannot close the 'for'"),
    ("x = 1;\nendfor", 2, 1, "'endfor' does not close anything"),
    ("%#linview dims X(m n)\nx = 1", 1, 20, "expected ',' or ')'"),
    ("%#linview dims X(2.5, n)\nx = 1", 1, 18, "found '2.5', expected a size"),
    ("%#linview dims X\nx = 1", 1, 16, "'%#linview dims' needs sizes for 'X'"),
    ("%#linview input X\nx = 1", 1, 17, "'%#linview input' needs sizes"),
    ("%#linview dynamic X(m, n)\nx = 1", 1, 19, "takes names, not sizes"),
    ("%#linview dynamic\nx = 1", 1, 18, "needs at least a name"),
    ("  %#linview\nx = 1", 1, 12, "needs a kind"),
    ("%#linview dynamic X?\nx = 1", 1, 20, "found '?'"),
    ("x = é", 1, 5, "unexpected character 'é'"),
    ("x = 1\tA", 1, 7, "found the name 'A'"),
]


@pytest.mark.parametrize(("src", "line", "column", "words"), ERRORS,
                         ids=[e[0][:30] for e in ERRORS])
def test_errors_are_located(src, line, column, words):
    err = error(src)
    assert_located(err, src, line, column)
    assert words in err.message, err.message


def test_unknown_pragma_lists_valid_kinds():
    err = error("%#linview bogus X\nx = 1")
    for kind in PRAGMA_KINDS:
        assert kind in err.hint


def test_error_hints():
    assert "still open" in error("x = (A + B\ny = 2").hint
    assert "'1 ...'" in error("x = 1...\n + 2").hint
    assert "'^'" in error("x = A**2").hint
    assert "result =" in error("A * B").hint


def test_expected_lists_are_short_and_plain():
    err = error("x = f(A B")
    assert err.message == "found the name 'B', expected ')', ':', ',' or an operator"
    assert "_" not in error("x = A B").message
    assert "RPAR" not in error("x = (A;").message


@pytest.mark.parametrize("src", ["", "\n\n", "% only a comment\n", "%{\nblock\n%}\n",
                                 "%#linview input X(n,n)\n", "%#linview input X(n,n)",
                                 ";;,\n"])
def test_no_statements(src):
    err = error(src)
    assert "the program has no statements" in err.message
    assert str(err).startswith("t.m:")


def test_empty_input_renders_without_source_line():
    assert str(error("")).startswith("t.m:1:1: the program has no statements")


def test_crlf_and_tab_positions_in_errors():
    src = "x = 1;\r\n\ty = [A 'B'];\r\n"
    err = error(src)
    assert_located(err, src, 2, 9)


def test_odd_line_breaks_do_not_shift_the_shown_line():
    src = "x = 1;\x0c y = 2;\nz = ="
    err = error(src)
    assert (err.location.line, err.location.column) == (2, 5)
    assert "z = =" in str(err)


def test_default_filename():
    assert str(error_default("x = (")).startswith("<string>:1:5: ")


def error_default(src: str) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse(src)
    return info.value


def test_parse_error_is_a_linview_error():
    from linview.errors import LinviewError

    assert isinstance(error("x ="), LinviewError)


# ---------------------------------------------------------------- conformance with Octave
def _evaluate(e: syntax.Expr, env: dict[str, np.ndarray]) -> np.ndarray:
    """A tiny NumPy reading of an AST: enough to compare operator grouping with Octave."""
    if isinstance(e, syntax.Num):
        return np.array(e.value)
    if isinstance(e, syntax.Name):
        return env[e.id]
    if isinstance(e, syntax.Unary):
        value = _evaluate(e.operand, env)
        return -value if e.op == "-" else value
    if isinstance(e, syntax.Transpose):
        return _evaluate(e.operand, env).T
    if isinstance(e, syntax.Matrix):
        return np.block([[_evaluate(x, env) for x in row] for row in e.rows])
    assert isinstance(e, syntax.Binary)
    left, right = _evaluate(e.left, env), _evaluate(e.right, env)
    scalar = left.ndim == 0 or right.ndim == 0
    if e.op in ("+", "-"):
        return left + right if e.op == "+" else left - right
    if e.op in ("*", ".*"):
        return left * right if scalar or e.op == ".*" else left @ right
    if e.op in ("/", "./"):
        return left / right if right.ndim == 0 or e.op == "./" else \
            np.linalg.solve(right.T, left.T).T
    if e.op == "\\":
        return right / left if left.ndim == 0 else np.linalg.solve(left, right)
    assert e.op == "^"
    if left.ndim == 0 and right.ndim == 0:
        return left ** right
    return np.linalg.matrix_power(left, int(right))


_MATRICES = {
    "A": [[4, 1, 0], [1, 3, 1], [0, 1, 2]], "B": [[2, -1, 0], [0, 1, 3], [1, 0, 1]],
    "C": [[1, 2, 0], [0, 1, 0], [3, 0, 5]], "D": [[3, 0, 1], [1, 2, 0], [0, 1, 1]],
    "X": [[1, 0, 2], [2, 1, 0], [0, 3, 1]], "Y": [[1, 1, 0], [0, 2, 1], [1, 0, 3]],
}
_OCTAVE_CASES = [t for t, _ in PRECEDENCE] + ["[A, B; C, D]' * [X; Y]", "[A', B.'; C, D] \\ [X; Y]",
                                              "-[A, B; C, D]^2'", "1./A - 2.*B'"]


@pytest.mark.octave
@pytest.mark.skipif(shutil.which("octave-cli") is None, reason="needs octave-cli")
def test_operator_grouping_matches_octave():
    """Evaluate each expression in Octave and with NumPy on our AST: same numbers."""
    env = {k: np.array(v, dtype=float) for k, v in _MATRICES.items()}
    lines = [f"{k} = {np.array2string(v, separator=',').replace('],', '];')};"
             for k, v in env.items()]
    lines += [f"printf('%.17g ', {text}); printf('\\n');" for text in _OCTAVE_CASES]
    run = subprocess.run(["octave-cli", "--no-gui", "--norc", "--quiet", "--eval",
                          "\n".join(lines)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    results = run.stdout.strip().split("\n")
    assert len(results) == len(_OCTAVE_CASES), run.stdout
    for text, out in zip(_OCTAVE_CASES, results, strict=True):
        with np.errstate(divide="ignore", invalid="ignore"):  # 1./A has zeros to divide
            ours = np.asarray(_evaluate(expr(text), env), dtype=float).flatten(order="F")
        theirs = np.array([float(v) for v in out.split()])
        np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-9, err_msg=text)
