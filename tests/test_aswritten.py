"""The program as written inside a trigger module (backends/numpy/aswritten.py,
written_code.py): a module switched to re-running the program as written keeps answering
as re-evaluation does, its other views catch up when read, the trials at load leave the
views as they were, and the switches are recorded.  Timings are injected
(``views.adaptation.injected``): nothing here depends on the speed of the machine."""

from __future__ import annotations

import functools
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import linview
from linview.backends.numpy import adaptive
from linview.backends.numpy.adaptive import WINDOW

BENCH = Path(__file__).resolve().parent.parent / "bench" / "thin"

PROGRAMS = {  # file, dims, model (rewritten: the compiled program is not the one written)
    "markov30": (BENCH / "markov30.m", {"n": 9}, "exp"),
    "general_form": ("general_form.m", {"n": 8, "p": 2}, "linear"),
    "pagerank20": (BENCH / "pagerank20.m", {"n": 10}, "skip=4"),
    "gradient_descent5": (BENCH / "gradient_descent5.m", {"m": 14, "n": 6}, "written"),
}


@functools.cache
def program(name: str):
    from conftest import EXAMPLES

    file, dims, model = PROGRAMS[name]
    path = file if isinstance(file, Path) else EXAMPLES / file
    return linview.compile_file(path, dims=dims, model=model, strategy="incr")


def inputs(name: str, rng: np.random.Generator) -> dict:
    prog = program(name)
    out = {}
    for d in prog.program.inputs:
        if d.scalar:
            out[d.name] = 0.05
            continue
        r, c = (int(prog.plan.sizes.value(e)) for e in d.shape)
        out[d.name] = (0.6 * np.eye(r) + 0.3 * rng.standard_normal((r, c)) / np.sqrt(r)
                       if r == c else rng.standard_normal((r, c)))
    return out


def update(views, x: str, rng: np.random.Generator, kind: str) -> None:
    rows, cols = views[x].shape
    if kind == "row":
        U = np.zeros((rows, 1))
        U[rng.integers(rows), 0] = 1.0
    else:
        U = rng.standard_normal((rows, 1)) / np.sqrt(rows)
    V = 0.1 * rng.standard_normal((cols, 1)) / np.sqrt(cols)
    views.update(x, U, V)


def reevaluated_outputs(name: str, views) -> dict:
    """The outputs of a fresh load on the module's current inputs (the program as
    compiled, evaluated from scratch: another path than the program as written)."""
    fresh = program(name).load(**views.inputs)
    return fresh.outputs


def test_the_module_carries_the_program_as_written_when_a_model_rewrote_it():
    text = program("markov30").source
    assert "def _evaluate_written(self, d, inputs):" in text
    assert "p_30 = P.T @ p_29" in text  # thirty steps, as written
    assert "AS_WRITTEN = {'P': (" in text
    # the program as written is the compiled one: _evaluate is it, nothing more emitted
    assert "_evaluate_written" not in program("gradient_descent5").source


def test_a_forced_switch_to_the_program_as_written_is_recorded_and_answers_right():
    prog = program("markov30")
    rng = np.random.default_rng(1)
    views = prog.load(**inputs("markov30", rng))
    views.adaptation.injected = lambda name, mode: {"maintain": 3.0, "threads": 3.0,
                                                    "reeval": 1.0, "reeval_threads": 2.0}[mode]
    views.adaptation.enabled = True  # off under the reference rates the suite plans with
    views.adaptation.reeval_s = 1.0
    for _ in range(2 * WINDOW):
        update(views, "P", rng, "row")
    # maintenance 3x slower: its other threads for a window, then the program as written
    assert [s["to"] for s in views.stats["switches"]] == ["threads", "reeval"]
    update(views, "P", rng, "dense")
    assert views._behind  # the powers of P are not kept while the program runs as written
    got = views["p"]  # an output: no catching up
    assert views._behind and "caught_up" not in views.stats
    np.testing.assert_allclose(got, reevaluated_outputs("markov30", views)["p"],
                               rtol=1e-10, atol=1e-12)
    text = prog.explain(views=views)
    assert "now re-evaluates" in text
    assert views.verify() < 1e-9  # reading every view catches up
    assert not views._behind and views.stats["caught_up"] == 1


def test_trials_at_load_leave_every_view_as_it_was_and_may_start_as_written():
    prog = program("general_form")
    rng = np.random.default_rng(2)
    views = prog.load(**inputs("general_form", rng))
    before = {k: v.copy() for k, v in views._views.items()}
    views.adaptation.enabled = True
    views.adaptation.injected = lambda name, mode: {"maintain": 2.0, "threads": 2.0,
                                                    "reeval": 1.0, "reeval_threads": 1.5}[mode]
    views._load_trials()  # (the constructor does this where adaptation is on)
    for k, v in before.items():
        np.testing.assert_array_equal(views._store[k], v, err_msg=k)
    assert not views._pending
    at_load = [s for s in views.stats["switches"] if s.get("at") == "load"]
    assert {s["input"] for s in at_load} == {"A", "B"}
    assert all(s["to"] == "reeval" for s in at_load)
    assert "at load: trigger of A now re-evaluates" in prog.explain(views=views)
    update(views, "A", rng, "dense")
    np.testing.assert_allclose(views["T"], reevaluated_outputs("general_form", views)["T"],
                               rtol=1e-10, atol=1e-12)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(PROGRAMS)), seed=st.integers(0, 2 ** 16),
       steps=st.lists(st.tuples(st.sampled_from(["row", "dense"]),
                                st.sampled_from([0.1, 1.0, 10.0]),
                                st.sampled_from([0.1, 1.0, 10.0]),
                                st.booleans(), st.booleans()),
                      min_size=1, max_size=3 * WINDOW))
def test_outputs_equal_reevaluation_whatever_the_switches(name, seed, steps):
    """Random updates of random inputs under random injected timings (switches to the
    program as written and back at random points, other inputs' triggers in between,
    views read now and then): after every update the outputs equal a fresh evaluation,
    and every view does when read."""
    rng = np.random.default_rng(seed)
    prog = program(name)
    views = prog.load(**inputs(name, rng))
    now = {"maintain": steps[0][1], "reeval": steps[0][2]}
    views.adaptation.injected = lambda _name, mode: now[mode.removesuffix("_threads")
                                                       .replace("threads", "maintain")]
    views.adaptation.enabled = True
    views._load_trials()  # the trials at load, with the first step's timings
    dynamic = prog.program.dynamic
    with mock.patch.object(adaptive, "WINDOW", 2):  # a decision every other update
        for i, (kind, maintain, reeval, other, read) in enumerate(steps):
            now.update(maintain=maintain, reeval=reeval)
            x = dynamic[i % len(dynamic)] if other else dynamic[0]
            update(views, x, rng, kind)
            want = reevaluated_outputs(name, views)
            for out, value in want.items():
                np.testing.assert_allclose(views[out], value, rtol=1e-8, atol=1e-10,
                                           err_msg=str(views.stats["switches"]))
            if read:
                assert views.verify() < 1e-8


def test_a_module_running_as_written_saves_fresh_views(tmp_path):
    prog = program("markov30")
    rng = np.random.default_rng(3)
    views = prog.load(**inputs("markov30", rng))
    views.adaptation.enabled = True
    views.adaptation.injected = lambda name, mode: {"maintain": 2.0, "threads": 2.0,
                                                    "reeval": 1.0, "reeval_threads": 1.5}[mode]
    views._load_trials()
    update(views, "P", rng, "row")
    assert views._behind
    views.save(tmp_path / "s.npz")
    back = linview.restore(tmp_path / "s.npz")
    assert back.verify() < 1e-9  # every view saved was caught up, not a stale power
    np.testing.assert_allclose(back["p"], reevaluated_outputs("markov30", views)["p"],
                               rtol=1e-10, atol=1e-12)


CORPUS = ["markov_steps", "pagerank_uniform", "powers_sum", "ppr", "gradient_descent_ls",
          "jacobi"]


@pytest.mark.parametrize("model", ["exp", "auto"])
@pytest.mark.parametrize("name", CORPUS)
def test_corpus_iterates_run_as_written_and_answer_as_reevaluation(name, model):
    """The thin iterates of tests/programs/ (sizes from the data: the program as written
    may name a size otherwise, read from the input's shape), started as written at load,
    after the corpus' updates: outputs and views equal a fresh evaluation."""
    import test_programs as corpus

    path = corpus.PROGRAMS[corpus.NAMES.index(name)]
    given, spd = corpus.spec(path)
    prog = linview.compile_file(path, model=model)
    views = prog.load(**given)
    views.adaptation.enabled = True
    views.adaptation.injected = lambda _name, mode: 1.0 if mode.startswith("reeval") else 5.0
    views._load_trials()
    assert all(s["to"] == "reeval" for s in views.stats["switches"])
    current = {k: np.array(v, dtype=float) for k, v in given.items() if not np.isscalar(v)}
    current.update({k: v for k, v in given.items() if np.isscalar(v)})
    for x, u, v in corpus.updates(path, given, spd, type(views).DYNAMIC):
        views.update(x, u, v)
        current[x] = current[x] + u @ v.T
    fresh = prog.load(**current)
    for out, want in fresh.outputs.items():
        assert corpus.rel_err(views[out], want) <= 1e-8, out
    assert views.verify() <= 1e-8


def test_bench_of_a_program_specialised_to_shapes_runs_each_strategy_on_them():
    """``bench/thin_iterate.py`` benchmarks the corpus' programs through their inputs'
    shapes (``ppr``'s ``d`` is a scalar only by its shape): every strategy's variant is
    compiled for those shapes, not for the open sizes (a matrix ``d``)."""
    from conftest import ROOT

    from linview.app.bench import run_bench

    prog = linview.compile_file(ROOT / "tests" / "programs" / "ppr.m",
                                shapes=(("M", 12, 12), ("v", 12, 1), ("d", 1, 1)))
    r = run_bench(prog, updates=3, strategies=("reeval", "auto"), progress=False)
    assert set(r["strategies"]) == {"reeval", "reeval_other_threads", "auto"}
    assert all(s["max_rel_error"] < 1e-8 for s in r["strategies"].values())


def test_trials_at_load_take_turns_run_by_run(monkeypatch):
    """The trials at load alternate the settings they compare (1, all, 1, all, ...; the
    maintaining modes likewise), so that a change in the machine's load during the trials
    falls on both and does not decide the comparison."""
    from linview.backends.numpy import aswritten

    rng = np.random.default_rng(7)
    views = program("markov30").load(**inputs("markov30", rng), blas_threads="auto")
    seen = []
    limit = aswritten.trigger_limit
    monkeypatch.setattr(aswritten, "trigger_limit",
                        lambda threads, reeval: seen.append(threads) or limit(threads, reeval))
    views._time_written(True)
    assert seen == [1, None] * aswritten.TRIALS
    modes = []
    trigger = views.on_update_P
    monkeypatch.setattr(views, "on_update_P", lambda U, V: modes.append(
        views.adaptation.mode["P"]) or trigger(U, V), raising=False)
    before = {k: np.array(v) for k, v in views.views.items()}
    got = views._time_maintenance("P", ["maintain", "threads"])
    assert modes == ["maintain", "threads"] * aswritten.TRIALS
    assert set(got) == {"maintain", "threads"} and all(t > 0 for t in got.values())
    assert views.adaptation.mode["P"] == "maintain"
    for k, v in views.views.items():
        np.testing.assert_array_equal(v, before[k])


def test_a_program_compiled_as_written_keeps_only_its_outputs_while_every_trigger_reruns_it():
    """cg_steps is compiled as written (no ``_evaluate_written``): re-running it keeps and
    checks the outputs only while no other input's trigger maintains (which would read the
    other views at every update), and every view otherwise; the other views catch up when
    read, and every answer equals a fresh evaluation of the current inputs."""
    from conftest import ROOT

    prog = linview.compile_file(ROOT / "tests" / "programs" / "cg_steps.m",
                                shapes=(("A", 6, 6), ("b", 6, 1)), strategy="incr")
    assert not hasattr(prog.module_class, "_evaluate_written")
    rng = np.random.default_rng(11)
    M = rng.standard_normal((6, 6))
    views = prog.load(A=M @ M.T + 6 * np.eye(6), b=rng.standard_normal((6, 1)))
    views.adaptation.enabled = True
    views.adaptation.injected = lambda name, mode: {
        ("A", "maintain"): 3.0, ("A", "reeval"): 1.0,
        ("b", "maintain"): 1.0, ("b", "reeval"): 3.0}[name, mode.removesuffix("_threads")
                                                      .replace("threads", "maintain")]
    views._load_trials()
    assert views.adaptation.mode == {"A": "reeval", "b": "maintain"}

    def fresh():
        return prog.load(**views.inputs)

    update(views, "A", rng, "row")  # b's trigger maintains: every view kept
    assert not views._behind
    assert views.verify() < 1e-9 and "caught_up" not in views.stats
    views.adaptation.mode["b"] = "reeval"  # now every trigger re-runs the program
    for x, kind in (("A", "row"), ("b", "dense"), ("A", "dense")):
        update(views, x, rng, kind)
        assert views._behind == frozenset(views.VIEWS) - {"x_3"}
        np.testing.assert_allclose(views["x"], fresh().outputs["x"], rtol=1e-10,
                                   atol=1e-12)
    assert "caught_up" not in views.stats  # the output read nothing behind
    np.testing.assert_allclose(views["r_1"], fresh()["r_1"], rtol=1e-10, atol=1e-12)
    assert not views._behind and views.stats["caught_up"] == 1
    views.adaptation.mode["b"] = "maintain"
    update(views, "A", rng, "row")  # b maintains again: A's program keeps every view
    assert not views._behind
    update(views, "b", rng, "dense")  # maintained from fresh views
    assert views.verify() < 1e-9 and views.stats["caught_up"] == 1
    np.testing.assert_allclose(views["x"], fresh().outputs["x"], rtol=1e-10, atol=1e-12)
