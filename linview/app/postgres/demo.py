"""``linview demo --db``: an OLS model kept fresh inside a throwaway PostgreSQL.

Starts a server (:mod:`.server`), creates ``obs(id, x float8[], y float8)``, serves
``linview.beta`` from it (:class:`.runner.PostgresRun`, in a thread) while a writer commits
transactions that change 1-5 rows each, and shows the result table staying fresh: a live
status line, then the check of the result table against a fresh computation.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from linview.app.demo import OLS
from linview.app.postgres.pgoutput import format_lsn


def demo_db(n: int = 20, seconds: float = 10.0, rate: float = 20.0) -> int:
    import linview
    from linview.app import report
    from linview.app.postgres.runner import PostgresRun
    from linview.app.postgres.server import PgServer
    from linview.app.postgres.tables import TableInput

    console = report.console()
    m = 10 * n
    console.rule("[bold]linview demo --db: a least-squares fit that lives in PostgreSQL")
    server = PgServer().init().start()
    try:
        dsn = server.create_db("demo")
        conn = server.connect("demo")
        cur = conn.cursor()
        rng = np.random.default_rng(0)
        cur.execute("CREATE TABLE obs (id int PRIMARY KEY, x float8[], y float8)")
        for i in range(m):
            cur.execute("INSERT INTO obs VALUES (%s, %s, %s)",
                        (i + 1, [float(v) for v in rng.standard_normal(n)],
                         float(rng.standard_normal())))
        console.print(f"server: {dsn} (a temporary folder); table obs: {m} rows, x float8[{n}]")
        console.print(f"linview run ols.m --source {dsn} --table X=obs.x --table Y=obs.y",
                      markup=False, highlight=False)
        prog = linview.compile(OLS, name="ols", backend="numpy")
        run = PostgresRun(prog, dsn=dsn, tables=[TableInput("X", "public", "obs", "x"),
                                                 TableInput("Y", "public", "obs", "y")],
                          warn=lambda msg: console.print(f"warning: {msg}", markup=False))
        serving = threading.Thread(target=run.serve, kwargs={"once": False}, daemon=True)
        serving.start()
        committed = _write(conn, rng, m, n, seconds, rate, run, console)
        run.stop()
        serving.join(30)
        cur.execute("SELECT array_agg(x ORDER BY id), array_agg(y ORDER BY id) FROM obs")
        X, Y = (np.array(a, dtype=float) for a in cur.fetchone())
        fresh = np.linalg.solve(X.T @ X, X.T @ Y.reshape(-1, 1))
        cur.execute("SELECT value FROM linview.beta ORDER BY row")
        beta = np.array([v for (v,) in cur.fetchall()])
        err = float(np.abs(beta - fresh).max() / np.abs(fresh).max())
        lat = np.percentile(run.latencies, [50, 99]) * 1000 if run.latencies else [0, 0]
        console.print(f"{committed} transactions committed; linview.beta = a fresh "
                      f"computation from the final table within {err:.1e} (relative); "
                      f"COMMIT to visible: p50 {lat[0]:.0f} ms, p99 {lat[1]:.0f} ms")
        conn.close()
        return 0 if err < 1e-8 else 1
    finally:
        server.destroy()


def _write(conn, rng, m, n, seconds, rate, run, console) -> int:
    """The writer, with a live status line of what the result table holds."""
    from rich.live import Live

    cur = conn.cursor()
    done, t0 = 0, time.monotonic()
    with Live("", console=console, refresh_per_second=8, transient=False) as live:
        while time.monotonic() - t0 < seconds:
            cur.execute("BEGIN")
            for k in rng.choice(m, size=int(rng.integers(1, 6)), replace=False):
                cur.execute("UPDATE obs SET x = %s, y = %s WHERE id = %s",
                            ([float(v) for v in rng.standard_normal(n)],
                             float(rng.standard_normal()), int(k) + 1))
            cur.execute("COMMIT")
            done += 1
            b = _peek(conn)
            lat = run.latencies[-1] * 1000 if run.latencies else 0.0
            live.update(f"{done} transactions · results at LSN {format_lsn(run.applied)} · "
                        f"last COMMIT to visible {lat:.0f} ms · beta[1:3] = {b}")
            time.sleep(max(t0 + done / rate - time.monotonic(), 0))
    console.print()
    time.sleep(0.5)
    return done


def _peek(conn) -> str:
    with conn.cursor() as cur:
        cur.execute("SELECT value[1] FROM linview.beta WHERE row <= 3 ORDER BY row")
        return ", ".join(f"{v:+.4f}" for (v,) in cur.fetchall())
