"""Least squares done stably (issue 25).

``X \\ y`` (tall X), ``(X'*X) \\ (X'*y)`` and ``inv(X'*X) * (X'*y)`` are one least-squares
problem.  On well-conditioned data the normal equations are kept (``inv(XᵀX)`` by
Woodbury); when ``load()`` refuses that inverse as ill-conditioned, the program is
compiled again with the problem kept by QR updates of X's triangular factor (the
``cholesky`` solve view), whose answer stays as accurate as ``numpy.linalg.lstsq``.  Only
a Gram matrix singular to working precision is refused, with a hint to add a ridge term.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

try:  # tests/ may or may not be a package
    from tests.octave_runner import octave_available, run_octave
except ImportError:  # pragma: no cover - depends on how pytest set sys.path
    from octave_runner import octave_available, run_octave

import linview
from linview.backends.numpy.solve_module import SolveModule

FORMS = {
    "backslash": "beta = X \\ y;",
    "normal": "beta = (X' * X) \\ (X' * y);",
    "inverse": "beta = inv(X' * X) * (X' * y);",
    "pinv": "beta = pinv(X) * y;",
}
#: the same four forms over an intercept design Z = [ones(m,1) X]
DESIGN = {form: "Z = [ones(rows(X), 1) X];\n  " + text.replace("X", "Z")
          for form, text in FORMS.items()}


def program(form: str, intercept: bool = False, **kw):
    src = f"function beta = f(X, y)\n  {(DESIGN if intercept else FORMS)[form]}\nend\n"
    return linview.compile(src, name="f", filename="f.m", **kw)


def ill_conditioned(rng, m=120, n=80, decades=6):
    X = rng.standard_normal((m, n)) @ np.diag(np.logspace(0, -decades, n))
    beta = rng.standard_normal((n, 1))
    return X, beta


def error(x, truth) -> float:
    return float(np.linalg.norm(x - truth) / np.linalg.norm(truth))


@pytest.mark.parametrize("form", FORMS)
def test_ill_conditioned_least_squares_stays_as_accurate_as_lstsq(form):
    rng = np.random.default_rng(25)
    X, beta = ill_conditioned(rng)
    y = X @ beta  # consistent: the exact solution is beta
    views = program(form).load(X=X, y=y)
    assert isinstance(views, SolveModule)  # the normal equations were refused
    for rank in (1, 2, 1, 2):
        rows = rng.choice(X.shape[0], rank, replace=False)
        U = np.zeros((X.shape[0], rank))
        U[rows, range(rank)] = 1.0
        V = 1e-2 * rng.standard_normal((X.shape[1], rank))
        views.update("X", U, V)  # rows of X change ...
        views.update("y", U, (V.T @ beta).T)  # ... and y with them: still consistent
        X, y = X + U @ V.T, y + U @ (V.T @ beta)
        ours = error(views["beta"], beta)
        theirs = error(np.linalg.lstsq(X, y, rcond=None)[0], beta)
        assert ours <= 10 * max(theirs, 1e-14), (ours, theirs)


def with_ones(X):
    return np.hstack([np.ones((X.shape[0], 1)), X])


@pytest.mark.parametrize("form", FORMS)
def test_ill_conditioned_intercept_design_stays_as_accurate_as_lstsq(form):
    """``Z = [ones(m,1) X]`` is kept by factor updates of Z as plain X is: an update of
    X is a rank-k change of Z (V padded with a zero row for the ones column)."""
    rng = np.random.default_rng(32)
    X, _ = ill_conditioned(rng, 100, 50, decades=5)
    beta = rng.standard_normal((51, 1))
    y = with_ones(X) @ beta
    views = program(form, intercept=True).load(X=X, y=y)
    assert isinstance(views, SolveModule), form
    assert views.least_squares.startswith("least squares of Z by QR updates")
    for rank in (1, 2, 2, 1):
        rows = rng.choice(X.shape[0], rank, replace=False)
        U = np.zeros((X.shape[0], rank))
        U[rows, range(rank)] = 1.0
        V = 1e-2 * rng.standard_normal((X.shape[1], rank))
        views.update("X", U, V)
        views.update("y", U, (V.T @ beta[1:]).T)
        X, y = X + U @ V.T, y + U @ (V.T @ beta[1:])
        ours = error(views["beta"], beta)
        theirs = error(np.linalg.lstsq(with_ones(X), y, rcond=None)[0], beta)
        assert ours <= 10 * max(theirs, 1e-14), (form, ours, theirs)


@pytest.mark.parametrize("seed", range(4))
def test_dense_changes_and_near_dependence_stay_as_accurate_as_lstsq(seed):
    """Changes of every row at once (``F += U Vᵀ`` with dense U: a rank-2 change of the
    Gram matrix per column, one update and one downdate of its Cholesky factor) and a
    column driven towards another and back (the downdate meets a near-singular factor),
    held to lstsq of the current data after each change."""
    rng = np.random.default_rng(100 + seed)
    X, _ = ill_conditioned(rng, 90, 30, decades=4)
    beta = rng.standard_normal((30, 1))
    views = program("backslash", least_squares="qr",
                    shapes=(("X", 90, 30), ("y", 90, 1))).load(X=X, y=X @ beta)
    for step in range(8):
        if step in (3, 4):  # column 1 towards column 0 (1e-7 apart), then back
            new = X[:, 0] + (1e-7 if step == 3 else 1.0) * rng.standard_normal(90)
            U, V = (new - X[:, 1])[:, None], np.eye(30)[:, 1:2]
        else:
            rank = 1 + step % 2
            U, V = rng.standard_normal((90, rank)), 1e-2 * rng.standard_normal((30, rank))
        views.update("X", U, V)
        views.update("y", U, (V.T @ beta).T)
        X = X + U @ V.T
        ours = error(views["beta"], beta)
        theirs = error(np.linalg.lstsq(X, X @ beta, rcond=None)[0], beta)
        assert ours <= 10 * max(theirs, 1e-14), (step, ours, theirs)


@pytest.mark.parametrize("intercept", [False, True])
def test_well_conditioned_data_keep_the_normal_equations(intercept):
    rng = np.random.default_rng(26)
    X, y = rng.standard_normal((60, 8)), rng.standard_normal((60, 1))
    F = with_ones(X) if intercept else X
    for form in FORMS:
        views = program(form, intercept).load(X=X, y=y)
        assert not isinstance(views, SolveModule)
        assert error(views["beta"], np.linalg.lstsq(F, y, rcond=None)[0]) < 1e-12
        u, v = rng.standard_normal((60, 2)), rng.standard_normal((8, 2))
        views.update("X", u, v)  # differential: against lstsq of the updated data
        want = np.linalg.lstsq(F + u @ np.vstack([np.zeros((1, 2)), v] if intercept
                                                   else [v]).T, y, rcond=None)[0]
        assert error(views["beta"], want) < 1e-10, form


def test_pinv_of_a_square_or_wide_matrix_stays_pinv():
    for shape in ((6, 6), (4, 9)):
        X = np.random.default_rng(33).standard_normal(shape)
        y = np.ones((shape[0], 1))
        prog = program("pinv", shapes=(("X", *shape), ("y", shape[0], 1)))
        assert "least squares of X" not in prog.explain()
        assert error(prog.load(X=X, y=y)["beta"], np.linalg.pinv(X) @ y) < 1e-12


def test_singular_to_working_precision_is_refused_with_a_ridge_hint():
    rng = np.random.default_rng(27)
    X = rng.standard_normal((40, 6))
    X[:, 5] = X[:, 0] + X[:, 1]
    with pytest.raises(linview.NumericalError) as e:
        program("normal").load(X=X, y=rng.standard_normal((40, 1)))
    assert "singular to working precision" in e.value.message
    assert "ridge" in e.value.hint


def test_explain_says_which_form_and_why():
    text = program("inverse").explain()
    assert "least squares of X and y: normal equations" in text
    assert "QR updates of X instead when their error is predicted over 10× lstsq" in text
    stable = program("backslash", shapes=(("X", 50, 30), ("y", 50, 1)),
                     least_squares="qr")
    assert "kept by rank-1 updates and downdates, solved by corrected seminormal" in \
        stable.explain()


def estimate(text: str, F: str = "X") -> float:
    found = re.search(rf"the condition estimate of {F}ᵀ{F} is (\S+), (under|over) the "
                      r"limit 1e\+08", text)
    assert found, text
    return float(found.group(1))


@pytest.mark.parametrize("form", FORMS)
def test_loaded_views_say_which_form_and_why(form):
    """Which form load() chose, and the condition estimate and limit that decided it,
    in ``views.least_squares`` and ``explain(views=...)``: the estimate is held to
    numpy's 1-norm condition number of the Gram matrix (an estimate: within 3×)."""
    rng = np.random.default_rng(28)
    well = rng.standard_normal((60, 8))
    ill, beta = ill_conditioned(rng, 60, 40)
    for X, kept in ((well, "by the normal equations (explicit inverse inv(XᵀX) maintained "
                           "by Woodbury)"), (ill, "by QR updates of the factor")):
        prog = program(form).specialize(X=X, y=X @ beta[:X.shape[1]])
        views = prog.load(X=X, y=X @ beta[:X.shape[1]])
        assert views.least_squares.startswith(f"least squares of X {kept}")
        cond = estimate(views.least_squares)
        assert ("under" in views.least_squares) == (X is well)
        truth = np.linalg.cond(X.T @ X, 1)
        assert truth / 3 <= cond <= truth * 3 or (X is ill and cond > 1e10), (cond, truth)
        assert views.least_squares in prog.explain(views=views)
    deficient = well.copy()
    deficient[:, 7] = deficient[:, 0] + deficient[:, 1]
    y = np.ones((60, 1))
    if form in ("backslash", "pinv"):
        why = program(form).load(X=deficient, y=y).least_squares
        assert why.startswith("minimum-norm least squares of X by pinv")
        assert "XᵀX is singular to working precision" in why


def test_rank_deficient_backslash_gives_octaves_minimum_norm_answer():
    """Octave answers a rank-deficient ``X \\ y`` (tall X) with the minimum-norm
    least-squares solution, without a warning: so does linview, by pinv."""
    rng = np.random.default_rng(29)
    X, y = rng.standard_normal((30, 5)), rng.standard_normal((30, 1))
    X[:, 4] = X[:, 0] - X[:, 2]
    views = program("backslash").load(X=X, y=y)
    assert views.least_squares.startswith("minimum-norm least squares of X by pinv")
    assert error(views["beta"], np.linalg.pinv(X) @ y) < 1e-10
    u, v = rng.standard_normal((30, 1)), rng.standard_normal((5, 1))
    views.update("y", u, np.ones((1, 1)))
    assert error(views["beta"], np.linalg.pinv(X) @ (y + u)) < 1e-10
    views.update("X", u, v)  # the rank comes back: pinv is still the answer
    assert views.verify() < 1e-10


def test_other_problems_are_not_switched():
    """A refused inverse that is no least-squares problem stays refused, also in a
    program that has one."""
    A = np.diag(np.logspace(0, -13, 6))
    src = "function x = f(A, b)\n  x = A \\ b;\nend\n"
    with pytest.raises(linview.NumericalError, match="condition estimate"):
        linview.compile(src, name="f").load(A=A, b=np.ones((6, 1)))
    src = "function [x, z] = f(A, b, X, y)\n  x = A \\ b;\n  z = X \\ y;\nend\n"
    rng = np.random.default_rng(31)
    X, beta = ill_conditioned(rng, 40, 20)
    with pytest.raises(linview.NumericalError, match="cannot invert x_inv"):
        linview.compile(src, name="f").load(A=A, b=np.ones((6, 1)), X=X, y=X @ beta)


@pytest.mark.octave
def test_rank_deficient_and_ill_conditioned_answers_match_octave(tmp_path):
    if not octave_available():
        pytest.skip("octave-cli (GNU Octave) is not installed")
    rng = np.random.default_rng(30)
    deficient = rng.standard_normal((30, 5))
    deficient[:, 4] = deficient[:, 0] - deficient[:, 2]
    ill, _ = ill_conditioned(rng, 60, 40, decades=5)
    path = tmp_path / "f.m"
    for form in ("backslash", "pinv"):
        path.write_text(f"function beta = f(X, y)\n  {FORMS[form]}\nend\n")
        y = rng.standard_normal((30, 1))
        ours = linview.compile_file(path).load(X=deficient, y=y)["beta"]
        theirs = run_octave(path, {"X": deficient, "y": y}, ["beta"])["beta"]
        assert error(ours, np.linalg.pinv(deficient) @ y) < 1e-10
        if form == "pinv":  # Octave's pinv: the minimum-norm solution too
            assert error(ours, theirs) < 1e-10
        else:  # Octave's QR does not see the rank drop hidden by rounding: its answer
            # has entries near 1e14 (and a residual a few % larger) where linview's is
            # the minimum-norm least-squares solution: never a worse fit than Octave's
            res = [np.linalg.norm(deficient @ b - y) for b in (ours, theirs)]
            assert res[0] <= res[1] * (1 + 1e-8)
    y = rng.standard_normal((ill.shape[0], 1))
    answers = {}
    for form in FORMS:  # Octave's answer for each form as written, and linview's
        path.write_text(f"function beta = f(X, y)\n  {FORMS[form]}\nend\n")
        answers[form] = (linview.compile_file(path).load(X=ill, y=y)["beta"],
                         run_octave(path, {"X": ill, "y": y}, ["beta"])["beta"])
    qr = answers["backslash"][1]  # Octave's X \ y: QR, backward stable
    for form, (ours, theirs) in answers.items():
        assert error(ours, qr) < 1e-8, form  # each form: the least-squares answer
        assert error(ours, qr) <= max(error(theirs, qr), 1e-12), form  # never worse


# ------------------------------------------------------------------ weighted designs
#: the corpus's weighted least squares (tests/programs/wls.m, wls_intercept.m), as written
WEIGHTED = {
    False: "W = diag(w);\n  beta = (X' * W * X) \\ (X' * W * y);",
    True: "Z = [ones(rows(X), 1) X];\n  W = diag(w);\n  beta = (Z' * W * Z) \\ (Z' * W * y);",
}


def weighted(intercept: bool, **kw):
    src = f"function beta = f(X, y, w)\n  {WEIGHTED[intercept]}\nend\n"
    return linview.compile(src, name="f", filename="f.m", **kw)


def wlstsq(F, y, w):
    s = np.sqrt(w)
    return np.linalg.lstsq(s * F, s * y, rcond=None)[0]


@pytest.mark.parametrize("intercept", [False, True])
def test_ill_conditioned_weighted_least_squares_stays_as_accurate_as_lstsq(intercept):
    """``W = diag(w); (X'*W*X) \\ (X'*W*y)`` is least squares of the design ``√w·X``:
    past the condition limit it is kept by factor updates (an update of X or y is a row
    change scaled by √w, a change of w one update or downdate per row whose weight moved,
    a zero weight included), as accurate as lstsq on the weighted data."""
    rng = np.random.default_rng(40 + intercept)
    X, _ = ill_conditioned(rng, 100, 50, decades=5)
    n = 50 + intercept
    beta = rng.standard_normal((n, 1))
    w = rng.uniform(0.2, 3.0, (100, 1))

    def design(X):
        return with_ones(X) if intercept else X

    y = design(X) @ beta  # consistent: every weighting has the solution beta
    views = weighted(intercept).load(X=X, y=y, w=w)
    assert isinstance(views, SolveModule)
    assert "by QR updates" in views.least_squares and "diag(w)" in views.least_squares
    for step in range(8):
        row = rng.integers(100)
        U = np.zeros((100, 1))
        U[row] = 1.0
        if step % 2 == 0:  # a row of X, and y with it
            V = 1e-2 * rng.standard_normal((50, 1))
            dy = U @ (V.T @ beta[intercept:])
            views.update("X", U, V)
            views.update("y", U, dy.T @ U)
            X, y = X + U @ V.T, y + dy
        else:  # a weight: to zero, or another value
            new = 0.0 if step == 3 else rng.uniform(0.2, 3.0)
            views.update("w", U, np.array([[new - w[row, 0]]]))
            w = w + U * (new - w[row, 0])
        ours = error(views["beta"], beta)
        theirs = error(wlstsq(design(X), y, w), beta)
        assert ours <= 10 * max(theirs, 1e-14), (step, ours, theirs)


@pytest.mark.parametrize("intercept", [False, True])
def test_weighted_well_conditioned_keeps_the_normal_equations(intercept):
    rng = np.random.default_rng(44)
    X, y, w = rng.standard_normal((40, 5)), rng.standard_normal((40, 1)), \
        rng.uniform(0.5, 2.0, (40, 1))
    views = weighted(intercept).load(X=X, y=y, w=w)
    assert not isinstance(views, SolveModule)
    assert "normal equations" in views.least_squares and "diag(w)" in views.least_squares
    F = with_ones(X) if intercept else X
    assert error(views["beta"], wlstsq(F, y, w)) < 1e-12
    U = np.zeros((40, 1))
    U[7] = 1.0
    views.update("w", U, np.array([[0.5]]))
    w = w + 0.5 * U
    assert error(views["beta"], wlstsq(F, y, w)) < 1e-10


def test_weighted_answers_match_octave(tmp_path):
    if not octave_available():
        pytest.skip("octave-cli (GNU Octave) is not installed")
    rng = np.random.default_rng(45)
    X, _ = ill_conditioned(rng, 60, 30, decades=5)
    y, w = rng.standard_normal((60, 1)), rng.uniform(0.2, 3.0, (60, 1))
    path = tmp_path / "f.m"
    path.write_text(f"function beta = f(X, y, w)\n  {WEIGHTED[False]}\nend\n")
    views = linview.compile_file(path).load(X=X, y=y, w=w)
    assert isinstance(views, SolveModule)  # the stable form: the normal equations refused
    theirs = run_octave(path, {"X": X, "y": y, "w": w}, ["beta"])["beta"]
    qr_path = tmp_path / "g.m"  # Octave's QR least squares of the weighted data
    qr_path.write_text("function beta = g(X, y, w)\n  s = sqrt(w);\n"
                       "  beta = (s .* X) \\ (s .* y);\nend\n")
    qr = run_octave(qr_path, {"X": X, "y": y, "w": w}, ["beta"])["beta"]
    ours = views["beta"]
    assert error(ours, qr) < 1e-8
    assert error(ours, qr) <= max(error(theirs, qr), 1e-12)  # never worse than as written


@settings(max_examples=25, deadline=None)
@given(st.floats(0.0, 3.5), st.booleans(), st.integers(0, 2 ** 16))
def test_explain_predicts_the_normal_equations_error(decades, consistent, seed):
    """Below the limit, the reason states the normal equations' predicted relative error
    (``cond(XᵀX)·eps``) against lstsq's: over conditionings from 1 to 10^3.5 (cond(XᵀX)
    up to 1e7, so the normal equations are kept), the error measured against lstsq's
    answer is never more than 10× the prediction (or than 10·n·eps near cond 1)."""
    rng = np.random.default_rng(seed)
    m, n = 60, 12
    Q1, _ = np.linalg.qr(rng.standard_normal((m, n)))
    Q2, _ = np.linalg.qr(rng.standard_normal((n, n)))
    X = Q1 @ np.diag(np.logspace(0, -decades, n)) @ Q2.T
    beta = rng.standard_normal((n, 1))
    y = X @ beta + (0 if consistent else 1e-3 * rng.standard_normal((m, 1)))
    views = program("normal", least_squares="normal").load(X=X, y=y)  # the Woodbury form
    assert not isinstance(views, SolveModule)
    found = re.search(r"predicted relative error about (\S+) against lstsq's (\S+) "
                      r"\((\S+)×\)", views.least_squares)
    assert found, views.least_squares
    predicted = float(found.group(1))
    reference = np.linalg.lstsq(X, y, rcond=None)[0]  # QR: about κ·eps from the exact
    floor = n * np.finfo(float).eps  # near cond 1, rounding of n-term sums dominates
    assert error(views["beta"], reference) <= 10 * max(predicted, floor)


@pytest.mark.parametrize("weights", [False, True])
def test_a_state_of_the_stable_form_restores(tmp_path, weights):
    """A program that load() compiled again in the stable form saves that form's options:
    restore() compiles it the same way (it failed with 'unexpected _warm'), and the
    restored views follow the same updates."""
    rng = np.random.default_rng(46)
    X, _ = ill_conditioned(rng, 80, 40, decades=5)
    y = rng.standard_normal((80, 1))
    if weights:
        w = rng.uniform(0.2, 3.0, (80, 1))
        views = weighted(False).load(X=X, y=y, w=w)
    else:
        views = program("normal").load(X=X, y=y)
    assert isinstance(views, SolveModule)
    views.save(tmp_path / "s.lvs")
    back = linview.restore(tmp_path / "s.lvs")
    assert error(back["beta"], views["beta"]) < 1e-12
    U = np.zeros((80, 1))
    U[3] = 1.0
    V = 1e-2 * rng.standard_normal((40, 1))
    for v in (views, back):
        v.update("X", U, V)
    assert error(back["beta"], views["beta"]) < 1e-12
