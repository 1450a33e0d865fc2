"""``linview bench``: measured per-update cost of each strategy, in one process and run.

For each strategy the program is compiled with that strategy forced (``auto`` = the cost
model's choice), loaded on the same random inputs, and fed the same stream of random
rank-k updates; the strategies take turns in :data:`ROUNDS` blocks of consecutive updates
(the first one rotating, with a pause before each block, :data:`TURN_PAUSE_S`), so that a
drift in the machine's speed during the run falls on all of them alike.
``reeval`` is the baseline: each update is applied to the input in place (as a user
changes a row) and the program *as written* is re-run
(``views.reevaluate_update`` of the program lowered with ``model="written"``: loops step
by step, ``^`` by squaring, products in the best chain order); ``reeval_model`` re-runs
the program as compiled instead.  Each result records the BLAS threads and the load
average next to its times, and the predicted seconds.

Per-update wall times give the mean, median, p10 and p90; speedups are ratios of means
against REEVAL measured in the same run.  The mean is the amortized cost: updates may leave
low-rank terms pending on large views (``backends/numpy/lowrank.py``), added now and then
in one pass; what is still pending after the stream is added (``views.flush()``) and its
time shared among the stream's updates.  The *memory floor* (:func:`memory_floor`) is one
matrix-vector pass (``dgemv``) over every large view the maintaining trigger must read,
timed here too, one for the run (the plan of ``auto``, else of ``incr`` or ``hybrid``);
``trigger/floor`` says how far each strategy is from reading that data once.  After the
stream, the maintained views are compared with re-evaluation (max relative error).
``probe`` is the share of the update time spent in the randomized residual probes of
maintained inverses (on by default; see ``backends/numpy/probe.py``).
"""

from __future__ import annotations

import os
import platform
import time
import tracemalloc

import numpy as np
import scipy.linalg.blas as blas

from linview.compiler import timemodel
from linview.compiler.cost import written_program
from linview.compiler.interp import size_value
from linview.errors import CompileError, InputError

#: ``reeval``: the as-written baseline; ``reeval_model``: re-evaluation of the program as
#: compiled (after an iterative model's transformation), shown labelled as such
BENCH_STRATEGIES = ("reeval", "reeval_model", "incr", "hybrid", "auto")


def random_inputs(prog, rng: np.random.Generator) -> dict[str, np.ndarray | float]:
    """Well-conditioned random inputs: square matrices 0.6 I + 0.3 G/√n (eigenvalues in a
    disc of radius 0.3 around 0.6: invertible, powers bounded), rectangular ones standard
    normal (full column rank with high probability), scalars 0.5."""
    bindings = dict(prog.plan.sizes.bindings)
    missing = sorted({s.name for s in prog.program.dim_symbols} - set(bindings))
    if missing:
        raise CompileError("bench needs a value for every size; missing: " + ", ".join(missing),
                           hint="give them with --dims " + ",".join(f"{m}=..." for m in missing))
    out: dict[str, np.ndarray | float] = {}
    for d in prog.program.inputs:
        if d.scalar:
            out[d.name] = 0.5
            continue
        r, c = size_value(d.shape[0], bindings), size_value(d.shape[1], bindings)
        if r == c:
            out[d.name] = 0.6 * np.eye(r) + 0.3 * rng.standard_normal((r, c)) / np.sqrt(r)
        else:
            out[d.name] = rng.standard_normal((r, c))
    return out


def row_updates(shape, count: int, rank: int, rng: np.random.Generator, scale: float):
    """``count`` updates each changing ``rank`` random rows: U one-hot columns, V small."""
    rows, cols = shape
    out = []
    for _ in range(count):
        U = np.zeros((rows, rank))
        U[rng.choice(rows, size=min(rank, rows), replace=False), np.arange(min(rank, rows))] = 1
        V = scale * rng.standard_normal((cols, rank)) / np.sqrt(cols)
        out.append((U, V))
    return out


def _median_time(fn, repeat: int = 5) -> float:
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def memory_floor(views, trigger, size) -> float:
    """Seconds of the bytes the trigger must move: one matrix-vector pass (``dgemv``) over
    every large view it multiplies by a factor block that is not the one-hot ``U`` of a
    row update (:func:`.timemodel.thin_product`; ``U``'s products read k columns, a
    gather).  Writes are not counted: a large view's updates may wait as pending
    low-rank terms (``backends/numpy/lowrank.py``), added by a ``dgemm`` (flops) now and
    then; a row of the updated input is written in place.  ``size`` evaluates the plan's
    sizes.  Flops are not counted either (A^16's trigger is bound by them as much as by
    its bytes: ``bench/targets_ols_a16.py`` prices both)."""
    total = 0.0
    for name in sorted(floor_views(trigger, size) & set(views._views)):
        A = np.asfortranarray(views._views[name])
        x = np.ones(A.shape[1])
        total += _median_time(lambda A=A, x=x: blas.dgemv(1.0, A, x))
    return total


def floor_views(trigger, size) -> set[str]:
    """The large views a maintaining trigger multiplies by a factor block other than a row
    update's one-hot ``U`` (what :func:`memory_floor` reads once each)."""
    from linview.compiler.delta import emitted_exprs
    from linview.compiler.timemodel import thin_product

    read = set()
    for vd in trigger.deltas:
        for e in emitted_exprs(vd):
            read |= {t[0][0] for t in map(lambda m: thin_product(m, size), e.walk()) if t}
    return read


#: the strategies take turns in this many blocks of the update stream (see run_bench)
ROUNDS = 4
#: the pause before each block
TURN_PAUSE_S = 0.2

#: predictions closer than this factor rank as a tie
PREDICTED_TIE = 1.1


def ranking_disagreements(strategies: dict) -> list[list[str]]:
    """Pairs ``[a, b]`` measured clearly faster-first (a's p90 below b's p10) but
    predicted the other way round by more than :data:`PREDICTED_TIE`.  Strategies whose
    measured spreads overlap, or whose predictions are that close, are ties: their order
    is noise, not a wrong prediction."""
    out = []
    for a, ra in strategies.items():
        for b, rb in strategies.items():
            if ra["p90_s"] < rb["p10_s"] and ra["predicted_s"] > PREDICTED_TIE * rb["predicted_s"]:
                out.append([a, b])
    return out


def _blas_threads() -> int | None:
    from linview.backends.numpy.runtime import blas_threads

    return blas_threads()


#: the as-written baseline is timed twice, in blocks of its own: on every BLAS thread
#: (``reeval``) and on one (this); the faster is the one compared, the other is shown as
#: :data:`OTHER_THREADS` (see :func:`fair_baseline`)
ONE_THREAD = "reeval_1thread"
OTHER_THREADS = "reeval_other_threads"


def with_one_thread_baseline(strategies) -> list[str]:
    """``strategies`` with :data:`ONE_THREAD` after ``reeval`` (when it is there)."""
    out = []
    for s in strategies:
        out += [s, ONE_THREAD] if s == "reeval" else [s]
    return out


def one_thread(step):
    """``step`` on one BLAS thread (every BLAS library loaded), as a user who set it."""
    from linview.backends.numpy.threads import blas_limit

    def run(x, U, V):
        with blas_limit(1):
            step(x, U, V)

    return run


def fair_baseline(result: dict) -> None:
    """Make ``reeval`` the faster (by mean) of the as-written program on every BLAS thread
    and on one; the slower stays as :data:`OTHER_THREADS`; both means are recorded."""
    runs = result["strategies"]
    one = runs.pop(ONE_THREAD, None)
    if one is None or "reeval" not in runs:
        return
    every = runs["reeval"]
    one["blas_threads"] = 1
    both = {"all_threads_s": every["mean_s"], "one_thread_s": one["mean_s"]}
    fast, slow = (one, every) if one["mean_s"] < every["mean_s"] else (every, one)
    result["baseline_threads"] = {**both, "compared": fast["blas_threads"]}
    runs["reeval"] = {**fast, **both}
    runs[OTHER_THREADS] = {**slow, **both}


def machine() -> dict:
    from linview.backends.numpy.runtime import THREAD_ENV
    from linview.compiler.calibrate import rates, status

    r = rates()
    return {"python": platform.python_version(), "numpy": np.__version__,
            "machine": platform.machine(), "processor": platform.processor() or "",
            "cpus": os.cpu_count(), "load_avg": list(os.getloadavg()),
            "blas_threads": _blas_threads(),
            "thread_env": {v: os.environ[v] for v in THREAD_ENV if v in os.environ},
            "rates": r.as_dict(), "calibration": status()}


def run_bench(prog, *, updates: int = 20, seed: int = 0, rank: int = 1,
              strategies=("reeval", "incr", "hybrid", "auto"), progress: bool = True,
              input_name: str | None = None, scale: float = 0.1,
              load_options: dict | None = None) -> dict:
    """Measure every strategy on the same inputs and updates; see the module docstring.

    Long on purpose: One straight-line measurement protocol (inputs, each strategy on the same
    updates, peers, floor, report), kept in one function so the order of what is timed stays
    visible.
    """
    import linview
    from linview.compiler.cost import cost_report

    if not prog.program.dynamic:
        raise CompileError(f"{prog.name} has no dynamic inputs: nothing to benchmark")
    if updates < 1 or rank < 1:
        raise InputError(f"bench needs at least one update of rank at least 1 (got "
                         f"{updates} updates of rank {rank})")
    x = input_name or prog.program.dynamic[0]
    if x not in prog.program.dynamic:
        raise CompileError(f"input {x} is not dynamic",
                           hint="dynamic inputs: " + ", ".join(prog.program.dynamic))
    for s in strategies:
        if s not in BENCH_STRATEGIES:
            raise CompileError(f"unknown strategy '{s}'",
                               hint="valid strategies: " + ", ".join(BENCH_STRATEGIES))
    from linview import budget

    # every strategy loads its own copy of the inputs and views, next to the random inputs
    budget.check(budget.bench_held(prog.program, dict(prog.plan.sizes.bindings)),
                 (load_options or {}).get("memory_budget"), program=prog.program,
                 doing="bench", copies=len(strategies) + 1)
    rng = np.random.default_rng(seed)
    inputs = random_inputs(prog, rng)
    shape = np.shape(inputs[x])
    stream = row_updates(shape, updates, rank, rng, scale)
    base = dict(prog.options)
    source = prog.program.source
    result = {"program": prog.name, "input": x, "dims": base.get("dims", {}), "rank": rank,
              "updates": updates, "seed": seed, "machine": machine(), "strategies": {},
              "baseline": "reeval: the program as written (loops step by step, ^ by "
                          "squaring), re-run after each update, the faster of every BLAS "
                          "thread and one"}
    bar = None
    if progress:
        from rich.progress import Progress

        bar = Progress(transient=True)
        bar.start()
    try:
        variants = {}
        strategies = with_one_thread_baseline(strategies)
        for s in strategies:
            # "reeval" is the baseline: update the input, re-run the program as written;
            # "reeval_model": the same with the program as compiled (transformed by the model)
            model = "written" if s in ("reeval", ONE_THREAD) else base.get("model", "auto")
            variant = linview.compile(
                source, name=prog.name, filename=prog.program.filename, dims=base.get("dims"),
                backend=prog.backend, model=model,
                strategy=s if s in ("incr", "hybrid") else "reeval" if s.startswith("reeval")
                else None, rank=rank, shapes=base.get("shapes") or None)
            views = variant.load(**inputs, **(load_options or {}))
            step = views.reevaluate_update if s.startswith("reeval") else views.update
            step = one_thread(step) if s == ONE_THREAD else step
            variants[s] = (variant, views, step)
        # the strategies take turns in blocks of consecutive updates (ROUNDS rounds, the
        # first strategy rotating), so that a change in the machine's speed during the run
        # (load, clock, another process) falls on all of them alike, while each block runs
        # as a user's stream does, one update after another
        order = list(strategies)
        times: dict = {s: [] for s in order}
        load_before = os.getloadavg()[0]
        task = bar.add_task("updates", total=updates * len(order)) if bar else None
        size = -(-len(stream) // ROUNDS)
        for r, first in enumerate(range(0, len(stream), size)):
            for s in order[r % len(order):] + order[:r % len(order)]:
                step = variants[s][2]
                # BLAS workers spin for ~0.1 s after a parallel call (OpenBLAS): let those
                # of the previous block park, or they slow this one as no user's run would be
                time.sleep(TURN_PAUSE_S)
                for U, V in stream[first:first + size]:
                    t0 = time.perf_counter()
                    step(x, U, V)
                    times[s].append(time.perf_counter() - t0)
                    if bar:
                        bar.advance(task)
        for s in strategies:
            variant, views, step = variants.pop(s)
            # updates may leave low-rank terms pending (backends/numpy/lowrank.py): adding
            # them is part of the stream's cost, shared by its updates (amortized)
            t0 = time.perf_counter()
            getattr(views, "flush", lambda: None)()
            ts = [t + (time.perf_counter() - t0) / len(times[s]) for t in times[s]]
            stats = dict(views.stats)  # the probe's share of the measured triggers
            tracemalloc.start()
            base_mem = tracemalloc.get_traced_memory()[0]
            for U, V in stream[:2]:
                step(x, U, V)
            peak = tracemalloc.get_traced_memory()[1] - base_mem
            tracemalloc.stop()
            err = views.verify()
            trig = variant.plan.triggers[x]
            floor = memory_floor(views, trig, variant.plan.sizes.value) \
                if not trig.reevaluate else None
            report = next(t for t in cost_report(variant)["triggers"] if t["input"] == x)
            if s in ("reeval", ONE_THREAD):
                predicted = report["reeval"]
            elif s == "reeval_model":
                predicted = {"flops": None, "seconds": timemodel.program_seconds(
                    variant.program, variant.plan.sizes) + report["reeval"]["seconds"]
                    - timemodel.program_seconds(written_program(variant), variant.plan.sizes)}
            else:
                predicted = report["trigger"]
            threads = getattr(views, "_threads", {}).get(x) if not s.startswith("reeval") \
                else None
            if threads is None and x in getattr(views, "_threads", {}) \
                    and not trig.reevaluate:  # every idle core (threads.trigger_limit)
                from linview.backends.numpy.threads import idle_cores

                threads = idle_cores()
            t = np.array(ts)
            result["strategies"][s] = {
                "median_s": float(np.median(t)), "p10_s": float(np.percentile(t, 10)),
                "p90_s": float(np.percentile(t, 90)), "mean_s": float(t.mean()),
                "max_rel_error": float(err), "floor_s": floor,
                "trigger_over_floor": float(t.mean()) / floor if floor else None,
                "peak_temp_bytes": int(peak),
                "view_bytes": int(sum(v.nbytes for v in views._views.values())),
                "fallbacks": views.stats["fallbacks"],
                "probe_s": stats.get("probe_seconds", 0.0) / len(ts),
                "probe_share": (stats.get("probe_seconds", 0.0) / sum(ts)) if sum(ts)
                else 0.0,
                "probe_failures": stats.get("probe_failures", 0),
                "switches": stats.get("switches", []),  # measured corrections (adaptive)
                "predicted_flops": predicted["flops"],
                "predicted_s": predicted["seconds"],
                "chosen": {vd.name: vd.strategy.value for vd in trig.deltas[1:]},
                "whole_trigger": "reeval" if trig.reevaluate else "maintain",
                "blas_threads": threads if threads is not None else _blas_threads(),
                "load_avg": [load_before, os.getloadavg()[0]],
            }
    finally:
        if bar:
            bar.stop()
    # one floor for the run, the maintaining plan's: the same update moves the same data
    floors = [result["strategies"][s]["floor_s"] for s in ("auto", "incr", "hybrid")
              if s in result["strategies"]]
    floor = next((f for f in floors if f), None)
    for r in result["strategies"].values():
        r["floor_s"] = floor
        r["trigger_over_floor"] = r["mean_s"] / floor if floor else None
    fair_baseline(result)
    ref = result["strategies"].get("reeval")
    for r in result["strategies"].values():
        r["speedup_vs_reeval"] = ref["mean_s"] / r["mean_s"] if ref else None
    measured = sorted(result["strategies"], key=lambda s: result["strategies"][s]["mean_s"])
    result["ranking"] = {
        "measured": measured,
        "predicted": sorted(result["strategies"],
                            key=lambda s: result["strategies"][s]["predicted_s"]),
        "disagreements": ranking_disagreements(result["strategies"]),
    }
    if ref:
        for r in result["strategies"].values():
            r["predicted_speedup"] = ref["predicted_s"] / r["predicted_s"]
    return result
