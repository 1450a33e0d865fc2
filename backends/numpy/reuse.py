"""Loading a program by reusing views that another load computed (NumPy backend).

Every view has a key (:mod:`linview.compiler.keys`): a digest of its definition and of the
keys of what it reads, inputs keyed by their content.  A load with ``reuse=`` (live views
of another program, or a state file) or ``store=`` (a folder of views by key) takes every
kept view whose key it finds, and computes the others, in program order, from the inputs
and the views it has (``_evaluate_some`` of the generated module).  A view that is only
evaluated to be inverted (``TRANSIENT``) is computed only when a recomputed view reads it.

Early cutoff: a recomputed view equal to a view on offer (the same content digest) takes
that view's key, so that what reads it is reused too.

A reused maintained inverse brings its probe state (:mod:`.probe`) from live views, so the
numerical guards stay as strict as after a fresh load.  Anything that cannot be keyed is
recomputed, never reused.

Modules with solve views (:mod:`.solve_module`): a sparse or stochastic input is keyed by a
digest of its CSR arrays (:func:`linview.statefile.sparse_digest`, never densified); a solve
view found by key is *taken over*: its solver is built again, warm-started from the kept
solution, and certifies its bound again from an exact residual (if that moves the
solution, what reads it gets new keys and is computed); sparse values are never on offer
(they are cheap to form again) and never stored.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from linview import statefile
from linview.backends.numpy import reuse_parts
from linview.backends.numpy import store as _store
from linview.backends.numpy.reuse_probes import (
    carry_probes,
    restore_probes,  # noqa: F401 - api.py calls reuse.restore_probes
    saved_prober,
    shape_of,
)
from linview.compiler import keys as _keys
from linview.errors import InputError, StateError


@dataclass
class Offer:
    """Views on offer by key: ``arrays`` ``{key: array}`` (not copied: the load copies what
    it takes), a ``store`` folder of views by key, ``probes`` ``{key of an inverse:
    (Prober, W name, A name)}`` of live views, and ``inputs`` ``{token: array}``: live
    inputs keyed by a token that an equal new input takes (see :func:`offer_of`)."""

    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    probes: dict[str, tuple] = field(default_factory=dict)
    inputs: dict[str, np.ndarray] = field(default_factory=dict)
    store: Path | None = None
    warn: object = None
    #: {input name: content digest} of inputs known to be a state file's own (restore)
    input_digests: dict[str, str] = field(default_factory=dict)
    #: {key of an inverse's argument: (Prober, its name)}: probe vectors seeded for it
    seeds: dict[str, tuple] = field(default_factory=dict)
    _digests: dict[str, str] = field(default_factory=dict)
    #: {id: array} read from a file for this load only, or of a module taken over: kept
    #: without a copy, once
    _private: dict[int, np.ndarray] = field(default_factory=dict)
    #: the live views whose arrays this load takes (``take_over=True``): closed after it
    taken_over: object = None

    def private(self, a) -> bool:
        """Whether ``a`` (taken from this offer) may be kept as it is: an array read from
        a file for this load, Fortran-ordered float64, not taken before."""
        return self._private.pop(id(a), None) is a and a.dtype == np.float64 \
            and a.ndim == 2 and a.flags.f_contiguous and a.flags.writeable

    def own(self, inputs: Mapping[str, object]) -> tuple[dict, frozenset[str]]:
        """The load's inputs, and the names of those it may keep without a copy: an array
        read from a state file for this load (``restore``), or an input of a module
        ``taken_over`` equal to the one given (compared here, once: that input's key then
        is the old one's token), which replaces it."""
        inputs, owned = dict(inputs), set()
        for name, a in inputs.items():
            if isinstance(a, np.ndarray) and self.private(a):
                owned.add(name)
                continue
            if not isinstance(a, np.ndarray):  # sparse: keyed by its digest, never compared
                continue
            for token, b in self.inputs.items() if self.taken_over is not None else ():
                if id(b) in self._private and isinstance(b, np.ndarray) \
                        and b.shape == np.shape(a) \
                        and np.array_equal(a, b) and self.private(b):
                    inputs[name], self.input_digests[name] = b, token
                    owned.add(name)
                    break
        return inputs, frozenset(owned)

    def same_content(self, value) -> str | None:
        """The key of a view on offer equal to ``value`` (early cutoff); only views of the
        same shape are hashed, each once (a sparse value: never)."""
        want = None
        if not isinstance(value, np.ndarray):
            return None
        for k, a in self.arrays.items():
            if a.shape != value.shape:
                continue
            want = want or statefile.content_digest(local(value))
            if k not in self._digests:
                self._digests[k] = statefile.content_digest(local(a))
            if self._digests[k] == want:
                return k
        return None

    def take(self, key: str) -> np.ndarray | None:
        if key in self.arrays:
            return local(self.arrays[key])
        if self.store is None:
            return None
        got = _store.read_entry(self.store, key, self.warn)
        if got is not None:
            self._private[id(got)] = got
        return got


def local(a):
    """``a`` on this machine: a Spark backend's distributed view collected (``to_numpy``),
    anything else as it is."""
    return a.to_numpy() if hasattr(a, "to_numpy") else a


def dense(a) -> bool:
    """Whether ``a`` is a dense view (an array here or in blocks), not a sparse value."""
    return isinstance(a, np.ndarray) or hasattr(a, "to_numpy")


def digest(a) -> str:
    """The content digest of an input or a view in its storage: a sparse or stochastic
    one (links: ``sparse_part``) by its CSR arrays (:func:`linview.statefile.sparse_digest`),
    a dense one by its values."""
    if dense(a):
        return statefile.content_digest(local(a))
    return statefile.sparse_digest(a.sparse_part() if hasattr(a, "sparse_part") else a,
                                   "stochastic" if hasattr(a, "sparse_part") else "sparse")


def module_keys(module, content=None) -> dict[str, str]:
    """``{input or view: key}`` of live views ``module``, inputs keyed by
    ``content(name, array)`` (default: the digest of their current content)."""
    program = getattr(type(module), "KEY_PROGRAM", None)
    if program is None:  # views of another kind (solve views): nothing on offer
        return {}
    views = module._views_for_saving()
    content = content or (lambda _name, a: digest(a))
    return _keys.bind(program, {d.name: _keys.input_token(content(d.name, views[d.name]),
                                                          d.dynamic)
                                for d in program.inputs})


def offer_of(old, by_identity: bool = False, take_over: bool = False) -> Offer:
    """What live views or a state file (path) offer to a load.  ``by_identity``: the
    live views' inputs are matched to the new inputs by comparing them (``inputs``),
    which reads them once instead of hashing them twice (no store: the keys are only
    compared, never kept).  ``take_over``: the load keeps the live views' arrays
    without copying them, and ``old`` is closed once it succeeds (:func:`close`)."""
    if isinstance(old, (str, Path)):
        return offer_of_saved(old, *statefile.read(old))
    inputs: dict[str, np.ndarray] = {}

    def compared(name: str, a: np.ndarray) -> str:
        if not dense(a):  # a sparse input: by its digest, never compared densely
            return digest(a)
        inputs[f"live-input:{name}"] = a
        return f"live-input:{name}"

    ks = module_keys(old, compared if by_identity else None)
    views = old._views_for_saving() if ks else {}
    views = {n: a for n, a in views.items() if dense(a)}  # sparse values: formed again
    offer = Offer({ks[n]: views[n] for n in views if n in ks}, inputs=inputs)
    if take_over and ks:
        if hasattr(old, "_ctx"):  # its blocks live in a Spark session: not handed over
            raise InputError("take_over=True hands over NumPy views only",
                             hint="reuse=views alone copies what it takes")
        offer.taken_over, offer._private = old, {id(a): a for a in views.values()}
    for w, a in getattr(getattr(old, "_prober", None), "arg_of", {}).items():
        if w in ks:
            offer.probes[ks[w]] = (old._prober, w, a)
    for a in getattr(getattr(old, "_prober", None), "seeds", {}):
        if a in ks:
            offer.seeds[ks[a]] = (old._prober, a)
    return offer


def offer_of_saved(path, meta: dict, arrays: dict, own_inputs: bool = False) -> Offer:
    """What a state file read by ``statefile.read`` offers: its views by their keys
    (taken without a copy: they were read for this load), their contents known from their
    checksums, and the probe state saved with them (:func:`saved_prober`).
    ``own_inputs``: the load's inputs are the file's (``restore``): their contents too."""
    names = meta.get("keys")
    if not isinstance(names, dict):
        raise StateError(f"{path} holds no view keys (written by an older linview)",
                         hint="restore it with the program that saved it")
    offer = Offer({k: arrays[n] for n, k in names.items() if n in arrays})
    offer._private = {id(a): a for a in offer.arrays.values()}
    for n, k in names.items():
        if n in arrays and (got := statefile.content_of(meta, n)) is not None:
            offer._digests[k] = got
            if own_inputs:
                offer.input_digests[n] = got
    # a file of a module with solve views names its arrays NAME@x, NAME@view
    plain = {n.split("@")[0]: k for n, k in names.items()}
    prober = saved_prober(path, meta, {n.split("@")[0]: a.shape[0] for n, a in arrays.items()
                                       if a.ndim == 2 and (
                                           "@" not in n or n.endswith(("@x", "@view")))},
                          True)
    for w, a in prober.arg_of.items():
        if w in plain:
            offer.probes[plain[w]] = (prober, w, a)
    offer.seeds = {plain[a]: (prober, a) for a in prober.seeds if a in plain}
    return offer


def _content(offer: Offer, name: str, a: np.ndarray) -> str:
    """Input ``name``'s content for its key: known from the state file it came from, the
    token of an equal input on offer, else its digest."""
    if name in offer.input_digests:
        return offer.input_digests[name]
    if not dense(a):
        return digest(a)
    a = local(a)
    for token, b in offer.inputs.items():
        if b.shape == a.shape and np.array_equal(a, local(b)):
            return token
    return statefile.content_digest(a)


@dataclass
class Report:
    """What a load with reuse did: views ``reused`` and ``recomputed`` (with seconds)."""

    reused: list[str] = field(default_factory=list)
    recomputed: dict[str, float] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)
    #: {recomputed view: sub-expressions of it taken by key}
    partly: dict[str, int] = field(default_factory=dict)
    #: why nothing was taken by key (a module that keeps no views by key)
    note: str = ""
    #: solve views taken over: solvers built again, warm from the kept solutions
    warm: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        done = ", ".join(f"{n} ({s * 1e3:.1f} ms"
                         + (f", {self.partly[n]} sub-expression reused" if n in self.partly
                            else "") + ")" for n, s in self.recomputed.items())
        warm = f" (solve views taken over warm: {', '.join(self.warm)})" if self.warm else ""
        return (f"reused: {', '.join(self.reused) or 'none'}{warm}; "
                f"recomputed: {done or 'none'}" + (f" ({self.note})" if self.note else ""))


def evaluate(module, arrays: Mapping[str, np.ndarray], offer: Offer, place=None) -> dict:
    """The views of ``module`` for ``arrays``: taken from ``offer`` by key, or computed.
    Sets ``module.reuse_report``.  ``place(name, array)``: a view taken from the offer as
    the module keeps it (default: a Fortran-ordered float64 copy; the Spark backend puts
    it in blocks)."""
    partial = place is None  # sub-expressions by key: NumPy views only
    place = place or (lambda _name, a: a if offer.private(a) else
                      np.array(a, dtype=np.float64, order="F"))
    known: dict[str, str] = {}  # the keys bound so far
    cls = type(module)
    program = cls.KEY_PROGRAM
    views = dict(arrays)
    report = Report()
    transient, pending = set(cls.TRANSIENT), {}
    taken: dict[str, frozenset[int]] = {}  # {view: ids of the parts taken by key}
    order = [st.name for st in program.statements]

    def compute(name: str) -> None:
        for st in program.statements:  # a transient view it reads, computed first
            if st.name == name:
                for n in st.expr.walk():
                    if n.op.value == "view" and n.attr not in views and n.attr in pending:
                        got = offer.take(pending[n.attr])
                        if got is not None and got.shape == shape_of(module, n.attr):
                            views[n.attr] = place(n.attr, got)
                            report.reused.append(n.attr)
                            pending.pop(n.attr)
                        else:
                            compute(n.attr)
        t0 = time.perf_counter()
        memo = reuse_parts.stored_parts(module, program, name, known, offer) \
            if partial and name not in solve_side else {}
        if memo:  # a product on offer inside it: the rest as the module computes it
            st = next(st for st in program.statements if st.name == name)
            report.partly[name] = len(memo)
            taken[name] = frozenset(i for n in st.expr.walk() if id(n) in memo
                                    for i in map(id, n.walk()))
            val = reuse_parts.evaluate(module, st.expr, views, memo)
            # never the offer's memory (a live view that its module updates in place)
            views[name] = np.array(val, order="F") if any(
                np.may_share_memory(val, m) for m in memo.values()) else val
        else:
            out = module._evaluate_some(module.dims, views, {name})
            if name in out:
                views[name] = out[name]
        report.recomputed[name] = time.perf_counter() - t0
        pending.pop(name, None)

    def cutoff(name: str, key: str) -> str | None:
        final = _cutoff(name, key)
        known[name] = final or key
        return final

    def _cutoff(name: str, key: str) -> str | None:
        if name in transient:
            pending[name] = key
            return None
        if name in solves:
            return _take_over(name, key)
        got = offer.take(key)
        if got is not None and got.shape == shape_of(module, name):
            views[name] = place(name, got)
            report.reused.append(name)
            return None
        compute(name)
        if name not in views:  # an inverse never formed: nothing to compare
            return None
        return offer.same_content(views[name])

    def _take_over(name: str, key: str) -> str | None:
        """A solve view: its solver built again, warm-started from the kept solution (its
        bound certified again); if that moved the solution, the views that read it get
        new keys."""
        got = offer.take(key)
        if got is None or not isinstance(got, np.ndarray) or \
                got.shape != shape_of(module, name):
            compute(name)
            return None
        module._warm[name] = got
        compute(name)
        report.recomputed.pop(name, None)
        report.reused.append(name)
        report.warm.append(name)
        same = np.array_equal(views[name], got)
        return None if same else _keys.input_token(statefile.content_digest(views[name]),
                                                   False)

    solves = set(getattr(cls, "SOLVES", ()))
    # views the solve side computes (solve views, sparse values): never through the
    # dense printer of parts taken by key
    solve_side = solves | set(getattr(cls, "SIDE", ()))
    tokens = {d.name: _keys.input_token(_content(offer, d.name, arrays[d.name]),
                                        d.dynamic)
              for d in program.inputs}
    known.update(tokens)
    report.keys = _keys.bind(program, tokens, cutoff)
    kept, computed_transient = module._kept_values(
        {n: views[n] for n in order if n in views})
    for name, val in computed_transient.items():
        module._prober.seed(name, val)
    carry_probes(module, report.reused, report.keys, offer)
    module.reuse_report = report
    if offer.taken_over is not None:
        close(offer.taken_over)
    if offer.store is not None:  # transient views too: another program may keep them
        defs = {st.name: st.expr for st in program.statements}
        worth = {report.keys[n]: local(v) for n, v in {**kept, **computed_transient}.items()
                 if dense(v) and not _store.entry_path(offer.store, report.keys[n]).exists()
                 and _store.worth_storing(defs[n], taken.get(n, frozenset()))}
        if partial and worth:  # written while the caller goes on (NumPy views)
            module._store_writes = _store.Writes(offer.store, worth)
        else:
            _store.write_entries(offer.store, worth)
    return {**dict(arrays), **kept}


def close(old) -> None:
    """``old``'s arrays now belong to another load: it becomes :class:`TakenOver`."""
    why = f"the views of {old.PROGRAM} were taken over by another load (take_over=True)"
    old.__dict__.clear()
    old.__class__ = TakenOver
    old._why = why


class TakenOver:
    """Live views whose arrays another load took over (``load(reuse=views,
    take_over=True)``): every use is refused with a :class:`StateError`."""

    _why = "these views were taken over by another load"

    def __getattribute__(self, name: str):
        if name in ("__class__", "__dict__", "_why"):
            return object.__getattribute__(self, name)
        raise StateError(object.__getattribute__(self, "_why"),
                         hint="use the views returned by the load that took them over")

    def __getitem__(self, name):
        return self.__getattribute__("__getitem__")

    def __contains__(self, name):
        return self.__getattribute__("__contains__")

    def __repr__(self) -> str:
        return f"<{object.__getattribute__(self, '_why')}>"


def split_options(prog, inputs: dict) -> tuple[dict, dict]:
    """``reuse=`` (live views, or a state file's path) and ``store=`` (a folder of views
    by key) of ``CompiledProgram.load``, apart from the inputs and turned into the
    module's ``_reuse`` offer (an input of the same name takes precedence; ``_reuse``, an
    offer made already: a state file read by ``restore``, or a specialised program's
    second try)."""
    names = {d.name for d in prog.program.inputs}
    inputs = dict(inputs)
    offer = inputs.pop("_reuse", None)
    old = inputs.pop("reuse", None) if "reuse" not in names else None
    store = inputs.pop("store", None) if "store" not in names else None
    take = bool(inputs.pop("take_over", False)) if "take_over" not in names else False
    if offer is None:
        offer = offer_of(old, by_identity=store is None, take_over=take) \
            if old is not None else Offer()
    if store is not None:
        offer.store = Path(store)
        offer.store.mkdir(parents=True, exist_ok=True)
        offer.warn = lambda msg: warnings.warn(msg, stacklevel=5)
    return inputs, {"_reuse": offer}
