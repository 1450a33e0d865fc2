"""AUTO against the best as-written NumPy on every program of ``bench/`` and ``examples/``
and every thin-iterate program of ``tests/programs/`` (n = 2000, rank-1 row updates), each
timed in blocks of its own (``linview bench``'s protocol; the as-written program on every
BLAS thread and on one, the faster compared).

    python bench/thin_iterate.py [--suite all|thin|examples|corpus] [--only markov30,...]
                                 [--updates N] [--json out.json]

The suites: ``thin`` the four programs of ``bench/thin/`` (30 Markov steps, 5
gradient-descent steps, 20 PageRank steps, 8 steps of ``T = A*T + B`` with one column),
``examples`` every program of ``examples/`` but the two whose link matrix is sparse and
stochastic (``pagerank_solve.m``, ``pagerank_personalised.m``: a random row update is no
link change; ``bench/pagerank_graph.py`` measures them against warm power iteration),
``corpus`` the thin iterates of ``tests/programs/`` (sizes bound through the inputs'
shapes); ``all`` (the default) all three, a few minutes on a quiet 2-core machine.

One line per program: as-written on all threads and on one, AUTO, AUTO's ratio to the
faster baseline (>= 1: AUTO as fast or faster; the target is 0.95) and the p10-p90
spread of both, then AUTO's switches (at load and while running: ``docs/auto.md``).  The
programs below 0.95 are listed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

import linview  # noqa: E402
from linview.app.bench import run_bench  # noqa: E402

TARGET = 0.95


def suites(N: int = 2000, M: int = 4000) -> dict:
    """name: (file, how sizes are given, updates) per suite; sizes as ``dims`` or as the
    inputs' ``shapes`` (n = N, and M rows for the least-squares programs).  The programs
    whose as-written form costs O(n³) per update (seconds) get 4 updates: AUTO is far
    ahead there, and their baselines would take most of the run."""
    return {"thin": _thin(N, M), "examples": _examples(N, M), "corpus": _corpus(N, M)}


def _thin(N, M):
    return {
        "markov30": (HERE / "thin" / "markov30.m", {"dims": {"n": N}}, 16),
        "gradient_descent5": (HERE / "thin" / "gradient_descent5.m",
                              {"dims": {"m": M, "n": N}}, 16),
        "pagerank20": (HERE / "thin" / "pagerank20.m", {"dims": {"n": N}}, 16),
        "general_form8": (HERE / "thin" / "general_form8.m", {"dims": {"n": N}}, 16),
    }


def _examples(N, M):
    EX = ROOT / "examples"
    return {
        "ols": (EX / "ols.m", {"dims": {"m": M, "n": N, "p": 1}}, 4),
        "ols_inv": (EX / "ols_inv.m", {"dims": {"m": M, "n": N, "p": 1}}, 4),
        "ols_stable": (EX / "ols_stable.m", {"dims": {"m": M, "n": N, "p": 1}}, 4),
        "powers": (EX / "powers.m", {"dims": {"n": N}}, 4),
        "sums_of_powers": (EX / "sums_of_powers.m", {"dims": {"n": N}}, 4),
        "general_form": (EX / "general_form.m", {"dims": {"n": N, "p": 1}}, 16),
        "gradient_descent": (EX / "gradient_descent.m", {"dims": {"m": M, "n": N}}, 16),
        "pagerank": (EX / "pagerank.m", {"dims": {"n": N}}, 16),
        "markov": (EX / "markov.m", {"dims": {"n": N}}, 16),
    }


def _corpus(N, M):
    TP, SQ, COL = ROOT / "tests" / "programs", (N, N), (N, 1)
    return {  # the loops whose iterate is a vector (and tests/test_aswritten.py's CORPUS)
        "markov_steps": (TP / "markov_steps.m", {"shapes": {"P": SQ, "p0": COL}}, 16),
        "pagerank_uniform": (TP / "pagerank_uniform.m", {"shapes": {"M": SQ}}, 16),
        "ppr": (TP / "ppr.m", {"shapes": {"M": SQ, "v": COL, "d": (1, 1)}}, 16),
        "gradient_descent_ls": (TP / "gradient_descent_ls.m",
                                {"shapes": {"X": (M, N), "y": (M, 1)}}, 16),
        "jacobi": (TP / "jacobi.m", {"shapes": {"A": SQ, "b": COL}}, 16),
        "rayleigh_steps": (TP / "rayleigh_steps.m", {"shapes": {"A": SQ, "x0": COL}}, 16),
        "cg_steps": (TP / "cg_steps.m", {"shapes": {"A": SQ, "b": COL}}, 16),
        "gauss_seidel": (TP / "gauss_seidel.m", {"shapes": {"A": SQ, "b": COL, "x0": COL}}, 4),
        "logistic_gd": (TP / "logistic_gd.m",
                        {"shapes": {"X": (M, N), "y": (M, 1), "w0": COL}}, 16),
        "powers_sum": (TP / "powers_sum.m", {"shapes": {"A": SQ}}, 4),  # the matrix iterate
    }


def compile_one(path: Path, sizes: dict):
    if "shapes" in sizes:
        shapes = tuple((k, r, c) for k, (r, c) in sizes["shapes"].items())
        return linview.compile_file(path, shapes=shapes, least_squares="normal")
    return linview.compile_file(path, dims=sizes["dims"], least_squares="normal")  # as before


def measure(name: str, path: Path, sizes: dict, updates: int) -> dict:
    prog = compile_one(path, sizes)
    r = run_bench(prog, updates=updates, strategies=("reeval", "auto"), progress=False)
    both, auto = r["baseline_threads"], r["strategies"]["auto"]
    base = r["strategies"]["reeval"]
    best = min(both["all_threads_s"], both["one_thread_s"])
    return {"sizes": sizes, "updates": updates, **both, "auto_s": auto["mean_s"],
            "ratio": best / auto["mean_s"],
            "auto_p10_p90_s": [auto["p10_s"], auto["p90_s"]],
            "written_p10_p90_s": [base["p10_s"], base["p90_s"]],
            "auto_threads": auto["blas_threads"], "whole_trigger": auto["whole_trigger"],
            "max_rel_error": auto["max_rel_error"], "load": os.getloadavg()[0],
            "switches": auto.get("switches", []),
            "calibration": r["machine"]["calibration"], "rates": r["machine"]["rates"]}


def _ms(x: float) -> str:
    return f"{x * 1e3:.3g}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="all", choices=["all", "thin", "examples", "corpus"])
    ap.add_argument("--n", type=int, default=2000, help="n (a smoke run: --n 200)")
    ap.add_argument("--only", help="comma-separated program names")
    ap.add_argument("--updates", type=int, help="updates per program (default: its own)")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    table = {k: v for s, progs in suites(args.n, 2 * args.n).items() if args.suite in ("all", s)
             for k, v in progs.items()}
    if args.only:
        table = {k: v for k, v in table.items() if k in args.only.split(",")}
    out, below = {}, []
    print(f"{'program':<22} {'written, all':>12} {'written, 1':>10} {'auto':>8} "
          f"{'auto/best':>9}  {'spread written / auto (p10-p90, ms)':<36} thr  load")
    for name, (path, sizes, updates) in table.items():
        try:
            r = measure(name, path, sizes, args.updates or updates)
        except linview.LinviewError as e:
            print(f"{name:<22} not measured: {e}", flush=True)
            out[name] = {"error": str(e)}
            continue
        out[name] = r
        w, a = r["written_p10_p90_s"], r["auto_p10_p90_s"]
        spread = f"{_ms(w[0])}-{_ms(w[1])} / {_ms(a[0])}-{_ms(a[1])}"
        print(f"{name:<22} {_ms(r['all_threads_s']):>9} ms {_ms(r['one_thread_s']):>7} ms "
              f"{_ms(r['auto_s']):>5} ms {r['ratio']:8.2f}x  {spread:<36} "
              f"{r['auto_threads']!s:>3}  {r['load']:.1f}  ({r['whole_trigger']})", flush=True)
        for s in r["switches"]:
            when = "at load" if s.get("at") == "load" else f"after update {s['update'] + 1}"
            print(f"    {when}: {s['from']} -> {s['to']} ({s['because']})", flush=True)
        if r["ratio"] < TARGET:
            below.append(f"{name} {r['ratio']:.2f}x")
    from linview.compiler.calibrate import status

    print("calibration:", ", ".join(f"{k} {v}" for k, v in status().items()))
    print(f"below {TARGET}x:", ", ".join(below) or "none")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
