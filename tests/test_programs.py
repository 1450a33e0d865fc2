"""The program corpus ``tests/programs/``: Octave programs as users write them.

Each ``.m`` file is an ordinary Octave function with no size pragmas (at most a
``dynamic`` pragma saying which inputs change); its inputs are described by a comment
``% test inputs: X=randn(30,5) lambda=0.5 ...``.  For every program:

* linview compiles it without data (fast; a program whose sizes decide its meaning is
  deferred to ``load()``), loads it, and applies random rank-1 and rank-2 updates to each
  dynamic input; the maintained outputs equal a fresh evaluation of the updated inputs;
* (``octave``) ``octave-cli`` running the same file agrees with linview, on the initial
  inputs and after the updates (1e-8 relative);
* ``explain`` says, per statement, whether each update maintains or re-evaluates it.
"""

from __future__ import annotations

import re
import zlib
from pathlib import Path

import numpy as np
import pytest

import linview
from linview.compiler.lower_language import NeedsData  # noqa: F401 - documented behaviour

try:  # tests/ may or may not be a package
    from tests.octave_runner import function_signature, octave_available, run_octave_many
except ImportError:  # pragma: no cover - depends on how pytest set sys.path
    from octave_runner import function_signature, octave_available, run_octave_many

PROGRAMS = sorted((Path(__file__).resolve().parent / "programs").glob("*.m"))
NAMES = [p.stem for p in PROGRAMS]
_SPEC = re.compile(r"%\s*test inputs:\s*(.*)")
_ITEM = re.compile(r"(\w+)=(?:(\w+)\(([\d,\s]*)\)|([-\d.eE]+))")


def rel_err(got, want) -> float:
    got = np.atleast_2d(np.asarray(got, dtype=float))
    want = np.atleast_2d(np.asarray(want, dtype=float))
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    return float(np.max(np.abs(got - want))) / max(float(np.max(np.abs(want))), 1e-300)


# ------------------------------------------------------------------ inputs
def _contraction(rng, n):
    q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    a = 0.95 * q + 0.05 * rng.standard_normal((n, n)) / n
    return 0.8 * a / max(abs(np.linalg.eigvals(a)))


def _stochastic(rng, n):
    m = rng.random((n, n)) + 0.1
    return m / m.sum(axis=0, keepdims=True)


GENERATORS = {
    "randn": lambda rng, r, c: rng.standard_normal((r, c)),
    "rand": lambda rng, r, c: rng.random((r, c)) + 0.1,
    "bits": lambda rng, r, c: (rng.random((r, c)) > 0.5).astype(float),
    "spd": lambda rng, n: (lambda g: g @ g.T / n + np.eye(n))(rng.standard_normal((n, n))),
    "contraction": _contraction,
    "stoch": _stochastic,
    "dist": lambda rng, n: (lambda p: (p / p.sum()).reshape(-1, 1))(rng.random(n) + 0.1),
    "diagdom": lambda rng, n: rng.standard_normal((n, n)) + 2 * n * np.eye(n),
    "wellcond": lambda rng, n: np.eye(n) + 0.3 * rng.standard_normal((n, n)) / np.sqrt(n),
}


def spec(path: Path) -> tuple[dict, set[str]]:
    """The inputs of a corpus program, and the names of its symmetric (SPD) ones."""
    m = _SPEC.search(path.read_text())
    assert m, f"{path.name} has no '% test inputs:' line"
    rng = np.random.default_rng(zlib.crc32(path.stem.encode()))
    inputs, spd = {}, set()
    for name, kind, args, number in _ITEM.findall(m.group(1)):
        if number:
            inputs[name] = float(number)
            continue
        sizes = [int(a) for a in args.split(",")]
        inputs[name] = GENERATORS[kind](rng, *sizes)
        if kind == "spd":
            spd.add(name)
    return inputs, spd


def updates(path: Path, inputs: dict, spd: set[str], dynamic) -> list:
    """Two updates per dynamic input (rank 1, then rank 2), small against the input;
    symmetric positive ones for SPD inputs, so that they stay positive definite."""
    rng = np.random.default_rng(zlib.crc32(path.stem.encode()) + 1)
    out = []
    for rank in (1, 2):
        for x in dynamic:
            a = np.atleast_2d(inputs[x])
            u = rng.standard_normal((a.shape[0], rank))
            v = u.copy() if x in spd else rng.standard_normal((a.shape[1], rank))
            scale = 0.01 * np.linalg.norm(a) / max(np.linalg.norm(u @ v.T), 1e-300)
            out.append((x, np.sqrt(scale) * u, np.sqrt(scale) * v))
    return out


_CACHE: dict[str, tuple] = {}


def scenario(name: str):
    """(compiled program, inputs, views after the updates, inputs after the updates,
    outputs on the initial inputs), computed once per program."""
    if name not in _CACHE:
        path = PROGRAMS[NAMES.index(name)]
        inputs, spd = spec(path)
        prog = linview.compile_file(path)
        views = prog.load(**inputs)
        first = {k: v.copy() for k, v in views.outputs.items()}
        current = {k: np.array(v, dtype=float) if not np.isscalar(v) else v
                   for k, v in inputs.items()}
        for x, u, v in updates(path, inputs, spd, type(views).DYNAMIC):
            views.update(x, u, v)
            current[x] = current[x] + u @ v.T
        _CACHE[name] = (prog, inputs, views, current, first)
    return _CACHE[name]


# ------------------------------------------------------------------ tests
def test_corpus_is_large_and_pragma_free():
    assert len(PROGRAMS) >= 40
    for path in PROGRAMS:
        for line in path.read_text().splitlines():
            if "%#linview" in line:
                kind = line.split("%#linview", 1)[1].split()[0]
                assert kind in ("dynamic", "static"), f"{path.name}: {line.strip()}"


@pytest.mark.parametrize("name", NAMES)
def test_updates_match_reevaluation(name):
    prog, _, views, current, _ = scenario(name)
    assert type(views).DYNAMIC, f"{name} has no dynamic input"
    fresh = prog.load(**current)
    for out, want in fresh.outputs.items():
        assert rel_err(views[out], want) <= 1e-8, out
    assert views.verify() <= 1e-8


@pytest.mark.parametrize("name", NAMES)
def test_explain_says_what_is_maintained(name):
    prog, inputs, views, _, _ = scenario(name)
    compiled = prog.specialize(**inputs)
    text = compiled.explain()
    section = text.split("maintenance (per statement and updated input):\n", 1)[1]
    for st in compiled.program.statements:
        line = next(ln for ln in section.splitlines() if ln.split()[0] == st.name)
        assert re.search(r"maintained on|re-evaluated on|unchanged", line), line


@pytest.mark.octave
@pytest.mark.parametrize("name", NAMES)
def test_octave_agrees(name):
    if not octave_available():
        pytest.skip("octave-cli (GNU Octave) is not installed")
    path = PROGRAMS[NAMES.index(name)]
    _, inputs, views, current, first = scenario(name)
    _, _, outs = function_signature(path)
    before, after = run_octave_many(path, [inputs, current], outs)
    for out in outs:
        assert rel_err(first[out], before[out]) <= 1e-8, f"{out} on the initial inputs"
        assert rel_err(views[out], after[out]) <= 1e-8, f"{out} after the updates"
