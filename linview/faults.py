"""Named fault-injection points: the places where tests stop linview on purpose.

Code that must survive a stop at some instant calls ``point("NAME")`` there.  A point does
nothing (one test of a module global) unless a test armed it, in one of two ways, never
by a user option:

* in the test's own process, ``with faults.hooked(fn):`` calls ``fn(name)`` at every
  point reached; ``fn`` may raise, send a signal to the process, sleep, or just record
  the names (``tests/test_stop_faults.py`` walks every point of a batch this way);
* in a child process, the environment variable ``LINVIEW_TEST_FAULTS`` holds rules
  ``NAME[@N]=ACTION`` separated by commas: at the ``N``-th time the point is reached in
  the process (every time without ``@N``; for the ``batch.*`` points ``N`` is the batch
  number instead), do ``ACTION``:

  ``exit[:CODE]``  end the process at once, as ``kill -9`` would (``os._exit``, default 86)
  ``raise``        raise :class:`InjectedFault`
  ``enospc``       raise ``OSError(ENOSPC)`` (a full disk)
  ``sigint``, ``sigterm``, ``sighup``  send that signal to the process
  ``sleep:S``      sleep S seconds (to stop a run from outside at a known moment)

:data:`POINTS` lists every point, in the order a batch of ``linview run`` reaches them;
``docs/stopping.md`` says what each one tests.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
from collections.abc import Callable

ENV = "LINVIEW_TEST_FAULTS"

#: every injection point, in the order one batch of ``linview run`` reaches them
POINTS = {
    "wal.write": "the log append, before the entry is written",
    "wal.sync": "the log append, the entry written but not yet fsynced",
    "batch.logged": "the batch logged, nothing of it applied",
    "update.applied": "inside an update (NumPy trigger): after the input changed, then "
                      "after each view",
    "batch.op": "after each change of a batch (an update, an edge batch, a scaling)",
    "out.results": "before the results of the batch are written",
    "out.staged": "PostgreSQL: a batch's result rows staged (COPY into the staging table), "
                  "the result tables not yet updated, nothing committed",
    "out.position": "between the results write and the position write (OUT/log.jsonl)",
    "batch.done": "the batch applied and its position recorded",
    "save.write": "inside save, before the temporary state file is written",
    "save.rename": "inside save, the temporary file written and synced, not renamed",
    "wal.truncate": "the state saved, the log not yet emptied",
}
#: points where linview writes to the checkpoint folder
CHECKPOINT_WRITES = frozenset({"wal.write", "wal.truncate", "save.write"})


class InjectedFault(RuntimeError):
    """The exception an armed point raises (``raise``)."""


_hook: Callable[[str], None] | None = None
_rules: dict[str, tuple[int | None, str]] | None = None
_hits: dict[str, int] = {}


def _parse(text: str) -> dict[str, tuple[int | None, str]]:
    rules = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        where, _, action = item.partition("=")
        name, _, n = where.partition("@")
        rules[name] = (int(n) if n else None, action or "raise")
    return rules


def point(name: str, n: int | None = None) -> None:
    """Injection point ``name`` (``n``: the batch number of a ``batch.*`` point)."""
    if _hook is None and _rules is None:
        return
    if _hook is not None:
        _hook(name)
    if _rules is not None and name in _rules:
        at, action = _rules[name]
        _hits[name] = _hits.get(name, 0) + 1
        if at is None or at == (_hits[name] if n is None else n):
            act(action)


def act(action: str) -> None:
    """Do one of the actions listed in the module docstring."""
    kind, _, arg = action.partition(":")
    if kind == "exit":
        os._exit(int(arg or 86))
    elif kind == "raise":
        raise InjectedFault("fault injected by a test")
    elif kind == "enospc":
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    elif kind in ("sigint", "sigterm", "sighup"):
        os.kill(os.getpid(), getattr(signal, kind.upper()))
    elif kind == "sleep":
        time.sleep(float(arg))
    else:
        raise ValueError(f"{ENV}: unknown action {action!r}")


@contextlib.contextmanager
def hooked(fn: Callable[[str], None]):
    """Call ``fn(name)`` at every point reached inside the ``with`` block (tests)."""
    global _hook
    old, _hook = _hook, fn
    try:
        yield
    finally:
        _hook = old


def after(fn: Callable, name: str) -> Callable:
    """``fn`` followed by ``point(name)`` (for runtime functions that change a view)."""
    def wrapped(*args, **kwargs):
        out = fn(*args, **kwargs)
        if _hook is not None or _rules is not None:
            point(name)
        return out
    wrapped.__doc__, wrapped.__name__ = fn.__doc__, fn.__name__
    return wrapped


if os.environ.get(ENV):
    _rules = _parse(os.environ[ENV])
