"""INSERT of a key past an input's rows grows the input where the program allows it (its
row count a size of its own), DELETE zeroes the row; against a fresh computation from the
final table, across a resume from the checkpoint.  A real server."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import linview
from linview.app.postgres import grow, runner
from linview.app.postgres.sink import read_results
from linview.app.postgres.tables import TableInput
from tests.conftest import EXAMPLES
from tests.pg_server import floats, run_cli

psycopg2 = pytest.importorskip("psycopg2")

OLS = linview.compile_file(EXAMPLES / "ols.m")
COLS = 3


def _run(dsn, ck, **kw):
    return runner.PostgresRun(OLS, dsn=dsn, tables=[TableInput("X", "public", "ax", "x"),
                                                    TableInput("Y", "public", "ay", "y")],
                              warn=lambda m: None, checkpoint=str(ck), **kw)


def fresh(conn):
    """beta from the final tables (rows without a key are zero, whatever their count)."""
    cur = conn.cursor()
    cur.execute("SELECT id, x FROM ax")
    xs = dict(cur.fetchall())
    cur.execute("SELECT id, y FROM ay")
    ys = dict(cur.fetchall())
    n = max([*xs, *ys])
    X, Y = np.zeros((n, COLS)), np.zeros((n, 1))
    for k, v in xs.items():
        X[k - 1] = v
    for k, v in ys.items():
        Y[k - 1] = v
    return np.linalg.solve(X.T @ X, X.T @ Y)


def upsert(cur, rng, keys, table="both"):
    for k in keys:
        if table in ("both", "ax"):
            cur.execute("INSERT INTO ax VALUES (%s, %s) ON CONFLICT (id) DO UPDATE SET x = "
                        "EXCLUDED.x", (int(k), floats(rng.standard_normal(COLS))))
        if table in ("both", "ay"):
            cur.execute("INSERT INTO ay VALUES (%s, %s) ON CONFLICT (id) DO UPDATE SET y = "
                        "EXCLUDED.y", (int(k), float(rng.standard_normal())))


def test_inserts_past_the_size_grow_x_and_y_together(pg_server, tmp_path):
    """X (table ax) and Y (table ay) share their rows (m): a key past m in either grows
    both, to the key or twice the rows; deletes zero rows; a resume continues."""
    dsn = pg_server.create_db("t_grow")
    conn = pg_server.connect("t_grow")
    cur = conn.cursor()
    cur.execute("CREATE TABLE ax (id int PRIMARY KEY, x float8[])")
    cur.execute("CREATE TABLE ay (id int PRIMARY KEY, y float8)")
    rng = np.random.default_rng(11)
    upsert(cur, rng, range(1, 9))
    run = _run(dsn, tmp_path / "ck")
    assert run.stream.shapes == {"X": (8, COLS), "Y": (8, 1)}
    cur.execute("BEGIN")
    upsert(cur, rng, [3, 9, 10])  # 9 and 10 past the size: 16 rows
    cur.execute("DELETE FROM ax WHERE id = 2")
    cur.execute("COMMIT")
    upsert(cur, rng, [30], table="ay")  # Y alone: X grows with it (30 > 2 * 16)
    upsert(cur, rng, [12, 5])
    stats = run.serve(once=True)
    assert stats["grown"] == {"X": 30, "Y": 30}, stats
    np.testing.assert_allclose(read_results(conn, "linview", "beta"), fresh(conn), rtol=1e-9)
    cur.execute("BEGIN")
    upsert(cur, rng, [31, 7])  # past 30 again: 60 rows, in the resumed run
    cur.execute("DELETE FROM ay WHERE id = 30")
    cur.execute("COMMIT")
    run = _run(dsn, tmp_path / "ck")
    assert run.stream.shapes["X"] == (30, COLS)  # the grown state came back
    stats = run.serve(once=True)
    assert stats["grown"] == {"X": 60, "Y": 60}, stats
    np.testing.assert_allclose(read_results(conn, "linview", "beta"), fresh(conn), rtol=1e-9)
    # a crash between removing the old state and saving the grown one: a fresh load
    (tmp_path / "ck" / "state.npz").unlink()
    upsert(cur, rng, [70, 1])
    stats = _run(dsn, tmp_path / "ck").serve(once=True)
    np.testing.assert_allclose(read_results(conn, "linview", "beta"), fresh(conn), rtol=1e-9)
    conn.close()


def test_a_crash_after_growing_before_the_batch_is_applied(pg_server, tmp_path):
    """The grown checkpoint holds the rows before the batch: the batch comes again from
    the slot and is applied to the grown views."""
    from linview import faults

    dsn = pg_server.create_db("t_grow_crash")
    conn = pg_server.connect("t_grow_crash")
    cur = conn.cursor()
    cur.execute("CREATE TABLE ax (id int PRIMARY KEY, x float8[])")
    cur.execute("CREATE TABLE ay (id int PRIMARY KEY, y float8)")
    rng = np.random.default_rng(5)
    upsert(cur, rng, range(1, 7))
    run = _run(dsn, tmp_path / "ck")
    cur.execute("BEGIN")
    upsert(cur, rng, [2, 9])  # 9 past the 6 rows
    cur.execute("COMMIT")

    def crash(name):
        if name == "batch.logged":
            raise faults.InjectedFault(name)

    with faults.hooked(crash), pytest.raises(faults.InjectedFault):
        run.serve(once=True)
    run = _run(dsn, tmp_path / "ck")
    assert run.stream.shapes["X"] == (12, COLS)  # the grown state, before the batch
    stats = run.serve(once=True)
    assert stats["applied"] > 0
    np.testing.assert_allclose(read_results(conn, "linview", "beta"), fresh(conn), rtol=1e-9)
    conn.close()


def test_a_program_for_fixed_shapes_does_not_grow(pg_server, tmp_path):
    dsn = pg_server.create_db("t_nogrow")
    conn = pg_server.connect("t_nogrow")
    cur = conn.cursor()
    cur.execute("CREATE TABLE ax (id int PRIMARY KEY, x float8[])")
    cur.execute("CREATE TABLE ay (id int PRIMARY KEY, y float8)")
    upsert(cur, np.random.default_rng(2), range(1, 9))
    args = ["run", str(EXAMPLES / "ols.m"), "--source", dsn, "--table", "X=ax.x", "--table",
            "Y=ay.y", "--shapes", "X=10x3,Y=10x1", "--checkpoint", str(tmp_path / "ck"),
            "--once", "--quiet"]
    assert run_cli(*args)[0] == 0
    upsert(cur, np.random.default_rng(3), [10, 11])
    rc, _, err = run_cli(*args)
    assert rc == 2 and "key 11" in err and "key out of range: input X has rows 1..10" in err
    conn.close()


def test_which_inputs_may_grow():
    rows = dict.fromkeys(["X", "Y", "A", "b"], "rows")
    both = [("X", 0), ("Y", 0)]
    assert grow.groups(OLS.program, rows) == {("X", 0): both, ("Y", 0): both}
    assert grow.groups(OLS.program, {"X": "rows"}) == {}  # Y (rows m too) is not a table's
    square = linview.compile("function x = f(A, b)\n%#linview dynamic A b\n"
                             "x = inv(A) * b;\nend\n")
    assert grow.groups(square.program, rows) == {}  # A's rows are its columns too
    # an entries table grows along both sides, with b (rows n too) a rows table's
    n = [("A", 0), ("A", 1), ("b", 0)]
    assert grow.groups(square.program, {"A": "entries", "b": "rows"}) == dict.fromkeys(n, n)
    assert grow.groups(square.program, {"A": "entries"}) == {}  # b's n is no table's
    pr = linview.compile_file(EXAMPLES / "pagerank_solve.m")
    assert grow.groups(pr.program, {"M": "edges"}) == {("M", 0): [("M", 0), ("M", 1)],
                                                        ("M", 1): [("M", 0), ("M", 1)]}
    fixed = linview.compile_file(EXAMPLES / "pagerank_solve.m").specialize(M=(5, 5), d=(1, 1))
    assert grow.groups(fixed.program, {"M": "edges"}) == {}  # compiled for 5 nodes


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.lists(st.tuples(st.integers(1, 40), st.sampled_from(["ax", "ay", "both"]),
                                   st.booleans()), min_size=1, max_size=6),
                min_size=1, max_size=6), st.integers(0, 6))
def test_random_inserts_updates_deletes_equal_a_fresh_computation(grow_db, tmp_path_factory,
                                                                  txs, split):
    """Rows 1..3 stay (X'X stays invertible); other keys up to 40 come and go."""
    dsn, conn = grow_db
    cur = conn.cursor()
    cur.execute("TRUNCATE ax, ay")
    rng = np.random.default_rng(len(txs))
    upsert(cur, rng, range(1, 6))
    ck = tmp_path_factory.mktemp("ck")
    run = _run(dsn, ck, restart=True)
    for i, part in enumerate((txs[:split], txs[split:])):
        if i:
            run = _run(dsn, ck)  # a resume in between
        for ops in part:
            cur.execute("BEGIN")
            for key, table, delete in ops:
                if delete and key > 3:
                    for t in (("ax", "ay") if table == "both" else (table,)):
                        cur.execute(f"DELETE FROM {t} WHERE id = %s", (key,))
                elif not delete:
                    upsert(cur, rng, [key], table)
            cur.execute("COMMIT")
        run.serve(once=True)
        np.testing.assert_allclose(read_results(conn, "linview", "beta"), fresh(conn),
                                   rtol=1e-8, atol=1e-10)


@pytest.fixture(scope="module")
def grow_db(pg_server):
    dsn = pg_server.create_db("t_grow_random")
    conn = pg_server.connect("t_grow_random")
    cur = conn.cursor()
    cur.execute("CREATE TABLE ax (id int PRIMARY KEY, x float8[])")
    cur.execute("CREATE TABLE ay (id int PRIMARY KEY, y float8)")
    yield dsn, conn
    conn.close()
