"""Every read is a snapshot: ``views[name]`` and ``views.outputs`` taken before an update
are unchanged after it, for every kind of view.

The kinds are derived from the code (:func:`view_kinds`): dense NumPy views, each class of
pending low-rank terms (``backends/numpy/lowrank.py``), each input storage a pragma can ask
for (``sparse``, ``stochastic``), each solver class of a solve view
(``linview/solve/solvers.py``, ``krylov.py``), and each backend other than NumPy.  A new kind fails
:func:`test_every_view_kind_has_a_scenario` until a scenario below covers it; each scenario
checks that it meets the kinds it claims, so that a claim cannot go stale.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sps
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import linview
from linview import api
from linview.backends.numpy import lowrank
from linview.errors import LinviewError
from linview.solve import krylov, solvers
from linview.solve.stochastic import StochasticMatrix
from linview.updates import link_matrix

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SETTINGS = {"deadline": None, "max_examples": 8,
            "suppress_health_check": [HealthCheck.function_scoped_fixture]}


# ------------------------------------------------------------------ the kinds, from the code
def _storage_kinds() -> set[str]:
    """The pragmas that change how an input is stored (found by compiling each)."""
    from linview.frontend.pragmas import PRAGMA_KINDS

    out = set()
    for kind, what in PRAGMA_KINDS.items():
        if what != "names":
            continue
        src = (f"function x = f(A, b)\n  %#linview dims A(n,n) b(n,1)\n  %#linview {kind} A\n"
               "  x = A \\ b;\nend\n")
        try:
            storage = linview.compile(src, name="f").program.input("A").storage
        except LinviewError:
            continue
        if storage != "dense":
            out.add(storage)
    return out


def view_kinds() -> set[str]:
    pending = {c.__name__ for _, c in inspect.getmembers(lowrank, inspect.isclass)
               if c.__module__ == lowrank.__name__ and hasattr(c, "fold")}
    solver_classes = {c.__name__ for mod in (solvers, krylov)
                      for _, c in inspect.getmembers(mod, inspect.isclass)
                      if c.__module__ == mod.__name__ and hasattr(c, "error_bound")}
    backends = {b for b in api.BACKENDS if b != "numpy"}
    return {"dense"} | pending | _storage_kinds() | solver_classes | backends


def observed_kinds(views) -> set[str]:
    """The kinds a views object holds right now."""
    out = set()
    if hasattr(views, "solvers"):  # a module with solve views (backends/numpy/solve_module.py)
        out |= {type(s).__name__ for s in views.solvers.values()}
        out |= set(views.STORAGE.values())
        return out
    if hasattr(views, "distributed") and views.distributed():
        out.add("spark")
    if any(isinstance(v, np.ndarray) for v in views._store.values()):
        out.add("dense")
    out |= {type(p).__name__ for p in views._pending.values() if p.rank}
    return out


# ------------------------------------------------------------------ reading and comparing
def frozen(value):
    """An independent copy of a read value, to compare the read with later."""
    if sps.issparse(value):
        return value.toarray()
    if isinstance(value, StochasticMatrix):
        return value.toarray()
    return np.array(value, copy=True)


def same(read, kept) -> bool:
    return np.array_equal(frozen(read), kept)


def check_reads(views, names, steps, seen: set[str]) -> None:
    """Read ``names`` and the outputs before each step; at the end every read still holds
    what it held when it was taken, and some read value has changed (or the check would
    prove nothing)."""
    history = []
    for step in steps:
        reads = {n: views[n] for n in names}
        outs = views.outputs
        history.append((reads, outs, {n: frozen(v) for n, v in reads.items()},
                        {n: frozen(v) for n, v in outs.items()}))
        step()
        seen |= observed_kinds(views)
    for reads, outs, kept, kept_outs in history:
        for n, v in reads.items():
            assert same(v, kept[n]), f"views[{n!r}] changed after a later update"
            if isinstance(v, np.ndarray):
                assert not v.flags.writeable, n
        for n, v in outs.items():
            assert same(v, kept_outs[n]), f"outputs[{n!r}] changed after a later update"
    first = history[0][2]
    assert any(not same(views[n], first[n]) for n in names), "the updates changed nothing"


# ------------------------------------------------------------------ scenarios
def dense(seeds):
    prog = linview.compile_file(EXAMPLES / "ols.m")
    rng = np.random.default_rng(seeds[0])
    views = prog.load(X=rng.standard_normal((30, 4)), Y=rng.standard_normal((30, 1)))

    def step(seed):
        r = np.random.default_rng(seed)
        U = np.zeros((30, 1))
        U[r.integers(30)] = 1.0
        name = "X" if seed % 2 else "Y"
        views.update(name, U, 0.3 * r.standard_normal((4 if name == "X" else 1, 1)))

    return views, ["beta", "X", "Y"], [lambda s=s: step(s) for s in seeds]


def pending(seeds):
    prog = linview.compile_file(EXAMPLES / "powers.m", dims={"n": 12}, strategy="incr")
    rng = np.random.default_rng(seeds[0])
    views = prog.load(A=rng.standard_normal((12, 12)) / np.sqrt(12))

    def step(seed):
        r = np.random.default_rng(seed)
        views.update("A", 0.05 * r.standard_normal((12, 1)), 0.05 * r.standard_normal((12, 1)))

    return views, ["A", "B", "C", "D"], [lambda s=s: step(s) for s in seeds]


SPARSE_SOLVE = """\
function x = f(A, b)
  %#linview dims A(n,n) b(n,1)
  %#linview sparse A
  %#linview dynamic A b
  x = A \\ b;
end
"""


def sparse_and_krylov(seeds):
    n = 20
    rng = np.random.default_rng(seeds[0])
    A = sps.random(n, n, density=0.15, random_state=seeds[0], format="csr") + 4 * sps.eye(n)
    views = linview.compile(SPARSE_SOLVE, name="f").load(A=A, b=rng.standard_normal((n, 1)))

    def step(seed):
        r = np.random.default_rng(seed)
        U = sps.csr_matrix(([1.0], ([r.integers(n)], [0])), shape=(n, 1))
        V = sps.csr_matrix(([0.5 * r.standard_normal()], ([r.integers(n)], [0])), shape=(n, 1))
        if seed % 2:
            views.update("A", U, V)
        else:
            views.update("b", U, np.array([[0.5 * r.standard_normal()]]))

    return views, ["A", "x"], [lambda s=s: step(s) for s in seeds]


def stochastic_and_push(seeds):
    n = 15
    rng = np.random.default_rng(seeds[0])
    src, dst = rng.integers(n, size=40), rng.integers(n, size=40)
    keep = src != dst
    M = link_matrix(src[keep], dst[keep], n)
    views = linview.compile_file(EXAMPLES / "pagerank_solve.m").load(M=M, d=0.85)

    def step(seed):
        r = np.random.default_rng(seed)
        a, b = (int(x) for x in r.choice(n, size=2, replace=False))
        op = "delete" if views._views["M"].edge_weight(a, b) is not None else "insert"
        views.update_edges("M", [(op, a, b)])

    return views, ["M", "r"], [lambda s=s: step(s) for s in seeds]


def cholesky(seeds):
    src = (EXAMPLES / "ols.m").read_text().replace(
        "%#linview dynamic X Y", "%#linview dynamic X Y\n  %#linview solve cholesky")
    rng = np.random.default_rng(seeds[0])
    views = linview.compile(src, name="ols").load(X=rng.standard_normal((30, 4)),
                                                  Y=rng.standard_normal((30, 1)))

    def step(seed):
        r = np.random.default_rng(seed)
        U = np.zeros((30, 1))
        U[r.integers(30)] = 1.0
        views.update("X", U, 0.3 * r.standard_normal((4, 1)))

    return views, ["beta", "X"], [lambda s=s: step(s) for s in seeds]


#: scenario -> the kinds it covers
SCENARIOS = {
    dense: {"dense"},
    pending: {"Pending"},
    sparse_and_krylov: {"sparse", "KrylovSolver"},
    stochastic_and_push: {"stochastic", "PushSolver"},
    cholesky: {"CholeskySolver"},
}
SPARK_KINDS = {"spark"}  # test_spark_reads_are_snapshots


def test_every_view_kind_has_a_scenario():
    covered = set().union(*SCENARIOS.values()) | SPARK_KINDS
    missing = view_kinds() - covered
    assert not missing, f"view kinds without a snapshot test: {sorted(missing)}"
    assert {"dense", "Pending", "sparse", "stochastic", "PushSolver"} <= view_kinds()


@pytest.fixture
def terms_wait(monkeypatch):
    """Every view large enough for pending terms, and terms that wait for many updates."""
    monkeypatch.setattr(lowrank, "MIN_ELEMENTS", 0)
    monkeypatch.setattr(lowrank, "FOLD_RANK", 1000)


@pytest.mark.parametrize("scenario", list(SCENARIOS), ids=lambda f: f.__name__)
@settings(**SETTINGS)
@given(seeds=st.lists(st.integers(1, 10**6), min_size=2, max_size=6, unique=True))
def test_reads_before_an_update_are_unchanged_after_it(scenario, seeds, terms_wait):
    views, names, steps = scenario(seeds)
    seen: set[str] = set()
    check_reads(views, names, steps, seen)
    assert SCENARIOS[scenario] <= seen, (SCENARIOS[scenario], seen)


def test_a_changed_snapshot_changes_no_view():
    """Sparse and stochastic reads cannot be made read-only: they are copies."""
    views, _, steps = sparse_and_krylov([3, 4])
    A = views["A"]
    A.data[:] = 0.0
    assert views["A"].count_nonzero() > 0
    views, _, _ = stochastic_and_push([5, 6])
    M = views["M"]
    before = views["M"].toarray()
    M.change_edges([("insert", 0, 1)] if M.edge_weight(0, 1) is None else
                   [("delete", 0, 1)])
    np.testing.assert_array_equal(views["M"].toarray(), before)


@pytest.mark.spark
def test_spark_reads_are_snapshots():
    pytest.importorskip("pyspark")
    from linview.backends.spark.session import local_session

    spark = local_session("local[2]")
    try:
        prog = linview.compile_file(EXAMPLES / "ols.m", backend="spark")
        rng = np.random.default_rng(0)
        views = prog.load(X=rng.standard_normal((12, 3)), Y=rng.standard_normal((12, 1)),
                          spark=spark, distribute_min=2, partitions=2)
        seeds = [1, 2]
        steps = [lambda s=s: views.update("X", np.eye(12)[:, [s]],
                                          0.3 * np.random.default_rng(s).standard_normal((3, 1)))
                 for s in seeds]
        seen: set[str] = set()
        check_reads(views, ["beta", "X"], steps, seen)
        assert SPARK_KINDS <= seen
    finally:
        spark.stop()
