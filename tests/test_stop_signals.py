"""Signals at any instant (``docs/stopping.md``): ``linview run`` finishes the batch in
progress, saves at that boundary and exits 130 (SIGINT), 143 (SIGTERM) or 129 (SIGHUP);
a second signal exits at once and the write-ahead log recovers; resuming equals an
uninterrupted run.  ``bench`` and ``demo`` exit with the same codes, without a traceback."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import linview
from linview.app import signals
from linview.app.stream_out import read_results
from linview.app.stream_run import run_stream

OLS = "function beta = ols(X, Y)\n %#linview dims X(m,n) Y(m,p)\n" \
      " beta = (X' * X) \\ (X' * Y);\nend\n"
CODES = {"SIGINT": 130, "SIGTERM": 143, "SIGHUP": 129}


@pytest.fixture
def case(tmp_path):
    """OLS, 30×4 inputs, 24 batches of a row add and a cell set of Y each."""
    rng = np.random.default_rng(11)
    np.save(tmp_path / "X.npy", rng.standard_normal((30, 4)))
    np.save(tmp_path / "Y.npy", rng.standard_normal((30, 1)))
    (tmp_path / "ols.m").write_text(OLS)
    recs = []
    for b in range(24):
        r = int(rng.integers(30)) + 1
        recs += [{"input": "X", "row": r, "add": (0.1 * rng.standard_normal(4)).tolist(),
                  "batch": b}, {"input": "Y", "cell": [r, 1], "set": float(b), "batch": b}]
    (tmp_path / "upd.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return tmp_path


def command(tmp, name):
    return [sys.executable, "-m", "linview.app.cli", "run", str(tmp / "ols.m"), "--input",
            f"X={tmp / 'X.npy'}", "--input", f"Y={tmp / 'Y.npy'}", "--updates",
            str(tmp / "upd.jsonl"), "--checkpoint", str(tmp / name / "ck"), "--out",
            str(tmp / name / "out"), "--checkpoint-every", "5", "--quiet"]


def results(tmp, name):
    out = tmp / name / "out"
    log = [json.loads(x)["batch"] for x in (out / "log.jsonl").read_text().splitlines()]
    return read_results(out), log


def same(a, b) -> bool:
    (ra, la), (rb, lb) = a, b
    return la == lb and sorted(ra) == sorted(rb) and all(
        np.allclose(ra[k]["beta"], rb[k]["beta"], rtol=1e-9, atol=1e-12) for k in ra)


def wait_for_batches(tmp, name, n, proc, timeout=120):
    log = tmp / name / "out" / "log.jsonl"
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None and not (
            log.exists() and log.read_text().count("\n") >= n):
        time.sleep(0.02)
    assert proc.poll() is None, proc.communicate()


def test_random_instants_then_resume_equal_an_uninterrupted_run(case):
    """Runs sent SIGINT or SIGTERM at a random instant of their life (loading, a batch, a
    checkpoint, the end), each then resumed, until 24 were stopped by the signal (a run
    may end first): 0 differ, 0 refuse."""
    prog = linview.compile(OLS, name="ols")

    def run(name):
        return run_stream(prog, inputs=[f"X={case / 'X.npy'}", f"Y={case / 'Y.npy'}"],
                          updates=str(case / "upd.jsonl"), checkpoint=str(case / name / "ck"),
                          out=str(case / name / "out"), checkpoint_every=5,
                          warn=lambda m: None)

    run("ref")
    t0 = time.perf_counter()
    run("ref2")  # warm: how long a run takes
    span = time.perf_counter() - t0
    want = results(case, "ref")
    rng = np.random.default_rng(5)
    got = {"interrupted": 0, "differ": 0, "refused": 0}
    late = []
    old = {s: signal.signal(s, lambda s, f: late.append(s)) for s in signals.SIGNALS}
    try:
        for i in range(60):
            if got["interrupted"] >= 24:
                break
            sig = (signal.SIGINT, signal.SIGTERM)[i % 2]
            timer = threading.Timer(rng.uniform(0, 0.9 * span), os.kill, (os.getpid(), sig))
            timer.start()
            try:
                stats = run(f"r{i}")
                stopped = stats["interrupted"] == sig.name
            except signals.Interrupted as e:  # while loading, before the first batch
                stopped = e.signum == sig
            timer.join()
            got["interrupted"] += stopped
            try:
                stats = run(f"r{i}")
            except Exception:  # noqa: BLE001 - counted
                got["refused"] += 1
                continue
            got["differ"] += not same(results(case, f"r{i}"), want)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    print(f"\nrandom instants: {i} runs, {got['interrupted']} interrupted by the signal "
          f"(the rest had ended first), {got['differ']} differ, {got['refused']} refused")
    assert got["differ"] == 0 and got["refused"] == 0
    assert got["interrupted"] >= 24


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_signal_finishes_the_batch_saves_and_exits_with_its_code(case, name):
    ref = subprocess.run(command(case, "ref"), capture_output=True, text=True, check=False)
    assert ref.returncode == 0, ref.stderr
    env = {**os.environ, "LINVIEW_TEST_FAULTS": "batch.done=sleep:0.1"}  # slow batches
    proc = subprocess.Popen(command(case, name), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    wait_for_batches(case, name, 3, proc)
    proc.send_signal(getattr(signal, name))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == CODES[name], err
    assert "Traceback" not in err and f"interrupted by {name}: saved at batch" in err
    stats = json.loads(out)
    assert stats["interrupted"] == name and 3 <= stats["batch"] < 24
    assert (case / name / "ck" / "wal.log").read_bytes() == b""  # saved at that boundary
    again = subprocess.run(command(case, name), capture_output=True, text=True, check=False)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["resumed_at"] == 2 * stats["batch"]
    assert same(results(case, name), results(case, "ref"))


def test_a_second_sigint_exits_at_once_and_the_log_recovers(case):
    """Batch 3 hangs after it was logged (an injected sleep of 60 s, inside the batch):
    the first SIGINT waits for it, the second ends the process at once, unsaved."""
    ref = subprocess.run(command(case, "ref"), capture_output=True, text=True, check=False)
    env = {**os.environ, "LINVIEW_TEST_FAULTS": "batch.logged@3=sleep:60"}
    proc = subprocess.Popen(command(case, "twice"), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    wait_for_batches(case, "twice", 2, proc)
    time.sleep(0.5)
    t0 = time.time()
    proc.send_signal(signal.SIGINT)
    time.sleep(0.5)
    assert proc.poll() is None  # the first one waits for the batch
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and time.time() - t0 < 30, err
    assert "SIGINT again: stopped at once without saving" in err and "Traceback" not in err
    assert (case / "twice" / "ck" / "wal.log").read_bytes()  # batches 1-3, not saved
    again = subprocess.run(command(case, "twice"), capture_output=True, text=True,
                           check=False)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["replayed_batches"] == 3
    assert same(results(case, "twice"), results(case, "ref")) and ref.returncode == 0


@pytest.mark.parametrize("verb,name", [
    (["bench", "examples/ols.m", "--dims", "m=600,n=300,p=1", "--updates", "100000"], "SIGTERM"),
    (["demo", "--n", "1500"], "SIGINT")])
def test_bench_and_demo_stop_cleanly(verb, name):
    proc = subprocess.Popen([sys.executable, "-m", "linview.app.cli", *verb],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COLUMNS": "100"})
    time.sleep(6)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(getattr(signal, name))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == CODES[name], err
    assert "Traceback" not in err and f"interrupted by {name}" in err
