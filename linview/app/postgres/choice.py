"""Per micro-batch: the triggers (one rank-k update per input) or one re-evaluation of
every view from the changed inputs, decided by a threshold that is fixed once, so that a
run which resumes after a crash decides exactly as the run before it would have.

The threshold ``T`` is a rank: a batch of more than ``T`` rank-1 changes (a row change of
an input is one) re-evaluates.  It is ``--reevaluate-above N``, or measured once: on the
first batch of rank at least :data:`MIN_RANK` (its triggers' time over its rank is the
cost per rank; a re-evaluation's cost is the evaluation at load), ``T`` = re-evaluation /
per-rank cost.  Until then every batch runs the triggers.  A measured ``T`` is written to
the checkpoint (``choice.json``, before the next batch is read) and read back on resume,
so it is measured once per checkpoint, whatever the crashes: every decision after it is a
function of the transactions and of that stored number.  A catching-up batch may then
hold the changes whose triggers would cost :data:`BEHIND_BATCHES` re-evaluations (past
the point where re-evaluation pays, a larger batch costs no more); that cap too is a
function of ``T`` and of the mapping only.

Measuring is off where decisions must not depend on the machine (``LINVIEW_ADAPT=off``,
``LINVIEW_CALIBRATION=off``) and for views that cannot re-evaluate a batch (Spark, solve
views).  The runtime's own switching (``backends/numpy/adaptive.py``: maintenance, the
program as written, BLAS threads, timed per update) would change the numbers by timing
too; in a PostgreSQL run it is pinned to the module as compiled (:func:`pin`), and this
per-batch choice plays its part.

Tests inject the measurement (``LINVIEW_TEST_BATCH_SECONDS="REEVAL,PER_RANK"``, seconds;
never a user option), as ``views.adaptation.injected`` does for the runtime.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

#: the batch whose triggers' time gives the per-rank cost has at least this rank
MIN_RANK = 16
#: a catching-up batch may hold the changes whose triggers would cost this many
#: re-evaluations (then it re-evaluates once)
BEHIND_BATCHES = 2
#: where a measured threshold is kept, in the checkpoint folder
STORED = "choice.json"
INJECT = "LINVIEW_TEST_BATCH_SECONDS"


def _measuring_on() -> bool:
    return all(os.environ.get(v, "").lower() not in ("off", "0", "no")
               for v in ("LINVIEW_ADAPT", "LINVIEW_CALIBRATION"))


def _injected() -> tuple[float, float] | None:
    given = os.environ.get(INJECT)
    if not given:
        return None
    reeval, per_rank = (float(x) for x in given.split(","))
    return reeval, per_rank


class BatchChoice:
    """``choice(rank)`` (``Stream.reevaluate_when``) and ``measured(seconds)`` after the
    batch; ``threshold`` is ``T`` once known (given or measured), ``per_rank`` and
    ``reeval_s`` the measurement it came from (seconds)."""

    def __init__(self, views, reeval_s: float | None, above: int | None = None,
                 folder: Path | None = None, inputs_per_row: int = 1,
                 previous: BatchChoice | None = None):
        """``above`` (``--reevaluate-above``): a fixed threshold (no measurement: the same
        on every machine).  ``folder``: the checkpoint, where a measured threshold is
        kept; ``previous``: the choice before the views were loaded again (grown), whose
        threshold is kept; ``inputs_per_row``: the rank-1 changes one row change makes
        at most (inputs read from one table)."""
        # NumPy views only (Spark's module inherits the method, not its arrays)
        can = hasattr(views, "reevaluate_updates") and not hasattr(views, "distributed")
        self.above = above if can else None
        inject = _injected()
        self.enabled = can and above is None and (inject is not None or (
            reeval_s is not None and _measuring_on()))
        self.reeval_s = inject[0] if inject else reeval_s
        self._inject_rank = inject[1] if inject else None
        self.per_rank: float | None = None
        self.path = folder / STORED if folder is not None else None
        self.inputs_per_row = max(inputs_per_row, 1)
        self.threshold: int | None = self.above
        if self.enabled:
            if previous is not None and previous.threshold is not None:
                self.threshold = previous.threshold
                self.per_rank, self.reeval_s = previous.per_rank, previous.reeval_s
            elif self.path is not None and self.path.exists():
                kept = json.loads(self.path.read_text())
                self.threshold = int(kept["reevaluate_above"])
                self.per_rank, self.reeval_s = kept["per_rank"], kept["reeval_s"]
        self.last: tuple[int, bool] | None = None
        self.reevaluated = 0  # batches

    def __call__(self, rank: int) -> bool:
        go = self.threshold is not None and rank > self.threshold
        self.last = (rank, go)
        self.reevaluated += go
        return go

    def measured(self, seconds: float) -> None:
        """The last batch's update took ``seconds`` (triggers or re-evaluation): the
        first one of rank :data:`MIN_RANK` or more that ran the triggers fixes ``T``."""
        if self.last is None:
            return
        rank, went = self.last
        self.last = None
        if not self.enabled or self.threshold is not None or went or rank < MIN_RANK:
            return
        self.per_rank = self._inject_rank or max(seconds / rank, 1e-12)
        self.threshold = max(round(self.reeval_s / self.per_rank), 1)
        if self.path is not None:  # kept before the next batch is read
            tmp = self.path.with_suffix(".tmp")
            with open(tmp, "w") as f:
                json.dump({"reevaluate_above": self.threshold, "per_rank": self.per_rank,
                           "reeval_s": self.reeval_s}, f)
                f.flush()
                os.fsync(f.fileno())
            tmp.replace(self.path)

    def cap(self, rows: int) -> int:
        """The row changes of a catching-up batch: ``rows`` (the triggers' cap), or, with
        a measured threshold, the changes whose triggers would cost
        :data:`BEHIND_BATCHES` re-evaluations."""
        if not self.enabled or self.threshold is None:
            return rows
        return max(rows, BEHIND_BATCHES * self.threshold // self.inputs_per_row)



def forget(folder: Path | None) -> None:
    """A fresh start (a new slot, the tables loaded again): the threshold is measured
    again."""
    if folder is not None:
        (folder / STORED).unlink(missing_ok=True)


def pin(views) -> None:
    """The runtime's own switching off, every trigger in its compiled mode and threads:
    a decision timed per update would change a PostgreSQL run's numbers."""
    a = getattr(views, "adaptation", None)
    if a is None:
        return
    a.enabled = False
    for x in a.inputs:
        a.mode[x] = "reeval" if x in a.reevaluated else "maintain"
        if x in a.threads:
            a.written_threads[x] = a.threads[x] if x in a.reevaluated else None
    if getattr(views, "_behind", None):  # views the program as written left behind
        views._catch_up()
