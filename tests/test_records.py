"""Every update-record kind against re-evaluation from inputs modified directly, and the
input file formats of ``linview run``."""

import json

import numpy as np
import pytest
import scipy.io
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import linview
from linview.app import input_files
from linview.app.records import parse_line
from linview.app.stream import Stream, batches
from linview.errors import InputError

GRAM = ("function [G, b, s] = gram(X, Y)\n %#linview dims X(m,n) Y(m,p)\n"
        " G = X' * X;\n b = X' * Y;\n s = sum(X' * Y);\nend\n")
M, N = 7, 3
PROG = linview.compile(GRAM, name="gram")

val = st.floats(-2, 2, allow_nan=False).map(lambda x: round(x, 3))


def vec(n):
    return st.lists(val, min_size=n, max_size=n)


def idx(n):
    return st.integers(1, n)


def record():
    mode = st.sampled_from(["add", "set", "delta"])
    inp = st.sampled_from([("X", N), ("Y", 1)])
    return st.one_of(
        st.builds(lambda i, u, v: {"input": "X", "u": u, "v": v}, st.just(0), vec(M), vec(N)),
        st.builds(lambda U, V: {"input": "X", "U": U, "V": V},
                  st.lists(vec(M), min_size=2, max_size=2), st.lists(vec(N), min_size=2,
                                                                     max_size=2)),
        inp.flatmap(lambda t: st.builds(lambda i, md, d: {"input": t[0], "row": i, md: d},
                                        idx(M), mode, vec(t[1]))),
        inp.flatmap(lambda t: st.builds(lambda j, md, d: {"input": t[0], "col": j, md: d},
                                        idx(t[1]), mode, vec(M))),
        inp.flatmap(lambda t: st.builds(lambda i, j, md, d: {"input": t[0], "cell": [i, j],
                                                             md: d},
                                        idx(M), idx(t[1]), mode, val)),
        st.builds(lambda x, y: {"observe": {"X": x, "Y": y}}, vec(N), vec(1)),
        st.builds(lambda i, x, y: {"observe": {"X": x, "Y": y}, "row": i}, idx(M), vec(N),
                  vec(1)),
        st.builds(lambda i: {"remove": i}, idx(M)),
        st.builds(lambda i: {"remove": i, "inputs": ["Y"]}, idx(M)),
        st.builds(lambda lam: {"forget": lam}, st.floats(0.5, 1)),
        st.builds(lambda c: {"scale": c, "inputs": ["X"]}, st.sampled_from([-2.0, 0.5, 3.0])),
    )


def apply_directly(rec: dict, A: dict, ring: list) -> None:
    """The record's meaning, written out on the arrays (1-based indices)."""
    if "observe" in rec:
        i = rec["row"] - 1 if "row" in rec else ring[0] % M
        ring[0] += "row" not in rec
        for k, v in rec["observe"].items():
            A[k][i] = v
        return
    if "forget" in rec or "scale" in rec:
        c = np.sqrt(rec["forget"]) if "forget" in rec else rec["scale"]
        for k in rec.get("inputs", ["X", "Y"]):
            A[k] *= c
        return
    if "remove" in rec:
        for k in rec.get("inputs", ["X", "Y"]):
            A[k][rec["remove"] - 1] = 0
        return
    X = A[rec["input"]]
    if "u" in rec:
        X += np.outer(rec["u"], rec["v"])
    elif "U" in rec:
        X += np.array(rec["U"]).T @ np.array(rec["V"])
    else:
        mode = "set" if "set" in rec else "add"
        d = rec.get("set", rec.get("add", rec.get("delta")))
        key = ((rec["row"] - 1, slice(None)) if "row" in rec else
               (slice(None), rec["col"] - 1) if "col" in rec else
               (rec["cell"][0] - 1, rec["cell"][1] - 1))
        X[key] = d if mode == "set" else X[key] + np.asarray(d)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recs=st.lists(st.tuples(record(), st.sampled_from([None, 1, 2])), min_size=1,
                     max_size=10),
       max_batch=st.integers(1, 4), seed=st.integers(0, 3))
def test_every_record_kind_matches_reevaluation(recs, max_batch, seed):
    rng = np.random.default_rng(seed)
    X, Y = rng.standard_normal((M, N)), rng.standard_normal((M, 1))
    s = Stream(PROG, inputs=[], load_options={"X": X.copy(), "Y": Y.copy()})
    lines = [json.dumps({**r, **({"batch": b} if b is not None else {})}) for r, b in recs]
    records = [parse_line(line, f"t:{i + 1}") for i, line in enumerate(lines)]
    for batch in batches(iter(records), max_batch):
        s.apply_batch(batch)
    A, ring = {"X": X.copy(), "Y": Y.copy()}, [0]
    for r, _ in recs:
        apply_directly(r, A, ring)
    np.testing.assert_allclose(s.views["X"], A["X"], atol=1e-12)
    np.testing.assert_allclose(s.views["Y"], A["Y"], atol=1e-12)
    ref = PROG.load(X=A["X"], Y=A["Y"]).outputs
    for k, v in ref.items():
        np.testing.assert_allclose(s.views[k], v, atol=1e-9 * max(1, np.abs(v).max()))


OLS = "function beta = ols(X, Y)\n beta = (X' * X) \\ (X' * Y);\nend\n"


def test_sliding_window_matches_lstsq_over_the_window():
    """A ring of W rows: after each observation, beta is least squares over the last W."""
    rng = np.random.default_rng(5)
    W, n, T = 12, 3, 40
    xs, ys = rng.standard_normal((T, n)), rng.standard_normal((T, 1))
    prog = linview.compile(OLS, name="ols")
    s = Stream(prog, inputs=[], load_options={"X": xs[:W].copy(), "Y": ys[:W].copy()})
    s.pos["ring"] = 0  # the window starts full with observations 1..W
    for t in range(W, T):
        rec = json.dumps({"observe": {"X": xs[t].tolist(), "Y": ys[t].tolist()}})
        s.apply_batch([parse_line(rec, f"t:{t}")])
        beta, *_ = np.linalg.lstsq(xs[t - W + 1:t + 1], ys[t - W + 1:t + 1], rcond=None)
        np.testing.assert_allclose(s.views["beta"], beta, rtol=1e-8, atol=1e-10)


def test_removed_observation_matches_lstsq_without_it():
    rng = np.random.default_rng(6)
    X, Y = rng.standard_normal((20, 4)), rng.standard_normal((20, 1))
    prog = linview.compile(OLS, name="ols")
    s = Stream(prog, inputs=[], load_options={"X": X.copy(), "Y": Y.copy()})
    s.apply_batch([parse_line('{"remove": 5, "batch": 1}', "t:1"),
                   parse_line('{"remove": 9, "batch": 1}', "t:2")])
    keep = [i for i in range(20) if i not in (4, 8)]
    beta, *_ = np.linalg.lstsq(X[keep], Y[keep], rcond=None)
    np.testing.assert_allclose(s.views["beta"], beta, rtol=1e-9)


@pytest.mark.parametrize("fmt", ["npy", "npz", "npz:key", "mat", "mat:key", "parquet", "csv"])
def test_input_formats(tmp_path, fmt):
    A = np.arange(12.0).reshape(4, 3) / 7
    kind, _, key = fmt.partition(":")
    p = tmp_path / f"a.{kind}"
    if kind == "npy":
        np.save(p, A)
    elif kind == "npz":
        np.savez(p, **({"key": A, "other": A * 2} if key else {"A": A}))
    elif kind == "mat":
        scipy.io.savemat(p, {"key": A, "other": A * 2} if key else {"whatever": A})
    elif kind == "parquet":
        from linview.backends.spark.session import write_parquet

        write_parquet(A, p)
    else:
        np.savetxt(p, A, delimiter=",", fmt="%.17g")
    name, value = input_files.load(f"A={p}" + (f":{key}" if key else ""))
    assert name == "A"
    np.testing.assert_array_equal(np.asarray(value).reshape(4, 3), A)


def test_input_errors_say_what_is_accepted(tmp_path):
    (tmp_path / "a.txt").write_text("1 2")
    with pytest.raises(InputError, match="unsupported file type '.txt'"):
        input_files.load(f"A={tmp_path / 'a.txt'}")
    np.savez(tmp_path / "b.npz", x=np.ones(2), y=np.ones(2))
    with pytest.raises(InputError, match="holds several arrays; pick one"):
        input_files.load(f"A={tmp_path / 'b.npz'}")
    with pytest.raises(InputError, match="has no array 'z'"):
        input_files.load(f"A={tmp_path / 'b.npz'}:z")
    with pytest.raises(InputError, match="bad --input"):
        input_files.load("no-equals-sign")


@pytest.mark.parametrize("same_batch", [False, True])
def test_forgetting_factor_matches_weighted_lstsq(same_batch):
    """``forget λ`` before each new observation: observation i weighs λ^(later forgets)."""
    rng = np.random.default_rng(7)
    cap, n, n0, T, lam = 30, 3, 8, 15, 0.9
    X, Y = np.zeros((cap, n)), np.zeros((cap, 1))
    X[:n0], Y[:n0] = rng.standard_normal((n0, n)), rng.standard_normal((n0, 1))
    prog = linview.compile(OLS, name="ols")
    s = Stream(prog, inputs=[], load_options={"X": X.copy(), "Y": Y.copy()})
    evaluations = spy_evaluations(s.views)
    weights = np.zeros(cap)
    weights[:n0] = 1.0
    for t in range(T):
        x, y = rng.standard_normal(n), float(rng.standard_normal())
        X[n0 + t], Y[n0 + t] = x, y
        extra = {"batch": t} if same_batch else {}
        recs = [{"forget": lam, **extra},
                {"observe": {"X": x.tolist(), "Y": [y]}, "row": n0 + t + 1, **extra}]
        lines = [parse_line(json.dumps(r), f"t:{t}") for r in recs]
        for batch in batches(iter(lines), 1):
            s.apply_batch(batch)
        weights *= lam
        weights[n0 + t] = 1.0
        w = np.sqrt(weights)[:, None]
        beta, *_ = np.linalg.lstsq(w * X, w * Y, rcond=None)
        np.testing.assert_allclose(s.views["beta"], beta, rtol=1e-8, atol=1e-12)
    # every forget was a scaling of the views, none a re-evaluation from the inputs
    assert evaluations == [] and s.views.stats["refreshes"] == 0
    assert s.views.verify() < 1e-9


def spy_evaluations(views) -> list:
    """Record every evaluation of the views from their inputs (``_reevaluate``, as the
    fallback of :func:`scale_views` and a refresh do, or ``_evaluate``)."""
    calls: list = []

    def spy(name, orig):
        def call(*a, **k):
            calls.append(name)
            return orig(*a, **k)
        return call

    for name in ("_reevaluate", "_evaluate"):
        setattr(views, name, spy(name, getattr(views, name)))
    return calls


def test_scaling_factors_of_views_follow_their_degrees():
    from linview.compiler.scaling import factors

    prog = linview.compile(OLS, name="ols")
    f = factors(prog.program, {"X": 2.0, "Y": 3.0})
    assert f == {"X": 2.0, "Y": 3.0, "beta_arg": 4.0, "beta_inv": 0.25, "beta_p1": 6.0,
                 "beta": 1.5}
    inhom = linview.compile("function B = f(A)\n B = inv(A + eye(3));\nend\n", name="f")
    assert factors(inhom.program, {"A": 2.0}) is None


def test_scale_record_on_an_inhomogeneous_program_reevaluates():
    prog = linview.compile("function B = f(A)\n B = inv(A + eye(3)) * A;\nend\n", name="f")
    A = np.random.default_rng(8).standard_normal((3, 3)) / 4
    s = Stream(prog, inputs=[], load_options={"A": A.copy()})
    evaluations = spy_evaluations(s.views)
    s.apply_batch([parse_line('{"scale": 1.5}', "t:1")])
    assert "_reevaluate" in evaluations  # the spy sees the fallback where there is one
    np.testing.assert_allclose(s.views["B"], np.linalg.inv(1.5 * A + np.eye(3)) @ (1.5 * A),
                               rtol=1e-12)
