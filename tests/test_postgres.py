"""``linview run --source postgresql://``: loads, results, bad data, schema changes, quoting
and passwords, against a real PostgreSQL server (the ``pg_server`` fixture; no mocks)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from tests.conftest import EXAMPLES
from tests.pg_server import PASSWORD, PASSWORD_USER, floats, run_cli

psycopg2 = pytest.importorskip("psycopg2")

OLS = str(EXAMPLES / "ols.m")


def ols(X, Y):
    return np.linalg.solve(X.T @ X, X.T @ Y)


@pytest.fixture
def db(pg_server, request):
    """A fresh database named after the test, with obs(id, x float8[], y float8) holding a
    random 20x3 X and Y; yields (dsn, connection, X, Y)."""
    name = "t_" + request.node.name.lower().replace("[", "_").replace("]", "")[:50]
    dsn = pg_server.create_db(name)
    conn = pg_server.connect(name)
    rng = np.random.default_rng(len(name))
    X, Y = rng.standard_normal((20, 3)), rng.standard_normal((20, 1))
    cur = conn.cursor()
    cur.execute("CREATE TABLE obs (id int PRIMARY KEY, x float8[], y float8)")
    for i in range(20):
        cur.execute("INSERT INTO obs VALUES (%s, %s, %s)", (i + 1, floats(X[i]), float(Y[i, 0])))
    yield dsn, conn, X, Y
    conn.close()


def run(dsn, *extra):
    return run_cli("run", OLS, "--source", dsn, "--table", "X=obs.x", "--table", "Y=obs.y",
                   "--once", "--quiet", *extra)


def beta(conn, schema="linview"):
    cur = conn.cursor()
    cur.execute(f'SELECT row, value FROM "{schema}".beta ORDER BY row')
    rows = cur.fetchall()
    assert [r for r, _ in rows] == list(range(1, len(rows) + 1))
    return np.array([v for _, v in rows])


def progress(conn, schema="linview"):
    cur = conn.cursor()
    cur.execute(f'SELECT lsn::text, batches FROM "{schema}"._linview_progress')
    return cur.fetchone()


def test_load_then_changes_match_a_fresh_computation(db, tmp_path):
    dsn, conn, X, Y = db
    ck = str(tmp_path / "ck")
    rc, out, err = run(dsn, "--checkpoint", ck)
    assert rc == 0, err
    np.testing.assert_allclose(beta(conn), ols(X, Y), rtol=1e-10, atol=1e-12)
    cur = conn.cursor()
    cur.execute("UPDATE obs SET x = %s WHERE id = 3", ([1.0, 2.0, 3.0],))
    X[2] = [1, 2, 3]
    cur.execute("DELETE FROM obs WHERE id = 5")
    X[4], Y[4] = 0, 0
    cur.execute("INSERT INTO obs VALUES (5, %s, 4.5)", ([0.5, -1.0, 2.0],))
    X[4], Y[4] = [0.5, -1, 2], 4.5
    cur.execute("BEGIN; UPDATE obs SET y = 7 WHERE id = 1; UPDATE obs SET y = 8 WHERE id = 2; "
                "COMMIT")
    Y[0], Y[1] = 7, 8
    cur.execute("BEGIN; UPDATE obs SET y = 100 WHERE id = 9; ROLLBACK")  # leaves no trace
    cur.execute("UPDATE obs SET id = 20 WHERE id = 20")  # a no-op update
    rc, out, err = run(dsn, "--checkpoint", ck)
    assert rc == 0, err
    np.testing.assert_allclose(beta(conn), ols(X, Y), rtol=1e-9, atol=1e-12)
    cur.execute("SELECT pg_current_wal_lsn()::text, confirmed_flush_lsn::text "
                "FROM pg_replication_slots")
    _, acked = cur.fetchone()
    assert progress(conn)[0] == acked  # acknowledged exactly what the results hold


def test_without_checkpoint_each_start_loads_again(db):
    dsn, conn, X, Y = db
    assert run(dsn)[0] == 0
    conn.cursor().execute("UPDATE obs SET y = y + 1 WHERE id <= 4")
    Y[:4] += 1
    rc, _, err = run(dsn, "--sink", "other")
    assert rc == 0, err
    np.testing.assert_allclose(beta(conn, "other"), ols(X, Y), rtol=1e-10)
    assert run(dsn)[0] == 0
    np.testing.assert_allclose(beta(conn), ols(X, Y), rtol=1e-10)


BAD = [  # (column x, column y) of row 7 as SQL, what the error says
    ("ARRAY[1, NULL, 3]::float8[]", "1", "NULL element"),
    ("NULL", "1", "NULL value"),
    ("ARRAY[1, 'NaN', 3]::float8[]", "1", "non-finite value NaN"),
    ("ARRAY[1, 2, 3]::float8[]", "'Infinity'", "non-finite value Infinity"),
    ("ARRAY[1, 2]::float8[]", "1", "2 values where the input has 3 columns"),
]


@pytest.mark.parametrize("x,y,says", BAD, ids=[b[2].split()[0] + str(i)
                                              for i, b in enumerate(BAD)])
def test_bad_values_stop_with_table_key_and_lsn(db, tmp_path, x, y, says):
    dsn, conn, X, Y = db
    ck = str(tmp_path / "ck")
    assert run(dsn, "--checkpoint", ck)[0] == 0
    before = progress(conn)
    cur = conn.cursor()
    cur.execute(f"UPDATE obs SET x = {x}, y = {y} WHERE id = 7")
    rc, _, err = run(dsn, "--checkpoint", ck)
    assert rc == 2
    assert "table public.obs, key 7, transaction at LSN" in err and says in err, err
    assert progress(conn) == before  # nothing of that transaction applied
    np.testing.assert_allclose(beta(conn), ols(X, Y), rtol=1e-10)
    rc, _, err = run(dsn, "--checkpoint", ck, "--on-error", "skip")
    assert rc == 0, err
    cur.execute("SELECT error FROM linview._linview_rejects")
    (error,), = cur.fetchall()
    assert "key 7" in error and says in error
    np.testing.assert_allclose(beta(conn), ols(X, Y), rtol=1e-10)  # skipped whole


def test_key_out_of_range_and_delete_of_a_missing_row(db, tmp_path):
    """A program compiled for 20 rows (--shapes) does not grow (tests/test_postgres_grow.py:
    one whose rows are a size of their own does)."""
    dsn, conn, X, Y = db
    ck = str(tmp_path / "ck")
    fixed = ("--shapes", "X=20x3,Y=20x1")
    assert run(dsn, "--checkpoint", ck, *fixed)[0] == 0
    cur = conn.cursor()
    cur.execute("INSERT INTO obs VALUES (21, '{1,1,1}', 1)")
    rc, _, err = run(dsn, "--checkpoint", ck, *fixed)
    assert rc == 2 and "key 21" in err and "key out of range: input X has rows 1..20" in err
    assert run(dsn, "--checkpoint", ck, *fixed, "--on-error", "skip")[0] == 0
    cur.execute("DELETE FROM obs WHERE id = 21")  # linview never had row 21
    rc, _, err = run(dsn, "--checkpoint", ck, *fixed)
    assert rc == 2 and "key 21" in err
    assert "key out of range" in err or "does not have" in err
    assert run(dsn, "--checkpoint", ck, *fixed, "--on-error", "skip")[0] == 0
    np.testing.assert_allclose(beta(conn), ols(X, Y), rtol=1e-10)


def test_delete_of_a_row_linview_skipped(db, tmp_path):
    dsn, conn, X, Y = db
    ck = str(tmp_path / "ck")
    cur = conn.cursor()
    cur.execute("DELETE FROM obs WHERE id = 6")
    X[5], Y[5] = 0, 0
    assert run(dsn, "--checkpoint", ck)[0] == 0
    cur.execute("INSERT INTO obs VALUES (6, '{1,NaN,1}', 1)")  # skipped: linview lacks row 6
    assert run(dsn, "--checkpoint", ck, "--on-error", "skip")[0] == 0
    cur.execute("DELETE FROM obs WHERE id = 6")
    rc, _, err = run(dsn, "--checkpoint", ck)
    assert rc == 2, err
    assert "table public.obs, key 6" in err and "delete of a row that linview does not have" \
        in err
    np.testing.assert_allclose(beta(conn), ols(X, Y), rtol=1e-10)


def test_non_numeric_value_in_a_text_column(pg_server, tmp_path):
    dsn = pg_server.create_db("t_text")
    conn = pg_server.connect("t_text")
    cur = conn.cursor()
    cur.execute("CREATE TABLE obs (id int PRIMARY KEY, x text, y text)")
    for i in range(1, 7):
        cur.execute("INSERT INTO obs VALUES (%s, %s, %s)", (i, f"{{{i},{i * i % 5},1}}", str(i)))
    ck = str(tmp_path / "ck")
    assert run(dsn, "--checkpoint", ck)[0] == 0
    cur.execute("UPDATE obs SET y = 'abc' WHERE id = 2")
    rc, _, err = run(dsn, "--checkpoint", ck)
    assert rc == 2 and "key 2" in err and "non-numeric value 'abc'" in err, err
    conn.close()


@pytest.mark.parametrize("change,after,says", [
    # seen in the catalog when linview starts again
    ("ALTER TABLE obs ADD COLUMN z int", "", "ALTER TABLE public.obs since checkpoint"),
    ("ALTER TABLE obs ALTER COLUMN y TYPE numeric", "", "ALTER TABLE public.obs since"),
    # seen in the stream (the catalog is back as it was when linview starts)
    ("ALTER TABLE obs ADD COLUMN z int", "ALTER TABLE obs DROP COLUMN z",
     "ALTER TABLE public.obs (transaction at LSN"),
    ("TRUNCATE obs", "", "TRUNCATE of table public.obs"),
])
def test_schema_changes_stop_the_run(db, tmp_path, change, after, says):
    dsn, conn, X, Y = db
    ck = str(tmp_path / "ck")
    assert run(dsn, "--checkpoint", ck)[0] == 0
    cur = conn.cursor()
    cur.execute(change)
    cur.execute("INSERT INTO obs (id, x, y) VALUES (30, '{1,2,3}', 1)")
    if after:
        cur.execute(after)
    before = progress(conn)
    rc, _, err = run(dsn, "--checkpoint", ck)
    assert rc == 2 and says in err and "--restart" in err, err
    assert progress(conn) == before


def test_identifiers_are_quoted(pg_server, tmp_path):
    dsn = pg_server.create_db("t_quoting")
    conn = pg_server.connect("t_quoting")
    cur = conn.cursor()
    evil = 'x"; DROP TABLE t; --'
    cur.execute("CREATE TABLE t (a int)")
    cur.execute('CREATE SCHEMA "we ird"')
    cur.execute(f'CREATE TABLE "we ird"."{evil.replace(chr(34), chr(34) * 2)}" '
                '(id int PRIMARY KEY, "va lue" float8[], "Y" float8)')
    rng = np.random.default_rng(1)
    X, Y = rng.standard_normal((8, 2)), rng.standard_normal((8, 1))
    for i in range(8):
        cur.execute(f'INSERT INTO "we ird"."{evil.replace(chr(34), chr(34) * 2)}" VALUES '
                    '(%s, %s, %s)', (i + 1, floats(X[i]), float(Y[i, 0])))
    sink = 'out"; DROP TABLE t; --'
    rc, _, err = run_cli("run", OLS, "--source", dsn, "--table", f"X=we ird.{evil}.va lue",
                         "--table", f"Y=we ird.{evil}.Y", "--sink", sink, "--once",
                         "--quiet")
    assert rc == 0, err
    cur.execute("SELECT count(*) FROM t")  # still there
    np.testing.assert_allclose(beta(conn, sink.replace('"', '""')), ols(X, Y), rtol=1e-10)
    conn.close()


def test_no_password_in_any_output(pg_server, tmp_path):
    pg_server.create_db("t_password")
    conn = pg_server.connect("t_password")
    cur = conn.cursor()
    cur.execute(f"DROP ROLE IF EXISTS {PASSWORD_USER}")
    cur.execute(f"CREATE ROLE {PASSWORD_USER} LOGIN REPLICATION PASSWORD %s", (PASSWORD,))
    cur.execute(f"GRANT CREATE ON DATABASE t_password TO {PASSWORD_USER}")
    cur.execute("CREATE TABLE obs (id int PRIMARY KEY, x float8[], y float8)")
    cur.execute(f"ALTER TABLE obs OWNER TO {PASSWORD_USER}")
    for i in range(1, 6):
        cur.execute("INSERT INTO obs VALUES (%s, %s, %s)", (i, [float(i), 1.0], float(i % 3)))
    url = f"postgresql://{PASSWORD_USER}:{PASSWORD}@127.0.0.1:{pg_server.port}/t_password"
    rc, out, err = run(url, "--checkpoint", str(tmp_path / "ck"))
    assert rc == 0, err.replace(PASSWORD, "***")
    assert PASSWORD not in out + err
    wrong = url.replace(PASSWORD, PASSWORD + "-wrong")
    rc, out, err = run(wrong)
    assert rc == 2 and "password authentication failed" in err
    assert PASSWORD not in out + err
    rc, out, err = run(url.replace("t_password", "no_such_db"))
    assert rc == 2 and PASSWORD not in out + err
    conn.close()


def test_readme_example(pg_server, tmp_path):
    """The README's example: its SQL, its command (against the test server), its output."""
    import re
    import shlex

    from tests.conftest import ROOT

    text = (ROOT / "README.md").read_text()
    section = text[text.index("### Live views over PostgreSQL"):]
    sql_block, bash_block, output = re.findall(r"```\w*\n(.*?)```", section, re.S)[:3]
    dsn = pg_server.create_db("shop")
    conn = pg_server.connect("shop")
    conn.cursor().execute(sql_block)
    command = bash_block.split("\npsql")[0].replace("\\\n", " ")
    argv = shlex.split(command)
    assert argv[:2] == ["linview", "run"]
    swap = {"postgresql://me@localhost:5432/shop": dsn, "ck": str(tmp_path / "ck"),
            "examples/ols.m": OLS}
    argv = [swap.get(a, a) for a in argv[1:]]
    rc, _, err = run_cli(*argv, "--quiet")
    assert rc == 0, err
    cur = conn.cursor()
    cur.execute("SELECT row, value::text FROM linview.beta ORDER BY row")
    shown = [tuple(c.strip() for c in line.split("|")) for line in output.splitlines()[2:]]
    got = [(str(r), v) for r, v in cur.fetchall()]
    assert got == shown, got
    conn.close()


def test_demo_db(pg_server, capsys):
    """``linview demo --db``: its own server, a writer, the result checked against a fresh
    computation (exit 0 only within 1e-8)."""
    from linview.app.postgres.demo import demo_db

    assert demo_db(n=5, seconds=1.5, rate=20) == 0
    out = capsys.readouterr().out
    assert "linview.beta = a fresh computation from the final table within" in out


def test_python_api_source(db, tmp_path):
    import linview
    from linview.app.postgres.api import PostgresSource

    dsn, conn, X, Y = db
    src = PostgresSource(dsn, tables={"X": "obs.x", "Y": "obs.y"},
                         checkpoint=str(tmp_path / "ck"))
    inputs = src.inputs()
    np.testing.assert_array_equal(inputs["X"], X)
    np.testing.assert_array_equal(inputs["Y"], Y)
    prog = linview.compile_file(OLS)
    views = prog.load(**inputs)
    np.testing.assert_allclose(views.outputs["beta"], ols(X, Y), rtol=1e-10)
    conn.cursor().execute("UPDATE obs SET y = 3 WHERE id = 2")
    Y[1] = 3
    stats = src.run(prog, once=True)
    assert stats["lsn"] == progress(conn)[0]
    np.testing.assert_allclose(beta(conn), ols(X, Y), rtol=1e-10)


def test_a_quiet_source_still_moves_the_slot_on(db, monkeypatch):
    """Changes to other tables only: the slot's confirmed position still advances (no
    write-ahead log piling up behind it), with an empty batch."""
    import threading

    import linview
    from linview.app.postgres import runner
    from linview.app.postgres.tables import TableInput

    dsn, conn, X, Y = db
    monkeypatch.setattr(runner, "IDLE_ADVANCE", 0.3)
    run = runner.PostgresRun(linview.compile_file(OLS), dsn=dsn, tables=[
        TableInput("X", "public", "obs", "x"), TableInput("Y", "public", "obs", "y")],
        warn=lambda m: None)
    t = threading.Thread(target=run.serve, kwargs={"once": False})
    t.start()
    try:
        cur = conn.cursor()
        cur.execute("CREATE TABLE other (a int)")
        cur.execute("INSERT INTO other SELECT generate_series(1, 1000)")
        cur.execute("SELECT pg_current_wal_lsn()")
        (target,) = cur.fetchone()
        cur.execute("SELECT confirmed_flush_lsn >= %s FROM pg_replication_slots", (target,))
        deadline = time.monotonic() + 30
        while not cur.fetchone()[0] and time.monotonic() < deadline:
            time.sleep(0.2)
            cur.execute("SELECT confirmed_flush_lsn >= %s FROM pg_replication_slots",
                        (target,))
        cur.execute("SELECT confirmed_flush_lsn >= %s FROM pg_replication_slots", (target,))
        assert cur.fetchone()[0]
    finally:
        run.stop()
        t.join(30)
    np.testing.assert_allclose(beta(conn), ols(X, Y), rtol=1e-10)


def test_command_line_mistakes():
    rc, _, err = run_cli("run", OLS)
    assert rc == 2 and "needs --updates (or --source postgresql://...)" in err
    rc, _, err = run_cli("run", OLS, "--source", "postgresql://u@h:1/d", "--updates", "x")
    assert rc == 2 and "drop --updates" in err
    rc, _, err = run_cli("run", OLS, "--source", "postgresql://u@h:1/d")
    assert rc == 2 and "at least one --table" in err
    rc, _, err = run_cli("run", OLS, "--source", "postgresql://u@h:1/d", "--table", "X=x")
    assert rc == 2 and "bad --table 'X=x'" in err
    rc, _, err = run_cli("run", OLS, "--source", "postgresql://u@h:1/d", "--edges", "M=l(a)")
    assert rc == 2 and "bad --edges 'M=l(a)'" in err
