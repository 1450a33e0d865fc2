"""``linview run`` (NumPy): records, micro-batches, outputs, checkpoints, crash recovery."""

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import linview
from linview.app.cli import main
from linview.app.stream_out import read_results

SRC = "function beta = ols(X, Y)\n %#linview dims X(m,n) Y(m,p)\n" \
      " beta = (X' * X) \\ (X' * Y);\nend\n"


def make_stream(rng, X, Y, count=60):
    """Random 1-based records of several kinds and the inputs they lead to."""
    m, n = X.shape
    recs, Xf, Yf = [], X.copy(), Y.copy()
    for i in range(count):
        r = int(rng.integers(m))
        if i % 3 == 2:
            d = (0.05 * rng.standard_normal(1)).tolist()
            recs.append({"input": "Y", "row": r + 1, "add": d})
            Yf[r] += d
        elif i % 5 == 0:
            new = (X[r] + 0.05 * rng.standard_normal(n)).tolist()
            recs.append({"input": "X", "row": r + 1, "set": new, "batch": i // 6})
            Xf[r] = new
        else:
            d = (0.05 * rng.standard_normal(n)).tolist()
            recs.append({"input": "X", "row": r + 1, "delta": d, "batch": i // 6})
            Xf[r] += d
    return recs, Xf, Yf


@pytest.fixture
def setup(tmp_path):
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((30, 6)), rng.standard_normal((30, 1))
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "Y.npy", Y)
    (tmp_path / "ols.m").write_text(SRC)
    recs, Xf, Yf = make_stream(rng, X, Y)
    (tmp_path / "updates.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return tmp_path, np.linalg.solve(Xf.T @ Xf, Xf.T @ Yf)


def run(tmp, *extra, env=None, updates=None):
    cmd = [sys.executable, "-m", "linview.app.cli", "run", str(tmp / "ols.m"),
           "--input", f"X={tmp / 'X.npy'}", "--input", f"Y={tmp / 'Y.npy'}",
           "--updates", str(updates or tmp / "updates.jsonl"), "--out", str(tmp / "out"),
           *extra]
    return subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})},
                          check=False)


def cli(tmp, *extra):
    return main(["run", str(tmp / "ols.m"), "--input", f"X={tmp / 'X.npy'}", "--input",
                 f"Y={tmp / 'Y.npy'}", "--updates", str(tmp / "updates.jsonl"), *extra])


def log_batches(tmp):
    return [json.loads(x)["batch"] for x in (tmp / "out" / "log.jsonl").read_text().split("\n")
            if x]


def test_stream_applies_every_record(setup):
    tmp, expect = setup
    proc = run(tmp, "--checkpoint", str(tmp / "ckpt"), "--checkpoint-every", "5", "--verify")
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(proc.stdout)
    assert stats["offset"] == 60 and stats["verify"]["error"] < 1e-10
    assert stats["check"]["by"] == "probe" and stats["check"]["error"] < 1e-10
    assert "predicted" in proc.stderr  # --verify says its predicted time first
    assert stats["batches"] < 60  # X records sharing a batch id were merged
    np.testing.assert_allclose(np.load(tmp / "out" / "latest.npz")["beta"], expect, rtol=1e-9)
    results = read_results(tmp / "out")
    assert sorted(results) == list(range(1, stats["batches"] + 1)) == log_batches(tmp)
    np.testing.assert_allclose(results[stats["batches"]]["beta"], expect, rtol=1e-9)


def test_crash_and_resume_lose_nothing_and_apply_nothing_twice(setup):
    tmp, expect = setup
    proc = run(tmp, "--checkpoint", str(tmp / "ckpt"), "--checkpoint-every", "4",
               env={"LINVIEW_TEST_FAULTS": "batch.done@11=exit"})
    assert proc.returncode == 86  # died mid-stream, between checkpoints
    assert (tmp / "ckpt" / "wal.log").read_bytes()  # logged, not yet checkpointed
    proc = run(tmp, "--checkpoint", str(tmp / "ckpt"), "--checkpoint-every", "4")
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(proc.stdout)
    assert stats["resumed_at"] > 0 and stats["replayed"] > 0 and stats["offset"] == 60
    np.testing.assert_allclose(np.load(tmp / "out" / "latest.npz")["beta"], expect, rtol=1e-9)
    assert log_batches(tmp) == list(range(1, stats["batch"] + 1))  # one line per batch
    proc = run(tmp, "--checkpoint", str(tmp / "ckpt"))  # nothing new
    assert proc.returncode == 0 and json.loads(proc.stdout)["applied"] == 0
    assert log_batches(tmp) == list(range(1, stats["batch"] + 1))


@pytest.mark.parametrize("delay", [0.05, 0.3])
def test_kill_9_and_restart_equal_an_uninterrupted_run(setup, delay):
    """SIGKILL ``delay`` seconds after the third batch's log line, while the run is still
    going (asserted: killed by the signal; a run that finished first is started over with
    slower batches); the same command then finishes with the uninterrupted result."""
    tmp, expect = setup
    cmd = [sys.executable, "-m", "linview.app.cli", "run", str(tmp / "ols.m"), "--input",
           f"X={tmp / 'X.npy'}", "--input", f"Y={tmp / 'Y.npy'}", "--updates",
           str(tmp / "updates.jsonl"), "--out", str(tmp / "out"), "--checkpoint",
           str(tmp / "ckpt"), "--checkpoint-every", "3"]
    log = tmp / "out" / "log.jsonl"
    for batch_delay in ("0.02", "0.1", "0.5"):
        shutil.rmtree(tmp / "out", ignore_errors=True)
        shutil.rmtree(tmp / "ckpt", ignore_errors=True)
        env = {**os.environ, "LINVIEW_TEST_FAULTS": f"batch.done=sleep:{batch_delay}"}
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while time.time() < deadline and p.poll() is None \
                and not (log.exists() and log.read_text().count("\n") >= 3):
            time.sleep(0.01)
        time.sleep(delay)
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
        p.wait()
        if p.returncode == -signal.SIGKILL:
            break
    assert p.returncode == -signal.SIGKILL  # killed while running, not after it ended
    done = log.read_text().count("\n")
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(proc.stdout)
    assert stats["batch"] >= done >= 3
    np.testing.assert_allclose(np.load(tmp / "out" / "latest.npz")["beta"], expect, rtol=1e-9)
    assert log_batches(tmp) == list(range(1, stats["batch"] + 1))


def test_malformed_record_is_rejected_with_file_and_line(setup, capsys):
    tmp, _ = setup
    lines = (tmp / "updates.jsonl").read_text().splitlines()
    lines[7] = json.dumps({"input": "X", "row": 3, "delta": [1.0, "nan?", 0, 0, 0, 0]})
    (tmp / "updates.jsonl").write_text("\n".join(lines) + "\n")
    assert cli(tmp, "--out", str(tmp / "out")) == 2
    err = capsys.readouterr().err
    assert "updates.jsonl:8: add[2] must be a number" in err
    assert log_batches(tmp)[-1] < 8  # the batch of line 8 was not applied at all


BAD = [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "an update record is a JSON object, not list"),
    ('{"input": "Z", "row": 1, "add": [1]}', 'unknown input "Z"'),
    ('{"input": "X", "row": 1, "add": [1, 2]}', "has 2 values, expected 6"),
    ('{"input": "Y", "row": 1, "add": [NaN]}', "NaN is not a number JSON allows"),
    ('{"input": "Y", "row": 1.7, "add": [1]}', "row must be an integer, not 1.7"),
    ('{"input": "Y", "row": 1.0, "add": [1]}', "row must be an integer, not 1.0"),
    ('{"input": "Y", "row": true, "add": [1]}', "row must be an integer, not true"),
    ('{"input": "Y", "row": 0, "add": [1]}', "row 0 is out of range 1..30"),
    ('{"input": "Y", "row": 31, "add": [1]}', "row 31 is out of range 1..30"),
    ('{"input": "Y", "cell": [1, 2], "add": 1}', "col 2 is out of range 1..1"),
    ('{"input": "Y", "rows": 1, "add": [1]}', "unknown field 'rows'"),
    ('{"remove": 1, "forget": 0.5}', "a record is one change"),
    ('{"batch": 1}', "a record is one change"),
    ('{"input": "Y", "row": 1, "add": [1e400]}', "inf: values must be finite"),
    ('{"input": "Y", "row": 1, "add": [1' + 400 * '0' + ']}', "inf: values must be finite"),
]


@pytest.mark.parametrize("line,message", BAD)
def test_bad_records_name_file_and_line_and_skip_drops_them(setup, capsys, line, message):
    tmp, _ = setup
    good = '{"input": "Y", "row": 2, "add": [0.5]}'
    (tmp / "updates.jsonl").write_text(f"{good}\n{line}\n{good}\n")
    assert cli(tmp) == 2
    err = capsys.readouterr().err
    assert "updates.jsonl:2: " in err and message in err and "Traceback" not in err
    assert cli(tmp, "--on-error", "skip", "--out", str(tmp / "o2")) == 0
    cap = capsys.readouterr()
    assert "updates.jsonl:2: " in cap.err and message in cap.err
    stats = json.loads(cap.out)
    assert stats["applied"] == 2 and stats["skipped"] == 1 and stats["offset"] == 3


def test_a_shorter_or_changed_source_and_other_inputs_are_refused(setup, capsys):
    """Each refusal alone (the other parts as the checkpoint started), naming what
    differs; the same command then resumes with nothing new, and --restart starts over
    (also with an edited program, which would otherwise resume reusing its views)."""
    tmp, _ = setup
    ck = str(tmp / "ckpt")
    assert cli(tmp, "--checkpoint", ck) == 0
    capsys.readouterr()
    src, X, prog = tmp / "updates.jsonl", tmp / "X.npy", tmp / "ols.m"
    original = {f: f.read_bytes() for f in (src, X, prog)}
    lines = src.read_text().splitlines()
    changed_line = lines.copy()
    changed_line[3] = json.dumps({"input": "Y", "row": 1, "add": [0.25]})
    buf = io.BytesIO()
    np.save(buf, np.load(X) * 2)
    changes = [
        (src, "\n".join(lines[:40]) + "\n",
         "the update source", "ends after 40 records, but this checkpoint applied 60"),
        (src, "\n".join(changed_line) + "\n",
         "the update source", "no longer holds the records this checkpoint applied"),
        (X, buf.getvalue(), "--input X differs", "from the one checkpoint"),
    ]  # an edited program resumes (test_an_edited_program_resumes_reusing_its_views)
    for path, content, what, detail in changes:
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        assert cli(tmp, "--checkpoint", ck) == 2
        err = capsys.readouterr().err
        assert what in err and detail in err and "Traceback" not in err
        assert [w for w in ("update source", "--input") if w in err] \
            == [w for w in ("update source", "--input") if w in what]
        path.write_bytes(original[path])
    assert cli(tmp, "--checkpoint", ck) == 0  # everything as it was: resumes, nothing new
    assert json.loads(capsys.readouterr().out)["applied"] == 0
    prog.write_text(SRC.replace("(X' * Y)", "(X' * Y) * 2"))
    assert cli(tmp, "--checkpoint", ck, "--restart", "--out", str(tmp / "out")) == 0
    assert json.loads(capsys.readouterr().out)["applied"] == 60


def test_an_edited_program_resumes_reusing_its_views(setup, capsys):
    """A checkpoint resumed with an edited program reuses every view whose key survived,
    computes the others from the checkpoint's inputs, says which, and ends where a fresh
    run of the edited program ends (docs/view_store.md)."""
    tmp, _ = setup
    src, prog = tmp / "updates.jsonl", tmp / "ols.m"
    lines = src.read_text().splitlines()
    src.write_text("\n".join(lines[:30]) + "\n")
    ck = str(tmp / "ckpt")
    assert cli(tmp, "--checkpoint", ck) == 0
    capsys.readouterr()
    edited = SRC.replace("(X' * Y)", "(X' * Y) * 2")
    prog.write_text(edited)
    src.write_text("\n".join(lines) + "\n")
    assert cli(tmp, "--checkpoint", ck, "--out", str(tmp / "o1")) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["applied"] == 30
    assert "the program changed since checkpoint" in cap.err
    assert "reused: beta_inv" in cap.err and "recomputed: " in cap.err
    assert cli(tmp, "--checkpoint", str(tmp / "fresh"), "--out", str(tmp / "o2")) == 0
    assert json.loads(capsys.readouterr().out)["applied"] == 60
    got = np.load(tmp / "o1" / "latest.npz")["beta"]
    np.testing.assert_allclose(got, np.load(tmp / "o2" / "latest.npz")["beta"], rtol=1e-9)


def test_log_has_one_line_per_batch_after_resumes(setup):
    tmp, expect = setup
    for crash in ("3", "7", "12"):
        assert run(tmp, "--checkpoint", str(tmp / "ck"), "--checkpoint-every", "2",
                   env={"LINVIEW_TEST_FAULTS": f"batch.done@{crash}=exit"}).returncode == 86
    proc = run(tmp, "--checkpoint", str(tmp / "ck"))
    stats = json.loads(proc.stdout)
    assert log_batches(tmp) == list(range(1, stats["batch"] + 1))
    np.testing.assert_allclose(np.load(tmp / "out" / "latest.npz")["beta"], expect, rtol=1e-9)


def test_help_documents_the_record_format(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = capsys.readouterr().out
    for text in ('"row": 17, "set"', '"observe"', '"remove"', '"forget"', "1-based",
                 "--on-error", "examples:"):
        assert text in out


def test_stdin_and_parquet_sources_give_the_file_result(setup):
    import pyarrow as pa
    import pyarrow.parquet as pq

    tmp, expect = setup
    text = (tmp / "updates.jsonl").read_text()
    cmd = [sys.executable, "-m", "linview.app.cli", "run", str(tmp / "ols.m"), "--input",
           f"X={tmp / 'X.npy'}", "--input", f"Y={tmp / 'Y.npy'}", "--updates", "-",
           "--out", str(tmp / "o1")]
    p = subprocess.run(cmd, input=text, capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stderr
    np.testing.assert_allclose(np.load(tmp / "o1" / "latest.npz")["beta"], expect, rtol=1e-9)
    recs = [json.loads(x) for x in text.splitlines()]
    table = pa.Table.from_pylist([{**r, "add": r.get("add", r.get("delta")), "delta": None}
                                  for r in recs])
    (tmp / "pq").mkdir()
    pq.write_table(table.drop_columns(["delta"]), tmp / "pq" / "u.parquet")
    p = run(tmp, updates=tmp / "pq")
    assert p.returncode == 0, p.stderr
    np.testing.assert_allclose(np.load(tmp / "out" / "latest.npz")["beta"], expect, rtol=1e-9)


def test_quiet_hides_warnings_and_bad_input_files_are_errors(setup, capsys):
    tmp, _ = setup
    (tmp / "updates.jsonl").write_text('{"input": "Q"}\n{"input": "Y", "row": 1, "add": [1]}\n')
    assert cli(tmp, "--on-error", "skip", "--quiet") == 0
    assert "warning" not in capsys.readouterr().err
    (tmp / "X.txt").write_text("1")
    assert main(["run", str(tmp / "ols.m"), "--input", f"X={tmp / 'X.txt'}", "--updates",
                 str(tmp / "updates.jsonl")]) == 2
    assert "unsupported file type '.txt'" in capsys.readouterr().err


def test_a_bad_record_in_the_middle_of_a_batch_changes_nothing(setup, capsys):
    """Batch 2 = good, bad, good records: with --on-error stop the outputs and the state
    after it are those after batch 1 (a resume with the record fixed applies all of batch
    2 once); with skip, batch 2 is its two good records."""
    tmp, _ = setup
    X, Y = np.load(tmp / "X.npy"), np.load(tmp / "Y.npy")
    rng = np.random.default_rng(11)
    d1, d3, d4 = (rng.standard_normal(6).tolist() for _ in range(3))
    first = [{"input": "X", "row": 1, "add": d1, "batch": 1},
             {"input": "Y", "row": 2, "set": [0.5], "batch": 1},
             {"input": "X", "row": 3, "add": d3, "batch": 1}]
    good = {"input": "X", "row": 4, "add": d4, "batch": 2}
    bad = {"input": "X", "row": 31, "add": d4, "batch": 2}
    last = {"input": "Y", "row": 5, "add": [0.1], "batch": 2}

    def write(recs):
        (tmp / "updates.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))

    def beta(with_batch2, middle=False):
        Xe, Ye = X.copy(), Y.copy()
        Xe[0] += d1
        Ye[1] = 0.5
        Xe[2] += d3
        if with_batch2:
            Xe[3] += np.multiply(d4, 2 if middle else 1)
            Ye[4] += 0.1
        return np.linalg.solve(Xe.T @ Xe, Xe.T @ Ye)

    write(first)
    assert cli(tmp, "--out", str(tmp / "only1")) == 0
    write([*first, good, bad, last])
    ck = str(tmp / "ck")
    assert cli(tmp, "--out", str(tmp / "out"), "--checkpoint", ck) == 2
    err = capsys.readouterr().err
    assert "updates.jsonl:5: row 31 is out of range 1..30" in err
    assert "nothing of its batch was applied" in err
    after = np.load(tmp / "out" / "latest.npz")["beta"]
    np.testing.assert_allclose(after, beta(False), rtol=1e-9)
    np.testing.assert_array_equal(after, np.load(tmp / "only1" / "latest.npz")["beta"])
    assert log_batches(tmp) == [1]
    results = read_results(tmp / "out")
    assert sorted(results) == [1]
    np.testing.assert_array_equal(results[1]["beta"], read_results(tmp / "only1")[1]["beta"])
    state = linview.restore(tmp / "ck" / "state.npz")
    np.testing.assert_allclose(state["beta"], beta(False), rtol=1e-9)
    assert state.saved_meta["extra"]["offset"] == 3

    write([*first, good, {**bad, "row": 4}, last])  # fixed: batch 2 applied once, whole
    assert cli(tmp, "--out", str(tmp / "out"), "--checkpoint", ck) == 0
    assert json.loads(capsys.readouterr().out)["applied"] == 3
    np.testing.assert_allclose(np.load(tmp / "out" / "latest.npz")["beta"],
                               beta(True, middle=True), rtol=1e-9)
    assert log_batches(tmp) == [1, 2]

    write([*first, good, bad, last])
    assert cli(tmp, "--out", str(tmp / "skip"), "--on-error", "skip") == 0
    cap = capsys.readouterr()
    assert "skipped update record" in cap.err and "updates.jsonl:5: row 31" in cap.err
    stats = json.loads(cap.out)
    assert stats["applied"] == 5 and stats["skipped"] == 1 and stats["batch"] == 2
    np.testing.assert_allclose(np.load(tmp / "skip" / "latest.npz")["beta"], beta(True),
                               rtol=1e-9)
