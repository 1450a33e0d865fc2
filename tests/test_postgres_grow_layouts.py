"""Edges and entries tables grow too: an INSERT of a node past the nodes (a links table)
or of an index past a side (an entries table) grows the input to exactly that size, where
the program allows it; against a fresh computation from the final table contents (the
nodes and sides: the largest ever committed), across resumes.  A real server."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import linview
from linview.app.postgres import runner
from linview.app.postgres.edges import EdgeInput
from linview.app.postgres.entries import EntryInput
from linview.app.postgres.sink import read_results
from tests.conftest import EXAMPLES

psycopg2 = pytest.importorskip("psycopg2")
nx = pytest.importorskip("networkx")

PAGERANK = linview.compile_file(EXAMPLES / "pagerank_solve.m")
D = 0.85
PROD = linview.compile("""function C = prod2(A, B)
  %#linview dims A(n,m) B(m,p)
  %#linview dynamic A B
  C = A * B;
end
""")


def _pagerank_run(dsn, ck, **kw):
    return runner.PostgresRun(PAGERANK, dsn=dsn, edges=[EdgeInput("M", "public", "links",
                                                                  "src", "dst")],
                              params=[f"d={D}"], checkpoint=str(ck), warn=lambda m: None,
                              **kw)


def _pagerank(conn, n: int) -> np.ndarray:
    cur = conn.cursor()
    cur.execute("SELECT src, dst FROM links")
    G = nx.DiGraph()
    G.add_nodes_from(range(1, n + 1))
    G.add_edges_from(cur.fetchall())
    conn.commit()
    pr = nx.pagerank(G, alpha=D, tol=1e-14, max_iter=10_000)
    return np.array([[pr[i]] for i in range(1, n + 1)])


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.lists(st.tuples(st.integers(1, 25), st.integers(1, 25), st.booleans()),
                         min_size=1, max_size=5), min_size=1, max_size=6),
       st.integers(0, 6), st.lists(st.booleans(), min_size=6, max_size=6))
def test_links_to_new_nodes_grow_the_graph(links_db, tmp_path_factory, txs, split, rollback):
    """Nodes 1..8 at the start; links among nodes up to 25 come and go (a rolled-back
    transaction leaves no trace); the graph has as many nodes as the largest id ever
    committed, a node without links is dangling."""
    dsn, conn = links_db
    cur = conn.cursor()
    cur.execute("TRUNCATE links")
    cur.executemany("INSERT INTO links VALUES (%s, %s)", [(i, i % 8 + 1) for i in range(1, 9)])
    conn.commit()
    n = 8
    ck = tmp_path_factory.mktemp("ck")
    run = _pagerank_run(dsn, ck, restart=True)
    for part, ops_list in enumerate((txs[:split], txs[split:])):
        if part:
            run = _pagerank_run(dsn, ck)  # a resume in between
        for t, ops in enumerate(ops_list):
            cur.execute("BEGIN")
            for a, b, delete in ops:
                if delete:
                    cur.execute("DELETE FROM links WHERE src = %s AND dst = %s", (a, b))
                else:
                    cur.execute("INSERT INTO links VALUES (%s, %s) ON CONFLICT DO NOTHING",
                                (a, b))
            if rollback[t]:
                cur.execute("ROLLBACK")
                continue
            cur.execute("COMMIT")
            n = max([n, *(max(a, b) for a, b, delete in ops if not delete)])
        stats = run.serve(once=True)
        r = read_results(conn, "linview", "r")
        conn.commit()
        assert r.shape == (n, 1), (r.shape, n, stats)
        np.testing.assert_allclose(r, _pagerank(conn, n), rtol=1e-8, atol=1e-12)
        if n > 8 and part == 0:
            assert stats["grown"] == {"M": n}, stats


@pytest.fixture(scope="module")
def links_db(pg_server):
    dsn = pg_server.create_db("t_grow_links")
    conn = pg_server.connect("t_grow_links")
    conn.cursor().execute("CREATE TABLE links (src int, dst int, PRIMARY KEY (src, dst))")
    conn.commit()
    yield dsn, conn
    conn.close()


def test_entries_past_a_side_grow_that_side_of_every_input(pg_server, tmp_path):
    """C = A*B over two entries tables: A's columns and B's rows are one size (m), which
    an entry of either grows; exactly to the index, so C is the product of the final
    tables' matrices."""
    dsn = pg_server.create_db("t_grow_entries")
    conn = pg_server.connect("t_grow_entries")
    cur = conn.cursor()
    rng = np.random.default_rng(7)
    sides = {"a": [4, 3], "b": [3, 5]}
    for name, (m, n) in sides.items():
        cur.execute(f"CREATE TABLE {name} (i int, j int, v float8, PRIMARY KEY (i, j))")
        cur.executemany(f"INSERT INTO {name} VALUES (%s, %s, %s)",
                        [(i, j, float(rng.standard_normal())) for i in range(1, m + 1)
                         for j in range(1, n + 1) if (i + j) % 2 or (i, j) == (m, n)])
    conn.commit()

    def start(**kw):
        return runner.PostgresRun(PROD, dsn=dsn, entries=[EntryInput("A", "public", "a", "i",
                                                                     "j", "v"),
                                                          EntryInput("B", "public", "b", "i",
                                                                     "j", "v")],
                                  checkpoint=str(tmp_path / "ck"), warn=lambda m: None, **kw)

    def fresh():
        out = {}
        for name in sides:
            cur.execute(f"SELECT i, j, v FROM {name}")
            rows = cur.fetchall()
            M = np.zeros(sides[name])
            for i, j, v in rows:
                M[i - 1, j - 1] = v
            out[name] = M
        conn.commit()
        return out["a"] @ out["b"]

    def put(name, i, j):
        cur.execute(f"INSERT INTO {name} VALUES (%s, %s, %s) ON CONFLICT (i, j) DO UPDATE "
                    "SET v = EXCLUDED.v", (i, j, float(rng.standard_normal())))
        sides[name][0], sides[name][1] = max(sides[name][0], i), max(sides[name][1], j)

    run = start(restart=True)
    cur.execute("BEGIN")
    put("a", 6, 2)  # n: 4 -> 6
    put("b", 3, 7)  # p: 5 -> 7
    cur.execute("DELETE FROM a WHERE i = 1 AND j = 2")
    cur.execute("COMMIT")
    put("a", 2, 5)  # m: 3 -> 5, B's rows with it
    sides["b"][0] = max(sides["b"][0], sides["a"][1])
    conn.commit()
    stats = run.serve(once=True)
    assert stats["grown"] == {"A": [6, 5], "B": [5, 7]}, stats
    np.testing.assert_allclose(read_results(conn, "linview", "C"), fresh(), rtol=1e-12)
    conn.commit()
    put("b", 9, 1)  # m: 5 -> 9 from B's side, in a resumed run
    sides["a"][1] = max(sides["a"][1], sides["b"][0])
    conn.commit()
    stats = start().serve(once=True)
    assert stats["grown"] == {"A": [6, 9], "B": [9, 7]}, stats
    np.testing.assert_allclose(read_results(conn, "linview", "C"), fresh(), rtol=1e-12)
    conn.close()


def test_a_crash_after_adding_nodes_before_the_batch_is_applied(pg_server, tmp_path):
    """The grown checkpoint holds the links before the batch (and the new node count):
    the batch comes again from the slot and is applied to the grown graph."""
    from linview import faults

    dsn = pg_server.create_db("t_grow_links_crash")
    conn = pg_server.connect("t_grow_links_crash")
    cur = conn.cursor()
    cur.execute("CREATE TABLE links (src int, dst int, PRIMARY KEY (src, dst))")
    cur.executemany("INSERT INTO links VALUES (%s, %s)", [(1, 2), (2, 3), (3, 1), (4, 1)])
    conn.commit()
    run = _pagerank_run(dsn, tmp_path / "ck")
    cur.execute("INSERT INTO links VALUES (2, 7), (7, 5)")  # nodes 5..7: 7 nodes
    cur.execute("DELETE FROM links WHERE src = 4")
    conn.commit()

    def crash(name):
        if name == "batch.logged":
            raise faults.InjectedFault(name)

    with faults.hooked(crash), pytest.raises(faults.InjectedFault):
        run.serve(once=True)
    run = _pagerank_run(dsn, tmp_path / "ck")
    assert run.stream.shapes["M"] == (7, 7)  # the grown state, before the batch
    stats = run.serve(once=True)
    assert stats["applied"] > 0
    np.testing.assert_allclose(read_results(conn, "linview", "r"), _pagerank(conn, 7),
                               rtol=1e-8, atol=1e-12)
    conn.close()
