"""Lowering: SSA naming, loop unrolling, powers, inverses, sizes, and its errors."""

import numpy as np
import pytest
import sympy as sp

import linview
from linview.compiler.ir import Op
from linview.compiler.lower import Options, lower
from linview.frontend.parser import parse


def low(src, **opts):
    return lower(parse(src, "t.m"), src, "t.m", Options(**opts))


def names(prog):
    return [s.name for s in prog.statements]


def test_loop_unrolls_into_ssa_versions():
    p = low("function T = f(A, B, T0)\n T = T0;\n for i = 1:4\n  T = A*T + B;\n end\nend\n",
            model="linear")
    assert names(p) == ["T_1", "T_2", "T_3", "T_4"]
    assert dict(p.outputs)["T"].attr == "T_4"
    # T = T0 is a copy: T_1 reads the input directly
    assert {leaf.attr for leaf in p.statements[0].expr.walk() if leaf.op is Op.INPUT} == \
        {"A", "B", "T0"}


@pytest.mark.parametrize("model,skip,expect", [
    # thesis Table 6.1: T_i = P_{i/2} T_{i/2} + S_{i/2} B with P_i = A^i, S_i = I + ... + A^{i-1}
    ("exp", 4, ["A_pow2", "A_pow4", "A_sum2", "A_sum4", "T_1", "T_2", "T_4", "T_8"]),
    ("skip", 2, ["A_pow2", "A_sum2", "T_1", "T_2", "T_4", "T_6", "T_8"]),
])
def test_recurrences_follow_the_iterative_model(model, skip, expect):
    src = "function T = f(A, B, T0)\n T = T0;\n for i = 1:8\n  T = A*T + B;\n end\nend\n"
    p = low(src, model=model, skip=skip)
    assert names(p) == expect
    assert dict(p.outputs)["T"].attr == "T_8"


def test_power_by_squaring_reuses_squares():
    p = low("function D = f(A)\n D = A^16;\nend\n")
    assert names(p) == ["A_pow2", "A_pow4", "A_pow8", "D"]
    p = low("function D = f(A)\n D = A^6;\nend\n")
    assert names(p) == ["A_pow2", "A_pow4", "D"]  # A^6 = A^4 A^2


@pytest.mark.parametrize("model,expect", [
    ("linear", ["A_pow2", "A_pow3", "A_pow4", "A_pow5", "A_pow6", "A_pow7", "D"]),
    ("skip", ["A_pow2", "A_pow4", "A_pow8", "D"]),
    ("exp", ["A_pow2", "A_pow4", "A_pow8", "D"]),
])
def test_power_models(model, expect):
    k = 8 if model == "linear" else 12
    p = low(f"function D = f(A)\n D = A^{k};\nend\n", model=model, skip=4)
    assert names(p) == expect


def test_backslash_and_slash_become_inverse_views():
    p = low("function b = f(X, Y)\n b = (X'*X) \\ (X'*Y);\nend\n")
    ops = [s.expr.op for s in p.statements]
    assert ops == [Op.MUL, Op.INV, Op.MUL]
    p = low("function b = f(A, B)\n b = B / A;\nend\n")
    assert [s.expr.op for s in p.statements] == [Op.INV, Op.MUL]


def test_shapes_unify_across_statements():
    p = low("function b = f(X, Y)\n Z = X'*X;\n b = Z \\ (X'*Y);\nend\n")
    X, Y = p.inputs
    assert X.shape[0] == Y.shape[0]  # X'*Y forces rows(X) = rows(Y)
    b = p.statement("b").expr
    assert b.shape == (X.shape[1], Y.shape[1])


def test_size_and_scalar_constants():
    p = low("function r = f(M, r0)\n %#linview dims M(n,n) r0(n,1)\n n = size(M, 1);\n"
            " r = 0.5*M*r0 + (1 - 0.5)/n * ones(n, 1);\nend\n")
    consts = [n for n in p.statements[0].expr.walk() if n.op is Op.CONST]
    assert any(sp.sympify(c.attr).free_symbols == {sp.Symbol("n", integer=True,
                                                              positive=True)} for c in consts)


def test_sum_follows_octave_first_non_singleton_dimension():
    prog = linview.compile("function s = f(x)\n %#linview dims x(1,n)\n s = sum(x);\nend\n")
    v = prog.load(x=np.arange(4.0).reshape(1, 4))
    assert v["s"].shape == (1, 1) and v["s"][0, 0] == 6.0


@pytest.mark.parametrize("src,cls,needle", [
    ("function y = f(A)\n y = svd(A);\nend\n", linview.ParseError, "unknown function 'svd'"),
    ("function y = f(A)\n for i = 1:n\n  y = A;\n end\nend\n", linview.ParseError,
     "undefined variable 'n'"),
    ("function y = f(A, n)\n for i = 1:n\n  y = A;\n end\nend\n", linview.ParseError,
     "integer known before the data"),
    ("function y = f(A)\n %#linview dims A(m,n)\n y = A^2;\nend\n", linview.ShapeError,
     "square"),
    ("function y = f(A, B)\n %#linview dims A(n,n) B(m,1)\n y = A*B;\nend\n",
     linview.ShapeError, "inner dimensions"),
    ("function y = f(A, B)\n y = A^B;\nend\n", linview.ParseError, "exponent"),
    ("function y = f(A, B)\n y = A .^ B;\nend\n", linview.ParseError, "number literal"),
    ("function y = f(A)\n y = B;\nend\n", linview.ParseError, "undefined variable 'B'"),
    ("function y = f(A)\n y = A(1, 2, 3);\nend\n", linview.ParseError, "two subscripts"),
    ("function y = f(A)\n z = A;\nend\n", linview.ParseError, "never assigned"),
])
def test_errors_name_the_problem_and_the_place(src, cls, needle):
    with pytest.raises(cls) as e:
        linview.compile(src, name="f")
    text = str(e.value)
    assert needle in text
    assert text.startswith("f.m:")  # file:line:col
    assert "^" in text.splitlines()[2]  # the caret line under the source line


def test_shape_error_names_the_statement_and_both_shapes():
    src = "function y = f(A, B)\n %#linview dims A(n,n) B(m,1)\n y = A*B;\nend\n"
    with pytest.raises(linview.ShapeError) as e:
        linview.compile(src, name="f")
    msg = str(e.value)
    assert "statement 'y = ...'" in msg and "nxn" in msg and "mx1" in msg


def test_load_rejects_bad_inputs():
    prog = linview.compile("function y = f(A, B)\n %#linview dims A(n,n) B(n,1)\n"
                           " y = A*B;\nend\n", name="f")
    assert prog.program.input("B").shape[0] == prog.program.input("A").shape[0]
    A, B = np.eye(3), np.ones(3)
    with pytest.raises(linview.InputError, match="missing B"):
        prog.load(A=A)
    with pytest.raises(linview.InputError, match="unexpected C"):
        prog.load(A=A, B=B, C=A)
    with pytest.raises(linview.InputError, match="names that size n"):
        prog.load(A=A, B=np.ones(4))
    with pytest.raises(linview.InputError, match="NaN"):
        prog.load(A=np.full((3, 3), np.nan), B=B)
    with pytest.raises(linview.InputError, match="not a numeric"):
        prog.load(A=[["a", "b"], ["c", "d"]], B=np.ones(2))
    v = prog.load(A=A, B=B)  # 1-D B is a column
    assert v["y"].shape == (3, 1)


def test_scalar_inputs_accept_numbers():
    prog = linview.compile("function y = f(A, d)\n %#linview scalar d\n y = d*A;\nend\n")
    v = prog.load(A=np.eye(2), d=3)
    np.testing.assert_array_equal(v["y"], 3 * np.eye(2))
    assert prog.program.input("d").dynamic is False
