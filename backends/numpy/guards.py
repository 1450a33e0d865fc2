"""Numerical guards of the generated trigger code (re-exported by
:mod:`linview.backends.numpy.runtime`, which generated modules import as ``rt``).

* :func:`inv` inverts a view, refusing singular matrices and condition estimates over a
  limit (:class:`~linview.errors.NumericalError` naming the view and the estimate);
* :func:`core_inv` inverts a small Woodbury core ``I + Qᵀ W P``, raising
  :class:`IllConditioned` (the update re-evaluates instead) when it is ill-conditioned;
* :func:`check_deltas` is the phase-1 check of every delta (finite, no overflow);
* :func:`real_dtype_problem` names complex and object-dtype arrays, which are refused.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.linalg
import scipy.sparse as sps

from linview.errors import NumericalError, UpdateError

#: a Woodbury core whose condition estimate exceeds this is refused (re-evaluation instead)
CORE_CONDITION_LIMIT = 1e10
#: a factored delta whose entries may exceed this is not applied (re-evaluation instead)
OVERFLOW_GUARD = 1e300
#: ``rt.inv`` refuses a matrix whose condition estimate (1-norm, LAPACK ``dgecon``)
#: exceeds this: its inverse would be accurate to about 1e-6 at best
INV_CONDITION_LIMIT = 1e10


class IllConditioned(NumericalError):
    """Raised inside a trigger when a Woodbury core is (nearly) singular."""


class ProbeFailed(IllConditioned):
    """Raised inside a trigger when the probe of the maintained inverse ``view`` fails:
    only that inverse's chain (the module's ``REFRESH[view]``) needs re-evaluating."""

    def __init__(self, view: str, message: str):
        super().__init__(message)
        self.view = view


def lu(A: np.ndarray, what: str, limit: float | None = None):
    """LU factors of a view's matrix, refusing singular matrices and matrices whose
    condition estimate exceeds ``limit`` (default :data:`INV_CONDITION_LIMIT`) with a
    :class:`NumericalError` that names the view and the estimate."""
    limit = INV_CONDITION_LIMIT if limit is None else limit
    A = np.asarray(A, dtype=float)
    if not np.all(np.isfinite(A)):
        raise NumericalError(f"cannot invert {what}: it has non-finite entries")
    try:
        with warnings.catch_warnings():  # a singular matrix is reported below instead
            warnings.simplefilter("ignore", scipy.linalg.LinAlgWarning)
            lu_, piv = scipy.linalg.lu_factor(A, check_finite=False)
    except (ValueError, np.linalg.LinAlgError) as e:
        raise NumericalError(f"cannot invert {what}: {e}") from None
    d = np.abs(np.diag(lu_))
    hint = ("the program's inputs make this matrix (nearly) non-invertible; an inverse "
            f"this ill-conditioned would be inaccurate (load option condition_limit=, "
            f"now {limit:.3g})")
    if d.size and (d.min() == 0 or d.min() <= d.max() * np.finfo(float).eps * d.size):
        raise NumericalError(f"cannot invert {what}: it is singular to working precision",
                             hint=hint)
    if d.size:
        with np.errstate(over="ignore", invalid="ignore"):
            anorm = float(np.abs(A).sum(axis=0).max())
        rcond, _ = scipy.linalg.lapack.dgecon(lu_, anorm, norm="1")
        if not rcond * limit >= 1.0:
            cond = f"{1 / rcond:.3g}" if rcond > 0 else "infinite"
            raise NumericalError(f"cannot invert {what}: its condition estimate is {cond}, "
                                 f"over the limit {limit:.3g}", hint=hint)
    return lu_, piv


def inv(A: np.ndarray, what: str, limit: float | None = None) -> np.ndarray:
    """The inverse of a view (guarded as :func:`lu` says)."""
    out = scipy.linalg.lu_solve(lu(A, what, limit), np.eye(np.shape(A)[0]))
    return np.asfortranarray(out)


def solve(A: np.ndarray, B: np.ndarray, what: str, limit: float | None = None) -> np.ndarray:
    """``inv(A) B`` without forming the inverse (LU and two triangular solves, as Octave's
    ``A \\ B``), guarded like :func:`inv`."""
    return scipy.linalg.lu_solve(lu(A, what, limit), np.asarray(B, dtype=float),
                                 check_finite=False)


#: cores up to this size are checked by the SVD's condition number; larger ones by LU
#: and LAPACK's 1-norm estimate (a rank-256 micro-batch: 60 ms -> 8 ms)
_SVD_CORE_MAX = 32


def core_inv(K: np.ndarray, what: str) -> np.ndarray:
    """The inverse of a small Woodbury core ``K = I + Qᵀ W P`` (r×r), guarded by its
    condition number; for r = 1 this is Sherman–Morrison's ``1 / (1 + vᵀ W u)``."""
    if K.shape == (1, 1):
        k = K[0, 0]
        if not np.isfinite(k) or abs(k) < 1.0 / CORE_CONDITION_LIMIT:
            raise IllConditioned(f"Sherman–Morrison denominator of {what} is {k:.3g}")
        return np.array([[1.0 / k]])
    if not np.all(np.isfinite(K)):
        raise IllConditioned(f"Woodbury core of {what} is not finite")
    if K.shape[0] <= _SVD_CORE_MAX:  # small: the 2-norm condition number from the SVD
        c = np.linalg.cond(K)
        if not np.isfinite(c) or c > CORE_CONDITION_LIMIT:
            raise IllConditioned(f"Woodbury core of {what} is ill-conditioned (cond {c:.3g})")
        return np.linalg.inv(K)
    # a large core (a micro-batch of many rows): LU and LAPACK's 1-norm condition
    # estimate, O(r³/3) instead of the SVD's ~O(10 r³)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scipy.linalg.LinAlgWarning)
        lu_, piv, info = scipy.linalg.lapack.dgetrf(K)
    if info != 0:
        raise IllConditioned(f"Woodbury core of {what} is singular")
    rcond, _ = scipy.linalg.lapack.dgecon(lu_, float(np.abs(K).sum(axis=0).max()), norm="1")
    if not rcond * CORE_CONDITION_LIMIT >= 1.0:
        c = f"{1 / rcond:.3g}" if rcond > 0 else "infinite"
        raise IllConditioned(f"Woodbury core of {what} is ill-conditioned (1-norm condition "
                             f"estimate {c})")
    inv_, info = scipy.linalg.lapack.dgetrs(lu_, piv, np.eye(K.shape[0]))  # getri: 2× slower
    if info != 0 or not np.all(np.isfinite(inv_)):
        raise IllConditioned(f"Woodbury core of {what} is singular")
    return inv_


def check_deltas(trigger: str, deltas: dict[str, tuple[np.ndarray, ...]]) -> None:
    """Phase-1 guard, before any view changes: ``(P, Q)`` for a factored delta ``P Qᵀ``,
    ``(D,)`` for a dense delta or a new value.  Every part must be finite,
    and a factored delta must not overflow when applied:
    ``max |P Qᵀ| ≤ Σ_j max|P[:, j]| · max|Q[:, j]| < OVERFLOW_GUARD``.  A failed check
    raises :class:`IllConditioned` (the update re-evaluates instead).  ``deltas`` maps
    view names to parts: ``{"S": (U_S, V_S), "beta": (new_beta,)}``."""
    for view, parts in deltas.items():
        for a in parts:
            with np.errstate(over="ignore", invalid="ignore"):
                total = np.sum(a)  # finite parts sum to a finite number unless it overflows
            if not np.isfinite(total) and not np.all(np.isfinite(a)):
                raise IllConditioned(f"update of {trigger}: the delta of {view} is not finite")
        if len(parts) == 2 and parts[0].size and parts[1].size:
            with np.errstate(over="ignore", invalid="ignore"):
                bound = float(np.abs(parts[0]).max(axis=0) @ np.abs(parts[1]).max(axis=0))
            if not bound < OVERFLOW_GUARD:
                raise IllConditioned(f"update of {trigger}: the delta of {view} would overflow "
                                     f"(|ΔV| bound {bound:.3g})")


def real_dtype_problem(x) -> str | None:
    """Why ``x`` cannot be read as real numbers (complex or object dtype), else None."""
    if isinstance(x, complex) or np.iscomplexobj(x):
        return "it is complex; linview computes with real numbers (float64) only"
    if getattr(getattr(x, "dtype", None), "kind", "") == "O":
        return "it has dtype object; pass a numeric (float64) array"
    return None


def update_factor(name: str, what: str, x) -> np.ndarray:
    """An update factor given as anything but a float64 array: a Fortran-ordered float64
    copy, or an :class:`UpdateError` that says why it cannot be one."""
    why = real_dtype_problem(x)
    if why:
        raise UpdateError(f"update of {name}: {what} is not real: {why}; nothing was changed")
    try:
        return np.array(x.toarray() if sps.issparse(x) else x, dtype=np.float64, order="F")
    except (TypeError, ValueError) as e:
        raise UpdateError(f"update of {name}: {what} is not numeric: {e}") from None
