"""Executor-kill soak (issue 24): ``linview run --backend spark --checkpoint`` on a
standalone cluster on loopback (a master and two workers of 1 core and 1 GB, started from
pyspark's ``spark-class``), one executor's JVM killed (SIGKILL, by pid) at a random point
of each run; every run must end at NumPy's answer.

    python bench/spark_kill_soak.py --runs 5 \\
        --json bench/results/spark_kill.json

Each run: ``examples/powers.m`` (``D = A^16``) with A of n×n (views distributed,
``--spark-driver-mib 0 --partitions 2``), ``--batches`` files of one rank-``--rank``
update each; the kill falls after a random number of applied batches (0: during the load)
plus a random delay of up to a second (:func:`linview.app.spark_cluster.killed_run`).
Exit status 1 if any run failed or ended away from NumPy.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from linview.app.spark_cluster import LoopbackCluster, killed_run  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--rank", type=int, default=48)
    ap.add_argument("--seed", type=int, default=None, help="first seed (default: random)")
    ap.add_argument("--json", default=None, help="write the runs' records here")
    ap.add_argument("--no-checkpoint", action="store_true",
                    help="the control: runs without --checkpoint (local lineage cuts)")
    args = ap.parse_args(argv)
    first = args.seed if args.seed is not None else random.SystemRandom().randrange(10**6)
    root = Path(tempfile.mkdtemp(prefix="linview-kill-soak-"))
    runs = []
    with LoopbackCluster(workers=2, cores=1, memory="1g", logs=root) as cluster:
        for i in range(args.runs):
            r = killed_run(cluster, root / f"run{i}", HERE.parent / "examples" / "powers.m",
                           seed=first + i, n=args.n, batches=args.batches, rank=args.rank,
                           checkpoint=not args.no_checkpoint)
            r["ok"] = bool(r["returncode"] == 0 and r["killed"] is not None
                           and r.get("batches_applied") == args.batches
                           and r.get("error", 1.0) <= 1e-10)
            tail = r.pop("driver_log_tail")
            if not r["ok"]:
                r["driver_log_tail"] = tail
            runs.append(r)
            print(f"run {i + 1}: seed {r['seed']}, killed pid {r['killed']} after "
                  f"{r['kill_after_batches']} of {args.batches} batches "
                  f"(+{r.get('kill_delay_s', 0)} s), exit {r['returncode']}, "
                  f"{r['seconds']} s, error vs NumPy {r.get('error', float('nan')):.1e}: "
                  f"{'ok' if r['ok'] else 'FAILED'}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": runs}, indent=1) + "\n")
    ok = sum(r["ok"] for r in runs)
    print(f"{ok} of {len(runs)} runs ended equal to NumPy after a killed executor")
    return 0 if ok == len(runs) else 1


if __name__ == "__main__":
    sys.exit(main())
