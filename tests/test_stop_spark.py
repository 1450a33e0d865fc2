"""Stopping ``linview run --backend spark`` at injection points (``docs/stopping.md``): SIGTERM
inside a batch of a ``linview run`` process, which the same command resumes to the end of
an uninterrupted run (one process stopped: Spark runs are slow); and, in this process, every
point of a batch in every way of stopping (an exception, a signal, a full disk, a folder
turning read-only), each resumed."""

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

    # a full disk at the outputs' position write and an exception inside a batch were
    # stops of this chain too: test_every_point_of_a_spark_batch_then_resume stops there
    # (and at every other point of a batch) in this process, checks the same messages
    # and resumes each; a separate process is kept here for the signal and the exit code
    stops = [("batch.logged@6=sigterm", 143, "interrupted by SIGTERM")]
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


def test_every_point_of_a_spark_batch_then_resume(tmp_path):
    """In this process, on one local session: the run on Spark stopped at every point
    reached in its micro-batch 3 (and the checkpoint after it) in each way of
    ``test_stop_faults.KINDS`` (an exception, SIGINT, SIGTERM, ENOSPC at the writes, a
    checkpoint folder turning read-only), each stop resumed and compared with an
    uninterrupted run."""
    from types import SimpleNamespace

    from test_stop_faults import KINDS, stopper

    import linview
    from linview import faults
    from linview.app.run_cli import Status
    from linview.app.spark_stream import run_structured
    from linview.backends.spark.session import local_session
    from linview.errors import LinviewError

    rng = np.random.default_rng(6)
    np.save(tmp_path / "X.npy", rng.standard_normal((50, 4)))
    np.save(tmp_path / "Y.npy", rng.standard_normal((50, 1)))
    (tmp_path / "upd").mkdir()
    for f in range(4):
        path = tmp_path / "upd" / f"u{f}.jsonl"
        r = int(rng.integers(50)) + 1
        path.write_text(json.dumps({"input": "X", "row": r, "add": rng.standard_normal(4)
                                    .tolist()}) + "\n" + json.dumps(
            {"input": "Y", "cell": [r, 1], "set": float(f)}) + "\n")
        os.utime(path, (1e9 + f, 1e9 + f))
    prog = linview.compile(SRC, name="ols", backend="spark")
    spark = local_session("local[1]")

    def run(name, hook=None):
        args = SimpleNamespace(
            updates=str(tmp_path / "upd"), master=None, once=True, spark_driver_mib=64,
            checkpoint=str(tmp_path / name / "ck"), out=str(tmp_path / name / "out"),
            checkpoint_every=3, restart=False, on_error="stop", max_batch=1, verify=False,
            spark_log_level="ERROR", input=[f"X={tmp_path / 'X.npy'}",
                                            f"Y={tmp_path / 'Y.npy'}"])
        try:
            with faults.hooked(hook or (lambda name: None)):
                return run_structured(prog, args, {}, Status(quiet=True))
        except LinviewError as e:
            return e

    try:
        seen = []
        assert run("ref", seen.append)["batch"] == 4
        want = read_results(tmp_path / "ref" / "out")
        done = [i for i, n in enumerate(seen, 1) if n == "batch.done"]
        hits = range(done[1] + 1, done[2] + 4)  # batch 3 and its checkpoint
        assert seen[done[2]:done[2] + 3] == ["save.write", "save.rename", "wal.truncate"]
        writes = {"wal.write", "wal.sync", "out.results", "out.position", "save.write",
                  "save.rename", "wal.truncate"}
        stops, differ = 0, []
        for kind in KINDS:
            for at in hits:
                if kind == "ENOSPC" and seen[at - 1] not in writes:
                    continue
                name = f"{kind}-{at}"
                got = run(name, stopper(kind, at, []))
                if kind in ("SIGINT", "SIGTERM"):
                    assert isinstance(got, dict) and got["interrupted"] == kind, got
                elif kind == "read-only" and isinstance(got, dict):
                    pass  # read-only from a point after the batch's last checkpoint write
                else:
                    assert isinstance(got, LinviewError), (name, got)
                    if kind == "exception":  # a failed batch names its cause
                        assert "InjectedFault" in str(got), (name, got)
                    elif kind == "ENOSPC" and seen[at - 1].startswith("out."):
                        assert "cannot write the outputs" in str(got), (name, got)
                stops += 1
                again = run(name)
                results = read_results(tmp_path / name / "out")
                if not (isinstance(again, dict) and again["batch"] == 4
                        and sorted(results) == sorted(want) and all(
                            np.allclose(results[b]["beta"], want[b]["beta"], rtol=1e-9)
                            for b in want)):
                    differ.append((name, again))
    finally:
        spark.stop()
    points = sorted({seen[i - 1] for i in hits})
    print(f"\nfault walk (ols, spark): {len(points)} points ({', '.join(points)}), "
          f"{len(hits)} hits, {len(KINDS)} kinds: {stops} stops, {len(differ)} differ")
    assert not differ and stops >= 2 * len(hits)
