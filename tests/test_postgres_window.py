"""Micro-batches by windows of a commit-time grid (``source.ChangeStream.batch``), on a
stream of transactions handed over without a server: every batch holds the transactions of
one grid window, whole and in order, and only a full batch splits a window."""

from __future__ import annotations

import math
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from linview.app.postgres import pgoutput, source
from linview.app.postgres.source import ChangeStream, Transaction, window_end


class _Stream(ChangeStream):
    """A ChangeStream whose transactions come from a list, all there at once."""

    def __init__(self, txs, batch_rows):
        self.queue, self.batch_rows = list(txs), batch_rows
        self.held = self.open = None
        self.started = 0.0  # nothing is backlog

    def _next(self, timeout):
        return self.queue.pop(0) if self.queue else None


def _tx(i, t, rows):
    begin = pgoutput.Begin(final_lsn=i, commit_time=t, xid=i)
    return Transaction(begin, pgoutput.Commit(i, i + 1, t), changes=[None] * rows)


def _batches(stream, window):
    out = []
    while True:
        txs, _ = stream.batch(window, 0.0)
        if not txs:
            return out
        out.append(txs)


def test_a_window_ends_on_the_grid_not_a_window_after_its_first_commit():
    g = (math.floor(time.time() / 0.05) + 20) * 0.05  # a grid point ahead: not behind
    offsets = [0.01, 0.03, 0.049, 0.051, 0.07, 0.101]
    stream = _Stream([_tx(i, g + o, 1) for i, o in enumerate(offsets)], 256)
    got = [[round(t.commit.commit_time - g, 3) for t in b] for b in _batches(stream, 0.05)]
    assert got == [[0.01, 0.03, 0.049], [0.051, 0.07], [0.101]]
    assert window_end(g + 0.01, 0.05) == (math.floor((g + 0.01) / 0.05) + 1) * 0.05
    assert window_end(g + 0.01, 0.0) == g + 0.01  # no window: a batch per transaction


@settings(max_examples=200, deadline=None)
@given(gaps=st.lists(st.integers(0, 40), min_size=1, max_size=40),
       rows=st.lists(st.integers(1, 6), min_size=40, max_size=40),
       window_ms=st.sampled_from([0, 10, 50, 100]), cap=st.integers(1, 30))
def test_batches_are_grid_windows_whole_and_in_order(gaps, rows, window_ms, cap):
    window = window_ms / 1000
    t0 = time.time() + 30  # ahead of linview's clock: never behind
    times = [t0 + sum(gaps[:i + 1]) / 1000 for i in range(len(gaps))]
    txs = [_tx(i, t, rows[i]) for i, t in enumerate(times)]
    batches = _batches(_Stream(txs, cap), window)
    assert [t for b in batches for t in b] == txs  # whole, in order, none lost or doubled
    for b, nxt in zip(batches, [*batches[1:], None], strict=True):
        ends = {window_end(t.commit.commit_time, window) for t in b}
        if window > 0:
            assert len(ends) == 1  # one grid window per batch
        else:
            assert len(b) == 1
        size = sum(len(t.changes) for t in b)
        assert len(b) == 1 or size <= cap  # only a single transaction passes the cap
        if nxt is not None and window > 0 and window_end(nxt[0].commit.commit_time,
                                                         window) in ends:
            assert size + len(nxt[0].changes) > cap  # a window split only when full


class _Socket(_Stream):
    """Transactions that arrive after a wait: ``waits[i]`` seconds for the i-th (what a
    socket holds comes at once; the rest as the server sends more)."""

    def __init__(self, txs, batch_rows, waits):
        super().__init__(txs, batch_rows)
        self.waits = list(waits)

    def _next(self, timeout):
        if not self.queue or self.waits[0] > timeout:
            return None
        self.waits.pop(0)
        return self.queue.pop(0)


@settings(max_examples=100, deadline=None)
@given(held=st.integers(1, 8), cap=st.integers(10, 60), n=st.integers(1, 80))
def test_a_batch_behind_takes_what_keeps_arriving_up_to_its_cap(held, cap, n):
    """Behind (committed long ago), a batch is not cut where the socket ran dry: it
    takes what arrives within ``BEHIND_GAP``, up to its cap; a longer gap ends it."""
    t0 = time.time() - 60
    txs = [_tx(i, t0 + i / 1000, 1) for i in range(n)]
    waits = [0.0 if i % held else source.BEHIND_GAP / 2 for i in range(n)]
    quiet = n // 2  # after this one the server is quiet for a second
    waits[quiet] = 1.0
    stream = _Socket(txs, cap, waits)
    sizes = []
    while True:
        txs_, _ = stream.batch(0.05, 2.0)
        if not txs_:
            break
        sizes.append(len(txs_))
    def chunks(rows):
        return [cap] * (rows // cap) + ([rows % cap] if rows % cap else [])

    assert sizes == chunks(quiet) + chunks(n - quiet)


def test_a_batch_behind_stops_waiting_once_it_reads_recent_transactions():
    """Caught up to what is being committed now (a paced writer after a stall), a batch
    behind takes what is already received and does not wait for more: it would wait for
    the writer until its cap."""
    now, old = time.time(), time.time() - 60
    txs = [_tx(i, old + i / 1000, 1) for i in range(5)] + [_tx(5 + i, now, 1)
                                                           for i in range(5)]
    gap = source.BEHIND_GAP / 2
    waits = [0.0, gap, 0.0, gap, 0.0,  # old ones: waited for
             gap, 0.0,  # the first recent one arrives while it waits after an old one
             gap, 0.0, 0.0]  # after a recent one it does not wait
    stream = _Socket(txs, 100, waits)
    first, _ = stream.batch(0.05, 2.0)
    assert len(first) == 7
    assert len(stream.batch(0.05, 2.0)[0]) == 3  # the rest, in a batch of their own


@settings(max_examples=50, deadline=None)
@given(n=st.integers(2, 40), gap_ms=st.sampled_from([0, 10, 20, 40, 100]))
def test_behind_gap_ms_is_how_long_a_batch_behind_waits_for_one_more(n, gap_ms):
    """``--behind-gap-ms``: transactions long committed that arrive 30 ms apart in pairs
    go in one batch behind when the gap allows 30 ms (up to the cap), else in pairs."""
    t0 = time.time() - 60
    txs = [_tx(i, t0 + i / 1000, 1) for i in range(n)]
    waits = [0.03 if i % 2 else 0.0 for i in range(n)]
    stream = _Socket(txs, 1000, waits)
    stream.behind_gap = gap_ms / 1000
    sizes = []
    while batch := stream.batch(0.05, 2.0)[0]:  # a first one waited for up to 2 s
        sizes.append(len(batch))
    assert sum(sizes) == n
    if gap_ms >= 30:
        assert sizes == [n]
    else:  # the first alone (the next is 30 ms away), then pairs: 30 ms, then at once
        assert sizes == [1] + [2] * ((n - 1) // 2) + ([1] if (n - 1) % 2 else [])
