"""``linview run`` on NumPy, from the first record to the summary: the loop over the
source's micro-batches and what happens at the end of a run, on both backends (a save at
a batch boundary, the check, the summary).  The stream engine itself is
:mod:`linview.app.stream`; stopping is in ``docs/stopping.md``."""

from __future__ import annotations

import contextlib
import signal

from linview.app import final_check, signals
from linview.app.stream import Stream, batches


def run_stream(prog, *, inputs: list[str], updates: str, checkpoint: str | None = None,
               out: str | None = None, checkpoint_every: int = 100, max_batch: int = 1,
               on_error: str = "stop", restart: bool = False, progress=None, warn=None,
               load_options: dict | None = None, verify: bool = False, say=None) -> dict:
    """Apply the records of ``updates`` (a file, a directory or ``-``); the summary.  A
    signal stops the run at a batch boundary, saved; the summary then names it
    (``"interrupted"``).  ``say``: how to print a note (the predicted time of
    ``verify``)."""
    with signals.handled():
        s = Stream(prog, inputs=inputs, checkpoint=checkpoint, out=out, on_error=on_error,
                   checkpoint_every=checkpoint_every, restart=restart,
                   load_options=load_options, warn=warn)
        try:
            for batch in batches(s.records_after_prefix(updates), max_batch):
                s.apply_batch(batch)
                if progress is not None:
                    progress(s)
        except signals.Interrupted:
            pass
        except BaseException:
            with contextlib.suppress(Exception):
                s.close()  # saves, unless a batch failed midway
            raise
        return finish(s, verify, say or warn or s.warn)


def finish(s: Stream, verify: bool, say) -> dict:
    """Close the stream (a save at this batch boundary), then the check at the end of the
    run (:mod:`linview.app.final_check`); the summary, with ``"check"``, ``"verify"``
    and ``"interrupted"`` (the signal's name, or None)."""
    try:
        stats = s.close()
    except signals.Interrupted:  # came during the last save, which was finished first
        stats = s.summary()
    stats.update(check=None, verify=None)
    try:
        stats["check"] = final_check.probe(s.views)
        if verify and signals.received() is None:
            stats["verify"] = final_check.verify(s.views, s.eval_seconds, say)
    except signals.Interrupted:
        pass
    got = signals.received()
    stats["interrupted"] = signal.Signals(got).name if got else None
    return stats
