"""A least-squares problem kept in the stable form resumes bit for bit (issue 25).

The solver of the stable form (``linview/solve/seminormal.py``) updates its factor L by
rank-1 updates and downdates; a restore that formed L again from F (QR) would continue
from other bits.  A state file keeps the solver's whole state (``NAME@L``, the
refinement's scalars, the rows of its F and Y that differ from the inputs':
``backends/numpy/solve_state.py``), so a run saved and restored anywhere gives every
output equal, to the bit, to the run that never stopped: through ``save``/``restore``,
and through ``linview run --checkpoint`` stopped and started again.  A damaged or
mismatched solver state is refused; a state without it (an older file) is factored again.
"""

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import linview
from linview import faults, statefile
from linview.app.stream_out import read_results
from linview.app.stream_run import run_stream
from linview.errors import StateError

OLS = "function beta = ols(X, Y)\n %#linview dynamic X Y\n" \
      " beta = (X' * X) \\ (X' * Y);\nend\n"
#: weighted, with an intercept: F = [ones(m,1) X] and weights of a diag
WLS = "function beta = wls(X, y, w)\n %#linview dynamic X y w\n" \
      " m = length(y);\n Z = [ones(m, 1) X];\n W = diag(w);\n" \
      " beta = (Z' * W * Z) \\ (Z' * W * y);\nend\n"


def ill(rng, m: int, n: int) -> np.ndarray:
    """A Gaussian m×n X with two columns 1e-6 apart: κ about 1e6, over the rule's 10."""
    X = rng.standard_normal((m, n))
    X[:, 1] = X[:, 0] + 1e-6 * X[:, 1]
    return X


def case(which: str, seed: int):
    rng = np.random.default_rng(seed)
    m, n = 50, 6
    if which == "ols":
        prog = linview.compile(OLS, name="ols")
        return prog, {"X": ill(rng, m, n), "Y": rng.standard_normal((m, 2))}, rng
    prog = linview.compile(WLS, name="wls", least_squares="qr")
    return prog, {"X": ill(rng, m, n), "y": rng.standard_normal((m, 1)),
                  "w": rng.uniform(0.5, 2.0, (m, 1))}, rng


def updates(rng, inputs: dict, count: int) -> list:
    """Row changes, dense rank-2 changes, changes of the right-hand side and weights."""
    m = inputs["X"].shape[0]
    out = []
    for _ in range(count):
        kind = rng.integers(4)
        row = np.zeros((m, 1))
        row[rng.integers(m)] = 1.0
        if kind == 0:
            out.append(("X", row, rng.standard_normal((inputs["X"].shape[1], 1))))
        elif kind == 1:
            out.append(("X", rng.standard_normal((m, 2)),
                        0.01 * rng.standard_normal((inputs["X"].shape[1], 2))))
        else:
            rhs = "Y" if "Y" in inputs else ("w" if kind == 3 else "y")
            cols = inputs[rhs].shape[1]
            scale = 0.1 if rhs == "w" else 1.0  # weights stay positive
            out.append((rhs, row, scale * rng.uniform(0, 1, (cols, 1))))
    return out


def outputs(views) -> dict:
    return {k: views[k] for k in views.OUTPUTS}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(which=st.sampled_from(["ols", "wls"]), seed=st.integers(0, 2**16),
       count=st.integers(4, 24), stops=st.lists(st.integers(0, 23), max_size=3))
def test_save_and_restore_anywhere_equals_the_run_that_never_stopped(which, seed, count,
                                                                     stops, tmp_path_factory):
    prog, inputs, rng = case(which, seed)
    changes = updates(rng, inputs, count)
    a = prog.load(**inputs)
    assert a.solver("beta").method == "cholesky"  # the stable form (ols: chosen by the data)
    want = []
    for name, U, V in changes:
        a.update(name, U, V)
        want.append(outputs(a))
    b = prog.load(**inputs)
    path = tmp_path_factory.mktemp("state") / "s.npz"
    for i, (name, U, V) in enumerate(changes):
        if i in stops:
            b.save(path)
            b = linview.restore(path)
        b.update(name, U, V)
        got = outputs(b)
        for k, v in want[i].items():
            assert np.array_equal(got[k], v), (which, i, k, np.abs(got[k] - v).max())


def test_the_saved_state_holds_the_solver_and_only_the_rows_that_differ(tmp_path):
    prog, inputs, rng = case("ols", 3)
    views = prog.load(**inputs)
    for name, U, V in updates(rng, inputs, 10):
        views.update(name, U, V)
    views.save(tmp_path / "s.npz")
    meta, arrays = statefile.read(tmp_path / "s.npz")
    solver = views.solver("beta")
    assert np.array_equal(arrays["beta@L"], solver.L)
    assert np.array_equal(arrays["beta@x"], solver.X)
    for part, mine, theirs in (("F", solver.F, views["X"]), ("Y", solver.Y, views["Y"])):
        differ = np.flatnonzero(np.any(mine != theirs, axis=1))
        rows = arrays.get(f"beta@{part}i", np.zeros(0))
        assert set(differ) <= set(rows.astype(int))  # every differing row is kept
        if rows.size:
            assert np.array_equal(arrays[f"beta@{part}"], mine[rows.astype(int)])


def _rewrite(src: Path, dst: Path, change) -> None:
    """``src`` written again to ``dst`` with its arrays changed by ``change`` (checksums
    made anew: what a program that writes a wrong state would produce)."""
    meta, arrays = statefile.read(src)
    change(arrays)
    manifest = {k: v for k, v in meta.items()
                if k not in ("format", "version", "linview", "hashes", "side_hashes")}
    statefile.write(dst, arrays, manifest)


@pytest.fixture
def saved(tmp_path):
    prog, inputs, rng = case("ols", 5)
    views = prog.load(**inputs)
    changes = updates(rng, inputs, 12)
    for name, U, V in changes[:6]:
        views.update(name, U, V)
    views.save(tmp_path / "s.npz")
    for name, U, V in changes[6:]:
        views.update(name, U, V)
    return tmp_path, changes, outputs(views)


@pytest.mark.parametrize("damage", [
    lambda a: a.update({"beta@L": a["beta@L"][:-1, :-1]}),  # another size
    lambda a: a.update({"beta@L": a["beta@L"].T.copy()}),  # not lower triangular
    lambda a: a.update({"beta@L": np.where(np.eye(len(a["beta@L"])) > 0, 0.0,
                                           a["beta@L"])}),  # a zero diagonal
    lambda a: a.update({"beta@scalars": a["beta@scalars"][:2]}),
    lambda a: a.update({"beta@Fi": np.array([1e9]), "beta@F": np.ones((1, 6))}),
    lambda a: a.update({"beta@Fi": np.array([0.5]), "beta@F": np.ones((1, 6))}),
    lambda a: a.update({"beta@Yi": np.array([0.0]), "beta@Y": np.ones((1, 3))}),
    lambda a: a.update({"beta@L": np.full_like(a["beta@L"], np.nan)}),
], ids=["size", "upper", "zero-pivot", "scalars", "row-range", "row-fraction", "Y-width",
        "nan"])
def test_a_damaged_or_mismatched_solver_state_is_refused(saved, damage):
    tmp, _, _ = saved
    _rewrite(tmp / "s.npz", tmp / "bad.npz", damage)
    with pytest.raises(StateError, match="least squares"):
        linview.restore(tmp / "bad.npz")


def test_a_state_without_the_solver_is_factored_again(saved):
    """A file written before the solver's state was saved: L formed again from F, the
    answer refined from the saved solution (to rounding, not to the bit)."""
    tmp, changes, want = saved
    _rewrite(tmp / "s.npz", tmp / "old.npz", lambda a: [
        a.pop(k) for k in list(a) if k.startswith("beta@") and k != "beta@x"])
    views = linview.restore(tmp / "old.npz")
    for name, U, V in changes[6:]:
        views.update(name, U, V)
    got = views["beta"]
    assert np.allclose(got, want["beta"], rtol=1e-8, atol=0)


# ---------------------------------------------------------------- linview run --checkpoint
def run_case(tmp: Path):
    """examples/ols.m on an ill-conditioned 40×5 X (the stable form), 6 batches of row
    adds, row sets and cell sets of Y."""
    rng = np.random.default_rng(11)
    np.save(tmp / "X.npy", ill(rng, 40, 5))
    np.save(tmp / "Y.npy", rng.standard_normal((40, 1)))
    recs = []
    for b in range(6):
        r = int(rng.integers(40)) + 1
        recs += [{"input": "X", "row": r, "add": (0.1 * rng.standard_normal(5)).tolist(),
                  "batch": b},
                 {"input": "Y", "cell": [r, 1], "set": float(rng.standard_normal()),
                  "batch": b},
                 {"input": "X", "row": r % 40 + 1, "set": rng.standard_normal(5).tolist(),
                  "batch": b}]
    (tmp / "upd.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return linview.compile_file("examples/ols.m"), [f"X={tmp / 'X.npy'}",
                                                    f"Y={tmp / 'Y.npy'}"]


def run(tmp: Path, prog, inputs, name: str, hook=None):
    kwargs = dict(inputs=inputs, updates=str(tmp / "upd.jsonl"), checkpoint=str(
        tmp / name / "ck"), out=str(tmp / name / "out"), checkpoint_every=2,
        warn=lambda m: None)
    try:
        if hook is None:
            return run_stream(prog, **kwargs)
        with faults.hooked(hook):
            return run_stream(prog, **kwargs)
    except faults.InjectedFault as e:
        return e


def test_a_run_stopped_and_resumed_equals_the_uninterrupted_run_to_the_bit(tmp_path):
    prog, inputs = run_case(tmp_path)
    seen: list[str] = []
    ref = run(tmp_path, prog, inputs, "ref", hook=seen.append)
    assert isinstance(ref, dict) and ref["batch"] == 6, ref
    want, want_latest = read_results(tmp_path / "ref" / "out"), dict(
        np.load(tmp_path / "ref" / "out" / "latest.npz"))
    done = [i for i, n in enumerate(seen, 1) if n == "batch.done"]
    # stops in batch 4 (after the checkpoint of batch 2's end... and of 4's) and in 5
    for at in (done[2] + 2, done[3] + 1, done[4] - 1):
        name = f"stop-{at}"
        count = {"n": 0}

        def hook(point: str, at=at, count=count) -> None:
            count["n"] += 1
            if count["n"] == at:
                raise faults.InjectedFault("injected")
        assert isinstance(run(tmp_path, prog, inputs, name, hook), faults.InjectedFault)
        again = run(tmp_path, prog, inputs, name)
        assert isinstance(again, dict) and not again["interrupted"], again
        got = read_results(tmp_path / name / "out")
        assert sorted(got) == sorted(want)
        for b in want:
            for k in want[b]:
                assert np.array_equal(got[b][k], want[b][k]), (name, b, k)
        latest = dict(np.load(tmp_path / name / "out" / "latest.npz"))
        assert all(np.array_equal(latest[k], want_latest[k]) for k in want_latest)
