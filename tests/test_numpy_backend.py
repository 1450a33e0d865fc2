"""The NumPy backend: generated code, in-place updates, guards, save/restore."""

import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import linview
from linview.backends.numpy import runtime

SNAPSHOTS = Path(__file__).parent / "snapshots"
POWERS = "function C = powers4(A)\n %#linview dims A(n,n)\n B = A*A;\n C = B*B;\nend\n"
OLS = "function beta = ols(X, Y)\n %#linview dims X(m,n) Y(m,p)\n" \
      " beta = (X' * X) \\ (X' * Y);\nend\n"


@pytest.mark.parametrize("name,src,dims", [
    ("powers4", POWERS, {}),
    ("ols", OLS, {"m": 4000, "n": 1000, "p": 1}),
])
def test_generated_code_snapshot(name, src, dims):
    """The generated modules are reviewed for readability: changes show up here."""
    text = linview.compile(src, name=name, filename=f"{name}.m", dims=dims).source
    snap = SNAPSHOTS / f"{name}.py"
    if os.environ.get("LINVIEW_UPDATE_SNAPSHOTS") or not snap.exists():
        snap.write_text(text)
    assert text == snap.read_text(), f"generated code changed; review and refresh {snap}"


def test_generated_module_runs_on_its_own(tmp_path):
    prog = linview.compile(POWERS, name="powers4")
    path = tmp_path / "powers4_trigger.py"
    path.write_text(prog.source)
    script = (
        "import numpy as np, sys\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "import powers4_trigger as m\n"
        "A = np.random.default_rng(0).standard_normal((6, 6)) / 3\n"
        "v = m.Powers4(A=A)\n"
        "v.update('A', np.ones(6), np.arange(6.0) / 10)\n"
        "A2 = A + np.outer(np.ones(6), np.arange(6.0) / 10)\n"
        "assert np.allclose(v['C'], np.linalg.matrix_power(A2, 4))\n"
        "import linview.api, linview.frontend.parser\n"  # must not have been needed above
        "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=False)
    assert out.returncode == 0, out.stderr
    imports = [ln for ln in prog.source.splitlines() if ln.startswith(("import", "from"))]
    assert imports == ["import numpy as np", "from linview.backends.numpy import runtime as rt"]


def test_views_are_updated_in_place_without_square_temporaries():
    n = 400
    prog = linview.compile(POWERS, name="powers4", strategy="incr")
    rng = np.random.default_rng(0)
    v = prog.load(A=rng.standard_normal((n, n)) / np.sqrt(n))
    before = {k: id(a) for k, a in v._views.items()}
    assert all(a.flags.f_contiguous and a.dtype == np.float64 for a in v._views.values())
    u, w = rng.standard_normal(n), rng.standard_normal(n) / n
    v.update("A", u, w)  # warm up
    tracemalloc.start()
    v.update("A", u, w)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert {k: id(a) for k, a in v._views.items()} == before
    assert peak < n * n * 8 / 4, f"an update allocated {peak} bytes (a view is {n * n * 8})"


def test_one_hot_factors_read_only_the_touched_columns():
    A = np.arange(20.0).reshape(4, 5)
    X = np.zeros((5, 1))
    X[3] = 2.0
    np.testing.assert_array_equal(runtime.dot(A, X), A @ X)
    np.testing.assert_array_equal(runtime.dot(A.T, np.eye(4)[:, [1]]), A.T[:, [1]])


def test_ill_conditioned_woodbury_core_falls_back_to_reevaluation():
    prog = linview.compile("function W = f(A)\n %#linview dims A(n,n)\n W = inv(A);\nend\n",
                           name="f", strategy="incr")
    A = np.diag([1.0, 2.0, 3.0])
    v = prog.load(A=A)
    u = np.array([1.0, 0, 0])
    # A + u wᵀ is exactly singular: refused with NumericalError, nothing changes
    with pytest.raises(linview.NumericalError, match="singular"):
        v.update("A", u, np.array([-1.0, 0, 0]))
    np.testing.assert_array_equal(v["A"], A)
    np.testing.assert_array_equal(v["W"], np.linalg.inv(A))
    # Sherman–Morrison's denominator 1 + wᵀ A⁻¹ u = 1e-11: the trigger refuses the core and
    # the views are re-evaluated from the updated input instead, where cond(A') ≈ 3e11 is
    # over the default condition limit (refused, nothing changed) but not over a raised one
    w = np.array([-1.0 + 1e-11, 0.5, 0])
    with pytest.raises(linview.NumericalError, match="condition estimate is 3.*W"):
        v.update("A", u, w)
    np.testing.assert_array_equal(v["A"], A)
    v = prog.load(A=A, condition_limit=1e13)
    v.update("A", u, w)
    assert v.stats["fallbacks"] == 1
    A2 = A + np.outer(u, w)
    np.testing.assert_allclose(v["W"] @ A2, np.eye(3), atol=1e-4)
    # a harmless update takes the Sherman–Morrison path
    v = prog.load(A=A)
    v.update("A", u, np.array([-0.5, 0.0, 0.0]))
    np.testing.assert_allclose(v["W"], np.linalg.inv(A + np.outer(u, [-0.5, 0, 0])))
    assert v.stats["fallbacks"] == 0


def test_save_restore_round_trip_and_refusal(tmp_path):
    prog = linview.compile(OLS, name="ols")
    rng = np.random.default_rng(3)
    v = prog.load(X=rng.standard_normal((30, 5)), Y=rng.standard_normal((30, 2)))
    v.update("X", rng.standard_normal(30) * 0.1, rng.standard_normal(5) * 0.1)
    path = tmp_path / "state.npz"
    v.save(path)
    r = linview.restore(path)
    assert r.updates == 1
    for k in v._views:
        np.testing.assert_array_equal(r._views[k], v._views[k])
    r.update("Y", rng.standard_normal(30), rng.standard_normal(2))
    assert r.verify() < 1e-10
    r2 = linview.restore(path, program=prog)
    np.testing.assert_array_equal(r2["beta"], v["beta"])
    other = linview.compile(POWERS, name="powers4")
    with pytest.raises(linview.StateError, match="written by program 'ols'"):
        linview.restore(path, program=other)
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(linview.StateError):
        linview.restore(tmp_path / "bad.npz")


def test_outputs_are_read_only_views():
    prog = linview.compile(POWERS, name="powers4")
    v = prog.load(A=np.eye(3))
    with pytest.raises(ValueError):
        v["C"][0, 0] = 5.0
    assert set(v.outputs) == {"C"}


def test_drift_policy_refreshes():
    prog = linview.compile(POWERS, name="powers4")
    v = prog.load(A=np.eye(3) * 0.5, refresh_every=2)
    for _ in range(4):
        v.update("A", np.ones(3) * 0.01, np.ones(3) * 0.01)
    assert v.stats["refreshes"] == 2
    v = prog.load(A=np.eye(3) * 0.5, check_every=1, tolerance=1e-3)
    v.update("A", np.ones(3) * 0.01, np.ones(3) * 0.01)
    assert v.stats["refreshes"] == 0 and v.verify() < 1e-12
