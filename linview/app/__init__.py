"""The application layer: the command line (:mod:`.cli`), streams (:mod:`.stream`),
benchmarks (:mod:`.bench`), the demo and the report tables/plots."""
