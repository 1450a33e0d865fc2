"""Fault injection into the write-ahead log of ``linview run``: a torn tail, a flipped byte,
a changed field and a missing state each lead to the documented outcome."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from test_stream import SRC, make_stream

from linview.app import wal
from linview.errors import StateError


@pytest.fixture
def crashed(tmp_path):
    """A run killed after 9 batches with checkpoints every 4: state at batch 8, one
    batch in the log."""
    rng = np.random.default_rng(1)
    X, Y = rng.standard_normal((25, 5)), rng.standard_normal((25, 1))
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "Y.npy", Y)
    (tmp_path / "ols.m").write_text(SRC)
    recs, Xf, Yf = make_stream(rng, X, Y, count=40)
    (tmp_path / "u.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    expect = np.linalg.solve(Xf.T @ Xf, Xf.T @ Yf)
    p = run(tmp_path, env={"LINVIEW_TEST_FAULTS": "batch.done@10=exit"})
    assert p.returncode == 86, p.stderr
    return tmp_path, expect


def run(tmp, *extra, env=None):
    cmd = [sys.executable, "-m", "linview.app.cli", "run", str(tmp / "ols.m"), "--input",
           f"X={tmp / 'X.npy'}", "--input", f"Y={tmp / 'Y.npy'}", "--updates",
           str(tmp / "u.jsonl"), "--out", str(tmp / "out"), "--checkpoint", str(tmp / "ck"),
           "--checkpoint-every", "4", *extra]
    return subprocess.run(cmd, capture_output=True, text=True, check=False,
                          env={**os.environ, **(env or {})})


def entries(tmp):
    return wal.scan(tmp / "ck" / "wal.log").entries


def test_the_log_holds_the_batches_after_the_state(crashed):
    tmp, _ = crashed
    assert [e["batch"] for e in entries(tmp)] == [9, 10]


def test_untouched_log_resumes_to_the_uninterrupted_result(crashed):
    tmp, expect = crashed
    p = run(tmp)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["replayed"] > 0
    np.testing.assert_allclose(np.load(tmp / "out" / "latest.npz")["beta"], expect, rtol=1e-9)


@pytest.mark.parametrize("cut", [1, 10, 30])
def test_torn_tail_is_discarded_with_a_warning(crashed, cut):
    tmp, expect = crashed
    log = tmp / "ck" / "wal.log"
    data = log.read_bytes()
    last = entries(tmp)[-1]["offset"]
    log.write_bytes(data[:last + cut])  # the last entry cut short, as a crash mid-write
    p = run(tmp)
    assert p.returncode == 0, p.stderr
    assert f"discarded a torn last entry of {log} at byte {last}" in p.stderr
    np.testing.assert_allclose(np.load(tmp / "out" / "latest.npz")["beta"], expect, rtol=1e-9)


def test_torn_tail_without_final_newline(crashed):
    tmp, expect = crashed
    log = tmp / "ck" / "wal.log"
    log.write_bytes(log.read_bytes()[:-1])
    p = run(tmp)
    assert p.returncode == 0 and "discarded a torn last entry" in p.stderr
    np.testing.assert_allclose(np.load(tmp / "out" / "latest.npz")["beta"], expect, rtol=1e-9)


@pytest.mark.parametrize("where", ["body", "header"])
@pytest.mark.parametrize("which", [0, 1])
def test_flipped_byte_stops_the_resume_naming_the_offset(crashed, where, which):
    tmp, _ = crashed
    log = tmp / "ck" / "wal.log"
    data = bytearray(log.read_bytes())
    off = entries(tmp)[which]["offset"]
    pos = off + (60 if where == "body" else 3)
    data[pos] = ord("7") if data[pos] != ord("7") else ord("3")
    log.write_bytes(bytes(data))
    before = (tmp / "out" / "latest.npz").read_bytes()
    p = run(tmp)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert f"write-ahead log {log} is corrupt at byte {off}" in p.stderr
    assert (tmp / "out" / "latest.npz").read_bytes() == before  # nothing published


def test_changed_number_with_a_recomputed_checksum_is_caught_by_sequence(crashed):
    tmp, _ = crashed
    log = tmp / "ck" / "wal.log"
    es = entries(tmp)
    payloads = [{k: v for k, v in e.items() if k != "offset"} for e in es]
    payloads[1]["first"] += 1  # a forged sequence field with a valid checksum
    log.write_bytes(b"".join(wal.encode(p) for p in payloads))
    p = run(tmp)
    assert p.returncode == 2
    assert f"is corrupt at byte {es[1]['offset']}: batch or sequence number" in p.stderr


def test_changed_value_in_a_record_is_caught_by_the_checksum(crashed):
    tmp, _ = crashed
    log = tmp / "ck" / "wal.log"
    data = log.read_bytes()
    first = entries(tmp)[0]
    i = data.index(b"0.", first["offset"] + 100)
    log.write_bytes(data[:i] + b"9." + data[i + 2:])
    p = run(tmp)
    assert p.returncode == 2
    assert f"corrupt at byte {first['offset']}: checksum mismatch" in p.stderr


def test_missing_state_with_a_log_is_refused(crashed):
    tmp, _ = crashed
    (tmp / "ck" / "state.npz").unlink()
    p = run(tmp)
    assert p.returncode == 2
    assert "has a write-ahead log but no state.npz" in p.stderr
    p = run(tmp, "--restart")  # the documented way out
    assert p.returncode == 0, p.stderr


def test_scan_reports_torn_and_corrupt_directly(tmp_path):
    log = tmp_path / "w.log"
    good = [wal.encode({"batch": b, "first": 2 * b, "count": 2}) for b in (1, 2, 3)]
    log.write_bytes(b"".join(good))
    assert [e["batch"] for e in wal.scan(log).entries] == [1, 2, 3]
    log.write_bytes(b"".join(good) + good[0][:7])
    s = wal.scan(log)
    assert s.torn_at == sum(map(len, good)) and len(s.entries) == 3
    log.write_bytes(good[0] + b"garbage\n" + good[1])
    with pytest.raises(StateError, match=f"corrupt at byte {len(good[0])}"):
        wal.scan(log)
