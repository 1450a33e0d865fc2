"""``--edges M=TABLE(SRC,DST)``: PageRank over a table of links, kept fresh from the
replication stream, against networkx on the final table (a real server, ``pg_server``)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import EXAMPLES
from tests.pg_server import run_cli

psycopg2 = pytest.importorskip("psycopg2")
nx = pytest.importorskip("networkx")

N, D = 30, 0.85


def run(dsn, ck, *extra):
    return run_cli("run", str(EXAMPLES / "pagerank_solve.m"), "--source", dsn, "--edges",
                   "M=links(src,dst)", "--param", f"d={D}", "--shapes", f"M={N}x{N},d=1x1",
                   "--checkpoint", str(ck), "--once", "--quiet", *extra)


def reference(conn) -> np.ndarray:
    cur = conn.cursor()
    cur.execute("SELECT src, dst FROM links")
    G = nx.DiGraph()
    G.add_nodes_from(range(1, N + 1))
    G.add_edges_from(cur.fetchall())
    pr = nx.pagerank(G, alpha=D, tol=1e-14, max_iter=10_000)
    return np.array([pr[i] for i in range(1, N + 1)])


def ranks(conn) -> np.ndarray:
    cur = conn.cursor()
    cur.execute("SELECT value[1] FROM linview.r ORDER BY row")
    return np.array([v for (v,) in cur.fetchall()])


def test_pagerank_over_a_links_table(pg_server, tmp_path):
    dsn = pg_server.create_db("t_edges")
    conn = pg_server.connect("t_edges")
    cur = conn.cursor()
    cur.execute("CREATE TABLE links (src int, dst int, PRIMARY KEY (src, dst))")
    rng = np.random.default_rng(4)
    links = {(int(a), int(b)) for a, b in rng.integers(3, N + 1, (80, 2))}  # 1, 2 dangling
    cur.executemany("INSERT INTO links VALUES (%s, %s)", sorted(links))
    ck = tmp_path / "ck"
    rc, _, err = run(dsn, ck)
    assert rc == 0, err
    np.testing.assert_allclose(ranks(conn), reference(conn), rtol=1e-8, atol=1e-12)
    for t in range(12):
        cur.execute("BEGIN")
        for _ in range(int(rng.integers(1, 4))):
            a, b = (int(x) for x in rng.integers(1, N + 1, 2))
            cur.execute("DELETE FROM links WHERE src = %s AND dst = %s", (a, b))
            if cur.rowcount == 0:
                cur.execute("INSERT INTO links VALUES (%s, %s)", (a, b))
        if t % 4 == 3:
            cur.execute("UPDATE links SET dst = dst % 30 + 1 WHERE src = (SELECT min(src) "
                        "FROM links) AND (src, dst % 30 + 1) NOT IN (SELECT * FROM links)")
        cur.execute("ROLLBACK" if t % 5 == 4 else "COMMIT")
        if t == 5:
            assert run(dsn, ck)[0] == 0  # a resume in between
    rc, _, err = run(dsn, ck)
    assert rc == 0, err
    np.testing.assert_allclose(ranks(conn), reference(conn), rtol=1e-8, atol=1e-12)
    cur.execute("INSERT INTO links VALUES (31, 1)")
    rc, _, err = run(dsn, ck)
    assert rc == 2 and "table public.links" in err and "node 31 out of range 1..30" in err
    conn.close()


def test_edges_need_the_link_in_the_replica_identity(pg_server, tmp_path):
    dsn = pg_server.create_db("t_edges_ident")
    conn = pg_server.connect("t_edges_ident")
    cur = conn.cursor()
    cur.execute("CREATE TABLE links (id int PRIMARY KEY, src int, dst int)")
    cur.execute("INSERT INTO links VALUES (1, 1, 2), (2, 2, 1)")
    rc, _, err = run(dsn, tmp_path / "ck")
    assert rc == 2 and "would not carry the old link" in err and "REPLICA IDENTITY FULL" in err
    cur.execute("ALTER TABLE links REPLICA IDENTITY FULL")
    assert run(dsn, tmp_path / "ck")[0] == 0
    cur.execute("UPDATE links SET dst = 3 WHERE id = 1")
    rc, _, err = run(dsn, tmp_path / "ck")
    assert rc == 0, err
    np.testing.assert_allclose(ranks(conn), reference(conn), rtol=1e-8, atol=1e-12)
    conn.close()
