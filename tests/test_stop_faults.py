"""Stopping ``linview run`` at every injection point of a batch, in every way, then resuming:
the results equal those of an uninterrupted run (``docs/stopping.md``).

The points are those of :mod:`linview.faults`; a hook (never a user option) stops the run at
the N-th point reached, for every N from the end of batch 2 to the end of batch 3, which
writes a checkpoint (``--checkpoint-every 3``).  The kinds of stop: an exception, SIGINT,
SIGTERM, ``OSError(ENOSPC)`` from a write, and a checkpoint folder that turns read-only
(from that point on, every write into it fails with ``EROFS``: the tests run as any user,
and ``chmod`` does not stop root).  After each stop the same run is started again without
the hook; its results table, final outputs and output log must equal the uninterrupted
run's.  The counts of points, hits and kinds are printed (``pytest -s``).
"""

import errno
import json
import os
import signal
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sps

import linview
from linview import faults
from linview.app.stream_out import read_results
from linview.app.stream_run import run_stream
from linview.errors import LinviewError
from linview.solve.stochastic import StochasticMatrix

OLS = "function beta = ols(X, Y)\n %#linview dims X(m,n) Y(m,p)\n" \
      " beta = (X' * X) \\ (X' * Y);\nend\n"
KINDS = ("exception", "SIGINT", "SIGTERM", "ENOSPC", "read-only")
WRITES = {"wal.write", "wal.sync", "wal.truncate", "save.write", "save.rename",
          "out.results", "out.position"}


def ols_case(tmp: Path):
    """OLS on 40×5 inputs; 5 batches mixing row adds, row sets, cell sets of Y (the kind of
    batch Ctrl-C once cut in half) and an observation."""
    rng = np.random.default_rng(7)
    X, Y = rng.standard_normal((40, 5)), rng.standard_normal((40, 1))
    np.save(tmp / "X.npy", X)
    np.save(tmp / "Y.npy", Y)
    recs = []
    for b in range(5):
        r = int(rng.integers(40)) + 1
        recs += [{"input": "X", "row": r, "add": (0.1 * rng.standard_normal(5)).tolist(),
                  "batch": b},
                 {"input": "Y", "cell": [r, 1], "set": float(rng.standard_normal()),
                  "batch": b},
                 {"input": "X", "row": r % 40 + 1, "set": rng.standard_normal(5).tolist(),
                  "batch": b}]
        if b == 2:
            recs.append({"observe": {"X": rng.standard_normal(5).tolist(), "Y": [0.5]},
                         "row": 3, "batch": b})
    (tmp / "upd.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    prog = linview.compile(OLS, name="ols")
    return prog, [f"X={tmp / 'X.npy'}", f"Y={tmp / 'Y.npy'}"]


def pagerank_case(tmp: Path):
    """examples/pagerank_solve.m on a 40-node graph, 5 batches of edge records."""
    rng = np.random.default_rng(8)
    n = 40
    pairs = np.unique(np.stack([rng.integers(0, n, 160), rng.integers(0, n, 160)]), axis=1)
    sps.save_npz(tmp / "M.npz", StochasticMatrix(n, pairs[0], pairs[1]).tocsc())
    edges = {(int(a), int(b)) for a, b in zip(pairs[0], pairs[1], strict=True)}
    recs = []
    for b in range(5):
        for _ in range(3):
            a, c = (int(x) for x in rng.integers(0, n, 2))
            op = "delete" if (a, c) in edges else "insert"
            edges.symmetric_difference_update({(a, c)})
            recs.append({"input": "M", "edge": [a + 1, c + 1], "op": op, "batch": b})
    (tmp / "upd.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    prog = linview.compile_file("examples/pagerank_solve.m")
    return prog, [f"M={tmp / 'M.npz'}", "d=0.85"]


def run(tmp: Path, prog, inputs, name: str, hook=None):
    """One run into ``tmp/name``; the summary, or the exception that stopped it."""
    kwargs = dict(inputs=inputs, updates=str(tmp / "upd.jsonl"), checkpoint=str(tmp / name
                  / "ck"), out=str(tmp / name / "out"), checkpoint_every=3, warn=lambda m: None)
    try:
        if hook is None:
            return run_stream(prog, **kwargs)
        with faults.hooked(hook):
            return run_stream(prog, **kwargs)
    except (LinviewError, faults.InjectedFault, OSError) as e:
        return e


def outcome(tmp: Path, name: str):
    out = tmp / name / "out"
    log = [json.loads(x)["batch"] for x in (out / "log.jsonl").read_text().splitlines()]
    return read_results(out), dict(np.load(out / "latest.npz")), log


def stopper(kind: str, at: int, seen: list):
    """The hook: at the ``at``-th point reached, stop in the way ``kind`` says."""
    state = {"readonly": False}

    def hook(name: str) -> None:
        seen.append(name)
        if kind == "read-only" and state["readonly"] and name in faults.CHECKPOINT_WRITES:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        if len(seen) != at:
            return
        if kind == "exception":
            raise faults.InjectedFault("injected")
        if kind in ("SIGINT", "SIGTERM"):
            os.kill(os.getpid(), getattr(signal, kind))
        elif kind == "ENOSPC":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        elif kind == "read-only":
            state["readonly"] = True
            if name in faults.CHECKPOINT_WRITES:
                raise OSError(errno.EROFS, os.strerror(errno.EROFS))
    return hook


def walk(tmp: Path, prog, inputs) -> dict:
    """Every kind of stop at every point of batch 3; the counts, and what differed."""
    seen: list[str] = []
    ref = run(tmp, prog, inputs, "ref", hook=seen.append)
    assert isinstance(ref, dict) and ref["batch"] == 5, ref
    want = outcome(tmp, "ref")
    done = [i for i, n in enumerate(seen, 1) if n == "batch.done"]
    hits = list(range(done[1] + 1, done[2] + 4))  # batch 3 and its checkpoint
    assert seen[done[2]:done[2] + 3] == ["save.write", "save.rename", "wal.truncate"]
    counts = {"points": sorted({seen[i - 1] for i in hits}), "hits": len(hits), "stops": 0,
              "differ": [], "refused": []}
    for kind in KINDS:
        for at in hits:
            if kind == "ENOSPC" and seen[at - 1] not in WRITES:
                continue  # a full disk fails a write
            name = f"{kind}-{at}"
            got = run(tmp, prog, inputs, name, hook=stopper(kind, at, []))
            counts["stops"] += 1
            if kind.startswith("SIG"):
                assert isinstance(got, dict) and got["interrupted"] == kind, (name, got)
                assert got["batch"] == 3  # finished the batch in progress, then stopped
            elif kind == "exception":
                assert isinstance(got, faults.InjectedFault), (name, got)
            elif isinstance(got, Exception):  # a failed write is named, never a crash
                assert isinstance(got, LinviewError) and "cannot write" in got.message, \
                    (name, got)
            again = run(tmp, prog, inputs, name)
            if not isinstance(again, dict) or again["interrupted"]:
                counts["refused"].append((name, str(again)))
                continue
            results, latest, log = outcome(tmp, name)
            same = (log == want[2] and sorted(results) == sorted(want[0]) and all(
                np.allclose(results[b][k], want[0][b][k], rtol=1e-9, atol=1e-12)
                for b in results for k in results[b]) and all(
                np.allclose(latest[k], want[1][k], rtol=1e-9, atol=1e-12) for k in latest))
            if not same:
                counts["differ"].append(name)
    return counts


@pytest.mark.parametrize("case", [ols_case, pagerank_case], ids=["ols", "pagerank_solve"])
def test_every_point_of_a_batch_every_kind_of_stop(tmp_path, case):
    prog, inputs = case(tmp_path)
    c = walk(tmp_path, prog, inputs)
    print(f"\nfault walk ({case.__name__[:-5]}, numpy): {len(c['points'])} points "
          f"({', '.join(c['points'])}), {c['hits']} hits, {len(KINDS)} kinds: "
          f"{c['stops']} stops, {len(c['differ'])} differ, {len(c['refused'])} refused")
    assert not c["differ"] and not c["refused"], c
    assert c["stops"] >= 4 * c["hits"]
    need = {"wal.write", "wal.sync", "batch.logged", "batch.op", "out.results",
            "out.position", "batch.done", "save.write", "save.rename", "wal.truncate"}
    if case is ols_case:
        need.add("update.applied")  # inside the trigger of a NumPy module
    assert need <= set(c["points"]) <= set(faults.POINTS)
