"""Checkpoints of a PostgreSQL run off the batch path (``docs/postgres.md``).

A checkpoint of OLS 4000×1000 writes some 40 MB (hashed, zipped, fsynced): 150-220 ms
on 2 shared cores, during which no window is applied, and at 100 transactions/s the
backlog it leaves takes a second to drain (``bench/db_tail.py``).  So a periodic
checkpoint is saved by a forked process, which holds the views as they were at the batch
boundary (copy on write), while the run goes on:

1. at a batch boundary, after the results committed: the keys of the batch saved
   (small), the write-ahead log renamed to ``wal.prev.log`` (every entry in it is
   fsynced: the results committed after its fsync) and a new ``wal.log`` started;
2. the child writes ``state.bg.npz`` (atomically) and exits;
3. at a later batch boundary, once the child is done: ``state.bg.npz`` renamed over
   ``state.npz``, ``wal.prev.log`` and the older keys removed.

A crash at any point leaves a state file at batch A (the old one, or the new one at B)
and the log of every batch after A in ``wal.prev.log`` and ``wal.log``:
:func:`merge_logs` joins the two before a resume (the resume skips the batches the state
holds).  A child that failed makes the run save synchronously instead (which says why it
cannot).  The Spark backend (a JVM behind the process, its gateway a socket that a child
must not use) always saves synchronously.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from linview import statefile
from linview.app import wal

PREV = "wal.prev.log"
BG = "state.bg.npz"
#: a child still writing after this many seconds is taken for stuck (a lock inherited
#: from another thread at the fork, a hung disk): stopped, and the checkpoint saved in
#: line, with a warning, rather than skipped at every boundary while the log grows
STUCK_S = 600.0


def _sync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def clear(folder: Path | None) -> None:
    """A fresh start, or a checkpoint saved: no log of earlier views left."""
    for name in (PREV, BG, BG + ".tmp") if folder is not None else ():
        (folder / name).unlink(missing_ok=True)


def merge_logs(folder: Path) -> None:
    """Before a resume: the entries of ``wal.prev.log`` put in front of ``wal.log``'s
    (unless a merge that crashed before removing it already did), then it removed."""
    (folder / BG).unlink(missing_ok=True)  # a save that did not finish
    (folder / (BG + ".tmp")).unlink(missing_ok=True)
    prev, log = folder / PREV, folder / "wal.log"
    if not prev.exists():
        return
    p, q = wal.scan(prev), wal.scan(log)
    if p.entries and (not q.entries or q.entries[0]["batch"] > p.entries[-1]["batch"]):
        data = prev.read_bytes()[:p.good_bytes]
        if log.exists():
            data += log.read_bytes()[:q.good_bytes]
        statefile.write_atomic(log, data)
    prev.unlink()
    _sync_dir(folder)


def _die_with_parent(parent: int) -> None:
    """Linux: the child killed when the run dies (a kill -9 of the run leaves no writer
    behind that could finish after a restart)."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    if os.getppid() != parent:  # the run died before that
        os._exit(1)


class Saver:
    """The periodic checkpoint of ``run`` (a :class:`~.runner.PostgresRun`) in a child."""

    def __init__(self, run):
        self.run, self.pid, self.batch, self.began = run, None, None, 0.0
        self.saved = 0  # checkpoints written in the background and put in place
        self.windows = 0  # published since the last checkpoint began
        self.background = (getattr(run.prog, "backend", None) == "numpy"
                           and run.load_options is None and hasattr(os, "fork"))

    @property
    def folder(self) -> Path:
        return self.run.ckpt

    def published(self) -> None:
        """A window's results committed: a checkpoint begun every ``--checkpoint-every``
        windows (the parts applied while a window is open are not counted: 3-4 a window
        at 100 transactions/s), and one written meanwhile put in place."""
        self.windows += 1
        if self.run.ckpt is not None and self.windows >= self.run.checkpoint_every:
            self.start()
        self.poll()

    def start(self) -> None:
        """At a batch boundary, after the results committed: a checkpoint begun (on
        Spark: saved here and now; while the last one is still being written: at a
        later boundary)."""
        stream = self.run.stream
        if self.pid is not None:
            self.poll()
            if self.pid is not None:
                return  # the last one still being written: the next boundary
        self.windows = 0
        if not self.background or stream.dirty or stream.log is None:
            return self.run.checkpoint_now()
        batch = stream.pos["batch"]
        self.run.mapper.keys.save(self.folder, batch)
        log = stream.log
        log.close()
        os.replace(stream.wal_path, self.folder / PREV)
        stream.log = wal.Writer(stream.wal_path, 0)
        stream.log.deferred = True
        _sync_dir(self.folder)
        stream.since_save = 0
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the child: the views as they are now, then gone
            code = 1
            try:
                _die_with_parent(parent)
                stream._save(self.folder / BG)  # the state file only, the log left alone
                code = 0
            finally:
                os._exit(code)
        self.pid, self.batch, self.began = pid, batch, time.monotonic()

    def poll(self, wait: bool = False) -> None:
        """A child that finished: its state put in place (or, if it failed or is stuck,
        a checkpoint saved here and now)."""
        if self.pid is None:
            return
        while True:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid != 0:
                break
            if time.monotonic() - self.began > STUCK_S:
                self.kill()
                self.run.warn(f"a checkpoint written in the background was still running "
                              f"after {STUCK_S:.0f} s: stopped, and saved here instead")
                return self.run.checkpoint_now()
            if not wait:
                return
            time.sleep(0.01)
        self.pid = None
        if os.waitstatus_to_exitcode(status) != 0:
            (self.folder / BG).unlink(missing_ok=True)
            return self.run.checkpoint_now()  # raises what keeps it from saving
        os.replace(self.folder / BG, self.run.stream.state)
        _sync_dir(self.folder)
        (self.folder / PREV).unlink(missing_ok=True)
        self.saved += 1
        from linview.app.postgres.keys import Keys

        Keys.prune(self.folder, self.batch)

    def wait(self) -> None:
        """Before a checkpoint saved here and now: the one being written finished."""
        self.poll(wait=True)

    def kill(self) -> None:
        """The run ends abnormally: a child still writing stopped (what it wrote is
        removed on the next start)."""
        if self.pid is not None:
            with contextlib.suppress(OSError):
                os.kill(self.pid, 9)
                os.waitpid(self.pid, 0)
            self.pid = None
