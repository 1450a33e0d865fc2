"""State files of modules with solve views, in the one state format (:mod:`linview.statefile`).

A dense input is saved as ``view:NAME`` as every module saves it; a sparse input as its CSR
arrays (``NAME@data``, ``NAME@indices``, ``NAME@indptr``, ``NAME@shape``), a stochastic one
as its edge list (``NAME@src``, ``NAME@dst``, ``NAME@w``, ``NAME@n``), all float64 (node
ids are exact below 2⁵³); each solve view's solution as ``NAME@x``, and a least-squares view
kept by factor updates (the ``cholesky`` method) its whole solver state besides
(:func:`factor_arrays`); every other dense
view as ``NAME@view``, with the probe state of maintained inverses beside them.  The
manifest's ``storage`` says which input is which, its ``keys`` the key of each saved view
(by array name: an edited program's restore, or ``load(reuse=path)``, takes them by
key).  :func:`linview.restore` loads the inputs again (:func:`inputs_of`), takes the
dense views as saved (:func:`dense_views_of`), and evaluates only the solve views,
warm-started from their saved solutions (:func:`solutions_of`) so that each bound is
certified again from an exact residual, and the sparse values of the solve side (which
are not saved).  A least-squares view whose solver state was saved (:func:`factors_of`)
continues from that state instead, neither factored nor refined: bit for bit what the
run that saved it would have computed next.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sps

from linview import statefile
from linview.backends.numpy import probe as _probe
from linview.backends.numpy import reuse
from linview.errors import StateError
from linview.solve.seminormal import CholeskySolver
from linview.solve.stochastic import StochasticMatrix

#: the arrays of a least-squares view's solver state, by suffix (``NAME@L``, ...): the
#: factor, the refinement's scalars, the weights, and the rows of F and Y where the
#: solver's copies differ from the inputs' (``@Fi``: their indices, ``@F``: their values)
FACTOR_PARTS = ("L", "scalars", "d", "Fi", "F", "Yi", "Y")


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
        if isinstance(view.solver, CholeskySolver):
            arrays.update(factor_arrays(module, name, view))
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


def factor_arrays(module, name: str, view) -> dict[str, np.ndarray]:
    """The solver state of least-squares view ``name`` (:meth:`CholeskySolver.state`
    less X, saved as ``NAME@x``) and, since the solver keeps its own F and Y and updates
    them by its own arithmetic (which may round otherwise than the module's updates of the
    inputs), the rows where they differ from what a restore builds from the saved inputs,
    to the bit (all rows where that cannot be built)."""
    solver = view.solver
    out = {f"{name}@{k}": v for k, v in solver.state().items() if k != "X"}
    if solver.d.size:
        out[f"{name}@d"] = solver.d
    m = solver.F.shape[0]
    blocks = [np.ones((m, b)) if isinstance(b, int) else _input(module, b[0])
              for b in view.design]
    built = blocks[0] if len(blocks) == 1 else (
        np.hstack(blocks) if all(b is not None for b in blocks) else None)
    for part, mine, other in (("F", solver.F, built), ("Y", solver.Y,
                                                       _input(module, view.rhs))):
        rows = _differing_rows(mine, other)
        if rows.size:  # (none: nothing saved, an empty array has no bytes to hash)
            out[f"{name}@{part}i"], out[f"{name}@{part}"] = rows.astype(float), mine[rows]
    return out


def _input(module, name) -> np.ndarray | None:
    if name not in module.INPUTS:
        return None
    v = module._view(name)
    return v.toarray() if sps.issparse(v) else v if isinstance(v, np.ndarray) else None


def _differing_rows(mine: np.ndarray, built: np.ndarray | None) -> np.ndarray:
    """The rows of ``mine`` whose bits differ from ``built``'s (all when it is missing or
    of another shape)."""
    if built is None or built.shape != mine.shape:
        return np.arange(mine.shape[0])
    return np.flatnonzero(np.any(mine.view(np.int64) != built.view(np.int64), axis=1))


def factors_of(views: dict[str, np.ndarray]) -> dict[str, dict[str, np.ndarray]]:
    """``{least-squares view: its saved solver state}`` (:func:`factor_arrays`), with
    its solution as ``X``; empty for a state written before these were saved (the
    views are then factored again, from the saved solution)."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for key in views:
        name, _, part = key.rpartition("@")
        if part == "L" and name:
            out[name] = {p: views[f"{name}@{p}"] for p in FACTOR_PARTS
                         if f"{name}@{p}" in views}
            if f"{name}@x" in views:
                out[name]["X"] = views[f"{name}@x"]
    return out


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


__all__ = ["write", "inputs_of", "solutions_of", "dense_views_of", "factors_of",
           "factor_arrays"]
