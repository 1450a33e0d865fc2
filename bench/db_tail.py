"""What the slow transactions of ``bench/db_bench.py`` have in common (issue 22's tail).

    python bench/db_bench.py --seconds 15 --no-peer --trace /tmp/pg.trace
    python bench/db_tail.py /tmp/pg.trace [--above 200] [--phase paced]

``db_bench.py --trace FILE`` passes ``--trace FILE`` to ``linview run`` (one JSON line per
published micro-batch: its end LSN, when its results became visible, its transactions'
commit times, and when each of linview's phases ran: :mod:`linview.app.postgres.trace`)
and writes the bench's own view of each transaction to ``FILE.transactions.json``
(COMMIT time, log position before COMMIT, rows, COMMIT -> visible as the poller saw it).

Each transaction is matched with the batch that made it visible (the first whose end LSN
is past the position read before its COMMIT).  For every phase, the time it ran between
the transaction's COMMIT and its batch becoming visible is summed; the table compares
the transactions slower than ``--above`` ms with the rest: how many of them a phase
overlapped, and the mean time it took out of their latency.  What no phase covers is
``(none)``: waiting for the window, or linview not running (the CPU taken by others).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np


def load(trace: str):
    batches = []
    for line in Path(trace).read_text().splitlines():
        b = json.loads(line)
        if b.get("lsn") is not None:
            batches.append(b)
    txs = json.loads(Path(trace + ".transactions.json").read_text())
    return batches, txs


def events_between(batches, t0: float, t1: float) -> dict[str, float]:
    """Seconds each phase ran within [t0, t1] (nested phases counted in each)."""
    out: dict[str, float] = defaultdict(float)
    for b in batches:
        for name, s, e in b["events"]:
            o = min(e, t1) - max(s, t0)
            if o > 0:
                out[name] += o
    return out


#: phases inside others (not added to the covered time)
NESTED = {"part", "statements", "wait_fsync", "commit", "fsync"}


def analyse(batches, txs, above: float, phase: str | None) -> dict:
    lsns = np.array([b["lsn"] for b in batches])
    rows = []
    for t, before, _k, ms, ph in txs:
        if phase and ph != phase:
            continue
        i = int(np.searchsorted(lsns, before, side="right"))
        if i >= len(batches):
            continue
        b = batches[i]
        # the batch's neighbours hold the events that can overlap (a checkpoint after the
        # previous batch's publish is in this batch's line)
        near = batches[max(i - 3, 0):i + 1]
        ev = events_between(near, t, b["visible"])
        gcs = sum(v for n, v in ev.items() if n.startswith("gc"))
        covered = sum(v for n, v in ev.items() if n not in NESTED and not n.startswith("gc"))
        rows.append({"commit": t, "ms": ms, "batch": i, "batch_transactions":
                     len(b["commits"]), "linview_ms": 1e3 * (b["visible"] - t),
                     "events": dict(ev), "gc": gcs,
                     "none": max(b["visible"] - t - covered, 0.0)})
    slow = [r for r in rows if r["ms"] > above]
    rest = [r for r in rows if r["ms"] <= above]
    names = sorted({n for r in rows for n in r["events"]})
    table = {}
    for n in [*names, "(none)"]:
        def val(r, n=n):
            return 1e3 * (r["none"] if n == "(none)" else r["events"].get(n, 0.0))
        table[n] = {"slow_with": sum(val(r) > 1 for r in slow),
                    "slow_mean_ms": round(float(np.mean([val(r) for r in slow])), 1)
                    if slow else None,
                    "rest_mean_ms": round(float(np.mean([val(r) for r in rest])), 1)
                    if rest else None}
    t0 = rows[0]["commit"] if rows else 0.0
    return {"transactions": len(rows), "slow": len(slow), "above_ms": above,
            "p50_ms": round(float(np.percentile([r["ms"] for r in rows], 50)), 1),
            "p99_ms": round(float(np.percentile([r["ms"] for r in rows], 99)), 1),
            "phases": table,
            "slow_batches": sorted({r["batch"] for r in slow}),
            "slow_at_s": [round(r["commit"] - t0, 2) for r in slow],
            "slow_ms": [round(r["ms"], 1) for r in slow]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--above", type=float, default=200.0, help="slow: above this many ms")
    ap.add_argument("--phase", default="paced", help="paced, flat_out, or '' for both")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    batches, txs = load(args.trace)
    out = analyse(batches, txs, args.above, args.phase or None)
    print(f"{out['transactions']} transactions, p50 {out['p50_ms']} ms, p99 "
          f"{out['p99_ms']} ms; {out['slow']} above {args.above:g} ms, in batches "
          f"{out['slow_batches']}")
    print(f"{'phase':<14}{'slow with it':>14}{'slow mean ms':>14}{'rest mean ms':>14}")
    for n, v in out["phases"].items():
        print(f"{n:<14}{v['slow_with']:>14}{v['slow_mean_ms']!s:>14}{v['rest_mean_ms']!s:>14}")
    print("slow ones at (s after the first):", out["slow_at_s"][:60])
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
