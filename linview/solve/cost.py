"""What ``linview cost`` says of a program with solve views.

A solve view is kept with its residual and driven below its tolerance after each update
(:mod:`.solvers`), so its cost is not a fixed formula like a maintained view's: an update
costs the entries it changes plus the pushes (or Krylov steps) that bring the residual
back, which depends on how large the change's residual is against the tolerance.  What
can be said before there is data, and what this report gives:

* storage: a sparse or stochastic input holds its non-zeros (``--dims nnz_M=...``, else
  :data:`ASSUMED_PER_COLUMN` per column, marked as assumed), not ``n²`` numbers;
* one *sweep*, a product of A with the iterate (``2·nnz`` flops, ``12·nnz`` bytes and the
  vectors), priced with the calibrated streaming rate as a lower bound (a sparse product
  reads the iterate at scattered places, which is slower): re-evaluation from scratch costs
  about ``log(tolerance) / log(s)`` sweeps for ``A = I - s·M``, an update between a few
  entries and a warm re-solve of ``log(δ / tolerance) / log(1/s)`` sweeps (δ the L1 size
  of the change's residual);
* measured per-update times on real-sized graphs come from ``bench/pagerank_graph.py``;
* with a tolerance and a micro-batch size (``linview cost --tolerance T --batch b``), a
  prediction of whether maintenance pays against warm-started power iteration run to the
  same certified bound (:func:`predict_push`).
"""

from __future__ import annotations

import math

from linview.compiler import ir
from linview.compiler.calibrate import rates
from linview.compiler.ir import Op
from linview.errors import CompileError
from linview.solve.sparsity import input_reasons, sparse_views

#: a sparse product reads the iterate at scattered places: a power-iteration step took
#: about this many times the streaming-rate bound of a sweep in ``bench/pagerank_graph.py``
#: (48 ms at 10⁶ nodes and 9.3·10⁶ edges against a bound of 8.6 ms on its machine)
SCATTER = 5.0
#: The laws of :func:`predict_push`, measured as work counts (power-iteration steps, links
#: push reads: ``solver.stats["edges"]``) by ``bench/pagerank_graph.py --table --seed 7``
#: at 10⁵ nodes, on another graph than the table's (docs/solve_views.md, "Whether
#: maintenance pays").  Power iteration after a batch: the L1 norm of the batch's residual
#: falls by about PI_DECAY per step (faster than s: the two halves of an edge change,
#: ``+x_j/deg'`` on the new links and ``-x_j/deg`` on the old, cancel as they spread), on
#: top of PI_LEFT (what the previous stop left, in units of the stop test)
PI_DECAY = 0.56
PI_LEFT = 0.11
#: push: links read per unit of the reduction ρ, in sweeps (the mean over batches), while
#: the residual is local; once it spreads, the steps of power iteration less PUSH_HEAD
PUSH_LINKS = 1.6
PUSH_HEAD = 2.5
#: push's time: per batch (the drive's first rounds), per edge change (validating it,
#: changing its column and the residual: 90 ms for 100 changes at 10⁵ nodes while the
#: trigger built factors for them, now 85 µs each), per link gathered (bytes at the
#: streaming rate: the gather, the products, the scattered adds, the L1 sums) and per
#: dense round (a sweep's product plus passes over n: PUSH_DENSE sweeps); the cheaper of
#: the last two is what push does (a wide frontier becomes a dense round)
PUSH_FIXED_S = 0.4e-3
PUSH_CHANGE_S = 85e-6
PUSH_LINK_BYTES = 94
PUSH_DENSE = 1.7
#: a predicted speedup within this factor of 1 is "about even": the measurements on a
#: shared machine spread more than that between batches of one cell
EVEN = 1.5

#: non-zeros per column assumed for a sparse input whose count ``--dims`` does not give
ASSUMED_PER_COLUMN = 10


def split_nnz(program: ir.Program, dims: dict) -> tuple[dict, dict]:
    """``(sizes, nnz)``: the ``nnz_X`` entries of ``dims`` (non-zeros of sparse or
    stochastic input X) apart from the sizes."""
    nnz = {k[4:]: v for k, v in dims.items() if k.startswith("nnz_")}
    sparse = {d.name for d in program.inputs if d.storage != "dense"}
    for name, v in nnz.items():
        if name not in sparse:
            raise CompileError(f"--dims nnz_{name}: {name} is not a sparse or stochastic input",
                               hint="nnz_X is for matrix inputs X (kept sparse then); sparse "
                               "inputs here: " + (", ".join(sorted(sparse)) or "none"))
        if not isinstance(v, int) or v < 0:
            raise CompileError(f"--dims nnz_{name} must be a count, not {v!r}")
    return {k: v for k, v in dims.items() if not k.startswith("nnz_")}, nnz


def solve_cost_report(compiled, tolerance: float | None = None, batch: int = 1,
                      damping: float = 0.85) -> dict:
    """Storage, sweep cost and the update-cost range of every solve view (see the module
    docstring); the ``solve`` part of :func:`linview.compiler.cost.cost_report`.  With a
    ``tolerance``, push views get :func:`predict_push` for micro-batches of ``batch``
    changes (``damping`` is s of ``I - s·M``: a scalar input has no value before load)."""
    prog, sizes = compiled.plan.program, compiled.plan.sizes
    nnz_given = compiled.options.get("nnz", {})
    r = rates()
    inputs, nnz = [], {}
    why = input_reasons(prog, compiled.options.get("sparse"))
    for d in prog.inputs:
        rows, cols = (int(sizes.value(e)) for e in d.shape)
        if d.storage == "dense":
            continue
        k = nnz_given.get(d.name, ASSUMED_PER_COLUMN * cols)
        nnz[d.name] = k
        inputs.append({"input": d.name, "storage": d.storage, "shape": [rows, cols],
                       "nnz": k, "nnz_assumed": d.name not in nnz_given, "why": why[d.name],
                       "bytes": 12 * k + 8 * (cols + 1), "dense_bytes": 8 * rows * cols})
    views = []
    for st in prog.statements:
        if st.expr.op is not Op.SOLVE:
            continue
        method, tol = st.expr.attr
        a = st.expr.children[0]
        rows, p = int(sizes.value(st.expr.rows)), int(sizes.value(st.expr.cols))
        fl, by = 0.0, 24.0 * rows * p  # the iterate, the residual and the result
        for leaf in ir.leaves(a, Op.INPUT, Op.VIEW):
            if leaf.attr in nnz:
                fl, by = fl + 2.0 * nnz[leaf.attr] * p, by + 12.0 * nnz[leaf.attr]
            elif (m := int(sizes.value(leaf.rows))) * (n := int(sizes.value(leaf.cols))) > 1:
                fl, by = fl + 2.0 * m * n * p, by + 8.0 * m * n  # a dense operand (not s)
        view = {"view": st.name, "shape": [rows, p], "method": method,
                "tolerance": tol, "sweep_flops": fl, "sweep_bytes": by,
                "sweep_s": max(fl / r.gemm1_flops, by / r.stream1_bytes) + r.call_s,
                "state_bytes": 24 * rows * p}
        if tolerance is not None and method in ("push", "auto") and nnz:
            view["prediction"] = predict_push(rows, max(nnz.values()), damping, tolerance,
                                              batch, SCATTER * view["sweep_s"],
                                              PUSH_LINK_BYTES / r.stream1_bytes)
        views.append(view)
    sparse = [{"view": v, "why": w} for v, w in
              sparse_views(compiled.lowered or prog, compiled.options.get("sparse")).items()]
    return {"inputs": inputs, "views": views, "sparse_views": sparse}


def predict_push(n: int, nnz: int, s: float, tol: float, batch: int, sweep_s: float,
                 link_s: float) -> dict:
    """Does push maintenance of ``(I - s·M) \\ B`` pay, per micro-batch of ``batch`` edge
    changes at certified L1 tolerance ``tol``, against warm power iteration?  ``sweep_s``
    is one product of M with the iterate (all its columns: several columns are priced as
    one, see docs/solve_views.md), ``link_s`` one link that push gathers.

    An edge change at node j moves ``s·x_j·‖ΔM[:, j]‖₁ ≈ 2·s·x_j/(deg_j + 1)`` of L1 mass
    into the residual; with ``x_j ≈ 1/n`` on average (every column sums to 1) a batch
    brings ``δ = batch·2·s/(n·(nnz/n + 1))``, a reduction ``ρ = δ / target`` that push
    must make (its target is ``0.9·tol·(1 - s)``).  With the laws measured as work counts
    (see the constants above):

    * power iteration stops at ``‖x_{k+1} - x_k‖₁ ≤ tol·(1 - s)``, after
      ``k = 1 + log(1 + 0.9·ρ/PI_LEFT) / log(1/PI_DECAY)`` steps of ``sweep_s``;
    * push reads ``w = min(PUSH_LINKS·ρ, max(k - PUSH_HEAD, 1))`` sweeps' worth of links,
      each sweep's worth at the cheaper of ``nnz·link_s`` (gathered) and
      ``PUSH_DENSE·sweep_s`` (a dense round), plus ``PUSH_FIXED_S`` and
      ``batch·PUSH_CHANGE_S``.

    The predicted speedup is the ratio of the two times."""
    target = 0.9 * tol * (1 - s)
    delta = batch * 2 * s / (n * (nnz / max(n, 1) + 1))
    rho = delta / target
    steps = 1 + math.log1p(0.9 * rho / PI_LEFT) / math.log(1 / PI_DECAY)
    sweeps = min(PUSH_LINKS * rho, max(steps - PUSH_HEAD, 1.0))
    push_s = PUSH_FIXED_S + batch * PUSH_CHANGE_S + sweeps * min(nnz * link_s,
                                                                  PUSH_DENSE * sweep_s)
    speedup = steps * sweep_s / push_s
    verdict = "pays" if speedup >= EVEN else ("does not pay" if speedup <= 1 / EVEN
                                               else "about even")
    return {"tolerance": tol, "batch": batch, "residual_per_batch": delta, "target": target,
            "reduction": rho, "power_steps": steps, "push_sweeps": sweeps,
            "power_s": steps * sweep_s, "push_s": push_s,
            "predicted_speedup": speedup, "verdict": verdict}
