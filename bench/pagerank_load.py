"""``python bench/pagerank_graph.py --plain-load``: ``load()`` of the README program with a
plain ``scipy.sparse`` M and no pragma, against cold SciPy power iteration, and its memory.

    python bench/pagerank_graph.py --plain-load --nodes 1000000 --tolerances 1e-4,1e-6

The graph is :func:`pagerank_graph.chung_lu`'s (same seed, same sizes as the other modes).
"""

from __future__ import annotations

import os
import time

import numpy as np
import scipy.sparse as sps
from pagerank_graph import chung_lu

import linview

PLAIN = """function r = pr(M, d)
  %#linview scalar d
  n = size(M, 1);
  r = (eye(n) - d * M) \\ ((1 - d) / n * ones(n, 1));
end
"""


def plain_load(args) -> dict:
    """The README program with no pragma and M a plain ``scipy.sparse`` matrix (dangling
    nodes as zero columns): ``load()`` against cold power iteration on the same M, stopped
    by the same certified test, at each ``--tolerances``.  The first load compiles the
    sparse specialisation (timed as ``first_load_seconds``); a second one, under
    ``tracemalloc``, gives the peak of what ``load()`` allocates, added to M's own CSR
    (which the loaded module keeps, not copies): ``peak_ratio``.  Then one load per
    tolerance, timed, against cold power iteration timed next to it."""
    import tracemalloc

    rng = np.random.default_rng(args.seed)
    n, d = args.nodes, args.damping
    src, dst = chung_lu(n, args.degree * n, rng)
    deg = np.bincount(src, minlength=n)
    M = sps.csr_matrix((1.0 / deg[src], (dst, src)), shape=(n, n))
    del src, dst, deg
    csr = M.data.nbytes + M.indices.nbytes + M.indptr.nbytes
    prog = linview.compile(PLAIN, name="pr")
    tol0 = args.tolerances[0]
    t = time.perf_counter()
    views = prog.load(M=M, d=d, tolerance=tol0)  # compiles the sparse specialisation
    first = time.perf_counter() - t
    del views
    tracemalloc.start()
    views = prog.load(M=M, d=d, tolerance=tol0)
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del views
    print(f"first load {first:.2f} s (compile included); load peak {peak / 2**20:.0f} MiB "
          f"over M's CSR {csr / 2**20:.0f} MiB: {(csr + peak) / csr:.2f}x the CSR graph "
          f"(held after load {(csr + held) / csr:.2f}x)", flush=True)
    rows = []
    for tol in args.tolerances:
        t = time.perf_counter()
        views = prog.load(M=M, d=d, tolerance=tol)
        load_s = time.perf_counter() - t
        t = time.perf_counter()
        x, k = np.full(n, 1 / n), 0
        while True:
            y = d * (M @ x) + (1 - d) / n
            k += 1
            diff, x = np.abs(y - x).sum(), y
            if diff <= tol * (1 - d):
                break
        cold_s = time.perf_counter() - t
        solver = views.solver("r")
        rows.append({"tolerance": tol, "method": solver.method, "load_seconds": load_s,
                     "stats": dict(solver.stats), "bound": views.error_bound("r"),
                     "cold_power_seconds": cold_s, "cold_power_steps": k,
                     "load_vs_cold": load_s / cold_s,
                     "memory_ratio": views.memory_bytes() / csr})
        print(f"tol {tol:g}: load {load_s:.2f} s ({solver.method}, {solver.stats}), bound "
              f"{rows[-1]['bound']:.1e}; cold power iteration {cold_s:.2f} s ({k} steps): "
              f"{load_s / cold_s:.2f}x", flush=True)
        del views
    return {"graph": {"nodes": n, "edges": int(M.nnz), "seed": args.seed,
                      "csr_bytes": int(csr)},
            "damping": d, "first_load_seconds": first, "first_load_tolerance": tol0,
            "load_peak_bytes": int(peak), "held_after_load_bytes": int(held),
            "peak_ratio": (csr + peak) / csr, "rows": rows,
            "machine": {"cpus": os.cpu_count(), "load_average": os.getloadavg()}}
