"""Solve views: ``x = A \\ b`` kept with its residual and a certified error bound instead of
an explicit inverse (``%#linview solve``, ``tolerance``, ``sparse``, ``stochastic``).

``solvers.py`` (push for ``I - s·M``, warm-started Krylov, Cholesky/QR for regression),
``stochastic.py`` (column-stochastic matrices as links, edge changes), ``evaluate.py``
(the structure of A and B), ``sparsity.py``, ``bounds.py``, ``cost.py``, ``explain.py``.
Solve views are views of the generated NumPy module (``backends/numpy/solve_codegen.py``,
``solve_module.py``, ``solve_view.py``), which calls these solvers.  See
``docs/solve_views.md``.
"""
