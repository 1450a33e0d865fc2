"""Inputs that grow: an INSERT of a key past an input's rows, where the program allows it.

The program allows it when the input's row count is a size of its own: a symbol (``m`` of
``X: m×n`` in ``examples/ols.m``) that is no input's column count and no part of another
size.  A program compiled for fixed shapes (``--shapes``, a ``dims`` pragma) does not
allow it: a key past the size stays an error.  Every input whose rows are that size grows
with it (X and Y of OLS: ``m``), to the largest key or twice the size, whichever is more,
so that a stream of inserts loads again a logarithmic number of times.  Only inputs of
the rows layout grow (every input of that size must be one), and only on NumPy.

Growing loads the views again from linview's own copy of the inputs with zero rows added
(no table is read again): the capacity mechanism of ``linview run``, whose preallocated
rows are zero until an observation arrives, made larger.  With ``--checkpoint`` the old
state is removed first and a new one saved at once, so a crash in between finds no state
and loads the tables afresh from a new slot (consistent, nothing doubled).
"""

from __future__ import annotations

import numpy as np
import sympy


def groups(program, table_inputs: set[str]) -> dict[str, list[str]]:
    """Input -> the inputs that grow with it, for each input that may grow."""
    decls = {d.name: [sympy.sympify(x) for x in d.shape] for d in program.inputs}
    out = {}
    for name, (rows, _) in decls.items():
        if not isinstance(rows, sympy.Symbol):
            continue
        group = [n for n, (r, _) in decls.items() if r == rows]
        elsewhere = any(rows in c.free_symbols for _, c in decls.values()) or any(
            rows in r.free_symbols for n, (r, _) in decls.items() if n not in group)
        if not elsewhere and all(n in table_inputs for n in group):
            out[name] = group
    return out


def sizes(grow: dict[str, int], groups: dict[str, list[str]], shapes) -> dict[str, int]:
    """``grow``: {input: the largest key it must hold} -> {input: its new row count}."""
    out: dict[str, int] = {}
    for name, key in grow.items():
        rows = max(key, 2 * shapes[name][0])
        for n in groups[name]:
            out[n] = max(out.get(n, 0), rows)
    return out


def padded(value: np.ndarray, rows: int) -> np.ndarray:
    """``value`` with zero rows added up to ``rows``."""
    out = np.zeros((rows, value.shape[1]))
    out[:value.shape[0]] = value
    return out
