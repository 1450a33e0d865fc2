"""Randomized residual probes of maintained inverses (NumPy backend).

Every view ``W = inv(A)`` that a trigger maintains by Woodbury's identity is checked in
phase 1 of that trigger, before any view changes, at the cost of one pass over ``W``:

* the module keeps a random probe vector ``z`` (n×1, standard normal) and its images
  ``a = A z`` and ``w = W z``, which a trigger updates in O(n·k) from the deltas of
  ``A`` and ``W`` (``a' = a + P (Qᵀ z)``);
* ``W a'`` is one matrix-vector product over the old ``W`` (one more column would make
  it a gemm, which OpenBLAS runs about 3× slower); with ``W``'s delta it gives ``W' a'``
  in O(n·k) more;
* the relative residual ``ρ = ‖W' a' − z‖ / ‖z‖`` of the updated inverse bounds its
  normwise relative error, since ``W − A⁻¹ = A⁻¹ (A W − I)``;
* ``κ = max(√n ‖a'‖ ‖w'‖ / ‖z‖², ‖A'[:, i]‖ ‖W'[:, j]‖)`` estimates the condition
  number of ``A'``: the first term is the randomized estimate, the second a lower bound
  of ``‖A'‖ ‖W'‖`` from the columns the update changes most (O(n·k)), so that a huge
  low-rank update cannot hide from a probe vector nearly orthogonal to it.

The probe fails when ``κ`` exceeds the module's ``condition_limit`` or when ``ρ``
exceeds ``max(probe_tolerance, PROBE_GROWTH · ε · κ)`` (a fresh inversion is accurate
to about ``ε κ``, so a maintained inverse may be ``PROBE_GROWTH`` times worse than
that, and never worse than ``probe_tolerance``).  A failed probe raises
:class:`~.guards.ProbeFailed`: the update is applied without maintaining that inverse,
and its chain is re-evaluated from the updated inputs (:mod:`.fallback`), where
``rt.inv`` refuses a matrix over the condition limit with a
:class:`~linview.errors.NumericalError` (nothing changed).

The views may be any matrices with ``@`` (the Spark backend's ``DistMatrix``): the probe
only multiplies them by n×1 vectors, and takes a column as a product with ``e_j``.

``z`` is drawn afresh after every re-evaluation and every ``RENEW_EVERY`` updates (one
extra pass over ``A``), which also resets the rounding ``a`` accumulates.
"""

from __future__ import annotations

import math
import time

import numpy as np

from linview.backends.numpy.guards import ProbeFailed
from linview.backends.numpy.kernels import matmul

EPS = float(np.finfo(float).eps)
#: a maintained inverse may have PROBE_GROWTH times the residual of a fresh inversion
PROBE_GROWTH = 100.0
#: updates between fresh probe vectors
RENEW_EVERY = 256


def _operand(M):
    """A delta's matrix as something with ``@``: an ndarray (2-D) or a backend's matrix
    (a Spark ``DistMatrix``), never collected."""
    return M if getattr(M, "ndim", 0) == 2 else np.atleast_2d(np.asarray(M, dtype=float))


def _column(M, j: int):
    """Column ``j`` of ``M`` (n×1): a slice of an ndarray; for any other matrix (a Spark
    ``DistMatrix``) its product with ``e_j``, which reads only the blocks holding it."""
    if isinstance(M, np.ndarray):
        return M[:, j:j + 1]
    if hasattr(M, "column"):  # a view with pending low-rank terms (lowrank.Pending)
        return M.column(j)
    e = np.zeros((M.shape[1], 1))
    e[j] = 1.0
    return M @ e


def _image(delta, old: np.ndarray, vec: np.ndarray) -> np.ndarray:
    """``(M + ΔM) vec`` from ``old = M vec`` and a trigger's delta of M: ``None``
    (unchanged), ``("outer", P, Q)``, ``("dense", D)`` or ``("new", M')``."""
    if delta is None:
        return old
    kind = delta[0]
    if kind == "outer":
        return old + delta[1] @ (delta[2].T @ vec)
    if kind == "dense":
        return old + _operand(delta[1]) @ vec
    return _operand(delta[1]) @ vec


def _column_norm(M, delta) -> float:
    """``‖(M + ΔM)[:, j]‖`` for the column ``j`` the delta changes most (the row of
    largest norm of ``Q`` in ``ΔM = P Qᵀ``, else column 0): a lower bound of ``‖M + ΔM‖₂``
    that a huge low-rank update cannot escape, in O(n·k)."""
    kind = delta[0] if delta is not None else None
    if M is None and kind != "new":  # a view that is not kept: only the randomized estimate
        return 0.0
    if kind == "outer":
        j = int(np.argmax(np.abs(delta[2]).sum(axis=1))) if delta[2].size else 0
        return _norm(_column(M, j) + delta[1] @ delta[2][j:j + 1].T)
    if kind == "dense":
        return _norm(_column(M, 0) + _column(_operand(delta[1]), 0))
    if kind == "new":
        return _norm(_column(_operand(delta[1]), 0))
    return _norm(_column(M, 0))


def _delta_norm(delta) -> float:
    """An upper bound of ``‖ΔM‖_F``."""
    if delta is None:
        return 0.0
    if delta[0] == "outer":
        return _norm(delta[1]) * _norm(delta[2])
    return _norm(delta[1])


def _column_norm_unkept(norm_bound: float, delta) -> float:
    """``‖(M + ΔM)[:, j]‖ ≥ ‖ΔM[:, j]‖ − ‖M‖_F`` for the column the delta changes most, when
    M itself is not kept (only an upper bound of its norm is): what keeps a huge update
    visible to the condition estimate."""
    if delta is None or delta[0] != "outer" or not delta[2].size:
        return 0.0
    j = int(np.argmax(np.abs(delta[2]).sum(axis=1)))
    return max(0.0, _norm(delta[1] @ delta[2][j:j + 1].T) - norm_bound)


def _norm(x: np.ndarray) -> float:
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.linalg.norm(x))


class Prober:
    """The probe state of one trigger module: ``{inverse view: (z, A z, W z)}``, with
    the states a running trigger computed, committed only when the trigger completes."""

    def __init__(self, seed: int | None = None):
        self.rng = np.random.default_rng(seed)
        self.states: dict[str, tuple[np.ndarray, ...]] = {}
        self.pending: dict[str, tuple[np.ndarray, ...]] = {}
        self.last: dict[str, dict[str, float]] = {}
        self.arg_of: dict[str, str] = {}  # inverse view -> the view it inverts
        self.seeds: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # A -> (z, A z)
        #: views not kept: an upper bound of ‖A‖_F (committed, and of the running trigger)
        self.norms: dict[str, float] = {}
        self.pending_norms: dict[str, float] = {}
        #: inverses not probed in the running trigger (their chain is re-evaluated after it)
        self.skip: frozenset[str] = frozenset()
        #: {inverse: A' z} handed to the running trigger to multiply in its pass over W
        self.riders: dict[str, np.ndarray] = {}

    def reset(self, keep: frozenset[str] = frozenset()) -> None:
        """Forget the probe vectors (after the views were re-evaluated), except those of
        inverses of the views in ``keep``: views no trigger keeps (``TRANSIENT``), whose
        images ``A z`` can only be carried forward, not recomputed."""
        self.states = {w: s for w, s in self.states.items() if self.arg_of.get(w) in keep}
        self.pending.clear()
        self.pending_norms.clear()

    def discard(self) -> None:
        """Drop what a trigger that did not complete computed."""
        self.pending.clear()
        self.pending_norms.clear()
        self.riders.clear()

    def rider(self, W_name: str, A_name: str, dA) -> np.ndarray | None:
        """``A' z``, the vector this trigger's probe of ``W = inv(A)`` multiplies by the
        old W, when it is known before the trigger's own pass over W (a probe vector is
        kept, or was seeded when A was last evaluated); None when the probe draws a fresh
        vector and makes its own passes."""
        state = self.states.get(W_name)
        if state is not None:
            z, a = state[0], state[1]
        elif A_name in self.seeds:
            z, a = self.seeds[A_name]
        else:
            return None
        with np.errstate(over="ignore", invalid="ignore"):
            vec = _image(dA, a, z)
        self.riders[W_name] = vec
        return vec

    def forget(self, inverses) -> None:
        """Forget the probe vectors of ``inverses`` (re-evaluated: the next probe draws a
        fresh one, or uses the vector seeded when their argument was evaluated)."""
        for w in inverses:
            self.states.pop(w, None)
            self.pending.pop(w, None)

    def seed(self, A_name: str, Am: np.ndarray) -> None:
        """A fresh probe vector for the inverse of ``A``, drawn while ``A`` is at hand (at
        re-evaluation, for a view that is not kept afterwards)."""
        z = self.rng.standard_normal((Am.shape[0], 1))
        self.seeds[A_name] = (z, matmul(Am, z))
        # then kept as an upper bound of ‖A‖_F (a Spark DistMatrix computes its own)
        self.norms[A_name] = Am.norm() if hasattr(Am, "norm") else _norm(Am)

    def commit(self) -> None:
        self.states.update(self.pending)
        self.pending.clear()
        self.norms.update(self.pending_norms)
        self.pending_norms.clear()

    def check(self, W_name: str, A_name: str, Wm: np.ndarray, Am: np.ndarray, dA, dW,
              tolerance: float, condition_limit: float, Wa=None) -> str | None:
        """Probe ``W = inv(A)`` across one trigger (``dA``, ``dW`` as for :func:`_image`);
        the reason when it fails, else None (and the new state is pending).  ``Wa``: the
        old W times :meth:`rider`'s vector, computed by the trigger in its pass over W."""
        rider = self.riders.pop(W_name, None)
        n = Wm.shape[0]
        self.arg_of[W_name] = A_name
        state = self.states.get(W_name)
        if state is None and Am is None:  # A is not kept: the vector drawn when it was
            if A_name not in self.seeds:
                return None  # nothing to probe against until the next re-evaluation
            z, a = self.seeds[A_name]
            w = matmul(Wm, z)
        elif state is None:  # a fresh probe vector: one pass over A and one over W
            z = self.rng.standard_normal((n, 1))
            a, w = matmul(Am, z), matmul(Wm, z)
        else:
            z, a, w = state
        with np.errstate(over="ignore", invalid="ignore"):
            a_new = _image(dA, a, z)
            w_new = _image(dW, w, z)
            if dW is not None and dW[0] == "new":
                wa_new = _image(dW, a_new, a_new)
            elif Wa is not None and rider is not None and Wa.shape == a_new.shape \
                    and np.array_equal(rider, a_new):
                wa_new = _image(dW, Wa, a_new)  # the trigger's pass over W computed W a'
            else:
                wa_new = _image(dW, matmul(Wm, a_new), a_new)
        nz = _norm(z)
        rho = _norm(wa_new - z) / nz
        with np.errstate(over="ignore", invalid="ignore"):
            if Am is None and A_name in self.norms:  # not kept: bound ‖A'‖ from its delta
                a_col = _column_norm_unkept(self.norms[A_name], dA)
                self.pending_norms[A_name] = self.norms[A_name] + _delta_norm(dA)
            else:
                a_col = _column_norm(Am, dA)
            kappa = max(math.sqrt(n) * _norm(a_new) * _norm(w_new) / nz ** 2,
                        a_col * _column_norm(Wm, dW))
        allowed = max(tolerance, PROBE_GROWTH * EPS * kappa)
        self.last[W_name] = {"residual": rho, "condition": kappa, "allowed": allowed}
        if not kappa <= condition_limit:
            return (f"{W_name} = inv({A_name}) would have condition estimate {kappa:.2g} "
                    f"(limit {condition_limit:.2g})")
        if not rho <= allowed:
            return (f"the maintained {W_name} = inv({A_name}) has probe residual "
                    f"{rho:.2g} (allowed {allowed:.2g})")
        self.pending[W_name] = (z, a_new, w_new)
        return None


def rider(module, W_name: str, A_name: str, dA) -> np.ndarray:
    """What a generated trigger multiplies by W in its fused pass over it for the probe
    of ``W = inv(A)`` (:meth:`Prober.rider`); a block of no columns when there is none."""
    vec = None
    if module.probe and W_name not in module._prober.skip:
        vec = module._prober.rider(W_name, A_name, dA)
    return np.zeros((module._current(W_name).shape[0], 0)) if vec is None else vec


def probe(module, W_name: str, A_name: str, dA, dW, Wa=None) -> None:
    """Phase-1 probe of ``W = inv(A)`` for a :class:`~.runtime.TriggerModule`;
    raises :class:`~.guards.ProbeFailed` (re-evaluate W's chain instead) when it fails.
    ``Wa``: the old W times :func:`rider`'s vector, from the trigger's pass over W."""
    if W_name in module._prober.skip:
        return
    if not module.probe:
        module._prober.reset()  # the views change unprobed: the images go stale
        return
    t0 = time.perf_counter()
    why = module._prober.check(W_name, A_name, module._current(W_name),
                               module._current(A_name), dA, dW,
                               module.probe_tolerance, module.condition_limit,
                               Wa if Wa is not None and Wa.shape[1] else None)
    module.stats["probe_seconds"] += time.perf_counter() - t0
    last = module._prober.last.get(W_name)
    if last is not None:  # what `linview run`'s status line shows
        module.last_check = {"by": "probe", "error": last["residual"], "ok": why is None,
                             "at": time.time()}
    if why is not None:
        module.stats["probe_failures"] += 1
        raise ProbeFailed(W_name, why)


# ---------------------------------------------------------------- in state files
def saved(prober: Prober) -> tuple[dict[str, np.ndarray], dict]:
    """The committed probe state as a state file keeps it: its vectors (``state:W:z``,
    ``state:W:a``, ``state:W:w`` per inverse, ``seed:A:z``, ``seed:A:a`` per seeded
    argument) and a JSON part (``arg_of``, ``norms``), so that a restored inverse is
    probed at its next update as the saved one would have been."""
    arrays: dict[str, np.ndarray] = {}
    for w, vecs in prober.states.items():
        arrays.update({f"state:{w}:{p}": v for p, v in zip("zaw", vecs, strict=True)})
    for a, vecs in prober.seeds.items():
        arrays.update({f"seed:{a}:{p}": v for p, v in zip("za", vecs, strict=True)})
    return arrays, {"arg_of": dict(prober.arg_of),
                    "norms": {k: float(v) for k, v in prober.norms.items()}}


def restore(prober: Prober, doc, arrays: dict[str, np.ndarray], rows: dict[str, int],
            seeds_checked_later: bool = False) -> None:
    """Put the probe state :func:`saved` wrote back into ``prober``; ``rows``: the row
    count of every view (an inverse's argument has the inverse's).  A state that does not
    fit them is a :class:`~linview.errors.StateError` (never used).
    ``seeds_checked_later``: a seed of a view ``rows`` does not name is kept as it is
    (its user checks it: :func:`.reuse` against the program that takes it)."""
    from linview.errors import StateError

    if doc is None:  # written before probe states were saved: probes start afresh
        return
    bad = StateError("the saved probe state does not fit the program's views")
    arg_of = doc.get("arg_of") if isinstance(doc, dict) else None
    if not isinstance(arg_of, dict) or not isinstance(doc.get("norms"), dict) or not all(
            isinstance(w, str) and w in rows and isinstance(a, str) for w, a in arg_of.items()):
        raise bad
    rows = {**rows, **{a: rows[w] for w, a in arg_of.items()}}
    states: dict[str, dict] = {}
    seeds: dict[str, dict] = {}
    for key, v in arrays.items():
        kind, name, part = (key.split(":") + ["", ""])[:3]
        lenient = seeds_checked_later and kind == "seed" and name not in rows
        if kind not in ("state", "seed") or not lenient and (
                name not in rows or v.shape != (rows[name], 1)):
            raise bad
        (states if kind == "state" else seeds).setdefault(name, {})[part] = v
    if any(set(s) != set("zaw") or w not in arg_of for w, s in states.items()) \
            or any(set(s) != set("za") for s in seeds.values()) \
            or not all(isinstance(v, float) for v in doc["norms"].values()):
        raise bad
    prober.states = {w: tuple(np.array(s[p]) for p in "zaw") for w, s in states.items()}
    prober.seeds = {a: tuple(np.array(s[p]) for p in "za") for a, s in seeds.items()}
    prober.arg_of, prober.norms = dict(arg_of), dict(doc["norms"])
