"""The structure of a solve view's A and B, recognised when its module is generated
(``backends/numpy/solve_codegen.py``): ``I - s·M`` (push), the normal equations
(cholesky); and the column changes of a stochastic input as low-rank factors."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sps

from linview.compiler import ir
from linview.compiler.ir import Node, Op
from linview.solve.stochastic import ColumnChange


def pagerank_form(a: Node, program: ir.Program, storage: tuple = ("stochastic",)):
    """``(M, s)`` when ``a`` is ``I - s·M`` with M a stochastic input (or stored as one of
    ``storage``), else None."""
    if a.op is Op.SUB and a.children[0].op is Op.EYE and a.children[1].op is Op.SCALE:
        s, m = a.children[1].children
        if m.op is Op.INPUT and program.input(m.attr).storage in storage:
            return m.attr, s
    return None


def change_factors(changes: list[ColumnChange], n: int):
    """``ΔM = P Qᵀ`` of a list of column changes: sparse P (a uniform column for a node that
    becomes or stops being dangling), one-hot Q."""
    rows, cols, vals = [], [], []
    for k, ch in enumerate(changes):
        parts = [(ch.new_rows, ch.new_vals), (ch.old_rows, -ch.old_vals)]
        u = float(ch.new_dangling) - float(ch.old_dangling)
        if u:
            parts.append((np.arange(n), np.full(n, u / n)))
        for r, v in parts:
            rows.append(r)
            cols.append(np.full(r.size, k))
            vals.append(v)
    k = len(changes)
    P = sps.csc_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                       shape=(n, k))
    Q = sps.csc_matrix((np.ones(k), ([ch.j for ch in changes], np.arange(k))), shape=(n, k))
    return P, Q
