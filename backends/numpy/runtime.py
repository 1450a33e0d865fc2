"""Runtime support for generated NumPy trigger modules.

A generated module defines one subclass of :class:`TriggerModule`; this base class holds
everything that is the same for every program: input validation, the two-phase update
protocol, verification against re-evaluation, drift policy, and save/restore.  The
helpers below are the in-place BLAS kernels and numerical guards the generated code calls.

The generated code only ever imports numpy, scipy and this module.
"""

from __future__ import annotations

import hashlib
import io
import os
import time
from collections.abc import Callable, Mapping
from typing import NamedTuple

import numpy as np
import scipy.linalg
import scipy.linalg.blas as blas
import scipy.sparse as sps

from linview.errors import InputError, NumericalError, StateError, UpdateError


class Size(NamedTuple):
    """A compound size in a generated module's ``INPUTS``/``VIEWS``: its text (for messages)
    and its value as code over the bound sizes ``d``.  A bare size is just its name, a
    literal size an int."""

    text: str
    value: Callable[[Mapping[str, int]], int]


def size_text(size) -> str:
    return size.text if isinstance(size, Size) else str(size)

#: a Woodbury core whose condition estimate exceeds this is refused (re-evaluation instead)
CORE_CONDITION_LIMIT = 1e10
#: a factored delta whose entries may exceed this is not applied (re-evaluation instead)
OVERFLOW_GUARD = 1e300


class IllConditioned(NumericalError):
    """Raised inside a trigger when a Woodbury core is (nearly) singular."""


# ------------------------------------------------------------------ kernels
def add_outer(A: np.ndarray, P: np.ndarray, Q: np.ndarray) -> None:
    """``A += P Qᵀ`` in place through BLAS ``dgemm`` with beta = 1, allocating nothing of
    A's size.  (``dgemm`` also for rank 1: OpenBLAS's ``dger`` measured 40× slower here.)"""
    if P.shape[1] == 0:
        return
    if A.flags.f_contiguous and A.dtype == np.float64 and A.size > 64:
        out = blas.dgemm(1.0, P, Q, beta=1.0, c=A, trans_b=True, overwrite_c=True)
        if out is A:
            return
        A[...] = out  # BLAS had to copy (not expected for Fortran float64)
        return
    A += P @ Q.T


def add_dense(A: np.ndarray, D: np.ndarray) -> None:
    """``A += D`` in place."""
    A += D


def assign(A: np.ndarray, value: np.ndarray) -> None:
    """``A[...] = value`` in place (keeps A's memory and Fortran order)."""
    A[...] = value


def owned(A: np.ndarray) -> np.ndarray:
    """A copy of ``A`` (a view used as a delta factor must not change when phase 2 updates
    the view in place)."""
    return np.array(A, order="F")


def one_hot(X: np.ndarray) -> np.ndarray | None:
    """The non-zero rows of an update factor when they are few (a row, column or cell
    update), else None."""
    rows = np.flatnonzero(X.any(axis=1))
    return rows if rows.size * 4 <= X.shape[0] else None


def dot(A, X: np.ndarray) -> np.ndarray:
    """``A @ X`` for an update factor ``X``: when ``X`` has few non-zero rows (a row, column
    or cell update is one-hot) only those columns of ``A`` are read: O(n·nnz) not O(n²)."""
    rows = one_hot(X)
    if rows is not None:
        return A[:, rows] @ X[rows]
    return A @ X


def fused_dot(A, *blocks: np.ndarray, ops: str | None = None) -> list[np.ndarray]:
    """``[op1(A) @ B1, op2(A) @ B2, ...]`` with ``ops[i]`` "N" (A) or "T" (Aᵀ): the products
    of one view at one trigger level.  Blocks of each kind are stacked into one gemm
    (``A [B1, B3]``, ``Aᵀ [B2]``), which reads A once per kind instead of once per
    product: for thin factors a product is bound by memory, not flops.  One-hot blocks
    read only their columns of A (see :func:`dot`)."""
    ops = ops or "N" * len(blocks)
    out: list = [None] * len(blocks)
    kinds: dict[str, list[int]] = {}
    for i, (B, o) in enumerate(zip(blocks, ops, strict=True)):
        if one_hot(B) is not None:
            out[i] = dot(A.T if o == "T" else A, B)
        else:
            kinds.setdefault(o, []).append(i)
    for o, idx in kinds.items():
        res = (A.T if o == "T" else A) @ np.hstack([blocks[i] for i in idx])
        cuts = np.cumsum([blocks[i].shape[1] for i in idx])[:-1]
        for i, part in zip(idx, np.hsplit(res, cuts), strict=True):
            out[i] = part
    return out


def inv(A: np.ndarray, what: str) -> np.ndarray:
    """The inverse of a view, refusing singular matrices with a :class:`NumericalError`."""
    A = np.asarray(A, dtype=float)
    if not np.all(np.isfinite(A)):
        raise NumericalError(f"cannot invert {what}: it has non-finite entries")
    try:
        lu, piv = scipy.linalg.lu_factor(A, check_finite=False)
    except (ValueError, np.linalg.LinAlgError) as e:
        raise NumericalError(f"cannot invert {what}: {e}") from None
    d = np.abs(np.diag(lu))
    if d.size and (d.min() == 0 or d.min() <= d.max() * np.finfo(float).eps * d.size):
        raise NumericalError(f"cannot invert {what}: it is singular to working precision",
                             hint="the program's inputs make this matrix non-invertible")
    out = scipy.linalg.lu_solve((lu, piv), np.eye(A.shape[0]))
    return np.asfortranarray(out)


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
    c = np.linalg.cond(K)
    if not np.isfinite(c) or c > CORE_CONDITION_LIMIT:
        raise IllConditioned(f"Woodbury core of {what} is ill-conditioned (cond {c:.3g})")
    return np.linalg.inv(K)


def check_deltas(trigger: str, deltas: dict[str, tuple[np.ndarray, ...]]) -> None:
    """Phase-1 guard, before any view changes: ``(P, Q)`` for a factored delta ``P Qᵀ``,
    ``(D,)`` for a dense delta or a new value.  Every part must be finite,
    and a factored delta must not overflow when applied:
    ``max |P Qᵀ| ≤ Σ_j max|P[:, j]| · max|Q[:, j]| < OVERFLOW_GUARD``.  A failed check
    raises :class:`IllConditioned` (the update re-evaluates instead).  ``deltas`` maps
    view names to parts: ``{"S": (U_S, V_S), "beta": (new_beta,)}``."""
    for view, parts in deltas.items():
        for a in parts:
            if not np.all(np.isfinite(a)):
                raise IllConditioned(f"update of {trigger}: the delta of {view} is not finite")
        if len(parts) == 2 and parts[0].size and parts[1].size:
            with np.errstate(over="ignore", invalid="ignore"):
                bound = float(np.abs(parts[0]).max(axis=0) @ np.abs(parts[1]).max(axis=0))
            if not bound < OVERFLOW_GUARD:
                raise IllConditioned(f"update of {trigger}: the delta of {view} would overflow "
                                     f"(|ΔV| bound {bound:.3g})")


def as_matrix(x, what: str, rows=None, cols=None) -> np.ndarray:
    """A 2-D Fortran float64 copy of ``x`` (1-D arrays are columns, numbers are 1x1)."""
    if sps.issparse(x):
        x = x.toarray()
    try:
        a = np.array(x, dtype=np.float64, order="F", copy=True)
    except (TypeError, ValueError) as e:
        raise InputError(f"{what} is not a numeric array: {e}") from None
    if a.ndim == 0:
        a = a.reshape(1, 1)
    elif a.ndim == 1:
        a = a.reshape(-1, 1, order="F")
    elif a.ndim != 2:
        raise InputError(f"{what} must be a matrix (2-D), got {a.ndim} dimensions")
    if not np.all(np.isfinite(a)):
        raise InputError(f"{what} contains NaN or Inf")
    return np.asfortranarray(a)


def source_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# ------------------------------------------------------------------ base class
class TriggerModule:
    """Keeps every view of one compiled program fresh.  Generated subclasses define:

    ``PROGRAM``   program name;           ``SOURCE_HASH`` hash of the .m source + options
    ``INPUTS``    {name: (rows, cols)} sizes as Python expressions over dims ``d[...]``
    ``DYNAMIC``   names of inputs with triggers
    ``VIEWS``     {name: (rows, cols)} of the materialized views, in program order
    ``OUTPUTS``   {output name: view or input name}
    ``_evaluate(d, inputs) -> views`` and ``on_update_<X>(U, V)`` per dynamic input.
    """

    PROGRAM = ""
    SOURCE_HASH = ""
    INPUTS: Mapping[str, tuple] = {}  # name -> (rows, cols), each a name, an int or a Size
    DYNAMIC: tuple[str, ...] = ()
    VIEWS: Mapping[str, tuple] = {}
    OUTPUTS: Mapping[str, str] = {}
    #: (size, reason) of sizes the program was compiled assuming are not 1
    NOT_ONE: tuple[tuple[object, str], ...] = ()
    #: the generated module's own source text (set by the loader; used by save())
    MODULE_SOURCE = ""

    #: keyword options of the constructor; an input of the same name takes precedence
    OPTIONS = {"refresh_every": None, "check_every": None, "tolerance": 1e-6}

    def __init__(self, /, _state=None, **kwargs):
        opts = {k: kwargs.pop(k) if k in kwargs and k not in self.INPUTS else v
                for k, v in self.OPTIONS.items()}
        inputs = kwargs
        self._configure(opts)
        self.stats = {"updates": 0, "fallbacks": 0, "refreshes": 0, "trigger_seconds": 0.0}
        self.saved_meta: dict = {}
        if _state is not None:
            self.dims, self._views, self.updates = _state
            return
        self.dims = {}
        arrays = self._validate_inputs(inputs)
        self._views = self._reevaluate(arrays)
        self.updates = 0

    def _configure(self, opts: dict) -> None:
        """Apply the constructor's options (``OPTIONS`` keys) before any input is read."""
        self.refresh_every = opts["refresh_every"]
        self.check_every = opts["check_every"]
        self.tolerance = opts["tolerance"]

    # -------------------------------------------------------------- inputs
    def _validate_inputs(self, inputs: Mapping[str, object]) -> dict[str, np.ndarray]:
        missing = [n for n in self.INPUTS if n not in inputs]
        extra = [n for n in inputs if n not in self.INPUTS]
        if missing or extra:
            parts = []
            if missing:
                parts.append("missing " + ", ".join(missing))
            if extra:
                parts.append("unexpected " + ", ".join(extra))
            raise InputError(f"{self.PROGRAM}: " + "; ".join(parts),
                             hint="inputs: " + ", ".join(self.INPUTS))
        arrays = {n: as_matrix(inputs[n], f"input {n}") for n in self.INPUTS}
        self.dims = self._bind_dims(arrays)
        return arrays

    def _bind_dims(self, arrays: Mapping[str, np.ndarray]) -> dict[str, int]:
        """Bind every bare size from the inputs' shapes; check literal and compound ones."""
        dims: dict[str, int] = {}
        checks = []
        for name, shape in self.INPUTS.items():
            for axis, size in enumerate(shape):
                got = arrays[name].shape[axis]
                if isinstance(size, str):
                    if dims.setdefault(size, got) != got:
                        raise InputError(
                            f"input {name} has {('rows', 'columns')[axis]} {got}, but size "
                            f"'{size}' is {dims[size]} from another input",
                            hint=self._shapes_hint())
                else:
                    checks.append((name, axis, size, got))
        for name, axis, size, got in checks:
            try:
                want = size.value(dims) if isinstance(size, Size) else int(size)
            except KeyError:
                raise InputError(f"cannot determine the size {size_text(size)} from the "
                                 "inputs") from None
            if want != got:
                raise InputError(f"input {name} has {('rows', 'columns')[axis]} {got}, "
                                 f"expected {want}", hint=self._shapes_hint())
        for size, why in self.NOT_ONE:
            if (size.value(dims) if isinstance(size, Size) else dims.get(size)) == 1:
                raise InputError(f"{self.PROGRAM}: {why}")
        return dims

    def _shapes_hint(self) -> str:
        return "expected shapes: " + ", ".join(
            f"{n}({size_text(r)}, {size_text(c)})" for n, (r, c) in self.INPUTS.items())

    def _reevaluate(self, arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        views = dict(arrays)
        computed = self._evaluate(self.dims, arrays)
        for name, val in computed.items():
            val = np.asarray(val, dtype=np.float64)
            if val.ndim < 2:  # a constant statement such as C = 0.5
                val = val.reshape(1, -1)
            # a view that is a transpose or slice of another array (D = B') must own its
            # memory: it is updated in place
            val = np.array(val, order="F") if val.base is not None else \
                np.asfortranarray(val)
            if not np.all(np.isfinite(val)):
                raise NumericalError(f"{self.PROGRAM}: view {name} is not finite after "
                                     "evaluation", hint="check the inputs' conditioning")
            views[name] = val
        return views

    # -------------------------------------------------------------- reading
    def __getitem__(self, name: str) -> np.ndarray:
        key = self.OUTPUTS.get(name, name)
        if key not in self._views:
            raise KeyError(f"{name!r} is not an output, view or input of {self.PROGRAM} "
                           f"(outputs: {', '.join(self.OUTPUTS)})")
        out = self._views[key].view()
        out.flags.writeable = False
        return out

    def __contains__(self, name: str) -> bool:
        return name in self.OUTPUTS or name in self._views

    @property
    def outputs(self) -> dict[str, np.ndarray]:
        return {name: self[name] for name in self.OUTPUTS}

    @property
    def inputs(self) -> dict[str, np.ndarray]:
        return {name: self[name] for name in self.INPUTS}

    @property
    def views(self) -> dict[str, np.ndarray]:
        return {name: self[name] for name in self.VIEWS}

    # -------------------------------------------------------------- updating
    def update(self, name: str, U, V) -> None:
        """``name += U Vᵀ`` and bring every view up to date (two phases: all deltas are
        computed from the old views and checked before any view changes)."""
        U, V = self._validate_update(name, U, V)
        t0 = time.perf_counter()
        try:
            getattr(self, f"on_update_{name}")(U, V)
        except IllConditioned:
            # a Woodbury core is (nearly) singular: nothing was applied; re-evaluate instead
            self.reevaluate_update(name, U, V)
            self.stats["fallbacks"] += 1
        self.stats["trigger_seconds"] += time.perf_counter() - t0
        self.updates += 1
        self.stats["updates"] += 1
        self._drift_policy()

    def _validate_update(self, name: str, U, V) -> tuple[np.ndarray, np.ndarray]:
        if name not in self.INPUTS:
            raise UpdateError(f"{self.PROGRAM} has no input {name!r}",
                              hint="dynamic inputs: " + ", ".join(self.DYNAMIC))
        if name not in self.DYNAMIC:
            raise UpdateError(f"input {name} is not dynamic: the program was compiled "
                              "without a trigger for it",
                              hint="mark it with '%#linview dynamic ...'; dynamic inputs: "
                              + (", ".join(self.DYNAMIC) or "none"))
        rows, cols = self._views[name].shape
        out = []
        for what, x, n in (("U", U, rows), ("V", V, cols)):
            try:
                a = np.array(x.toarray() if sps.issparse(x) else x, dtype=np.float64,
                             order="F")
            except (TypeError, ValueError) as e:
                raise UpdateError(f"update of {name}: {what} is not numeric: {e}") from None
            if a.ndim == 1:
                a = a.reshape(-1, 1)
            if a.ndim != 2 or a.shape[0] != n:
                raise UpdateError(
                    f"update of {name}: {what} has shape {a.shape}, expected ({n}, k)",
                    hint=f"{name} is {rows}x{cols}; ΔX = U Vᵀ with U: {rows}×k, V: {cols}×k")
            if not np.all(np.isfinite(a)):
                raise UpdateError(f"update of {name}: {what} contains NaN or Inf; nothing "
                                  "was changed")
            out.append(a)
        if out[0].shape[1] != out[1].shape[1]:
            raise UpdateError(f"update of {name}: U has {out[0].shape[1]} columns but V has "
                              f"{out[1].shape[1]}; both must have rank k")
        if out[0].shape[1] == 0:
            raise UpdateError(f"update of {name}: rank 0 (U and V have no columns)")
        return out[0], out[1]

    def reevaluate_update(self, name: str, U: np.ndarray, V: np.ndarray) -> None:
        """Apply ``name += U Vᵀ`` by re-evaluating every view from the updated inputs (the
        baseline incremental maintenance is measured against, and the fallback when a
        Woodbury core is refused).  On a NumericalError the old state is kept."""
        arrays = {n: self._views[n] for n in self.INPUTS}
        arrays[name] = arrays[name] + U @ V.T
        self._views = self._reevaluate(arrays)

    def _drift_policy(self) -> None:
        if self.refresh_every and self.updates % self.refresh_every == 0:
            self.refresh()
        elif self.check_every and self.updates % self.check_every == 0:
            if self.verify() > self.tolerance:
                self.refresh()

    def refresh(self) -> None:
        """Re-evaluate every view from the current inputs."""
        arrays = {n: self._views[n] for n in self.INPUTS}
        self._views = self._reevaluate(arrays)
        self.stats["refreshes"] += 1

    def verify(self, detail: bool = False):
        """Max relative error of every view against re-evaluation from the current inputs
        (``detail=True``: a dict per view).  Costs one full re-evaluation."""
        fresh = self._evaluate(self.dims, {n: self._views[n] for n in self.INPUTS})
        errs = {}
        for name, ref in fresh.items():
            ref = np.asarray(ref, dtype=float)
            scale = max(float(np.max(np.abs(ref))) if ref.size else 0.0, 1e-300)
            errs[name] = float(np.max(np.abs(self._views[name] - ref))) / scale \
                if ref.size else 0.0
        return errs if detail else max(errs.values(), default=0.0)

    # -------------------------------------------------------------- persistence
    def save(self, path, extra: dict | None = None) -> None:
        """Write inputs, views, dims, update count and the module source to an ``.npz``,
        atomically (a temporary file renamed over ``path``).  ``extra`` is stored with
        them (plain Python literals) and comes back as ``saved_meta["extra"]``."""
        arrays = {f"view:{k}": v for k, v in self._views_for_saving().items()}
        meta = {"program": self.PROGRAM, "hash": self.SOURCE_HASH, "updates": self.updates,
                "dims": self.dims, "extra": dict(extra or {})}
        buf = io.BytesIO()
        np.savez(buf, __meta__=np.array(repr(meta)),
                 __module__=np.array(self.MODULE_SOURCE), **arrays)
        data = buf.getvalue()
        tmp = f"{path}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def _views_for_saving(self) -> dict[str, np.ndarray]:
        return self._views

    @classmethod
    def _from_saved(cls, meta: dict, views: dict[str, np.ndarray], **options):
        if meta.get("hash") != cls.SOURCE_HASH:
            raise StateError(f"the saved state was written by program {meta.get('program')!r}"
                             f" (hash {meta.get('hash')}), not by {cls.PROGRAM!r} "
                             f"(hash {cls.SOURCE_HASH})",
                             hint="restore it with the program that saved it")
        want = set(cls.INPUTS) | set(cls.VIEWS)
        if set(views) != want:
            raise StateError("the saved state does not hold the views this program needs")
        views = {k: np.asfortranarray(v.astype(np.float64)) for k, v in views.items()}
        out = cls(_state=(dict(meta["dims"]), views, int(meta["updates"])), **options)
        out.saved_meta = meta
        return out
