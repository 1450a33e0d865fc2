"""Differential, property-based tests: random programs × random low-rank update sequences.

Oracles, from most to least independent of linview:

1. ``GenProgram.evaluate``: NumPy evaluation built by the generator (tests/oracle/)
   from the same random choices that produced the source text; it never sees linview's
   AST or IR.  It checks the front end + lowering + reference interpreter, and the
   generated module's re-evaluation path.
2. ``interp.evaluate`` of the compiled plan's program on the current inputs: the ground
   truth for every internal view after every update.
3. ``interp.run_trigger``: the reference execution of a derived trigger, against the
   generated module's ``on_update_<X>``.

Besides: refused updates (NaN, wrong shape or name, static input, rank 0...) raise
UpdateError and leave every view byte-for-byte unchanged; overflowing updates are refused
atomically or leave finite views; identifiers the generated code might use itself (U, V,
d, t0, self, lambda, ...) work as Octave names; minimal reproducers of the bugs found are
replayed deterministically (open ones as strict xfails).

Errors are measured as ``max|a - b| / max(1, max|b|)``; programs whose intermediates grow
beyond :data:`BOUND` are rejected (``assume``) so that round-off cannot reach the
tolerances.  ``LINVIEW_FUZZ_SCALE=N`` multiplies every example count (a long bug hunt);
the default run takes about 40 s on two cores.
"""

from __future__ import annotations

import functools
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, assume, given, note, settings
from hypothesis import strategies as st
from oracle import MODELS, Case, GenProgram, cases, programs
from oracle.program import bindings

import linview
from linview.compiler import interp
from linview.compiler.lower import lower
from linview.frontend.parser import parse

#: multiply every max_examples by this (e.g. LINVIEW_FUZZ_SCALE=20 for a long bug hunt)
SCALE = float(os.environ.get("LINVIEW_FUZZ_SCALE", "1"))
BOUND = 1e4  # largest magnitude of any intermediate we accept
TOL_EVAL = 1e-9  # re-evaluation paths vs the NumPy oracle
TOL_INCR = 1e-8  # incrementally maintained views vs re-evaluation

# no "explain" phase: it re-runs failing examples many times and compiling is not free
SETTINGS = dict(deadline=None, report_multiple_bugs=False,
                phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target,
                        Phase.shrink],
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])




def examples(n: int) -> int:
    return max(1, round(n * SCALE))


# ---------------------------------------------------------------------------- helpers
def rel_err(a, b) -> float:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        return np.inf
    if b.size == 0:
        return 0.0
    return float(np.max(np.abs(a - b))) / max(1.0, float(np.max(np.abs(b))))


def assert_close(got, want, tol: float, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != expected {want.shape}"
    err = rel_err(got, want)
    assert err <= tol, f"{what}: relative error {err:.3g} > {tol:g}"


@functools.lru_cache(maxsize=256)
def _compile_cached(source: str, strategy, dims: tuple, model: str):
    return linview.compile(source, name="prog", dims=dict(dims), strategy=strategy,
                           model=model)


def compile_prog(p: GenProgram, strategy=None, model: str = "auto", plan_dims: bool = True):
    dims = tuple(sorted(p.compile_dims.items())) if plan_dims else ()
    return _compile_cached(p.source, strategy, dims, model)


def compile_case(case: Case, strategy=None):
    return compile_prog(case.prog, strategy, case.model, case.plan_dims)




def good_inputs(p: GenProgram, seed: int) -> dict[str, np.ndarray]:
    inputs = p.make_inputs(seed)
    assume(p.max_magnitude(inputs) < BOUND)
    return inputs


def as_given(inputs: dict[str, np.ndarray], p: GenProgram, seed: int) -> dict:
    """The inputs as a user might pass them: scalars sometimes as Python floats."""
    out = {}
    for k, v in inputs.items():
        if p.inputs[k].kind == "scalar" and (seed + len(k)) % 2:
            out[k] = float(v[0, 0])
        else:
            out[k] = v.copy()
    return out


def check_views(views, compiled, p: GenProgram, current: dict[str, np.ndarray],
                what: str) -> None:
    """Every view of ``views`` equals re-evaluation on ``current`` (three ways)."""
    program = compiled.program
    # views read only through an inverse are evaluated, not kept (Plan.transient)
    statements = {s.name for s in program.statements} - compiled.plan.transient
    assert set(views._views) == set(current) | statements, what
    ref = interp.evaluate(program, current, bindings(program, current))
    for name, arr in views._views.items():
        want = current[name] if name in current else ref[name]
        assert_close(arr, want, TOL_INCR, f"{what}: view {name}")
    expected = p.evaluate(current)
    for o in p.outputs:
        assert_close(views[o], expected[o], TOL_INCR, f"{what}: output {o} vs NumPy oracle")
    fresh = compiled.load(**current)
    for name, arr in fresh._views.items():
        assert_close(views._views[name], arr, TOL_INCR, f"{what}: view {name} vs fresh load")


def run_case(case: Case, strategy) -> None:
    p = case.prog
    note(p.source)
    compiled = compile_case(case, strategy)
    inputs = good_inputs(p, case.seed)
    current = {k: v.copy() for k, v in inputs.items()}
    trajectory = [current]
    for up in case.updates:  # reject sequences that drive magnitudes out of range first
        U, V = p.make_update(up.name, up.rank, up.seed, up.kind)
        nxt = dict(trajectory[-1])
        nxt[up.name] = nxt[up.name] + U @ V.T
        assume(p.max_magnitude(nxt) < BOUND)
        trajectory.append(nxt)
    views = compiled.load(**as_given(inputs, p, case.seed))
    check_views(views, compiled, p, current, "after load")
    for i, up in enumerate(case.updates):
        U, V = p.make_update(up.name, up.rank, up.seed, up.kind)
        if up.rank == 1 and up.seed % 2:  # 1-D factors for rank 1
            views.update(up.name, U[:, 0], V[:, 0])
        else:
            views.update(up.name, U, V)
        check_views(views, compiled, p, trajectory[i + 1],
                    f"after update {i + 1} ({up.name}, rank {up.rank}, strategy {strategy})")


# ---------------------------------------------------------------------------- 1. oracle
@settings(max_examples=examples(80), **SETTINGS)
@given(p=programs(), seed=st.integers(0, 2**32 - 1), model=st.sampled_from(MODELS))
def test_interpreter_matches_numpy_oracle(p: GenProgram, seed: int, model: str):
    """Lowering + reference interpreter (raw and optimized IR) and the generated module's
    re-evaluation agree with the generator's own NumPy evaluation."""
    inputs = good_inputs(p, seed)
    expected = p.evaluate(inputs)
    raw = lower(parse(p.source, "prog.m"), p.source, "prog.m")
    got = interp.evaluate(raw, inputs, bindings(raw, inputs))
    for o in p.outputs:
        assert_close(got[o], expected[o], TOL_EVAL, f"interp (raw IR) output {o}")
    compiled = compile_prog(p, model=model)
    got = interp.evaluate(compiled.program, inputs, bindings(compiled.program, inputs))
    for o in p.outputs:
        assert_close(got[o], expected[o], TOL_EVAL, f"interp (optimized IR) output {o}")
    views = compiled.load(**as_given(inputs, p, seed))
    outs = views.outputs
    assert list(outs) == list(p.outputs)
    for o in p.outputs:
        assert_close(outs[o], expected[o], TOL_EVAL, f"generated module output {o}")


# ---------------------------------------------------------------------------- 2. updates
@settings(max_examples=examples(150), **SETTINGS)
@given(case=cases())
def test_views_track_reevaluation_default_strategy(case: Case):
    run_case(case, None)


@pytest.mark.parametrize("strategy", ["incr", "hybrid", "reeval"])
@settings(max_examples=examples(60), **SETTINGS)
@given(case=cases())
def test_views_track_reevaluation_forced_strategy(case: Case, strategy: str):
    run_case(case, strategy)


@settings(max_examples=examples(60), **SETTINGS)
@given(case=cases(tricky_names=True))
def test_any_octave_identifier_can_name_inputs_views_and_sizes(case: Case):
    """Names that the generated code might use itself (U, V, k, d, t0, self, lambda, np,
    inputs, tolerance...) are valid Octave identifiers and must just work."""
    run_case(case, None)


# ---------------------------------------------------------------------------- 3. triggers
@settings(max_examples=examples(100), **SETTINGS)
@given(case=cases(max_updates=1),
       strategy=st.sampled_from([None, "incr", "hybrid", "reeval"]))
def test_reference_trigger_matches_generated_module(case: Case, strategy):
    """``interp.run_trigger`` on the plan's trigger gives the same new views as the
    generated ``on_update_<X>``, and views outside the trigger do not change."""
    p = case.prog
    note(p.source)
    compiled = compile_case(case, strategy)
    inputs = good_inputs(p, case.seed)
    up = case.updates[0]
    U, V = p.make_update(up.name, up.rank, up.seed, up.kind)
    after = dict(inputs)
    after[up.name] = inputs[up.name] + U @ V.T
    assume(p.max_magnitude(after) < BOUND)
    views = compiled.load(**inputs)
    old = {k: v.copy() for k, v in views._views.items()}
    transient = compiled.plan.transient  # evaluated to be inverted, not kept by the module
    before = interp.evaluate(compiled.program, inputs, bindings(compiled.program, inputs))
    env = {**old, **{name: before[name] for name in transient}}
    trigger = compiled.plan.triggers[up.name]
    new = interp.run_trigger(trigger, env, U, V, dict(views.dims))
    views.update(up.name, U, V)
    assert set(new) - transient <= set(views._views)
    assert up.name in new
    ref = interp.evaluate(compiled.program, after, bindings(compiled.program, after))
    ref.update(after)
    for name, val in new.items():
        assert_close(val, ref[name], TOL_INCR, f"run_trigger {name} vs re-evaluation")
        if name not in transient:
            assert_close(views._views[name], val, TOL_INCR, f"module {name} vs run_trigger")
    if views.stats["fallbacks"] == 0:
        for name in set(views._views) - set(new):
            assert np.array_equal(views._views[name], old[name]), \
                f"view {name} is outside the trigger of {up.name} but changed"


# ---------------------------------------------------------------------------- 4. atomicity
BAD_KINDS = ["nan_U", "inf_V", "rows_U", "rows_V", "rank_mismatch", "rank0", "unknown",
             "static", "ndim3", "not_numeric"]


def _snapshot(views) -> dict:
    return {k: (v.shape, v.dtype.str, v.tobytes(order="A")) for k, v in views._views.items()}


def _bad_update(kind: str, p: GenProgram, name: str, seed: int):
    U, V = p.make_update(name, 2, seed)
    r, c = p.shape_of(name)
    if kind == "nan_U":
        U[0, 1] = np.nan
    elif kind == "inf_V":
        V[-1, 0] = np.inf
    elif kind == "rows_U":
        U = np.ones((r + 1, 2))
    elif kind == "rows_V":
        V = np.ones((c + 2, 2))
    elif kind == "rank_mismatch":
        V = V[:, :1]
    elif kind == "rank0":
        U, V = np.zeros((r, 0)), np.zeros((c, 0))
    elif kind == "unknown":
        name = "no_such_input"
    elif kind == "static":
        name = next(n for n in p.inputs if n not in p.dynamic)
        r, c = p.shape_of(name)
        U, V = np.ones((r, 1)), np.ones((c, 1))
    elif kind == "ndim3":
        U = U.reshape(r, 2, 1)
    elif kind == "not_numeric":
        U = [["a", "b"]] * r
    return name, U, V


@settings(max_examples=examples(80), **SETTINGS)
@given(case=cases(max_updates=2), data=st.data())
def test_bad_update_raises_and_changes_nothing(case: Case, data):
    p = case.prog
    note(p.source)
    compiled = compile_case(case)
    inputs = good_inputs(p, case.seed)
    views = compiled.load(**inputs)
    first = case.updates[0]
    current = dict(inputs)
    U, V = p.make_update(first.name, first.rank, first.seed, first.kind)
    current[first.name] = current[first.name] + U @ V.T
    assume(p.max_magnitude(current) < BOUND)
    views.update(first.name, U, V)  # a non-trivial state to protect
    kinds = [k for k in BAD_KINDS if k != "static" or set(p.inputs) - set(p.dynamic)]
    kind = data.draw(st.sampled_from(kinds), label="bad update")
    name, bU, bV = _bad_update(kind, p, first.name, first.seed + 1)
    before = _snapshot(views)
    count = views.updates
    with pytest.raises(linview.UpdateError):
        views.update(name, bU, bV)
    assert _snapshot(views) == before, f"a refused update ({kind}) changed the views"
    assert views.updates == count
    # the module is still usable and consistent
    check_views(views, compiled, p, current, f"after a refused update ({kind})")


@pytest.mark.filterwarnings("ignore::scipy.linalg.LinAlgWarning")
@settings(max_examples=examples(40), **SETTINGS)
@given(case=cases(max_updates=1), scale=st.sampled_from([1e155, 1e200, 1e300]))
def test_overflowing_update_is_refused_atomically_or_stays_finite(case: Case, scale):
    """An update so large that views overflow must either be refused with a
    LinviewError, leaving the state untouched, or leave every view finite."""
    p = case.prog
    note(p.source)
    compiled = compile_case(case)
    inputs = good_inputs(p, case.seed)
    views = compiled.load(**inputs)
    up = case.updates[0]
    U, V = p.make_update(up.name, up.rank, up.seed, up.kind)
    before = _snapshot(views)
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            views.update(up.name, U * scale, V)
    except linview.LinviewError:
        assert _snapshot(views) == before, "a refused update changed the views"
        return
    for name, arr in views._views.items():
        assert np.all(np.isfinite(arr)), f"view {name} is not finite after an accepted update"


# ---------------------------------------------------------------------------- 5. reproducers
# Minimal programs found (and shrunk) by the properties above, replayed deterministically.
# Open bugs are xfail(strict=True): when one is fixed its test XPASSes and fails, as a
# reminder to drop the mark.

def _fixed_inputs(compiled, sizes: dict[str, int], seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for decl in compiled.program.inputs:
        r, c = (int(d.subs({s: sizes[s.name] for s in d.free_symbols})) for d in decl.shape)
        if decl.scalar:
            out[decl.name] = np.array([[0.8]])
        else:
            out[decl.name] = np.eye(r, c) + 0.2 * rng.standard_normal((r, c)) / np.sqrt(r)
    return out


def replay(source: str, sizes: dict[str, int], updates=(), **options):
    """Compile, load and apply ``updates`` ((input, rank) pairs); after load and after
    every update each view must equal the reference interpreter on the current inputs."""
    compiled = linview.compile(source, name="prog", **options)
    inputs = _fixed_inputs(compiled, sizes)
    views = compiled.load(**inputs)
    current = {k: v.copy() for k, v in inputs.items()}
    program = compiled.program
    rng = np.random.default_rng(1)

    def check(what):
        ref = interp.evaluate(program, current, bindings(program, current))
        for name, arr in views._views.items():
            want = current[name] if name in current else ref[name]
            assert_close(arr, want, TOL_INCR, f"{what}: view {name}")

    check("after load")
    for name, rank in updates:
        r, c = current[name].shape
        U, V = 0.1 * rng.standard_normal((r, rank)), 0.1 * rng.standard_normal((c, rank))
        current[name] = current[name] + U @ V.T
        views.update(name, U, V)
        check(f"after update of {name}")
    return views


def _src(*lines: str) -> str:
    return "\n".join(lines) + "\n"


FIXED = [  # found by this suite and since fixed: regression tests
    pytest.param(_src("function y = f(A, s)", "  %#linview scalar s", "  y = 2 * s;", "end"),
                 {"rows_A": 2, "cols_A": 2}, [], id="literal-times-scalar-input"),
    pytest.param(_src("function C = f(A)", "  %#linview dims A(n,n)", "  C = trace(A);",
                      "  C = C * 2;", "end"), {"n": 3}, [("A", 1)],
                 id="scalar-view-times-literal"),
    pytest.param(_src("function W = f(A)", "  %#linview dims A(n,n)", "  W = A;",
                      "  for i = 1:2", "    W = 0.9 * W + A;", "  end", "end"),
                 {"n": 3}, [("A", 2)], id="loop-recurrence-with-scalar-coefficient"),
    pytest.param(_src("function C = f(A)", "  %#linview dims A(n,n)", "  C = 0.5;",
                      "  for i = 1:2", "    C = 0.5 * C + 1;", "  end", "end"),
                 {"n": 3}, [("A", 1)], id="constant-scalar-recurrence"),
    pytest.param(_src("function P = f(A)", "  %#linview dims A(n,n)", "  P = 3;", "end"),
                 {"n": 3}, [("A", 1)], id="constant-output-is-1x1"),
    # W = B' was B.T, which np.asfortranarray does not copy for a vector: W shared B's
    # memory and an update of B was applied twice (verify() could not see it)
    pytest.param(_src("function W = f(B)", "  %#linview dims B(n,1)", "  W = B';", "end"),
                 {"n": 3}, [("B", 1)], id="transpose-of-vector-input-aliases-it"),
    pytest.param(_src("function F = f(A)", "  %#linview dims A(n,n)",
                      "  C = A * ones(size(A, 1), 1);", "  F = C';", "end"),
                 {"n": 3}, [("A", 1)], id="transpose-of-vector-view-aliases-it"),
    pytest.param(_src("function R = f(A)", "  %#linview dims A(n,n)",
                      "  R = [2, eye(1, size(A, 1))];", "end"),
                 {"n": 3}, [("A", 1)], id="literal-block-in-concatenation"),
    pytest.param(_src("function S = f(A, s)", "  %#linview dims A(n,n)", "  %#linview scalar s",
                      "  S = s * inv(2);", "end"), {"n": 3}, [("A", 1)],
                 id="scalar-times-inv-of-literal"),
    pytest.param(_src("function D = f(A)", "  %#linview dims A(n,n)", "  D = inv(0.5)^2;",
                      "end"), {"n": 3}, [("A", 1)], id="power-of-inv-of-literal"),
    pytest.param(_src("function [t0, t1] = f(A, B)", "  %#linview dims A(n,n) B(n,n)",
                      "  t0 = A * B + B * A;", "  t1 = t0 * A * B;", "end"),
                 {"n": 4}, [("A", 1)], id="view-named-like-a-backend-temporary"),
    # inputs named like the update factors were renamed U -> U_2 in the module, and so was
    # their trigger (on_update_U_2), which update('U', ...) could not find
    pytest.param(_src("function C = f(U, V)", "  %#linview dims U(n,n) V(n,n)", "  C = U * V;",
                      "end"), {"n": 4}, [("U", 1), ("V", 2)], id="inputs-named-U-V"),
    pytest.param(_src("function C = f(np, d, lambda)",
                      "  %#linview dims np(n,n) d(n,n) lambda(n,n)",
                      "  C = np * d + lambda;", "end"), {"n": 4},
                 [("np", 1), ("d", 2), ("lambda", 1)], id="inputs-named-np-d-lambda"),
]


# inputs named like the generated module's own parameters and options: the evaluation
# method's `inputs`, the constructor's options, load()'s `self` (fixed: regression tests)
FIXED += [
    pytest.param(
        _src("function C = f(inputs, A)", "  %#linview dims A(n,n) inputs(n,n)",
             "  C = inputs * A;", "end"), {"n": 4}, [("A", 1)], id="input-named-inputs"),
    pytest.param(
        _src("function C = f(tolerance, A)", "  %#linview dims A(n,n) tolerance(n,n)",
             "  C = tolerance * A;", "end"), {"n": 4}, [("A", 1)], id="input-named-tolerance"),
    pytest.param(
        _src("function C = f(self, A)", "  %#linview dims A(n,n) self(n,n)",
             "  C = self * A;", "end"), {"n": 4}, [("A", 1)], id="input-named-self"),
]


def test_size_named_k_is_refused_with_a_clear_error():
    """'k' is reserved for the update rank (a documented restriction, not a crash)."""
    with pytest.raises(linview.ParseError, match="reserved"):
        linview.compile(_src("function C = f(X, Y)", "  %#linview dims X(n,k) Y(k,n)",
                             "  C = X * Y;", "end"), name="f")


@pytest.mark.parametrize("source, sizes, updates", FIXED)
def test_reproducer(source, sizes, updates):
    replay(source, sizes, updates)


# Found by test_views_track_reevaluation_forced_strategy[incr] (fixed: rt.owned).  When the
# argument of an inverse has a dense delta D (re-evaluated or HYBRID) and the inverse is kept
# factored, Woodbury's right factor is W' Q = W' (Q = I): the NumPy module binds it to
# C_inv.T, a view of C_inv's own memory.  Phase 2 updates C_inv in place first, so the
# product's delta U_C (C_inv')ᵀ is applied with the new inverse instead of the old one.
ALIASING = [  # (source, strategy): C = A inv(G) with G's delta dense, the inverse factored
    pytest.param(_src("function C = f(A, X)", "  %#linview dims A(n,n) X(n,n)",
                      "  %#linview dynamic X",
                      "  C = A * inv(eye(size(A, 1)) + (A .* X)' * (A .* X));", "end"),
                 "incr", id="reevaluated-argument"),
    pytest.param(_src("function C = f(A, X)", "  %#linview dims A(n,n) X(n,n)",
                      "  %#linview dynamic X", "  G = eye(size(A, 1)) + X' * X;",
                      "  C = A * inv(G);", "end"),
                 {"G": "hybrid"}, id="hybrid-argument"),
]


@pytest.mark.parametrize("source, strategy", ALIASING)
def test_reproducer_woodbury_factor_aliases_inverse_view(source, strategy):
    replay(source, {"n": 3}, [("X", 1)], strategy=strategy)


# sum(X) without a dimension is resolved at compile time (column sums when the row count
# is a symbol); a single-row X, where Octave would sum the row, is refused at load.
@pytest.mark.parametrize("pragma", ["", "  %#linview dims X(m,n)\n"])
def test_sum_without_dimension_follows_octave_on_a_row(pragma):
    compiled = linview.compile(f"function C = f(X)\n{pragma}  C = sum(X);\nend\n", name="f")
    try:
        views = compiled.load(X=np.array([[1.0, 2.0, 3.0]]))
    except linview.LinviewError:
        return  # refusing the input is also acceptable
    assert views["C"].shape == (1, 1) and views["C"][0, 0] == 6.0
