"""The printed table and bench/README.md's Spark section of ``bench/spark_bench.py``'s
results (the same numbers as its ``--json`` file)."""

from __future__ import annotations

from pathlib import Path


def table(res: dict) -> str:
    def ms(s):
        return f"{s['median'] * 1e3:9.1f} ms (p10 {s['p10'] * 1e3:.1f}, p90 {s['p90'] * 1e3:.1f})"

    rows = []
    if "power" in res:
        r = res["power"]
        rows += [f"(a) A^16, n={r['n']}",
                 f"    Spark INCR per update      {ms(r['incr_update_s'])}",
                 f"    Spark re-evaluation        {ms(r['reeval_s'])}",
                 f"    speedup INCR vs REEVAL     {r['speedup_incr_vs_reeval']:9.1f}x",
                 f"    one product, linview       {ms(r['product_linview_s'])}",
                 f"    one product, MLlib         {ms(r['product_mllib_blockmatrix_s'])}",
                 f"    MLlib / linview            {r['product_mllib_over_linview']:9.2f}x"]
    if "product" in res:
        r = res["product"]
        rows += [f"(a') one product, n={r['n']} (MLlib BLAS: {r['mllib_blas']})",
                 f"    linview                    {ms(r['product_linview_s'])}",
                 f"    linview, tiles + shuffle   {ms(r['product_linview_tiles_s'])}",
                 f"    MLlib BlockMatrix          {ms(r['product_mllib_blockmatrix_s'])}",
                 f"    MLlib / linview            {r['product_mllib_over_linview']:9.2f}x"]
    if "ols" in res:
        r = res["ols"]
        rows += [f"(b) OLS, X {r['m']}x{r['n']}",
                 f"    Spark INCR per update      {ms(r['incr_update_s'])}",
                 f"    Spark re-evaluation        {ms(r['reeval_s'])}",
                 f"    NumPy INCR per update      {ms(r['numpy_incr_update_s'])}",
                 f"    speedup INCR vs REEVAL     {r['speedup_incr_vs_reeval']:9.1f}x",
                 f"    Spark / NumPy INCR         {r['spark_over_numpy_incr']:9.1f}x"]
    if "stream" in res:
        r = res["stream"]
        first, last = r["rss"][0], r["rss"][-1]
        rows += [f"(c) {r['updates']} updates, OLS X {r['m']}x{r['n']}",
                 f"    first 100 per update       {ms(r['first_s'])}",
                 f"    last 100 per update        {ms(r['last_s'])}",
                 f"    last / first               {r['last_over_first']:9.2f}x",
                 f"    driver RSS (Python, JVM)   {first['python_mb']:.0f}, {first['jvm_mb']:.0f}"
                 f" MiB after {first['after']} -> {last['python_mb']:.0f}, "
                 f"{last['jvm_mb']:.0f} MiB after {last['after']}",
                 f"    JVM heap after GC          {first['jvm_heap_after_gc_mb']:.0f} -> "
                 f"{last['jvm_heap_after_gc_mb']:.0f} MiB; persistent RDDs "
                 f"{first['persistent_rdds']} -> {last['persistent_rdds']}",
                 f"    max lineage depth          {r['max_lineage_depth']}"]
    return "\n".join(rows)


BEGIN, END = "<!-- spark results: bench/spark_bench.py -->", "<!-- end of spark results -->"


def _t(s: dict) -> str:
    def one(x):
        return f"{x * 1e3:.0f} ms" if x < 1 else f"{x:.2f} s"
    return f"{one(s['median'])} | {one(s['p10'])}–{one(s['p90'])}"


def markdown(res: dict) -> str:
    """The Spark section of bench/README.md, from every case in ``res``."""
    m = res.get("machine", {})
    lines = [BEGIN, "## Spark backend", "",
             f"`python bench/spark_bench.py` on `{m.get('master')}`, Spark {m.get('spark')}, "
             f"{m.get('cores')} cores; raw numbers in `results/spark.json` (load average at "
             "the start of each case there).  Medians with p10–p90 over the repetitions.", "",
             "| case | measurement | median | p10–p90 |", "|---|---|---:|---:|"]

    def power(key, label):
        r = res[key]
        lines.extend([
            f"| A^16, n={r['n']}, {label} | Spark INCR per update | {_t(r['incr_update_s'])} |",
            f"| | Spark re-evaluation | {_t(r['reeval_s'])} |",
            f"| | **INCR vs re-evaluation** | **{r['speedup_incr_vs_reeval']:.1f}×** | |"])

    for key in sorted(k for k in res if k.startswith("power")):
        power(key, key.replace("power", "").strip("_").replace("_", " ") or "hybrid layout")
    for key in sorted(k for k in res if k.startswith(("power", "product"))):
        r = res[key]
        if "product_mllib_blockmatrix_s" not in r:
            continue
        blas = r.get("mllib_blas", "JNIBLAS")
        lines.extend([
            f"| one {r['n']}×{r['n']} product (`{key}`) | linview block multiply | "
            f"{_t(r['product_linview_s'])} |",
            *([f"| | linview, one task per tile + shuffle | "
               f"{_t(r['product_linview_tiles_s'])} |"] if "product_linview_tiles_s" in r
              else []),
            f"| | MLlib `BlockMatrix.multiply` ({blas}) | "
            f"{_t(r['product_mllib_blockmatrix_s'])} |",
            f"| | **MLlib / linview** | **{r['product_mllib_over_linview']:.1f}×** | |"])
    if "ols" in res:
        r = res["ols"]
        lines.extend([
            f"| OLS, X {r['m']}×{r['n']} | Spark INCR per update | {_t(r['incr_update_s'])} |",
            f"| | Spark re-evaluation | {_t(r['reeval_s'])} |",
            f"| | NumPy INCR per update | {_t(r['numpy_incr_update_s'])} |",
            f"| | **INCR vs re-evaluation** | **{r['speedup_incr_vs_reeval']:.1f}×** | |",
            f"| | **Spark INCR / NumPy INCR** | **{r['spark_over_numpy_incr']:.1f}×** | |"])
    if "stream" in res:
        r = res["stream"]
        first, last = r["rss"][0], r["rss"][-1]
        lines.extend([
            f"| {r['updates']} updates, OLS X {r['m']}×{r['n']} | first 100 per update | "
            f"{_t(r['first_s'])} |",
            f"| | last 100 per update | {_t(r['last_s'])} |",
            f"| | **last / first** | **{r['last_over_first']:.2f}×** | |",
            f"| | driver RSS Python, JVM (MiB) | {first['python_mb']:.0f}, "
            f"{first['jvm_mb']:.0f} after {first['after']} → {last['python_mb']:.0f}, "
            f"{last['jvm_mb']:.0f} after {last['after']} | |",
            f"| | JVM heap after GC (MiB); persistent RDDs | "
            f"{first['jvm_heap_after_gc_mb']:.0f} → {last['jvm_heap_after_gc_mb']:.0f}; "
            f"{first['persistent_rdds']} → {last['persistent_rdds']} | |",
            f"| | max lineage depth | {r['max_lineage_depth']} | |"])
    lines += ["", "MLlib's BLAS: `JNIBLAS` is a native BLAS its JVM found (OpenBLAS, which GNU "
              "Octave's Debian", "packages install); `VectorBLAS` is its pure-JVM fallback, "
              "what a machine without a native", "BLAS gets (`--mllib-blas java`).  An n×n "
              "product is 2n³ flops: NumPy's multithreaded gemm", "takes about 1.6 s for "
              "n = 4000 on these two cores, the floor for any block product here.", "",
              END]
    return "\n".join(lines)


def write_markdown(res: dict, readme: Path) -> None:
    """Replace (or append) the Spark section of ``readme``."""
    text = readme.read_text() if readme.exists() else "# Benchmarks\n"
    section = markdown(res)
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + section + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    readme.write_text(text)
