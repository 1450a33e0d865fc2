"""``linview run --source postgresql://`` over streams of transactions: random streams
against re-evaluation (Hypothesis), crashes and kill -9 against an uninterrupted run, and a
concurrent reader that must never see a torn result.  A real server (``pg_server``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import mpmath
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from linview import statefile
from linview.app.postgres.choice import INJECT
from tests.conftest import EXAMPLES, ROOT
from tests.pg_server import floats, run_cli

psycopg2 = pytest.importorskip("psycopg2")

OLS = str(EXAMPLES / "ols.m")
ROWS, COLS = 10, 2
SHAPES = f"X={ROWS}x{COLS},Y={ROWS}x1"


def x_row(rng, ill: bool = False) -> np.ndarray:
    """A row of X; ``ill``: its two columns 1e-6 apart (κ of X about 1e6: the stable form)."""
    r = rng.standard_normal(COLS)
    return np.array([r[0], r[0] + 1e-6 * r[1]]) if ill else r


def two_tables(conn, ill: bool = False) -> None:
    """X in ax(id, x float8[]), Y in ay(id, y float8): rows 1..7 present, 8..10 free."""
    cur = conn.cursor()
    cur.execute("DROP TABLE IF EXISTS ax, ay")
    cur.execute("CREATE TABLE ax (id int PRIMARY KEY, x float8[])")
    cur.execute("CREATE TABLE ay (id int PRIMARY KEY, y float8)")
    rng = np.random.default_rng(7)
    for i in range(1, 8):
        cur.execute("INSERT INTO ax VALUES (%s, %s)", (i, floats(x_row(rng, ill))))
        cur.execute("INSERT INTO ay VALUES (%s, %s)", (i, float(rng.standard_normal())))


def run(dsn, ck, *extra):
    return run_cli("run", OLS, "--source", dsn, "--table", "X=ax.x", "--table", "Y=ay.y",
                   "--shapes", SHAPES, "--checkpoint", str(ck), "--once", "--quiet", *extra)


def table_contents(conn):
    cur = conn.cursor()
    X, Y = np.zeros((ROWS, COLS)), np.zeros((ROWS, 1))
    cur.execute("SELECT id, x FROM ax")
    for k, v in cur.fetchall():
        X[k - 1] = v
    cur.execute("SELECT id, y FROM ay")
    for k, v in cur.fetchall():
        Y[k - 1] = v
    return X, Y


def beta(conn, schema="linview"):
    cur = conn.cursor()
    cur.execute(f"SELECT value FROM {schema}.beta ORDER BY row")
    return np.array([v for (v,) in cur.fetchall()])


def ols(X, Y):
    return np.linalg.solve(X.T @ X, X.T @ Y)


def assert_as_accurate_as_lstsq(X, Y, got) -> None:
    """``got`` within 10× lstsq's error against the exact least-squares solution of the
    float data (50 digits)."""
    with mpmath.workdps(50):
        Xm = mpmath.matrix(X.tolist())
        exact = np.array([float(v) for v in mpmath.lu_solve(
            Xm.T * Xm, Xm.T * mpmath.matrix(Y.tolist()))])

    def rel(x) -> float:
        return float(np.linalg.norm(np.reshape(x, -1) - exact) / np.linalg.norm(exact))
    floor = 4 * np.finfo(float).eps
    assert rel(got) <= 10 * max(rel(np.linalg.lstsq(X, Y, rcond=None)[0]), floor), \
        (rel(got), rel(np.linalg.lstsq(X, Y, rcond=None)[0]))


value = st.floats(-4, 4, allow_nan=False).map(lambda v: round(v, 3))
op = st.tuples(st.sampled_from(["ax", "ay"]), st.integers(1, ROWS),
               st.sampled_from(["upsert", "delete"]), st.lists(value, min_size=COLS,
                                                               max_size=COLS))
transaction = st.tuples(st.lists(op, min_size=1, max_size=5),
                        st.sampled_from(["commit", "commit", "rollback", "long"]))


def execute(conn, conn2, txs) -> None:
    """Run the transactions; a "long" one stays open (on a second connection) while
    another transaction commits, then commits itself."""
    for ops, end in txs:
        c = conn2 if end == "long" else conn
        cur = c.cursor()
        cur.execute("BEGIN")
        for table, key, kind, vals in ops:
            col = "x" if table == "ax" else "y"
            v = vals if table == "ax" else vals[0]
            if kind == "delete":  # rows 1..3 of X stay: X'X stays well-conditioned
                cur.execute(f"DELETE FROM {table} WHERE id = %s AND id > 3", (key,))
            elif table == "ax" and key <= 3:
                continue
            else:
                cur.execute(f"INSERT INTO {table} VALUES (%s, %s) ON CONFLICT (id) DO UPDATE "
                            f"SET {col} = EXCLUDED.{col}", (key, v))
        if end == "long":
            conn.cursor().execute("UPDATE ax SET x = x WHERE id = 1")  # commits in between
        cur.execute("ROLLBACK" if end == "rollback" else "COMMIT")


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(transaction, min_size=1, max_size=12), st.integers(0, 12))
def test_random_streams_equal_reevaluation(pg_db, tmp_path_factory, txs, split):
    dsn, conn, conn2 = pg_db
    two_tables(conn)
    ck = tmp_path_factory.mktemp("ck")
    rc, _, err = run(dsn, ck, "--restart")
    assert rc == 0, err
    for part in (txs[:split], txs[split:]):  # a resume from the checkpoint in between
        execute(conn, conn2, part)
        rc, _, err = run(dsn, ck)
        assert rc == 0, err
        X, Y = table_contents(conn)
        np.testing.assert_allclose(beta(conn), ols(X, Y), rtol=1e-8, atol=1e-10)


@pytest.fixture(scope="module")
def pg_db(pg_server):
    dsn = pg_server.create_db("t_streams")
    conn, conn2 = pg_server.connect("t_streams"), pg_server.connect("t_streams")
    conn2.autocommit = True
    yield dsn, conn, conn2
    conn.close()
    conn2.close()


def cli(dsn, ck, sink, env=None, once=True, quiet=True, extra=()):
    cmd = [sys.executable, "-m", "linview.app.cli", "run", OLS, "--source", dsn, "--table",
           "X=ax.x", "--table", "Y=ay.y", "--shapes", SHAPES, "--checkpoint", str(ck),
           "--sink", sink, *(["--quiet"] if quiet else []), *(["--once"] if once else []),
           *extra]
    return subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def committed_stream(conn, n: int, seed: int, ill: bool = False) -> None:
    rng = np.random.default_rng(seed)
    cur = conn.cursor()
    for t in range(n):
        cur.execute("BEGIN")
        for k in rng.choice(np.arange(1, ROWS + 1), size=int(rng.integers(1, 4)), replace=False):
            cur.execute("INSERT INTO ax VALUES (%s, %s) ON CONFLICT (id) DO UPDATE SET x = "
                        "EXCLUDED.x", (int(k), floats(x_row(rng, ill))))
            cur.execute("INSERT INTO ay VALUES (%s, %s) ON CONFLICT (id) DO UPDATE SET y = "
                        "EXCLUDED.y", (int(k), float(rng.standard_normal())))
        cur.execute("COMMIT")
        if t % 3 == 0:
            time.sleep(0.06)  # several micro-batches


#: die after batch N is applied (exit 86), or once it is logged, nothing applied (87)
FAULTS = ["batch.done@{}=exit", "batch.logged@{}=exit:87"]
SMALL = ["--batch-rows", "12"]  # the backlog in several micro-batches


@pytest.mark.parametrize("extra,ill", [(SMALL, False),
                                       (SMALL + ["--reevaluate-above", "8"], False),
                                       (SMALL, True),
                                       (SMALL + ["--checkpoint-every", "3"], False)],
                         ids=["triggers", "some-batches-reevaluated", "stable-form",
                              "checkpoints-in-the-background"])
def test_crashes_resume_to_the_uninterrupted_result_bit_for_bit(pg_db, tmp_path, extra, ill):
    """With ``--reevaluate-above`` the batches of more than 8 rank-1 changes re-evaluate
    (the choice is logged with each batch, so a replay makes it again).  ``stable-form``:
    ill-conditioned data (κ about 1e6), kept by factor updates (``docs/language.md``),
    whose checkpoint holds the factor itself."""
    dsn, conn, _ = pg_db
    two_tables(conn, ill)
    for sink in ("whole", "crashed"):
        p = cli(dsn, tmp_path / sink, sink, env={})
        assert p.wait(60) == 0, p.stderr.read()
    committed_stream(conn, 16, seed=3, ill=ill)
    p = cli(dsn, tmp_path / "whole", "whole", extra=extra)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    stats = json.loads(out.strip().splitlines()[-1])
    if "--reevaluate-above" in extra:  # batches of up to 12 row changes, rank 2: both kinds
        assert 0 < stats["reevaluated_batches"] < stats["batches"], stats
    crashes = 0
    for at in range(2, 40, 2):  # die after batch `at` (applied, or logged only)
        p = cli(dsn, tmp_path / "crashed", "crashed",
                env={"LINVIEW_TEST_FAULTS": FAULTS[at // 2 % 2].format(at)}, extra=extra)
        rc = p.wait(60)
        if rc == 0:
            break
        assert rc in (86, 87), p.stderr.read()
        crashes += 1
    assert crashes >= 2
    whole, crashed = beta(conn, "whole"), beta(conn, "crashed")
    assert whole.tobytes() == crashed.tobytes()  # bit for bit
    assert not (tmp_path / "crashed" / "wal.prev.log").exists()  # merged on resume
    X, Y = table_contents(conn)
    form = statefile.read(tmp_path / "crashed" / "state.npz")[0].get("least_squares") or ""
    assert form.startswith("least squares of X by QR") == ill, form  # as the data ask
    if ill:
        assert_as_accurate_as_lstsq(X, Y, whole)
    else:
        np.testing.assert_allclose(whole, ols(X, Y), rtol=1e-9, atol=1e-12)
    cur = conn.cursor()
    cur.execute("SELECT slot, lsn FROM whole._linview_progress UNION ALL "
                "SELECT slot, lsn FROM crashed._linview_progress ORDER BY slot")
    (_, a), (_, b) = cur.fetchall()
    assert a == b


def test_a_measured_threshold_is_kept_so_crashes_resume_bit_for_bit(pg_db, tmp_path):
    """Default settings: the per-batch choice measures its threshold once (here injected:
    T = 0.01 / 0.001 = 10) and keeps it in the checkpoint.  Every run after the first
    crash would measure T = 1000 (no batch re-evaluated, far larger batches), so the
    crashed run equals the uninterrupted one bit for bit only if it reuses the stored T."""
    dsn, conn, _ = pg_db
    two_tables(conn)
    for sink in ("whole", "crashed"):
        p = cli(dsn, tmp_path / sink, sink, env={})
        assert p.wait(60) == 0, p.stderr.read()
    committed_stream(conn, 40, seed=5)
    first, later = {INJECT: "0.01,0.001"}, {INJECT: "0.01,0.00001"}
    extra = ["--batch-rows", "24"]
    p = cli(dsn, tmp_path / "whole", "whole", env=first, extra=extra)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    stats = json.loads(out.strip().splitlines()[-1])
    assert stats["reevaluate_above"] == 10, stats
    assert 0 < stats["reevaluated_batches"] < stats["batches"], stats
    crashes = 0
    for at in range(2, 40, 2):
        env = {**(first if at == 2 else later), "LINVIEW_TEST_FAULTS": FAULTS[at // 2 % 2]
               .format(at)}
        p = cli(dsn, tmp_path / "crashed", "crashed", env=env, extra=extra)
        out, err = p.communicate(timeout=60)
        if p.returncode == 0:
            assert json.loads(out.strip().splitlines()[-1])["reevaluate_above"] == 10
            break
        assert p.returncode in (86, 87), err
        crashes += 1
    assert crashes >= 2
    whole, crashed = beta(conn, "whole"), beta(conn, "crashed")
    assert whole.tobytes() == crashed.tobytes()  # bit for bit
    X, Y = table_contents(conn)
    np.testing.assert_allclose(whole, ols(X, Y), rtol=1e-9, atol=1e-12)


def test_kill_9_while_serving_and_a_reader_never_sees_a_torn_result(pg_db, tmp_path):
    dsn, conn, _ = pg_db
    two_tables(conn)
    p = cli(dsn, tmp_path / "ck", "live", once=True)
    assert p.wait(60) == 0, p.stderr.read()
    prefixes = [ols(*table_contents(conn))]
    seen, stop, failures = [], threading.Event(), []

    def reader():
        rc = psycopg2.connect(dsn)
        while not stop.is_set():
            cur = rc.cursor()
            cur.execute("SELECT value FROM live.beta ORDER BY row")  # one snapshot
            b = np.array([v for (v,) in cur.fetchall()])
            rc.commit()
            if not any(np.allclose(b, q, rtol=1e-9, atol=1e-12) for q in prefixes):
                failures.append(b)
            seen.append(b)
        rc.close()

    rng = np.random.default_rng(11)
    cur = conn.cursor()
    t = threading.Thread(target=reader)
    t.start()
    try:
        for round_ in range(3):  # serve, write, kill -9, serve again
            cur.execute("SELECT updated FROM live._linview_progress")
            was = cur.fetchone()
            p = cli(dsn, tmp_path / "ck", "live", once=False)
            wait_until(conn, lambda was=was: progress_row(conn) != was)  # serving
            for _ in range(12):
                cur.execute("BEGIN")
                for k in (int(rng.integers(1, 8)), int(rng.integers(1, 8))):
                    cur.execute("UPDATE ax SET x = %s WHERE id = %s",
                                (floats(rng.standard_normal(COLS)), k))
                    cur.execute("UPDATE ay SET y = %s WHERE id = %s",
                                (float(rng.standard_normal()), k))
                prefixes.append(ols(*table_contents_in(cur)))
                cur.execute("COMMIT")
                time.sleep(float(rng.uniform(0, 0.05)))
            if round_ < 2:
                time.sleep(float(rng.uniform(0, 0.3)))
                p.send_signal(signal.SIGKILL)
                p.wait(30)
            else:
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and not np.allclose(
                        beta(conn, "live"), prefixes[-1], rtol=1e-9):
                    time.sleep(0.1)
                p.send_signal(signal.SIGTERM)  # a clean stop at a batch's end
                assert p.wait(30) == 0, p.stderr.read()
    finally:
        stop.set()
        t.join()
        if p.poll() is None:
            p.kill()
    assert not failures, f"{len(failures)} torn or unknown results of {len(seen)} reads"
    assert len({b.tobytes() for b in seen}) > 3  # the reader saw the results change
    np.testing.assert_allclose(beta(conn, "live"), prefixes[-1], rtol=1e-9, atol=1e-12)


def table_contents_in(cur):
    """The tables as the open transaction of ``cur`` sees them."""
    X, Y = np.zeros((ROWS, COLS)), np.zeros((ROWS, 1))
    cur.execute("SELECT id, x FROM ax")
    for k, v in cur.fetchall():
        X[k - 1] = v
    cur.execute("SELECT id, y FROM ay")
    for k, v in cur.fetchall():
        Y[k - 1] = v
    return X, Y


def test_postgres_restarts_and_linview_reconnects(tmp_path):
    from tests.pg_server import PgServer

    server = PgServer().init().start()  # its own server: this test stops it
    try:
        dsn = server.create_db("t_restart")
        conn = server.connect("t_restart")
        two_tables(conn)
        p = cli(dsn, tmp_path / "ck", "live", once=False, quiet=False)
        wait_until(conn, lambda: beta(conn, "live").size > 0)  # serving
        rng = np.random.default_rng(5)
        for round_ in range(3):
            cur = conn.cursor()
            for _ in range(5):
                k = int(rng.integers(4, ROWS + 1))
                cur.execute("INSERT INTO ax VALUES (%s, %s) ON CONFLICT (id) DO UPDATE SET "
                            "x = EXCLUDED.x", (k, floats(rng.standard_normal(COLS))))
                time.sleep(0.02)
            if round_ < 2:
                time.sleep(float(rng.uniform(0, 0.5)))
                server.stop("immediate")  # a crash of PostgreSQL
                server.start()
                conn = server.connect("t_restart")
        final = ols(*table_contents(conn))
        wait_until(conn, lambda: np.allclose(beta(conn, "live"), final, rtol=1e-9))
        p.send_signal(signal.SIGTERM)
        rc, err = p.wait(30), p.stderr.read()
        assert rc == 0, err
        assert err.count("connecting again") >= 2, err
        np.testing.assert_allclose(beta(conn, "live"), final, rtol=1e-9, atol=1e-12)
        conn.close()
    finally:
        server.destroy()


def wait_until(conn, check, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except psycopg2.Error:
            conn.rollback()
        time.sleep(0.1)


def progress_row(conn):
    cur = conn.cursor()
    cur.execute("SELECT updated FROM live._linview_progress")
    return cur.fetchone()
