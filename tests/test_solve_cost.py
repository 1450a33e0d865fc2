"""``linview cost`` on programs with solve views: sparse storage from ``--dims nnz_M``,
the sweep cost as 2·nnz flops, and no dense n×n pricing of what is never dense."""

import json

import pytest

from linview.app.cli import main

PAGERANK = "examples/pagerank_solve.m"
PERSONAL = "examples/pagerank_personalised.m"


def cost(capsys, *args) -> tuple[int, str, str]:
    rc = main(["cost", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cost_prices_solve_views_by_their_non_zeros(capsys):
    rc, out, _ = cost(capsys, PAGERANK, "--dims", "n=100000,nnz_M=700000", "--json")
    assert rc == 0
    solve = json.loads(out)["solve"]
    (m,) = solve["inputs"]
    assert (m["input"], m["storage"], m["nnz"], m["nnz_assumed"]) == ("M", "stochastic",
                                                                      700_000, False)
    assert m["bytes"] == 12 * 700_000 + 8 * 100_001  # CSC: values, row ids, column starts
    assert m["dense_bytes"] == 8 * 100_000 ** 2
    (r,) = solve["views"]
    assert r["view"] == "r" and r["shape"] == [100_000, 1] and r["tolerance"] == 1e-10
    # a sweep multiplies M (sparse) by the iterate: 2 flops per non-zero
    assert r["sweep_flops"] == 2 * 700_000
    assert r["sweep_bytes"] == 12 * 700_000 + 24 * 100_000


def test_cost_text_says_what_is_assumed_and_refuses_nnz_of_dense_inputs(capsys):
    rc, out, _ = cost(capsys, PERSONAL, "--dims", "n=5000,p=3")
    assert rc == 0
    assert "50,000 non-zeros (assumed: 10 per column; give --dims nnz_M=...)" in out
    assert "solve view" in out and "GiB" not in out  # nothing priced as a dense n×n matrix
    rc, _, err = cost(capsys, PAGERANK, "--dims", "n=100,nnz_d=3")
    assert rc == 2 and "nnz_d: d is not a sparse or stochastic input" in err


@pytest.mark.parametrize("dims", ["n=100,nnz_M=-1", "n=100,nnz_M=1.5"])
def test_nnz_must_be_a_count(capsys, dims):
    rc, _, err = cost(capsys, PAGERANK, "--dims", dims)
    assert rc == 2 and ("nnz_M" in err or "dims" in err)


@pytest.mark.parametrize("tol,batch,verdict", [("1e-4", "1", "pays"), ("1e-3", "100", "pays"),
                                               ("1e-6", "100", "about even")])
def test_cost_predicts_whether_push_pays_at_a_tolerance(capsys, tol, batch, verdict):
    """The side of 1x measured by bench/pagerank_graph.py --table at 10⁶ nodes (43x, 4.6x
    and 1.0x): a batch's residual far under the target is local work; 120 times the target
    spreads over the graph, where push does what power iteration does."""
    rc, out, _ = cost(capsys, PAGERANK, "--dims", "n=1000000,nnz_M=9309397", "--tolerance",
                      tol, "--batch", batch, "--json")
    assert rc == 0
    pred = json.loads(out)["solve"]["views"][0]["prediction"]
    assert pred["verdict"] == verdict
    rc, out, _ = cost(capsys, PAGERANK, "--dims", "n=1000000,nnz_M=9309397", "--tolerance",
                      tol, "--batch", batch)
    assert f"maintenance {verdict}" in out
