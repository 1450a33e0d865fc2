"""The result sink's binary COPY (exact float8 values, any subset of rows, NaN and Inf,
one and many columns) against a real PostgreSQL server, and :class:`Staged`, the set of
keys one transaction sees, against a plain set (Hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linview.app.postgres.keys import Staged
from linview.app.postgres.sink import Sink, read_results

psycopg2 = pytest.importorskip("psycopg2")


@pytest.fixture
def sink(pg_server):
    pg_server.create_db("t_sink")
    conn = pg_server.connect("t_sink")
    conn.autocommit = False
    s = Sink(conn, "res", "slot1")
    s.ensure(["out", "wide"])
    reader = pg_server.connect("t_sink")
    yield s, reader
    reader.close()
    conn.close()


def _read(reader, name):
    M = read_results(reader, "res", name)
    reader.commit()
    return M


def test_binary_copy_writes_exact_values_and_only_changed_rows(sink):
    s, reader = sink
    rng = np.random.default_rng(5)
    out = rng.standard_normal((300, 1)) * 10.0 ** rng.integers(-300, 300, (300, 1))
    wide = rng.standard_normal((7, 4))
    wide[2, 1], wide[3, 0], wide[4, 3] = np.nan, np.inf, -np.inf
    for batch in range(1, 6):
        s.write({"out": out, "wide": wide}, lsn=100 * batch, batches=batch)
        got, got_wide = _read(reader, "out"), _read(reader, "wide")
        assert got.tobytes() == out.tobytes()  # bit for bit, not within a tolerance
        np.testing.assert_array_equal(got_wide, wide)  # NaN where NaN, Inf where Inf
        assert s.progress() == (100 * batch, batch)
        out = out.copy()
        if batch % 2:  # some rows change (DELETE ... ANY + COPY), or every row
            idx = rng.choice(300, size=int(rng.integers(1, 300)), replace=False)
            out[idx] = rng.standard_normal((len(idx), 1))
        else:
            out = out + 1e-17 * (1 + np.abs(out))
        wide = wide.copy()
        wide[batch % 7] = rng.standard_normal(4)


def test_a_result_that_changes_shape_is_rewritten(sink):
    s, reader = sink
    s.write({"out": np.arange(6.0).reshape(6, 1)}, lsn=1, batches=1)
    s.write({"out": np.arange(4.0).reshape(4, 1) * 2.5}, lsn=2, batches=2)
    np.testing.assert_array_equal(_read(reader, "out"), np.arange(4.0).reshape(4, 1) * 2.5)


ops = st.lists(st.tuples(st.sampled_from(["add", "discard", "in"]), st.integers(0, 12)),
               max_size=40)


@settings(max_examples=200, deadline=None)
@given(base=st.sets(st.integers(0, 12)), txs=st.lists(st.tuples(ops, st.booleans()),
                                                     max_size=5))
def test_staged_is_a_set_until_applied(base, txs):
    """Each transaction's ``in`` answers as a copied set's would; only an applied
    (accepted) transaction changes the keys, a rejected one leaves no trace."""
    keys = set(base)
    for steps, accepted in txs:
        staged, copy = Staged(keys), set(keys)
        for op, k in steps:
            if op == "in":
                assert (k in staged) == (k in copy)
            else:
                getattr(staged, op)(k)
                getattr(copy, op)(k)
        before = set(keys)
        if accepted:
            staged.apply()
            assert keys == copy
        else:
            assert keys == before
