"""Helpers of :mod:`linview.solve.views`: recognising the structure of a solve view's
A and B (``I - s·M``, normal equations), evaluating expressions with ``scipy.sparse``
operands kept sparse, and checking update factors."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sps
import sympy as sp

from linview.compiler import ir
from linview.compiler.interp import eval_node, size_value
from linview.compiler.ir import Node, Op
from linview.compiler.ops import OPS
from linview.errors import InputError, UpdateError
from linview.solve.sparsity import KEEPS_SPARSE, SPARSE_OPERAND
from linview.solve.stochastic import ColumnChange, StochasticMatrix


def pagerank_form(a: Node, program: ir.Program, storage: tuple = ("stochastic",)):
    """``(M, s)`` when ``a`` is ``I - s·M`` with M a stochastic input (or stored as one of
    ``storage``), else None."""
    if a.op is Op.SUB and a.children[0].op is Op.EYE and a.children[1].op is Op.SCALE:
        s, m = a.children[1].children
        if m.op is Op.INPUT and program.input(m.attr).storage in storage:
            return m.attr, s
    return None


def gram_form(a: Node, b: Node):
    """``(F, Y)`` when ``a \\ b`` is ``(Fᵀ F) \\ (Fᵀ Y)`` with inputs F and Y, else None."""
    if a.op is Op.MUL and b.op is Op.MUL:
        f1, f2 = a.children
        g, y = b.children
        if (f1.op is Op.T and f1.children[0] is f2 and f2.op is Op.INPUT and g is f1
                and y.op is Op.INPUT):
            return f2.attr, y.attr
    return None


def scalar_value(x) -> float:
    return float(np.asarray(x, dtype=float).reshape(-1)[0])


_SPARSE_OPS = {Op.ADD: lambda a, b: a + b, Op.SUB: lambda a, b: a - b, Op.NEG: lambda a: -a,
               Op.T: lambda a: a.T, Op.MUL: lambda a, b: a @ b,
               Op.EMUL: lambda a, b: a.multiply(b) if sps.issparse(a) else b.multiply(a)}


def _keeps_sparse(op: Op, kids: list) -> bool:
    """:data:`linview.solve.sparsity.KEEPS_SPARSE` on values (1x1 operands aside)."""
    rule = KEEPS_SPARSE.get(op)
    flags = [sps.issparse(k) for k in kids if sps.issparse(k) or np.size(k) != 1]
    return rule is not None and bool(flags) and (all(flags) if rule == "all" else any(flags))


def _dense_of(kids: list, op: Op) -> list:
    """Operands of an op that has no sparse form: a sparse operand is used as it is by
    the ops of :data:`SPARSE_OPERAND` (a dense result of their own size), else densified
    (the program asked for a dense value, e.g. ``inv`` of a sparse matrix)."""
    if op in SPARSE_OPERAND:
        return kids
    return [k.toarray() if sps.issparse(k) else k for k in kids]


def sparse_eval(root: Node, env, bindings) -> object:
    """Evaluate ``root`` keeping scipy.sparse results sparse where Octave does
    (:mod:`linview.solve.sparsity`; stochastic inputs as CSC)."""
    memo: dict[int, object] = {}
    for n in root.walk():
        op = n.op
        if op in (Op.INPUT, Op.VIEW, Op.FACTOR):
            v = env[n.attr]
            val = v.tocsc() if isinstance(v, StochasticMatrix) else v
        elif op is Op.EYE and n.rows == n.cols:
            val = sps.identity(size_value(n.rows, bindings), format="csr")
        elif op in ir.LEAVES:
            val = eval_node(n, env, bindings)
        else:
            kids = [memo[id(c)] for c in n.children]
            if op is Op.SCALE:
                val = scalar_value(kids[0]) * kids[1]
            elif _keeps_sparse(op, kids):
                val = _SPARSE_OPS[op](*kids)
            elif any(sps.issparse(k) for k in kids) and op in (Op.MUL, Op.ADD, Op.SUB):
                val = np.asarray(_SPARSE_OPS[op](*kids))  # sparse with dense: dense
            elif any(sps.issparse(k) for k in kids) and op is Op.SUM:
                val = np.asarray(kids[0].sum(axis=n.attr - 1))
            else:
                val = OPS[op].evaluate(n, *_dense_of(kids, op))
        memo[id(n)] = val
    return memo[id(root)]


def evaluate_factor(n: Node, scope, bindings):
    val = sparse_eval(n, scope, bindings)
    if sps.issparse(val):
        return val
    return np.asarray(val, dtype=float).reshape(-1, 1) if np.ndim(val) < 2 else val


def check_factor(x, n: int, what: str, name: str):
    """An update factor as a 2-D dense array or a scipy CSC matrix, checked."""
    if sps.issparse(x):
        a = sps.csc_matrix(x, dtype=float)
        data = a.data
    else:
        try:
            a = np.asarray(x, dtype=float)
        except (TypeError, ValueError) as e:
            raise UpdateError(f"update of {name}: {what} is not numeric: {e}") from None
        a = a.reshape(-1, 1) if a.ndim == 1 else a
        data = a
    if a.ndim != 2 or a.shape[0] != n:
        raise UpdateError(f"update of {name}: {what} has shape {a.shape}, expected ({n}, k)")
    if a.shape[1] == 0:
        raise UpdateError(f"update of {name}: rank 0 (U and V have no columns)")
    if not np.all(np.isfinite(data)):
        raise UpdateError(f"update of {name}: {what} contains NaN or Inf; nothing was changed")
    return a


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


def read_inputs(program: ir.Program, inputs: dict, dims: dict) -> tuple[dict, dict]:
    """The inputs of a program with solve views, checked and in their storage
    (stochastic, sparse CSR, dense 2-D), and the sizes they bind: ``(env, bindings)``."""
    names = [d.name for d in program.inputs]
    missing = [n for n in names if n not in inputs]
    extra = [n for n in inputs if n not in names]
    if missing or extra:
        what = "; ".join(p for p in (missing and "missing " + ", ".join(missing),
                                     extra and "unexpected " + ", ".join(extra)) if p)
        raise InputError(f"{program.name}: {what}", hint="inputs: " + ", ".join(names))
    env: dict[str, object] = {}
    bindings = {k: int(v) for k, v in dims.items()}
    for d in program.inputs:
        x = inputs[d.name]
        try:
            if d.storage == "stochastic":
                val = x if isinstance(x, StochasticMatrix) else \
                    StochasticMatrix.from_matrix(x)
            elif d.storage == "sparse":
                val = sps.csr_matrix(x, dtype=float)
            else:
                val = np.asarray(x.toarray() if sps.issparse(x) else x, dtype=float)
                val = val.reshape(-1, 1) if val.ndim < 2 else val
        except InputError as e:
            raise InputError(f"input {d.name}: {e.message}", hint=e.hint) from None
        except (TypeError, ValueError) as e:
            raise InputError(f"input {d.name} is not a numeric matrix: {e}") from None
        data = val.data if sps.issparse(val) else (val.wts if isinstance(
            val, StochasticMatrix) else val)
        if not np.all(np.isfinite(data)):
            raise InputError(f"input {d.name} contains NaN or Inf")
        for axis, e in enumerate(d.shape):
            got = val.shape[axis]
            e = sp.sympify(e)
            if isinstance(e, sp.Symbol):
                if bindings.setdefault(e.name, got) != got:
                    raise InputError(f"input {d.name} has {('rows', 'columns')[axis]} "
                                     f"{got}, but size '{e}' is {bindings[e.name]}")
            elif not e.free_symbols and int(e) != got:
                raise InputError(f"input {d.name} has {('rows', 'columns')[axis]} {got}, "
                                 f"expected {e}")
        env[d.name] = val
    return env, bindings
