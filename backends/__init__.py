"""Backends (installed as ``linview.backends``): one folder per target, each holding its code
generator (``codegen.py``) and the runtime its generated modules import (``runtime.py``).

``numpy/``  in-process NumPy/BLAS trigger modules;
``spark/``  PySpark block-matrix trigger modules with hybrid row/column partitioning;
``common.py`` naming and sharing helpers both generators use.
"""
