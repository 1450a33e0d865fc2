"""The keys present in each mapped table (linview's copy): rows of a rows table, links
``(src, dst)`` of an edges table, entries ``(i, j)`` of an entries table.

A delete or update of a key linview does not have is an error, not a silent change, so
every transaction is checked against them (:class:`Staged`: its inserts and deletes kept
beside the set, applied only when the transaction is accepted) and a micro-batch needs
them as they were before it (:meth:`Keys.before`, from a journal of the keys the batch
changed: no copy of the sets, which cost 53 ms per batch at 10^6 links).

With ``--checkpoint`` they are saved beside the views, as ``keys-BATCH.npz``: one int64
array per table (n keys, or n×2 pairs) and the tables' names, written to a temporary file,
synced and renamed; loaded with ``allow_pickle=False``, so loading a state never runs
code (the sorted JSON lists of older checkpoints are read too).
"""

from __future__ import annotations

import itertools
import json
import os
import zipfile

import numpy as np

from linview.errors import StateError


class Keys:
    """The keys present in each mapped table, and the batch's journal of changed keys."""

    def __init__(self, present: dict[str, set]):
        self.present = present
        self.journal: dict[str, dict] = {t: {} for t in present}  # key -> present before

    # ------------------------------------------------------------------ the batch
    def begin_batch(self) -> None:
        """A micro-batch starts: :meth:`before` is the keys as they are now."""
        self.journal = {t: {} for t in self.present}

    def before(self) -> dict[str, Before]:
        """Each table's keys before the batch (``in`` only)."""
        return {t: Before(k, self.journal.setdefault(t, {})) for t, k in self.present.items()}

    def before_copy(self) -> Keys:
        """A copy of the keys before the batch (the sets copied: growing inputs only)."""
        out = {}
        for t, k in self.present.items():
            j = self.journal.get(t, {})
            out[t] = (k - {x for x, was in j.items() if not was}) | {x for x, was in j.items()
                                                                     if was}
        return Keys(out)

    # ------------------------------------------------------------------ checkpoints
    def save(self, folder, batch: int) -> None:
        """``keys-BATCH.npz`` in the checkpoint ``folder`` (atomically), before the views
        are saved (a crash between leaves both files); then :meth:`prune`."""
        arrays = {"tables": np.array(list(self.present), dtype=str)}
        for i, keys in enumerate(self.present.values()):
            arrays[f"k{i}"] = _array(keys)
        tmp = folder / f"keys-{batch}.npz.tmp"
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(folder / f"keys-{batch}.npz")

    @classmethod
    def load(cls, path) -> Keys:
        """The keys saved at ``path`` (``.npz``; ``.json``: an older checkpoint's)."""
        try:
            if path.suffix == ".json":
                return cls({t: {tuple(x) if isinstance(x, list) else x for x in k}
                            for t, k in json.loads(path.read_text()).items()})
            with np.load(path, allow_pickle=False) as z:
                names = z["tables"].tolist()
                arrays = [z[f"k{i}"] for i in range(len(names))]
            if any(a.dtype != np.int64 or a.ndim not in (1, 2)
                   or (a.ndim == 2 and a.shape[1] != 2) for a in arrays):
                raise ValueError("not int64 keys or pairs")
        except (OSError, ValueError, KeyError, TypeError, AttributeError,
                zipfile.BadZipFile) as e:
            raise StateError(f"cannot read the keys of checkpoint {path}: {e}",
                             hint="use --restart to start over from the tables") from None
        return cls({t: set(zip(a[:, 0].tolist(), a[:, 1].tolist(), strict=True))
                    if a.ndim == 2 else set(a.tolist()) for t, a in zip(names, arrays,
                                                                        strict=True)})

    @staticmethod
    def prune(folder, batch: int) -> None:
        """The keys files of other batches gone (the views were saved at ``batch``)."""
        for f in [*folder.glob("keys-*.npz"), *folder.glob("keys-*.json")]:
            if f.name != f"keys-{batch}.npz":
                f.unlink()

    @classmethod
    def resumed(cls, folder, saved: int, entries: list, table_of: dict[str, str]) -> Keys:
        """The keys saved with the views at batch ``saved``, with the logged batches after
        it (``entries``) replayed."""
        kf = next((f for f in (folder / f"keys-{saved}.npz", folder / f"keys-{saved}.json")
                   if f.exists()), None)
        if kf is None:
            raise StateError(f"checkpoint {folder} lacks keys-{saved}.npz",
                             hint="use --restart to start over from the tables")
        keys = cls.load(kf)
        for e in entries:
            if e["batch"] > saved:
                keys.replay([json.loads(r) for r in e["records"]], table_of)
        return keys

    def replay(self, records: list[dict], table_of: dict[str, str]) -> None:
        """Apply the presence effect of logged records (a resume past the saved keys);
        ``table_of``: each input's table."""
        for d in records:
            if "remove" in d:
                self.present[table_of[d["inputs"][0]]].discard(d["remove"])
            elif "row" in d:
                self.present[table_of[d["input"]]].add(d["row"])
            elif "cell" in d:  # "set" (to 0) is a delete, "add" an insert or update
                cells = self.present[table_of[d["input"]]]
                (cells.discard if "set" in d else cells.add)(tuple(d["cell"]))
            elif "edge" in d:
                links = self.present[table_of[d["input"]]]
                (links.add if d["op"] == "insert" else links.discard)(tuple(d["edge"]))


def _array(keys: set) -> np.ndarray:
    """A set of ints (n,) or of pairs (n, 2) as int64."""
    if not keys:
        return np.zeros(0, dtype=np.int64)
    if isinstance(next(iter(keys)), tuple):
        flat = itertools.chain.from_iterable(keys)
        return np.fromiter(flat, dtype=np.int64, count=2 * len(keys)).reshape(-1, 2)
    return np.fromiter(keys, dtype=np.int64, count=len(keys))


class Before:
    """A table's keys before the batch: the journal's word for a key the batch changed,
    the set's for the others."""

    def __init__(self, now: set, journal: dict):
        self.now, self.journal = now, journal

    def __contains__(self, k) -> bool:
        was = self.journal.get(k)
        return (k in self.now) if was is None else was


class Staged:
    """A set of keys seen through one transaction's inserts and deletes (``in``, ``add``,
    ``discard``), the set itself untouched until :meth:`apply`: a transaction costs time
    linear in its changes, not in the keys (10^6 links) as a copy of the set would.
    ``journal``: where :meth:`apply` notes, for each key it changes first in the batch,
    whether it was there before."""

    def __init__(self, base: set, journal: dict | None = None):
        self.base, self.added, self.removed = base, set(), set()
        self.journal = journal

    def __contains__(self, k) -> bool:
        return k in self.added or (k not in self.removed and k in self.base)

    def add(self, k) -> None:
        self.removed.discard(k)
        if k not in self.base:
            self.added.add(k)

    def discard(self, k) -> None:
        self.added.discard(k)
        if k in self.base:
            self.removed.add(k)

    def apply(self) -> None:
        if self.journal is not None:
            for k in itertools.chain(self.removed, self.added):
                self.journal.setdefault(k, k in self.base)
        self.base -= self.removed
        self.base |= self.added
