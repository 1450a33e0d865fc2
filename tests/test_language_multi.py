"""Multiple assignment (issue 14): ``[Q, R] = qr(A)``, ``[L, U, P] = lu(A)``,
``[r, c] = size(A)``.

The corpus (``tests/programs/qr_*.m``, ``lu_*.m``, ``size_intercept.m``) checks programs
using them against GNU Octave after low-rank updates.  Here: the factors' defining
properties and NumPy's LAPACK factors on square, tall and wide matrices, the same files
against Octave for the shapes the corpus does not cover, what is maintained, the generated
code, the Spark backend's refusal, and the errors.
"""

from __future__ import annotations

import numpy as np
import pytest

import linview
from linview.compiler import maintenance

try:  # tests/ may or may not be a package
    from tests.octave_runner import octave_available, run_octave
except ImportError:  # pragma: no cover - depends on how pytest set sys.path
    from octave_runner import octave_available, run_octave

RNG = np.random.default_rng(1414)

QR = "function [Q, R] = f(X)\n  [Q, R] = qr(X{opt});\nend\n"
LU3 = "function [L, U, P] = f(A)\n  [L, U, P] = lu(A);\nend\n"
LU2 = "function [L, U] = f(A)\n  [L, U] = lu(A);\nend\n"


def compile_(src: str, **kw):
    return linview.compile(src, name="f", filename="f.m", **kw)


# ------------------------------------------------------------------ the factors
@pytest.mark.parametrize("shape", [(5, 5), (7, 3), (3, 6)])
@pytest.mark.parametrize("opt", ["", ", 0", ", 'econ'", ', "econ"'])
def test_qr_factors(shape, opt):
    X = RNG.standard_normal(shape)
    v = compile_(QR.format(opt=opt)).load(X=X)
    Q, R = v["Q"], v["R"]
    economy = bool(opt)
    m, n = shape
    k = min(m, n) if economy else m
    assert Q.shape == (m, k) and R.shape == (k, n)
    assert np.allclose(Q.T @ Q, np.eye(k)) and np.allclose(Q @ R, X)
    assert np.allclose(np.tril(R, -1), 0)
    want_q, want_r = np.linalg.qr(X, mode="reduced" if economy else "complete")
    assert np.allclose(Q, want_q) and np.allclose(R, want_r)  # LAPACK's signs


@pytest.mark.parametrize("shape", [(5, 5), (1, 1)])
def test_lu_factors(shape):
    A = RNG.standard_normal(shape)
    v = compile_(LU3).load(A=A)
    L, U, P = v["L"], v["U"], v["P"]
    assert np.allclose(P @ A, L @ U)
    assert np.allclose(np.diag(L), 1) and np.allclose(np.triu(L, 1), 0)
    assert np.allclose(np.tril(U, -1), 0)
    assert np.allclose(P @ P.T, np.eye(shape[0])) and set(np.unique(P)) <= {0.0, 1.0}
    assert np.all(np.abs(L) <= 1 + 1e-12)  # partial pivoting
    w = compile_(LU2).load(A=A)
    assert np.allclose(w["L"], P.T @ L) and np.allclose(w["U"], U)


def test_lu_of_a_rectangular_matrix_of_known_size():
    src = "function [L, U, P] = f(A)\n  %#linview dims A(4,6)\n  [L, U, P] = lu(A);\nend\n"
    A = RNG.standard_normal((4, 6))
    v = compile_(src).load(A=A)
    assert v["L"].shape == (4, 4) and v["U"].shape == (4, 6)
    assert np.allclose(v["P"] @ A, v["L"] @ v["U"])


# ------------------------------------------------------------------ against Octave
OCTAVE_CASES = [
    ("function [Q, R] = f(X)\n  [Q, R] = qr(X);\nend\n", {"X": (3, 5)}),
    ("function [Q, R] = f(X)\n  [Q, R] = qr(X, 0);\nend\n", {"X": (3, 5)}),
    ("function [Q, R, s] = f(X)\n  [Q, R] = qr(X' * X);\n  s = sum(Q * R);\nend\n",
     {"X": (6, 4)}),
    ("function [L, U, P] = f(A)\n  %#linview dims A(5,3)\n  [L, U, P] = lu(A);\nend\n",
     {"A": (5, 3)}),
    ("function [L, U] = f(A)\n  %#linview dims A(3,5)\n  [L, U] = lu(A);\nend\n",
     {"A": (3, 5)}),
    (LU2, {"A": (3, 5)}),  # compiled square without data, specialised to the data's shape
    (LU3, {"A": (6, 4)}),
    ("function [x, n] = f(A, b)\n  x = b;\n  n = 0;\n  while norm(x) > 0.1\n"
     "    [Q, R] = qr(A);\n    x = 0.5 * (Q' * x);\n    n = n + 1;\n  end\nend\n",
     {"A": (4, 4), "b": (4, 1)}),
    ("function [y, r] = f(X)\n  [r, c] = size(X);\n  y = X * ones(c, 1) / c + r;\nend\n",
     {"X": (4, 3)}),
]


@pytest.mark.octave
@pytest.mark.parametrize("src,shapes", OCTAVE_CASES)
def test_octave_agrees(src, shapes, tmp_path):
    if not octave_available():
        pytest.skip("octave-cli (GNU Octave) is not installed")
    inputs = {k: RNG.standard_normal(s) for k, s in shapes.items()}
    outs = src.split("[", 1)[1].split("]", 1)[0].replace(" ", "").split(",")
    views = compile_(src).load(**inputs)
    path = tmp_path / "f.m"
    path.write_text(src)
    want = run_octave(path, inputs, outs)
    for o in outs:
        got = np.atleast_2d(views[o])
        assert got.shape == np.atleast_2d(want[o]).shape, o
        assert np.allclose(got, want[o], rtol=1e-9, atol=1e-9), o


# ------------------------------------------------------------------ maintained or not
def test_factors_are_reevaluated_and_the_rest_maintained():
    src = ("function [C, beta] = f(X, W, y)\n  C = X' * W * X;\n  [Q, R] = qr(X, 0);\n"
           "  beta = R \\ (Q' * y);\nend\n")
    prog = compile_(src, strategy="incr").specialize(X=(9, 3), W=(9, 9), y=(9, 1))
    status = maintenance.table(prog.plan)
    assert status["Q"]["X"] == status["R"]["X"] == maintenance.REEVALUATED
    assert status["C"]["X"] == status["C"]["W"] == maintenance.MAINTAINED
    assert "W" not in status["Q"]  # an update of W leaves the factors alone
    X, W, y = (RNG.standard_normal(s) for s in ((9, 3), (9, 9), (9, 1)))
    views = prog.load(X=X, W=W, y=y)
    for name, shape in (("X", (9, 3)), ("W", (9, 9)), ("y", (9, 1))):
        u, v = 0.1 * RNG.standard_normal((shape[0], 2)), RNG.standard_normal((shape[1], 2))
        views.update(name, u, v)
        assert views.verify() <= 1e-10
    X = views.inputs["X"]
    assert np.allclose(views["beta"], np.linalg.lstsq(X, views.inputs["y"], rcond=None)[0])


def test_generated_code_factors_once_per_method():
    src = ("function [x, L, U, P] = f(A, b)\n  [L, U, P] = lu(A);\n"
           "  x = U \\ (L \\ (P * b));\nend\n")
    prog = compile_(src, strategy="reeval").specialize(A=(5, 5), b=(5, 1))
    code = prog.source
    for method in code.split("    def ")[1:]:
        assert method.count("rt.lu(") <= 1, method
    assert "lu0_L, lu0_U, lu0_P = rt.lu(A, permuted=False)" in code
    assert max(len(line) for line in code.splitlines()) <= 100


def test_spark_compiles_multiple_assignment():
    """Spark renders every op (docs/spark.md): qr's outputs compile there too, factored
    once per method as on NumPy."""
    src = "function [Q, R] = f(X)\n  [Q, R] = qr(X);\nend\n"
    code = compile_(src, backend="spark").specialize(X=(4, 3)).source
    for method in code.split("    def ")[1:]:
        assert method.count("rt.qr(") <= 1, method


def test_size_outputs_are_sizes_and_need_no_data():
    src = "function Z = f(X)\n  [n, p] = size(X);\n  Z = [ones(n, 1), X] * eye(p + 1);\nend\n"
    prog = compile_(src)
    assert not isinstance(prog, linview.specialize.DeferredProgram)
    X = RNG.standard_normal((6, 2))
    assert np.allclose(prog.load(X=X)["Z"], np.hstack([np.ones((6, 1)), X]))


def test_economy_qr_with_open_sizes_is_compiled_for_the_data():
    prog = compile_(QR.format(opt=", 0"))
    assert isinstance(prog, linview.specialize.DeferredProgram)
    assert "which of its argument's sizes is smaller" in prog.deferred
    square = "function [Q, R] = f(X)\n  %#linview dims X(n,n)\n  [Q, R] = qr(X, 0);\nend\n"
    assert not isinstance(compile_(square), linview.specialize.DeferredProgram)


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize("body,needle,hint", [
    ("[m, i] = max(X);", "max() with 2 outputs is not supported", "write m = max(x)"),
    ("[a, b] = foo(X);", "foo() with 2 outputs is not supported", "[Q, R] = qr(A)"),
    ("[a, b] = X;", "must be a call of qr, lu or size", "[Q, R] = qr(A)"),
    ("[Q, R, P] = qr(X);", "qr() with 3 outputs", "column pivoting"),
    ("[a, b, c, d] = lu(X);", "lu() with 4 outputs", "[L, U, P] = lu(A)"),
    ("[Q, R] = qr(X, 2);", "qr(A, 2) is not supported", "qr(A, 0)"),
    ("[Q, R] = qr(X, 'fro');", "qr(A, 'fro') is not supported", "qr(A, 0)"),
    ("[Q, R] = qr(X, 0, 1);", "qr() takes 1 to 2 arguments", None),
    ("[r, c] = size(X, 1);", "size(A) takes 1 argument", "[r, c] = size(A)"),
    ("y = qr(X);", "qr() is supported with several outputs only", "[Q, R] = qr(A)"),
    ("y = lu(X) * 2;", "lu() is supported with several outputs only", "[L, U, P] = lu(A)"),
    ("y = size(X);", "size() takes 2 arguments", "[r, c] = size(X)"),
    ("for i = 1:2\n  [i, y] = qr(X);\nend", "cannot assign to loop variable 'i'", None),
])
def test_unsupported_forms_say_what_to_write(body, needle, hint):
    src = f"function y = f(X)\n  %#linview dims X(3,3)\n  y = X;\n{body}\nend\n"
    with pytest.raises(linview.LinviewError) as e:
        compile_(src)
    assert needle in e.value.message
    assert e.value.location is not None and e.value.location.line >= 4
    if hint:
        assert hint in (e.value.hint or "")


@pytest.mark.parametrize("target,needle", [
    ("[Q; R]", "must be names in one row"),
    ("[Q, R(1)]", "must be names in one row"),
    ("[Q, Q]", "names a variable twice"),
])
def test_bad_targets_are_parse_errors(target, needle):
    with pytest.raises(linview.ParseError, match=needle.replace("(", r"\(")) as e:
        compile_(f"function Q = f(X)\n  {target} = qr(X);\nend\n")
    assert (e.value.location.line, e.value.location.column) == (2, 3)


def test_one_bracketed_target_is_a_plain_assignment():
    v = compile_("function y = f(X)\n  [y] = X * 2;\nend\n").load(X=np.eye(2))
    assert np.allclose(v["y"], 2 * np.eye(2))
