"""State files of modules with solve views, in the one state format (:mod:`linview.statefile`).

A dense input is saved as ``view:NAME`` as every module saves it; a sparse input as its CSR
arrays (``NAME@data``, ``NAME@indices``, ``NAME@indptr``, ``NAME@shape``), a stochastic one
as its edge list (``NAME@src``, ``NAME@dst``, ``NAME@w``, ``NAME@n``), all float64 (node
ids are exact below 2⁵³); each solve view's solution as ``NAME@x``; every other dense
view as ``NAME@view``, with the probe state of maintained inverses beside them.  The
manifest's ``storage`` says which input is which, its ``keys`` the key of each saved view
(by array name: an edited program's restore, or ``load(reuse=path)``, takes them by
key).  :func:`linview.restore` loads the inputs again (:func:`inputs_of`), takes the
dense views as saved (:func:`dense_views_of`), and evaluates only the solve views,
warm-started from their saved solutions (:func:`solutions_of`) so that each bound is
certified again from an exact residual, and the sparse values of the solve side (which
are not saved).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sps

from linview import statefile
from linview.backends.numpy import probe as _probe
from linview.backends.numpy import reuse
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
    for name, v in module._views.items():  # the other dense views, as they are
        if name not in module.INPUTS and name not in module._solves and \
                isinstance(v, np.ndarray):
            arrays[f"{name}@view"] = v
    probes, probe_doc = _probe.saved(module._prober)  # guards as strict on restore
    keys = reuse.module_keys(module)  # the views by key: an edited program takes them
    keyed = {a: keys[a.split("@")[0]] for a in arrays
             if a.endswith(("@x", "@view")) and a.split("@")[0] in keys}
    manifest = {"program": module.PROGRAM, "hash": module.SOURCE_HASH,
                "updates": int(module.updates), "dims": dict(module.dims),
                "extra": dict(extra or {}), "storage": storage,
                "solve_options": {"tolerance": module.solve_tolerance,
                                  "method": module.method},
                "probe": probe_doc, "keys": keyed, **module.PROGRAM_INFO}
    if (why := module.least_squares):  # which least-squares form and why (linview.lstsq)
        manifest["least_squares"] = why
    statefile.write(path, {k: np.asarray(a, dtype=np.float64) for k, a in arrays.items()},
                    manifest, probes)


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


def dense_views_of(views: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``{view: its saved value}`` of the dense views that are not solve views (a state
    written before they were saved has none: they are evaluated again)."""
    return {k[:-5]: v for k, v in views.items() if k.endswith("@view")}


__all__ = ["write", "inputs_of", "solutions_of", "dense_views_of"]
