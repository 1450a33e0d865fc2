"""Ways to replace most rows of a result table in one transaction, measured on a real server.

    python bench/db_sink_bench.py --rows 100000 --cols 1 --rounds 12 [--fraction 0.05]

A throwaway PostgreSQL holds ``res.out(row int PRIMARY KEY, value float8[])`` with
``--rows`` rows, once per method; each round changes ``--fraction`` of the rows (all by
default: what a PageRank batch does) and writes them with the progress row in the same
transaction, by each method in turn:

* ``delete_copy``: ``DELETE`` every row, then binary ``COPY`` of all rows (the sink before;
  only when every row changes);
* ``delete_some_ff``: ``DELETE ... WHERE row = ANY(...)`` of the changed rows, then their
  binary ``COPY`` (the sink's path for a few rows), on a ``fillfactor = 50`` table;
* ``stage_update``: binary ``COPY`` into a temporary staging table, then one
  ``UPDATE ... FROM`` it;
* ``stage_update_ff``, ``stage_update_ff30``: the same on tables created with
  ``fillfactor = 50`` and ``30`` (room in each page for the new row versions: HOT updates,
  no new index entries; the sink's path for many rows);
* ``swap``: binary ``COPY`` into a fresh table, its primary key, ``DROP`` the old table
  and ``RENAME`` the new one (only when every row changes; not used: a reader holding an
  older snapshot reads the new table empty, printed at the end).

Prints the median and the slowest round per method (client and server together), then what
a REPEATABLE READ reader whose snapshot predates a swap reads from the swapped table.
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from linview.app.postgres.server import PgServer  # noqa: E402
from linview.app.postgres.sink import copy_binary  # noqa: E402

COPY = "COPY {} (row, value) FROM STDIN WITH (FORMAT binary)"
PROGRESS = ("INSERT INTO res.progress VALUES ('s', %s) ON CONFLICT (slot) "
            "DO UPDATE SET n = EXCLUDED.n")


def create(cur, name: str, M: np.ndarray, ff: int | None = None) -> None:
    with_ = f" WITH (fillfactor = {ff})" if ff else ""
    cur.execute(f"CREATE TABLE res.{name} (row int PRIMARY KEY, value float8[] NOT NULL)"
                f"{with_}")
    cur.copy_expert(COPY.format(f"res.{name}"), io.BytesIO(copy_binary(np.arange(len(M)), M)))


def delete_copy(cur, name: str, data: bytes) -> None:
    cur.execute(f"DELETE FROM res.{name}")
    cur.copy_expert(COPY.format(f"res.{name}"), io.BytesIO(data))


def stage_update(cur, name: str, data: bytes) -> None:
    cur.execute("CREATE TEMP TABLE IF NOT EXISTS stage (row int, value float8[]) "
                "ON COMMIT DELETE ROWS")
    cur.copy_expert(COPY.format("stage"), io.BytesIO(data))
    cur.execute(f"UPDATE res.{name} t SET value = s.value FROM stage s WHERE t.row = s.row")


def swap(cur, name: str, data: bytes) -> None:
    cur.execute(f"CREATE TABLE res.{name}_new (row int NOT NULL, value float8[] NOT NULL)")
    cur.copy_expert(COPY.format(f"res.{name}_new"), io.BytesIO(data))
    cur.execute(f"ALTER TABLE res.{name}_new ADD PRIMARY KEY (row)")
    cur.execute(f"DROP TABLE res.{name}")
    cur.execute(f"ALTER TABLE res.{name}_new RENAME TO {name}")


def delete_some(cur, name: str, data: bytes, rows: list[int]) -> None:
    cur.execute(f"DELETE FROM res.{name} WHERE row = ANY(%s)", (rows,))
    cur.copy_expert(COPY.format(f"res.{name}"), io.BytesIO(data))


METHODS = {"delete_copy": (delete_copy, None), "stage_update": (stage_update, None),
           "stage_update_ff": (stage_update, 50), "stage_update_ff30": (stage_update, 30),
           "delete_some_ff": (delete_some, 50), "swap": (swap, None)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--cols", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--fraction", type=float, default=1.0,
                    help="the fraction of rows that change per round")
    args = ap.parse_args()
    server = PgServer().init().start()
    try:
        server.create_db("sinkb")
        conn = server.connect("sinkb")
        conn.autocommit = False
        rng = np.random.default_rng(0)
        M = rng.random((args.rows, args.cols))
        with conn.cursor() as cur:
            cur.execute("CREATE SCHEMA res")
            cur.execute("CREATE TABLE res.progress (slot text PRIMARY KEY, n bigint)")
            for name, (_, ff) in METHODS.items():
                create(cur, name, M, ff)
        conn.commit()
        times: dict[str, list[float]] = {m: [] for m in METHODS}
        for r in range(args.rounds):
            rows = np.sort(rng.choice(len(M), size=max(1, int(args.fraction * len(M))),
                                      replace=False))
            M = M.copy()
            M[rows] += rng.random((len(rows), M.shape[1])) * 1e-6
            data = copy_binary(rows, M)
            for name, (fn, _) in METHODS.items():
                if name in ("swap", "delete_copy") and len(rows) < len(M):
                    continue
                t0 = time.perf_counter()
                with conn.cursor() as cur:
                    if name == "delete_some_ff":
                        fn(cur, name, data, [int(r) + 1 for r in rows])
                    else:
                        fn(cur, name, data)
                    cur.execute(PROGRESS, (r,))
                conn.commit()
                times[name].append(time.perf_counter() - t0)
        print(f"{args.rows} rows x {args.cols} columns, {args.rounds} rounds, "
              f"{args.fraction:.0%} of the rows changing "
              f"(client + server, one transaction each):")
        for name, ts in times.items():
            if not ts:
                continue
            print(f"  {name:16s} median {1e3 * statistics.median(ts):8.1f} ms   "
                  f"slowest {1e3 * max(ts):8.1f} ms")
        print("a REPEATABLE READ reader whose snapshot predates a swap:",
              snapshot_reader_after_swap(server, conn, M))
        conn.close()
    finally:
        server.destroy()


def snapshot_reader_after_swap(server, conn, M) -> str:
    reader = server.connect("sinkb")
    reader.autocommit = False
    with reader.cursor() as rc:
        rc.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        rc.execute("SELECT n FROM res.progress")  # the snapshot is taken here
        with conn.cursor() as cur:
            swap(cur, "swap", copy_binary(np.arange(len(M)), M + 1.0))
        conn.commit()
        rc.execute("SELECT count(*) FROM res.swap")
        n = rc.fetchone()[0]
    reader.rollback()
    reader.close()
    return f"{n} rows of {len(M)}"


if __name__ == "__main__":
    main()
