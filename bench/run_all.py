"""Run the NumPy benchmark suite and write bench/results/*.json, *.png and bench/README.md.

    python bench/run_all.py            # the full suite (several minutes on 2 cores)
    python bench/run_all.py --quick    # small sizes, a smoke run

Each configuration is one ``linview bench`` run: every strategy on the same random inputs
and the same stream of random row updates, in one process, so the ratios are comparable.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

import peers  # noqa: E402 - bench/ is on sys.path when run as a script
import spark_bench  # noqa: E402

import linview  # noqa: E402
from linview.app.bench import run_bench  # noqa: E402
from linview.app.report import plot_bench  # noqa: E402

# (name, example, dims, updates, strategies); sizes fit a 2-core, 24 GiB machine.
# REEVAL is the program as written; REEVAL_MODEL the program as compiled (where it differs)
SUITE = [
    ("ols_n2000", "ols.m", {"m": 4000, "n": 2000, "p": 1}, 20, "reeval,incr,auto"),
    ("ols_square_n4000", "ols.m", {"m": 4000, "n": 4000, "p": 1}, 16, "reeval,auto"),
    ("powers_n2000", "powers.m", {"n": 2000}, 10, "reeval,incr,auto"),
    ("powers_n4000", "powers.m", {"n": 4000}, 8, "reeval,auto"),
    ("sums_of_powers_n2000", "sums_of_powers.m", {"n": 2000}, 10, "reeval,auto"),
    ("general_form_n2000_p1", "general_form.m", {"n": 2000, "p": 1}, 20,
     "reeval,reeval_model,incr,hybrid,auto"),
    ("general_form_n2000_p500", "general_form.m", {"n": 2000, "p": 500}, 10,
     "reeval,reeval_model,incr,hybrid,auto"),
    ("gradient_descent_n2000", "gradient_descent.m", {"m": 4000, "n": 2000}, 10,
     "reeval,auto"),
    ("pagerank_n4000", "pagerank.m", {"n": 4000}, 20, "reeval,auto"),
    ("markov_n2000", "markov.m", {"n": 2000}, 10, "reeval,auto"),
    # a second process keeps one of the two cores busy during this one (issue 10)
    ("powers_n300_loaded", "powers.m", {"n": 300}, 200, "reeval,auto"),
]
QUICK = {"n": 200, "m": 400, "p": 1}
#: peers per example (bench/peers.py), measured after linview on the same inputs/updates
PEERS = {"ols": ("numpy", "octave", "normal_cholesky", "recursive_ls", "intelex"),
         "pagerank": ("numpy", "octave", "scipy_sparse")}
DEFAULT_PEERS = ("numpy", "octave")

# the thesis' single-machine (Octave) numbers for the same programs (§6.6), for context
THESIS = {
    "ols": "Octave, n=4,000: INCR 3.56× faster than REEVAL (Fig. 6.3)",
    "powers": "Octave A^16, n=10,000: REEVAL-EXP 99.1 s, INCR-EXP 6.3 s per update (15.7×)",
}


def busy_core():
    """A process spinning on one core until it is terminated (the loaded case)."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def run_peers(prog, example: str, r: dict, quick: bool) -> dict:
    """Every peer of ``example`` on the inputs and updates ``run_bench`` used."""
    from linview.app.bench import random_inputs, row_updates

    rng = np.random.default_rng(r["seed"])
    inputs = random_inputs(prog, rng)
    stream = row_updates(np.shape(inputs[r["input"]]), r["updates"], r["rank"], rng, 0.1)
    name = example[:-2]
    out = {}
    for peer in PEERS.get(name, DEFAULT_PEERS):
        try:
            if peer == "numpy":
                t = peers.numpy_as_written(name, dict(inputs), r["input"], stream)
            elif peer == "octave":
                t = peers.octave(ROOT / "examples" / example, dict(inputs), r["input"],
                                 stream[: min(len(stream), 3 if quick else 5)])
            elif peer == "normal_cholesky":
                t = peers.normal_cholesky(dict(inputs), r["input"], stream)
            elif peer == "recursive_ls":
                t = peers.recursive_ls(dict(inputs), r["input"], stream)
            elif peer == "intelex":
                t = peers.intelex_incremental(dict(inputs), r["input"], stream)
            else:
                t = peers.scipy_sparse_pagerank(dict(inputs), stream)
        except (RuntimeError, OSError, subprocess.SubprocessError) as e:
            print(f"   peer {peer} failed: {e}", flush=True)
            continue
        if t:
            out[peer] = {**peers.summary(t), "load_avg": os.getloadavg()[0]}
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default=None, help="comma-separated configuration names")
    ap.add_argument("--no-peers", action="store_true")
    args = ap.parse_args()
    load = os.getloadavg()
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    results = []
    for name, example, dims, updates, strategies in SUITE:
        if args.only and name not in args.only.split(","):
            continue
        if args.quick:
            dims = {k: QUICK.get(k, v) for k, v in dims.items()}
            updates = min(updates, 5)
        prog = linview.compile_file(ROOT / "examples" / example, dims=dims,
                                    least_squares="normal")  # the strategies of one trigger
        print(f"== {name} {dims}", flush=True)
        busy = busy_core() if name.endswith("_loaded") else None
        try:
            r = run_bench(prog, updates=updates, strategies=strategies.split(","),
                          progress=False)
        finally:
            if busy:
                busy.terminate()
                busy.wait()
        r["name"] = name
        r["loaded"] = busy is not None
        r["peers"] = {} if args.no_peers or busy else run_peers(prog, example, r, args.quick)
        ref = r["strategies"]["reeval"]["mean_s"]
        for v in r["peers"].values():
            v["speedup_vs_reeval"] = ref / v["mean_s"]
        if not args.quick:
            (out / f"{name}.json").write_text(json.dumps(r, indent=2))
            plot = dict(r, strategies={**r["strategies"],
                                       **{f"{k} (peer)": v for k, v in r["peers"].items()}})
            plot_bench(plot, str(out / f"{name}.png"))
        results.append(r)
        for s, v in list(r["strategies"].items()) + [(f"{k} (peer)", v)
                                                     for k, v in r["peers"].items()]:
            extra = (f"  predicted {v['predicted_speedup']:7.1f}x  floor "
                     f"x{v['trigger_over_floor'] or 0:5.1f}  err {v['max_rel_error']:.0e}  "
                     f"threads {v['blas_threads']}") if "predicted_speedup" in v else ""
            print(f"   {s:>18} mean {v['mean_s'] * 1e3:9.2f} ms  speedup "
                  f"{v['speedup_vs_reeval']:7.1f}x{extra}", flush=True)
    if not args.quick and results:
        readme = HERE / "README.md"
        old = readme.read_text() if readme.exists() else ""
        text = render(_with_earlier(results, out), load, fresh=[r["name"] for r in results])
        if spark_bench.BEGIN in old and spark_bench.END in old:  # keep the Spark section
            end = old.index(spark_bench.END) + len(spark_bench.END)
            text += "\n" + old[old.index(spark_bench.BEGIN):end] + "\n"
            rest = old[end:].lstrip("\n")  # sections written by the other bench scripts
            if rest:
                text += "\n" + rest
        readme.write_text(text)
    return 0


def _with_earlier(results: list[dict], out) -> list[dict]:
    """Every configuration of the suite, in its order: this run's result, else the last one
    recorded in ``results/NAME.json`` (each row carries its own load and threads)."""
    fresh = {r["name"]: r for r in results}
    table = []
    for name, *_ in SUITE:
        if name in fresh:
            table.append(fresh[name])
        elif (out / f"{name}.json").exists():
            table.append(json.loads((out / f"{name}.json").read_text()))
    return table


def render(results: list[dict], load: tuple[float, ...] | None = None,
           fresh: list[str] | None = None) -> str:
    # the machine and rates of this run (earlier rows carry their own)
    m = next((r["machine"] for r in results if r["name"] in (fresh or [])),
             results[0]["machine"] if results else {})
    rates = m.get("rates", {})
    lines = [
        "# Benchmarks",
        "",
        "Generated by `python bench/run_all.py` (`make bench`; NumPy backend); the Spark",
        "section at the end comes from `python bench/spark_bench.py` (raw numbers in",
        "`results/spark.json`).",
        "",
        f"Machine: {m.get('cpus')} CPUs ({m.get('machine')}), Python {m.get('python')}, "
        f"NumPy {m.get('numpy')}, BLAS threads {m.get('blas_threads')}"
        + (f" (environment: {m['thread_env']})" if m.get("thread_env") else "") + ".",
        "Calibrated rates (`linview calibrate`): "
        + (f"gemm {rates['gemm_flops'] / 1e9:.0f} GFlop/s ({rates['gemm1_flops'] / 1e9:.0f} "
           f"on one thread), memory stream {rates['stream_bytes'] / 1e9:.1f} GB/s "
           f"({rates['stream1_bytes'] / 1e9:.1f}), thin product "
           f"{rates.get('thin_bytes', 0) / 1e9:.1f} GB/s "
           f"({rates.get('thin1_bytes', 0) / 1e9:.1f}), "
           f"call {rates['call_s'] * 1e6:.1f} µs."
           if rates else "—"),
        (f"The last run measured {len(fresh)} of the {len(SUITE)} configurations "
         f"({', '.join(fresh)}); the other rows come from earlier runs recorded in "
         "`results/` (each row's load average is in its last column)."
         if fresh is not None and len(fresh) < len(results) else
         f"This run measured all {len(results)} configurations."),
        "Absolute times hold for this machine only; the ratios were taken in one run on the",
        "same inputs and updates."
        + (f"  Load average when the suite started: {load[0]:.1f}, {load[1]:.1f}, "
           f"{load[2]:.1f} (1, 5, 15 min); the load during each row is in the table."
           if load else ""),
        "",
        "Each update changes one random row of the first dynamic input (rank 1).  REEVAL is",
        "the baseline: the program **as written** (loops step by step, `^` by repeated",
        "squaring, products in the best chain order), re-run after each update.",
        "REEVAL_MODEL re-runs the program as compiled (after the iterative model's",
        "rewriting), shown where it differs.  `predicted` is the seconds model's speedup",
        "(`linview cost`); `÷floor` the trigger time over the memory floor (one",
        "matrix-vector pass over each large view the maintaining trigger must read);",
        "`error` the max relative error of every view against re-evaluation after the",
        "stream; p10–p90 the spread of per-update times; `thr` the BLAS threads the update",
        "ran with; `load` the 1-minute load average after the row.  Peers (`bench/peers.py`)",
        "ran on the same inputs and updates after linview: `numpy` the program written in",
        "NumPy, `octave` GNU Octave running the `.m` file (timed inside Octave around the",
        "call, 5 updates), `normal_cholesky` keeps XᵀX, XᵀY and re-solves by Cholesky,",
        "`recursive_ls` (statsmodels' `RecursiveLS`) and `intelex` (scikit-learn-intelex's",
        "`IncrementalLinearRegression`) are append-only: they take each changed row as one",
        "new observation (a different update of the same size; no peer row when the",
        "package is not installed), `scipy_sparse` 10 power-iteration steps on a sparse",
        "matrix (8 links per page).",
        "",
        "| benchmark | strategy | mean / update | p10–p90 | speedup vs REEVAL | predicted "
        "| ÷floor | error | thr | load |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        dims = ", ".join(f"{k}={v}" for k, v in r["dims"].items())
        label = f"{r['program']} ({dims})" + (", one core busy" if r.get("loaded") else "")
        for s, v in r["strategies"].items():
            chosen = " (whole-trigger re-evaluation)" if s == "auto" and \
                v.get("whole_trigger") == "reeval" else ""
            lines.append(
                f"| {label} | {s.upper()}{chosen} | {_t(v['mean_s'])} | "
                f"{_t(v['p10_s'])}–{_t(v['p90_s'])} | {v['speedup_vs_reeval']:.1f}× | "
                f"{v.get('predicted_speedup', float('nan')):.1f}× | "
                f"{v['trigger_over_floor'] or 0:.1f} | {v['max_rel_error']:.0e} | "
                f"{v.get('blas_threads')} | {v.get('load_avg', [0, 0])[-1]:.1f} |")
        for s, v in r.get("peers", {}).items():
            lines.append(f"| {label} | peer: {s} | {_t(v['mean_s'])} | "
                         f"{_t(v['p10_s'])}–{_t(v['p90_s'])} | {v['speedup_vs_reeval']:.1f}× "
                         f"| | | | | {v['load_avg']:.1f} |")
    lines += ["", "Predicted (seconds model) vs measured ranking, fastest first.  A pair "
              "disagrees when the measured spreads do not overlap (one's p90 below the "
              "other's p10) and the prediction orders it the other way by more than 10%; "
              "closer pairs are ties:", ""]
    for r in results:
        rk = r["ranking"]
        bad = rk.get("disagreements")
        verdict = "" if bad is None else ("; agree" if not bad else "; disagree on " + ", ".join(
            f"{a.upper()} < {b.upper()}" for a, b in bad))
        lines.append(f"* {r['name']}: measured {' < '.join(s.upper() for s in rk['measured'])}"
                     f"; predicted {' < '.join(s.upper() for s in rk['predicted'])}{verdict}")
    lines += ["", "The thesis' single-machine numbers beside ours (different machine and "
              "runtime; the thesis' REEVAL is its own Octave re-evaluation):", "",
              "| program | thesis | here (AUTO vs REEVAL as written, this run) |",
              "|---|---|---|"]
    for k, v in THESIS.items():
        ours = [f"{r['name']}: {r['strategies']['auto']['speedup_vs_reeval']:.1f}×"
                for r in results if r["program"] == k and "auto" in r["strategies"]]
        lines.append(f"| {k} | {v} | {'; '.join(ours) or '—'} |")
    lines += ["", "Plots: `results/<benchmark>.png`.", ""]
    return "\n".join(lines)


def _t(x: float) -> str:
    return f"{x * 1e3:.3g} ms" if x < 1 else f"{x:.3g} s"


if __name__ == "__main__":
    sys.exit(main())
