"""``linview run``: streams of updates, micro-batches, checkpoints and crash recovery."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from linview.app.cli import main

SRC = "function beta = ols(X, Y)\n %#linview dims X(m,n) Y(m,p)\n" \
      " beta = (X' * X) \\ (X' * Y);\nend\n"


@pytest.fixture
def setup(tmp_path):
    rng = np.random.default_rng(0)
    m, n = 30, 6
    X, Y = rng.standard_normal((m, n)), rng.standard_normal((m, 1))
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "Y.npy", Y)
    (tmp_path / "ols.m").write_text(SRC)
    recs, Xf, Yf = [], X.copy(), Y.copy()
    for i in range(60):
        if i % 3 == 2:
            d = (0.05 * rng.standard_normal(1)).tolist()
            r = int(rng.integers(m))
            recs.append({"input": "Y", "row": r, "delta": d})
            Yf[r] += d
        else:
            d = (0.05 * rng.standard_normal(n)).tolist()
            r = int(rng.integers(m))
            recs.append({"input": "X", "row": r, "delta": d, "batch": i // 6})
            Xf[r] += d
    (tmp_path / "updates.jsonl").write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    expect = np.linalg.solve(Xf.T @ Xf, Xf.T @ Yf)
    return tmp_path, expect


def run(tmp, *extra, env=None):
    cmd = [sys.executable, "-m", "linview.app.cli", "run", str(tmp / "ols.m"),
           "--input", f"X={tmp / 'X.npy'}", "--input", f"Y={tmp / 'Y.npy'}",
           "--updates", str(tmp / "updates.jsonl"), "--out", str(tmp / "out"), *extra]
    return subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})},
                          check=False)


def test_stream_applies_every_record(setup):
    tmp, expect = setup
    proc = run(tmp, "--checkpoint", str(tmp / "ckpt"), "--checkpoint-every", "5")
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(proc.stdout)
    assert stats["offset"] == 60 and stats["verify"] < 1e-10
    assert stats["batches"] < 60  # X records sharing a batch id were merged
    out = np.load(tmp / "out" / "latest.npz")
    np.testing.assert_allclose(out["beta"], expect, rtol=1e-9)


def test_crash_and_resume_lose_nothing_and_apply_nothing_twice(setup):
    tmp, expect = setup
    proc = run(tmp, "--checkpoint", str(tmp / "ckpt"), "--checkpoint-every", "4",
               env={"LINVIEW_TEST_CRASH_AFTER": "37"})
    assert proc.returncode == 86  # died mid-stream, between checkpoints
    assert (tmp / "ckpt" / "wal.jsonl").read_text()  # logged, not yet checkpointed
    proc = run(tmp, "--checkpoint", str(tmp / "ckpt"), "--checkpoint-every", "4")
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(proc.stdout)
    assert stats["resumed_at"] > 0 and stats["replayed"] > 0
    assert stats["offset"] == 60
    out = np.load(tmp / "out" / "latest.npz")
    np.testing.assert_allclose(out["beta"], expect, rtol=1e-9)
    # running again finds nothing new
    proc = run(tmp, "--checkpoint", str(tmp / "ckpt"))
    assert json.loads(proc.stdout)["applied"] == 0
    np.testing.assert_allclose(np.load(tmp / "out" / "latest.npz")["beta"], expect, rtol=1e-9)


def test_malformed_record_is_rejected_with_its_number(setup, capsys):
    tmp, _ = setup
    lines = (tmp / "updates.jsonl").read_text().splitlines()
    lines[7] = json.dumps({"input": "X", "row": 3, "delta": [1.0, "nan?"]})
    (tmp / "updates.jsonl").write_text("\n".join(lines) + "\n")
    code = main(["run", str(tmp / "ols.m"), "--input", f"X={tmp / 'X.npy'}", "--input",
                 f"Y={tmp / 'Y.npy'}", "--updates", str(tmp / "updates.jsonl")])
    assert code == 2
    assert "update record 7" in capsys.readouterr().err
