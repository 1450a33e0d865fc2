"""Code generators (installed as ``linview.backends``): one module per target.

``numpy``  in-process NumPy/BLAS trigger modules;
``spark``  PySpark block-matrix trigger modules with hybrid row/column partitioning.
"""
