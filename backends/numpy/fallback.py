"""What an update does when its trigger refuses to maintain the views (NumPy backend; the
Spark backend reuses it with its own steps).

A trigger refuses in phase 1, before any view changes, by raising
:class:`~.guards.IllConditioned`: a Woodbury core is (nearly) singular, a delta is not
finite or could overflow, or a maintained inverse failed its probe
(:class:`~.guards.ProbeFailed`).  :func:`recover` then applies the update another way:

* **a failed probe of W** refreshes W's chain only, ``REFRESH[W]`` in the generated module
  (W, every view computed from it, and the views it needs that are not kept): the trigger
  runs again without probing the inverses in the chain, so every other view is maintained
  as usual, then :meth:`_evaluate_some` re-evaluates the chain from the updated inputs and
  views.  If another inverse's probe fails in that run, its chain joins (nothing has been
  applied yet).  The views the trigger changes (``CHANGES``) are copied first, so that a
  chain that cannot be re-evaluated (``rt.inv`` refuses the matrix) leaves everything as
  it was;
* anything else, or a module without ``REFRESH`` (older or Spark modules with their own
  step), re-evaluates every view from the updated inputs (``reevaluate_update``).

A :class:`~linview.errors.NumericalError` from either way refuses the update with nothing
changed, naming the view and its condition estimate.  ``module.last_fallback`` says what
was refreshed and why; ``stats["fallbacks"]`` counts both ways, ``stats["partial_refreshes"]``
the first.
"""

from __future__ import annotations

import numpy as np

from linview import faults
from linview.backends.numpy import kernels, store
from linview.backends.numpy.guards import IllConditioned, ProbeFailed
from linview.backends.numpy.phase2 import add_outer
from linview.errors import NumericalError


def recover(module, name: str, U, V, why: IllConditioned) -> None:
    """Apply ``name += U Vᵀ`` after the trigger refused it with ``why`` (nothing was
    applied): refresh the failing inverse's chain, else re-evaluate every view."""
    try:
        chain = None
        if isinstance(why, ProbeFailed) and why.view in module.REFRESH:
            chain = module._refresh_chains(name, U, V, {why.view})
        if chain is None:
            module.reevaluate_update(name, U, V)
        else:
            module.stats["partial_refreshes"] += 1
    except NumericalError as e:
        module._prober.discard()
        raise NumericalError(f"update of {name} refused, nothing changed: {e.message} "
                             f"(maintenance stopped because {why})", hint=e.hint) from None
    module.stats["fallbacks"] += 1
    module.last_fallback = {"update": name, "because": str(why),
                            "refreshed": tuple(module.VIEWS) if chain is None else chain}


def chain_of(module, failed: set[str]) -> tuple[str, ...]:
    """The views to re-evaluate when the inverses ``failed`` fail their probes (each
    chain in program order; ``_evaluate_some`` runs them all in program order)."""
    return tuple(dict.fromkeys(n for w in sorted(failed) for n in module.REFRESH[w]))


class Snapshot:
    """The undo log of a NumPy partial refresh: copies of the views the trigger changes
    (the Spark backend uses its ``Transaction`` instead, with the same methods)."""

    def __init__(self, views: dict, names, pending: dict | None = None):
        self.saved = {n: views[n].copy(order="K") for n in names if n in views}
        self.views = views
        self.pending = pending or {}  # lowrank.Pending terms, all added to views by now

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def rollback(self) -> None:
        for n, a in self.saved.items():
            self.views[n][...] = a
        for p in self.pending.values():  # terms the undone trigger added
            p.drop()

    def commit(self) -> None:
        self.saved = {}


def refresh_chains(module, name: str, U, V, failed: set[str]) -> tuple[str, ...] | None:
    """The partial refresh of :func:`recover`: the re-evaluated views, or None when the
    trigger refuses for another reason (re-evaluate everything).  The module supplies
    ``_undo_log(name)`` (:class:`Snapshot` or a Spark ``Transaction``) and
    ``_kept_values(values)`` (the values as it keeps them, and the ``TRANSIENT`` ones)."""
    prober = module._prober
    while True:
        chain = chain_of(module, failed)
        prober.discard()
        prober.skip = frozenset(w for w in module.REFRESH if w in chain)
        undo, refused = module._undo_log(name), None
        try:
            with undo:
                try:
                    with module._blas(name):
                        getattr(module, f"on_update_{name}")(U, V)
                except IllConditioned as e:  # in phase 1: nothing was applied
                    refused = e
                finally:
                    prober.skip = frozenset()
                if refused is None:
                    fresh = module._evaluate_some(module.dims, module._views, set(chain))
                    kept, transient = module._kept_values(fresh)
        except BaseException:
            undo.rollback()
            prober.discard()
            raise
        if refused is not None:
            undo.rollback()
            if not isinstance(refused, ProbeFailed) or refused.view in failed \
                    or refused.view not in module.REFRESH:
                return None
            failed.add(refused.view)  # another inverse: add its chain and run again
            continue
        undo.commit()
        module._views.update(kept)
        prober.forget(w for w in module.REFRESH if w in chain)
        for t, val in transient.items():
            prober.seed(t, val)
        prober.commit()
        return chain


def reevaluate_updates(module, updates, rows=None) -> None:
    """Apply every ``name += U Vᵀ`` of ``updates`` ({input: (U, V)}) and every
    ``name[i] += D`` of ``rows`` ({input: (i, D)}, distinct 0-based rows i, D: k×cols: a
    batch of row changes, written without a dense U) in place, then re-evaluate every
    view once: a large batch of a stream, where re-running the program costs less than
    the triggers.  On an error the inputs are restored exactly and nothing else has
    changed."""
    module._check_fresh()
    store.settle(module)  # a load's store entries written from views about to change
    checked, by_rows = {}, {}
    for n, (i, D) in (rows or {}).items():
        X = module._views[n]
        if n in module.DYNAMIC and isinstance(X, np.ndarray) and np.isfinite(D).all() \
                and D.shape == (len(i), X.shape[1]):
            by_rows[n] = (i, D)
            continue
        U = np.zeros((X.shape[0], len(i)))  # the general path checks it and says why
        U[i, np.arange(len(i))] = 1.0
        updates = {**updates, n: (U, np.asarray(D).T)}
    for n, (U, V) in updates.items():  # float64 factors as a stream builds them: no copy
        U, V = np.asarray(U, dtype=float), np.asarray(V, dtype=float)
        plain = n in module.DYNAMIC and U.ndim == V.ndim == 2 and U.shape[1] == V.shape[1] \
            and (U.shape[0], V.shape[0]) == module._views[n].shape
        if not (plain and np.isfinite(U).all() and np.isfinite(V).all()):
            U, V = module._validate_update(n, U, V)  # says what is wrong, or copies
        checked[n] = (U, V)
    saved = {}  # what puts each input back: its changed rows (a row batch), else a copy
    try:
        for n, (i, D) in by_rows.items():
            X = module._views[n]
            saved[n] = (i, slice(None)), X[i]
            X[i] = saved[n][1] + D
            faults.point("update.applied")
        for n, (U, V) in checked.items():
            X = module._views[n]
            if isinstance(X, np.ndarray):
                saved[n] = kernels.add_outer_keeping(X, U, V)
                faults.point("update.applied")  # as phase2's add_outer has it
            else:
                saved[n] = (Ellipsis, X.copy())
                add_outer(X, U, V)
        module._views = module._reevaluate({n: module._views[n] for n in module.INPUTS})
    except BaseException:
        for n, (where, old) in saved.items():
            module._views[n][where] = old
        raise
    module.updates += 1
    module.stats["updates"] += 1
    module.stats["refreshes"] += 1
