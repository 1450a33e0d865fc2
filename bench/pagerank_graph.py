"""PageRank on a power-law graph under an edge stream: linview's solve view against peers.

    python bench/pagerank_graph.py --nodes 100000 --updates 1000
    python bench/pagerank_graph.py --nodes 1000000 --updates 200 --peer-every 50
    python bench/pagerank_graph.py --table --nodes 100000 --changes 100
    python bench/pagerank_graph.py --table --nodes 100000 --changes 100 --seeds 16
    python bench/pagerank_graph.py --markdown bench/results/pagerank_table_n1000000.json
    python bench/pagerank_graph.py --plain-load --nodes 200000 --tolerances 1e-4,1e-8
    python bench/pagerank_graph.py --laws --nodes 100000 --seed 7 --min-batches 40

The graph is Chung–Lu (power-law out- and in-weights, exponents 2.1 and 2.3), generated in
NumPy from a fixed seed with about ``--degree`` out-links per node.  ``examples/
pagerank_solve.m`` is loaded on it and a stream of random edge insertions (Chung–Lu
targets) and deletions (a random existing out-link) is applied one record at a time with
``views.update_edges``.  Every number comes from this one run:

* linview: latency per edge change (median, p99) and the certified L1 bound after every
  change (its maximum must stay below the tolerance);
* SciPy power iteration on the current graph, warm-started from the previous vector and
  cold from uniform, each stopped by the same certified test (``‖x_{k+1} - x_k‖₁ =
  ‖r_k‖₁ ≤ tol·(1 - d)``), timed every ``--peer-every`` changes on the current graph in
  CSR (building it is not timed);
* networkx ``pagerank`` and scikit-network ``PageRank`` (if installed) recomputing on a
  ``--subsample``-node induced subgraph (networkx cannot do 10⁶ nodes in reasonable time);
* the L1 error against an exact solve (power iteration to a residual of 1e-13) after
  the whole stream, and memory (linview's graph + vectors) against the CSR graph.

Results go to ``bench/results/pagerank_graph_n<N>_tol<T>.json`` (``--table``:
``pagerank_table_n<N>_seed<S>.json``, ``_seeds<P>`` added for personalised PageRank;
``--json`` names another file); the spread of every time is reported beside it (p10/p90).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sps

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import linview  # noqa: E402
from linview.solve.stochastic import StochasticMatrix  # noqa: E402


def chung_lu(n: int, m: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """``m`` directed edges with power-law out- and in-weights; self-loops and duplicates
    removed."""
    def sample(gamma: float, size: int) -> np.ndarray:
        w = rng.permutation(np.arange(1, n + 1) ** (-1 / (gamma - 1)))
        c = np.cumsum(w)
        return np.searchsorted(c / c[-1], rng.random(size))

    src, dst = sample(2.1, m), sample(2.3, m)
    keep = src != dst
    key = np.unique(src[keep].astype(np.int64) * n + dst[keep])
    return key // n, key % n


def power_iteration(S: sps.csr_matrix, dang: np.ndarray, d: float, x0: np.ndarray,
                    stop_l1: float, max_iter: int = 10_000,
                    teleport=None) -> tuple[np.ndarray, int]:
    """Jacobi / power iteration ``x ← d·(S x + 1 δᵀx/n) + (1-d)/n`` with S the normalised
    links in CSR and δ the dangling nodes, stopped when ``‖x_{k+1} - x_k‖₁ ≤ stop_l1`` (the
    residual of x_k; of every column when x is n×p, with ``teleport`` the (1-d)·seeds)."""
    n = S.shape[0]
    c = (1 - d) / n if teleport is None else teleport
    x = x0.copy()
    for k in range(1, max_iter + 1):
        y = d * (S @ x) + (d * x[dang].sum(axis=0) / n + c)
        diff = np.abs(y - x).sum(axis=0).max()
        x = y
        if diff <= stop_l1:
            return x, k
    return x, max_iter


def stats(ts) -> dict:
    a = np.asarray(ts, dtype=float)
    return {"median": float(np.median(a)), "mean": float(a.mean()),
            "p10": float(np.percentile(a, 10)), "p90": float(np.percentile(a, 90)),
            "p99": float(np.percentile(a, 99)), "count": int(a.size)}


def subsample_peers(src, dst, n: int, size: int, d: float, tol: float, rng) -> dict:
    """networkx and scikit-network PageRank on an induced subgraph of ``size`` nodes."""
    out: dict = {}
    nodes = np.sort(rng.choice(n, size=min(size, n), replace=False))
    pos = np.full(n, -1)
    pos[nodes] = np.arange(nodes.size)
    keep = (pos[src] >= 0) & (pos[dst] >= 0)
    s, t = pos[src[keep]], pos[dst[keep]]
    out["subsample"] = {"nodes": int(nodes.size), "edges": int(s.size)}
    try:
        import networkx as nx

        G = nx.DiGraph()
        G.add_nodes_from(range(nodes.size))
        G.add_edges_from(zip(s.tolist(), t.tolist(), strict=True))
        t0 = time.perf_counter()
        nx.pagerank(G, alpha=d, tol=tol / nodes.size, max_iter=1000)
        out["networkx_seconds"] = time.perf_counter() - t0
    except ImportError:
        out["networkx_seconds"] = None
    try:
        from sknetwork.ranking import PageRank

        A = sps.csr_matrix((np.ones(s.size), (s, t)), shape=(nodes.size, nodes.size))
        t0 = time.perf_counter()
        PageRank(damping_factor=d, n_iter=1000, tol=tol / nodes.size).fit_predict(A)
        out["sknetwork_seconds"] = time.perf_counter() - t0
    except ImportError:
        out["sknetwork_seconds"] = None
    return out


def run(args) -> dict:
    rng = np.random.default_rng(args.seed)
    n, d, tol = args.nodes, args.damping, args.tolerance
    t0 = time.perf_counter()
    src, dst = chung_lu(n, args.degree * n, rng)
    gen_s = time.perf_counter() - t0
    csr = sps.csr_matrix((np.ones(src.size), (dst, src)), shape=(n, n))
    csr_bytes = csr.data.nbytes + csr.indices.nbytes + csr.indptr.nbytes
    M = StochasticMatrix(n, src, dst)
    prog = linview.compile_file(HERE.parent / "examples" / "pagerank_solve.m")
    t0 = time.perf_counter()
    views = prog.load(M=M, d=d, tolerance=tol)
    load_s = time.perf_counter() - t0
    print(f"graph: {n} nodes, {src.size} edges, {int(M.dangling.sum())} dangling; "
          f"generated in {gen_s:.1f} s, loaded (solved) in {load_s:.1f} s", flush=True)

    targets = dst[rng.integers(dst.size, size=args.updates)]
    lat, bounds, warm, warm_it, cold, cold_it = [], [], [], [], [], []
    x_prev = np.array(views["r"]).ravel()
    for step in range(args.updates):
        j = int(rng.integers(n))
        rows, _, _ = M.column(j)
        if rows.size and rng.random() < 0.5:
            rec = ("delete", j, int(rows[rng.integers(rows.size)]))
        else:
            i = int(targets[step])  # an existing edge's target: in-degree-proportional
            if i == j or i in set(rows.tolist()):
                continue
            rec = ("insert", j, i)
        t = time.perf_counter()
        views.update_edges("M", [rec])
        lat.append(time.perf_counter() - t)
        bounds.append(views.error_bound("r"))
        if args.peer_every and step % args.peer_every == 0:
            S, dang = M.sparse_part().tocsr(), M.dangling  # the graph as a peer holds it
            t = time.perf_counter()
            x_prev, k = power_iteration(S, dang, d, x_prev, tol * (1 - d))
            warm.append(time.perf_counter() - t)
            warm_it.append(k)
            if len(cold) < args.cold_runs:
                t = time.perf_counter()
                _, k = power_iteration(S, dang, d, np.full(n, 1 / n), tol * (1 - d))
                cold.append(time.perf_counter() - t)
                cold_it.append(k)
        if (step + 1) % max(1, args.updates // 10) == 0:
            print(f"  {step + 1} changes: median {np.median(lat) * 1e3:.2f} ms, "
                  f"bound {bounds[-1]:.2e}", flush=True)
    exact, _ = power_iteration(M.sparse_part().tocsr(), M.dangling, d,
                               np.array(views["r"]).ravel(), 1e-13 * (1 - d))
    err = float(np.abs(np.array(views["r"]).ravel() - exact).sum())
    peers = subsample_peers(src, dst, n, args.subsample, d, tol, rng) if args.subsample \
        else {}
    solver = views.solver("r")
    res = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "load_average": os.getloadavg()},
        "graph": {"nodes": n, "edges": int(src.size), "dangling": int(M.dangling.sum()),
                  "seed": args.seed, "generator": "Chung-Lu (2.1 out, 2.3 in)"},
        "damping": d, "tolerance_l1": tol, "changes": len(lat), "load_seconds": load_s,
        "linview_seconds": stats(lat), "bound_max": float(max(bounds)),
        "bound_held_every_change": bool(max(bounds) <= tol),
        "l1_error_after_stream": err, "ranks_sum": float(np.sum(views["r"])),
        "warm_power_seconds": stats(warm) if warm else None,
        "warm_power_iterations": stats(warm_it) if warm_it else None,
        "cold_power_seconds": stats(cold) if cold else None,
        "cold_power_iterations": stats(cold_it) if cold_it else None,
        "memory_bytes": views.memory_bytes(), "csr_bytes": int(csr_bytes),
        "memory_ratio": views.memory_bytes() / csr_bytes,
        "solver_stats": dict(solver.stats), **peers,
    }
    med = res["linview_seconds"]["median"]
    if warm:
        res["speedup_vs_warm"] = res["warm_power_seconds"]["median"] / med
    if cold:
        res["speedup_vs_cold"] = res["cold_power_seconds"]["median"] / med
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--degree", type=int, default=10, help="edges drawn per node")
    ap.add_argument("--updates", type=int, default=1000)
    ap.add_argument("--tolerance", type=float, default=1e-8, help="L1 bound kept")
    ap.add_argument("--damping", type=float, default=0.85)
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--peer-every", type=int, default=50)
    ap.add_argument("--cold-runs", type=int, default=3)
    ap.add_argument("--subsample", type=int, default=100_000)
    ap.add_argument("--json", default=None)
    ap.add_argument("--table", action="store_true",
                    help="the table: --tolerances x --batches, per-change speedup over warm "
                    "power iteration, errors against a 1e-13 reference, top-100 agreement")
    ap.add_argument("--tolerances", type=lambda s: [float(x) for x in s.split(",")],
                    default=[1e-3, 1e-4, 1e-5, 1e-6])
    ap.add_argument("--batches", type=lambda s: [int(x) for x in s.split(",")],
                    default=[1, 10, 100])
    ap.add_argument("--changes", type=int, default=100,
                    help="edge changes per table cell (at least --min-batches batches)")
    ap.add_argument("--min-batches", type=int, default=3,
                    help="batches per table cell at least (the bootstrap's sample)")
    ap.add_argument("--seeds", type=int, default=0,
                    help="--table for personalised PageRank with this many seed columns")
    ap.add_argument("--plain-load", action="store_true",
                    help="load() of the README program with a plain scipy.sparse M, no "
                    "pragma, against cold power iteration")
    ap.add_argument("--laws", action="store_true",
                    help="linview cost's work laws against the counts push and power "
                    "iteration record (a fresh load per --tolerances x --batches cell)")
    ap.add_argument("--check-laws", metavar="JSON", help="--laws from a recorded result")
    ap.add_argument("--markdown", metavar="JSON",
                    help="print the table of a --table result, with linview cost's "
                    "predictions (bench/pagerank_table.py)")
    ap.add_argument("--rates-from", metavar="JSON",
                    help="--markdown of a result recorded without its rates: price with the "
                    "rates recorded in this other result, not this machine's of the moment")
    args = ap.parse_args(argv)
    if args.markdown:
        from pagerank_table import markdown  # its own file (size)

        res = json.loads(Path(args.markdown).read_text())
        if args.rates_from:
            res.setdefault("rates", json.loads(Path(args.rates_from).read_text())["rates"])
        print(markdown(res))
        return 0
    if args.plain_load:
        from pagerank_load import plain_load  # its own file (size)

        res = plain_load(args)
        out = Path(args.json or HERE / "results" / f"pagerank_plain_load_n{args.nodes}.json")
        out.write_text(json.dumps(res, indent=2) + "\n")
        print(f"written {out}")
        return 0
    if args.laws or args.check_laws:
        from pagerank_table import law_cells, law_row, laws

        res = json.loads(Path(args.check_laws).read_text()) if args.check_laws else laws(args)
        if args.check_laws:
            for c in law_cells(res):
                print(law_row(res["graph"]["nodes"], res["damping"], c))
            if any("samples" in c for c in res["cells"]):  # a --table result: its seconds
                from pagerank_terms import terms_text

                print(terms_text(res))
        else:
            out = Path(args.json or HERE / "results" /
                       f"pagerank_laws_n{args.nodes}_seed{args.seed}.json")
            out.write_text(json.dumps(res, indent=2) + "\n")
            print(f"written {out}")
        return 0
    if args.table:
        from pagerank_table import table

        res = table(args)
        tail = f"_seed{args.seed}" + (f"_seeds{args.seeds}" if args.seeds else "")
        out = Path(args.json or HERE / "results" / f"pagerank_table_n{args.nodes}{tail}.json")
        out.write_text(json.dumps(res, indent=2) + "\n")
        print(f"written {out}")
        return 0
    res = run(args)
    out = Path(args.json or HERE / "results" /
               f"pagerank_graph_n{args.nodes}_tol{args.tolerance:g}.json")
    out.write_text(json.dumps(res, indent=2) + "\n")
    lv = res["linview_seconds"]
    print(f"linview per edge change: median {lv['median'] * 1e3:.2f} ms "
          f"(p10 {lv['p10'] * 1e3:.2f}, p90 {lv['p90'] * 1e3:.2f}, p99 {lv['p99'] * 1e3:.2f})")
    for key, label in (("warm_power_seconds", "SciPy power iteration, warm"),
                       ("cold_power_seconds", "SciPy power iteration, cold")):
        if res.get(key):
            s = res[key]
            ratio = s["median"] / lv["median"]
            print(f"{label}: median {s['median'] * 1e3:.1f} ms (p10 {s['p10'] * 1e3:.1f}, "
                  f"p90 {s['p90'] * 1e3:.1f}) -> linview {ratio:.1f}x faster")
    print(f"certified bound: max {res['bound_max']:.2e} (tolerance {args.tolerance:g}); "
          f"L1 error after the stream {res['l1_error_after_stream']:.2e}; "
          f"ranks sum to {res['ranks_sum']:.12f}")
    print(f"memory: {res['memory_bytes'] / 2**20:.0f} MiB = {res['memory_ratio']:.2f}x the CSR "
          f"graph ({res['csr_bytes'] / 2**20:.0f} MiB)")
    if res.get("subsample"):
        print(f"subsample {res['subsample']}: networkx {res.get('networkx_seconds')} s, "
              f"scikit-network {res.get('sknetwork_seconds')} s per recomputation")
    print(f"written {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
