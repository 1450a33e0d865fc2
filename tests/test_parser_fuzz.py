"""Property tests of the parser (Hypothesis).

* Robustness: garbage and near-miss programs either parse or raise ``ParseError`` with a
  location inside the source; no Lark exception or other error ever escapes.
* Round trip: random expression ASTs printed with full parentheses and with the fewest
  parentheses the precedence table allows both parse back to the same AST.
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from linview.errors import ParseError
from linview.frontend import syntax
from linview.frontend.parser import parse

FAST = settings(max_examples=200, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def parse_or_error(source: str) -> syntax.Module | ParseError:
    """Parse; a ParseError is returned after checking its location, anything else fails."""
    try:
        module = parse(source, "fuzz.m")
    except ParseError as err:
        loc = err.location
        assert loc is not None and loc.filename == "fuzz.m"
        lines = source.split("\n")
        assert 1 <= loc.line <= len(lines), (loc, source)
        assert 1 <= loc.column <= len(lines[loc.line - 1]) + 1, (loc, source)
        text = str(err)
        assert text.startswith(f"fuzz.m:{loc.line}:{loc.column}: ")
        return err
    assert isinstance(module, syntax.Function | syntax.Script)
    return module


# ---------------------------------------------------------------- garbage
TOKENS = ["A", "x1", "f", "1", "0.5", ".5", "1e-3", "=", "+", "-", "*", "/", "\\", "^", "'",
          ".'", ".*", "./", "(", ")", "[", "]", ",", ";", ":", "\n", "\r\n", " ", "\t", "...",
          "%", "#", "%{", "%}", "#{", "%#linview", "dims", "dynamic", "X(m,n)", "for",
          "end", "endfor", "function", "endfunction", "if", "==", '"', ".^", "@", "{", "~",
          "$", "\x00", "é"]


@FAST
@given(st.text(max_size=80))
def test_arbitrary_text_never_crashes(source):
    parse_or_error(source)


@FAST
@given(st.lists(st.sampled_from(TOKENS), max_size=40).map("".join))
def test_token_soup_never_crashes(source):
    parse_or_error(source)


@FAST
@given(st.binary(max_size=80))
def test_binary_garbage_never_crashes(data):
    parse_or_error(data.decode("latin-1"))


# ---------------------------------------------------------------- near misses
VALID = [
    """function beta = ols(X, Y)
  %#linview dynamic X Y
  %#linview dims X(m,n) Y(m,p)
  beta = (X' * X) \\ (X' * Y);
end
""",
    """function [T, S] = powers(A, B)
%#linview dims A(n,n), B(n,1)
T = B; S = B;
for i = 1:2:16
  T = A*T + B;   % iterate
  S = [S, T; T', 1];
endfor
endfunction
""",
    """%#linview input A(n,n) x(n,1)
%#linview scalar d
%{
PageRank, k steps
%}
p = x;
for k = 1:10, p = d * A * p + (1 - d) / n * ones(n, 1); end
r = -p.' ./ 2.5e-1 ...
    + inv(eye(n) - A)^2 * p;
""",
]
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
VALID += [p.read_text() for p in sorted(EXAMPLES.glob("*.m"))]
VALID_TOKENS = re.compile(r"\s+|[A-Za-z_]\w*|\d*\.?\d+(?:[eE][+-]?\d+)?|\.\.\.|\.[*/']|.")


def test_valid_examples_parse():
    for source in VALID:
        assert isinstance(parse(source), syntax.Function | syntax.Script)


@st.composite
def near_misses(draw) -> str:
    source = draw(st.sampled_from(VALID))
    how = draw(st.sampled_from(["delete", "insert", "replace", "drop_token", "dup_token",
                                "swap_tokens", "put_token"]))
    if how in ("delete", "insert", "replace"):
        i = draw(st.integers(0, len(source) - 1))
        char = draw(st.sampled_from("()[],;:='.+-*/\\^%#{}\n x1e"))
        if how == "delete":
            return source[:i] + source[i + 1:]
        if how == "insert":
            return source[:i] + char + source[i:]
        return source[:i] + char + source[i + 1:]
    tokens = VALID_TOKENS.findall(source)
    i = draw(st.integers(0, len(tokens) - 2))
    if how == "drop_token":
        del tokens[i]
    elif how == "dup_token":
        tokens.insert(i, tokens[i])
    elif how == "swap_tokens":
        tokens[i], tokens[i + 1] = tokens[i + 1], tokens[i]
    else:
        tokens.insert(i, draw(st.sampled_from(TOKENS)))
    return "".join(tokens)


@FAST
@given(near_misses())
def test_near_misses_never_crash(source):
    parse_or_error(source)


# ---------------------------------------------------------------- round trip
KEYWORDS = {"function", "for", "end", "endfor", "endfunction", "if", "else", "elseif",
            "while", "do", "until", "switch", "case", "otherwise", "break", "continue",
            "return", "global", "persistent", "try", "catch", "parfor", "spmd"}
names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,4}", fullmatch=True).filter(
    lambda n: n not in KEYWORDS and not n.startswith("end"))
number_texts = st.one_of(
    st.integers(0, 10**6).map(str),
    st.tuples(st.integers(0, 999), st.integers(0, 999)).map(lambda t: f"{t[0]}.{t[1]}"),
    st.integers(0, 999).map(lambda i: f".{i}"),
    st.tuples(st.integers(1, 9), st.sampled_from(["e", "E"]), st.sampled_from(["", "+", "-"]),
              st.integers(0, 20)).map(lambda t: f"{t[0]}{t[1]}{t[2]}{t[3]}"),
)
leaves = st.one_of(names.map(syntax.Name), number_texts.map(lambda t: syntax.Num(float(t), t)))
BINARY_OPS = ["+", "-", "*", "/", "\\", ".*", "./", "^"]


def _compound(children):
    return st.one_of(
        st.builds(syntax.Binary, st.sampled_from(BINARY_OPS), children, children),
        st.builds(syntax.Unary, st.sampled_from(["-", "+"]), children),
        st.builds(syntax.Transpose, children, st.booleans()),
        st.builds(syntax.Call, names, st.lists(children, max_size=3).map(tuple)),
        st.builds(syntax.Matrix, st.lists(st.lists(children, min_size=1, max_size=3).map(tuple),
                                       min_size=1, max_size=3).map(tuple)),
    )


expressions = st.recursive(leaves, _compound, max_leaves=12)


def _args(e: syntax.Call, show) -> str:
    return f"{e.func}({', '.join(show(a) for a in e.args)})"


def _rows(e: syntax.Matrix, show) -> str:
    return "[" + "; ".join(", ".join(show(x) for x in row) for row in e.rows) + "]"


def _sign(op: str, operand: str) -> str:
    # "- -A", not "--A": Octave lexes -- as the decrement operator.
    return f"{op} {operand}" if operand[:1] in "+-" else op + operand


def full_parens(e: syntax.Expr) -> str:
    """Every compound expression in parentheses."""
    if isinstance(e, syntax.Name):
        return e.id
    if isinstance(e, syntax.Num):
        return e.text
    if isinstance(e, syntax.Binary):
        return f"({full_parens(e.left)} {e.op} {full_parens(e.right)})"
    if isinstance(e, syntax.Unary):
        return f"({_sign(e.op, full_parens(e.operand))})"
    if isinstance(e, syntax.Transpose):
        return f"({full_parens(e.operand)}{chr(39) if e.conjugate else '.' + chr(39)})"
    if isinstance(e, syntax.Call):
        return _args(e, full_parens)
    return _rows(e, full_parens)


# Precedence levels of the grammar, loosest first; atoms bind tightest.
SUM, PRODUCT, UNARY, POSTFIX, ATOM = range(1, 6)
LEVEL = {"+": SUM, "-": SUM, "*": PRODUCT, "/": PRODUCT, "\\": PRODUCT, ".*": PRODUCT,
         "./": PRODUCT, "^": POSTFIX}


def level(e: syntax.Expr) -> int:
    if isinstance(e, syntax.Binary):
        return LEVEL[e.op]
    if isinstance(e, syntax.Unary):
        return UNARY
    if isinstance(e, syntax.Transpose):
        return POSTFIX
    return ATOM


def is_exponent(e: syntax.Expr) -> bool:
    """What may follow ``^`` unparenthesised: an atom, or a sign before such a thing."""
    return level(e) == ATOM or (isinstance(e, syntax.Unary) and is_exponent(e.operand))


def minimal(e: syntax.Expr) -> str:
    """Parentheses only where the precedence table needs them (all ops left-assoc)."""

    def at_least(sub: syntax.Expr, lvl: int) -> str:
        text = minimal(sub)
        return text if level(sub) >= lvl else f"({text})"

    if isinstance(e, syntax.Binary):
        lvl = LEVEL[e.op]
        left = at_least(e.left, lvl)
        if e.op == "^":
            right = minimal(e.right) if is_exponent(e.right) else f"({minimal(e.right)})"
            return f"{left}^{right}"
        right = at_least(e.right, lvl + 1)  # left-assoc: a tighter right operand
        return f"{left} {e.op} {right}"
    if isinstance(e, syntax.Unary):
        return _sign(e.op, at_least(e.operand, UNARY))
    if isinstance(e, syntax.Transpose):
        return at_least(e.operand, POSTFIX) + ("'" if e.conjugate else ".'")
    if isinstance(e, syntax.Call):
        return _args(e, minimal)
    if isinstance(e, syntax.Matrix):
        return _rows(e, minimal)
    return full_parens(e)  # a name or a number


def parse_expr(text: str) -> syntax.Expr:
    module = parse(f"out = {text}\n")
    assert isinstance(module, syntax.Script) and len(module.body) == 1
    return module.body[0].value


@FAST
@given(expressions)
def test_round_trip_full_parentheses(e):
    assert parse_expr(full_parens(e)) == e


@FAST
@given(expressions)
def test_round_trip_minimal_parentheses(e):
    text = minimal(e)
    assert parse_expr(text) == e, text


def test_minimal_printer_examples():
    a, b, c = syntax.Name("a"), syntax.Name("b"), syntax.Name("c")
    one = syntax.Num(1.0, "1")
    assert minimal(syntax.Binary("-", a, syntax.Binary("-", b, c))) == "a - (b - c)"
    assert minimal(syntax.Binary("^", a, syntax.Unary("-", one))) == "a^-1"
    assert minimal(syntax.Unary("-", syntax.Transpose(a))) == "-a'"
    assert minimal(syntax.Transpose(syntax.Unary("-", a))) == "(-a)'"
    assert minimal(syntax.Binary("^", a, syntax.Transpose(b))) == "a^(b')"
    assert minimal(syntax.Unary("-", syntax.Unary("-", a))) == "- -a"


# ---------------------------------------------------------------- statements
@st.composite
def statements(draw, depth: int = 0):
    if depth < 2 and draw(st.integers(0, 4)) == 0:
        var = draw(names)
        start, stop = (draw(st.integers(0, 50).map(str)) for _ in range(2))
        step = draw(st.none() | st.integers(1, 5).map(str))
        body = tuple(draw(st.lists(statements(depth + 1), max_size=3)))
        num = lambda t: syntax.Num(float(t), t)  # noqa: E731
        return syntax.For(var, num(start), num(stop), body, None if step is None else num(step))
    return syntax.Assign(draw(names), draw(expressions))


def show_statement(s, indent: str = "") -> str:
    if isinstance(s, syntax.Assign):
        return f"{indent}{s.target} = {minimal(s.value)};"
    rng = f"{s.start.text}:{s.step.text}:{s.stop.text}" if s.step else \
        f"{s.start.text}:{s.stop.text}"
    inner = "\n".join(show_statement(b, indent + "  ") for b in s.body)
    return f"{indent}for {s.var} = {rng}\n{inner}\n{indent}end".replace("\n\n", "\n")


@FAST
@given(st.lists(statements(), min_size=1, max_size=4), st.sampled_from(["\n", "\r\n"]))
def test_round_trip_scripts(body, newline):
    source = "\n".join(show_statement(s) for s in body).replace("\n", newline)
    assert parse(source) == syntax.Script(tuple(body), ())
