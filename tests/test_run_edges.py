"""``linview run`` on a PageRank solve program with edge records (1-based, as every record),
a sparse link matrix from a ``scipy.sparse.save_npz`` file, checked against networkx on a
graph built from the same records independently of linview."""

import json

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sps

from linview.app.cli import main
from linview.solve.stochastic import StochasticMatrix

PAGERANK = "examples/pagerank_solve.m"
D = 0.85
N = 30


def nx_pagerank(G: nx.DiGraph) -> np.ndarray:
    pr = nx.pagerank(G, alpha=D, tol=1e-14, max_iter=10_000)
    return np.array([pr[i] for i in range(N)]).reshape(-1, 1)


@pytest.fixture
def graph(tmp_path):
    """A random simple digraph on N nodes (0 and 1 dangling), saved as the sparse
    column-stochastic M that scipy.sparse.save_npz writes; and the same graph in networkx."""
    rng = np.random.default_rng(3)
    src, dst = rng.integers(2, N, 90), rng.integers(0, N, 90)
    pairs = np.unique(np.stack([src, dst]), axis=1)
    sps.save_npz(tmp_path / "M.npz", StochasticMatrix(N, pairs[0], pairs[1]).tocsc())
    G = nx.DiGraph()
    G.add_nodes_from(range(N))
    G.add_edges_from(zip(pairs[0].tolist(), pairs[1].tolist(), strict=True))
    return tmp_path, G, rng


def edge_stream(G: nx.DiGraph, rng, batches: int) -> list[dict]:
    """Batches of random insertions and deletions, applied to ``G`` as they are made:
    the first out-link of dangling node 0 and later the deletion of its last one."""
    recs = [{"input": "M", "edge": [1, 6], "op": "insert", "batch": 0}]
    G.add_edge(0, 5)
    for b in range(1, batches + 1):
        for _ in range(3):
            a, c = (int(x) for x in rng.integers(0, N, 2))
            op = "delete" if G.has_edge(a, c) else "insert"
            G.remove_edge(a, c) if op == "delete" else G.add_edge(a, c)
            recs.append({"input": "M", "edge": [a + 1, c + 1], "op": op, "batch": b})
    recs.append({"input": "M", "edge": [1, 6], "op": "delete", "batch": batches + 1})
    G.remove_edge(0, 5)
    return recs


def run(tmp, recs, *extra) -> int:
    (tmp / "edges.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return main(["run", PAGERANK, "--input", f"M={tmp / 'M.npz'}", "--input", f"d={D}",
                 "--updates", str(tmp / "edges.jsonl"), "--out", str(tmp / "out"), *extra])


def test_edge_records_keep_pagerank_equal_to_networkx(graph, capsys):
    tmp, G, rng = graph
    recs = edge_stream(G, rng, batches=8)
    assert run(tmp, recs, "--checkpoint", str(tmp / "ck")) == 0, capsys.readouterr().err
    stats = json.loads(capsys.readouterr().out)
    assert stats["offset"] == len(recs) and stats["batches"] == 10
    r = np.load(tmp / "out" / "latest.npz")["r"]
    np.testing.assert_allclose(r, nx_pagerank(G), atol=1e-9)
    assert abs(r.sum() - 1) < 1e-9


def test_bad_edge_records_name_file_and_line_and_change_nothing(graph, capsys):
    tmp, G, rng = graph
    before = nx_pagerank(G)
    missing = next((a, c) for a in range(2, N) for c in range(N) if not G.has_edge(a, c))
    present = next(iter(G.edges))
    cases = [
        ({"input": "M", "edge": [0, 3], "op": "insert"}, "edge source 0 is out of range 1..30"),
        ({"input": "M", "edge": [2.0, 3], "op": "insert"}, "must be an integer"),
        ({"input": "M", "edge": [2, 3]}, 'needs "op": "insert" or "delete"'),
        ({"input": "M", "edge": [2, 3], "op": "insert", "weight": float("nan")},
         "not valid JSON"),
        ({"input": "M", "edge": [missing[0] + 1, missing[1] + 1], "op": "delete"},
         f"edge {missing[0] + 1} -> {missing[1] + 1} is not in M"),
        ({"input": "M", "edge": [present[0] + 1, present[1] + 1], "op": "insert"},
         "is already in M"),
    ]
    for bad, message in cases:  # the bad record after a good one of its batch
        good = {"input": "M", "edge": [1, 2], "op": "insert", "batch": 7}
        assert run(tmp, [{**bad, "batch": 7}, good] if "JSON" in message
                   else [good, {**bad, "batch": 7}]) != 0
        err = capsys.readouterr().err
        line = 1 if "JSON" in message else 2  # an unreadable line has no batch id to share
        assert f"edges.jsonl:{line}" in err and message in err, err
        assert not (tmp / "out" / "latest.npz").exists()  # nothing of the batch applied
    # a later record of the same batch that fails undoes the batch's edges (the value
    # record below breaks the column sums of M, which a stochastic input refuses)
    u = [0.0] * N
    u[4] = 1.0
    recs = [{"input": "M", "edge": [1, 2], "op": "insert", "batch": 1},
            {"input": "M", "u": u, "v": [1.0] * N, "batch": 1},
            {"input": "M", "edge": [1, 3], "op": "insert", "batch": 2}]
    assert run(tmp, recs, "--checkpoint", str(tmp / "ck2")) != 0
    assert "stochastic" in capsys.readouterr().err
    recs = [{"input": "M", "edge": [1, 3], "op": "insert"}]
    assert run(tmp, recs, "--checkpoint", str(tmp / "ck2"), "--restart") == 0
    G.add_edge(0, 2)
    np.testing.assert_allclose(np.load(tmp / "out" / "latest.npz")["r"], nx_pagerank(G),
                               atol=1e-9)
    assert not np.allclose(before, nx_pagerank(G))


def test_edge_records_on_a_program_without_a_stochastic_input_say_what_to_declare(tmp_path,
                                                                                    capsys):
    (tmp_path / "p.m").write_text("function y = f(M, x)\n  y = M * x;\nend\n")
    np.save(tmp_path / "M.npy", np.eye(4))
    np.save(tmp_path / "x.npy", np.ones((4, 1)))
    (tmp_path / "e.jsonl").write_text(json.dumps({"input": "M", "edge": [1, 2],
                                                  "op": "insert"}) + "\n")
    assert main(["run", str(tmp_path / "p.m"), "--input", f"M={tmp_path / 'M.npy'}",
                 "--input", f"x={tmp_path / 'x.npy'}", "--updates",
                 str(tmp_path / "e.jsonl")]) != 0
    err = capsys.readouterr().err
    assert "e.jsonl:1" in err and "%#linview stochastic M" in err
