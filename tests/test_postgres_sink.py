"""The result sink's binary COPY (exact float8 values, any subset of rows, NaN and Inf,
one and many columns; few rows by DELETE and COPY, many through the staging table) against a
real PostgreSQL server, concurrent readers (one statement, and a REPEATABLE READ snapshot
held across the sink's commits) that must never see a torn or missing result, and
:class:`Staged`, the set of keys one transaction sees, against a plain set (Hypothesis)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linview.app.postgres.keys import Staged
from linview.app.postgres.sink import STAGED_FRACTION, Sink, read_results

psycopg2 = pytest.importorskip("psycopg2")


@pytest.fixture
def sink(pg_server):
    pg_server.create_db("t_sink")
    conn = pg_server.connect("t_sink")
    conn.autocommit = False
    s = Sink(conn, "res", "slot1")
    s.ensure(["out", "wide"])
    reader = pg_server.connect("t_sink")
    yield s, reader
    reader.close()
    conn.close()


def _read(reader, name):
    M = read_results(reader, "res", name)
    reader.commit()
    return M


def test_binary_copy_writes_exact_values_and_only_changed_rows(sink):
    s, reader = sink
    rng = np.random.default_rng(5)
    out = rng.standard_normal((300, 1)) * 10.0 ** rng.integers(-300, 300, (300, 1))
    wide = rng.standard_normal((7, 4))
    wide[2, 1], wide[3, 0], wide[4, 3] = np.nan, np.inf, -np.inf
    for batch in range(1, 6):
        s.write({"out": out, "wide": wide}, lsn=100 * batch, batches=batch)
        got, got_wide = _read(reader, "out"), _read(reader, "wide")
        assert got.tobytes() == out.tobytes()  # bit for bit, not within a tolerance
        np.testing.assert_array_equal(got_wide, wide)  # NaN where NaN, Inf where Inf
        assert s.progress() == (100 * batch, batch)
        out = out.copy()
        if batch % 2:  # some rows change (DELETE ... ANY + COPY), or every row
            idx = rng.choice(300, size=int(rng.integers(1, 300)), replace=False)
            out[idx] = rng.standard_normal((len(idx), 1))
        else:
            out = out + 1e-17 * (1 + np.abs(out))
        wide = wide.copy()
        wide[batch % 7] = rng.standard_normal(4)


def staging_table(s) -> bool:
    with s.conn.cursor() as cur:
        cur.execute("SELECT to_regclass('pg_temp._linview_stage') IS NOT NULL")
        there = cur.fetchone()[0]
    s.conn.commit()
    return there


def test_few_rows_by_delete_many_through_the_stage_several_outputs_in_one_transaction(sink):
    """Both paths, bit for bit (-0.0 after 0.0 is a change; a NaN that stays is not), and
    two outputs staged in one transaction (the stage emptied between them)."""
    s, reader = sink
    n = 1000
    rng = np.random.default_rng(9)
    out, wide = np.zeros((n, 1)), rng.standard_normal((n, 4))
    wide[5, 2] = np.nan
    s.write({"out": out, "wide": wide}, lsn=1, batches=1)
    few = max(1, int(STAGED_FRACTION * n) - 1)
    for batch in range(2, 9):
        out, wide = out.copy(), wide.copy()
        k = few if batch < 5 else int(rng.integers(STAGED_FRACTION * n, n + 1))
        out[rng.choice(n, size=k, replace=False)] = -0.0 if batch == 2 else batch
        wide[rng.choice(n, size=k, replace=False)] = rng.standard_normal(4)
        s.write({"out": out, "wide": wide}, lsn=batch, batches=batch)
        assert staging_table(s) == (batch >= 5)  # the path taken: few rows, then many
        assert _read(reader, "out").tobytes() == out.tobytes()
        assert _read(reader, "wide").tobytes() == wide.tobytes()
        assert s.progress() == (batch, batch)


def test_readers_never_see_a_torn_or_missing_result(sink, pg_server):
    """A writer alternates batches that change a few rows, many, or all; readers check
    each result against the batch its progress row names: in one statement, and in a
    REPEATABLE READ transaction whose snapshot stays while the sink commits (what a
    fresh table swapped in by RENAME fails: it reads that table empty)."""
    s, _ = sink
    n, batches = 4000, 40
    rng = np.random.default_rng(4)
    out = rng.integers(0, 1000, (n, 2)).astype(float)
    expected = {1: (out.size, float(out.sum()))}  # values, their sum
    s.write({"out": out}, lsn=1, batches=1)
    stop, seen, bad, stale = threading.Event(), [], [], []
    check = ("SELECT (SELECT batches FROM res._linview_progress WHERE slot = 'slot1'), "
             "count(*), sum(v) FROM res.out, unnest(value) v")

    def one_statement():
        rc = pg_server.connect("t_sink")
        while not stop.is_set():
            with rc.cursor() as cur:
                cur.execute(check)  # one snapshot for the whole statement
                b, rows, total = cur.fetchone()
            seen.append(b)
            if (rows, total) != expected[b]:
                bad.append(("statement", b, rows, total))
        rc.close()

    def snapshot_held():
        rc, now = pg_server.connect("t_sink"), pg_server.connect("t_sink")
        rc.autocommit = False
        while not stop.is_set():
            with rc.cursor() as cur:
                cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                cur.execute("SELECT batches FROM res._linview_progress")  # the snapshot
                (b,) = cur.fetchone()
                time.sleep(0.02)  # the sink commits meanwhile
                cur.execute("SELECT count(*), sum(v) FROM res.out, unnest(value) v")
                rows, total = cur.fetchone()
            rc.rollback()
            with now.cursor() as cur:
                cur.execute("SELECT batches FROM res._linview_progress")
                stale.append(cur.fetchone()[0] > b)
            if (rows, total) != expected[b]:
                bad.append(("snapshot", b, rows, total))
        rc.close()
        now.close()

    threads = [threading.Thread(target=one_statement), threading.Thread(target=snapshot_held)]
    for t in threads:
        t.start()
    try:
        for b in range(2, batches + 1):
            out = out.copy()
            k = [1, 3, int(n * 0.3), n][b % 4]  # DELETE and COPY, or the stage
            idx = rng.choice(n, size=k, replace=False)
            out[idx] = rng.integers(0, 1000, (k, 2))
            expected[b] = (out.size, float(out.sum()))
            s.write({"out": out}, lsn=b, batches=b)
            time.sleep(0.005)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not bad, bad[:5]
    assert len(set(seen)) > 5 and sum(stale) > 3, (len(set(seen)), sum(stale))
    assert staging_table(s)


def test_commit_waits_for_the_log_on_disk_and_a_failed_fsync_commits_nothing(sink):
    """``durable`` (the log's fsync) runs while the statements go; the results and the
    progress row must not be visible before it returned, and nothing of the batch may
    commit when it fails."""
    import errno

    s, reader = sink
    out = np.arange(400.0).reshape(400, 1)
    s.write({"out": out}, lsn=1, batches=1)
    seen_during = []

    def slow_sync():
        time.sleep(0.3)  # the statements are sent meanwhile; COMMIT must wait
        with reader.cursor() as cur:
            cur.execute("SELECT batches FROM res._linview_progress")
            seen_during.append(cur.fetchone()[0])
        reader.commit()
        seen_during.append(_read(reader, "out").tobytes() == out.tobytes())

    for many in (False, True):  # few rows (DELETE and COPY), then the staged path
        out = out.copy()
        out[: 300 if many else 1] += 1.0
        b = s.progress()[1] + 1
        before = _read(reader, "out")
        s.write({"out": out}, lsn=b, batches=b, durable=slow_sync)
        assert seen_during == [b - 1, False]  # old progress, old rows, during the sync
        assert s.progress() == (b, b) and _read(reader, "out").tobytes() == out.tobytes()
        seen_during.clear()
        assert not (before == out).all()

    def full_disk():
        raise OSError(errno.ENOSPC, "No space left on device")

    for many in (False, True):
        new = out.copy()
        new[: 300 if many else 1] += 1.0
        with pytest.raises(OSError):
            s.write({"out": new}, lsn=10, batches=10, durable=full_disk)
        assert s.progress() == (b, b)  # nothing of the failed batch committed
        assert _read(reader, "out").tobytes() == out.tobytes()
    s.write({"out": new}, lsn=10, batches=10)  # the next write rewrites the table
    assert _read(reader, "out").tobytes() == new.tobytes() and s.progress() == (10, 10)


def test_a_result_that_changes_shape_is_rewritten(sink):
    s, reader = sink
    s.write({"out": np.arange(6.0).reshape(6, 1)}, lsn=1, batches=1)
    s.write({"out": np.arange(4.0).reshape(4, 1) * 2.5}, lsn=2, batches=2)
    np.testing.assert_array_equal(_read(reader, "out"), np.arange(4.0).reshape(4, 1) * 2.5)


ops = st.lists(st.tuples(st.sampled_from(["add", "discard", "in"]), st.integers(0, 12)),
               max_size=40)


@settings(max_examples=200, deadline=None)
@given(base=st.sets(st.integers(0, 12)), txs=st.lists(st.tuples(ops, st.booleans()),
                                                     max_size=5))
def test_staged_is_a_set_until_applied(base, txs):
    """Each transaction's ``in`` answers as a copied set's would; only an applied
    (accepted) transaction changes the keys, a rejected one leaves no trace."""
    keys = set(base)
    for steps, accepted in txs:
        staged, copy = Staged(keys), set(keys)
        for op, k in steps:
            if op == "in":
                assert (k in staged) == (k in copy)
            else:
                getattr(staged, op)(k)
                getattr(copy, op)(k)
        before = set(keys)
        if accepted:
            staged.apply()
            assert keys == copy
        else:
            assert keys == before


def test_a_crash_inside_the_staged_write_resumes_bit_for_bit(pg_server, tmp_path):
    """kill -9 (``os._exit``) with a batch's rows in the staging table and the result
    table not yet updated, again and again: each time the table still holds whole
    results of a committed prefix, and the resumed run ends equal to an uninterrupted
    one, bit for bit, at the same LSN."""
    from tests.test_postgres_stream import beta, cli, ols, table_contents, two_tables

    dsn = pg_server.create_db("t_sink_crash")
    conn = pg_server.connect("t_sink_crash")
    two_tables(conn)
    for schema in ("whole", "crashed"):
        p = cli(dsn, tmp_path / schema, schema)
        assert p.wait(60) == 0, p.stderr.read()
    from linview.app.postgres.pgoutput import parse_lsn

    cur = conn.cursor()

    def lsn(query="SELECT pg_current_wal_insert_lsn()::text"):
        cur.execute(query)
        return parse_lsn(cur.fetchone()[0])

    prefixes, after = [ols(*table_contents(conn))], [lsn()]  # after[i]: past commit i
    rng = np.random.default_rng(8)
    for _ in range(6):  # every transaction moves both rows of beta: the staged path
        cur.execute("BEGIN")
        for k in rng.choice(np.arange(4, 8), size=2, replace=False):
            cur.execute("UPDATE ax SET x = %s WHERE id = %s",
                        ([float(v) for v in rng.standard_normal(2)], int(k)))
            cur.execute("UPDATE ay SET y = %s WHERE id = %s", (float(rng.standard_normal()),
                                                              int(k)))
        cur.execute("COMMIT")
        prefixes.append(ols(*table_contents(conn)))
        after.append(lsn())
    small = ["--batch-rows", "4"]
    p = cli(dsn, tmp_path / "whole", "whole", extra=small)
    assert p.wait(60) == 0, p.stderr.read()
    crashes = 0
    for attempt in range(40):
        env = {"LINVIEW_TEST_FAULTS": f"out.staged@{1 + attempt % 2}=exit"}
        p = cli(dsn, tmp_path / "crashed", "crashed", env=env, extra=small)
        rc = p.wait(60)
        # the results of exactly the prefix that the progress row names
        at = lsn("SELECT lsn::text FROM crashed._linview_progress")
        i = next(i for i, end in enumerate(after) if at <= end)
        np.testing.assert_allclose(beta(conn, "crashed"), prefixes[i], rtol=1e-9)
        if rc == 0:
            break
        assert rc == 86, p.stderr.read()
        crashes += 1
    assert crashes >= 2
    assert beta(conn, "whole").tobytes() == beta(conn, "crashed").tobytes()
    np.testing.assert_allclose(beta(conn, "whole"), prefixes[-1], rtol=1e-9, atol=1e-12)
    cur.execute("SELECT slot, lsn FROM whole._linview_progress UNION ALL "
                "SELECT slot, lsn FROM crashed._linview_progress ORDER BY slot")
    (_, a), (_, b) = cur.fetchall()
    assert a == b
    conn.close()
