"""What ``linview cost`` says of a program with solve views.

A solve view is kept with its residual and driven below its tolerance after each update
(:mod:`.solvers`), so its cost is not a fixed formula like a maintained view's: an update
costs the entries it changes plus the pushes (or Krylov steps) that bring the residual
back, which depends on how large the change's residual is against the tolerance.  What
can be said before there is data, and what this report gives:

* storage: a sparse or stochastic input holds its non-zeros (``--dims nnz_M=...``, else
  :data:`ASSUMED_PER_COLUMN` per column, marked as assumed), not ``n²`` numbers;
* one *sweep*, a product of A with the iterate, priced by the bytes it moves at the
  calibrated one-thread streaming rate, cache-aware (:func:`sweep_bytes`): the CSR arrays,
  then one read of the iterate per non-zero, 8 bytes while the iterate fits the core's own
  cache and a whole 64-byte line once it does not, and the passes over n that a step of
  power iteration makes.  Re-evaluation from scratch costs about ``log(tolerance) /
  log(s)`` sweeps for ``A = I - s·M``, an update between a few entries and a warm re-solve
  of ``log(δ / tolerance) / log(1/s)`` sweeps (δ the L1 size of the change's residual);
* measured per-update times on real-sized graphs come from ``bench/pagerank_graph.py``;
* with a tolerance and a micro-batch size (``linview cost --tolerance T --batch b``), a
  prediction of whether maintenance pays against warm-started power iteration run to the
  same certified bound (:func:`predict_push`).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from linview.compiler import ir
from linview.compiler.calibrate import PROBE_TOLERANCE, SPREAD_MAX, Rates
from linview.compiler.calibrate import rates as calibrated_rates
from linview.compiler.ir import Op
from linview.errors import CompileError
from linview.solve.sparsity import input_reasons, sparse_views
from linview.solve.sweep_kernel import ROWS

#: the laws of :func:`predict_push`, fitted to the work counts (power-iteration steps, push's
#: dense rounds and links: ``solver.stats``) recorded at 2·10⁴, 10⁵ and 10⁶ nodes
#: (``bench/pagerank_graph.py --laws`` and the tables' per-batch counts; docs/solve_views.md,
#: "Whether maintenance pays").  Power iteration after a batch: the L1 norm of the batch's
#: residual falls by about ``exp(-λ)`` per step, ``λ = PI_RATE - PI_RATE_PER_DECADE·
#: log10(n/10⁵)`` (faster than s while the two halves of an edge change, ``+x_j/deg'`` on the
#: new links and ``-x_j/deg`` on the old, cancel as they spread; more slowly on a larger
#: graph, where they take longer to meet: 0.53 a step at 2·10⁴ nodes, 0.57 at 10⁵, 0.64 at
#: 10⁶; never slower than s), after an onset: ``k = 1 + log(1 + (0.9·ρ/PI_LEFT)^PI_ONSET)
#: / (PI_ONSET·λ)`` steps, one step while ρ is small; recorded 0.84–1.17× the law at all
#: three sizes (the previous law, without the size and the onset, 0.69–1.43×)
PI_LEFT = 0.15
PI_ONSET = 2.4
PI_RATE = 0.56
PI_RATE_PER_DECADE = 0.115
#: push: its dense rounds (a push from every node: one sweep each, ``stats["sweeps"]``),
#: PUSH_LINKS per unit of the reduction ρ while the residual is local; once it spreads, the
#: steps of power iteration less PUSH_HEAD; combined as a smooth minimum, ``1 / (1/local +
#: 1/spread)`` (least squares of the log, over the cells averaging a dense round a batch
#: or more at the three sizes, gives 1.77 and 0.94; a head of 1.5 fits within 5% as well
#: and keeps the personalised table's side, docs/solve_views.md: recorded 0.69–1.48× the law
#: beyond ρ = 2, 0.46–1.96× in cells of ρ about 1.25, where push makes 0 to 6 dense rounds
#: a batch and 20 to 40 batches' mean is itself that uncertain)
PUSH_LINKS = 1.8
PUSH_HEAD = 1.5
#: push's local rounds (frontiers of at most n/32 nodes) read LOCAL_LINKS sweeps' worth of
#: links per unit of ρ, and at most LOCAL_CAP per batch (several local rounds run between
#: dense rounds; recorded 0.005–0.007 at ρ = 0.125, 0.02–0.09 from 1.25 to 12.5, 0.015–0.05
#: beyond)
LOCAL_LINKS = 0.055
LOCAL_CAP = 0.0375
#: push's time: per batch (the drive's first rounds, and caches that the power iteration
#: run between batches left cold), per edge change (validating it, changing its column and
#: the residual: at a tolerance of 0.1, where push does no work, batches of 1, 10 and 100
#: took 0.38, 0.71 and 2.51 ms, so 20–37 µs a change: ``bench/pagerank_graph.py --table
#: --nodes 100000 --tolerances 0.1 --changes 300 --min-batches 10 --seed 7``), per link
#: of a local round (LOCAL_LINK_S: the gather, the scattered adds, the frontier's distinct
#: ids, the L1 sums, a dozen NumPy calls over the frontier; fitted on the tables' batches
#: 83–91 ns at 10⁵ nodes and 92–95 ns at 10⁶, so bound by those calls, not by the cache)
PUSH_FIXED_S = 0.4e-3
PUSH_CHANGE_S = 25e-6
LOCAL_LINK_S = 100e-9
#: and per dense round (:mod:`.sweep_kernel`): one pass over the links on every core, the
#: longer of its memory time (a product's bytes, :func:`sweep_bytes` with KERNEL_PASSES
#: passes over the iterate: the new residual written, at the calibrated all-threads
#: streaming rate ``stream_bytes``) and its arithmetic (KERNEL_LINK_S a link on one core:
#: measured 1.8 ns with the iterate in cache, ``bench/pagerank_kernel.py --nodes 100000``,
#: where the pass is not bound by memory), and DENSE_PASSES one-thread NumPy passes over
#: the iterate besides it (the sum ``R + g``, the update of X, the dangling nodes' sum, the
#: frontier's comparison and ids when the round leaves it narrow, and the drive loop's own
#: work around a round).  Fitted on the four tables recorded with the kernel
#: (``bench/results/pagerank_table_n*_seed*_kernel.json``, ``bench/pagerank_graph.py
#: --check-laws``: a dense round's seconds over the batches against this price): 1.03 and
#: 1.07 at 10⁶ nodes, 1.17 and 1.19 at 10⁵; DENSE_SPREAD is the band's range of that ratio
KERNEL_PASSES = 1
KERNEL_LINK_S = 1.8e-9
DENSE_PASSES = 18
DENSE_SPREAD = (0.8, 1.25)
#: the model's band (:func:`predict_push`, the sources combined by :func:`quadrature`):
#: the calibrated rates are trusted within RATE_SPREAD either way (a cached calibration is
#: used while a fresh probe agrees with it within
#: :data:`~linview.compiler.calibrate.PROBE_TOLERANCE`, and a calibration is cached only
#: when its trials agree within ``SPREAD_MAX``)
RATE_SPREAD = max(PROBE_TOLERANCE, SPREAD_MAX)
#: and the laws' error, by regime: ``(ρ below, over, under)``: the speedup the laws' counts
#: give was at most ``over`` times and at least ``1/under`` times the one the recorded
#: counts give, priced alike (docs/solve_views.md; ``bench/pagerank_graph.py --check-laws``
#: on each recorded result): 0.76–1.36× below ρ = 2 at 2·10⁴ and 10⁵ nodes, down to 0.28×
#: at 10⁶ where a change's residual is tiny and push's local work less than the law's;
#: 0.92–1.36× beyond, at 2·10⁴, 10⁵ and 10⁶ nodes (the largest, the 10⁶ table's batches of
#: 10 at 1e-6); with a dense round priced as the one-pass kernel (cheaper against a step,
#: so the dense rounds' error weighs less and the steps' more): 0.30–1.32× below and
#: 0.91–1.40× beyond, the tables recorded with the kernel included (``tests/
#: test_push_laws.py``)
LAW_ERRORS = ((2.0, 1.5, 6.0), (math.inf, 1.45, 1.25))

#: non-zeros per column assumed for a sparse input whose count ``--dims`` does not give
ASSUMED_PER_COLUMN = 10
#: a step of power iteration (``bench/pagerank_graph.py``: the product, scaling, the
#: dangling and teleport terms, the difference, its absolute value and sum) reads or
#: writes the n×p iterate about this many times besides the product's own reads
STEP_PASSES = 12
#: bytes a scattered read of the iterate moves once the iterate is larger than the core's
#: own cache: a cache line (measured: a product of a 10⁶-node, 9.3·10⁶-link graph took
#: 37 ms, the CSR arrays streamed 6 ms of it; 9.3·10⁶ lines at the streaming rate 31 ms)
LINE = 64
#: the core's own cache when the machine does not say (the level-2 size of common cores)
DEFAULT_CACHE = 1 << 20


def private_cache_bytes() -> int:
    """The size of a core's own (level-2) cache, from sysfs; :data:`DEFAULT_CACHE` where
    the machine does not say.  A last-level cache is shared with the other cores and their
    jobs, and an iterate that fits only there was measured as slow as memory: a 10⁶-node
    iterate (8 MB) read at 64 bytes a read on a machine with a 480 MiB shared cache."""
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    try:
        for index in sorted(base.glob("index*")):
            if (index / "level").read_text().strip() == "2":
                size = (index / "size").read_text().strip().upper()
                scale = {"K": 1 << 10, "M": 1 << 20}.get(size[-1:], 1)
                return int(size.rstrip("KM")) * scale
    except (OSError, ValueError):
        pass
    return DEFAULT_CACHE


def sweep_bytes(n: int, nnz: int, p: int = 1, cache: int | None = None,
                passes: int = STEP_PASSES) -> float:
    """Bytes one step of power iteration over an n-node graph of ``nnz`` links moves for
    an n×p iterate: the CSR arrays (8-byte values, 4-byte column ids and row starts), one
    scattered read of a row of the iterate per link (its bytes while the iterate fits the
    core's own ``cache``, else whole :data:`LINE` s) and ``passes`` passes over the iterate
    (:data:`STEP_PASSES`; the one-pass kernel of a dense round makes :data:`KERNEL_PASSES`)."""
    cache = private_cache_bytes() if cache is None else cache
    row = 8 * p
    gather = row if 8 * n * p <= cache else LINE * -(-row // LINE)
    return 12.0 * nnz + 4.0 * n + gather * nnz + passes * 8.0 * n * p


def kernel_seconds(n: int, nnz: int, r: Rates, cache: int | None = None,
                   cores: int | None = None) -> float:
    """The one-pass product of :mod:`.sweep_kernel` on ``cores`` cores (the machine's):
    its bytes at ``stream_bytes`` or its links at :data:`KERNEL_LINK_S` a core, the
    longer; up to :data:`~.sweep_kernel.ROWS` rows SciPy's product on one thread, its
    bytes at ``stream1_bytes``."""
    if n <= ROWS:
        return sweep_bytes(n, nnz, 1, cache, passes=KERNEL_PASSES) / r.stream1_bytes
    cores = cores or os.cpu_count() or 1
    memory = sweep_bytes(n, nnz, 1, cache, passes=KERNEL_PASSES) / r.stream_bytes
    return max(memory, nnz * KERNEL_LINK_S / cores)


def dense_round_seconds(n: int, nnz: int, r: Rates, cache: int | None = None,
                        cores: int | None = None) -> float:
    """A dense round of push on one column: :func:`kernel_seconds` and
    :data:`DENSE_PASSES` one-thread passes over the iterate, each with a NumPy call."""
    return kernel_seconds(n, nnz, r, cache, cores) + DENSE_PASSES * (8.0 * n / r.stream1_bytes
                                                                     + r.call_s)


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
                      damping: float = 0.85, rates: Rates | None = None) -> dict:
    """Storage, sweep cost and the update-cost range of every solve view (see the module
    docstring); the ``solve`` part of :func:`linview.compiler.cost.cost_report`.  With a
    ``tolerance``, push views get :func:`predict_push` for micro-batches of ``batch``
    changes (``damping`` is s of ``I - s·M``: a scalar input has no value before load).
    ``rates``: the machine's calibrated rates unless given (a benchmark's, recorded with
    its run)."""
    prog, sizes = compiled.plan.program, compiled.plan.sizes
    nnz_given = compiled.options.get("nnz", {})
    r = rates if rates is not None else calibrated_rates()
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
        fl, links, dense = 0.0, 0, 0.0
        for leaf in ir.leaves(a, Op.INPUT, Op.VIEW):
            if leaf.attr in nnz:
                fl, links = fl + 2.0 * nnz[leaf.attr] * p, links + nnz[leaf.attr]
            elif (m := int(sizes.value(leaf.rows))) * (n := int(sizes.value(leaf.cols))) > 1:
                fl, dense = fl + 2.0 * m * n * p, dense + 8.0 * m * n  # a dense operand
        cache = private_cache_bytes()
        by = sweep_bytes(rows, links, p, cache) + dense
        sweep_s = max(fl / r.gemm1_flops, by / r.stream1_bytes) + STEP_PASSES * r.call_s
        view = {"view": st.name, "shape": [rows, p], "method": method,
                "tolerance": tol, "sweep_flops": fl, "sweep_bytes": by,
                "iterate_in_cache": 8 * rows * p <= cache, "cache_bytes": cache,
                "sweep_s": sweep_s, "state_bytes": 24 * rows * p}
        if method in ("push", "auto"):
            view["dense_round_s"] = dense_round_seconds(rows, links, r, cache)
        if tolerance is not None and method in ("push", "auto") and nnz:
            view["prediction"] = predict_push(rows, max(nnz.values()), damping, tolerance,
                                              batch, view["sweep_s"], view["dense_round_s"])
        views.append(view)
    sparse = [{"view": v, "why": w} for v, w in
              sparse_views(compiled.lowered or prog, compiled.options.get("sparse")).items()]
    return {"inputs": inputs, "views": views, "sparse_views": sparse}


def push_counts(n: int, nnz: int, s: float, tol: float, batch: int) -> dict:
    """The work the laws give for one micro-batch of ``batch`` edge changes at certified
    L1 tolerance ``tol`` (:func:`predict_push`): the reduction ``ρ``, power iteration's
    ``steps``, push's dense rounds (``sweeps``) and the links its local rounds read."""
    target = 0.9 * tol * (1 - s)
    delta = batch * 2 * s / (n * (nnz / max(n, 1) + 1))
    rho = delta / target
    onset = (0.9 * rho / PI_LEFT) ** PI_ONSET
    steps = 1 + math.log1p(onset) / (PI_ONSET * pi_rate(n, s))
    local, spread = PUSH_LINKS * rho, max(steps - PUSH_HEAD, 1.0)
    sweeps = local * spread / (local + spread) if local > 0 else 0.0
    return {"residual_per_batch": delta, "target": target, "reduction": rho,
            "steps": steps, "sweeps": sweeps, "links": min(LOCAL_LINKS * rho, LOCAL_CAP) * nnz}


def pi_rate(n: int, s: float) -> float:
    """``λ``: the log of the factor by which power iteration's residual after a batch falls
    per step on an n-node graph (:data:`PI_RATE`, less :data:`PI_RATE_PER_DECADE` per
    decade of n past 10⁵); never below ``log(1/s)``, the rate at which a residual falls when
    nothing in it cancels."""
    return max(PI_RATE - PI_RATE_PER_DECADE * math.log10(max(n, 1) / 1e5), math.log(1 / s))


def law_spread(rho: float) -> tuple[float, float]:
    """``(over, under)`` of :data:`LAW_ERRORS` for the reduction ``rho``."""
    return next((over, under) for below, over, under in LAW_ERRORS if rho < below)


def price(steps: float, sweeps: float, links: float, batch: int, sweep_s: float,
          dense_s: float) -> tuple[float, float]:
    """``(power iteration's seconds, push's seconds)`` of one batch with these work
    counts (measured ones or the laws'), a step of power iteration taking ``sweep_s`` and
    a dense round of push ``dense_s`` (:func:`dense_round_seconds`)."""
    push = (PUSH_FIXED_S + batch * PUSH_CHANGE_S + links * LOCAL_LINK_S
            + sweeps * dense_s)
    return steps * sweep_s, push


def predict_push(n: int, nnz: int, s: float, tol: float, batch: int,
                 sweep_s: float, dense_s: float) -> dict:
    """Does push maintenance of ``(I - s·M) \\ B`` pay, per micro-batch of ``batch`` edge
    changes at certified L1 tolerance ``tol``, against warm power iteration?  ``sweep_s``
    is one step of power iteration (:func:`sweep_bytes`; all the iterate's columns:
    several columns are priced as one, see docs/solve_views.md), ``dense_s`` one dense
    round of push on one column (:func:`dense_round_seconds`).

    An edge change at node j moves ``s·x_j·‖ΔM[:, j]‖₁ ≈ 2·s·x_j/(deg_j + 1)`` of L1 mass
    into the residual; with ``x_j ≈ 1/n`` on average (every column sums to 1) a batch
    brings ``δ = batch·2·s/(n·(nnz/n + 1))``, a reduction ``ρ = δ / target`` that push
    must make (its target is ``0.9·tol·(1 - s)``).  With the laws measured as work counts
    (see the constants above; :func:`push_counts`):

    * power iteration stops at ``‖x_{k+1} - x_k‖₁ ≤ tol·(1 - s)``, after
      ``k = 1 + log(1 + (0.9·ρ/PI_LEFT)^PI_ONSET) / (PI_ONSET·λ)`` steps of ``sweep_s``
      (``λ`` of :func:`pi_rate`: slower on larger graphs);
    * push makes ``w = 1 / (1/(PUSH_LINKS·ρ) + 1/max(k - PUSH_HEAD, 1))`` dense rounds,
      each ``dense_s`` (a one-pass product on every core and DENSE_PASSES passes over
      the iterate; the smooth minimum of the local and the spread law), and
      reads ``min(LOCAL_LINKS·ρ, LOCAL_CAP)·nnz`` links in local rounds at
      ``LOCAL_LINK_S`` each, plus ``PUSH_FIXED_S`` and ``batch·PUSH_CHANGE_S``
      (:func:`price`).

    The predicted speedup is the ratio of the two times' means over batches (what a user
    pays over many changes), and the ``verdict`` is its side of 1×: "pays" or "does not
    pay", always.  Its ``band`` is the prediction's uncertainty, three error sources
    combined in quadrature on the log scale (:func:`quadrature`): the sweep's seconds
    ``RATE_SPREAD`` times shorter and longer (push's constant seconds do not follow the
    rate, so the ratio moves), a dense round's seconds over DENSE_SPREAD, and
    the laws' counts, priced, against the counts the solver recorded (:data:`LAW_ERRORS`,
    by ρ); ``band_extremes`` keeps the worst case, all three at their extremes at once.
    Where the band holds 1× the verdict is a ``close_call``: the side is still the
    point's, but the band says either choice may cost about the same."""
    c = push_counts(n, nnz, s, tol, batch)

    def speedup(rate: float, dense: float) -> float:
        power, push = price(c["steps"], c["sweeps"], c["links"], batch, rate * sweep_s,
                            rate * dense * dense_s)
        return power / push

    power_s, push_s = price(c["steps"], c["sweeps"], c["links"], batch, sweep_s, dense_s)
    point = power_s / push_s
    rate = [speedup(f, 1.0) for f in (1 / RATE_SPREAD, RATE_SPREAD)]
    dense = [speedup(1.0, w) for w in DENSE_SPREAD]
    over, under = law_spread(c["reduction"])
    low, high = quadrature(point, [(min(rate), max(rate)), (min(dense), max(dense)),
                                   (point / over, point * under)])
    corners = [speedup(f, w) for f in (1 / RATE_SPREAD, RATE_SPREAD)
               for w in DENSE_SPREAD]
    return {"tolerance": tol, "batch": batch, "residual_per_batch": c["residual_per_batch"],
            "target": c["target"], "reduction": c["reduction"], "power_steps": c["steps"],
            "push_sweeps": c["sweeps"], "push_local_links": c["links"], "power_s": power_s,
            "push_s": push_s, "predicted_speedup": point, "band": [low, high],
            "band_extremes": [min(corners) / over, max(corners) * under],
            "verdict": "pays" if point > 1 else "does not pay",
            "close_call": low <= 1 <= high}


def quadrature(point: float, ranges: list[tuple[float, float]]) -> tuple[float, float]:
    """The band of ``point`` from error sources that each move it to a ``(low, high)``
    range on their own: the sources' log-distances below the point, and above it,
    combined as the root of their sum of squares (independent errors of one scale; the
    extremes of all at once would add them)."""
    down = math.sqrt(sum(max(math.log(point / lo), 0.0) ** 2 for lo, _ in ranges))
    up = math.sqrt(sum(max(math.log(hi / point), 0.0) ** 2 for _, hi in ranges))
    return point * math.exp(-down), point * math.exp(up)
