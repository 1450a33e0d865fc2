"""Where the time of a catching-up micro-batch goes (``linview run --source``, cProfile).

    python bench/db_profile.py --rows 4000 --cols 1000 --transactions 300
    python bench/db_profile.py --pagerank --transactions 200

A throwaway PostgreSQL holds ``obs`` as in ``bench/db_bench.py``; a writer commits
``--transactions`` transactions of 1–10 random row UPDATEs, then ``linview run --source
... --once`` (in this process, with a checkpoint) applies them all as a backlog under
cProfile.  Prints rows/s, the batches (and how many re-evaluated), the stream's own split
(check and log, update, output) and the functions that took the most time.
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
    args = ap.parse_args()
    server = PgServer().init().start()
    try:
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
