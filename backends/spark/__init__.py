"""The Spark backend: :mod:`.codegen` emits a PySpark trigger module; :mod:`.runtime` is its
``rt``; :mod:`.blocks` (DistMatrix, block products), :mod:`.algebra` (operators),
:mod:`.context` (partitioning, persistence, transactions), :mod:`.session` (sessions, loading,
shipping the package) and :mod:`.tasks` (functions run inside Spark tasks)."""
