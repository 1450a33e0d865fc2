"""``linview run --backend spark``: Structured Streaming, exactly once across kill -9."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from linview.app.stream_out import read_results

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

SRC = "function beta = ols(X, Y)\n %#linview dims X(m,n) Y(m,p)\n" \
      " beta = (X' * X) \\ (X' * Y);\nend\n"


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    """An OLS stream of 8 files (one micro-batch each, one of them Parquet): row adds, row
    sets, observations."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tmp = tmp_path_factory.mktemp("sstream")
    rng = np.random.default_rng(3)
    m, n = 300, 12
    X, Y = rng.standard_normal((m, n)), rng.standard_normal((m, 1))
    np.save(tmp / "X.npy", X)
    np.save(tmp / "Y.npy", Y)
    (tmp / "ols.m").write_text(SRC)
    (tmp / "upd").mkdir()
    betas = []
    for f in range(8):
        lines = []
        for _ in range(6):
            r = int(rng.integers(m))
            d = (0.1 * rng.standard_normal(n)).tolist()
            lines.append({"input": "X", "row": r + 1, "add": d})
            X[r] += d
            y = float(rng.standard_normal())
            lines.append({"input": "Y", "row": r + 1, "set": [y]})
            Y[r] = y
        x, y = rng.standard_normal(n), float(rng.standard_normal())
        lines.append({"observe": {"X": x.tolist(), "Y": [y]}, "row": f + 1})
        X[f], Y[f] = x, y
        if f == 3:  # one file of Parquet rows with the same fields
            path = tmp / "upd" / f"u{f:03d}.parquet"
            keys = sorted({k for x in lines for k in x})  # missing fields are nulls
            pq.write_table(pa.Table.from_pylist([{k: x.get(k) for k in keys}
                                                 for x in lines]), path)
        else:
            path = tmp / "upd" / f"u{f:03d}.jsonl"
            path.write_text("".join(json.dumps(x) + "\n" for x in lines))
        os.utime(path, (1e9 + f, 1e9 + f))  # Spark takes files by modification time
        betas.append(np.linalg.solve(X.T @ X, X.T @ Y))
    np.save(tmp / "betas.npy", np.stack(betas))  # the estimate after each file
    return tmp, betas[-1]


# the runs whose subject is not the process use `spark` (conftest), a local[2] session in
# this process: the CLI in this process keeps a session it finds running (no JVM start per run)


def command(tmp, name, updates=None):
    return [sys.executable, "-m", "linview.app.cli", "run", str(tmp / "ols.m"), "--backend",
            "spark", "--master", "local[2]", "--partitions", "2", "--input",
            f"X={tmp / 'X.npy'}", "--input", f"Y={tmp / 'Y.npy'}", "--updates",
            str(updates or tmp / "upd"), "--checkpoint", str(tmp / name / "ck"), "--out",
            str(tmp / name / "out"), "--once", "--checkpoint-every", "3"]


def run(tmp, name, env=None, updates=None, extra=()):
    return subprocess.run([*command(tmp, name, updates), *extra], capture_output=True,
                          text=True, check=False, env={**os.environ, **(env or {})})


def run_here(tmp, name, capsys, updates=None, extra=()):
    """``linview run`` in this process (its ``main``, on the module's session): the exit
    code and what it wrote to stderr."""
    from linview.app.cli import main

    capsys.readouterr()
    code = main([*command(tmp, name, updates)[3:], *extra])
    return code, capsys.readouterr()


def final(tmp, name):
    return np.load(tmp / name / "out" / "latest.npz")["beta"]


def log_batches(tmp, name):
    text = (tmp / name / "out" / "log.jsonl").read_text()
    return [json.loads(x)["source_batch"] for x in text.splitlines()]


def test_uninterrupted_run(case, capsys):
    """A ``linview run`` process on Spark; the same command on NumPy (in this process: its
    process is not the subject) reports the same fields."""
    from linview.app.cli import main

    tmp, expect = case
    p = run(tmp, "plain")
    assert p.returncode == 0, p.stderr
    stats = json.loads(p.stdout)
    assert stats["batches"] == 8 and stats["applied"] == 8 * 13
    assert stats["spark"]["batches_read_from_log"] == 8  # no Spark job collected the files
    np.testing.assert_allclose(final(tmp, "plain"), expect, rtol=1e-10)
    assert log_batches(tmp, "plain") == list(range(8))
    results = read_results(tmp / "plain" / "out")
    assert sorted(results) == list(range(1, 9))
    np.testing.assert_allclose(results[8]["beta"], expect, rtol=1e-10)
    assert " WARN " not in p.stderr and "Traceback" not in p.stderr
    capsys.readouterr()
    code = main([*(c if c != "spark" else "numpy" for c in command(tmp, "plain-np")[3:]),
                 "--max-batch", "13"])
    q = capsys.readouterr()
    assert code == 0, q.err
    assert set(json.loads(q.out)) == set(stats)  # the same fields on both backends
    assert json.loads(q.out)["batches"] == 8


def test_crashes_mid_batch_and_between_batches_then_kill_9(case):
    """Died after logging batch 3 before applying it; died after applying batch 5 before
    Spark committed it (Spark replays it: skipped); kill -9 at a moment; then the same
    command finishes with the uninterrupted result and one log line per batch, the
    batches logged since the state re-applied from the log and Spark's replay of the
    batch killed before its commit skipped (what test_replayed_batch_is_skipped, merged
    into this test, checked after an exit between a batch and Spark's commit)."""
    tmp, expect = case
    p = run(tmp, "crash", env={"LINVIEW_TEST_FAULTS": "batch.logged@3=exit:87"})
    assert p.returncode == 87, p.stderr
    p = run(tmp, "crash", env={"LINVIEW_TEST_FAULTS": "batch.done@5=exit"})
    assert p.returncode == 86, p.stderr
    # each batch sleeps 1 s after its output: the kill lands inside batch 6 (id 5)
    proc = subprocess.Popen(command(tmp, "crash"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE,
                            env={**os.environ, "LINVIEW_TEST_FAULTS": "batch.done=sleep:1.0"})
    log = tmp / "crash" / "out" / "log.jsonl"
    deadline = time.time() + 240
    while time.time() < deadline and log.read_text().count("\n") < 6 \
            and proc.poll() is None:
        time.sleep(0.05)
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate()
    assert proc.returncode == -signal.SIGKILL, err  # killed while running
    assert log_batches(tmp, "crash") == list(range(6))
    p = run(tmp, "crash")
    assert p.returncode == 0, p.stderr
    stats = json.loads(p.stdout)
    assert stats["batch"] == 8
    # the kill came after batch 6 (id 5) was logged and applied, before Spark committed
    # it; the state (saved every 3 batches of a run) is at batch 4
    assert stats["resumed_at"] == 4 * 13
    assert stats["replayed"] == 26  # batches 5, 6 re-applied from the log ...
    assert stats["replayed_batches"] == 2 and stats["batches"] == 2  # ... 7, 8 from Spark
    assert stats["spark"]["replayed_batches_skipped"] == 1  # ... so Spark's replay of 6
    np.testing.assert_allclose(final(tmp, "crash"), expect, rtol=1e-10)
    assert log_batches(tmp, "crash") == list(range(8))


def test_bad_record_is_named_and_nothing_is_half_applied(case, spark, capsys):
    """A bad record in the middle of micro-batch 5's file: the outputs and the state stay
    those after batch 4; with the file fixed, the same command applies batch 5 once.  Run
    in this process (the subject is the stream, not the process; the CLI's exit code and
    message are those of a separate process, which test_resume_refuses_... and the
    process-level tests above show)."""
    tmp, expect = case
    bad = tmp / "bad"
    shutil.copytree(tmp / "upd", bad / "upd")
    target = bad / "upd" / "u005.jsonl"
    lines = target.read_text().splitlines()
    target.write_text("\n".join([*lines[:6], '{"input": "X", "row": 2.0, "add": []}',
                                 *lines[6:]]) + "\n")
    os.utime(target, (1e9 + 5, 1e9 + 5))  # in its place in the stream
    code, out = run_here(tmp, "bad", capsys, updates=bad / "upd")
    assert code == 2, out.err
    assert "u005.jsonl:7: row must be an integer, not 2.0" in out.err
    assert "Traceback" not in out.err
    assert log_batches(tmp, "bad") == list(range(5))
    after4 = np.load(tmp / "betas.npy")[4]
    np.testing.assert_allclose(final(tmp, "bad"), after4, rtol=1e-10)
    assert sorted(read_results(tmp / "bad" / "out")) == list(range(1, 6))
    from linview import restore

    state = restore(tmp / "bad" / "ck" / "state.npz")
    np.testing.assert_allclose(state["beta"], after4, rtol=1e-10)
    assert state.saved_meta["extra"]["offset"] == 5 * 13
    shutil.copy2(tmp / "upd" / "u005.jsonl", target)
    code, out = run_here(tmp, "bad", capsys, updates=bad / "upd")
    assert code == 0, out.err
    np.testing.assert_allclose(final(tmp, "bad"), expect, rtol=1e-10)
    assert log_batches(tmp, "bad") == list(range(8))


def test_without_once_the_query_runs_until_ctrl_c(case):
    """Ctrl-C stops the query after its batch, saves, stops the JVM, removes linview's
    temporary folders and exits 130, as on NumPy."""
    tmp, expect = case
    cmd = [c for c in command(tmp, "live") if c != "--once"]
    temp = tmp / "live-tmp"
    temp.mkdir()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(temp)})
    log = tmp / "live" / "out" / "log.jsonl"
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None and not (
            log.exists() and log.read_text().count("\n") == 8):
        time.sleep(0.1)
    time.sleep(1.0)
    assert proc.poll() is None  # still waiting for files
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert json.loads(out)["batch"] == 8 and "Traceback" not in err
    assert json.loads(out)["interrupted"] == "SIGINT" and "interrupted by SIGINT" in err
    assert not [p.name for p in temp.iterdir() if p.name.startswith("linview-")]
    assert (tmp / "live" / "ck" / "wal.log").read_bytes() == b""  # saved on the way out
    np.testing.assert_allclose(final(tmp, "live"), expect, rtol=1e-10)


def test_resume_refuses_another_or_changed_source_and_restart_starts_over(case, spark, capsys,
                                                                          monkeypatch):
    """Resuming checks the update directory: another directory (even with the same
    files, which Spark would read again as new), an applied file removed, an applied
    file changed; --restart discards the checkpoint and starts from the inputs.  The
    refusals come before Spark starts (``check_before_start``: a session asked for then
    fails the test), the first one from a separate ``linview run`` process; the other
    runs in this process on the module's session."""
    import linview.app.spark_stream as ss

    tmp, expect = case
    own = tmp / "src" / "upd"
    shutil.copytree(tmp / "upd", own)  # copy2: modification times kept
    code, out = run_here(tmp, "src", capsys, updates=own)
    assert code == 0, out.err
    assert json.loads(out.out)["batch"] == 8

    other = tmp / "src" / "other"
    shutil.copytree(own, other)
    p = run(tmp, "src", updates=other)
    assert p.returncode == 2, p.stderr
    assert f"the update source {other} is not the one checkpoint" in p.stderr
    assert str(own) in p.stderr and "Traceback" not in p.stderr

    def no_spark(args):
        raise AssertionError("Spark was started for a resume that is refused")

    monkeypatch.setattr(ss, "session", no_spark)
    applied = own / "u002.jsonl"
    saved = tmp / "src" / "u002.saved"
    shutil.move(applied, saved)
    code, out = run_here(tmp, "src", capsys, updates=own)
    assert code == 2, out.err
    assert f"no longer holds {applied}, applied in micro-batch 2" in out.err

    shutil.copy2(saved, applied)
    lines = applied.read_text().splitlines()
    lines[1] = json.dumps({"input": "Y", "row": 1, "set": [0.25]})
    applied.write_text("\n".join(lines) + "\n")
    os.utime(applied, (1e9 + 2, 1e9 + 2))
    code, out = run_here(tmp, "src", capsys, updates=own)
    assert code == 2, out.err
    assert "no longer holds the records this checkpoint applied" in out.err
    assert log_batches(tmp, "src") == list(range(8))  # nothing was applied

    monkeypatch.undo()
    shutil.copy2(saved, applied)
    code, out = run_here(tmp, "src", capsys, updates=own, extra=["--restart"])
    assert code == 0, out.err
    stats = json.loads(out.out)
    assert stats["batch"] == 8 and stats["applied"] == 8 * 13 and stats["resumed_at"] == 0
    np.testing.assert_allclose(final(tmp, "src"), expect, rtol=1e-10)
    assert log_batches(tmp, "src") == list(range(8))


def test_the_check_before_spark_starts_reads_the_state_alone(tmp_path):
    """``check_before_start`` (no JVM here): no state or an unreadable one leaves the
    checks to the run (``False``); a state started from another source is refused with
    the run's own message; the same source passes (a state before any Spark batch has no
    files to check)."""
    import linview
    from linview.app.spark_stream import check_before_start
    from linview.app.stream import Stream
    from linview.errors import StateError

    rng = np.random.default_rng(1)
    np.save(tmp_path / "X.npy", rng.standard_normal((8, 2)))
    np.save(tmp_path / "Y.npy", rng.standard_normal((8, 1)))
    ck, src, other = tmp_path / "ck", tmp_path / "upd", tmp_path / "other"
    src.mkdir()
    other.mkdir()
    assert check_before_start(ck, src, print) is False  # nothing to resume
    Stream(linview.compile(SRC, name="ols"), inputs=[f"X={tmp_path / 'X.npy'}",
                                                     f"Y={tmp_path / 'Y.npy'}"],
           checkpoint=ck, source=str(src.resolve())).close()
    assert check_before_start(ck, src, print) is True
    with pytest.raises(StateError, match=f"the update source {other} is not the one "
                       f"checkpoint {ck} started from"):
        check_before_start(ck, other, print)
    (ck / "state.npz").write_bytes(b"not a zip")
    assert check_before_start(ck, other, print) is False  # the run's restore says why
