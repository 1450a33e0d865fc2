"""Whitespace inside ``[ ]`` and Octave's assignment operators, checked against Octave.

Inside brackets Octave starts a new element where whitespace separates two operands
(``[a b]``), where ``+``/``-`` after whitespace touches the next operand (``[a -b]`` is two
elements, ``[a - b]`` one) and before ``(`` (``[f (x)]`` is two).  linview's post-lexer
puts a comma there.  Each case is parsed by linview, printed back fully parenthesised
with explicit commas, and ``octave-cli`` checks that both texts give the same matrix:
hand-picked cases, then a few hundred random ones from a fixed seed.
"""

from __future__ import annotations

import random
import shutil
import subprocess

import pytest

from linview.errors import ParseError
from linview.frontend import syntax
from linview.frontend.parser import parse


def value(text: str) -> syntax.Expr:
    return parse(f"x = {text}").body[0].value


def explicit(e: syntax.Expr) -> str:
    """``e`` with every operation in parentheses and commas between elements."""
    if isinstance(e, syntax.Num):
        return e.text
    if isinstance(e, syntax.Name):
        return e.id
    if isinstance(e, syntax.Unary):
        return f"({e.op}{explicit(e.operand)})"
    if isinstance(e, syntax.Binary):
        return f"({explicit(e.left)} {e.op} {explicit(e.right)})"
    if isinstance(e, syntax.Transpose):
        return f"({explicit(e.operand)}{chr(39) if e.conjugate else '.' + chr(39)})"
    if isinstance(e, syntax.Call):
        return f"{e.func}({', '.join(explicit(a) for a in e.args)})"
    assert isinstance(e, syntax.Matrix), e
    return "[" + "; ".join(", ".join(explicit(x) for x in row) for row in e.rows) + "]"


CASES = [
    ("[a -b]", "[a, -b]"),
    ("[a - b]", "[a - b]"),
    ("[a -  b]", "[a - b]"),
    ("[a-b]", "[a - b]"),
    ("[a- b]", "[a - b]"),
    ("[a +b]", "[a, +b]"),
    ("[a -+b]", "[a, -+b]"),
    ("[a' b']", "[a', b']"),
    ("[a' -b']", "[a', -b']"),
    ("[f (x)]", "[f, (x)]"),
    ("[a (1)]", "[a, (1)]"),
    ("[a(1) (2)]", "[a(1), (2)]"),
    ("[ones(m,1) X]", "[ones(m, 1), X]"),
    ("[a ~b]", "[a, ~b]"),
    ("[a ~= b]", "[a ~= b]"),
    ("[1 -2 3]", "[1, -2, 3]"),
    ("[a * -b]", "[a * -b]"),
    ("[a -b\n c +d]", "[a, -b; c, +d]"),
    ("[[a b] [c d]]", "[[a, b], [c, d]]"),
    ("[a.^2 -b]", "[a.^2, -b]"),
    ("[a.' b]", "[a.', b]"),
]


@pytest.mark.parametrize(("text", "commas"), CASES, ids=[t for t, _ in CASES])
def test_whitespace_elements_read_as_commas(text, commas):
    assert value(text) == value(commas)


def test_function_outputs_and_multiple_assignment_keep_their_lists():
    f = parse("function [a b] = f(x)\n a = x; b = x;\nend")
    assert f.outputs == ("a", "b")
    m = parse("[Q R] = qr(A)").body[0]
    assert m.targets == ("Q", "R")


def test_quote_after_space_is_still_a_string():
    with pytest.raises(ParseError, match="strings are not supported"):
        value("[a 'b']")


ASSIGN_OPS = [
    ("W += T*T'", "W = W + (T*T')"),
    ("a -= b + c", "a = a - (b + c)"),
    ("a *= B", "a = a * B"),
    ("a /= b - c", "a = a / (b - c)"),
]


@pytest.mark.parametrize(("text", "plain"), ASSIGN_OPS, ids=[t for t, _ in ASSIGN_OPS])
def test_assignment_operators(text, plain):
    got, want = parse(text).body[0], parse(plain).body[0]
    assert (got.target, got.value) == (want.target, want.value)


def test_assignment_operator_needs_a_name():
    with pytest.raises(ParseError, match="left side of '\\+=' must be a name"):
        parse("x(1) += 2")
    with pytest.raises(ParseError, match="operator '\\^=' is not supported"):
        parse("x ^= 2")


# ------------------------------------------------------------------ against Octave
_ATOMS = ["a", "b", "c", "2", "(a)", "a'", "a(1)", "[b c]", "abs(c)", "-b"]
_GLUE = [" ", "  ", ", ", " -", " - ", "-", " +", " + ", "+ ", " * ", " *", " ~", " .^ 2 "]


def _random_cases(n: int) -> list[str]:
    rng = random.Random(25)
    out = []
    while len(out) < n:
        parts = [rng.choice(_ATOMS)]
        for _ in range(rng.randint(1, 4)):
            parts += [rng.choice(_GLUE), rng.choice(_ATOMS)]
        text = "[" + "".join(parts) + "]"
        try:
            value(text)
        except ParseError:
            continue  # e.g. '[a -~b]': the octave check below needs a parse
        out.append(text)
    return out


@pytest.mark.octave
@pytest.mark.skipif(shutil.which("octave-cli") is None, reason="needs octave-cli")
def test_bracket_reading_matches_octave():
    texts = [t for t, _ in CASES if "f (x)" not in t and "ones(m" not in t
             and "X]" not in t and "d]" not in t] + _random_cases(300)
    lines = ["a = 2; b = 3; c = 5; x = 7; f = 11; d = 13;"]
    for t in texts:
        ours = explicit(value(t))
        # both raise (e.g. '[b c] * [b c]': sizes) or both give the same matrix
        lines.append(f"try, p = {t}; catch, p = 'error'; end; "
                     f"try, q = {ours}; catch, q = 'error'; end; "
                     "printf('%d\\n', isequal(p, q));")
    run = subprocess.run(["octave-cli", "--no-gui", "--norc", "--quiet", "--eval",
                          "\n".join(lines)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    results = run.stdout.split()
    assert len(results) == len(texts), run.stdout
    wrong = [t for t, r in zip(texts, results, strict=True) if r != "1"]
    assert not wrong, wrong
