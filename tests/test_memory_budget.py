"""The memory budget: load() and bench refuse before allocating, and no MemoryError reaches
a user (linview/budget.py, docs/memory.md).  Budgets are small, so nothing here allocates
much."""

import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sps
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import cases

import linview
from linview import budget
from linview.app.cli import main
from linview.errors import InputError, MemoryBudgetError
from linview.specialize import DeferredProgram
from linview.updates import link_matrix

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

#: the README's PageRank program, without any pragma that keeps M sparse
PAGERANK_DENSE = """\
function r = pr(M, d)
  %#linview dims M(n,n)
  %#linview scalar d
  n = size(M, 1);
  r = (eye(n) - d * M) \\ ((1 - d) / n * ones(n, 1));
end
"""


def ring(n: int) -> sps.csr_matrix:
    """A column-stochastic ring (one link per node), tiny in memory at any n."""
    i = np.arange(n)
    return sps.csr_matrix((np.ones(n), ((i + 1) % n, i)), shape=(n, n))


def test_sizes_parse():
    assert budget.parse_size("8G") == 8 * 2**30
    assert budget.parse_size("512m") == 512 * 2**20
    assert budget.parse_size("1.5T") == int(1.5 * 2**40)
    assert budget.parse_size("8GiB") == budget.parse_size("8GB") == 8 * 2**30
    assert budget.parse_size("1000") == 1000 == budget.parse_size(1000)
    for bad in ("10X", "", "-1G", "0", "G", 0, -5):
        with pytest.raises(InputError):
            budget.parse_size(bad)
    assert budget.human(74.5 * 2**30) == "74.5 GiB"


def test_sparse_input_stays_sparse_and_a_dense_ask_is_refused_before_densifying():
    """The issue's case: a scipy.sparse M and no pragma.  It stays sparse (nothing of n²
    is allocated: the load fits a 1 MB budget at n = 1000, where M dense is 7.63 MiB); a
    program that asks for a dense n×n value of it is refused before anything is
    allocated, naming the statement."""
    M = ring(1000)
    views = linview.compile(PAGERANK_DENSE, name="pr").load(M=M, d=0.85, memory_budget="1M")
    assert abs(float(views["r"].sum()) - 1.0) < 1e-8
    split = PAGERANK_DENSE.replace("  r = (eye(n) - d * M)", "  A = eye(n) - d * M;\n  r = (A)")
    views = linview.compile(split, name="pr").load(M=M, d=0.85, memory_budget="1M")
    assert abs(float(views["r"].sum()) - 1.0) < 1e-8
    dense = PAGERANK_DENSE.replace("  r = (eye(n) - d * M) \\", "  W = inv(eye(n) - d * M);\n"
                                   "  r = W *")
    prog = linview.compile(dense, name="pr")
    tracemalloc.start()
    try:
        with pytest.raises(MemoryBudgetError) as e:
            prog.load(M=M, d=0.85, memory_budget="1M")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20, f"a refused load allocated {peak} bytes (W dense: 8 MB)"
    text = str(e.value)
    assert "pr.m:5: W = inv(eye(n) - d * M);" in text and "1,000×1,000 (7.63 MiB" in text
    assert "nothing was allocated" in text
    # a StochasticMatrix (linview.updates.link_matrix) given to a program that keeps M
    # dense is densified: refused just the same
    i = np.arange(1000)
    with pytest.raises(MemoryBudgetError, match="a StochasticMatrix input with 1,000 non-z"):
        linview.compile(PAGERANK_DENSE, name="pr").load(
            M=link_matrix(i, (i + 1) % 1000, 1000), d=0.85, memory_budget="1M")


def test_dense_load_refused_and_allowed_at_the_boundary():
    prog = linview.compile_file(EXAMPLES / "ols.m")
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((300, 100)), rng.standard_normal((300, 1))
    held = budget.load_held(prog.program, {"X": X, "Y": Y}, {})
    need = sum(h.nbytes for h in held)
    with pytest.raises(MemoryBudgetError, match=r"examples/ols\.m:8: beta = \(X' \* X\)"):
        prog.load(X=X, Y=Y, memory_budget=need - 1)
    views = prog.load(X=X, Y=Y, memory_budget=need)
    assert views["beta"].shape == (100, 1)


@settings(max_examples=15, deadline=None)
@given(m=st.integers(2, 60), n=st.integers(1, 40), p=st.integers(1, 3))
def test_the_count_covers_what_load_holds(m, n, p):
    """The budget's count is at least the bytes of every array the loaded module holds and
    at least the peak that tracemalloc sees during the load (temporaries included).  The
    Woodbury module, whose arrays the count is of (the default may switch to the stable
    form, compiling it during the load: Python objects tracemalloc sees too)."""
    prog = linview.compile_file(EXAMPLES / "ols.m", least_squares="normal")
    rng = np.random.default_rng(m * 100 + n)
    X = rng.standard_normal((max(m, n + 1), n))
    Y = rng.standard_normal((X.shape[0], p))
    held = budget.load_held(prog.program, {"X": X, "Y": Y}, {})
    counted = sum(h.nbytes for h in held)
    tracemalloc.start()
    views = prog.load(X=X, Y=Y)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert counted >= sum(a.nbytes for a in views._store.values())
    small = 64 * 1024  # Python objects, not arrays: what tracemalloc also sees
    assert peak <= counted + small, (peak, counted)


def test_the_environment_and_the_cli_set_the_budget(monkeypatch):
    prog = linview.compile_file(EXAMPLES / "ols.m")
    X, Y = np.ones((40, 30)) + np.eye(40, 30), np.ones((40, 1))
    monkeypatch.setenv(budget.ENV, "1K")
    with pytest.raises(MemoryBudgetError, match=budget.ENV):
        prog.load(X=X, Y=Y)
    budget.set_default("2K")
    try:
        with pytest.raises(MemoryBudgetError, match="--memory-budget"):
            prog.load(X=X, Y=Y)
        assert prog.load(X=X, Y=Y, memory_budget="1G")["beta"].shape == (30, 1)
    finally:
        budget.set_default(None)
    monkeypatch.delenv(budget.ENV)
    limit, why = budget.resolve()
    assert limit is None or "half of this machine" in why


def test_a_deferred_program_passes_the_budget_through():
    src = "function y = f(A, x)\n  y = A * x;\nend\n"
    prog = linview.compile(src, name="f")
    A, x = np.ones((50, 50)), np.ones((50, 1))
    with pytest.raises(MemoryBudgetError, match="f.m:2: y = A \\* x;"):
        prog.load(A=A, x=x, memory_budget=1000)
    assert prog.load(A=A, x=x)["y"][0, 0] == 50


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "linview.app.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


def test_bench_at_the_issue_dims_is_refused_not_a_bug():
    """``bench ols.m --dims m=200000,n=100000`` needed 149 GiB and crashed as an internal
    error; now it is refused before any input is made."""
    r = _cli("bench", "examples/ols.m", "--dims", "m=200000,n=100000,p=1",
             env={budget.ENV: "1G"})
    assert r.returncode == 2, r.stderr
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr
    assert "bench would allocate" in r.stderr and "X 200,000×100,000 (149 GiB)" in r.stderr
    assert "examples/ols.m:8: beta = (X' * X) \\ (X' * Y);" in r.stderr
    r = _cli("bench", "examples/ols.m", "--dims", "m=2000,n=1000,p=1", "--memory-budget",
             "1M", "--strategies", "reeval")
    assert r.returncode == 2 and "memory budget of 1 MiB (--memory-budget)" in r.stderr
    r = _cli("bench", "examples/ols.m", "--memory-budget", "lots")
    assert r.returncode == 2 and "bad memory budget 'lots'" in r.stderr
    r = _cli("demo", "--n", "1000", "--memory-budget", "1M")
    assert r.returncode == 2 and "ols: bench would allocate" in r.stderr, r.stderr


def test_a_stray_memory_error_is_not_called_a_bug(monkeypatch, capsys):
    """A MemoryError the budget did not foresee: a clear error, exit status 2, in the API
    (load) and in the CLI."""
    prog = linview.compile_file(EXAMPLES / "ols.m")

    def no_memory(*_args, **_kwargs):
        raise MemoryError("Unable to allocate 74.5 GiB")

    monkeypatch.setattr(prog.module_class, "_evaluate", no_memory)
    with pytest.raises(MemoryBudgetError, match="out of memory during load"):
        prog.load(X=np.eye(3), Y=np.ones((3, 1)))
    monkeypatch.setattr(linview, "compile_file", no_memory)
    assert main(["compile", str(EXAMPLES / "ols.m")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ols: out of memory during compile")
    assert "this is a bug" not in err and "74.5 GiB" in err


def test_run_takes_the_budget(tmp_path):
    np.save(tmp_path / "X.npy", np.ones((50, 5)) + np.eye(50, 5))
    np.save(tmp_path / "Y.npy", np.ones((50, 1)))
    (tmp_path / "u.jsonl").write_text("")
    r = _cli("run", "examples/ols.m", "--input", f"X={tmp_path / 'X.npy'}", "--input",
             f"Y={tmp_path / 'Y.npy'}", "--updates", str(tmp_path / "u.jsonl"),
             "--memory-budget", "1K")
    assert r.returncode == 2, r.stderr
    assert "load() would allocate" in r.stderr and "X 50×5 (1.95 KiB)" in r.stderr


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=cases())
def test_the_count_covers_random_programs(case):
    """On random programs of the differential suite: the budget's count, taken before
    loading, names every array the loaded views hold, with at least its bytes."""
    from test_differential import compile_case, good_inputs

    compiled = compile_case(case)
    inputs = good_inputs(case.prog, case.seed)
    views = compiled.load(**inputs)
    loaded = compiled
    if isinstance(compiled, DeferredProgram) or type(views) is not compiled.module_class:
        loaded = compiled.specialize(**inputs)  # what load() compiled for the data (cached)
    assert type(views) is loaded.module_class
    held = budget.load_held(loaded.program, inputs, dict(loaded.plan.sizes.bindings))
    assert held is not None
    counted = {h.name: h.nbytes for h in held}
    for name, array in views._store.items():
        assert counted.get(name, -1) >= array.nbytes, name


@pytest.mark.parametrize("where", ["update.applied", "trigger"])
def test_out_of_memory_inside_an_update_is_an_error_and_the_views_refuse_until_refresh(where):
    """A MemoryError inside update() never reaches the user as such; the views, which may
    hold part of the update, refuse reads and updates until refresh()."""
    from linview import faults

    rng = np.random.default_rng(8)
    prog = linview.compile_file(Path(__file__).parents[1] / "examples" / "ols.m")
    views = prog.load(X=rng.standard_normal((30, 5)), Y=rng.standard_normal((30, 1)))
    u, v = np.eye(30)[2], 0.1 * np.ones(5)

    def oom(name):
        if where == "trigger" or name == where:
            raise MemoryError("injected")

    with faults.hooked(oom), pytest.raises(MemoryBudgetError, match="out of memory during "
                                           "the update of X"):
        views.update("X", u, v)
    with pytest.raises(linview.StateError, match="may hold part of it"):
        views["beta"]
    with pytest.raises(linview.StateError, match="refresh"):
        views.update("X", u, v)
    views.refresh()
    X, Y = views["X"], views["Y"]
    np.testing.assert_allclose(views["beta"], np.linalg.solve(X.T @ X, X.T @ Y), rtol=1e-9)
