"""The wider Octave language (issue 14): sizes from the data, and what is maintained.

The constructs themselves are checked against GNU Octave by the program corpus
(``tests/test_programs.py``) and by the random programs of ``tests/test_language_fuzz.py``;
here are the decisions around them: when a program is specialised to the data, how pragmas
and ``dims=`` must agree with it, which statements stay maintained, and the errors.
"""

from __future__ import annotations

import numpy as np
import pytest

import linview
from linview.app.cli import main
from linview.compiler import maintenance
from linview.specialize import DeferredProgram

RNG = np.random.default_rng(14)


def compile_(src: str, **kw):
    return linview.compile(src, name="f", filename="f.m", **kw)


def update_and_check(views, x: str, rank: int = 1) -> None:
    a = views.inputs[x]
    u = 0.1 * RNG.standard_normal((a.shape[0], rank))
    v = 0.1 * RNG.standard_normal((a.shape[1], rank))
    views.update(x, u, v)
    assert views.verify() <= 1e-10


# ------------------------------------------------------------------ sizes from the data
BLOCK = "function K = f(A, B, C)\n  K = [A, B; B', C];\nend\n"


def test_block_sizes_that_are_sums_unify_without_pragmas():
    prog = compile_(BLOCK)
    assert not isinstance(prog, DeferredProgram)
    A, B, C = np.eye(3), RNG.standard_normal((3, 2)), np.eye(2)
    views = prog.load(A=A, B=B, C=C)
    assert np.allclose(views["K"], np.block([[A, B], [B.T, C]]))
    update_and_check(views, "B")
    with pytest.raises(linview.InputError, match=r"block row 2 has B' \(2x3\) and C \(4x4\)"):
        prog.load(A=A, B=B, C=np.eye(4))


def test_block_shape_error_names_the_blocks():
    src = "function K = f(A, B, C)\n %#linview dims A(n,n) B(n,p) C(n,p)\n K = [A, B; B', C];\nend"
    with pytest.raises(linview.ShapeError) as e:
        compile_(src)
    assert "[A, B; B', C]: block row 2 has B' (pxn) and C (nxp)" in e.value.message
    assert e.value.location.line == 3


def test_scalar_input_used_as_a_scalar_needs_no_pragma():
    prog = compile_("function P = f(P0, A, d)\n  P = d * (P0 * A);\nend\n")
    P0, A = RNG.standard_normal((4, 4)), RNG.standard_normal((4, 4))
    views = prog.load(P0=P0, A=A, d=0.5)
    assert np.allclose(views["P"], 0.5 * P0 @ A)
    assert type(views).DYNAMIC == ("P0", "A")  # a 1x1 input is a scalar, not dynamic
    update_and_check(views, "A", rank=2)
    # without data, explain says the sizes are the data's and how to plan a scalar
    text = compile_("function P = f(P0, A, d)\n  P = d * (P0 * A);\nend\n").explain()
    assert "d            rows_d×rows_P0 dynamic, sizes from the data" in text
    assert "`%#linview scalar`" in text
    declared = compile_("function P = f(P0, A, d)\n %#linview scalar d\n"
                        "  P = d * (P0 * A);\nend\n").explain()
    assert "d            1×1" in declared and "rows_d" not in declared


def test_specialised_modules_are_cached_by_shape_signature():
    prog = compile_("function y = f(X, s)\n  y = X(2:end, :) * s;\nend\n")
    a = prog.specialize(X=np.ones((5, 3)), s=2.0)
    assert prog.specialize(X=RNG.standard_normal((5, 3)), s=np.array([[3.0]])) is a
    assert prog.specialize(X=(5, 3), s=(1, 1)) is a
    assert prog.specialize(X=np.ones((6, 3)), s=2.0) is not a
    assert a.program.input("X").shape == (5, 3)


def test_programs_whose_sizes_decide_their_meaning_are_deferred_to_load():
    src = ("function y = f(X)\n  if rows(X) > 3\n    y = X' * X;\n  else\n    y = X * X';\n"
           "  end\nend\n")
    prog = compile_(src)
    assert isinstance(prog, DeferredProgram)
    with pytest.raises(linview.CompileError, match="compiled when load"):
        prog.explain()
    X = RNG.standard_normal((5, 2))
    assert np.allclose(prog.load(X=X)["y"], X.T @ X)
    assert np.allclose(prog.load(X=X[:3])["y"], X[:3] @ X[:3].T)


def test_pragmas_and_dims_must_agree_with_the_data():
    src = "function y = f(A, B)\n %#linview dims A(n,n) B(n,p)\n y = A * B;\nend\n"
    prog = compile_(src)
    with pytest.raises(linview.InputError, match="names that size n, which is 3 in A"):
        prog.load(A=np.eye(3), B=np.ones((4, 2)))
    with pytest.raises(linview.InputError, match=r"declares A\(n, n\)|names that size n"):
        prog.load(A=np.ones((3, 4)), B=np.ones((3, 2)))
    with pytest.raises(linview.InputError, match="dims= gives n = 5"):
        compile_(src, dims={"n": 5}).specialize(A=np.eye(3), B=np.ones((3, 1)))
    scal = compile_("function y = f(A, d)\n %#linview scalar d\n y = d * A;\nend\n")
    with pytest.raises(linview.InputError, match="'%#linview scalar d' declares it 1x1"):
        scal.specialize(A=np.eye(2), d=np.ones((2, 1)))


def test_single_row_data_specialises_a_column_sum():
    prog = compile_("function s = f(X)\n  s = sum(X);\nend\n")
    assert np.allclose(prog.load(X=np.ones((1, 4)))["s"], [[4.0]])  # Octave sums the row
    assert np.allclose(prog.load(X=np.ones((3, 4)))["s"], np.full((1, 4), 3.0))


# ------------------------------------------------------------------ maintained or not
@pytest.mark.parametrize("expr,maintained", [
    ("A + c", True), ("2 - A", True), ("A(2:end, :)", True), ("A(:, 1)", True),
    ("A(2, 3) * eye(2)", True), ("A - mean(A)", True), ("diag(A)", True),
    ("A(1:2:end, :)", True), ("A(2:2:4, 1:3:end)", True),
    ("A .^ 2", False), ("abs(A)", False), ("max(A, 0)", False), ("chol(A' * A + eye(4))", False),
    ("pinv(A)", False), ("kron(A, eye(2))", False), ("max(A)", False),
])
def test_what_is_maintained(expr, maintained):
    prog = compile_(f"function y = f(A, c)\n  y = {expr};\nend\n").specialize(A=(4, 4), c=(1, 1))
    status = maintenance.table(prog.plan)
    want = maintenance.MAINTAINED if maintained else maintenance.REEVALUATED
    assert {s for per in status.values() for s in per.values()} == {want}
    views = prog.load(A=RNG.standard_normal((4, 4)), c=0.3)
    update_and_check(views, "A", rank=2)


def test_norm_of_a_scalar_view_is_a_dense_difference():
    prog = compile_("function s = f(v)\n  s = norm(v, 1) + max(v);\nend\n",
                    strategy="hybrid").specialize(v=(6, 1))
    trig = prog.plan.triggers["v"]
    assert [vd.strategy.value for vd in trig.deltas[1:]] == ["hybrid"]


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize("body,needle,hint", [
    ("y = X(:);", "indexes a matrix as a vector", "X(i, j)"),
    ("y = X(3:-1:1, 1);", "must be a positive integer", "X(1:2:end, :)"),
    ("y = X(1:0:3, 1);", "must be a positive integer", "X(1:2:end, :)"),
    ("y = X + end;", "'end' inside an index", None),
    ("y = X .^ X;", "must be a number literal", "X .^ 2"),
    ("if X(1, 1) > 0\n y = X;\nelse\n y = -X;\nend", "depends on the data", "compile time"),
    ("y = X;\nwhile y(1, 1) > 1\n for i = 1:2\n  while y(2, 2) > 1\n   y = y / 2;\n  end\n"
     " end\nend", "a 'while' loop inside a 'while' loop", "for i = 1:k"),
    ("y = X;\nwhile y(1, 1) > 1\n y = [y, y];\nend", "'y' changes size", None),
    ("y = norm(X, 3);", "p = 1, 2, Inf or 'fro'", "norm(X, 'fro')"),
    ("y = norm(X, 'nuc');", "strings are not supported", None),
    ("y = X + exp('fro');", "the string 'fro' is not supported here", "norm(X, 'fro')"),
    ("y = max(X, 1, 2);", "must be []", None),
    ("y = X(5, 1);", "out of bounds", None),
    ("y = qr(X);", "qr() is supported with several outputs only", "[Q, R] = qr(A)"),
    ("y = svd(X);", "unknown function 'svd'", "pinv"),
])
def test_unsupported_constructs_say_what_to_write(body, needle, hint):
    src = f"function y = f(X)\n  %#linview dims X(3,3)\n{body}\nend\n"
    with pytest.raises(linview.LinviewError) as e:
        compile_(src)
    assert needle in e.value.message
    assert e.value.location is not None and e.value.location.line >= 3
    if hint:
        assert hint in (e.value.hint or "")


def test_cli_compiles_deferred_programs_for_given_shapes(tmp_path, capsys):
    path = tmp_path / "f.m"
    path.write_text("function y = f(X)\n  if rows(X) > 3\n    y = X' * X;\n  else\n"
                    "    y = X * X';\n  end\nend\n")
    assert main(["explain", str(path)]) == 2
    assert "--shapes X=RxC" in capsys.readouterr().err
    assert main(["explain", str(path), "--shapes", "X=5x2"]) == 0
    out = capsys.readouterr().out
    assert "y_0 := Xᵀ X" in out and "maintained on X" in out
    assert main(["explain", str(path), "--shapes", "X=5"]) == 2
    assert "bad --shapes item 'X=5'" in capsys.readouterr().err


def test_while_loop_is_reevaluated_as_a_whole_and_the_rest_maintained():
    src = ("function [x, G] = f(A, b)\n  G = A' * A;\n  x = b;\n  dx = 1;\n"
           "  while dx > 1e-12\n    xn = 0.5 * A * x + b;\n    dx = norm(xn - x, Inf);\n"
           "    x = xn;\n  end\nend\n")
    prog = compile_(src)
    assert isinstance(prog, DeferredProgram)  # compiled for the data's shapes
    A = RNG.standard_normal((5, 5))
    A = 0.8 * A / np.linalg.norm(A, 2)
    b = RNG.standard_normal((5, 1))
    views = prog.load(A=A, b=b)
    assert np.allclose(views["x"], np.linalg.solve(np.eye(5) - 0.5 * A, b), atol=1e-10)
    status = maintenance.table(prog.specialize(A=A, b=b).plan)
    assert status["G"] == {"A": maintenance.MAINTAINED}
    loops = [v for v in status if v.startswith("x")]
    assert loops and all(status[v]["A"] == maintenance.REEVALUATED for v in loops)
    update_and_check(views, "A")
    update_and_check(views, "b")
    assert np.allclose(views["x"], np.linalg.solve(np.eye(5) - 0.5 * views.inputs["A"],
                                                   views.inputs["b"]), atol=1e-10)


def test_a_declared_size_named_like_an_automatic_one_does_not_collide():
    # found by the differential suite: 'rows_A' is also the automatic name of A's rows
    src = "function t = f(U, A, V)\n  %#linview dims U(d,d) V(rows_A,d)\n  t = A' * U * V';\nend\n"
    prog = compile_(src)
    U, A, V = np.eye(4), RNG.standard_normal((4, 3)), RNG.standard_normal((2, 4))
    assert np.allclose(prog.load(U=U, A=A, V=V)["t"], A.T @ U @ V.T)


def test_a_specialised_program_saves_and_restores(tmp_path):
    src = ("function y = f(X)\n  if rows(X) > 3\n    y = X' * X;\n  else\n    y = X * X';\n"
           "  end\nend\n")
    views = compile_(src).load(X=RNG.standard_normal((5, 2)))
    update_and_check(views, "X")
    views.save(tmp_path / "state.npz")
    back = linview.restore(tmp_path / "state.npz")
    assert np.array_equal(back["y"], views["y"])
    update_and_check(back, "X")
