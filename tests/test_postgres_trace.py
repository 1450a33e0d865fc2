"""``run --source ... --trace FILE``: one line per published micro-batch with its end LSN,
its transactions' commit times and when its phases ran; the results are those of a run
without it.  A real server (``pg_server``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import EXAMPLES
from tests.pg_server import floats, obs_table, run_cli

psycopg2 = pytest.importorskip("psycopg2")


def test_trace_has_a_line_per_batch_with_its_transactions_and_phases(pg_server, tmp_path):
    dsn = pg_server.create_db("t_trace")
    conn = pg_server.connect("t_trace")
    conn.autocommit = False
    rng = obs_table(conn, 8, 3, seed=5)
    cur = conn.cursor()
    conn.commit()
    ck, trace = tmp_path / "ck", tmp_path / "trace.jsonl"

    def run(*extra):
        rc, out, err = run_cli("run", str(EXAMPLES / "ols.m"), "--source", dsn, "--table",
                               "X=obs.x", "--table", "Y=obs.y", "--shapes", "X=8x3,Y=8x1",
                               "--checkpoint", str(ck), "--once", "--quiet", *extra)
        assert rc == 0, err
        return json.loads(out.strip().splitlines()[-1])

    run()  # the initial load
    commits = []
    for k in range(1, 6):  # five transactions, one of them rolled back
        cur.execute("UPDATE obs SET x = %s, y = %s WHERE id = %s",
                    (floats(rng.standard_normal(3)), float(rng.standard_normal()), k))
        if k == 3:
            conn.rollback()
            continue
        cur.execute("SELECT extract(epoch FROM now())::float8")  # the transaction's start
        commits.append(cur.fetchone()[0])
        conn.commit()
    stats = run("--trace", str(trace), "--batch-rows", "1", "--checkpoint-every", "2",
                "--behind-gap-ms", "0")
    lines = [json.loads(x) for x in trace.read_text().splitlines()]
    published = [x for x in lines if x["lsn"] is not None]
    assert len(published) == 4  # --batch-rows 1: one batch per committed transaction
    assert [len(x["commits"]) for x in published] == [1, 1, 1, 1]
    lsns = [x["lsn"] for x in published]
    assert lsns == sorted(set(lsns))
    cur.execute("SELECT lsn::text FROM linview._linview_progress")
    assert stats["lsn"] == cur.fetchone()[0]
    from linview.app.postgres.pgoutput import format_lsn
    assert format_lsn(lsns[-1]) == stats["lsn"]
    for x, began in zip(published, commits, strict=True):
        assert began <= x["commits"][0] <= x["visible"]  # its COMMIT, then visible
        names = [e[0] for e in x["events"]]
        assert {"read", "write", "statements", "commit"} <= set(names)
        for name, start, end in x["events"]:
            assert start <= end <= x["visible"], name
        write = [e for e in x["events"] if e[0] == "write"][-1]  # the batch's own
        commit = [e for e in x["events"] if e[0] == "commit"][-1]
        assert write[1] <= commit[1] <= commit[2] <= write[2]  # COMMIT inside the write
    every = [e[0] for x in lines for e in x["events"]]
    assert every.count("checkpoint") >= 2  # every 2 batches, and at the end
    assert "fsync" in every  # the log's fsync before the results commit
    cur.execute("SELECT id, x, y FROM obs")
    X, Y = np.zeros((8, 3)), np.zeros((8, 1))
    for i, x, y in cur.fetchall():
        X[i - 1], Y[i - 1] = x, y
    conn.commit()
    cur.execute("SELECT value FROM linview.beta ORDER BY row")
    got = np.array([v for (v,) in cur.fetchall()])
    np.testing.assert_allclose(got, np.linalg.solve(X.T @ X, X.T @ Y), rtol=1e-9)
    conn.close()


def test_a_negative_behind_gap_is_refused_before_connecting():
    rc, _, err = run_cli("run", str(EXAMPLES / "ols.m"), "--source",
                         "postgresql://nobody@127.0.0.1:1/none", "--table", "X=obs.x",
                         "--table", "Y=obs.y", "--behind-gap-ms", "-5")
    assert rc != 0 and "--behind-gap-ms" in err and "Traceback" not in err, err
