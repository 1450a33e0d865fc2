"""NumPy's floating-point warnings, turned into what they mean.

An update with values of 1e200 overflows in the trigger's products; NumPy then prints a
``RuntimeWarning`` with a source line of the generated module for each product, and the
trigger's own checks refuse the update (``check_deltas``, the Woodbury guards) with nothing
changed.  The warnings say nothing the refusal does not, and a user of the command line
should not see lines of generated code.  :func:`quiet` wraps the entry points that run
numerical work (``load``, ``update``, ``update_edges``, ``refresh``): the floating-point
warnings raised inside are caught there (only there: no global filter), and

* when the call fails with a :class:`~linview.errors.LinviewError`, what they meant is added
  to its message (``NumPy reported overflow (past 1.8e308, the largest float64): the
  update's values reach 1e+200``);
* when it succeeds (the checks found every result finite: the warning came from a value
  that was then discarded), they are counted in ``views.numeric_warnings``;
* every other warning is passed on unchanged.

Every warning inside is recorded, whatever the caller's filters say (one the caller set
to ``"error"`` does not interrupt the update halfway, one set to ``"ignore"`` or
``"once"`` is still counted), and a floating-point warning from a context that asked for
warnings explicitly (``np.errstate(over="warn")``) too: so ``np.errstate`` alone (its
``"call"`` mode) would not do, and the wrapper stays a ``catch_warnings``, made cheaper
(:func:`_always`).
"""

from __future__ import annotations

import functools
import re
import sys
import threading
import warnings

import numpy as np
import scipy.sparse as sps

from linview.errors import LinviewError

#: what NumPy's floating-point warnings say, and what they mean
MEANINGS = (
    ("overflow", "overflow (past 1.8e308, the largest float64)"),
    ("invalid value", "invalid operations (inf - inf, 0·inf)"),
    ("divide by zero", "division by zero"),
)
_FLOATING = re.compile(r"(overflow|invalid value|divide by zero|underflow) encountered")
_depth = threading.local()


def _largest(values) -> float | None:
    """The largest magnitude among the numbers of ``values`` (arrays, sparse, numbers)."""
    best = None
    for v in values:
        try:
            a = v.data if sps.issparse(v) else np.asarray(v, dtype=float)
            with np.errstate(all="ignore"):
                m = float(np.max(np.abs(a))) if a.size else 0.0
        except (TypeError, ValueError, AttributeError):
            continue
        best = m if best is None or m > best else best
    return best


def meaning(caught: list, what: str, values) -> str:
    """``caught`` floating-point warnings in words, with the largest value of ``values``."""
    said = []
    for key, words in MEANINGS:
        if any(key in str(w.message) for w in caught) and words not in said:
            said.append(words)
    if not said:
        return ""
    big = _largest(values)
    reach = f": {what} reach {big:.3g}" if big else ""
    return "NumPy reported " + " and ".join(said) + reach


def update_factors(_self, args, _kwargs) -> list:
    """The values of ``update(name, U, V)`` and ``update_edges(name, records)``."""
    return list(args[1:])


def given_inputs(self, _args, kwargs) -> list:
    """The inputs given to a constructor (not its options)."""
    inputs = getattr(self, "INPUTS", None) or {}
    return [v for k, v in kwargs.items() if k in inputs]


def quiet(what: str, pick=update_factors):
    """Decorate a method of a views object: floating-point warnings inside it become part
    of its error, or a count (``self.numeric_warnings``).  ``what`` names the values whose
    largest magnitude is reported ("the update's values"), ``pick(self, args, kwargs)``
    finds them."""
    def decorate(method):
        @functools.wraps(method)
        def wrapper(views, /, *args, **kwargs):  # positional: an input may be "self"
            if getattr(_depth, "n", 0):  # an outer call already listens
                return method(views, *args, **kwargs)
            _depth.n = 1
            try:
                with warnings.catch_warnings(record=True) as caught:
                    _always()
                    try:
                        return method(views, *args, **kwargs)
                    except LinviewError as e:
                        floating = [w for w in caught if _is_floating(w)]
                        said = meaning(floating, what, _picked(pick, views, args, kwargs))
                        if said:
                            raise _with_meaning(e, said) from None
                        raise
                    finally:
                        _count(views, caught)
            finally:
                _depth.n = 0
                _pass_on(caught)
        return wrapper
    return decorate


#: the filter ``warnings.simplefilter("always")`` puts first
_ALWAYS = ("always", None, Warning, None, 0)


def _always() -> None:
    """Inside ``catch_warnings``: record every warning (``simplefilter("always")``).
    ``catch_warnings`` has just replaced ``warnings.filters`` with a copy and told the
    interpreter the filters changed, so the filter is put first directly: the same list,
    without ``simplefilter``'s search for a duplicate (a ``ValueError`` raised and
    caught) and its second notice of a change, about 1.5 µs of the 2.7 µs the wrapper
    cost per update (Python 3.11).  Where warnings are kept per context (Python 3.14's
    ``-X context_aware_warnings``) ``warnings.filters`` is not the active list:
    ``simplefilter`` then."""
    if getattr(sys.flags, "context_aware_warnings", False):
        warnings.simplefilter("always")
    else:
        warnings.filters.insert(0, _ALWAYS)


def _picked(pick, self, args, kwargs) -> list:
    try:
        return list(pick(self, args, kwargs))
    except (TypeError, ValueError, IndexError, AttributeError, KeyError):
        return []  # values of a call that failed for being malformed: nothing to report


def _is_floating(w) -> bool:
    return issubclass(w.category, RuntimeWarning) and bool(_FLOATING.search(str(w.message)))


def _count(views, caught: list) -> None:
    n = sum(1 for w in caught if _is_floating(w))
    if n:
        try:
            views.numeric_warnings = getattr(views, "numeric_warnings", 0) + n
        except AttributeError:  # a class with __slots__
            pass


def _pass_on(caught: list) -> None:
    """Warn again every warning that is not a floating-point one (deprecations, ...)."""
    for w in caught:
        if not _is_floating(w):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def _with_meaning(e: LinviewError, said: str) -> LinviewError:
    """``e`` with what the floating-point warnings meant added to its message."""
    try:
        out = type(e)(f"{e.message}; {said}", e.location, e.hint)
    except TypeError:  # a subclass with another signature: keep it as it is
        return e
    out.__cause__ = e.__cause__
    out.floating_point = said  # what another form of the same computation cannot mend
    return out


def relative_errors(views, fresh, skip=()) -> dict[str, float]:
    """Max error of each view against its re-evaluation ``fresh[name]``, relative to the
    largest entry of the re-evaluation (``inf`` where not finite; views in ``skip`` are
    not compared): what ``verify()`` reports."""
    errs = {}
    with np.errstate(over="ignore", invalid="ignore"):
        for name, ref in fresh.items():
            if name in skip:
                continue
            ref = np.asarray(ref, dtype=float)
            if not ref.size:
                errs[name] = 0.0
                continue
            scale = max(float(np.max(np.abs(ref))), 1e-300)
            err = float(np.max(np.abs(views[name] - ref))) / scale
            errs[name] = err if np.isfinite(err) else float("inf")
    return errs
