"""Random well-shaped programs over the wider language (issue 14), checked against an
independent NumPy oracle, against re-evaluation after low-rank updates and, when
``octave-cli`` is installed, against GNU Octave.

The generator keeps variables of four kinds: ``sq`` (n×n), ``col`` (n×1), ``row`` (1×n)
and ``sc`` (1×1).  Each statement applies one template (a construct of the language, its
Octave text and its NumPy meaning) to variables of the kinds it needs; a template with
several outputs (``[q, r] = qr(A)``) is written as whole statements that end by assigning
the result.  Values stay moderate (``exp`` and ``.^`` only on bounded arguments) so that
1e-8 is meaningful.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
import scipy.linalg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import linview

try:  # tests/ may or may not be a package
    from tests.octave_runner import octave_available, run_octave
except ImportError:  # pragma: no cover - depends on how pytest set sys.path
    from octave_runner import octave_available, run_octave

N = 4

# (result kind, operand kinds, Octave template, NumPy meaning)
TEMPLATES = [
    ("sq", "sq,sc", "{0} + {1}", lambda a, b: a + b),
    ("sq", "sq", "2 - {0}", lambda a: 2 - a),
    ("sq", "sq,sq", "{0} .* {1}", lambda a, b: a * b),
    ("sq", "sq", "{0} .^ 2", lambda a: a ** 2),
    ("sq", "sq", "abs({0})", np.abs),
    ("sq", "sq", "sqrt(abs({0}) + 1)", lambda a: np.sqrt(np.abs(a) + 1)),
    ("sq", "sq", "exp(-abs({0}))", lambda a: np.exp(-np.abs(a))),
    ("sq", "sq", "log(1 + abs({0}))", lambda a: np.log(1 + np.abs(a))),
    ("sq", "sq,sc", "max({0}, {1})", np.maximum),
    ("sq", "sq", "min({0}, 0.5)", lambda a: np.minimum(a, 0.5)),
    ("sq", "sq,sq", "{0} * {1} / 4", lambda a, b: a @ b / 4),
    ("sq", "sq", "{0}'", lambda a: a.T),
    ("sq", "sq", "{0} - mean({0})", lambda a: a - a.mean(axis=0, keepdims=True)),
    ("sq", "sq,col", "{0} + {1}", lambda a, b: a + b),
    ("sq", "col", "diag({0})", lambda a: np.diag(a.ravel())),
    ("sq", "sq", "tril({0}) + triu({0})'", lambda a: np.tril(a) + np.triu(a).T),
    ("sq", "sq", "[{0}(:, 2:end), {0}(:, 1)]", lambda a: np.hstack([a[:, 1:], a[:, :1]])),
    ("sq", "sq", "{0}(end:end, :) .* ones(4, 1)", lambda a: a[-1:, :] * np.ones((N, 1))),
    ("sq", "sq", "[{0}(1:2:end, :); {0}(2:2:end, :)]", lambda a: np.vstack([a[::2], a[1::2]])),
    ("col", "col", "[{0}(2:2:end); {0}(1:3:4)]", lambda a: np.vstack([a[1::2], a[0:4:3]])),
    ("sq", "sq", "({0} + {0}') / 2 + 4 * eye(4)", lambda a: (a + a.T) / 2 + 4 * np.eye(N)),
    ("sq", "sq", "chol({0}' * {0} + eye(4))",
     lambda a: np.linalg.cholesky(a.T @ a + np.eye(N)).T),
    ("sq", "sq", "pinv({0} + 3 * eye(4))", lambda a: np.linalg.pinv(a + 3 * np.eye(N))),
    # several outputs: the template is whole statements, {n} the name of the result
    ("sq", "sq", "[{n}_q, {n}_r] = qr({0}); {n} = {n}_r", lambda a: np.linalg.qr(a)[1]),
    ("sq", "sq", "[{n}_q, {n}_r] = qr({0}, 0); {n} = {n}_q' * {0} + {n}_q",
     lambda a: (lambda q, r: r + q)(*np.linalg.qr(a))),
    ("sq", "sq", "[{n}_l, {n}_u, {n}_p] = lu({0} + 4 * eye(4)); {n} = {n}_p' * {n}_l + {n}_u",
     lambda a: (lambda p, l, u: p @ l + u)(*scipy.linalg.lu(a + 4 * np.eye(N)))),
    ("sq", "sq", "[{n}_l, {n}_u] = lu({0} + 4 * eye(4)); {n} = {n}_l - {n}_u",
     lambda a: np.subtract(*scipy.linalg.lu(a + 4 * np.eye(N), permute_l=True))),
    ("col", "sq", "{0}(:, 1)", lambda a: a[:, :1]),
    ("col", "sq", "sum({0}, 2)", lambda a: a.sum(axis=1, keepdims=True)),
    ("col", "sq", "max({0}, [], 2)", lambda a: a.max(axis=1, keepdims=True)),
    ("col", "sq", "mean({0}, 2)", lambda a: a.mean(axis=1, keepdims=True)),
    ("col", "sq", "diag({0})", lambda a: np.diag(a).reshape(-1, 1)),
    ("col", "sq,col", "{0} * {1}", lambda a, b: a @ b),
    ("col", "col,sc", "{0} - {1}", lambda a, b: a - b),
    ("row", "sq", "sum({0})", lambda a: a.sum(axis=0, keepdims=True)),
    ("row", "sq", "min({0})", lambda a: a.min(axis=0, keepdims=True)),
    ("row", "sq", "{0}(2, :)", lambda a: a[1:2, :]),
    ("row", "col", "{0}'", lambda a: a.T),
    ("sc", "col", "norm({0})", lambda a: np.linalg.norm(a)),
    ("sc", "col", "norm({0}, 1)", lambda a: np.abs(a).sum()),
    ("sc", "sq", "norm({0}, Inf)", lambda a: np.abs(a).sum(axis=1).max()),
    ("sc", "sq", "trace({0})", np.trace),
    ("sc", "sq", "norm({0}, 'fro') + norm({0})",
     lambda a: np.linalg.norm(a) + np.linalg.norm(a, 2)),
    ("sc", "sq", "{0}(1, end)", lambda a: a[0, -1]),
    ("sc", "col", "max({0})", np.max),
    ("sc", "row", "{0} * {0}'", lambda a: (a @ a.T)[0, 0]),
    ("sc", "sq", "numel({0}) + length({0}(:, 1))", lambda a: a.size + a.shape[0]),
    ("sc", "row", "[{n}_r, {n}_c] = size({0}); {n} = 10 * {n}_r + {n}_c",
     lambda a: 10 * a.shape[0] + a.shape[1]),
]
INPUTS = {"A": "sq", "B": "sq", "v": "col", "s": "sc"}


@st.composite
def programs(draw):
    kinds = dict(INPUTS)
    lines, steps = [], []
    for i in range(draw(st.integers(2, 5))):
        have = set(kinds.values())
        usable = [t for t in TEMPLATES if set(t[1].split(",")) <= have]
        result, operands, text, fn = draw(st.sampled_from(usable))
        args = []
        for kind in operands.split(","):
            names = sorted(n for n, kd in kinds.items() if kd == kind)
            args.append(draw(st.sampled_from(names)))
        name = f"t{i}"
        if "{n}" in text:
            lines.append(f"  {text.format(*args, n=name)};")
        else:
            lines.append(f"  {name} = {text.format(*args)};")
        steps.append((name, fn, args))
        kinds[name] = result
    outs = [s[0] for s in steps]
    src = ("function [" + ", ".join(outs) + "] = fuzz(A, B, v, s)\n" + "\n".join(lines)
           + "\nend\n")
    return src, steps, outs


def oracle(steps, inputs):
    env = {k: np.asarray(v, dtype=float) for k, v in inputs.items()}
    for name, fn, args in steps:
        env[name] = np.atleast_2d(np.asarray(fn(*(env[a] for a in args)), dtype=float))
    return env


def make_inputs(seed: int):
    rng = np.random.default_rng(seed)
    return {"A": rng.standard_normal((N, N)), "B": rng.standard_normal((N, N)),
            "v": rng.standard_normal((N, 1)), "s": float(rng.uniform(-1, 1))}


def close(got, want, tol) -> bool:
    got, want = np.atleast_2d(got), np.atleast_2d(want)
    return got.shape == want.shape and \
        float(np.max(np.abs(got - want))) <= tol * max(1.0, float(np.max(np.abs(want))))


SETTINGS = dict(deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])


@settings(max_examples=60, **SETTINGS)
@given(programs(), st.integers(0, 2 ** 16))
def test_random_programs_match_numpy_and_stay_fresh(prog, seed):
    src, steps, outs = prog
    inputs = make_inputs(seed)
    compiled = linview.compile(src, name="fuzz")
    views = compiled.load(**inputs)
    want = oracle(steps, inputs)
    for o in outs:
        assert close(views[o], want[o], 1e-9), (o, src)
    rng = np.random.default_rng(seed + 1)
    current = dict(inputs)
    for x in type(views).DYNAMIC:
        u, v = 0.05 * rng.standard_normal((N, 1)), rng.standard_normal((current[x].shape[1], 1))
        views.update(x, u, v)
        current[x] = current[x] + u @ v.T
    want = oracle(steps, current)
    for o in outs:
        assert close(views[o], want[o], 1e-8), (o, src)


@pytest.mark.octave
@settings(max_examples=8, **SETTINGS)
@given(programs(), st.integers(0, 2 ** 16))
def test_random_programs_match_octave(prog, seed):
    if not octave_available():
        pytest.skip("octave-cli (GNU Octave) is not installed")
    src, _, outs = prog
    inputs = make_inputs(seed)
    views = linview.compile(src, name="fuzz").load(**inputs)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.m"
        path.write_text(src)
        got = run_octave(path, inputs, outs)
    for o in outs:
        assert close(views[o], got[o], 1e-9), (o, src)
