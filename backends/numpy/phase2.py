"""Phase 2 of a generated trigger: the in-place changes of the input and of each view,
as the generated code calls them (``rt.add_outer``, ``rt.add_dense``, ``rt.assign``).

Each is the kernel itself followed by the injection point ``update.applied``
(:mod:`linview.faults`, a no-op unless a test armed it), so that tests can stop an update
after its input changed and after each of its views (``docs/stopping.md``).
"""

from __future__ import annotations

from linview.backends.numpy import kernels, lowrank
from linview.faults import after

add_outer = after(lowrank.add_outer, "update.applied")
add_dense = after(kernels.add_dense, "update.applied")
assign = after(kernels.assign, "update.applied")

__all__ = ["add_dense", "add_outer", "assign"]
