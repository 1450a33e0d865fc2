"""Runtime functions of the wider Octave language (``rt.norm``, ``rt.diag``, ``rt.chol``,
``rt.pinv``, ``rt.qr``, ``rt.lu`` in generated modules; re-exported by
:mod:`linview.backends.numpy.runtime`), with Octave's conventions."""

from __future__ import annotations

import numpy as np
import scipy.linalg

from linview.errors import NumericalError


def norm(A: np.ndarray, p: str, vector: bool) -> np.ndarray:
    """``norm(A, p)`` as a 1x1 array; a vector's 'fro' norm is its 2-norm."""
    order = {"1": 1, "2": 2, "fro": "fro", "inf": np.inf}[p]
    if vector:
        return np.full((1, 1), np.linalg.norm(A.ravel(), 2 if order == "fro" else order))
    return np.full((1, 1), np.linalg.norm(A, order))


def diag(A: np.ndarray, how: str) -> np.ndarray:
    """``diag(v)`` (``how="tomat"``) or the diagonal of a matrix as a column."""
    return np.diag(A.ravel()) if how == "tomat" else np.diag(A).reshape(-1, 1).copy()


def chol(A: np.ndarray, what: str) -> np.ndarray:
    """Octave's ``chol``: the upper triangular R with ``Rᵀ R = A``."""
    try:
        return scipy.linalg.cholesky(A, lower=False)
    except np.linalg.LinAlgError:
        raise NumericalError(f"chol() in {what}: the matrix is not positive definite") \
            from None


def pinv(A: np.ndarray) -> np.ndarray:
    """Octave's ``pinv``: singular values below ``max(size) · σ_max · eps`` are dropped."""
    return np.linalg.pinv(A, rcond=max(A.shape) * np.finfo(float).eps)


def qr(A: np.ndarray, economy: bool) -> tuple[np.ndarray, np.ndarray]:
    """Octave's ``[Q, R] = qr(A)`` (``economy``: ``qr(A, 0)``): LAPACK's Householder QR,
    as Octave computes it, so the signs agree.  Non-finite entries give non-finite
    factors, which the trigger's phase-1 check refuses."""
    q, r = scipy.linalg.qr(A, mode="economic" if economy else "full", check_finite=False)
    return q, r


def lu(A: np.ndarray, permuted: bool) -> tuple[np.ndarray, ...]:
    """Octave's ``[L, U] = lu(A)`` (``permuted``: L is ``PᵀL``) or ``[L, U, P] = lu(A)``
    with ``P A = L U`` (LAPACK's partial pivoting, as Octave)."""
    if permuted:
        pl, u = scipy.linalg.lu(A, permute_l=True, check_finite=False)
        return pl, u
    p, l, u = scipy.linalg.lu(A, check_finite=False)
    return l, u, p.T.copy()
