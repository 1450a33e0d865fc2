"""Loading a Spark program by reusing views by key (``load(reuse=...)``, ``store=``, a
checkpoint resumed with an edited program): the NumPy backend's walk
(:mod:`linview.backends.numpy.reuse`) over placed views.

The inputs are placed in blocks first, so that a recomputed view is computed by Spark
jobs as at a fresh load; a view taken from the offer (an array on the driver: a state
file's, a store entry's, or a live Spark view collected) is placed in the blocks the
module's ``PARTITIONING`` asks for; then every distributed view is materialized and
checked finite in one job, as after a fresh load.  What this load cached is dropped if it
fails (the offer is never changed).
"""

from __future__ import annotations

from linview.backends.numpy import reuse


def evaluate(module, arrays: dict, offer: reuse.Offer) -> dict:
    """The views of Spark module ``module`` for ``arrays`` (see the module's docstring)."""
    try:
        placed = {n: module._place(n, a, input=True) for n, a in arrays.items()}
        views = reuse.evaluate(module, placed, offer, place=module._place)
        # the products may have added a layout to an input (a relayout): drop it
        inputs = {n: module._place(n, views[n], input=True) for n in arrays}
        module._materialize(inputs)
        return {**views, **inputs}
    except BaseException:
        module._sweep()
        raise
