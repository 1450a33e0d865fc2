"""End-to-end tests of the example programs in ``examples/``.

For every example:

* the compiled program's evaluation equals an independent NumPy formula (closed forms
  such as ``matrix_power`` and ``lstsq``, not the program's own loop);
* after a mixed sequence of rank-1 and rank-2 updates to its dynamic inputs, the
  incrementally maintained outputs equal a fresh evaluation of the updated inputs (and the
  NumPy formula), ``verify()`` is tiny, and no trigger fell back to re-evaluation;
* (``octave``) GNU Octave running the same ``.m`` file agrees with linview, on the initial
  inputs and on the inputs after the updates.  Octave starts once per example.

Inputs are small (n around 6 to 20) and well-conditioned: matrices whose powers are taken
have spectral radius below one, OLS designs are tall Gaussian matrices, and updates are
small relative to the matrices they change.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import linview

try:  # tests/ may or may not be a package
    from tests.octave_runner import OctaveError, octave_available, run_octave, run_octave_many
except ImportError:  # pragma: no cover - depends on how pytest set sys.path
    from octave_runner import OctaveError, octave_available, run_octave, run_octave_many

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

Inputs = dict[str, "np.ndarray | float"]
Update = tuple[str, np.ndarray, np.ndarray]


def rel_err(got, want) -> float:
    """Max absolute difference relative to the largest entry of ``want``."""
    got = np.atleast_2d(np.asarray(got, dtype=float))
    want = np.atleast_2d(np.asarray(want, dtype=float))
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    return float(np.max(np.abs(got - want))) / max(float(np.max(np.abs(want))), 1e-300)


def col(v) -> np.ndarray:
    return np.asarray(v, dtype=float).reshape(-1, 1)


def mpow(A: np.ndarray, k: int) -> np.ndarray:
    return np.linalg.matrix_power(A, k)


# ------------------------------------------------------------------ input builders
def contraction(rng, n: int, radius: float = 0.9) -> np.ndarray:
    """A non-symmetric, nearly normal n×n matrix of spectral radius about ``radius``:
    a scaled random orthogonal matrix plus a small Gaussian perturbation, so that A^16
    stays O(1) and is computed without cancellation."""
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    E = rng.standard_normal((n, n))
    A = 0.95 * Q + 0.05 * E / np.linalg.norm(E, 2)
    return radius * A / max(abs(np.linalg.eigvals(A)))


def column_stochastic(rng, n: int) -> np.ndarray:
    M = rng.random((n, n)) + 0.1
    return M / M.sum(axis=0, keepdims=True)


def distribution(rng, n: int) -> np.ndarray:
    p = rng.random(n) + 0.1
    return p / p.sum()


def low_rank(rng, shape: tuple[int, int], rank: int, size: float,
             zero_sum: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Random factors U (rows×rank), V (cols×rank) with ‖U Vᵀ‖_F = ``size``.
    ``zero_sum="U"`` makes every column of U sum to zero (column sums of the updated
    matrix are kept, e.g. a column-stochastic M); ``"V"`` the same for V (row sums)."""
    U = rng.standard_normal((shape[0], rank))
    V = rng.standard_normal((shape[1], rank))
    if zero_sum == "U":
        U -= U.mean(axis=0)
    elif zero_sum == "V":
        V -= V.mean(axis=0)
    U *= size / np.linalg.norm(U @ V.T)
    return U, V


# ------------------------------------------------------------------ scenarios
@dataclass(frozen=True)
class Example:
    """One example program: how to build its inputs, its outputs by an independent NumPy
    formula, and how large (relative) its updates are."""

    name: str
    make_inputs: Callable[[np.random.Generator], Inputs]
    reference: Callable[[Inputs], dict[str, np.ndarray]]
    update_size: float = 0.02  # ‖ΔX‖_F relative to ‖X‖_F, per update
    zero_sum: dict[str, str] | None = None  # input -> "U" / "V" (see low_rank)

    @property
    def path(self) -> Path:
        return EXAMPLES / f"{self.name}.m"


def _powers_ref(x):
    return {"C": mpow(x["A"], 4), "D": mpow(x["A"], 16)}


def _ols_inputs(rng):
    m, n, p = 20, 6, 2
    return {"X": rng.standard_normal((m, n)), "Y": rng.standard_normal((m, p))}


def _ols_ref(x):
    return {"beta": np.linalg.lstsq(x["X"], x["Y"], rcond=None)[0]}


def _sums_ref(x):
    A = x["A"]
    return {"S": sum(mpow(A, k) for k in range(16))}


def _general_inputs(rng):
    n, p = 8, 3
    return {"A": contraction(rng, n, 0.85), "B": rng.standard_normal((n, p)),
            "T0": rng.standard_normal((n, p))}


def _general_ref(x):
    A, B, T0 = x["A"], x["B"], x["T0"]
    # T_16 = A^16 T0 + (I + A + ... + A^15) B
    return {"T": mpow(A, 16) @ T0 + sum(mpow(A, k) for k in range(16)) @ B}


def _gd_inputs(rng):
    m, n = 30, 5
    X = rng.standard_normal((m, n))
    return {"X": X, "Y": rng.standard_normal(m), "theta0": rng.standard_normal(n),
            "alpha": 1.0 / np.linalg.norm(X, 2) ** 2}


def _gd_ref(x):
    X, Y, a = x["X"], col(x["Y"]), float(x["alpha"])
    # theta_k = G^k theta0 + (I + G + ... + G^(k-1)) alpha X'Y,  G = I - alpha X'X
    G = np.eye(X.shape[1]) - a * X.T @ X
    return {"theta": mpow(G, 10) @ col(x["theta0"])
            + sum(mpow(G, j) for j in range(10)) @ (a * X.T @ Y)}


def _pagerank_inputs(rng):
    n = 12
    return {"M": column_stochastic(rng, n), "r0": distribution(rng, n), "d": 0.85}


def _pagerank_ref(x):
    M, d = x["M"], float(x["d"])
    n = M.shape[0]
    # r_10 = (dM)^10 r0 + (I + dM + ... + (dM)^9) (1-d)/n 1
    dM = d * M
    return {"r": mpow(dM, 10) @ col(x["r0"])
            + sum(mpow(dM, j) for j in range(10)) @ np.full((n, 1), (1 - d) / n)}


def _markov_inputs(rng):
    n = 10
    return {"P": column_stochastic(rng, n).T, "p0": distribution(rng, n)}


def _markov_ref(x):
    return {"p": mpow(x["P"].T, 8) @ col(x["p0"])}


def _pagerank_solve_inputs(rng):
    return {"M": column_stochastic(rng, 10), "d": 0.85}


def _pagerank_solve_ref(x):
    n = x["M"].shape[0]
    return {"r": np.linalg.solve(np.eye(n) - x["d"] * x["M"], np.full((n, 1), 0.15 / n))}


def _personalised_inputs(rng):
    S = rng.random((10, 3))
    return {"M": column_stochastic(rng, 10), "S": S / S.sum(axis=0), "d": 0.85}


def _personalised_ref(x):
    n = x["M"].shape[0]
    return {"R": np.linalg.solve(np.eye(n) - x["d"] * x["M"], (1 - x["d"]) * x["S"])}


EXAMPLES_UNDER_TEST = [
    Example("powers", lambda rng: {"A": contraction(rng, 10)}, _powers_ref),
    Example("ols", _ols_inputs, _ols_ref),
    Example("ols_inv", _ols_inputs, _ols_ref),
    Example("sums_of_powers", lambda rng: {"A": contraction(rng, 9, 0.8)}, _sums_ref),
    Example("general_form", _general_inputs, _general_ref),
    Example("gradient_descent", _gd_inputs, _gd_ref),
    Example("pagerank", _pagerank_inputs, _pagerank_ref, zero_sum={"M": "U"}),
    Example("markov", _markov_inputs, _markov_ref, zero_sum={"P": "V"}),
    Example("ols_stable", _ols_inputs, _ols_ref),
    Example("pagerank_solve", _pagerank_solve_inputs, _pagerank_solve_ref,
            zero_sum={"M": "U"}),
    Example("pagerank_personalised", _personalised_inputs, _personalised_ref,
            zero_sum={"M": "U"}),
]
BY_NAME = {e.name: e for e in EXAMPLES_UNDER_TEST}
NAMES = list(BY_NAME)
N_UPDATES = 8


@dataclass
class Scenario:
    """Initial inputs, a sequence of updates, and the inputs after each update."""

    inputs: Inputs
    updates: list[Update]
    after: list[Inputs]  # after[i]: inputs after updates[: i + 1]


def _seed(name: str) -> int:
    return zlib.crc32(name.encode())


def make_scenario(ex: Example, dynamic: list[str]) -> Scenario:
    """``N_UPDATES`` updates cycling over the dynamic inputs, ranks 1, 2, 1, 2, ..."""
    rng = np.random.default_rng(_seed(ex.name))
    inputs = ex.make_inputs(rng)
    current = {k: (np.array(v, dtype=float) if isinstance(v, np.ndarray) else v)
               for k, v in inputs.items()}
    updates, after = [], []
    for i in range(N_UPDATES):
        name = dynamic[i % len(dynamic)]
        X = current[name]
        shape = (X.shape[0], 1 if X.ndim == 1 else X.shape[1])
        rank = 1 + i % 2
        U, V = low_rank(rng, shape, rank, ex.update_size * np.linalg.norm(X),
                        (ex.zero_sum or {}).get(name))
        if rank == 1 and i % 4 == 0:  # rank 1 given as 1-D vectors, as users may
            U, V = U[:, 0], V[:, 0]
        updates.append((name, U, V))
        delta = U.reshape(len(U), -1) @ V.reshape(len(V), -1).T
        current = dict(current)
        current[name] = X + (delta.reshape(X.shape) if X.ndim == 1 else delta)
        after.append(current)
    return Scenario(inputs, updates, after)


# ------------------------------------------------------------------ fixtures
_PROGRAMS: dict[str, linview.CompiledProgram] = {}
_SCENARIOS: dict[str, Scenario] = {}


def program(name: str) -> linview.CompiledProgram:
    if name not in _PROGRAMS:
        _PROGRAMS[name] = linview.compile_file(BY_NAME[name].path)
    return _PROGRAMS[name]


def dynamic_inputs(prog) -> list[str]:
    return [d.name for d in prog.program.inputs if d.dynamic]


def scenario(name: str) -> Scenario:
    if name not in _SCENARIOS:
        _SCENARIOS[name] = make_scenario(BY_NAME[name], dynamic_inputs(program(name)))
    return _SCENARIOS[name]


def replay(prog, sc: Scenario, check: Callable[[object, Inputs], None] | None = None):
    """Load the initial inputs, apply every update (calling ``check`` after each), and
    return the live views."""
    views = prog.load(**sc.inputs)
    for (name, U, V), inputs in zip(sc.updates, sc.after, strict=True):
        views.update(name, U, V)
        if check is not None:
            check(views, inputs)
    return views


# ------------------------------------------------------------------ tests
def test_every_example_is_tested():
    assert sorted(p.stem for p in EXAMPLES.glob("*.m")) == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_declared_inputs(name):
    prog = program(name)
    sc = scenario(name)
    decl = {d.name: d for d in prog.program.inputs}
    assert list(decl) == list(sc.inputs)  # parameter order
    assert dynamic_inputs(prog), f"{name} has no dynamic input"
    for d in decl.values():
        assert d.scalar == isinstance(sc.inputs[d.name], float)
        if d.scalar:
            assert not d.dynamic


@pytest.mark.parametrize("name", NAMES)
def test_evaluation_matches_numpy(name):
    ex, prog, sc = BY_NAME[name], program(name), scenario(name)
    views = prog.load(**sc.inputs)
    want = ex.reference(sc.inputs)
    assert set(views.outputs) == set(want)
    for out, ref in want.items():
        assert views.outputs[out].shape == ref.shape, out
        assert rel_err(views.outputs[out], ref) <= 1e-9, out


@pytest.mark.parametrize("name", NAMES)
def test_updates_match_reevaluation(name):
    ex, prog, sc = BY_NAME[name], program(name), scenario(name)
    assert len({u[0] for u in sc.updates}) == len(dynamic_inputs(prog))

    def check(views, inputs):
        for out, ref in ex.reference(inputs).items():
            assert rel_err(views[out], ref) <= 1e-8, out

    views = replay(prog, sc, check)
    fresh = prog.load(**sc.after[-1]).outputs
    for out, ref in fresh.items():
        assert rel_err(views.outputs[out], ref) <= 1e-8, out
    for inp in dynamic_inputs(prog):  # the inputs themselves are maintained too
        want = sc.after[-1][inp]
        assert rel_err(views[inp], col(want) if want.ndim == 1 else want) <= 1e-12, inp
    assert views.verify() <= 1e-8
    assert views.stats["fallbacks"] == 0, "a trigger fell back to re-evaluation"
    assert views.stats["updates"] == N_UPDATES


@pytest.mark.parametrize("strategy", ["incr", "hybrid"])
@pytest.mark.parametrize("name", NAMES)
def test_forced_strategy_matches_reevaluation(name, strategy):
    """Every view maintained by one strategy (not the cost model's choice)."""
    sc = scenario(name)
    prog = linview.compile_file(BY_NAME[name].path, strategy=strategy)
    views = replay(prog, sc)
    for out, ref in BY_NAME[name].reference(sc.after[-1]).items():
        assert rel_err(views[out], ref) <= 1e-8, out
    assert views.verify() <= 1e-8
    assert views.stats["fallbacks"] == 0


# ------------------------------------------------------------------ Octave conformance
_OCTAVE_RESULTS: dict[str, list[dict[str, np.ndarray]]] = {}


def octave_results(name: str) -> list[dict[str, np.ndarray]]:
    """Octave's outputs on the initial inputs and on the inputs after all updates (one
    Octave process per example, shared by the tests below)."""
    if not octave_available():
        pytest.skip("octave-cli (GNU Octave) is not installed")
    if name not in _OCTAVE_RESULTS:
        sc = scenario(name)
        outs = [o for o, _ in program(name).program.outputs]
        _OCTAVE_RESULTS[name] = run_octave_many(BY_NAME[name].path,
                                                [sc.inputs, sc.after[-1]], outs,
                                                fail_on_warning=True)
    return _OCTAVE_RESULTS[name]


@pytest.mark.octave
@pytest.mark.parametrize("name", NAMES)
def test_octave_agrees_with_evaluation(name):
    octave = octave_results(name)[0]
    mine = program(name).load(**scenario(name).inputs).outputs
    assert set(octave) == set(mine)
    for out, ref in octave.items():
        assert mine[out].shape == ref.shape, out
        assert rel_err(mine[out], ref) <= 1e-9, out


@pytest.mark.octave
@pytest.mark.parametrize("name", NAMES)
def test_octave_agrees_after_updates(name):
    octave = octave_results(name)[1]
    views = replay(program(name), scenario(name))
    for out, ref in octave.items():
        assert rel_err(views[out], ref) <= 1e-8, out


@pytest.mark.octave
def test_octave_runner_reports_octave_errors(tmp_path):
    if not octave_available():
        pytest.skip("octave-cli (GNU Octave) is not installed")
    bad = tmp_path / "bad.m"
    bad.write_text("function y = bad(x)\n  y = x * ones(3, 3);\nend\n")
    with pytest.raises(OctaveError, match="nonconformant"):
        run_octave(bad, {"x": np.ones((2, 2))}, ["y"])
    assert run_octave(bad, {"x": 2.0}, ["y"])["y"].shape == (3, 3)
    singular = tmp_path / "singular.m"
    singular.write_text("function y = singular(x)\n  y = inv(x);\nend\n")
    run_octave(singular, {"x": np.ones((2, 2))}, ["y"])  # Octave only warns
    with pytest.raises(OctaveError, match="singular"):
        run_octave(singular, {"x": np.ones((2, 2))}, ["y"], fail_on_warning=True)
