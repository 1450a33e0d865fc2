"""``linview run``'s status line: the formatting function and the last error check it shows
(the probe's residual or a verification, from a real stream of updates)."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import linview
from linview.app import run_cli
from linview.app.run_cli import status_text

ROOT = Path(__file__).resolve().parent.parent

SRC = "function beta = ols(X, Y)\n %#linview dims X(m,n) Y(m,p)\n" \
      " beta = (X' * X) \\ (X' * Y);\nend\n"


def line(check, now=100.0, lag=None):
    return status_text(rate=1234.4, batches=7, record=42, lag=lag, skipped=1, refreshes=0,
                       check=check, now=now)


def test_status_without_a_check_or_lag():
    text = line(None)
    assert text == ("1,234 updates/s · 7 batches · record 42 · skipped 1 · refreshes 0 · "
                    "check –")


def test_status_shows_lag_and_a_failed_check_with_its_age():
    text = line({"by": "verify", "error": 3.2e-5, "ok": False, "at": 10.0}, now=100.0,
                lag=2.345)
    assert "lag 2.3s" in text
    assert text.endswith("check FAILED (verify 3.2e-05, 2min ago)")
    assert line({"by": "probe", "error": 1e-16, "ok": True, "at": 99.6}).endswith(
        "check ok (probe 1.0e-16, 0s ago)")
    assert "1.5h ago" in line({"by": "probe", "error": 0.0, "ok": True, "at": 0.0},
                              now=5400.0)


def test_status_check_is_the_probe_residual_then_the_verification():
    rng = np.random.default_rng(3)
    X, Y = rng.standard_normal((40, 6)), rng.standard_normal((40, 1))
    v = linview.compile(SRC, name="ols").load(X=X, Y=Y)
    assert v.last_check is None
    assert line(v.last_check).endswith("check –")
    for _ in range(3):
        U = np.zeros((40, 2))
        U[rng.integers(40), 0] = U[rng.integers(40), 1] = 1.0
        v.update("X", U, 0.1 * rng.standard_normal((6, 2)))
    # the residual of the maintained inverse, recomputed here from the views
    W, A = v["beta_inv"], v["X"].T @ v["X"]
    z = rng.standard_normal((6, 1))
    assert v.last_check["by"] == "probe" and v.last_check["ok"]
    assert v.last_check["error"] < 1e-12
    assert np.linalg.norm(W @ (A @ z) - z) / np.linalg.norm(z) < 1e-12
    assert v.last_check["error"] == v.probes["beta_inv"]["residual"]
    assert f"check ok (probe {v.last_check['error']:.1e}," in line(v.last_check,
                                                                    now=v.last_check["at"])
    err = v.verify()
    assert v.last_check["by"] == "verify" and v.last_check["error"] == err
    ref = np.linalg.solve(v["X"].T @ v["X"], v["X"].T @ v["Y"])
    assert abs(err) < 1e-10 and np.allclose(v["beta"], ref, atol=1e-10)
    assert f"check ok (verify {err:.1e}," in line(v.last_check, now=v.last_check["at"])


def test_run_sets_the_blas_worker_timeout_before_numpy_loads_and_a_users_value_wins():
    """``linview run`` puts OpenBLAS's idle workers to sleep at once (``BLAS_ENV``): only
    possible while NumPy is not loaded yet, so the CLI's modules must not import it."""
    code = ("import sys, os\n"
            "from linview.app import cli, run_cli\n"
            "assert 'numpy' not in sys.modules\n"
            "run_cli.quiet_blas_workers()\n"
            "print(os.environ['OPENBLAS_THREAD_TIMEOUT'])\n")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == run_cli.BLAS_ENV["OPENBLAS_THREAD_TIMEOUT"]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**env, "OPENBLAS_THREAD_TIMEOUT": "12"}, cwd=ROOT)
    assert out.stdout.strip() == "12"
