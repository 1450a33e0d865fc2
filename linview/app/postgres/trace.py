"""``run --source ... --trace FILE``: when each micro-batch's phases ran, one JSON line per
published batch, to take a latency tail apart (``bench/db_tail.py``).

A line holds the batch's end LSN, the wall-clock time its results were committed
(``visible``), the commit times of its transactions (the server's clock) and ``events``:
``[phase, start, end]`` (seconds since the epoch) of everything linview did since the
previous line.  Phases:

* ``read``: waiting for and reading the window's transactions (the parts applied while
  it was open run inside it, as ``part``);
* ``part``, ``update``: the triggers (or a re-evaluation) of a part applied while the
  window was open, and of the window's last part;
* ``write``: the result transaction; inside it ``statements`` (the changed rows sent),
  ``wait_fsync`` (waiting for the log's fsync, which ran on a thread as ``fsync``) and
  ``commit``;
* ``ack``: the slot acknowledged; ``idle_advance``: a quiet source's slot moved on;
* ``checkpoint``: the views saved (every ``--checkpoint-every`` batches);
* ``gc0``, ``gc1``, ``gc2``: a collection by Python's garbage collector of that
  generation (any thread), from 1 ms.

Nothing is traced without ``--trace``: the phases then cost one attribute look-up.
"""

from __future__ import annotations

import contextlib
import gc
import json
import time

#: collections shorter than this (most of the youngest generation's) are left out
GC_SHOWN = 0.001


class Trace:
    """Phases collected in memory and written one line per published batch."""

    def __init__(self, path):
        self.f = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()
        self.events: list[list] = []
        self._gc_start = None
        gc.callbacks.append(self._gc)

    @contextlib.contextmanager
    def phase(self, name: str):
        t0 = time.time()
        try:
            yield
        finally:
            self.events.append([name, t0, time.time()])

    def timed(self, name: str, fn):
        """``fn`` that records its own runs as ``name`` (a function run on a thread)."""
        def run(*a, **kw):
            with self.phase(name):
                return fn(*a, **kw)
        return run

    def _gc(self, stage: str, info: dict) -> None:
        if stage == "start":
            self._gc_start = time.time()
        elif self._gc_start is not None:
            end = time.time()
            if end - self._gc_start >= GC_SHOWN:
                self.events.append([f"gc{info.get('generation', '')}", self._gc_start, end])
            self._gc_start = None

    def published(self, lsn: int, commit_times: list[float], visible: float) -> None:
        events, self.events = self.events, []
        self.f.write(json.dumps({"lsn": lsn, "visible": visible, "commits": commit_times,
                                 "events": events}) + "\n")

    def close(self) -> None:
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self._gc)
        if self.events:  # a checkpoint at the end, ...
            self.f.write(json.dumps({"lsn": None, "events": self.events}) + "\n")
        self.f.close()


class NoTrace:
    """Without ``--trace``: nothing recorded."""

    def phase(self, name: str):
        return contextlib.nullcontext()

    def timed(self, name: str, fn):
        return fn

    def published(self, lsn, commit_times, visible) -> None:
        pass

    def close(self) -> None:
        pass


def tracer(path) -> Trace | NoTrace:
    return Trace(path) if path else NoTrace()
