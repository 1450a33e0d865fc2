"""linview's copy of the keys present: the keys before a micro-batch from its journal
(against a copied set, Hypothesis), and the checkpoint's ``keys-BATCH.npz`` (round trip,
damaged and pickled files refused without running anything)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linview.app.postgres.keys import Keys, Staged
from linview.errors import StateError

pairs = st.tuples(st.integers(1, 6), st.integers(1, 6))
ops = st.lists(st.tuples(st.sampled_from(["add", "discard"]), st.sampled_from(["r", "l"]),
                         st.integers(1, 6), pairs), max_size=12)


@settings(max_examples=200, deadline=None)
@given(rows=st.sets(st.integers(1, 6)), links=st.sets(pairs),
       batches=st.lists(st.lists(st.tuples(ops, st.booleans()), max_size=4), max_size=4))
def test_the_keys_before_a_batch_are_a_copy_taken_at_its_start(rows, links, batches):
    keys = Keys({"r": set(rows), "l": set(links)})
    for txs in batches:
        keys.begin_batch()
        at_start = {t: set(k) for t, k in keys.present.items()}
        before = keys.before()
        for steps, accepted in txs:
            staged = {t: Staged(k, keys.journal[t]) for t, k in keys.present.items()}
            for op, t, row, link in steps:
                getattr(staged[t], op)(row if t == "r" else link)
            if accepted:
                for s in staged.values():
                    s.apply()
            for t, k in at_start.items():  # every key that was or is there, and others
                for x in [*k, *keys.present[t], 0, (0, 0)]:
                    assert (x in before[t]) == (x in k)
        assert keys.before_copy().present == at_start


def test_keys_round_trip_through_npz(tmp_path):
    keys = Keys({"public.obs": {3, 1, 2**40}, 'x"; DROP TABLE t; --.links': {(1, 2), (5, 1)},
                 "public.empty": set()})
    keys.save(tmp_path, 7)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keys-7.npz"]  # no temporary left
    back = Keys.resumed(tmp_path, 7, [], {})
    assert back.present == keys.present
    (tmp_path / "keys-3.json").write_text('{"public.obs": [1, 2]}')  # an older checkpoint's
    assert Keys.resumed(tmp_path, 3, [], {}).present == {"public.obs": {1, 2}}
    Keys.prune(tmp_path, 7)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keys-7.npz"]


def test_a_damaged_or_pickled_keys_file_is_refused(tmp_path):
    (tmp_path / "keys-1.npz").write_bytes(b"PK\x03\x04 not a zip")
    with pytest.raises(StateError, match="cannot read the keys"):
        Keys.resumed(tmp_path, 1, [], {})
    with open(tmp_path / "keys-2.npz", "wb") as f:  # an object array: loading would unpickle
        np.savez(f, tables=np.array(["t"]), k0=np.array([{1, 2}], dtype=object))
    with pytest.raises(StateError, match="cannot read the keys"):
        Keys.resumed(tmp_path, 2, [], {})
    with open(tmp_path / "keys-3.npz", "wb") as f:  # triples are no keys
        np.savez(f, tables=np.array(["t"]), k0=np.zeros((2, 3), dtype=np.int64))
    with pytest.raises(StateError, match="not int64 keys or pairs"):
        Keys.resumed(tmp_path, 3, [], {})
    with pytest.raises(StateError, match="lacks keys-5.npz"):
        Keys.resumed(tmp_path, 5, [], {})
