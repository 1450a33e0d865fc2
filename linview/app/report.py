"""Rendering of ``linview cost`` and ``linview bench`` results: rich tables and a plot."""

from __future__ import annotations


def _scaled(x, units, last: str) -> str:
    """``x`` in the largest of ``units`` ((suffix, divisor), largest first) it reaches."""
    if x is None:
        return "—"
    for unit, div in units:
        if abs(x) >= div:
            return f"{x / div:.3g}{unit}"
    return last.format(x)


def _fl(x) -> str:
    return _scaled(x, (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)), "{:.3g}")


def _bytes(x) -> str:
    return _scaled(x, ((" GiB", 2 ** 30), (" MiB", 2 ** 20), (" KiB", 2 ** 10)), "{:.0f} B")


def _secs(x) -> str:
    if x is None:
        return "—"
    if x >= 1:
        return f"{x:.3g} s"
    return f"{x * 1e3:.3g} ms" if x >= 1e-3 else f"{x * 1e6:.3g} µs"


def print_solve_cost(console, solve: dict) -> None:
    """The solve views' part of ``linview cost`` (:mod:`linview.solve.cost`)."""
    for i in solve["inputs"]:
        how = "assumed: 10 per column; give --dims nnz_" + i["input"] + "=..." \
            if i["nnz_assumed"] else "from --dims"
        console.print(f"input {i['input']}: {i['storage']} ({i.get('why', '')}), {i['nnz']:,} "
                      f"non-zeros ({how}); held in {_bytes(i['bytes'])} (dense: "
                      f"{_bytes(i['dense_bytes'])})")
    for v in solve.get("sparse_views", ()):
        console.print(f"view {v['view']}: sparse: {v['why']}")
    for v in solve["views"]:
        console.print(f"solve view {v['view']} ({v['shape'][0]}×{v['shape'][1]}): method "
                      f"{v['method']}, tolerance {v['tolerance']:g}; kept with its residual "
                      f"in {_bytes(v['state_bytes'])}")
        where = "fits" if v.get("iterate_in_cache") else "does not fit"
        console.print(f"  one sweep (A times the iterate): {_fl(v['sweep_flops'])} flops, "
                      f"{_bytes(v['sweep_bytes'])} moved, about {_secs(v['sweep_s'])} "
                      f"(the calibrated streaming rate; the iterate {where} a core's own "
                      f"{_bytes(v.get('cache_bytes', 0))} cache, so each scattered read "
                      f"moves {'its 8 bytes' if v.get('iterate_in_cache') else 'a 64-byte line'})")
        if "dense_round_s" in v:
            from linview.solve.cost import DENSE_PASSES

            console.print(f"  a dense round of push (a push from every node): one pass over the "
                          f"links on every core and {DENSE_PASSES} over the iterate, about "
                          f"{_secs(v['dense_round_s'])}")
        console.print("  re-evaluation: about log(tolerance)/log(s) sweeps for A = I - s·M; an "
                      "update: its changed entries, then pushes until the residual certifies "
                      "the tolerance again (at most a warm re-solve, log(δ/tolerance)/log(1/s) "
                      "sweeps for a change of residual δ); measured on graphs: "
                      "bench/pagerank_graph.py")
        if pr := v.get("prediction"):
            console.print(f"  at tolerance {pr['tolerance']:g}, batches of {pr['batch']}: a "
                          f"batch brings about {pr['residual_per_batch']:.1e} of residual, "
                          f"{pr['reduction']:.2g}× the target {pr['target']:.1e}: about "
                          f"{pr['power_steps']:.0f} power-iteration steps against "
                          f"{pr['push_sweeps']:.2g} sweeps' worth of push; predicted "
                          f"{pr['predicted_speedup']:.3g}× warm power iteration per batch "
                          f"(a ratio of means): maintenance {pr['verdict']}"
                          + (", a close call" if pr.get("close_call") else "")
                          + f" (band {pr['band'][0]:.3g}–{pr['band'][1]:.3g}×: the rates', a "
                          f"dense round's and the work laws' errors in quadrature"
                          + ("; it holds 1×, so either choice may cost about the same)"
                             if pr.get("close_call") else ")"))


def print_cost(console, report: dict) -> None:
    from rich.table import Table

    dims = ", ".join(f"{k}={v}" for k, v in report["dims"].items()) or "none"
    console.print(f"[bold]{report['program']}[/]  dims: {dims}  rank k={report['rank']}  "
                  f"model: {report['model']}")
    if "solve" in report:
        print_solve_cost(console, report["solve"])
        return
    mem = report["memory"]
    console.print(f"memory held: re-evaluation {_bytes(mem['reeval'])}, incremental "
                  f"{_bytes(mem['incr'])}")
    for trig in report["triggers"]:
        t = Table(title=f"ON UPDATE {trig['input']}", title_justify="left")
        for col in ("view", "shape", "rank", "REEVAL", "INCR", "HYBRID",
                    "bytes (chosen)", "chosen"):
            t.add_column(col, justify="right" if col not in ("view", "chosen") else "left")

        def cell(c):  # flops and predicted time of one strategy
            if not c:
                return "—"
            return f"{_fl(c['flops'])} {_secs(c.get('seconds'))}"

        for v in trig["views"]:
            chosen = v["chosen"]
            t.add_row(v["view"], f"{int(v['shape'][0])}×{int(v['shape'][1])}",
                      f"{v['rank']:g}", cell(v["reeval"]), cell(v.get("incr")),
                      cell(v.get("hybrid")), _bytes(v[chosen]["bytes"]), chosen.upper())
        console.print(t)
        w = trig.get("whole_trigger", {})
        if "maintain_s" in w:
            threads = "all BLAS threads" if w["blas_threads"] is None else \
                f"{w['blas_threads']} BLAS thread" + ("s" if w["blas_threads"] > 1 else "")
            console.print(f"  whole trigger: maintain {_secs(w['maintain_s'])}, re-evaluate "
                          f"{_secs(w['reeval_s'])} → [bold]{w['strategy'].upper()}[/] "
                          f"({threads})")
        re = trig["reeval"]
        console.print(f"  re-evaluate as written: {_fl(re['flops'])} flops, "
                      f"{_bytes(re['bytes'])} moved, {_secs(re.get('seconds'))};  trigger: "
                      f"{_fl(trig['trigger']['flops'])} flops, "
                      f"{_bytes(trig['trigger']['bytes'])} moved, "
                      f"{_secs(trig['trigger'].get('seconds'))};  predicted speedup "
                      f"[bold]{trig['predicted_speedup']:.1f}×[/]")
        if "reeval_transformed" in trig:
            console.print("  (re-evaluating the compiled, transformed program would take "
                          f"{_secs(trig['reeval_transformed']['seconds'])})")
        if "formulas" in trig:
            f = trig["formulas"]
            console.print(f"  re-evaluation flops = {f['reeval']}")
            for view, per in f["views"].items():
                for strat, expr in per.items():
                    console.print(f"  {view} {strat.upper():>6} flops = {expr}")


def print_bench(console, result: dict) -> None:
    from rich.table import Table

    dims = ", ".join(f"{k}={v}" for k, v in result["dims"].items())
    console.print(f"[bold]{result['program']}[/]  {dims}  update of {result['input']}, "
                  f"rank {result['rank']}, {result['updates']} updates, seed {result['seed']}")
    t = Table()
    for col in ("strategy", "mean", "p10–p90", "speedup", "predicted", "÷floor", "error",
                "probe", "temp", "threads", "load"):
        t.add_column(col, justify="left" if col == "strategy" else "right", no_wrap=True)
    for s, r in result["strategies"].items():
        sp = r["speedup_vs_reeval"]
        fl = r["trigger_over_floor"]
        ps = r.get("predicted_speedup")
        name = s.upper() + (" (re-evaluates)" if s == "auto" and
                            r.get("whole_trigger") == "reeval" else "")
        t.add_row(name, _secs(r["mean_s"]), f"{_secs(r['p10_s'])}–{_secs(r['p90_s'])}",
                  f"{sp:.1f}×" if sp else "—", f"{ps:.1f}×" if ps else "—",
                  f"{fl:.1f}×" if fl else "—", f"{r['max_rel_error']:.0e}",
                  f"{r['probe_share']:.1%}" if r.get("probe_s") else "—",
                  _bytes(r["peak_temp_bytes"]), str(r.get("blas_threads", "—")),
                  f"{r['load_avg'][-1]:.1f}" if r.get("load_avg") else "—")
    console.print(t)
    console.print("REEVAL = the program as written, re-run after each update; predicted = "
                  "the seconds model's speedup; threads = BLAS threads of the update; load = "
                  "1-minute load average")
    views = max(r["view_bytes"] for r in result["strategies"].values())
    console.print(f"views held: {_bytes(views)}; mean = time per update, its share of the "
                  "pending low-rank terms added at the end included; ÷floor = mean over the "
                  "memory floor, one matrix-vector pass over each large view the maintaining "
                  "trigger must read "
                  f"({_floor_text(result)} here); "
                  "probe = share of the update time spent checking maintained inverses; "
                  "temp = peak temporary memory of an update")
    rk = result["ranking"]
    console.print("ranking, fastest first:  measured "
                  + " < ".join(s.upper() for s in rk["measured"])
                  + "   predicted " + " < ".join(s.upper() for s in rk["predicted"]))


def _floor_text(result: dict) -> str:
    floor = next(iter(result["strategies"].values())).get("floor_s")
    return _secs(floor) if floor else "none: no large view is read"


def plot_bench(result: dict, path: str) -> None:
    """A bar chart of the mean time per update (p10–p90 as error bars), log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result["strategies"])
    med = [result["strategies"][s]["mean_s"] * 1e3 for s in names]
    # the p10–p90 range around the mean (a mean outside it, as a slow first update makes,
    # gets no bar on that side)
    lo = [max(0.0, m - result["strategies"][s]["p10_s"] * 1e3)
          for m, s in zip(med, names, strict=True)]
    hi = [max(0.0, result["strategies"][s]["p90_s"] * 1e3 - m)
          for m, s in zip(med, names, strict=True)]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    bars = ax.bar([s.upper() for s in names], med, yerr=[lo, hi], capsize=4,
                  color=["#c44e52" if s == "reeval" else "#4c72b0" for s in names])
    for b, s in zip(bars, names, strict=True):
        sp = result["strategies"][s]["speedup_vs_reeval"]
        if sp:
            ax.annotate(f"{sp:.1f}×", (b.get_x() + b.get_width() / 2, b.get_height()),
                        ha="center", va="bottom", fontsize=9)
    ax.set_yscale("log")
    ax.set_ylabel("ms per update (mean, p10–p90)")
    dims = ", ".join(f"{k}={v}" for k, v in result["dims"].items())
    ax.set_title(f"{result['program']} ({dims}), update of {result['input']}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def console():
    """A rich console; when the output is not a terminal (a pipe, a log, CI) it is 140
    columns wide rather than rich's 80, so that the bench tables are not truncated."""
    import os
    import sys

    from rich.console import Console

    wide = not sys.stdout.isatty() and "COLUMNS" not in os.environ
    return Console(width=140 if wide else None)
