"""Solve views inside the generated module: ``linview compile`` prints what ``load()`` runs,
and a program mixing solve views, a Woodbury-maintained inverse and other views is
maintained under updates of every input (differential against the reference interpreter,
under Hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sps
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import linview
from linview import statefile
from linview.api import load_module
from linview.app.cli import main
from linview.backends.numpy.solve_module import SolveModule
from linview.compiler import interp
from linview.errors import StateError
from linview.solve.stochastic import StochasticMatrix

D = 0.85
MIXED = """function [r, beta, q, share] = mixed(M, X, y, P, d)
  %#linview scalar d
  %#linview dynamic M X
  %#linview sparse M
  n = size(M, 1);
  A = eye(n) - d * M;
  r = A \\ ((1 - d) / n * ones(n, 1));
  beta = inv(X' * X) * (X' * y);
  q = (eye(n) - d * M) \\ (P * beta);
  share = sum(r);
end
"""


def link_matrix(rng, n: int, m: int):
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    pairs = np.unique(np.stack([src, dst]), axis=1)
    return StochasticMatrix(n, pairs[0], pairs[1]).tocsc().tocsr()


def mixed_inputs(rng, n=25, m=18, k=3):
    return {"M": link_matrix(rng, n, 70), "X": rng.standard_normal((m, k)),
            "y": rng.standard_normal((m, 1)), "P": rng.standard_normal((n, k)), "d": D}


def reference(views, prog) -> dict:
    """Every output re-evaluated by the reference interpreter on the current inputs
    (dense, direct solves)."""
    inputs = {n: views[n] for n in views.INPUTS}
    dense = {n: v.toarray() if sps.issparse(v) else np.asarray(v) for n, v in inputs.items()}
    return interp.evaluate(prog.program, dense, dict(views.dims))


def mixed_file(tmp_path):
    path = tmp_path / "mixed.m"
    path.write_text(MIXED)
    return path


def test_mixed_module_keeps_the_inverse_by_woodbury_and_the_solves_by_solvers(tmp_path):
    prog = linview.compile_file(mixed_file(tmp_path))
    assert "rt.core_inv" in prog.source and "self._change_solve('r'" in prog.source
    assert "_reevaluate_trigger" not in prog.source
    views = prog.load(**mixed_inputs(np.random.default_rng(0)))
    assert isinstance(views, SolveModule) and views.solver("r").method == "push"
    assert set(views.solvers) == {"r", "q"} and sps.issparse(views["M"])


def test_memory_bytes_counts_the_sparse_input_by_its_arrays_the_solvers_and_the_views():
    views = linview.compile(MIXED).load(**mixed_inputs(np.random.default_rng(1), n=400))
    M = views["M"]
    sparse = M.data.nbytes + M.indices.nbytes + M.indptr.nbytes
    dense = sum(np.asarray(views[n]).nbytes for n in ("X", "y", "P", "beta"))
    solvers = sum(views.solver(n).memory_bytes() for n in ("r", "q"))
    assert sparse + dense + solvers <= views.memory_bytes()


def _printed(path, capsys) -> str:
    assert main(["compile", str(path)]) == 0
    return capsys.readouterr().out


def test_compile_output_is_the_module_load_runs(tmp_path, capsys):
    """The printed text is the loaded module's source; a module imported from the printed
    text, loaded on the same inputs and given the same updates, gives the same views."""
    path = mixed_file(tmp_path)
    printed = _printed(path, capsys)
    rng = np.random.default_rng(3)
    inputs = mixed_inputs(rng)
    views = linview.compile_file(path).load(**inputs)
    assert type(views).MODULE_SOURCE == printed
    cls = getattr(load_module(printed, "printed_mixed"), type(views).__name__)
    other = cls(**inputs)
    n, m, k = inputs["P"].shape[0], *inputs["X"].shape
    for step in range(6):
        if step % 2:
            u, v = rng.standard_normal(m) * 0.1, rng.standard_normal(k)
            views.update("X", u, v)
            other.update("X", u, v)
        else:
            j = int(rng.integers(n))
            new = np.zeros(n)
            new[rng.choice(n, size=2, replace=False)] = 0.5
            u = new - views["M"][:, [j]].toarray().ravel()
            views.update("M", u, np.eye(n)[:, j])
            other.update("M", u, np.eye(n)[:, j])
        for name in ("r", "beta", "q", "share"):
            np.testing.assert_array_equal(views[name], other[name])


def test_compile_output_of_a_stochastic_program_is_what_load_runs(capsys):
    printed = _printed("examples/pagerank_solve.m", capsys)
    rng = np.random.default_rng(4)
    M = StochasticMatrix(30, rng.integers(0, 30, 80), rng.integers(0, 30, 80))
    views = linview.compile_file("examples/pagerank_solve.m").load(M=M, d=D)
    assert type(views).MODULE_SOURCE == printed and "self._change_input('M'" in printed


@st.composite
def update_steps(draw):
    """Updates of M (a column set to a new one, still substochastic; or, rarely, a
    change that leaves M negative somewhere, so push must give way to Krylov) and of X."""
    return draw(st.lists(st.tuples(st.sampled_from(["M", "M", "X", "Mneg"]),
                                   st.integers(0, 10_000)), min_size=1, max_size=8))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**16), steps=update_steps())
def test_mixed_program_matches_reevaluation_under_updates_of_both_inputs(seed, steps):
    rng = np.random.default_rng(seed)
    prog = linview.compile(MIXED, name="mixed")
    inputs = mixed_inputs(rng)
    views = prog.load(**inputs)
    n, m, k = inputs["P"].shape[0], *inputs["X"].shape
    for what, s in steps:
        r = np.random.default_rng(s)
        if what == "X":
            views.update("X", r.standard_normal(m) * 0.2, r.standard_normal(k))
        else:
            j = int(r.integers(n))
            new = np.zeros(n)
            new[r.choice(n, size=int(r.integers(0, 4)), replace=False)] = 0.3
            if what == "Mneg":
                new[int(r.integers(n))] = -0.1
            views.update("M", new - views["M"][:, [j]].toarray().ravel(), np.eye(n)[:, j])
        ref = reference(views, prog)
        for name in ("r", "beta", "q", "share"):
            np.testing.assert_allclose(views[name], ref[name], atol=1e-6, rtol=1e-7)
        if views.solver("r").method == "push":  # certified: the bound holds (up to the
            # rounding of the dense reference solve, n·eps of ‖r‖₁ = 1)
            assert np.abs(views["r"] - ref["r"]).sum() <= views.error_bound("r") + 1e-13


# ------------------------------------------------------------------ one state format
def test_mixed_module_saves_in_the_one_state_format_and_restores(tmp_path):
    rng = np.random.default_rng(7)
    prog = linview.compile(MIXED, name="mixed")
    inputs = mixed_inputs(rng)
    views = prog.load(**inputs)
    n, m, k = inputs["P"].shape[0], *inputs["X"].shape
    views.update("X", rng.standard_normal(m) * 0.1, rng.standard_normal(k))
    views.update("M", -views["M"][:, [2]].toarray().ravel(), np.eye(n)[:, 2])  # dangling
    views.save(tmp_path / "s.npz", extra={"offset": 3})
    meta, arrays = statefile.read(tmp_path / "s.npz")  # checksums, manifest: the one format
    assert meta["storage"] == {"M": "sparse", "X": "dense", "y": "dense", "P": "dense",
                               "d": "dense"} and {"r@x", "q@x", "M@data"} <= set(arrays)
    back = linview.restore(tmp_path / "s.npz")
    assert isinstance(back, SolveModule) and back.updates == 2
    assert back.saved_meta["extra"] == {"offset": 3} and sps.issparse(back["M"])
    for name in ("r", "beta", "q", "share"):
        np.testing.assert_allclose(back[name], views[name], atol=1e-8)
    for v in (views, back):  # both go on alike
        v.update("X", np.ones(m) * 0.05, np.arange(k, dtype=float))
    ref = reference(back, prog)
    for name in ("r", "beta", "q", "share"):
        np.testing.assert_allclose(back[name], ref[name], atol=1e-7)
    other = MIXED.replace("mixed(M, X, y, P, d)", "mixed(M, X, y, P, d, Z)").replace(
        "share = sum(r);", "share = sum(r) + sum(sum(Z));")
    with pytest.raises(StateError, match="different program .* over other inputs"):
        linview.restore(tmp_path / "s.npz", program=linview.compile(other, name="mixed"))


def test_restore_takes_the_dense_views_as_saved_and_solves_only_the_solve_views(tmp_path):
    """The Woodbury-maintained views of a mixed program come back bit for bit (a fresh
    evaluation of them differs in the last bits after updates), with their probe state;
    the solve views are solved again, warm, with their bounds; against a fresh load on
    the same inputs, before and after further updates of both inputs."""
    rng = np.random.default_rng(11)
    prog = linview.compile(MIXED, name="mixed")
    inputs = mixed_inputs(rng)
    views = prog.load(**inputs)
    n, m, k = inputs["P"].shape[0], *inputs["X"].shape
    for _ in range(3):
        views.update("X", rng.standard_normal(m) * 0.1, rng.standard_normal(k))
    views.update("M", -views["M"][:, [4]].toarray().ravel(), np.eye(n)[:, 4])
    views.save(tmp_path / "s.npz")
    _, arrays = statefile.read(tmp_path / "s.npz")
    dense = {nm for nm, v in views._views.items() if isinstance(v, np.ndarray)
             and nm not in views.INPUTS and nm not in views.solvers}
    assert dense and {f"{nm}@view" for nm in dense} <= set(arrays)
    back = linview.restore(tmp_path / "s.npz")
    fresh = prog.load(**{nm: views[nm] for nm in views.INPUTS})
    for nm in dense:
        np.testing.assert_array_equal(back._views[nm], views._views[nm])
    assert any(not np.array_equal(fresh._views[nm], views._views[nm]) for nm in dense)
    assert back._prober.states.keys() == views._prober.states.keys()
    for _ in range(2):
        for v in (back, fresh):
            for nm in ("r", "beta", "q", "share"):
                np.testing.assert_allclose(back[nm], fresh[nm], atol=1e-8)
            assert v.error_bound("r") <= 1e-6
        u, w = rng.standard_normal(m) * 0.1, rng.standard_normal(k)
        col = np.zeros(n)
        col[rng.choice(n, size=2, replace=False)] = 0.5
        col -= back["M"][:, [1]].toarray().ravel()
        for v in (back, fresh):
            v.update("X", u, w)
            v.update("M", col, np.eye(n)[:, 1])


def test_old_solve_state_files_are_refused_clearly(tmp_path):
    """The format solve views had before they joined the generated module is not read."""
    meta = {"kind": "solve", "program": "p", "source": "", "updates": 0}
    np.savez(tmp_path / "old.npz", __meta__=np.array(repr(meta)), __module__=np.array(""),
             **{"x:r": np.zeros((3, 1))})
    with pytest.raises(StateError, match="solve views in the format linview used before"):
        linview.restore(tmp_path / "old.npz")


# ------------------------------------------------------------------ solve view or inverse
GENERAL = """function x = f(A, b)
  x = (A + 2 * eye(size(A, 1))) \\ b;
end
"""


def test_cost_model_chooses_solve_view_or_inverse_by_seconds_and_explain_says_why():
    """Priced per update: a large sparse A is a solve view; a small, nearly full one (its
    non-zeros counted from the data) is kept by a Woodbury inverse, the input dense."""
    rng = np.random.default_rng(11)
    big = sps.random(4000, 4000, density=1e-3, random_state=1, format="csr")
    small = sps.csr_matrix(rng.random((12, 12)))  # every entry stored
    prog = linview.compile(GENERAL, name="f")
    views = prog.load(A=big, b=np.ones((4000, 1)))
    assert views.solver("x").method == "krylov"
    text = prog.specialize(A=big, b=np.ones((4000, 1))).explain()
    assert f"A: {big.nnz:,} non-zeros): a solve view (krylov)" in text
    views = prog.load(A=small, b=np.ones((12, 1)))
    assert not getattr(views, "solvers", None) and "rt.inv(" in type(views).MODULE_SOURCE
    text = prog.specialize(A=small, b=np.ones((12, 1))).explain()
    assert "A: 144 non-zeros): a Woodbury inverse inv(A)" in text
    assert "A kept dense for it" in text
    A = small.toarray()
    for _ in range(4):  # Woodbury-maintained, against a direct solve
        u, v = rng.standard_normal(12) * 0.1, rng.standard_normal(12) * 0.1
        views.update("A", u, v)
        A += np.outer(u, v)
        np.testing.assert_allclose(views["x"], np.linalg.solve(A + 2 * np.eye(12),
                                                               np.ones((12, 1))), atol=1e-9)


B_READS_M = """function [r, y] = f(M, v, d)
  %#linview scalar d
  %#linview stochastic M
  %#linview dynamic M
  n = size(M, 1);
  r = (eye(n) - d * M) \\ (M * v);
  y = (eye(n) - d * M) \\ v;
end
"""


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**31 - 1), st.integers(1, 12))
def test_edge_batches_reach_push_as_columns_only_where_nothing_else_changes(seed, size):
    """``COLUMNS_ONLY``: an edge batch is handed to push as its changed columns, without
    the trigger's factors (a node that becomes or stops being dangling has a factor
    column of n entries).  Against the trigger itself (``COLUMNS_ONLY`` emptied), and
    against direct solves; a program whose B reads M keeps its trigger."""
    rng = np.random.default_rng(seed)
    n = 40
    src, dst = rng.integers(3, n, 120), rng.integers(0, n, 120)  # nodes 0-2: dangling
    keep = src != dst
    pairs = np.unique(np.stack([src[keep], dst[keep]]), axis=1)
    prog = linview.compile_file("examples/pagerank_solve.m")
    assert "COLUMNS_ONLY = {'M': ('r',)}" in prog.source
    fast = prog.load(M=StochasticMatrix(n, *pairs), d=D, tolerance=1e-9)
    slow = prog.load(M=StochasticMatrix(n, *pairs), d=D, tolerance=1e-9)
    slow.COLUMNS_ONLY = {}
    mixed = linview.compile(B_READS_M)
    assert "COLUMNS_ONLY" not in mixed.source
    v = rng.random((n, 1))
    other = mixed.load(M=StochasticMatrix(n, *pairs), v=v, d=D, tolerance=1e-9)
    for _ in range(4):
        M = fast["M"]
        batch, seen = [], set()
        while len(batch) < size:
            j = int(rng.integers(n))  # the dangling nodes 0-2 gain links, others lose some
            rows, _, _ = M.column(j)
            rec = ("delete", j, int(rows[0])) if rows.size and rng.random() < 0.5 else (
                ("insert", j, int(rng.integers(n))))
            if (rec[0] == "insert" and (rec[2] == j or rec[2] in set(rows.tolist()))) or \
                    (j, rec[2]) in seen:
                continue
            seen.add((j, rec[2]))
            batch.append(rec)
        for views in (fast, slow, other):
            views.update_edges("M", batch)
        A = sps.identity(n, format="csc") - D * fast["M"].tocsc()
        exact = sps.linalg.spsolve(A, np.full(n, (1 - D) / n)).reshape(-1, 1)
        for views in (fast, slow):
            assert np.abs(views["r"] - exact).sum() <= views.error_bound("r") <= 1e-9
        np.testing.assert_allclose(fast["r"], slow["r"], atol=2e-9)
        Mo = other["M"].tocsc()
        Ao = sps.identity(n, format="csc") - D * Mo
        np.testing.assert_allclose(other["r"], sps.linalg.spsolve(Ao, Mo @ v).reshape(-1, 1),
                                   atol=1e-7)
        np.testing.assert_allclose(other["y"], sps.linalg.spsolve(Ao, v).reshape(-1, 1),
                                   atol=1e-7)
