"""Live views over PostgreSQL (issue 22): ``linview run --source postgresql://`` against the
peer a user would script, re-reading the table and re-running the program per batch.

    python bench/db_bench.py --json bench/results/db.json            # 4000x1000, ~2 min
    python bench/db_bench.py --rows 400 --cols 50 --seconds 5         # quick

A throwaway PostgreSQL server (:mod:`linview.app.postgres.server`) holds
``obs(id int PRIMARY KEY, x float8[], y float8)`` with X of rows×cols and Y rows×1; the
program is ``examples/ols.m``.  One writer commits transactions that each UPDATE 1–10
random rows (new values drawn by the server, ``random()``), so the writer costs little CPU.

1. **linview, paced**: ``linview run --source ... --checkpoint`` serving in a subprocess,
   the writer at ``--rate`` transactions/s for ``--seconds``.  Latency of a transaction:
   from the writer's COMMIT returning to the first moment a poller (every ~2 ms) sees
   ``linview._linview_progress.lsn`` past the log position the writer read just before
   its COMMIT (one writer, so that is exactly "the results include this transaction").
2. **linview, flat out**: the writer commits 10-row transactions as fast as it can for
   ``--seconds``; throughput = rows changed / time until the results hold them all.
3. **the peer, paced**: the same paced writer; the peer loops: wait for a change, read the
   whole table (binary COPY parsed by NumPy, the fastest a script reads it), ``beta =
   (X'X) \\ (X'y)``, write ``peer.beta`` and its snapshot's position in one transaction.
   Latency: from COMMIT to the end of the first round whose snapshot started after it.

At the end, linview's ``beta`` is compared with a fresh computation from the final table
contents.  Everything runs on one machine (server, writer, poller, linview or the peer):
on 2 shared cores the numbers are rough.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from linview.app.postgres.pgoutput import parse_lsn  # noqa: E402
from linview.app.postgres.server import PgServer  # noqa: E402

UPDATE = ("UPDATE obs SET x = ARRAY(SELECT random() - 0.5 FROM generate_series(1, %s) "
          "WHERE obs.id > 0), y = random() WHERE id = ANY(%s)")


def fill(conn, rows: int, cols: int, seed: int = 0) -> None:
    import io

    rng = np.random.default_rng(seed)
    cur = conn.cursor()
    cur.execute("CREATE TABLE obs (id int PRIMARY KEY, x float8[], y float8)")
    for lo in range(0, rows, 500):
        buf = io.StringIO()
        for i in range(lo, min(lo + 500, rows)):
            x = ",".join(repr(float(v)) for v in rng.standard_normal(cols))
            buf.write(f"{i + 1}\t{{{x}}}\t{rng.standard_normal()!r}\n")
        buf.seek(0)
        cur.copy_expert("COPY obs FROM STDIN", buf)
    conn.commit()


def read_table(conn, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    """X and Y by binary COPY, parsed with one NumPy view (every array has ``cols``)."""
    import io

    buf = io.BytesIO()
    with conn.cursor() as cur:
        cur.copy_expert("COPY (SELECT id, x, y FROM obs ORDER BY id) TO STDOUT (FORMAT "
                        "binary)", buf)
    conn.commit()
    data = buf.getvalue()[19:-2]  # header, trailer
    row = np.dtype([("n", ">i2"), ("klen", ">i4"), ("id", ">i4"), ("alen", ">i4"),
                    ("ahead", ">i4", 5), ("x", [("len", ">i4"), ("v", ">f8")], cols),
                    ("ylen", ">i4"), ("y", ">f8")])
    recs = np.frombuffer(data, dtype=row)
    X, Y = np.zeros((rows, cols)), np.zeros((rows, 1))
    X[recs["id"] - 1] = recs["x"]["v"]
    Y[recs["id"] - 1, 0] = recs["y"]
    return X, Y


class Writer:
    """One writer: (commit time, log position just before COMMIT, rows) per transaction."""

    def __init__(self, dsn: str, rows: int, cols: int, seed: int):
        import psycopg2

        self.conn = psycopg2.connect(dsn)
        self.rows, self.cols = rows, cols
        self.rng = np.random.default_rng(seed)
        self.log: list[tuple[float, int, int]] = []

    def transaction(self, k: int) -> None:
        keys = [int(x) for x in self.rng.choice(self.rows, size=k, replace=False) + 1]
        with self.conn.cursor() as cur:
            cur.execute(UPDATE, (self.cols, keys))
            cur.execute("SELECT pg_current_wal_insert_lsn()::text")
            before = parse_lsn(cur.fetchone()[0])
        self.conn.commit()
        self.log.append((time.time(), before, k))

    def paced(self, rate: float, seconds: float) -> None:
        t0 = time.monotonic()
        n = 0
        while time.monotonic() - t0 < seconds:
            self.transaction(int(self.rng.integers(1, 11)))
            n += 1
            wait = t0 + n / rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)

    def flat_out(self, seconds: float) -> None:
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds:
            self.transaction(10)


class Poller(threading.Thread):
    """Sees the progress LSN of a sink every ~2 ms: [(time, lsn)] when it changes."""

    def __init__(self, dsn: str, schema: str):
        super().__init__(daemon=True)
        import psycopg2

        self.conn = psycopg2.connect(dsn)
        self.conn.autocommit = True
        self.schema, self.seen, self.stop = schema, [], threading.Event()

    def run(self) -> None:
        cur = self.conn.cursor()
        last = None
        while not self.stop.is_set():
            cur.execute(f"SELECT lsn::text FROM {self.schema}._linview_progress")
            row = cur.fetchone()
            if row and row[0] != last:
                last = row[0]
                self.seen.append((time.time(), parse_lsn(last)))
            time.sleep(0.002)

    def wait_past(self, lsn: int, timeout: float = 600) -> float:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.seen and self.seen[-1][1] > lsn:
                return next(t for t, v in self.seen if v > lsn)
            time.sleep(0.01)
        raise TimeoutError("the results did not catch up")


def latencies(log, seen) -> np.ndarray:
    times = np.array([t for t, _ in seen])
    lsns = np.array([v for _, v in seen])
    out = []
    for t, before, _ in log:
        i = np.flatnonzero(lsns > before)
        if len(i):
            out.append(times[i[0]] - t)
    return np.array(out) * 1000


def write_transactions(trace: str, log, seen, n_paced: int) -> None:
    """Beside linview's trace: per transaction [COMMIT time, log position before it, rows,
    COMMIT -> visible in ms (as the poller saw it), phase] (``bench/db_tail.py``)."""
    ms = latencies(log, seen)
    rows = [[t, before, k, float(m), "paced" if i < n_paced else "flat_out"]
            for i, ((t, before, k), m) in enumerate(zip(log, ms, strict=True))]
    Path(trace + ".transactions.json").write_text(json.dumps(rows))


def summary(ms: np.ndarray) -> dict:
    return {"p50_ms": round(float(np.percentile(ms, 50)), 1),
            "p99_ms": round(float(np.percentile(ms, 99)), 1), "transactions": len(ms)}


def run_linview(server, dsn, args, work: Path) -> dict:
    cmd = [sys.executable, "-m", "linview.app.cli", "run", str(ROOT / "examples/ols.m"),
           "--source", dsn, "--table", "X=obs.x", "--table", "Y=obs.y", "--checkpoint",
           str(work / "ck"), "--quiet", "--window-ms", str(args.window_ms)]
    if args.trace:  # each batch's phases (linview's --trace), the transactions beside it
        cmd += ["--trace", args.trace]
    t0 = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT)
    poller = Poller(dsn, "linview")
    while True:  # serving: the results of the initial load are there
        try:
            poller.conn.cursor().execute("SELECT 1 FROM linview._linview_progress")
            break
        except Exception:  # noqa: BLE001 - not created yet
            if proc.poll() is not None:
                raise RuntimeError(proc.stderr.read()) from None
            time.sleep(0.2)
    start_s = time.time() - t0
    poller.start()
    out = {"start_s": round(start_s, 1)}
    w = Writer(dsn, args.rows, args.cols, seed=1)
    w.paced(args.rate, args.seconds)
    poller.wait_past(w.log[-1][1])
    n_paced = len(w.log)
    out["paced"] = {"rate_tx_s": args.rate, "rows_per_s": round(
        sum(k for *_, k in w.log) / args.seconds), **summary(latencies(w.log, poller.seen))}
    if not args.no_flat_out:
        n0 = len(w.log)
        t_start = time.time()
        w.flat_out(args.seconds)
        done = poller.wait_past(w.log[-1][1])
        rows = sum(k for *_, k in w.log[n0:])
        out["flat_out"] = {"rows": rows, "writer_rows_per_s": round(rows / args.seconds),
                           "applied_rows_per_s": round(rows / (done - t_start)),
                           **summary(latencies(w.log[n0:], poller.seen))}
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    poller.stop.set()
    if proc.returncode != 0:
        raise RuntimeError(stderr)
    out["linview_stats"] = json.loads(stdout.strip().splitlines()[-1])
    if args.trace:
        write_transactions(args.trace, w.log, poller.seen, n_paced)
    X, Y = read_table(w.conn, args.rows, args.cols)
    fresh = np.linalg.solve(X.T @ X, X.T @ Y)
    with w.conn.cursor() as cur:
        cur.execute("SELECT value FROM linview.beta ORDER BY row")
        beta = np.array([v for (v,) in cur.fetchall()])
    w.conn.commit()
    out["max_rel_error_vs_fresh"] = float(np.abs(beta - fresh).max() / np.abs(fresh).max())
    return out


def run_peer(dsn, args) -> dict:
    """The peer: re-read the table and re-run the program per batch, in a thread."""
    import psycopg2

    conn = psycopg2.connect(dsn)
    with conn.cursor() as cur:
        cur.execute("CREATE SCHEMA peer; CREATE TABLE peer.beta (row int PRIMARY KEY, value "
                    "float8[]); CREATE TABLE peer._linview_progress (lsn pg_lsn)")
    conn.commit()
    stop, rounds = threading.Event(), []

    def loop():
        last = None
        while not stop.is_set():
            with conn.cursor() as cur:
                cur.execute("SELECT pg_current_wal_lsn()::text")
                now = cur.fetchone()[0]
            conn.commit()
            if now == last:
                time.sleep(0.002)
                continue
            last, s = now, time.time()
            X, Y = read_table(conn, args.rows, args.cols)
            beta = np.linalg.solve(X.T @ X, X.T @ Y)
            with conn.cursor() as cur:
                cur.execute("DELETE FROM peer.beta")
                cur.executemany("INSERT INTO peer.beta VALUES (%s, %s)",
                                [(i + 1, [float(v)]) for i, v in enumerate(beta[:, 0])])
            conn.commit()
            rounds.append((s, time.time()))
            with conn.cursor() as cur:  # its own write is not a change of the source
                cur.execute("SELECT pg_current_wal_lsn()::text")
                last = cur.fetchone()[0]
            conn.commit()

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    w = Writer(dsn, args.rows, args.cols, seed=2)
    w.paced(args.rate, args.seconds)
    time.sleep(1.0)
    end = time.time() + 600
    while time.time() < end and not (rounds and rounds[-1][0] > w.log[-1][0]):
        time.sleep(0.05)
    stop.set()
    t.join()
    ms = []
    for commit, _, _ in w.log:
        nxt = [e for s, e in rounds if s > commit]
        if nxt:
            ms.append((nxt[0] - commit) * 1000)
    secs = np.array([e - s for s, e in rounds])
    return {"paced": {"rate_tx_s": args.rate, **summary(np.array(ms))},
            "round_s_median": round(float(np.median(secs)), 2), "rounds": len(rounds),
            "rows_per_s_kept_up": round(sum(k for *_, k in w.log) / args.seconds)}


def create_links(cur, n: int, links: int) -> None:
    """The table ``links(src, dst)``: about ``links`` random links among ``n`` nodes."""
    cur.execute("CREATE TABLE links (src int, dst int, PRIMARY KEY (src, dst))")
    cur.execute("INSERT INTO links SELECT 1 + (random() * (%s - 1))::int, "
                "1 + (random() * (%s - 1))::int FROM generate_series(1, %s) "
                "ON CONFLICT DO NOTHING", (n, n, links))


def change_links(cur, rng, n: int, mine: list) -> tuple[list, int]:
    """One writer transaction's statements on ``links``: 1-10 random links inserted, as many
    of the writer's own earlier ones (``mine``) deleted; the links still its own, and the
    number of link changes."""
    k = int(rng.integers(1, 11))
    new = [(int(a), int(b)) for a, b in rng.integers(1, n + 1, (k, 2))]
    gone, mine = mine[:k], mine[k:]
    for a, b in gone:
        cur.execute("DELETE FROM links WHERE src = %s AND dst = %s", (a, b))
    for a, b in new:
        cur.execute("INSERT INTO links VALUES (%s, %s) ON CONFLICT DO NOTHING RETURNING 1",
                    (a, b))
        if cur.fetchone():
            mine.append((a, b))
    return mine, k + len(gone)


def run_pagerank(server, args, work: Path) -> dict:
    """PageRank (``examples/pagerank_solve.m``) over ``links(src, dst)``: ``--nodes`` nodes,
    about ``--links`` random links; a writer commits transactions that insert 1-10 links
    and delete as many it inserted before, at ``--rate``; COMMIT-to-visible latency as
    above, and the solve view's certified error bound at the end, with the l1 difference
    of the result table from a fresh computation on the final links (:func:`pagerank_fresh`)."""
    import psycopg2

    dsn = server.create_db("bench_pr")
    conn = psycopg2.connect(dsn)
    n = args.nodes
    with conn.cursor() as cur:
        create_links(cur, n, args.links)
        cur.execute("SELECT count(*) FROM links")
        links = cur.fetchone()[0]
    conn.commit()
    cmd = [sys.executable, "-m", "linview.app.cli", "run",
           str(ROOT / "examples/pagerank_solve.m"), "--source", dsn, "--edges",
           "M=links(src,dst)", "--param", "d=0.85", "--shapes", f"M={n}x{n},d=1x1",
           "--checkpoint", str(work / "ck_pr"), "--quiet"]
    t0 = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT)
    poller = Poller(dsn, "linview")
    while True:
        try:
            poller.conn.cursor().execute("SELECT 1 FROM linview._linview_progress")
            break
        except Exception:  # noqa: BLE001 - not created yet
            if proc.poll() is not None:
                raise RuntimeError(proc.stderr.read()) from None
            time.sleep(0.2)
    start_s = time.time() - t0
    poller.start()
    rng = np.random.default_rng(3)
    mine: list[tuple[int, int]] = []
    log = []
    t_end = time.monotonic() + args.seconds
    k_total = 0
    while time.monotonic() < t_end:
        with conn.cursor() as cur:
            mine, changed = change_links(cur, rng, n, mine)
            cur.execute("SELECT pg_current_wal_insert_lsn()::text")
            before = parse_lsn(cur.fetchone()[0])
        conn.commit()
        log.append((time.time(), before, changed))
        k_total += changed
        time.sleep(max(1.0 / args.rate - 0.0, 0))
    poller.wait_past(log[-1][1])
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=300)
    poller.stop.set()
    if proc.returncode != 0:
        raise RuntimeError(stderr)
    stats = json.loads(stdout.strip().splitlines()[-1])
    with conn.cursor() as cur:
        cur.execute("SELECT src, dst FROM links")
        final = np.array(cur.fetchall(), dtype=np.int64).reshape(-1, 2)
        cur.execute("SELECT value[1] FROM linview.r ORDER BY row")
        r = np.array([v for (v,) in cur.fetchall()])
    conn.commit()
    fresh, fresh_bound = pagerank_fresh(final, n, 0.85)
    bound = (stats.get("error_bound") or {}).get("r")
    diff = float(np.abs(r - fresh).sum())
    return {"nodes": n, "links": links, "start_s": round(start_s, 1),
            "link_changes_per_s": round(k_total / args.seconds),
            **summary(latencies(log, poller.seen)), "error_bound": stats.get("error_bound"),
            "batches": stats["batches"],
            "vs_fresh": {"l1_difference": diff, "max_abs_difference":
                         float(np.abs(r - fresh).max()), "fresh_l1_bound": fresh_bound,
                         "within_certified_bound": None if bound is None
                         else bool(diff <= bound + fresh_bound)}}


def pagerank_fresh(links: np.ndarray, n: int, d: float, tol: float = 1e-15):
    """PageRank of the final links (1-based (src, dst) rows; a node without links is
    dangling, a uniform column) from scratch, by power iteration with SciPy, independent of
    linview; and a bound on its own l1 error: ``d / (1 - d)`` times the last step's
    change (the iteration contracts by ``d`` in l1)."""
    import scipy.sparse as sps

    src, dst = links[:, 0] - 1, links[:, 1] - 1
    out = np.bincount(src, minlength=n).astype(float)
    S = sps.csr_matrix((1.0 / out[src], (dst, src)), shape=(n, n))
    dangling = out == 0
    r = np.full(n, 1.0 / n)
    for _ in range(10_000):
        nxt = d * (S @ r) + (d * r[dangling].sum() + 1 - d) / n
        step = float(np.abs(nxt - r).sum())
        r = nxt
        if step * d / (1 - d) < tol:
            break
    return r, step * d / (1 - d)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=4000)
    ap.add_argument("--cols", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=100, help="transactions/s (paced)")
    ap.add_argument("--seconds", type=float, default=20, help="per phase")
    ap.add_argument("--json", default=None)
    ap.add_argument("--window-ms", type=float, default=50,
                    help="linview's micro-batch window (run --window-ms)")
    ap.add_argument("--no-flat-out", action="store_true", help="skip phase 2")
    ap.add_argument("--no-peer", action="store_true", help="skip phase 3")
    ap.add_argument("--trace", default=None, metavar="FILE",
                    help="linview's per-batch phases (run --trace FILE) and the bench's "
                    "transactions (FILE.transactions.json), for bench/db_tail.py")
    ap.add_argument("--pagerank", action="store_true",
                    help="instead: PageRank over a links table (--nodes, --links)")
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--links", type=int, default=1_000_000)
    args = ap.parse_args()
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
    server = PgServer().init().start()
    if args.pagerank:
        try:
            with tempfile.TemporaryDirectory() as work:
                result = {"machine": f"{platform.machine()}, {os.cpu_count()} cores",
                          "load_average": os.getloadavg()[0], "seconds": args.seconds,
                          "rate_tx_s": args.rate,
                          "pagerank": run_pagerank(server, args, Path(work))}
        finally:
            server.destroy()
        text = json.dumps(result, indent=2)
        print(text)
        if args.json:
            Path(args.json).write_text(text + "\n")
        return
    try:
        dsn = server.create_db("bench")
        fill(server.connect("bench"), args.rows, args.cols)
        with tempfile.TemporaryDirectory() as work:
            result = {"machine": f"{platform.machine()}, {os.cpu_count()} cores",
                      "rows": args.rows, "cols": args.cols, "seconds": args.seconds,
                      "load_average": os.getloadavg()[0], "window_ms": args.window_ms,
                      "linview": run_linview(server, dsn, args, Path(work))}
        if not args.no_peer:
            result["peer"] = run_peer(dsn, args)
    finally:
        server.destroy()
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")


if __name__ == "__main__":
    main()
