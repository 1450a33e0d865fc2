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
from tests.pg_server import floats, obs_table

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
    name = f"t_bin_bad_{says.split()[0].lower().replace('-', '_')}"  # a database and
    dsn = pg_server.create_db(name)
    conn = pg_server.connect(name)
    cur = conn.cursor()
    cur.execute("CREATE TABLE obs (id int PRIMARY KEY, x float8[], y float8)")
    for i in range(1, 6):
        cur.execute("INSERT INTO obs VALUES (%s, %s, %s)", (i, [1.0, i, i * i], 1.0 * i))
    run = _run(dsn, sink=name)  # a slot each: none still held by the last case's sender
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


def _thirty_rows(pg_server, name: str, seed: int):
    """A database ``name`` with ``obs(id, x float8[4], y)``, 30 random rows."""
    dsn = pg_server.create_db(name)
    conn = pg_server.connect(name)
    rng = obs_table(conn, 30, 4, seed=seed)
    return dsn, conn, conn.cursor(), rng


def assert_results_are_the_tables_ols(conn) -> None:
    """The result table ``linview.beta`` is OLS computed afresh from the final ``obs``."""
    cur = conn.cursor()
    cur.execute("SELECT id, x, y FROM obs")
    X, Y = np.zeros((30, 4)), np.zeros((30, 1))
    for k, x, y in cur.fetchall():
        X[k - 1], Y[k - 1] = x, y
    np.testing.assert_allclose(read_results(conn, "linview", "beta"),
                               np.linalg.solve(X.T @ X, X.T @ Y), rtol=1e-9)
    conn.close()


def test_batches_that_reevaluate_equal_a_fresh_computation(pg_server):
    """``reevaluate_above``: the batches of more than 4 rank-1 changes (a row of X and of Y
    in a transaction of 3 or 8 rows) re-evaluate every view from the changed inputs, the
    others (1 row) run the triggers; the results are those of the final table either
    way."""
    dsn, conn, cur, rng = _thirty_rows(pg_server, "t_reeval", seed=9)
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
    assert_results_are_the_tables_ols(conn)


def test_a_window_applied_in_parts_while_open_writes_its_results_once(pg_server):
    """Transactions 0.1 s apart inside a 1 s window: each is applied when it arrives (a
    part: logged and applied, results not written), and the results are written once,
    when the window closes, equal to a fresh computation from the final table."""
    import threading
    import time

    dsn, conn, cur, rng = _thirty_rows(pg_server, "t_parts", seed=4)
    run = _run(dsn, window=1.0)
    parts, writes, apply, write = [], [], run.apply, run.sink.write
    run.apply = lambda txs, changes, publish=True: (
        parts.append(len(txs)) if not publish else None, apply(txs, changes, publish))[1]
    run.sink.write = lambda outputs, lsn, batches, **kw: (writes.append(lsn),
                                                          write(outputs, lsn, batches, **kw))[1]
    server = threading.Thread(target=run.serve, args=(False,))
    server.start()
    try:
        time.sleep(0.5)
        for _ in range(4):
            cur.execute("UPDATE obs SET x = %s, y = %s WHERE id = %s",
                        (floats(rng.standard_normal(4)), float(rng.standard_normal()),
                         int(rng.integers(1, 31))))
            time.sleep(0.1)
        time.sleep(1.5)
    finally:
        run.stop()
        server.join(30)
    assert sum(parts) >= 1 and len(writes) >= 1, (parts, writes)
    assert len(writes) < 4  # the parts of a window are written together
    assert_results_are_the_tables_ols(conn)


def test_the_measured_threshold_is_fixed_once_and_kept_in_the_checkpoint(tmp_path,
                                                                         monkeypatch):
    from types import SimpleNamespace

    from linview.app.postgres import choice

    monkeypatch.delenv("LINVIEW_CALIBRATION", raising=False)  # measuring on
    views = SimpleNamespace(reevaluate_updates=lambda u: None)
    c = choice.BatchChoice(views, reeval_s=0.5, folder=tmp_path, inputs_per_row=2)
    assert not c(10_000) and c.cap(250) == 250  # nothing measured yet: the triggers
    c.measured(0.1)  # rank 10000 took 0.1 s: 1e-5 s per rank, T = 0.5 / 1e-5
    assert c.threshold == 50_000 and c.per_rank == pytest.approx(1e-5)
    assert not c(50_000) and c(50_001)
    c.measured(0.01)  # a re-evaluation, or any later batch: T stays
    c(20)
    c.measured(5.0)
    assert c.threshold == 50_000 and c.reevaluated == 1
    assert c.cap(250) == 2 * 50_000 // 2  # two re-evaluations' worth of row changes
    assert c.cap(10**9) == 10**9
    again = choice.BatchChoice(views, reeval_s=9.0, folder=tmp_path)  # a resumed run
    assert again.threshold == 50_000 and again(50_001) and not again(50_000)
    grown = choice.BatchChoice(views, reeval_s=9.0, previous=c)  # loaded again, grown
    assert grown.threshold == 50_000
    choice.forget(tmp_path)  # a fresh start measures again
    fresh = choice.BatchChoice(views, reeval_s=0.5, folder=tmp_path)
    assert fresh.threshold is None
    fresh(8)
    fresh.measured(1.0)  # below MIN_RANK: no measurement
    assert fresh.threshold is None
    monkeypatch.setenv("LINVIEW_ADAPT", "off")
    off = choice.BatchChoice(views, reeval_s=0.5)
    off(10**6)
    off.measured(1e-9)
    assert off.threshold is None and not off(10**7) and off.cap(250) == 250
    fixed = choice.BatchChoice(views, reeval_s=0.5, above=8)  # --reevaluate-above
    assert fixed(9) and not fixed(8) and fixed.cap(250) == 250
    spark = choice.BatchChoice(SimpleNamespace(reevaluate_updates=None, distributed=dict),
                               reeval_s=0.5, above=0)
    assert not spark(10**6)  # Spark runs the triggers, even with --reevaluate-above


def test_pin_puts_every_trigger_back_in_its_compiled_mode():
    """A module that its trials at load switched to the program as written is pinned
    to maintenance for a PostgreSQL run, and switches no more."""
    from linview.app.postgres.choice import pin

    rng = np.random.default_rng(1)
    views = OLS.load(X=rng.standard_normal((30, 4)), Y=rng.standard_normal((30, 1)))
    a = views.adaptation
    a.enabled, a.reeval_s = True, 1.0
    a.injected = lambda name, mode: 1.0 if mode.startswith("reeval") else 5.0
    views._load_trials()
    assert any(m.startswith("reeval") for m in a.mode.values())  # switched at load
    pin(views)
    assert not a.enabled and set(a.mode.values()) <= {"maintain"}
    switched = len(views.stats["switches"])
    for _ in range(20):
        U = np.zeros((30, 1))
        U[rng.integers(30), 0] = 1.0
        views.update("X", U, 0.1 * rng.standard_normal((4, 1)))
    assert len(views.stats["switches"]) == switched  # timed updates switch no more
    assert not views._behind  # every view maintained


def test_a_refused_batch_reevaluation_changes_nothing():
    """``views.reevaluate_updates``: X'X singular after the batch -> refused, with the
    inputs and every view as they were."""
    views = OLS.load(X=np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),
                     Y=np.array([[1.0], [2.0], [3.0]]))
    before = {n: np.array(v) for n, v in views._views.items()}
    U = np.zeros((3, 2))
    U[1, 0] = U[2, 1] = 1.0
    V = np.array([[0.0, -1.0], [-1.0, -1.0]])  # rows 2 and 3 become 0: X = [1 0; 0 0; 0 0]
    with pytest.raises(linview.errors.LinviewError):
        views.reevaluate_updates({"X": (U, V), "Y": (U[:, :1], np.array([[5.0]]))})
    assert all(np.array_equal(views._views[n], v) for n, v in before.items())
    views.reevaluate_updates({"Y": (U[:, :1], np.array([[5.0]]))})  # a good one applies
    np.testing.assert_allclose(views.outputs["beta"], np.linalg.lstsq(
        before["X"], before["Y"] + U[:, :1] * 5.0, rcond=None)[0], rtol=1e-12)
