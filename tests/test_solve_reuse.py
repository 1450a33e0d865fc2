"""Programs with solve views keep their views by key under ``reuse=``, ``store=`` and an
edited program's restore: views that do not depend on a changed input or statement come
back by key, a solve view whose A and B are unchanged is taken over (its solver built
again, warm from the kept solution, its bound certified again), sparse inputs are keyed by
their CSR arrays and never densified.  Differential: every load is checked against a fresh
load of the edited program and against the reference interpreter, before and after
updates of both inputs."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sps
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_solve_module import MIXED, mixed_inputs, reference

import linview
from linview import statefile
from linview.backends.numpy.reuse import digest
from linview.errors import StateError
from linview.solve.stochastic import StochasticMatrix

OUTPUTS = ("r", "beta", "q", "share", "total")
EDITED = MIXED.replace("[r, beta, q, share]", "[r, beta, q, share, total]").replace(
    "share = sum(r);", "share = 2 * sum(r);\n  total = sum(q) + share;")
assert EDITED != MIXED
#: the edited program's r reads another right-hand side: r is solved again, q is not
NEW_RHS = EDITED.replace("r = A \\ ((1 - d) / n * ones(n, 1));",
                         "r = A \\ ((1 - d) / n * ones(n, 1) + P(:, 1) / 100);")
assert NEW_RHS != EDITED


def agree(v, fresh, prog) -> None:
    """``v`` against a fresh load of the same program (both within their certified bounds
    of the exact solution) and against the reference interpreter."""
    ref = reference(v, prog)
    for name in OUTPUTS:
        np.testing.assert_allclose(v[name], ref[name], atol=1e-6, rtol=1e-7)
    for name in ("r", "q"):
        assert np.abs(v[name] - fresh[name]).sum(axis=0).max() <= \
            v.error_bound(name) + fresh.error_bound(name) + 1e-12
        assert np.abs(v[name] - ref[name]).sum(axis=0).max() <= v.error_bound(name) + 1e-12
    for name in ("beta", "share", "total"):
        np.testing.assert_allclose(v[name], fresh[name], rtol=1e-7, atol=1e-9)


def step(views, rng, n: int, m: int, k: int) -> tuple:
    """One update of X and one of a column of M (still substochastic), as arguments."""
    col = np.zeros(n)
    col[rng.choice(n, size=2, replace=False)] = 0.4
    j = int(rng.integers(n))
    return ((rng.standard_normal(m) * 0.1, rng.standard_normal(k)),
            (col - views["M"][:, [j]].toarray().ravel(), np.eye(n)[:, j]))


def test_an_edited_program_takes_its_views_by_key_and_its_solve_views_warm(tmp_path):
    rng = np.random.default_rng(5)
    prog = linview.compile(MIXED, name="mixed")
    edited = linview.compile(EDITED, name="mixed")
    inputs = mixed_inputs(rng)
    n, m, k = inputs["P"].shape[0], *inputs["X"].shape
    views = prog.load(**inputs, store=tmp_path / "store")  # writes its views by key
    for _ in range(2):
        x, mm = step(views, rng, n, m, k)
        views.update("X", *x)
        views.update("M", *mm)
    views.save(tmp_path / "s.npz")
    now = {nm: views[nm] for nm in views.INPUTS}
    assert "keys" in statefile.read(tmp_path / "s.npz")[0]
    prog.load(**now, store=tmp_path / "store")  # the store: the views of the new inputs
    loads = {"restore": linview.restore(tmp_path / "s.npz", program=edited),
             "reuse=views": edited.load(**now, reuse=views),
             "reuse=path": edited.load(**now, reuse=tmp_path / "s.npz"),
             "store=": edited.load(**now, store=tmp_path / "store")}
    fresh = edited.load(**now)
    for how, v in loads.items():
        rep = v.reuse_report
        assert {"r", "q", "beta"} <= set(rep.reused) and sorted(rep.warm) == ["q", "r"], how
        assert {"share", "total"} <= set(rep.recomputed), how  # changed or new
        assert "A" not in rep.reused  # a sparse value: formed again, never on offer
    for _ in range(3):
        for v in (*loads.values(), fresh):
            agree(v, fresh, edited)
        x, mm = step(fresh, rng, n, m, k)
        for v in (*loads.values(), fresh):
            v.update("X", *x)
            v.update("M", *mm)


def test_what_reads_a_changed_input_or_statement_is_computed_again():
    rng = np.random.default_rng(9)
    prog = linview.compile(MIXED, name="mixed")
    inputs = mixed_inputs(rng)
    views = prog.load(**inputs)
    other_rhs = linview.compile(NEW_RHS, name="mixed")
    v = other_rhs.load(**inputs, reuse=views)
    assert "r" in v.reuse_report.recomputed and v.reuse_report.warm == ["q"]
    agree(v, other_rhs.load(**inputs), other_rhs)
    # one link more in M: every view reading M is solved again, beta (X, y only) is kept
    edited = linview.compile(EDITED, name="mixed")
    M = inputs["M"].tolil()
    j = int(np.flatnonzero(np.asarray(M.sum(axis=0)).ravel() == 0)[0]) if \
        (np.asarray(M.sum(axis=0)).ravel() == 0).any() else 0
    M[:, j] = 0
    M[(j + 1) % M.shape[0], j] = 1.0
    changed = {**inputs, "M": M.tocsr()}
    v = edited.load(**changed, reuse=views)
    assert "beta" in v.reuse_report.reused and not v.reuse_report.warm
    assert {"r", "q"} <= set(v.reuse_report.recomputed)
    agree(v, edited.load(**changed), edited)


def test_a_solve_view_kept_at_a_looser_tolerance_is_certified_again_at_the_new_one():
    """Taking over re-drives the kept solution to the new load's tolerance; the solution
    moves, so the views reading it get new keys and are computed from it."""
    rng = np.random.default_rng(2)
    prog = linview.compile(MIXED, name="mixed")
    edited = linview.compile(EDITED, name="mixed")
    inputs = mixed_inputs(rng)
    loose = prog.load(**inputs, tolerance=1e-3)
    tight = edited.load(**inputs, tolerance=1e-10, reuse=loose)
    assert "r" in tight.reuse_report.warm and tight.error_bound("r") <= 1e-10
    assert {"share", "total"} <= set(tight.reuse_report.recomputed)
    agree(tight, edited.load(**inputs, tolerance=1e-10), edited)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**16), program=st.sampled_from([EDITED, NEW_RHS, MIXED]),
       via=st.sampled_from(["views", "file"]), updates=st.integers(0, 3))
def test_reusing_loads_match_fresh_loads_of_the_edited_program(tmp_path_factory, seed,
                                                               program, via, updates):
    rng = np.random.default_rng(seed)
    prog = linview.compile(MIXED, name="mixed")
    edited = linview.compile(program, name="mixed")
    inputs = mixed_inputs(rng)
    n, m, k = inputs["P"].shape[0], *inputs["X"].shape
    views = prog.load(**inputs)
    for _ in range(updates):
        x, mm = step(views, rng, n, m, k)
        views.update("X", *x)
        views.update("M", *mm)
    now = {nm: views[nm] for nm in views.INPUTS}
    if via == "file":
        path = tmp_path_factory.mktemp("s") / "s.npz"
        views.save(path)
        v = linview.restore(path, program=edited)
    else:
        v = edited.load(**now, reuse=views)
    fresh = edited.load(**now)
    if program != MIXED or via == "views":  # the same program's own file: restored as saved
        assert "q" in v.reuse_report.warm and "beta" in v.reuse_report.reused
    outs = OUTPUTS if program != MIXED else OUTPUTS[:4]
    for _ in range(2):
        ref = reference(v, edited)
        for name in outs:
            np.testing.assert_allclose(v[name], ref[name], atol=1e-6, rtol=1e-7)
            np.testing.assert_allclose(v[name], fresh[name], atol=1e-6, rtol=1e-7)
        x, mm = step(fresh, rng, n, m, k)
        for w in (v, fresh):
            w.update("X", *x)
            w.update("M", *mm)


def test_sparse_inputs_are_keyed_by_their_csr_arrays():
    """One digest however the matrix was built (duplicates, order, explicit zeros), another
    when one value changes, another for the same values kept as a stochastic input's
    links; a stochastic input by its normalised links."""
    rows, cols, vals = np.array([0, 2, 2, 1]), np.array([1, 0, 0, 2]), np.array([1., 2, 3, 0])
    a = sps.coo_matrix((vals, (rows, cols)), shape=(3, 3))
    b = sps.csr_matrix(([5.0, 1.0], ([2, 0], [0, 1])), shape=(3, 3))
    assert digest(a) == digest(b) == digest(b.tocsc())
    c = b.copy()
    c[0, 1] = 1.5
    assert digest(c) != digest(b)
    assert digest(sps.csr_matrix((3, 4))) != digest(sps.csr_matrix((4, 3)))
    m1 = StochasticMatrix(4, np.array([0, 0, 1]), np.array([1, 2, 3]))
    m2 = StochasticMatrix(4, np.array([0, 1, 0]), np.array([2, 3, 1]))
    assert digest(m1) == digest(m2) != digest(m1.sparse_part())
    m2.change_edges([("insert", 3, 0)])
    assert digest(m1) != digest(m2)


def test_a_reusing_load_with_a_large_sparse_input_allocates_nothing_of_n_squared(tmp_path):
    """PageRank over 20,000 nodes (n² doubles: 3.2 GB): the edited program's loads by
    reuse=, store= and restore stay far under one dense n×n matrix."""
    n = 20_000
    rng = np.random.default_rng(1)
    src, dst = rng.integers(0, n, 8 * n), rng.integers(0, n, 8 * n)
    keep = src != dst
    M = sps.csr_matrix((np.ones(int(keep.sum())), (dst[keep], src[keep])), shape=(n, n))
    M.sum_duplicates()
    M = sps.csr_matrix(M.multiply(1 / np.maximum(np.asarray(M.sum(axis=0)).ravel(), 1)))
    text = "function r = pr(M, d)\n  %#linview scalar d\n  n = size(M, 1);\n" \
           "  r = (eye(n) - d * M) \\ ((1 - d) / n * ones(n, 1));\nend\n"
    edited = text.replace("function r = pr", "function [r, top] = pr").replace(
        "\nend", "\n  top = max(r);\nend")
    old = linview.compile(text, name="pr").load(M=M, d=0.85, store=tmp_path / "store")
    old.save(tmp_path / "s.npz")
    new = linview.compile(edited, name="pr")
    tracemalloc.start()
    try:
        loads = [new.load(M=M, d=0.85, reuse=old), new.load(M=M, d=0.85, store=tmp_path / "store"),
                 linview.restore(tmp_path / "s.npz", program=new)]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * n * n / 50  # 64 MB; one dense n×n: 3.2 GB
    fresh = new.load(M=M, d=0.85)
    for v in loads:
        assert v.reuse_report.warm == ["r"] and "top" in v.reuse_report.recomputed
        assert np.abs(v["r"] - fresh["r"]).sum() <= v.error_bound("r") + fresh.error_bound("r")
        assert float(v["top"][0, 0]) == float(np.max(v["r"]))


def test_a_stochastic_program_taken_over_goes_on_with_edge_batches():
    """PageRank over a stochastic M: the edited program takes r over (warm, by the links'
    digest), with ``take_over=True`` too (the old views are closed), and edge batches then
    keep every view within its certified bound of a fresh load's."""
    rng = np.random.default_rng(4)
    n = 60
    src, dst = rng.integers(0, n, 240), rng.integers(0, n, 240)
    text = open("examples/pagerank_solve.m").read()
    edited = linview.compile(text.replace("function r = ", "function [r, top] = ").replace(
        "\nend", "\n  top = max(r);\nend"), name="pagerank_solve")
    old = linview.compile(text, name="pagerank_solve")
    a, b = (old.load(M=StochasticMatrix(n, src, dst), d=0.85) for _ in range(2))
    va = edited.load(M=StochasticMatrix(n, src, dst), d=0.85, reuse=a)
    vb = edited.load(M=StochasticMatrix(n, src, dst), d=0.85, reuse=b, take_over=True)
    fresh = edited.load(M=StochasticMatrix(n, src, dst), d=0.85)
    for v in (va, vb):
        assert v.reuse_report.warm == ["r"] and "top" in v.reuse_report.recomputed
    with pytest.raises(StateError):
        b["r"]
    for _ in range(4):
        M, batch, seen = fresh["M"], [], set()
        while len(batch) < 3:  # a link deleted where there is one, else inserted
            j, i = (int(x) for x in rng.integers(n, size=2))
            if i != j and (j, i) not in seen:
                seen.add((j, i))
                batch.append(("delete" if M.edge_weight(j, i) is not None else "insert",
                              j, i))
        for v in (va, vb, fresh):
            v.update_edges("M", batch)
        for v in (va, vb):
            assert np.abs(v["r"] - fresh["r"]).sum() <= \
                v.error_bound("r") + fresh.error_bound("r") + 1e-15
            assert float(v["top"][0, 0]) == float(np.max(v["r"]))
        assert fresh.verify() < 1e-6 and va.verify() < 1e-6


def test_a_product_on_offer_inside_a_solve_views_right_hand_side_is_not_taken_apart():
    """The old program kept ``t = P*beta``; the new one solves ``A \\ (P*beta)``: the solve
    view is built by its solver (not by the dense printer around the product taken by
    key), and goes on under updates."""
    rng = np.random.default_rng(13)
    old_text = MIXED.replace("q = (eye(n) - d * M) \\ (P * beta);",
                             "t = P * beta;\n  q = (eye(n) - d * M) \\ t;")
    assert old_text != MIXED
    inputs = mixed_inputs(rng)
    n, m, k = inputs["P"].shape[0], *inputs["X"].shape
    old = linview.compile(old_text, name="mixed").load(**inputs)
    prog = linview.compile(MIXED, name="mixed")
    v = prog.load(**inputs, reuse=old)
    assert "q" in v.reuse_report.recomputed and "q" not in v.reuse_report.partly
    assert set(v.solvers) == {"r", "q"}
    fresh = prog.load(**inputs)
    for _ in range(2):
        ref = reference(v, prog)
        for name in OUTPUTS[:4]:
            np.testing.assert_allclose(v[name], ref[name], atol=1e-6, rtol=1e-7)
        x, mm = step(fresh, rng, n, m, k)
        for w in (v, fresh):
            w.update("X", *x)
            w.update("M", *mm)
