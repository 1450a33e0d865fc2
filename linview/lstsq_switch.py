"""Least squares switched to the stable form during updates (issue 25).

``least_squares="auto"`` chooses the form of each least-squares problem at ``load()``
(:mod:`linview.lstsq`).  The normal equations it keeps are watched here while they are
updated, so that the rule also holds for data that become ill-conditioned later:

* every :data:`CHECK_EVERY`-th update (1,024), the rule's
  ``κ = √cond₂(FᵀF)`` of each problem is estimated again (:func:`linview.lstsq.
  kept_normal`: power iterations from a fixed start, 16 products with FᵀF and 16 with the
  maintained inverse; the same numbers for the same data and update count, so a run
  restored from a state file switches at the update where the uninterrupted one did);
* an update that the normal equations refuse (the inverse's condition estimate over its
  limit, or singular to working precision: ``update of X refused, nothing changed``) is
  not refused: the views switch first, then take the update (one whose values pass
  float64's range is refused as before: no form mends that).

Past the rule's ``κ = 10`` the views switch in place: the program compiled with
``least_squares="qr"`` is loaded from the current inputs (the stable form's factor from a
QR of the current F), and the object the caller holds becomes those views (its class and
its attributes), with ``views.least_squares`` (and ``explain(views=views)``) saying why and
``views.stats["least_squares_switch"]`` at which update.  The stable form is loaded with
the load's memory budget and the default options; while it loads, both forms are held
(the normal one is kept whole until the stable one has loaded: if that fails, nothing
changed, and the refusal or the normal equations stand).  NumPy only (on Spark the rule
is applied at ``load()`` only: :func:`linview.lstsq.loaded`), and only views loaded or
restored with ``least_squares="auto"``.
"""

from __future__ import annotations

import weakref

import numpy as np

from linview import lstsq
from linview.errors import NumericalError

#: the rule is applied again every this many updates: a check (32 passes over F, 16 over
#: the inverse) cost about 21 row updates of the normal form on a tall 4000×1000 X
#: (``bench/lstsq_check.py``), so about 2% of the update time
CHECK_EVERY = 1024

def watch(views, prog, memory_budget=None):
    """``views`` (loaded or restored by ``prog``) made to switch as the module docstring
    says, when they keep a least-squares problem by the normal equations under
    ``least_squares="auto"`` on NumPy; ``views`` as they are otherwise."""
    opts = getattr(prog, "options", None) or {}
    if opts.get("least_squares", "auto") != "auto" or opts.get("backend") != "numpy" \
            or not hasattr(views, "condition_limit") or hasattr(views, "SOLVES") \
            or not lstsq.grams(prog):
        return views
    views.update = _Update(views)  # an attribute of these views: their class stays
    views._lstsq_watch = {"prog": prog, "budget": memory_budget}
    return views


class _Update:
    """``views.update`` of watched views: the class's update, then the rule.  It holds
    the views weakly (no reference cycle: arrays go as soon as the views do)."""

    def __init__(self, views):
        self._views = weakref.ref(views)
        self.__doc__ = type(views).update.__doc__

    def __call__(self, name: str, U, V) -> None:
        views = self._views()
        try:
            type(views).update(views, name, U, V)
        except NumericalError as refused:
            if "refused, nothing changed" not in refused.message or getattr(
                    refused, "floating_point", None) or not switch(  # no form mends those
                    views, f"the update of {name} was refused: {refused.message}"):
                raise
            views.update(name, U, V)  # now the stable form's own update
            return
        if views.updates % CHECK_EVERY == 0:
            check(views)


def check(views) -> bool:
    """The rule on the current data: switch when some problem's κ is past
    :data:`linview.lstsq.AUTO_RATIO`.  Whether the views switched."""
    prog = views._lstsq_watch["prog"]
    if _stable_program(views) is None:
        return False
    kept = [(F, w, lstsq.kappa_of(views, name, F, w)) for name, F, w in lstsq.grams(prog)]
    kept = [k for k in kept if k[2] is not None]
    if not kept:
        return False
    F, w, kappa = max(kept, key=lambda k: k[2])
    views.stats["least_squares_checks"] = views.stats.get("least_squares_checks", 0) + 1
    G = f"{F}ᵀ{F}" if w is None else f"{F}ᵀ·diag({w})·{F}"
    return kappa > lstsq.AUTO_RATIO and switch(
        views, f"{lstsq.kappa_phrase(kappa, G)}, over the {lstsq.AUTO_RATIO:g}×")


def switch(views, because: str) -> bool:
    """Switch ``views`` in place to the stable form loaded from their current inputs
    (see the module docstring); False, nothing changed, where it does not load."""
    watch_ = views._lstsq_watch
    other = _stable_program(views)
    if other is None:
        return False
    F = ", ".join(F for _, F, _ in lstsq.grams(watch_["prog"]))
    at = int(views.updates)
    why = (f"least squares of {F} by QR updates of the factor (switched from the normal "
           f"equations after update {at}: {because})")
    other.options["why"] = why
    inputs = {n: _copy(views._view(n)) for n in views.INPUTS}  # the stable form's own
    try:
        stable = other.load(**inputs, memory_budget=watch_["budget"])
    except NumericalError:
        return False
    stable.updates = views.updates
    stable.stats["updates"] = views.stats.get("updates", views.updates)
    stable.stats["least_squares_switch"] = {"update": at, "because": because}
    stable.least_squares = why
    views.__class__ = type(stable)
    views.__dict__ = stable.__dict__  # one object's state, the caller's reference
    return True


def _stable_program(views):
    """The program compiled with ``least_squares="qr"`` (once, at the first need), or None
    where there is none (other inverses beside the problem's)."""
    watch_ = views._lstsq_watch
    if "stable" not in watch_:
        watch_["stable"] = lstsq.compiled_as(watch_["prog"], "qr")
    return watch_["stable"]


def _copy(x):
    return np.array(x, dtype=float, order="F") if isinstance(x, np.ndarray) else x.copy()


__all__ = ["watch", "check", "switch", "CHECK_EVERY"]
