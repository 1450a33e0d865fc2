"""Probe states carried by loads that reuse views by key (:mod:`.reuse`): a reused
maintained inverse keeps its probe vectors and its argument's seed, a restored module the
probe state saved with its views, so that the numerical guards stay as strict as after a
fresh load."""

from __future__ import annotations

import numpy as np

from linview import statefile
from linview.backends.numpy import probe as _probe


def saved_prober(path, meta: dict, rows: dict[str, int], later: bool = False
                 ) -> _probe.Prober:
    """The probe state a state file holds (:func:`.probe.saved`; empty in a file written
    before probe states were saved), for views of ``rows`` rows (``later``: seeds of
    views not in ``rows`` are checked when carried, :func:`carry_probes`)."""
    prober = _probe.Prober()
    _probe.restore(prober, meta.get("probe"), statefile.read_side(path, meta), rows, later)
    return prober


def restore_probes(module, path, meta: dict) -> None:
    """Give ``module``, restored from the state file at ``path``, the probe state saved
    with its views, so that its guards are as strict as the saved module's."""
    mine = getattr(module, "_prober", None)
    if mine is None:  # views of another kind (a least-squares program kept by QR)
        return
    program = type(module).KEY_PROGRAM  # None: a module compiled ahead of time
    rows = {st.name: shape_of(module, st.name) for st in getattr(program, "statements", ())}
    rows = {n: r[0] for n, r in rows.items() if r is not None}
    saved = saved_prober(path, meta, {**rows, **{n: v.shape[0] for n, v in
                                                  module._views.items()}})
    mine.states, mine.seeds, mine.arg_of, mine.norms = (
        saved.states, saved.seeds, saved.arg_of, saved.norms)


def shape_of(module, name: str) -> tuple[int, ...] | None:
    """The shape the program gives view ``name`` for the module's sizes (None if the
    sizes do not say)."""
    import sympy as sp

    from linview.backends.numpy.kernels import Size

    if name in type(module).VIEWS:  # sizes as the module binds them: names, ints, Size
        return tuple(int(s.value(module.dims) if isinstance(s, Size) else
                         module.dims[s] if isinstance(s, str) else s)
                     for s in type(module).VIEWS[name])
    st = next(st for st in type(module).KEY_PROGRAM.statements if st.name == name)
    try:
        return tuple(int(sp.sympify(e).subs({s: module.dims[s.name] for s in
                                             sp.sympify(e).free_symbols}))
                     for e in st.expr.shape)
    except (TypeError, ValueError, KeyError):
        return None


def carry_probes(module, reused, keys, offer) -> None:
    """A reused maintained inverse keeps the probe state it had (its vectors and its
    argument's seed), so the next update is probed as after a fresh load."""
    mine = module._prober
    for name in type(module).TRANSIENT:  # seeded, not yet probed: by the argument's key
        src, shape = offer.seeds.get(keys.get(name)), shape_of(module, name)
        if src is not None and name not in mine.seeds and shape is not None \
                and src[0].seeds[src[1]][0].shape == (shape[0], 1):
            mine.seeds[name] = tuple(np.copy(x) for x in src[0].seeds[src[1]])
            if src[1] in src[0].norms:
                mine.norms[name] = src[0].norms[src[1]]
    for name in reused:
        src = offer.probes.get(keys[name])
        if src is None:
            continue
        prober, w_old, a_old = src
        mine = module._prober
        a_new = next((st.expr.children[0].attr for st in type(module).KEY_PROGRAM.statements
                      if st.name == name and st.expr.children
                      and st.expr.children[0].op.value == "view"), None)
        if a_new is None:
            continue
        if w_old in prober.states:
            mine.states[name] = tuple(np.copy(x) for x in prober.states[w_old])
        shape = shape_of(module, a_new)
        if a_old in prober.seeds and shape is not None \
                and prober.seeds[a_old][0].shape == (shape[0], 1):
            mine.seeds[a_new] = tuple(np.copy(x) for x in prober.seeds[a_old])
        if a_old in prober.norms:
            mine.norms[a_new] = prober.norms[a_old]
        mine.arg_of[name] = a_new
