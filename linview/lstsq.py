"""Which form ``load()`` keeps a least-squares problem in (issue 25).

The lowering reads ``F \\ Y`` (tall F), ``(F'*F) \\ (F'*Y)``, ``inv(F'*F) * (F'*Y)`` and
``pinv(F) * Y`` (tall F) as one least-squares problem, F an input or an intercept design
``[ones(m,1) X]`` (:mod:`linview.compiler.designs`), and keeps the normal equations
(``inv(FᵀF)`` by Woodbury), loaded with the condition limit
:data:`NORMAL_CONDITION_LIMIT` (1e8, where their answer has lost about 8 digits).  With
``least_squares="auto"`` (the default) :func:`loaded` then keeps them only where their
predicted error is within :data:`AUTO_RATIO` of ``lstsq``'s, and loads the QR form
otherwise.  When ``load()`` refuses that inverse (its condition estimate is over the
limit, or it is singular to working precision), :func:`load_instead` compiles the
program again:

1. ``least_squares="qr"``: the problem is a solve view kept by QR updates of F
   (:class:`linview.solve.solvers.CholeskySolver`), as accurate as ``lstsq``;
2. when F is rank-deficient (its triangular factor is singular to working precision) and
   the program wrote ``F \\ Y``, ``pinv(F) * Y`` or ``A \\ B`` with a non-square A,
   ``least_squares="pinv"``:
   ``pinv(A) * B``, re-evaluated, which is Octave's answer for such a system (the
   minimum-norm least-squares solution, given without a warning).  The normal-equation
   forms are refused then, with a hint to add a ridge term, as Octave calls them singular.

Each program compiled again says why in ``explain()``, and the views loaded by it in their
attribute ``least_squares``.  On Spark the same (the stable form's solver, F and Y on the
driver), but for a design F or Y above ``driver_max_elements`` (:func:`off_driver`).
"""

from __future__ import annotations

import math
import re

import numpy as np
import scipy.sparse as sps
import scipy.sparse.linalg as spla

from linview.backends.numpy.guards import INV_CONDITION_LIMIT
from linview.compiler.designs import design_of, weight_node, weight_of
from linview.compiler.ir import Op
from linview.errors import LinviewError, NumericalError

#: The normal equations lose about ``cond(FᵀF)·eps`` of relative accuracy, QR updates about
#: ``cond(F)·eps`` (``lstsq``'s).  A program that keeps least squares by the normal
#: equations is loaded with this condition limit (unless ``condition_limit=`` is given), so
#: that past it (relative error about 1e-8) the problem is kept by QR updates instead; its
#: updates then run with the usual limit (during updates the rule is applied again by
#: :mod:`linview.lstsq_switch`, which also switches instead of refusing at that limit).
NORMAL_CONDITION_LIMIT = 1e8


#: the values of ``linview.compile(..., least_squares=)``: ``auto`` (the default, the rule of
#: :func:`loaded`), ``normal`` (the normal equations unless refused), ``qr``, and ``pinv``
#: (what :func:`load_instead` compiles a rank-deficient non-square ``\\`` as)
FORMS = ("auto", "normal", "qr", "pinv")
#: ``least_squares="auto"`` keeps the normal equations only where their error is predicted
#: within this factor of ``lstsq``'s: ``κ`` (the square root of the 2-norm condition
#: estimate of FᵀF) at most this (:func:`loaded`)
AUTO_RATIO = 10.0
#: the backends with a stable form: Spark runs its solver on the driver
#: (``backends/spark/solve_module.py``), F and Y collected there
BACKENDS = ("numpy", "spark")


def _form(prog) -> str:
    return prog.options.get("least_squares", "auto")


def load_options(prog, inputs: dict) -> dict:
    """``inputs`` with the condition limit of :data:`NORMAL_CONDITION_LIMIT` added when
    ``prog`` keeps a least-squares problem by the normal equations."""
    if "condition_limit" in inputs or _form(prog) not in ("auto", "normal") \
            or prog.options.get("backend") != "numpy":  # Spark: the rule of loaded()
        # alone (a tighter limit would refuse a design F too large for its driver)
        return inputs
    if not any("normal equations" in note for note in prog.program.notes):
        return inputs
    return {**inputs, "condition_limit": NORMAL_CONDITION_LIMIT}


def loaded(views, inputs: dict, prog=None, switch: bool = True, memory_budget=None,
           extra: dict | None = None):
    """``views`` loaded with :func:`load_options`: its updates use the usual limit, and
    ``views.least_squares`` says why the normal equations were kept (the condition
    estimate of each least-squares problem's Gram matrix, and the limit).

    With ``least_squares="auto"`` (NumPy; Spark unless :func:`off_driver`) the rule of
    issue 25 is applied here: the
    normal equations lose about ``cond(FᵀF)·eps``, a QR solve (``lstsq``) about
    ``κ·eps`` with ``κ = √cond(FᵀF)``, so theirs is about κ times worse, κ from 2-norm
    estimates by power iterations (:func:`_norm2`: ``‖FᵀF‖₂`` by products with F,
    ``‖inv(FᵀF)‖₂`` with the loaded inverse).  The residual is not counted in their
    favour: ``lstsq``'s ``κ²·eps·ρ`` term is a bound it seldom reaches (with it, as
    :func:`_predicted` says, a tall 30×10 F of cond 32 and ρ ≈ 0.15 was predicted 5.4×
    and measured 16×).  Past :data:`AUTO_RATIO` for some problem, the program compiled with
    ``least_squares="qr"`` is loaded from the same inputs and returned instead (unless
    ``switch`` is false), within the same ``memory_budget`` and with the same offer of
    views (``extra``: ``reuse=``/``store=``, what :func:`linview.backends.numpy.reuse.
    split_options` made of them).  Otherwise
    (``normal``) the reason is worked out when first read: it reads the views, a second of
    a 4000×4000 load."""
    added = "condition_limit" not in inputs and hasattr(views, "condition_limit")
    if added:
        views.condition_limit = INV_CONDITION_LIMIT
    found = list(grams(prog)) if prog is not None and hasattr(views, "condition_limit") \
        else []
    if not found or not (added or _form(prog) == "auto"):
        return views
    if (far := off_driver(views, prog, found)) is not None:  # Spark: F too large there
        views.least_squares = far
        return views
    if _form(prog) != "auto" or prog.options.get("backend") not in BACKENDS:
        views.least_squares = lambda: "; ".join(
            kept_normal(views, name, F, w, _rhs_of(prog, F))[0] for name, F, w in found)
        return views
    kept = [(F, *kept_normal(views, name, F, w, _rhs_of(prog, F), auto=True))
            for name, F, w in found]
    F, _, ratio, phrase = max(kept, key=lambda k: k[2])
    if ratio > AUTO_RATIO and switch and (other := compiled_as(prog, "qr")) is not None:
        why = (f"least squares of {F} by QR updates of the factor (chosen at load(): "
               f"{phrase}, over the {AUTO_RATIO:g}× that keeps the normal equations)")
        other.options["why"] = why
        normal_class = type(views)
        spark = prog.options.get("backend") == "spark"  # (its views in the executors)
        if hasattr(views, "wait_for_store"):  # its entries written to a store folder
            views.wait_for_store()
        if not spark and isinstance(getattr(views, "_store", None), dict):  # its arrays
            views._store.clear()  # go before the stable form's: one load's peak, not two
        try:
            stable = other.load(**inputs, **(extra or {}), memory_budget=memory_budget)
        except NumericalError:  # (rare: the normal equations loaded; keep them)
            if not spark:
                views = normal_class(**load_options(prog, inputs))
                views.condition_limit = INV_CONDITION_LIMIT
        else:
            if spark:
                views.release()  # the normal equations' blocks
            stable.least_squares = why
            return stable
    views.least_squares = "; ".join(text for _, text, _, _ in kept)
    return views


def off_driver(views, prog, found) -> str | None:
    """On Spark, why the normal equations stay without the rule of :func:`loaded`: the
    design F or its Y of some problem is above ``driver_max_elements``, so the stable form
    (whose QR factor of F lives on the driver) cannot load, and the rule would collect F
    to the driver for nothing.  None on NumPy, and where F and Y fit (the rule collects
    them once, as the stable form would)."""
    ctx = getattr(views, "_ctx", None)
    if prog.options.get("backend") != "spark" or ctx is None:
        return None
    limit = ctx.driver_max_elements
    for _, F, _ in found:
        for name in (F, _rhs_of(prog, F)):
            value = views._views.get(name) if name else None
            shape = tuple(getattr(value, "shape", ()))  # never collected here
            if len(shape) == 2 and shape[0] * shape[1] > limit:
                return (f"least squares of {F} by the normal equations (explicit inverse "
                        f"maintained by Woodbury): {name} ({shape[0]}×{shape[1]}) is above "
                        f"the Spark driver limit driver_max_elements = {limit:,}, where "
                        f"the stable form keeps its QR factor, so the rule of "
                        f"least_squares='auto' is not applied and the inverse's condition "
                        f"limit {views.condition_limit:.3g} holds")
    return None


def _rhs_of(prog, F: str) -> str | None:
    """Y of the least-squares problem of F, as the lowering's note names it."""
    for note in prog.program.notes:
        if (found := re.search(rf"least squares of {re.escape(F)} and (\w+)", note)):
            return found.group(1)
    return None


def kept_normal(views, inverse: str, F: str, w: str | None = None,
                 Y: str | None = None, auto: bool = False) -> tuple[str, float, str]:
    """Why the normal equations of ``F`` were kept: the 1-norm condition estimate of FᵀF
    (``‖FᵀF‖₁`` estimated by products with F, ``‖inv(FᵀF)‖₁`` read from the view); with
    weights w, of ``Fᵀ diag(w) F``; with Y, the predicted error against lstsq's
    (:func:`_predicted`; without Y, or with ``auto``, that of a consistent system: the
    worst case).  Also the ratio of the predicted errors (0 where unknown) and a phrase
    for it."""
    G = f"{F}ᵀ{F}" if w is None else f"{F}ᵀ·diag({w})·{F}"
    what = (f"least squares of {F} by the normal equations (explicit inverse inv({G}) "
            f"maintained by Woodbury)")
    try:
        f, W = views[F], np.asarray(views[inverse])
        f = f if sps.issparse(f) else np.asarray(f, dtype=float)  # products only
        d = np.ones(f.shape[0]) if w is None else _dense(views[w]).ravel()
    except KeyError:  # a view the module need not keep (the inverse is re-evaluated)
        return (f"{what}: the condition estimate of {G} at load() was under the limit "
                f"{NORMAL_CONDITION_LIMIT:.3g}", 0.0, "")

    def apply(x):  # Fᵀ D F x, for a vector or a column
        return f.T @ ((d if np.ndim(x) == 1 else d[:, None]) * (f @ x))

    gram = spla.LinearOperator((f.shape[1],) * 2, matvec=apply, rmatvec=apply, dtype=float)
    norm = spla.onenormest(gram)
    cond = norm * float(np.abs(W).sum(axis=0).max())
    why = (f"{what}: the condition estimate of {G} is {cond:.3g}, under the limit "
           f"{NORMAL_CONDITION_LIMIT:.3g} past which load() keeps it by QR updates of {F}")
    try:
        y = _dense(views[Y]).reshape(f.shape[0], -1) if Y else None
    except KeyError:
        y = None
    if y is None and not auto:
        return why, 0.0, ""
    if y is not None:
        normal, qr, _ = _predicted(f, d, W, y, norm, cond)
        why += (f"; predicted relative error about {normal:.1g} against lstsq's {qr:.1g} "
                f"({normal / qr:.2g}×)")
    if not auto:
        return why, 0.0, ""
    kappa = math.sqrt(_norm2(apply, f.shape[1]) * _norm2(lambda x: W @ x, f.shape[1]))
    phrase = kappa_phrase(kappa, G)
    return why + f"; {phrase}, within the {AUTO_RATIO:g}× that keeps them", kappa, phrase


def kappa_phrase(kappa: float, G: str) -> str:
    return (f"the normal equations' error is about κ = {kappa:.3g} times lstsq's "
            f"(κ² = {kappa * kappa:.3g}, the 2-norm condition estimate of {G} by power "
            "iterations)")


def kappa_of(views, inverse: str, F: str, w: str | None = None) -> float | None:
    """The rule's ``κ`` of one problem as :func:`kept_normal` estimates it with ``auto``
    (the same power iterations), read from the views in place (no copies: the check of
    :mod:`linview.lstsq_switch` during updates); None where the inverse is not kept."""
    try:
        f, W = views._view(F), views._view(inverse)
        d = None if w is None else _dense(views._view(w)).ravel()
    except KeyError:
        return None
    n = f.shape[1]

    def apply(x):  # Fᵀ D F x
        y = f @ x
        return f.T @ (y if d is None else d * y)

    return math.sqrt(_norm2(apply, n) * _norm2(lambda x: W @ x, n))


def _dense(a) -> np.ndarray:
    """A view's values as a float array (a ``scipy.sparse`` one made dense: a vector or a
    thin matrix here)."""
    return np.asarray(a.toarray() if sps.issparse(a) else a, dtype=float)


def _norm2(apply, n: int, steps: int = 16) -> float:
    """The 2-norm of a symmetric positive semi-definite operator by power iterations from
    a fixed random start (an estimate from below: rough, within a few per cent for the
    spectra of the tests and benchmarks)."""
    v = np.random.default_rng(0).standard_normal(n)
    norm = 0.0
    for _ in range(steps):
        v = apply(v)
        norm = float(np.linalg.norm(v))
        if norm == 0.0 or not np.isfinite(norm):
            return norm
        v /= norm
    return norm


def _predicted(f, d, W, y, norm: float, cond: float) -> tuple[float, float, bool]:
    """The normal equations' predicted relative error, ``cond(FᵀF)·eps``, against that of
    a QR solve (``lstsq``), ``κ·eps + κ²·eps·ρ`` with ``κ = √cond`` and
    ``ρ = ‖r‖ / (‖F‖ ‖x‖)`` of the current answer (``‖F‖ ≈ √‖FᵀF‖₁``): the two agree to
    10× when the residual is large (ρ ≥ 0.1) or κ ≤ 10, and the normal equations are up to
    κ times worse for a small residual.  Estimates from 1-norm bounds: rough.  Without
    ``y`` (None), ρ = 0 (a consistent system: the worst case for the normal equations).
    Also whether ρ was measured."""
    eps = float(np.finfo(float).eps)
    rho = 0.0
    if y is not None:
        x = W @ (f.T @ (d[:, None] * y))
        r = np.sqrt(d)[:, None] * (y - f @ x)
        xs = np.linalg.norm(x, axis=0)
        rho = float(np.min(np.linalg.norm(r, axis=0)[xs > 0] / (np.sqrt(norm) * xs[xs > 0]),
                           initial=np.inf))
    kappa = np.sqrt(cond)
    normal, qr = cond * eps, kappa * eps + (cond * eps * rho if np.isfinite(rho) else 0.0)
    return normal, qr, y is not None


def load_instead(prog, refused: NumericalError, inputs: dict, memory_budget=None,
                 extra: dict | None = None):
    """The live views of ``prog``'s data by the first form that loads, or ``refused``;
    ``views.least_squares`` (and ``explain()`` of the program compiled again) say which
    form and why.  ``extra``: the load's offer of views (``reuse=``/``store=``)."""
    opts = prog.options
    F = refused_gram(prog, refused)
    if _form(prog) not in ("auto", "normal") or opts.get("backend") not in BACKENDS \
            or F is None or getattr(refused, "floating_point", None):
        raise refused  # (values past float64's range: no other form mends that)
    reason = refusal(refused, F, refused_weight(prog, refused))
    error = refused
    for form in ("qr", "pinv"):
        other = compiled_as(prog, form)
        if other is None:
            continue
        if form == "qr":
            why = (f"least squares of {F} by QR updates of the factor (the normal equations "
                   f"were refused: {reason})")
        else:
            why = (f"minimum-norm least squares of {F} by pinv, re-evaluated on every update "
                   f"(the normal equations were refused: {reason}"
                   + (f"; the triangular factor of {F}: {error.message}"
                      if error is not refused else "")
                   + f"; Octave answers {F} \\ Y with the minimum-norm solution)")
        other.options["why"] = why
        try:
            views = other.load(**inputs, **(extra or {}), memory_budget=memory_budget)
        except NumericalError as e:
            error = e
            continue
        views.least_squares = why
        return views
    raise error


def refusal(refused: NumericalError, F: str, w: str | None = None) -> str:
    """The refusal of ``inv(FᵀF)`` in words: the condition estimate and the limit."""
    found = re.search(r"condition estimate is (\S+), over the limit (\S+)", refused.message)
    if found:
        cond, limit = found.groups()
        G = f"{F}ᵀ{F}" if w is None else f"{F}ᵀ·diag({w})·{F}"
        return (f"the condition estimate of {G} is {cond}, over the limit {limit} "
                f"(the normal equations' answer would lose about cond·eps of relative "
                f"accuracy, QR updates about sqrt(cond)·eps)")
    if "singular to working precision" in refused.message:
        return f"{F}ᵀ{F} is singular to working precision"
    return refused.message


def compiled_as(prog, form: str):
    """``prog`` compiled with ``least_squares=form``, or None where that changes nothing."""
    opts = prog.options
    try:
        other = opts["compiler"](opts["text"], opts["name"], filename=opts["filename"],
                                 dims=opts["dims"] or None, model=opts["model"],
                                 backend=opts.get("backend", "numpy"),
                                 strategy=opts["strategy"], rank=opts["rank"],
                                 shapes=opts["shapes"], least_squares=form)
    except LinviewError:
        return None
    program = getattr(other, "lowered", None)
    if program is None:  # deferred: compiled at its load (no data yet)
        return None
    op = Op.SOLVE if form == "qr" else Op.PINV
    if form == "qr" and any(n.op is Op.INV for st in program.statements
                            for n in st.expr.walk()):
        return None  # solve views evaluate other inverses without the condition guard
    count = sum(1 for st in program.statements for n in st.expr.walk() if n.op is op)
    before = sum(1 for st in prog.lowered.statements for n in st.expr.walk() if n.op is op)
    return other if count > before else None


def grams(prog) -> list[tuple[str, str, str | None]]:
    """``(inverse view, F, w)`` for each ``inv(FᵀF)``, or ``inv(Fᵀ diag(w) F)`` (weighted;
    else w is None), of a design F in ``prog``."""
    views = {st.name: st.expr for st in prog.lowered.statements}
    out = []
    for name, expr in views.items():
        if expr.op is not Op.INV:
            continue
        arg = expr.children[0]
        arg = views.get(arg.attr, arg) if arg.op is Op.VIEW else arg
        if arg.op is Op.MUL:
            ft, f = arg.children
            weight = weight_node(ft, ft, views)  # Fᵀ·diag(w): weighted
            ft = ft.children[0] if weight is not None else ft
            if ft.op is Op.T and ft.children[0] is f and f.op in (Op.INPUT, Op.VIEW) and \
                    design_of(views.get(f.attr, f) if f.op is Op.VIEW else f) is not None:
                out.append((name, f.attr, weight_of(weight) if weight is not None else None))
    return out


def refused_weight(prog, refused: NumericalError) -> str | None:
    """The weights of the refused Gram matrix (``Fᵀ diag(w) F``), or None."""
    return next((w for name, _, w in grams(prog) if f"cannot invert {name}:" in
                 refused.message), None)


def refused_gram(prog, refused: NumericalError) -> str | None:
    """F when the inverse ``refused`` names is that of a Gram matrix ``FᵀF`` (the normal
    equations) of a design F: an input, or a view ``[ones(m,c) X ...]`` of inputs
    (:func:`linview.compiler.designs.design_of`), not some other inverse of the program;
    else None."""
    for name, F, _ in grams(prog):
        if f"cannot invert {name}:" in refused.message:
            return F
    return None
