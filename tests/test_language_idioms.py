"""The Octave idioms of issue 25: loop variables in expressions, loop bounds from sizes,
``cov``/``var``/``std``/``repmat``/``factorial``, negative and zero powers, and non-square
``\\`` and ``/``.

GNU Octave checks the same constructs in the corpus (``tests/programs/``: ``fir_filter``,
``expm_series``, ``standardize``, ``stats_dims``, ``min_norm``, ...); here Hypothesis varies
the shapes, and each case is held to NumPy's definition (``ddof=1`` variance, ``lstsq``,
``pinv``) and, after random low-rank updates, to re-evaluation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import linview
from linview.specialize import DeferredProgram

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)


def compile_(src: str, **kw):
    return linview.compile(src, name="f", filename="f.m", **kw)


def rel(got, want) -> float:
    got, want = np.atleast_2d(got), np.atleast_2d(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-300))


def updated(views, name: str, rng, rank: int) -> None:
    a = views.inputs[name]
    views.update(name, 0.1 * rng.standard_normal((a.shape[0], rank)),
                 0.1 * rng.standard_normal((a.shape[1], rank)))
    assert views.verify() <= 1e-9


# ------------------------------------------------------------------ statistics
STATS = """function [C, V, S, V1, V2, S2, C1] = f(X)
  C = cov(X); V = var(X); S = std(X);
  V1 = var(X, 1); V2 = var(X, [], 2); S2 = std(X, 0, 2); C1 = cov(X, 1);
end"""


@settings(max_examples=12, **SETTINGS)
@given(st.integers(2, 9), st.integers(1, 6), st.integers(0, 2 ** 16))
def test_cov_var_std_follow_octave(m, n, seed):
    """Octave: N - 1 (or N with a 1), column-wise for a matrix, the whole vector for a
    vector (a 1xn X is one variable: cov and var of its elements)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((m, n))
    views = compile_(STATS).load(X=X)
    rows_ = X.T if m == 1 else X  # Octave's orientation for a row vector
    axis = 1 if m == 1 else 0
    assert rel(views["C"], np.atleast_2d(np.cov(rows_, rowvar=False))) < 1e-12
    var = np.var(X, axis=axis, ddof=1, keepdims=True)
    assert rel(views["V"], var) < 1e-12
    assert rel(views["S"], np.sqrt(var)) < 1e-12
    assert rel(views["V1"], np.var(X, axis=0, keepdims=True)) < 1e-12
    if n > 1:
        assert rel(views["V2"], np.var(X, axis=1, ddof=1, keepdims=True)) < 1e-12
        assert rel(views["S2"], np.std(X, axis=1, ddof=1, keepdims=True)) < 1e-12
    assert rel(views["C1"], np.atleast_2d(np.cov(rows_, rowvar=False, ddof=0))) < 1e-12
    for rank in (1, 2):
        updated(views, "X", rng, rank)


def test_cov_is_maintained_and_var_re_evaluated():
    prog = compile_("function [C, v] = f(X)\n  C = cov(X);\n  v = var(X);\nend")
    text = prog.specialize(X=(30, 4)).explain()
    section = text.split("maintenance (per statement and updated input):\n", 1)[1]
    line = {ln.split()[0]: ln for ln in section.splitlines() if ln.strip()}
    assert "maintained on X" in line["C"]
    assert "re-evaluated on X" in line["v"]


def test_repmat():
    src = """function [A, B, C, D] = f(r, c, M)
  A = repmat(r, 3, 1); B = repmat(c, 1, 2); C = repmat(M, 2, 3); D = repmat(M, rows(r), 2);
end"""
    rng = np.random.default_rng(1)
    r, c, M = rng.standard_normal((1, 4)), rng.standard_normal((5, 1)), rng.standard_normal((2, 3))
    views = compile_(src).load(r=r, c=c, M=M)
    for name, want in (("A", np.tile(r, (3, 1))), ("B", np.tile(c, (1, 2))),
                       ("C", np.tile(M, (2, 3))), ("D", np.tile(M, (1, 2)))):
        assert rel(views[name], want) < 1e-15, name
    for x in ("r", "c", "M"):
        updated(views, x, rng, 2)


# ------------------------------------------------------------------ loops
def test_loop_variable_is_a_scalar_in_each_copy_of_the_body():
    src = """function [S, p, q] = f(A, c, x)
  T = eye(rows(A)); S = T; p = 0; q = 0;
  for k = 1:6
    T = T * A / k;
    S += T;
    p = p + c(k) * x^k;
    q += 1 / factorial(k);
  end
end"""
    rng = np.random.default_rng(2)
    A, c = 0.3 * rng.standard_normal((4, 4)), rng.standard_normal((6, 1))
    views = compile_(src).load(A=A, c=c, x=0.7)
    want = sum(np.linalg.matrix_power(A, k) / math.factorial(k) for k in range(7))
    assert rel(views["S"], want) < 1e-14
    assert rel(views["p"], sum(c[k - 1, 0] * 0.7 ** k for k in range(1, 7))) < 1e-14
    assert rel(views["q"], sum(1 / math.factorial(k) for k in range(1, 7))) < 1e-15
    updated(views, "A", rng, 1)


@settings(max_examples=8, **SETTINGS)
@given(st.integers(1, 6), st.integers(6, 12), st.integers(0, 2 ** 16))
def test_loop_bounds_from_sizes_unroll_at_load(taps, n, seed):
    src = """function y = f(h, x)
  y = h(1) * x;
  for k = 2:length(h)
    y = y + h(k) * [zeros(k - 1, 1); x(1:end - k + 1)];
  end
end"""
    prog = compile_(src)
    assert isinstance(prog, DeferredProgram)  # length(h) is the data's
    rng = np.random.default_rng(seed)
    h, x = rng.standard_normal((taps, 1)), rng.standard_normal((n, 1))
    views = prog.load(h=h, x=x)
    assert rel(views["y"][:, 0], np.convolve(h[:, 0], x[:, 0])[:n]) < 1e-13
    updated(views, "x", rng, 1)


def test_loop_bound_from_a_declared_size_and_nested_bounds():
    src = """function S = f(X)
  %#linview dims X(6,4)
  S = zeros(rows(X));
  for i = 1:size(X, 2)
    for j = i:size(X, 2)
      S += X(:, i) * X(:, j)';
    end
  end
end"""
    prog = compile_(src)
    assert not isinstance(prog, DeferredProgram)
    X = np.random.default_rng(3).standard_normal((6, 4))
    want = sum(np.outer(X[:, i], X[:, j]) for i in range(4) for j in range(i, 4))
    assert rel(prog.load(X=X)["S"], want) < 1e-14


@pytest.mark.parametrize(("src", "words"), [
    ("function y = f(A, n)\n for i = 1:n\n  y = A;\n end\nend", "known before the data"),
    ("function y = f(A)\n y = A;\n for i = 1:0\n  y = A;\n end\n y = i * A;\nend",
     "has no value here"),
    ("function y = f(A)\n y = factorial(A);\nend", "factorial() takes a non-negative"),
    ("function y = f(A)\n y = factorial(-1);\nend", "factorial() takes a non-negative"),
    ("function y = f(A, B)\n y = cov(A, B);\nend", "cov(x, y) of two data sets"),
    ("function y = f(A)\n y = var(A, 2);\nend", "must be 0, 1 or []"),
    ("function y = f(A, B)\n y = A ^ B;\nend", "exponent of '^'"),
])
def test_errors(src, words):
    with pytest.raises(linview.LinviewError, match=None) as e:
        compile_(src)
    assert words in str(e.value)


# ------------------------------------------------------------------ powers
def test_zero_and_negative_powers():
    src = "function [P, Q, R] = f(A)\n  P = A^0; Q = A^(-1); R = A^-2;\nend"
    rng = np.random.default_rng(4)
    A = np.eye(4) + 0.2 * rng.standard_normal((4, 4))
    views = compile_(src).load(A=A)
    inv = np.linalg.inv(A)
    assert rel(views["P"], np.eye(4)) == 0
    assert rel(views["Q"], inv) < 1e-13
    assert rel(views["R"], inv @ inv) < 1e-13
    updated(views, "A", rng, 1)


# ------------------------------------------------------------------ non-square division
@settings(max_examples=10, **SETTINGS)
@given(st.integers(2, 12), st.integers(2, 12), st.integers(0, 2 ** 16))
def test_non_square_division_is_least_squares_or_minimum_norm(m, n, seed):
    """``A \\ b``: lstsq for a tall A, the minimum-norm solution (pinv) for a wide one, a
    solve for a square one; ``B / A`` likewise through transposes."""
    rng = np.random.default_rng(seed)
    A, b, B = (rng.standard_normal(s) for s in ((m, n), (m, 2), (3, n)))
    views = compile_("function [x, z] = f(A, b, B)\n  x = A \\ b;\n  z = B / A;\nend").load(
        A=A, b=b, B=B)
    assert rel(views["x"], np.linalg.pinv(A) @ b) < 1e-9
    assert rel(views["z"], B @ np.linalg.pinv(A)) < 1e-9
    updated(views, "A", rng, 1)
    updated(views, "b", rng, 2)


def test_declared_distinct_sizes_defer_the_choice_to_the_data():
    prog = compile_("function x = f(A, b)\n  %#linview dims A(m,n) b(m,1)\n  x = A \\ b;\nend")
    assert isinstance(prog, DeferredProgram)
    rng = np.random.default_rng(5)
    A, b = rng.standard_normal((50, 30)), rng.standard_normal((50, 1))
    x = prog.load(A=A, b=b)["x"]
    assert rel(x, np.linalg.lstsq(A, b, rcond=None)[0]) < 1e-12
