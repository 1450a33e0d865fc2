"""The compiler: IR (:mod:`.ir`), lowering with iterative models (:mod:`.lower`,
:mod:`.models`), the pass pipeline (:mod:`.passes`), delta derivation (:mod:`.delta`), cost
model (:mod:`.cost`), plan handed to a backend (:mod:`.plan`), reference interpreter
(:mod:`.interp`), checker (:mod:`.check`) and printers (:mod:`.printer`, :mod:`.explain`).
See ``docs/architecture.md`` for the map."""

# Every op's definition (and its shape rule, which building a node needs) is registered by
# importing the op table, before any other compiler module builds a node.
from linview.compiler import ops  # noqa: E402, F401
