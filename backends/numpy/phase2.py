"""Phase 2 of a generated trigger: the in-place changes of the input and of each view,
as the generated code calls them (``rt.add_outer``, ``rt.add_dense``, ``rt.assign``).

Each is the kernel itself followed by the injection point ``update.applied``
(:mod:`linview.faults`, a no-op unless a test armed it), so that tests can stop an update
after its input changed and after each of its views (``docs/stopping.md``).
"""

from __future__ import annotations

import contextlib

from linview.backends.numpy import kernels, lowrank
from linview.faults import after

add_outer = after(lowrank.add_outer, "update.applied")
add_dense = after(kernels.add_dense, "update.applied")
assign = after(kernels.assign, "update.applied")
add_outer_keeping = after(kernels.add_outer_keeping, "update.applied")


@contextlib.contextmanager
def added_or_restored(X, U, V):
    """``X += U Vᵀ`` in place for the block that follows; if the block raises, X is
    restored exactly (the touched rows or columns, else a copy of X) and the error goes on:
    what a trigger that re-evaluates from the changed input needs."""
    where, saved = add_outer_keeping(X, U, V)
    try:
        yield X
    except BaseException:
        X[where] = saved
        raise


__all__ = ["add_dense", "add_outer", "added_or_restored", "assign"]
