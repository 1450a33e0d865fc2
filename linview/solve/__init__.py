"""Solve views: ``x = A \\ b`` kept with its residual and a certified error bound instead of
an explicit inverse (``%#linview solve``, ``tolerance``, ``sparse``, ``stochastic``).

``solvers.py`` (push for ``I - s·M``, warm-started Krylov, Cholesky/QR for regression),
``stochastic.py`` (column-stochastic matrices as links, edge changes), ``views.py``
(:class:`views.SolveViews`, what ``load()`` returns for such a program), ``evaluate.py``
(structure recognition and sparse evaluation), ``state.py`` (saving and restoring).
See ``docs/solve_views.md``.
"""
