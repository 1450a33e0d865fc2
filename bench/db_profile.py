"""Where the time of a catching-up micro-batch goes (``linview run --source``, cProfile).

    python bench/db_profile.py --rows 4000 --cols 1000 --transactions 300
    python bench/db_profile.py --pagerank --transactions 200
    python bench/db_profile.py --rows 4000 --cols 1000 --paced 100 --seconds 10

A throwaway PostgreSQL holds ``obs`` as in ``bench/db_bench.py``; a writer commits
``--transactions`` transactions of 1–10 random row UPDATEs, then ``linview run --source
... --once`` (in this process, with a checkpoint) applies them all as a backlog under
cProfile.  Prints rows/s, the batches (and how many re-evaluated), the stream's own split
(check and log, update, output) and the functions that took the most time.

``--paced RATE``: instead, ``run`` serves (in a thread of this process) while a writer
commits RATE transactions/s for ``--seconds``, and each window's phases are timed: a
transaction's wait from its COMMIT to its window's close, the parts applied while the
window was open, the last part's update, the log's fsync, the result transaction, and
COMMIT -> visible (the results committed).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from db_bench import UPDATE, change_links, create_links, fill  # noqa: E402

import linview  # noqa: E402
from linview.app.postgres.runner import PostgresRun  # noqa: E402
from linview.app.postgres.server import PgServer  # noqa: E402
from linview.app.postgres.tables import parse_table_spec  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--cols", type=int, default=200)
    ap.add_argument("--transactions", type=int, default=300)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--pagerank", action="store_true")
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--links", type=int, default=1_000_000)
    ap.add_argument("--batch-rows", type=int, default=None)
    ap.add_argument("--paced", type=float, default=None, metavar="RATE")
    ap.add_argument("--seconds", type=float, default=10)
    args = ap.parse_args()
    server = PgServer().init().start()
    try:
        if args.paced:
            return paced(server, args)
        if args.pagerank:
            return report(args, *pagerank(server, args))
        dsn = server.create_db("bench")
        conn = server.connect("bench")
        conn.autocommit = False
        fill(conn, args.rows, args.cols)
        prog = linview.compile_file(ROOT / "examples/ols.m")
        with tempfile.TemporaryDirectory() as ck:
            run = PostgresRun(prog, dsn=dsn, tables=[parse_table_spec("X=obs.x"),
                                                     parse_table_spec("Y=obs.y")],
                              checkpoint=ck, warn=print)
            rng = np.random.default_rng(1)
            rows = 0
            for _ in range(args.transactions):
                k = int(rng.integers(1, 11))
                keys = [int(x) for x in rng.choice(args.rows, size=k, replace=False) + 1]
                with conn.cursor() as cur:
                    cur.execute(UPDATE, (args.cols, keys))
                conn.commit()
                rows += k
            result = profiled(run, rows)
    finally:
        server.destroy()
    report(args, *result)


def pagerank(server, args):
    """The PageRank backlog: ``--transactions`` link-changing transactions, then ``--once``."""
    from linview.app.postgres.edges import parse_edges_spec

    dsn = server.create_db("bench_pr")
    conn = server.connect("bench_pr")
    conn.autocommit = False
    n = args.nodes
    with conn.cursor() as cur:
        create_links(cur, n, args.links)
    conn.commit()
    prog = linview.compile_file(ROOT / "examples/pagerank_solve.m")
    with tempfile.TemporaryDirectory() as ck:
        run = PostgresRun(prog, dsn=dsn, edges=[parse_edges_spec("M=links(src,dst)")],
                          params=["d=0.85"], shapes={"M": (n, n), "d": (1, 1)},
                          checkpoint=ck, warn=print, batch_rows=args.batch_rows)
        rng = np.random.default_rng(3)
        mine: list = []
        rows = 0
        for _ in range(args.transactions):
            with conn.cursor() as cur:
                mine, changed = change_links(cur, rng, n, mine)
            conn.commit()
            rows += changed
        return profiled(run, rows)


def paced(server, args) -> None:
    """Each window's phases while a writer commits ``--paced`` transactions/s."""
    import threading

    from db_bench import Writer

    from linview.app.wal import Writer as Log

    dsn = server.create_db("bench")
    conn = server.connect("bench")
    conn.autocommit = False
    fill(conn, args.rows, args.cols)
    prog = linview.compile_file(ROOT / "examples/ols.m")
    windows, cur = [], {"parts": 0.0, "n_parts": 0}
    with tempfile.TemporaryDirectory() as ck:
        run = PostgresRun(prog, dsn=dsn, tables=[parse_table_spec("X=obs.x"),
                                                 parse_table_spec("Y=obs.y")],
                          checkpoint=ck, warn=print)

        def timed(fn, key):
            def wrapped(*a, **kw):
                t = time.perf_counter()
                out = fn(*a, **kw)
                cur[key] = cur.get(key, 0.0) + time.perf_counter() - t
                return out
            return wrapped

        apply, update, publish = run.apply, run._update, run._publish

        def apply_timed(txs, changes, publish=True):
            if publish:
                cur["close"] = time.time()
            cur["closing"] = publish
            t = time.perf_counter()
            apply(txs, changes, publish=publish)
            if not publish and txs:
                cur["parts"] += time.perf_counter() - t
                cur["n_parts"] += 1

        def publish_timed(changes):
            cur["commits"] = list(run._commit_times)  # every transaction of the window
            publish(changes)
            cur["visible"] = time.time()
            if cur["commits"]:
                windows.append(dict(cur))
            cur.clear()
            cur.update(parts=0.0, n_parts=0)

        run.apply, run._publish = apply_timed, publish_timed
        def update_timed(*a, **kw):
            t = time.perf_counter()
            update(*a, **kw)
            if cur.get("closing"):
                cur["last"] = cur.get("last", 0.0) + time.perf_counter() - t

        run._update = update_timed
        run.sink.write = timed(run.sink.write, "write")
        sync = Log.sync
        Log.sync = timed(lambda self: sync(self), "sync")
        t = threading.Thread(target=run.serve, kwargs={"once": False})
        t.start()
        time.sleep(1.0)
        w = Writer(dsn, args.rows, args.cols, seed=1)
        w.paced(args.paced, args.seconds)
        time.sleep(1.0)
        run.stop()
        t.join()
        Log.sync = sync
    med = {k: 1e3 * float(np.median([x.get(k, 0.0) for x in windows]))
           for k in ("parts", "last", "sync", "write")}
    waits = [x["close"] - c for x in windows if "close" in x for c in x["commits"]]
    lat = [x["visible"] - c for x in windows for c in x["commits"]]
    print(f"{len(w.log)} transactions at {args.paced:g}/s, {len(windows)} windows "
          f"(median {np.median([len(x['commits']) for x in windows]):.0f} transactions, "
          f"{np.median([x['n_parts'] for x in windows]):.0f} parts applied while open)")
    print(f"per window (median ms): parts while open {med['parts']:.1f}, last part "
          f"{med['last']:.1f}, log fsync {med['sync']:.1f}, result "
          f"transaction {med['write']:.1f}")
    print(f"per transaction (ms): COMMIT -> window closed p50 {1e3 * np.median(waits):.1f}; "
          f"COMMIT -> visible p50 {1e3 * np.percentile(lat, 50):.1f}, "
          f"p99 {1e3 * np.percentile(lat, 99):.1f}")


def profiled(run, rows: int):
    split = []
    apply_batch = run.stream.apply_batch

    def timed(*a, **kw):  # the stream's own split of each batch
        apply_batch(*a, **kw)
        if run.stream.timings:
            split.append(dict(run.stream.timings[-1]))

    run.stream.apply_batch = timed
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    stats = run.serve(once=True)
    prof.disable()
    return rows, time.perf_counter() - t0, stats, split, prof


def report(args, rows, seconds, stats, split, prof) -> None:
    print(f"{rows} rows in {seconds:.2f} s: {rows / seconds:.0f} rows/s; {stats['batches']} "
          f"batches, {stats['reevaluated_batches']} re-evaluated")
    print({k: round(sum(x[k] for x in split), 3) for k in ("check_log", "trigger", "output")})
    pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
