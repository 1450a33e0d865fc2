"""Saving and restoring programs with solve views (``views.save``, ``linview.restore``).

The file is an ``.npz`` like a trigger module's state: ``__meta__`` (a Python literal with
``"kind": "solve"``, the program text and compile options, sizes, the update count and the
caller's ``extra``), each input by its storage (a stochastic matrix as its edge list and
weights, a sparse one as CSR arrays, a dense one as is) and each solve view's solution.
Restoring recompiles the text and warm-starts every solver from its saved solution; the
residual is recomputed exactly from the inputs, so the error bound is certified again.
"""

from __future__ import annotations

import ast
import io

import numpy as np
import scipy.sparse as sps

from linview.errors import StateError
from linview.solve.stochastic import StochasticMatrix
from linview.specialize import follow_sparse
from linview.statefile import write_atomic


def save_state(views, path, extra: dict | None = None) -> None:
    arrays: dict[str, np.ndarray] = {}
    storage = {}
    for d in views.program.inputs:
        v = views.env[d.name]
        if isinstance(v, StochasticMatrix):
            cols = np.arange(v.n)
            dst, w = v.gather(cols, v.colsum)
            arrays.update({f"in:{d.name}:src": np.repeat(cols, v.length),
                           f"in:{d.name}:dst": dst, f"in:{d.name}:w": w,
                           f"in:{d.name}:n": np.array(v.n)})
            storage[d.name] = "stochastic"
        elif sps.issparse(v):
            c = sps.csr_matrix(v)
            arrays.update({f"in:{d.name}:data": c.data, f"in:{d.name}:indices": c.indices,
                           f"in:{d.name}:indptr": c.indptr,
                           f"in:{d.name}:shape": np.array(c.shape)})
            storage[d.name] = "sparse"
        else:
            arrays[f"in:{d.name}"] = np.asarray(v)
            storage[d.name] = "dense"
    for name, solver in views.solvers.items():
        arrays[f"x:{name}"] = np.asarray(solver.X)
    p = views.program
    meta = {"kind": "solve", "program": p.name, "source": p.source, "filename": p.filename,
            "dims": dict(views.bindings), "updates": views.updates, "storage": storage,
            "tolerance": views.tolerance, "method": views.method, "extra": dict(extra or {})}
    buf = io.BytesIO()
    np.savez(buf, __meta__=np.array(repr(meta)), __module__=np.array(""), **arrays)
    write_atomic(path, buf.getvalue())


def solve_state_meta(path) -> dict | None:
    """The metadata of ``path`` if it holds saved solve views, else None."""
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = ast.literal_eval(str(z["__meta__"]))
    except Exception:  # noqa: BLE001 - any other file is not ours to judge here
        return None
    return meta if isinstance(meta, dict) and meta.get("kind") == "solve" else None


def restore_state(path, program, views_class, **options):
    """The live views saved at ``path``, restored into ``program`` (compiled from the saved
    text by :func:`linview.restore` when the caller gives none) as ``views_class``."""
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = ast.literal_eval(str(z["__meta__"]))
            arrays = {k: z[k] for k in z.files}
    except (OSError, KeyError, ValueError, SyntaxError) as e:
        raise StateError(f"cannot read saved state {path}: {e}") from None
    if program.lowered.source != meta["source"]:
        raise StateError(f"the saved state was written by a different program than "
                         f"{program.lowered.name!r}",
                         hint="restore it with the program that saved it")
    inputs = {}
    for name, kind in meta["storage"].items():
        if kind == "stochastic":
            inputs[name] = StochasticMatrix(int(arrays[f"in:{name}:n"]),
                                            arrays[f"in:{name}:src"], arrays[f"in:{name}:dst"],
                                            arrays[f"in:{name}:w"])
        elif kind == "sparse":
            inputs[name] = sps.csr_matrix((arrays[f"in:{name}:data"],
                                           arrays[f"in:{name}:indices"],
                                           arrays[f"in:{name}:indptr"]),
                                          shape=tuple(arrays[f"in:{name}:shape"]))
        else:
            inputs[name] = arrays[f"in:{name}"]
    # inputs that were given as scipy.sparse (no pragma) are sparse again
    program = follow_sparse(program, inputs) or program
    lowered = program.lowered
    opts = {k: meta[k] for k in ("tolerance", "method") if meta.get(k) is not None}
    opts.update(options)
    warm = {k[2:]: v for k, v in arrays.items() if k.startswith("x:")}
    views = views_class(lowered, dict(meta["dims"]), _warm=warm, **inputs, **opts)
    views.updates = views.stats["updates"] = int(meta["updates"])
    views.saved_meta = meta
    return views
