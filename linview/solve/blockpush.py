"""Push over all columns at once: :class:`~linview.solve.solvers.PushSolver` with p > 1
right-hand sides (personalised PageRank's seed columns).

The single-column push of :mod:`.solvers` runs its rounds column by column: p columns
cost p times the Python overhead of every round and p sparse products per dense round.
Here every round serves all the columns that are still above the target:

* one frontier for all of them: the nodes whose residual exceeds the column's threshold
  in *any* active column; their whole rows are pushed (an entry under its threshold moves
  too, which is still a valid push step: ``X += v``, ``R += s·M v - v``);
* one gather of the frontier's links, whose values are an ``E×k`` block (k active
  columns), accumulated into the touched rows by one ``bincount`` per column;
* a dense round (a push from every node) for the columns whose frontier covers more than
  ``n/32`` nodes, as one sparse product with an n×k block instead of k products;
* an edge change is one gather of the changed columns' old and new links, scaled by the
  row ``X[j, :]``, for every column at once.

The residual bound of every column, the thresholds and the uniform offsets are those of
the single-column push, so the certificate (``‖R[:, c]‖₁ + n·|g_c| ≤ target``) is the
same.  Candidates are kept as one set of rows (``solver.cand_all``); what the per-column
code leaves in ``solver.cand`` is merged into it first.
"""

from __future__ import annotations

import numpy as np

#: a column's frontier wider than n / WIDE takes a dense round
WIDE = 32


def distinct(a: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """The distinct ids of ``a`` in O(len(a)) through ``pos``, a scratch array of n
    positions (each id keeps the position of its last occurrence)."""
    if a.size < 64:
        return np.unique(a)
    idx = np.arange(a.size)
    pos[a] = idx
    return a[pos[a] == idx]


def scratch(solver) -> np.ndarray:
    if getattr(solver, "scratch", None) is None:
        solver.scratch = np.empty(solver.n, np.int64)
    return solver.scratch


def accumulate(solver, rows: np.ndarray, vals: np.ndarray, cols: np.ndarray,
               also: np.ndarray | None = None) -> np.ndarray:
    """``R[rows[e], cols] += vals[e, :]`` for every entry e, keeping the L1 sums of those
    columns exact on the touched rows (with ``also``, rows changed by the caller just
    before, whose old values the caller accounted); returns the touched rows."""
    pos = scratch(solver)
    touched = distinct(rows, pos)
    pos[touched] = np.arange(touched.size)
    idx = pos[rows]
    R = solver.R
    acc = np.empty((touched.size, cols.size))
    for k in range(cols.size):
        acc[:, k] = np.bincount(idx, weights=vals[:, k], minlength=touched.size)
    block = R[np.ix_(touched, cols)]
    before = np.abs(block).sum(axis=0)
    block += acc
    R[np.ix_(touched, cols)] = block
    solver.S[cols] += np.abs(block).sum(axis=0) - before
    return touched


def merge_candidates(solver, *more: np.ndarray) -> None:
    parts = [solver.cand_all, *more, *(c for c in solver.cand if c.size)]
    solver.cand_all = distinct(np.concatenate(parts), scratch(solver))
    solver.cand = [np.zeros(0, np.int64)] * solver.p


def change_columns(solver, changes) -> None:
    """M's columns changed (already applied): ``R += s·(new - old)·X[j, :]`` for every
    column, one gather and one accumulation for the whole batch."""
    rows, coef, js = [], [], []
    g = np.zeros(solver.p)
    for ch in changes:
        rows += [ch.new_rows, ch.old_rows]
        coef += [ch.new_vals, -ch.old_vals]
        js += [np.full(ch.new_rows.size + ch.old_rows.size, ch.j)]
        g += solver.X[ch.j, :] * ((float(ch.new_dangling) - float(ch.old_dangling)) / solver.n)
    solver.g += solver.s * g
    if rows:
        r = np.concatenate(rows).astype(np.int64)
        if r.size:
            vals = (solver.s * np.concatenate(coef))[:, None] * solver.X[np.concatenate(js), :]
            merge_candidates(solver, accumulate(solver, r, vals, np.arange(solver.p)))
    drive(solver)


def drive(solver) -> None:
    """Push until every column's residual certifies the tolerance (module docstring)."""
    from linview.errors import NumericalError

    n, target = solver.n, solver.target
    merge_candidates(solver)
    for _ in range(100_000):
        act = np.flatnonzero(solver.residual_bound() > target)
        if not act.size:
            break
        flush = act[n * np.abs(solver.g[act]) > target / 4]
        if flush.size:
            uniform(solver, flush)
            continue
        cand = solver.cand_all
        above = np.abs(solver.R[np.ix_(cand, act)]) > solver.theta[act]
        wide = act[above.sum(axis=0) > n // WIDE]
        if wide.size:
            dense_round(solver, wide)
            continue
        F = cand[above.any(axis=1)]
        if not F.size:
            rescan(solver, act)
            continue
        push(solver, F, act)
    else:
        raise NumericalError("push did not converge", hint="is s < 1?")
    solver.cand_all = np.zeros(0, np.int64)
    solver.theta = np.minimum(2 * solver.theta, target / 64)


def push(solver, F: np.ndarray, cols: np.ndarray) -> None:
    """Push rows F of columns ``cols``: ``X[F] += R[F]``, ``R[F] = 0``, ``R += s·M R[F]``."""
    M, R = solver.M, solver.R
    V = R[np.ix_(F, cols)]
    rows, w = M.gather(F, np.ones(F.size))
    src = np.repeat(np.arange(F.size), M.length[F])
    before = np.abs(V).sum(axis=0)
    solver.X[np.ix_(F, cols)] += V
    R[np.ix_(F, cols)] = 0.0
    solver.S[cols] -= before
    if M.uniform_dangling:
        dang = M.length[F] == 0
        if dang.any():
            solver.g[cols] += solver.s * V[dang].sum(axis=0) / solver.n
    touched = accumulate(solver, rows.astype(np.int64, copy=False),
                         (solver.s * w)[:, None] * V[src], cols) if rows.size else rows
    solver.cand_all = touched
    solver.stats["pushes"] += F.size * cols.size
    solver.stats["edges"] += rows.size * cols.size
    solver.stats["rounds"] += 1


def dense_round(solver, cols: np.ndarray) -> None:
    """A push from every node of columns ``cols`` at once: one sparse product."""
    V = solver.R[:, cols] + solver.g[cols]
    solver.g[cols] = 0.0
    solver.X[:, cols] += V
    new = solver.s * solver.M.matvec(V)
    solver.R[:, cols] = new
    solver.S[cols] = np.abs(new).sum(axis=0)
    merge_candidates(solver, np.flatnonzero((np.abs(new) > solver.theta[cols]).any(axis=1)))
    solver.stats["sweeps"] += cols.size
    solver.stats["pushes"] += solver.n * cols.size
    solver.stats["edges"] += solver.M.nnz * cols.size


def uniform(solver, cols: np.ndarray) -> None:
    """The uniform offsets of columns ``cols`` added into their residual."""
    block = solver.R[:, cols] + solver.g[cols]
    solver.R[:, cols] = block
    solver.g[cols] = 0.0
    solver.S[cols] = np.abs(block).sum(axis=0)
    merge_candidates(solver, np.flatnonzero((np.abs(block) > solver.theta[cols]).any(axis=1)))


def rescan(solver, cols: np.ndarray) -> None:
    """No candidate above its threshold: thresholds of ``cols`` divided by 8, their L1
    sums made exact again (drift), candidates found anew."""
    solver.theta[cols] /= 8
    block = np.abs(solver.R[:, cols])
    solver.S[cols] = block.sum(axis=0)
    solver.cand_all = np.flatnonzero((block > solver.theta[cols]).any(axis=1))
    solver.stats["rescans"] += 1
