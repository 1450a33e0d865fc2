"""``linview run --source postgresql://... --backend spark``: the slot read on the driver as
one stream, the views distributed where large (here all of them: ``distribute_min``),
against a fresh computation from the final table.  A real server and local Spark."""

from __future__ import annotations

import numpy as np
import pytest

import linview
from linview.app.postgres import runner
from linview.app.postgres.sink import read_results
from linview.app.postgres.tables import TableInput
from linview.errors import BackendError
from tests.conftest import EXAMPLES
from tests.pg_server import floats, obs_table, run_cli

psycopg2 = pytest.importorskip("psycopg2")
pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

ROWS, COLS = 12, 3


def fresh(conn):
    cur = conn.cursor()
    cur.execute("SELECT id, x, y FROM obs")
    X, Y = np.zeros((ROWS, COLS)), np.zeros((ROWS, 1))
    for k, x, y in cur.fetchall():
        X[k - 1], Y[k - 1] = x, y
    return np.linalg.solve(X.T @ X, X.T @ Y)


def changes(cur, rng):
    for i in (2, 5, 9):
        cur.execute("UPDATE obs SET x = %s, y = %s WHERE id = %s",
                    (floats(rng.standard_normal(COLS)), float(rng.standard_normal()), i))
    cur.execute("BEGIN; DELETE FROM obs WHERE id = 11; UPDATE obs SET y = 2 WHERE id = 1; "
                "COMMIT")
    cur.execute("INSERT INTO obs VALUES (11, %s, 0.5)", (floats(rng.standard_normal(COLS)),))


def test_ols_on_spark_over_a_table(pg_server, spark, tmp_path):
    dsn = pg_server.create_db("t_spark")
    conn = pg_server.connect("t_spark")
    rng = obs_table(conn, ROWS, COLS, seed=4)
    cur = conn.cursor()
    prog = linview.compile_file(EXAMPLES / "ols.m", backend="spark")
    run = runner.PostgresRun(prog, dsn=dsn, tables=[TableInput("X", "public", "obs", "x"),
                                                    TableInput("Y", "public", "obs", "y")],
                             warn=lambda m: None, checkpoint=str(tmp_path / "ck"),
                             load_options={"spark": spark, "distribute_min": 2,
                                           "partitions": 2})
    assert "X" in run.views.distributed()  # the input's rows are read by one Spark job
    changes(cur, rng)
    run.serve(once=True)
    np.testing.assert_allclose(read_results(conn, "linview", "beta"), fresh(conn),
                               rtol=1e-9)
    # the command line resumes the checkpoint on Spark (the session of this process)
    changes(cur, rng)
    rc, out, err = run_cli("run", str(EXAMPLES / "ols.m"), "--backend", "spark", "--source",
                           dsn, "--table", "X=obs.x", "--table", "Y=obs.y", "--checkpoint",
                           str(tmp_path / "ck"), "--once", "--quiet",
                           "--reevaluate-above", "0")
    assert rc == 0, err
    assert '"reevaluated_batches": 0' in out  # NumPy's choice; Spark runs the triggers
    np.testing.assert_allclose(read_results(conn, "linview", "beta"), fresh(conn),
                               rtol=1e-9)
    conn.close()


def fresh_grown(conn):
    """beta from the final table, its rows up to the largest key (rows without one zero)."""
    cur = conn.cursor()
    cur.execute("SELECT id, x, y FROM obs")
    got = cur.fetchall()
    n = max(k for k, _, _ in got)
    X, Y = np.zeros((n, COLS)), np.zeros((n, 1))
    for k, x, y in got:
        X[k - 1], Y[k - 1] = x, y
    return np.linalg.solve(X.T @ X, X.T @ Y)


def test_inserts_past_the_rows_grow_x_and_y_on_spark(pg_server, spark, tmp_path):
    """Keys past m (12) grow X and Y together on Spark as on NumPy (to the key or twice
    the rows), distributed views collected, padded and loaded again; a resume from the
    grown checkpoint continues."""
    dsn = pg_server.create_db("t_spark_grow")
    conn = pg_server.connect("t_spark_grow")
    rng = obs_table(conn, ROWS, COLS, seed=7)
    cur = conn.cursor()
    prog = linview.compile_file(EXAMPLES / "ols.m", backend="spark")
    opts = {"spark": spark, "distribute_min": 2, "partitions": 2}

    def start():
        return runner.PostgresRun(prog, dsn=dsn, tables=[TableInput("X", "public", "obs", "x"),
                                                         TableInput("Y", "public", "obs", "y")],
                                  warn=lambda m: None, checkpoint=str(tmp_path / "ck"),
                                  load_options=opts)

    def insert(k):
        cur.execute("INSERT INTO obs VALUES (%s, %s, %s)",
                    (k, floats(rng.standard_normal(COLS)), float(rng.standard_normal())))

    run = start()
    assert "X" in run.views.distributed()
    cur.execute("BEGIN")
    insert(13)  # past 12: 24 rows
    cur.execute("UPDATE obs SET y = 3 WHERE id = 2; COMMIT")
    cur.execute("BEGIN")
    insert(20)
    cur.execute("DELETE FROM obs WHERE id = 4; COMMIT")
    insert(50)  # past 24 and twice it: 50 rows
    stats = run.serve(once=True)
    assert stats["grown"] == {"X": 50, "Y": 50}, stats
    assert "X" in run.views.distributed()  # distributed again after growing
    np.testing.assert_allclose(read_results(conn, "linview", "beta"), fresh_grown(conn),
                               rtol=1e-9, atol=1e-9)
    cur.execute("BEGIN")
    insert(51)  # past 50 in the resumed run: 100 rows
    cur.execute("UPDATE obs SET y = -1 WHERE id = 13; COMMIT")
    run = start()
    assert run.stream.shapes["X"] == (50, COLS)  # the grown state came back
    stats = run.serve(once=True)
    assert stats["grown"] == {"X": 100, "Y": 100}, stats
    np.testing.assert_allclose(read_results(conn, "linview", "beta"), fresh_grown(conn),
                               rtol=1e-9, atol=1e-9)
    conn.close()


def test_growing_past_the_driver_limit_is_refused_on_spark(pg_server, spark, tmp_path):
    """Growing collects a distributed input on the driver: past ``driver_max_elements``
    the run stops with a clear error before touching its checkpoint, and a run with a
    higher limit resumes from it."""
    dsn = pg_server.create_db("t_spark_nogrow")
    conn = pg_server.connect("t_spark_nogrow")
    rng = obs_table(conn, ROWS, COLS, seed=8)
    cur = conn.cursor()
    prog = linview.compile_file(EXAMPLES / "ols.m", backend="spark")

    def start(limit):
        return runner.PostgresRun(
            prog, dsn=dsn, tables=[TableInput("X", "public", "obs", "x"),
                                   TableInput("Y", "public", "obs", "y")],
            warn=lambda m: None, checkpoint=str(tmp_path / "ck"),
            load_options={"spark": spark, "distribute_min": 2, "partitions": 2,
                          "driver_max_elements": limit})

    run = start(ROWS * COLS)  # X as it is fits, X of 24 rows does not
    cur.execute("INSERT INTO obs VALUES (13, %s, 1.5)", (floats(rng.standard_normal(COLS)),))
    with pytest.raises(BackendError, match="input X cannot grow on Spark"):
        run.serve(once=True)
    run.sql.close()
    assert (tmp_path / "ck" / "state.npz").exists()  # the checkpoint as it was
    stats = start(10_000).serve(once=True)
    assert stats["grown"] == {"X": 24, "Y": 24}, stats
    np.testing.assert_allclose(read_results(conn, "linview", "beta"), fresh_grown(conn),
                               rtol=1e-9, atol=1e-9)
    conn.close()
