"""State files of modules with solve views, in the one state format (:mod:`linview.statefile`).

A dense input is saved as ``view:NAME`` as every module saves it; a sparse input as its CSR
arrays (``NAME@data``, ``NAME@indices``, ``NAME@indptr``, ``NAME@shape``), a stochastic one
as its edge list (``NAME@src``, ``NAME@dst``, ``NAME@w``, ``NAME@n``), all float64 (node
ids are exact below 2⁵³); each solve view's solution as ``NAME@x``.  The manifest's
``storage`` says which input is which.  Other views are not saved: :func:`linview.restore`
loads the inputs again (:func:`inputs_of`), every solve view warm-started from its saved
solution (:func:`solutions_of`), so that each bound is certified again from an exact
residual.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sps

from linview import statefile
from linview.errors import StateError
from linview.solve.stochastic import StochasticMatrix


def write(path, module, extra: dict | None = None) -> None:
    arrays: dict[str, np.ndarray] = {}
    storage = {}
    for name in module.INPUTS:
        v = module._store[name]
        if isinstance(v, StochasticMatrix):
            cols = np.arange(v.n)
            dst, w = v.gather(cols, v.colsum)
            arrays.update({f"{name}@src": np.repeat(cols, v.length), f"{name}@dst": dst,
                           f"{name}@w": w, f"{name}@n": np.array([v.n])})
            storage[name] = "stochastic"
        elif sps.issparse(v):
            c = sps.csr_matrix(v)
            arrays.update({f"{name}@data": c.data, f"{name}@indices": c.indices,
                           f"{name}@indptr": c.indptr, f"{name}@shape": np.array(c.shape)})
            storage[name] = "sparse"
        else:
            arrays[name] = module._view(name)
            storage[name] = "dense"
    for name, view in module._solves.items():
        arrays[f"{name}@x"] = np.asarray(view.X)
    manifest = {"program": module.PROGRAM, "hash": module.SOURCE_HASH,
                "updates": int(module.updates), "dims": dict(module.dims),
                "extra": dict(extra or {}), "storage": storage,
                "solve_options": {"tolerance": module.solve_tolerance,
                                  "method": module.method},
                **module.PROGRAM_INFO}
    statefile.write(path, {k: np.asarray(a, dtype=np.float64) for k, a in arrays.items()},
                    manifest)


def _ints(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.int64)


def inputs_of(meta: dict, views: dict[str, np.ndarray]) -> dict:
    """The inputs saved by :func:`write`, in their storage."""
    storage = meta.get("storage")
    if not isinstance(storage, dict):
        raise StateError("the saved state is malformed (storage)")
    try:
        out = {}
        for name, kind in storage.items():
            if kind == "stochastic":
                out[name] = StochasticMatrix(int(views[f"{name}@n"][0]),
                                             _ints(views[f"{name}@src"]),
                                             _ints(views[f"{name}@dst"]), views[f"{name}@w"])
            elif kind == "sparse":
                out[name] = sps.csr_matrix(
                    (views[f"{name}@data"], _ints(views[f"{name}@indices"]),
                     _ints(views[f"{name}@indptr"])),
                    shape=tuple(int(s) for s in views[f"{name}@shape"]))
            else:
                out[name] = views[name]
    except (KeyError, ValueError, IndexError) as e:
        raise StateError(f"the saved state does not hold input arrays it names ({e})") \
            from None
    return out


def solutions_of(views: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``{solve view: its saved solution}``."""
    return {k[:-2]: v for k, v in views.items() if k.endswith("@x")}


__all__ = ["write", "inputs_of", "solutions_of"]
