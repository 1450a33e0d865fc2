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
from tests.conftest import EXAMPLES
from tests.pg_server import floats, obs_table, run_cli

psycopg2 = pytest.importorskip("psycopg2")
pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

ROWS, COLS = 12, 3


@pytest.fixture(scope="module")
def spark():
    from linview.backends.spark import runtime as srt

    session = srt.local_session("local[2]")
    yield session
    session.stop()


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
