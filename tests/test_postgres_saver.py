"""Periodic checkpoints of a PostgreSQL run written by a forked process
(``linview/app/postgres/saver.py``): the run's results and its resumes equal a fresh
computation, the state put in place is the one at the batch it was begun at, and the two
logs of a checkpoint in flight are joined before a resume whatever the point of a crash.
A real server (``pg_server``); the crash drills of ``tests/test_postgres_stream.py`` run
with background checkpoints too."""

from __future__ import annotations

import numpy as np
import pytest

import linview
from linview import statefile
from linview.app import wal
from linview.app.postgres import runner, saver
from linview.app.postgres.sink import read_results
from linview.app.postgres.tables import TableInput
from tests.conftest import EXAMPLES
from tests.pg_server import floats, obs_table

psycopg2 = pytest.importorskip("psycopg2")

OLS = linview.compile_file(EXAMPLES / "ols.m")


def _run(dsn, ck, **kw):
    return runner.PostgresRun(OLS, dsn=dsn, tables=[TableInput("X", "public", "obs", "x"),
                                                    TableInput("Y", "public", "obs", "y")],
                              shapes={"X": (12, 3), "Y": (12, 1)}, warn=lambda m: None,
                              checkpoint=str(ck), **kw)


def _fresh(conn):
    cur = conn.cursor()
    cur.execute("SELECT id, x, y FROM obs")
    X, Y = np.zeros((12, 3)), np.zeros((12, 1))
    for i, x, y in cur.fetchall():
        X[i - 1], Y[i - 1] = x, y
    return np.linalg.solve(X.T @ X, X.T @ Y)


def _commit(conn, rng, n):
    cur = conn.cursor()
    for _ in range(n):
        k = int(rng.integers(1, 13))
        cur.execute("INSERT INTO obs VALUES (%s, %s, %s) ON CONFLICT (id) DO UPDATE SET "
                    "x = EXCLUDED.x, y = EXCLUDED.y",
                    (k, floats(rng.standard_normal(3)), float(rng.standard_normal())))


def _loaded(pg_server, db, ck):
    """A table of 12 observations, its initial load checkpointed in ``ck``."""
    dsn = pg_server.create_db(db)
    conn = pg_server.connect(db)
    rng = obs_table(conn, 12, 3, seed=11)
    _run(dsn, ck).close()
    return dsn, conn, rng


def test_checkpoints_in_the_background_and_a_resume_from_them(pg_server, tmp_path):
    ck = tmp_path / "ck"
    dsn, conn, rng = _loaded(pg_server, "t_saver", ck)
    _commit(conn, rng, 30)
    run = _run(dsn, ck, checkpoint_every=2, batch_rows=1)
    assert run.saver.background
    stats = run.serve(once=True)
    assert run.saver.saved >= 3, run.saver.saved  # several, each put in place
    np.testing.assert_allclose(read_results(conn, "linview", "beta"), _fresh(conn),
                               rtol=1e-9)
    assert not (ck / saver.PREV).exists() and not (ck / saver.BG).exists()
    assert statefile.read(ck / "state.npz")[0]["extra"]["batch"] == stats["batch"]
    _commit(conn, rng, 10)  # a resume from the last one goes on exactly
    run = _run(dsn, ck, checkpoint_every=3, batch_rows=2)
    run.serve(once=True)
    np.testing.assert_allclose(read_results(conn, "linview", "beta"), _fresh(conn),
                               rtol=1e-9)
    conn.close()


def test_a_stuck_child_is_stopped_and_the_checkpoint_saved_in_line(pg_server, tmp_path,
                                                                   monkeypatch):
    """A child that never finishes (here: it sleeps) is killed once it has run
    ``STUCK_S``, with a warning, and the checkpoint is saved in line: the run neither
    skips checkpoints for ever while its log grows nor hangs at its end."""
    import os
    import time

    ck = tmp_path / "ck"
    dsn, conn, rng = _loaded(pg_server, "t_stuck", ck)
    _commit(conn, rng, 12)
    warned = []
    run = _run(dsn, ck, checkpoint_every=2, batch_rows=1)
    run.warn = warned.append
    monkeypatch.setattr(saver, "STUCK_S", 0.3)
    save, children = run.stream._save, []

    def stuck(path=None):
        if path is not None:  # the child's save: never done
            time.sleep(3600)
        return save(path)

    run.stream._save = stuck
    start = saver.Saver.start

    def start_and_note(self):
        start(self)
        if self.pid is not None:
            children.append(self.pid)

    monkeypatch.setattr(saver.Saver, "start", start_and_note)
    stats = run.serve(once=True)
    assert children and any("still running after" in w for w in warned), warned
    for pid in children:  # every child stopped and reaped
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
    assert not (ck / saver.PREV).exists() and not (ck / saver.BG).exists()
    assert statefile.read(ck / "state.npz")[0]["extra"]["batch"] == stats["batch"]
    np.testing.assert_allclose(read_results(conn, "linview", "beta"), _fresh(conn),
                               rtol=1e-9)
    conn.close()


def _log(path, batches):
    w = wal.Writer(path, 0)
    for b in batches:
        w.append({"batch": b, "first": 10 * (b - 1), "count": 10, "chain": "",
                  "records": [], "where": []})
    w.close()


@pytest.mark.parametrize("state", ["in-flight", "merged-before-a-crash", "no-new-entries",
                                   "none-in-flight"])
def test_the_logs_of_a_checkpoint_in_flight_are_joined_once(tmp_path, state):
    """Crash states: the old log renamed and a new one begun (``in-flight``, or no entry
    in the new one yet), or a merge that renamed the joined log in place and crashed
    before removing the old one; the joined log holds every batch once, in order."""
    if state != "none-in-flight":
        _log(tmp_path / saver.PREV, [4, 5, 6])
    if state == "in-flight":
        _log(tmp_path / "wal.log", [7, 8])
    elif state == "merged-before-a-crash":
        _log(tmp_path / "wal.log", [4, 5, 6, 7, 8])
    elif state == "none-in-flight":
        _log(tmp_path / "wal.log", [4, 5])
    (tmp_path / saver.BG).write_bytes(b"a save that did not finish")
    saver.merge_logs(tmp_path)
    want = {"in-flight": [4, 5, 6, 7, 8], "merged-before-a-crash": [4, 5, 6, 7, 8],
            "no-new-entries": [4, 5, 6], "none-in-flight": [4, 5]}[state]
    assert [e["batch"] for e in wal.scan(tmp_path / "wal.log").entries] == want
    assert not (tmp_path / saver.PREV).exists() and not (tmp_path / saver.BG).exists()


def test_spark_views_are_saved_in_line():
    """A child must not use the JVM gateway's socket: a program compiled for Spark (even
    through the Python API, without load options) checkpoints in line."""
    from types import SimpleNamespace

    spark = linview.compile_file(EXAMPLES / "ols.m", backend="spark")
    assert not saver.Saver(SimpleNamespace(prog=spark, load_options=None)).background
    assert saver.Saver(SimpleNamespace(prog=OLS, load_options=None)).background
    assert not saver.Saver(SimpleNamespace(prog=OLS, load_options={"spark": None})).background
