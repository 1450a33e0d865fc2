"""pgoutput's binary mode (values in their types' send format, no text to parse) and the
packed vectors (``{"f8": BASE64}``) that the PostgreSQL source logs: both give the bits
that the text path gives, and bad values get the text path's errors.  A real server."""

from __future__ import annotations

import json

import numpy as np
import pytest

import linview
from linview.app.postgres import runner
from linview.app.postgres.sink import read_results
from linview.app.postgres.tables import TableInput
from linview.app.records import Record, check, pack, parse_line
from linview.errors import UpdateError
from tests.conftest import EXAMPLES
from tests.pg_server import floats

psycopg2 = pytest.importorskip("psycopg2")

OLS = linview.compile_file(EXAMPLES / "ols.m")


def _run(dsn, **kw):
    return runner.PostgresRun(OLS, dsn=dsn, tables=[TableInput("X", "public", "obs", "x"),
                                                    TableInput("Y", "public", "obs", "y")],
                              warn=lambda m: None, **kw)


# (key type, X's column type, Y's column type, binary mode expected)
TYPES = [("int", "float8[]", "float8", True), ("bigint", "float4[]", "real", False),
         ("bigint", "float8[]", "bigint", True),
         ("smallint", "float8[]", "int", True), ("int", "float8[]", "numeric", False),
         ("int", "text", "float8", False)]


@pytest.mark.parametrize("key,xt,yt,binary", TYPES, ids=[f"{t[1]}-{t[2]}" for t in TYPES])
def test_binary_and_text_modes_give_the_same_results(pg_server, key, xt, yt, binary):
    name = f"t_bin_{xt}_{yt}".replace("[]", "a")
    dsn = pg_server.create_db(name)
    conn = pg_server.connect(name)
    cur = conn.cursor()
    cur.execute(f"CREATE TABLE obs (id {key} PRIMARY KEY, x {xt}, y {yt})")
    rng = np.random.default_rng(5)
    for i in range(1, 13):
        cur.execute("INSERT INTO obs VALUES (%s, %s, %s)",
                    (i, floats(rng.standard_normal(3)), i % 5 + 0.0))
    run = _run(dsn)
    assert run.binary is binary
    for i in (2, 5, 5, 11):  # updates, one row twice, and a transaction of two rows
        cur.execute("UPDATE obs SET x = %s, y = %s WHERE id = %s",
                    (floats(rng.standard_normal(3)), i + 2.0, i))
    cur.execute("BEGIN; UPDATE obs SET y = 7 WHERE id = 1; UPDATE obs SET x = '{1,2,-0.25}'"
                " WHERE id = 3; COMMIT")
    cur.execute("DELETE FROM obs WHERE id = 4")
    run.serve(once=True)
    # the values as their text reads (a real's short decimal, as float64)
    cur.execute("SELECT id, x::text::float8[], y::text::float8 FROM obs")
    X, Y = np.zeros((12, 3)), np.zeros((12, 1))
    for k, x, y in cur.fetchall():
        X[k - 1], Y[k - 1] = x, y
    np.testing.assert_allclose(read_results(conn, "linview", "beta"),
                               np.linalg.solve(X.T @ X, X.T @ Y), rtol=1e-9)
    conn.close()


@pytest.mark.parametrize("x,says", [
    ("ARRAY[[1,2,3],[4,5,6]]::float8[]", "not a one-dimensional array"),
    ("ARRAY[1, NULL, 3]::float8[]", "NULL element"),
    ("ARRAY[1, '-Infinity', 3]::float8[]", "non-finite value -Infinity"),
    ("'{}'::float8[]", "0 values where the input has 3 columns"),
])
def test_bad_binary_values_say_what_the_text_path_says(pg_server, x, says):
    dsn = pg_server.create_db("t_bin_bad")
    conn = pg_server.connect("t_bin_bad")
    cur = conn.cursor()
    cur.execute("CREATE TABLE obs (id int PRIMARY KEY, x float8[], y float8)")
    for i in range(1, 6):
        cur.execute("INSERT INTO obs VALUES (%s, %s, %s)", (i, [1.0, i, i * i], 1.0 * i))
    run = _run(dsn)
    assert run.binary
    cur.execute(f"UPDATE obs SET x = {x} WHERE id = 4")
    with pytest.raises(UpdateError, match="table public.obs, key 4, transaction at LSN"
                       ) as e:
        run.serve(once=True)
    assert says in e.value.message
    run.close()
    conn.close()


def test_packed_vectors_read_back_bit_for_bit():
    v = np.array([0.1, -2.5e-300, 1e300, -0.0, 3.0])
    d = {"input": "X", "row": 2, "add": pack(v)}
    rec = parse_line(json.dumps(d), "log:1")
    (op,) = check(rec, {"X": (4, 5)})
    assert op.values.tobytes() == v.tobytes()
    assert check(Record({"input": "X", "row": 2, "add": v.tolist()}, "x"),
                 {"X": (4, 5)})[0].values.tobytes() == v.tobytes()


@pytest.mark.parametrize("value,says", [
    ({"f8": "not base64!"}, "f8 is not the base64"),
    ({"f8": pack([1.0, 2.0])["f8"]}, "has 2 values, expected 3"),
    (pack([1.0, np.nan, 2.0]), "add[2] is nan"),
    ({"f8": "", "x": 1}, "must be a list of numbers or"),
])
def test_bad_packed_vectors(value, says):
    with pytest.raises(UpdateError, match="log:1") as e:
        check(Record({"input": "X", "row": 1, "add": value}, "log:1"), {"X": (2, 3)})
    assert says in e.value.message


def test_batches_that_reevaluate_equal_a_fresh_computation(pg_server):
    """``reevaluate_above``: the batches of more than 4 rank-1 changes (a row of X and of Y
    in a transaction of 3 or 8 rows) re-evaluate every view from the changed inputs, the
    others (1 row) run the triggers; the results are those of the final table either
    way."""
    dsn = pg_server.create_db("t_reeval")
    conn = pg_server.connect("t_reeval")
    cur = conn.cursor()
    cur.execute("CREATE TABLE obs (id int PRIMARY KEY, x float8[], y float8)")
    rng = np.random.default_rng(9)
    for i in range(1, 31):
        cur.execute("INSERT INTO obs VALUES (%s, %s, %s)",
                    (i, floats(rng.standard_normal(4)), float(rng.standard_normal())))
    run = _run(dsn, reevaluate_above=4, window=0.0, batch_rows=3)  # a batch per transaction
    for t in range(12):
        k = [1, 3, 8][t % 3]
        cur.execute("BEGIN")
        for i in rng.choice(np.arange(1, 31), size=k, replace=False):
            cur.execute("UPDATE obs SET x = %s, y = %s WHERE id = %s",
                        (floats(rng.standard_normal(4)), float(rng.standard_normal()), int(i)))
        cur.execute("COMMIT")
    stats = run.serve(once=True)
    assert 0 < stats["reevaluated_batches"] < stats["batches"], stats
    cur.execute("SELECT id, x, y FROM obs")
    X, Y = np.zeros((30, 4)), np.zeros((30, 1))
    for k, x, y in cur.fetchall():
        X[k - 1], Y[k - 1] = x, y
    np.testing.assert_allclose(read_results(conn, "linview", "beta"),
                               np.linalg.solve(X.T @ X, X.T @ Y), rtol=1e-9)
    conn.close()
