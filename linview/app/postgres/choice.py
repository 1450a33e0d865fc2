"""Per micro-batch: the triggers (one rank-k update per input) or one re-evaluation of
every view from the changed inputs, whichever the measured costs say is cheaper.

A rank-k update costs about ``k`` times a per-rank cost, measured on the batches that
ran the triggers; a re-evaluation costs the same whatever the batch, measured at load and
on every batch that re-evaluated.  A batch re-evaluates when the triggers are predicted
slower.  So a run that falls behind (a catching-up batch is large) does what the peer
does, re-running the program once for many changes, and goes back to the triggers when
batches are small again.  The cap of a catching-up batch grows to what
:data:`BEHIND_BATCHES` re-evaluations cost in triggers: past the point where
re-evaluation pays, a larger batch costs no more.

The choice is logged with the batch (:class:`~linview.app.stream.Stream`), so a replay
after a crash applies each batch as the run did, bit for bit.  It depends on measured
times, so it is off where decisions must not depend on the machine (``views.adaptation``:
``LINVIEW_CALIBRATION=off``, ``LINVIEW_ADAPT=off``), and for views that cannot
re-evaluate a batch (Spark, solve views).  ``--reevaluate-above N`` replaces it by a fixed
rule: a batch of more than N rank-1 changes (a row change of an input is one) re-evaluates.
"""

from __future__ import annotations

#: the batches whose triggers' time gives the per-rank cost have at least this rank
MIN_RANK = 16
#: a catching-up batch may hold the changes whose triggers would cost this many
#: re-evaluations (then it re-evaluates once)
BEHIND_BATCHES = 2


class BatchChoice:
    """``choice(rank)`` (``Stream.reevaluate_when``) and ``measured(seconds)`` after the
    batch; ``per_rank`` and ``reeval_s`` are the measurements (seconds)."""

    def __init__(self, views, reeval_s: float | None, above: int | None = None):
        """``above`` (``--reevaluate-above``): a fixed rule instead, a batch of rank above
        it re-evaluates (no measurement: the same choice on every machine)."""
        adaptation = getattr(views, "adaptation", None)
        # NumPy views only (Spark's module inherits the method, not its arrays)
        can = hasattr(views, "reevaluate_updates") and not hasattr(views, "distributed")
        self.above = above if can else None
        self.enabled = (can and above is None and reeval_s is not None
                        and adaptation is not None and adaptation.enabled)
        self.reeval_s, self.per_rank = reeval_s, None
        self.last: tuple[int, bool] | None = None
        self.reevaluated = 0  # batches

    def __call__(self, rank: int) -> bool:
        go = (self.above is not None and rank > self.above) or (
            self.enabled and self.per_rank is not None and rank * self.per_rank > self.reeval_s)
        self.last = (rank, go)
        self.reevaluated += go
        return go

    def measured(self, seconds: float) -> None:
        """The last batch's update took ``seconds`` (triggers or re-evaluation)."""
        if self.last is None:
            return
        rank, went = self.last
        self.last = None
        if went:
            self.reeval_s = seconds
        elif rank >= MIN_RANK:
            self.per_rank = seconds / rank

    def cap(self, rows: int, rank_per_row: float) -> int:
        """The row changes of a catching-up batch: ``rows`` (the triggers' cap), or more
        where re-evaluation pays (``rank_per_row``: the rank one row change makes)."""
        if not self.enabled or self.per_rank is None or rank_per_row <= 0:
            return rows
        return max(rows, int(BEHIND_BATCHES * self.reeval_s / self.per_rank / rank_per_row))
