"""Does push's threshold θ, carried from one batch to the next, cost work?

    python bench/push_theta.py --nodes 100000 --batches 20
    python bench/push_theta.py --nodes 1000000 --batches 20 --rules carry

Push (``PushSolver.drive``) pushes the nodes whose residual passes θ; θ starts at
target/64, is divided by 8 whenever no node passes it, and after a batch is doubled (at
most target/64) and kept for the next batch.  This runs the same batches (one graph, one
stream per cell: the graph evolves the same way under every rule) under three rules for
θ at the start of a batch:

* ``carry``: as shipped;
* ``reset``: θ = target/64 at every batch, nothing carried;
* ``keep``: θ as the previous batch ended, not doubled.

Per cell (tolerance:batch size) and rule it prints the dense rounds a batch, the rescans
(θ divided), the local rounds and the links they read, the time a batch (rough: a shared
machine), θ at the start of a batch against target/64, and the largest certified bound.
No rule changes what is certified: ``drive`` stops only below the target.  The counts go
to ``bench/results/push_theta_n<N>.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from pagerank_graph import chung_lu  # noqa: E402
from pagerank_table import edge_batch  # noqa: E402

import linview  # noqa: E402
from linview.solve import solvers  # noqa: E402
from linview.solve.stochastic import StochasticMatrix  # noqa: E402

SHIPPED = solvers.PushSolver.drive
RULE = {"rule": "carry", "theta0": []}


def drive(self) -> None:
    """``PushSolver.drive`` with θ set by the rule under test first."""
    if RULE["rule"] == "reset":
        self.theta[:] = self.target / 64
    elif RULE["rule"] == "keep":
        self.theta[:] = self.theta / 2  # undoes the doubling at the end of the last drive
    RULE["theta0"].append(float(self.theta[0] / (self.target / 64)))
    SHIPPED(self)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=12, help="the graph's (as --table's)")
    ap.add_argument("--batches", type=int, default=20, help="batches per cell and rule")
    ap.add_argument("--cells", default="1e-6:10,1e-5:100", help="tolerance:batch size, ...")
    ap.add_argument("--rules", default="carry,reset,keep")
    args = ap.parse_args(argv)
    n = args.nodes
    src, dst = chung_lu(n, 10 * n, np.random.default_rng(args.seed))
    prog = linview.compile_file(HERE.parent / "examples" / "pagerank_solve.m")
    solvers.PushSolver.drive = drive
    out = {"nodes": n, "seed": args.seed, "cells": []}
    for cell in args.cells.split(","):
        tol, size = float(cell.split(":")[0]), int(cell.split(":")[1])
        for rule in args.rules.split(","):
            RULE["rule"] = "carry"  # the load as shipped
            M = StochasticMatrix(n, src, dst)
            views = prog.load(M=M, d=0.85, tolerance=tol)
            RULE["rule"] = rule
            counts, rng = views.solver("r").stats, np.random.default_rng(99)
            rec = {k: [] for k in ("sweeps", "rescans", "rounds", "edges", "seconds",
                                   "theta0", "bound")}
            for _ in range(args.batches):
                batch = edge_batch(M, size, dst, rng)
                before = dict(counts)
                RULE["theta0"] = []
                t = time.perf_counter()
                views.update_edges("M", batch)
                rec["seconds"].append(time.perf_counter() - t)
                for k in ("sweeps", "rescans", "rounds", "edges"):
                    rec[k].append(counts[k] - before[k])
                rec["theta0"].append(RULE["theta0"][0])
                rec["bound"].append(views.error_bound("r"))
            out["cells"].append({"tolerance": tol, "batch": size, "rule": rule,
                                 "nnz": int(M.nnz), **rec})
            sw = np.array(rec["sweeps"])
            links = (np.array(rec["edges"]) - sw * M.nnz).mean() / M.nnz
            print(f"tol {tol:g} batch {size:3d} {rule:5s}: dense rounds {sw.mean():5.2f} "
                  f"(sem {sw.std(ddof=1) / np.sqrt(sw.size):.2f}), rescans "
                  f"{np.mean(rec['rescans']):4.2f}, local rounds {np.mean(rec['rounds']):5.1f}"
                  f", local links/nnz {links:.4f}, {np.mean(rec['seconds']) * 1e3:7.1f} ms; "
                  f"theta0 / (target/64) median {np.median(rec['theta0']):.3g}; bound max "
                  f"{max(rec['bound']):.2e} (tol {tol:g})", flush=True)
    path = HERE / "results" / f"push_theta_n{n}.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"written {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
