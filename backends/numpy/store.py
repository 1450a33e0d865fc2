"""The store folder of views by key (``load(..., store=DIR)``, ``docs/view_store.md``).

An entry is a state file (:mod:`linview.statefile`: arrays and a checksummed manifest,
never code) at ``DIR/<2 hex digits>/<key>.npz``.  Entries are written atomically and never
overwritten, so several programs (and processes) may share one folder.

A load writes only the entries worth reading back (:func:`worth_storing`: a view whose
computation, apart from what it took from the store, is more than elementwise work), and
writes them on a thread of its own (:class:`Writes`), so that the load returns as soon as
its views are ready.  The module waits for that thread before it changes a view in place
(its next update), and a load in the same process that wants an entry being written waits
for it: nobody reads a half-written entry, and no entry holds a view changed after its key
was bound.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from linview import statefile
from linview.compiler.ir import Node, Op
from linview.errors import StateError

#: ops whose work is a pass over their operands: a view computed only by these from what
#: the load has is cheaper to compute again than to read back from the store
_ELEMENTWISE = frozenset({Op.INPUT, Op.VIEW, Op.FACTOR, Op.CONST, Op.EYE, Op.ZEROS, Op.ONES,
                          Op.ADD, Op.SUB, Op.NEG, Op.SCALE, Op.T, Op.EMUL, Op.EDIV, Op.MAP,
                          Op.EBIN, Op.INDEX, Op.CONCAT, Op.DIAG})

_lock = threading.Lock()
#: {entry path: the thread writing it}, in this process
_pending: dict[Path, threading.Thread] = {}


def worth_storing(expr: Node, taken: frozenset[int] = frozenset()) -> bool:
    """Whether a view defined by ``expr`` is worth an entry: some of its work, apart from
    the sub-expressions ``taken`` (ids) from the store, is more than a pass over its
    operands (a product with an inner dimension, an inverse, a factorisation...)."""
    todo, seen = [expr], set()
    while todo:
        n = todo.pop()
        if id(n) in seen or id(n) in taken:
            continue
        seen.add(id(n))
        scalar = n.op is Op.MUL and any(c.is_scalar for c in n.children)
        if n.op not in _ELEMENTWISE and not scalar:
            return True
        todo.extend(n.children)
    return False


def entry_path(store: Path, key: str) -> Path:
    return store / key[:2] / f"{key}.npz"


def read_entry(store: Path, key: str, warn=None) -> np.ndarray | None:
    """The view stored under ``key``, or None; a corrupt or foreign entry is reported
    through ``warn`` and not used.  An entry this process is writing is waited for."""
    path = entry_path(store, key)
    with _lock:
        writer = _pending.get(path)
    if writer is not None:
        writer.join()
    if not path.exists():
        return None
    try:
        meta, arrays = statefile.read(path)
        if meta.get("store_key") != key or set(arrays) != {"value"}:
            raise StateError(f"{path} is not the store entry for its name")
    except StateError as e:
        if warn is not None:
            warn(f"store entry {path.name} not used, the view is recomputed: {e.message}")
        return None
    return arrays["value"]


def _write_one(path: Path, key: str, value: np.ndarray) -> None:
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    statefile.write(path, {"value": value}, {"store_key": key, "updates": 0, "dims": {}})


def write_entries(store: Path, entries: Mapping[str, np.ndarray]) -> None:
    """Write every entry that is not in the store yet (atomically, checksummed), now."""
    for key, value in entries.items():
        _write_one(entry_path(store, key), key, value)


class Writes:
    """Entries written on a thread while the load's caller goes on: :meth:`wait` before
    any of their arrays changes in place.  A failed write is a warning at :meth:`wait`
    (the store is a cache: the view is computed again next time)."""

    def __init__(self, store: Path, entries: Mapping[str, np.ndarray]):
        self.errors: list[str] = []
        self.paths = {entry_path(store, k): (k, v) for k, v in entries.items()}
        self.thread = threading.Thread(target=self._run, name="linview-store", daemon=False)
        with _lock:
            for p in self.paths:
                _pending[p] = self.thread
        self.thread.start()

    def _run(self) -> None:
        try:
            for path, (key, value) in self.paths.items():
                try:
                    _write_one(path, key, value)
                except (OSError, StateError) as e:
                    self.errors.append(f"{path.name}: {e}")
        finally:
            with _lock:
                for p in self.paths:
                    if _pending.get(p) is self.thread:
                        del _pending[p]

    def wait(self) -> None:
        self.thread.join()
        for msg in self.errors:
            warnings.warn(f"store entry not written (it is computed again next time): "
                          f"{msg}", stacklevel=3)
        self.errors = []


def settle(module) -> None:
    """Wait for the store entries ``module``'s load is still writing from its views (call
    before a view changes in place)."""
    writes = module.__dict__.pop("_store_writes", None)
    if writes is not None:
        writes.wait()


class Writing:
    """What a module loaded through a store offers its user (a mixin of the modules)."""

    def wait_for_store(self) -> None:
        """Return when every store entry this load writes is in the folder (the load
        returns before; the next update waits, so does a load in this process that reads
        one of them)."""
        settle(self)
