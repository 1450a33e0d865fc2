"""The compiler: IR (:mod:`.ir`), lowering with iterative models (:mod:`.lower`,
:mod:`.models`), the pass pipeline (:mod:`.passes`), delta derivation (:mod:`.delta`), cost
model (:mod:`.cost`), plan handed to a backend (:mod:`.plan`), reference interpreter
(:mod:`.interp`), checker (:mod:`.check`) and printers (:mod:`.printer`, :mod:`.explain`).
See ``docs/architecture.md`` for the map."""
