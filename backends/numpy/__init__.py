"""The NumPy backend: :mod:`.codegen` emits a trigger module, :mod:`.runtime` is what the
generated module imports as ``rt`` (in-place BLAS updates, guards, state)."""
