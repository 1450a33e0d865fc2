"""How the CLI stops on SIGINT (Ctrl-C), SIGTERM and SIGHUP (``docs/stopping.md``).

:func:`handled` installs one handler for the three signals.  Outside a critical section
a signal raises :class:`Interrupted` at once; inside one (:func:`critical`: a batch being
logged, applied and published, a checkpoint being written) it is *deferred*: the section
finishes, then :class:`Interrupted` is raised at its end, at a batch boundary.  Whoever
catches it saves at that boundary and exits with :attr:`Interrupted.code` (128 + the
signal's number: 130 SIGINT, 143 SIGTERM, 129 SIGHUP).

A second signal, while the first one is still being handled, ends the process at once
without saving (after the callbacks of :func:`on_exit_now`, which remove temporary
folders): the write-ahead log recovers the batches since the last checkpoint on the next
start.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable

SIGNALS = tuple(getattr(signal, s) for s in ("SIGINT", "SIGTERM", "SIGHUP")
                if hasattr(signal, s))


class Interrupted(KeyboardInterrupt):
    """A stop asked by a signal: ``signum``, ``name`` and the exit ``code``."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum
        self.name = signal.Signals(signum).name
        self.code = 128 + signum


class _State:
    depth = 0  # critical sections entered (any thread)
    pending: int | None = None  # a signal received inside one
    received: int | None = None  # the first signal of this stop
    installed = 0
    exit_now: list[Callable[[], None]] = []
    lock = threading.Lock()  # critical sections may run on other threads (Spark's batches)


_S = _State()


def _handler(signum, frame) -> None:
    if _S.received is not None:  # the second signal: stop now, without saving
        _exit_now(signum)
    _S.received = signum
    if _S.depth > 0:
        _S.pending = signum
        return
    raise Interrupted(signum)


def _exit_now(signum: int) -> None:
    for fn in list(_S.exit_now):
        with contextlib.suppress(Exception):
            fn()
    with contextlib.suppress(Exception):
        sys.stderr.write(f"\n{signal.Signals(signum).name} again: stopped at once without "
                         "saving (the write-ahead log recovers on the next start)\n")
        sys.stderr.flush()
    os._exit(128 + signum)


@contextlib.contextmanager
def handled():
    """Install the handler (main thread only; elsewhere a no-op) and restore the previous
    ones on the way out.  Nested uses re-install it (a library, e.g. PySpark, may have put
    its own in between)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, _handler) for s in SIGNALS}
    _S.installed += 1
    try:
        yield
    finally:
        _S.installed -= 1
        for s, h in old.items():
            signal.signal(s, h)
        if not _S.installed:
            _S.pending = _S.received = None


@contextlib.contextmanager
def critical():
    """A section a signal does not cut: one received inside is raised at its end (on the
    main thread, or when no other section is open)."""
    with _S.lock:
        _S.depth += 1
    try:
        yield
    finally:
        with _S.lock:
            _S.depth -= 1
    raise_pending()


def raise_pending() -> None:
    """Raise the deferred :class:`Interrupted`, if any, outside every critical section
    (on the main thread only: it is the one that saves and exits)."""
    if threading.current_thread() is not threading.main_thread():
        return
    with _S.lock:
        if _S.depth != 0 or _S.pending is None:
            return
        signum, _S.pending = _S.pending, None
    raise Interrupted(signum)


def pending() -> int | None:
    """The signal received inside a critical section and not raised yet, if any."""
    return _S.pending


def received() -> int | None:
    """The first signal of this stop, if one came."""
    return _S.received


def on_exit_now(fn: Callable[[], None]) -> Callable[[], None]:
    """Run ``fn`` before an immediate exit on a second signal (remove a temporary folder);
    returns a function that unregisters it."""
    _S.exit_now.append(fn)

    def forget() -> None:
        with contextlib.suppress(ValueError):
            _S.exit_now.remove(fn)
    return forget


__all__ = ["Interrupted", "critical", "handled", "on_exit_now", "pending", "raise_pending",
           "received"]
