"""Inputs that grow: an INSERT of a key, node or index past an input's size, where the
program allows it.

The program allows it when the size is a size of its own: a symbol (``m`` of ``X: m×n`` in
``examples/ols.m``, ``n`` of ``M: n×n`` in ``examples/pagerank_solve.m``) that is no part
of another size and that only inputs whose tables can grow along it have: rows tables
along their rows (a key past the rows), entries tables along either side (an index past
it), edges tables along both (a node past the nodes).  A program compiled for fixed
shapes (``--shapes``, a ``dims`` pragma with numbers) does not allow it: a key past the
size stays an error.  Every input of that size grows with it (X and Y of OLS: ``m``).

How much: an input of rows tables only grows to the largest key or twice the size,
whichever is more, so that a stream of inserts loads again a logarithmic number of times
(its new rows are zero, as rows without a key are).  A size that an edges or entries
table has grows to the largest node or index exactly: there a node is never neutral (a
node without links is a dangling node, which changes every rank) and a zero row or column
of a matrix of entries may make it singular, so the result is the one that a fresh load
of the final table computes.

Growing loads the views again from linview's own copy of the inputs with the new rows,
columns or nodes added (no table is read again): the capacity mechanism of ``linview
run``, whose preallocated rows are zero until an observation arrives, made larger.  With
``--checkpoint`` the old state is removed first and a new one saved at once, so a crash in
between finds no state and loads the tables afresh from a new slot (consistent, nothing
doubled).

On Spark (``--backend spark``) rows tables grow by the same rule: a distributed input is
collected on the driver, padded there and written to linview's copy of the inputs, from
which the load distributes it again; the collection is under the driver-memory rule
(``driver_max_elements`` of the new size), past it the run stops with a clear error
(give the sizes with ``--shapes``).  Edges and entries tables do not grow on Spark: a key
past their size stays an error there.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sps
import sympy

#: the axes along which a layout's input can grow
AXES = {"rows": (0,), "entries": (0, 1), "edges": (0, 1)}


def groups(program, layouts: dict[str, str]) -> dict[tuple, list[tuple]]:
    """(input, axis) -> the (input, axis) pairs that grow with it, for each that may grow;
    ``layouts``: each mapped input's layout (:func:`.mapping.layouts`)."""
    decls = {d.name: [sympy.sympify(x) for x in d.shape] for d in program.inputs}
    out = {}
    for name, dims in decls.items():
        for axis, size in enumerate(dims):
            if not isinstance(size, sympy.Symbol):
                continue
            group = [(n, a) for n, ds in decls.items() for a, d in enumerate(ds) if d == size]
            elsewhere = any(size in d.free_symbols and d != size
                            for ds in decls.values() for d in ds)
            if not elsewhere and all(n in layouts and a in AXES[layouts[n]]
                                     for n, a in group):
                out[(name, axis)] = group
    return out


def can_grow(value, layout: str, spark: bool = False) -> bool:
    """Whether :func:`padded` enlarges this input's value; ``spark``: a view of the Spark
    backend (rows tables only: a driver array or a distributed block matrix)."""
    if layout == "rows":
        return isinstance(value, np.ndarray) or (spark and hasattr(value, "to_numpy"))
    if spark:
        return False
    if layout == "entries":
        return sps.issparse(value)
    return hasattr(value, "length") and hasattr(value, "start")  # a StochasticMatrix


def sizes(grow: dict[tuple, int], groups: dict[tuple, list[tuple]], shapes: dict,
          layouts: dict[str, str]) -> dict[str, tuple]:
    """``grow``: {(input, axis): the largest key or index it must hold} -> {input: its new
    shape}, for every input that grows."""
    new = {n: list(shapes[n]) for n, _ in {g for k in grow for g in groups[k]}}
    for (name, axis), key in grow.items():
        group = groups[(name, axis)]
        rows_only = all(layouts[n] == "rows" for n, _ in group)
        size = max(key, 2 * shapes[name][axis]) if rows_only else key
        for n, a in group:
            new[n][a] = max(new[n][a], size)
    return {n: tuple(s) for n, s in new.items()}


def distributed(value) -> bool:
    """Whether ``value`` is a distributed view of Spark (a block matrix, not on the
    driver): the copy of the inputs needs it collected, even where it does not grow."""
    return hasattr(value, "ctx") and hasattr(value, "to_numpy")


def padded(value, shape: tuple, name: str = "the input"):
    """``value`` enlarged to ``shape``: zero rows (a NumPy array; a distributed one of
    Spark collected first, within the driver limit), zero rows and columns
    (``scipy.sparse``), nodes without links (a ``StochasticMatrix``, its links as they
    are now, in ``.links`` as a fresh load has them)."""
    if distributed(value):
        value.ctx.check_collect(shape, f"input {name} cannot grow on Spark (it is "
                                       "collected on the driver, padded and loaded again)")
        value = value.to_numpy()
    if isinstance(value, np.ndarray):
        out = np.zeros(shape)
        out[:value.shape[0], :value.shape[1]] = value
        return out
    if sps.issparse(value):
        out = sps.csc_matrix(value, copy=True)
        out.resize(shape)
        return out
    return _links(value, shape[0])


def _links(M, n: int):
    """A StochasticMatrix of ``n`` nodes with the links of ``M`` (its weights as given)."""
    from linview.solve.stochastic import StochasticMatrix

    length = np.asarray(M.length, dtype=np.int64)
    src = np.repeat(np.arange(M.n, dtype=np.int64), length)
    first = np.repeat(np.cumsum(length) - length, length)
    pos = np.repeat(np.asarray(M.start, dtype=np.int64), length) + np.arange(src.size) - first
    dst, w = M.rows[pos].astype(np.int64), np.array(M.wts[pos], dtype=float)
    out = StochasticMatrix(n, src, dst, w)
    out.links = (n, src, dst, w)
    return out
