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
    assert rc == 2 and "table public.links" in err
    assert "link 31 -> 1: node 31 out of range 1..30" in err
    assert "transaction at LSN" in err  # a program for 30 nodes does not grow
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


PROD = """function C = prod2(A, B)
  %#linview dims A(n,m) B(m,p)
  %#linview dynamic A B
  C = A * B;
end
"""


def test_entries_layout(pg_server, tmp_path):
    """``--entries A=TABLE(I,J,VALUE)``: sparse entries, one table per input."""
    (tmp_path / "prod2.m").write_text(PROD)
    dsn = pg_server.create_db("t_entries")
    conn = pg_server.connect("t_entries")
    cur = conn.cursor()
    rng = np.random.default_rng(9)
    dense = {}
    for name, (m, n) in {"a": (6, 5), "b": (5, 6)}.items():
        cur.execute(f"CREATE TABLE {name} (i int, j int, v float8, PRIMARY KEY (i, j))")
        cells = {(int(i), int(j)) for i, j in zip(rng.integers(1, m + 1, 12),
                                                  rng.integers(1, n + 1, 12), strict=True)}
        cur.executemany(f"INSERT INTO {name} VALUES (%s, %s, %s)",
                        [(i, j, float(rng.standard_normal())) for i, j in sorted(cells)])
        dense[name] = (m, n)

    def contents():
        out = {}
        for name, (m, n) in dense.items():
            M = np.zeros((m, n))
            cur.execute(f"SELECT i, j, v FROM {name}")
            for i, j, v in cur.fetchall():
                M[i - 1, j - 1] = v
            out[name] = M
        return out["a"] @ out["b"]

    def result():
        cur.execute('SELECT value FROM linview."C" ORDER BY row')  # the output's case
        return np.array([v for (v,) in cur.fetchall()])

    argv = ["run", str(tmp_path / "prod2.m"), "--source", dsn, "--entries", "A=a(i,j,v)",
            "--entries", "B=b(i,j,v)", "--shapes", "A=6x5,B=5x6", "--checkpoint",
            str(tmp_path / "ck"), "--once", "--quiet"]
    rc, _, err = run_cli(*argv)
    assert rc == 0, err
    np.testing.assert_allclose(result(), contents(), rtol=1e-10, atol=1e-12)
    cur.execute("BEGIN; UPDATE a SET v = v + 1 WHERE i = (SELECT min(i) FROM a); "
                "DELETE FROM b WHERE j = 2; INSERT INTO a VALUES (6, 5, 2.5) ON CONFLICT "
                "(i, j) DO UPDATE SET v = 2.5; UPDATE b SET j = 6 WHERE (i, j) = "
                "(SELECT i, j FROM b WHERE j < 6 AND (i, 6) NOT IN (SELECT i, j FROM b) "
                "LIMIT 1); COMMIT")
    cur.execute("INSERT INTO b VALUES (1, 2, 7.0) ON CONFLICT (i, j) DO UPDATE SET v = 7")
    rc, _, err = run_cli(*argv)
    assert rc == 0, err
    np.testing.assert_allclose(result(), contents(), rtol=1e-10, atol=1e-12)
    cur.execute("INSERT INTO b VALUES (2, 7, 1.0)")
    rc, _, err = run_cli(*argv, "--on-error", "skip")  # compiled for B 5x6: no column 7
    assert rc == 0, err
    cur.execute("SELECT error FROM linview._linview_rejects")
    (error,) = cur.fetchone()
    assert "table public.b" in error and "entry (2, 7): column 7 out of range 1..6" in error \
        and "transaction at LSN" in error, error
    cur.execute("UPDATE a SET v = 'NaN' WHERE i = 6 AND j = 5")
    rc, _, err = run_cli(*argv)
    assert rc == 2 and "table public.a" in err and "entry (6, 5)" in err and "NaN" in err
    conn.close()


def test_a_scalar_from_a_one_row_table(pg_server, tmp_path):
    """``--table d=params.value``: a static scalar read once; a change stops the run."""
    dsn = pg_server.create_db("t_scalar")
    conn = pg_server.connect("t_scalar")
    cur = conn.cursor()
    cur.execute("CREATE TABLE links (src int, dst int, PRIMARY KEY (src, dst))")
    cur.executemany("INSERT INTO links VALUES (%s, %s)", [(1, 2), (2, 3), (3, 1), (3, 2)])
    cur.execute("CREATE TABLE params (id int PRIMARY KEY, value float8)")
    cur.execute(f"INSERT INTO params VALUES (1, {D})")
    argv = ["run", str(EXAMPLES / "pagerank_solve.m"), "--source", dsn, "--edges",
            "M=links(src,dst)", "--table", "d=params.value", "--shapes", f"M={N}x{N},d=1x1",
            "--checkpoint", str(tmp_path / "ck"), "--once", "--quiet"]
    rc, _, err = run_cli(*argv)
    assert rc == 0, err
    cur.execute("INSERT INTO links VALUES (4, 1)")
    assert run_cli(*argv)[0] == 0
    np.testing.assert_allclose(ranks(conn), reference(conn), rtol=1e-8, atol=1e-12)
    cur.execute("UPDATE params SET value = 0.5")
    rc, _, err = run_cli(*argv)
    assert rc == 2 and "table public.params changed" in err and "not dynamic" in err
    conn.close()


def test_weighted_links(pg_server, tmp_path):
    """``--edges M=links(src,dst,w)``: weights as given (a new weight renormalises the
    column), against networkx's weighted PageRank."""
    dsn = pg_server.create_db("t_weighted")
    conn = pg_server.connect("t_weighted")
    cur = conn.cursor()
    cur.execute("CREATE TABLE links (src int, dst int, w float8, PRIMARY KEY (src, dst))")
    rng = np.random.default_rng(8)
    links = {(int(a), int(b)) for a, b in rng.integers(3, N + 1, (70, 2))}
    cur.executemany("INSERT INTO links VALUES (%s, %s, %s)",
                    [(a, b, float(rng.uniform(0.5, 3))) for a, b in sorted(links)])

    def weighted_reference():
        cur.execute("SELECT src, dst, w FROM links")
        G = nx.DiGraph()
        G.add_nodes_from(range(1, N + 1))
        G.add_weighted_edges_from(cur.fetchall())
        pr = nx.pagerank(G, alpha=D, tol=1e-14, max_iter=10_000)
        return np.array([pr[i] for i in range(1, N + 1)])

    argv = ["run", str(EXAMPLES / "pagerank_solve.m"), "--source", dsn, "--edges",
            "M=links(src,dst,w)", "--param", f"d={D}", "--shapes", f"M={N}x{N},d=1x1",
            "--checkpoint", str(tmp_path / "ck"), "--once", "--quiet"]
    rc, _, err = run_cli(*argv)
    assert rc == 0, err
    np.testing.assert_allclose(ranks(conn), weighted_reference(), rtol=1e-8, atol=1e-12)
    cur.execute("UPDATE links SET w = w * 4 WHERE src < 10")
    cur.execute("INSERT INTO links VALUES (1, 2, 0.25) ON CONFLICT DO NOTHING")
    cur.execute("DELETE FROM links WHERE src = 12")
    rc, _, err = run_cli(*argv)
    assert rc == 0, err
    np.testing.assert_allclose(ranks(conn), weighted_reference(), rtol=1e-8, atol=1e-12)
    cur.execute("UPDATE links SET w = -1 WHERE src = 13")
    rc, _, err = run_cli(*argv)
    assert rc == 2 and "link weight -1 is not positive" in err
    conn.close()
