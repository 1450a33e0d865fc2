"""Stopping ``linview run --backend spark`` at injection points (``docs/stopping.md``): a full
disk between the results and the position write, an exception after the first change of a
batch, SIGTERM inside a batch; each time the same command resumes, and the end equals an
uninterrupted run (kept to one chain of runs: Spark runs are slow)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from linview.app.stream_out import read_results

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

SRC = "function beta = ols(X, Y)\n %#linview dims X(m,n) Y(m,p)\n" \
      " beta = (X' * X) \\ (X' * Y);\nend\n"


def test_stops_at_injection_points_then_resume(tmp_path):
    rng = np.random.default_rng(4)
    m, n = 120, 6
    X, Y = rng.standard_normal((m, n)), rng.standard_normal((m, 1))
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "Y.npy", Y)
    (tmp_path / "ols.m").write_text(SRC)
    (tmp_path / "upd").mkdir()
    betas = []
    for f in range(7):
        lines = []
        for _ in range(3):
            r = int(rng.integers(m))
            d = (0.1 * rng.standard_normal(n)).tolist()
            lines.append({"input": "X", "row": r + 1, "add": d})
            X[r] += d
            lines.append({"input": "Y", "cell": [r + 1, 1], "set": float(f)})
            Y[r] = f
        path = tmp_path / "upd" / f"u{f:03d}.jsonl"
        path.write_text("".join(json.dumps(x) + "\n" for x in lines))
        os.utime(path, (1e9 + f, 1e9 + f))
        betas.append(np.linalg.solve(X.T @ X, X.T @ Y))
    temp = tmp_path / "tmp"
    temp.mkdir()
    cmd = [sys.executable, "-m", "linview.app.cli", "run", str(tmp_path / "ols.m"),
           "--backend", "spark", "--master", "local[2]", "--input", f"X={tmp_path / 'X.npy'}",
           "--input", f"Y={tmp_path / 'Y.npy'}", "--updates", str(tmp_path / "upd"),
           "--checkpoint", str(tmp_path / "ck"), "--out", str(tmp_path / "out"), "--once",
           "--checkpoint-every", "2", "--quiet"]

    def run(faults=None):
        env = {**os.environ, "TMPDIR": str(temp)}
        if faults:
            env["LINVIEW_TEST_FAULTS"] = faults
        return subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)

    stops = [("out.position@2=enospc", 2, "cannot write the outputs"),
             ("batch.op@3=raise", 2, "InjectedFault"),
             ("batch.logged@6=sigterm", 143, "interrupted by SIGTERM")]
    for rule, code, said in stops:
        p = run(rule)
        assert p.returncode == code and said in p.stderr, (rule, p.stderr)
        assert "Traceback" not in p.stderr
    p = run()
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["batch"] == 7
    log = [json.loads(x)["source_batch"] for x in
           (tmp_path / "out" / "log.jsonl").read_text().splitlines()]
    assert log == list(range(7))
    results = read_results(tmp_path / "out")
    for b in range(1, 8):
        np.testing.assert_allclose(results[b]["beta"], betas[b - 1], rtol=1e-9)
    assert not [x.name for x in temp.iterdir() if x.name.startswith("linview-")]
