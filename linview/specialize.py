"""Programs specialised to the shapes of their data (issue 14).

``compile`` without data keeps sizes symbolic.  When the sizes decide what the program
means (``if rows(X) > 3``, a 1x1 input used as a scalar, a size assumed not to be 1), the
program is compiled again for the data's shapes: every size bound, 1x1 inputs scalars.
:func:`linview.compiler.lower_language.input_shape` checks the data against pragmas and ``dims=``
while lowering (``options["compiler"]`` is :func:`linview.api.compile`, passed in);
:func:`specialize` compiles and caches by shape signature; :class:`DeferredProgram` is
what ``compile`` returns for a program that cannot be compiled before the data exists.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import scipy.sparse as sps

from linview.backends.numpy import runtime
from linview.errors import CompileError, InputError, ShapeError
from linview.frontend import syntax


@dataclass
class DeferredProgram:
    """A program whose sizes cannot be decided without data (``deferred`` says why): it
    is compiled by :meth:`load` for the shapes of the inputs given, as
    :meth:`CompiledProgram.specialize` does."""

    name: str
    deferred: str
    options: dict = field(default_factory=dict)

    def load(self, /, **inputs) -> runtime.TriggerModule:
        try:
            special = self.specialize(**inputs)
        except ShapeError as e:
            raise InputError(f"the inputs' shapes do not fit the program: {e.message}",
                             e.location, e.hint) from None
        return special.load(**inputs)  # memory_budget= passes through

    def specialize(self, /, **inputs) -> Any:  # a linview.api.CompiledProgram
        return specialize(self.options["text"], self.options, inputs)

    def _needs_data(self, *_args, **_kwargs):
        raise CompileError(f"{self.name}: {self.deferred}, so it is compiled when load() "
                           "sees the data",
                           hint="to plan before any data exists, give the sizes in a "
                           "'%#linview dims' pragma, or shapes: --shapes X=RxC,... on the "
                           "command line, specialize(X=(rows, cols), ...) in Python")

    explain = _needs_data
    plan = property(_needs_data)
    program = property(_needs_data)
    source = property(_needs_data)
    module = property(_needs_data)
    module_class = property(_needs_data)


#: specialised programs by (source, options, shape signature)
_SPECIALISED: dict[tuple, Any] = {}  # of linview.api.CompiledProgram
_SPECIALISED_MAX = 64


def is_number(value) -> bool:
    if isinstance(value, int | float | np.generic):
        return True
    return isinstance(value, np.ndarray) and value.size == 1 and value.ndim <= 2


def has_shape(value) -> bool:
    """Whether the shape of an input is known here (arrays, numbers, sparse matrices; not
    the file paths the Spark backend loads)."""
    return is_number(value) or isinstance(value, np.ndarray | tuple | list) \
        or hasattr(value, "tocsr")


def shape_of(value) -> tuple[int, int]:
    if isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return value
    shape = np.shape(value) if not hasattr(value, "tocsr") else value.shape
    if len(shape) == 0:
        return (1, 1)
    if len(shape) == 1:
        return (int(shape[0]), 1)
    if len(shape) != 2:
        raise InputError(f"inputs must be matrices (2-D), got shape {shape}")
    return (int(shape[0]), int(shape[1]))


def specialize(text: str, options: dict, inputs: dict) -> Any:  # a linview.api.CompiledProgram
    names = options["inputs"]
    missing = [n for n in names if n not in inputs]
    if missing:
        raise InputError(f"{options['name']}: missing {', '.join(missing)}",
                         hint="inputs: " + ", ".join(names))
    shapes = tuple((n, *shape_of(inputs[n])) for n in names)
    kwargs = {k: options[k] for k in ("name", "filename", "dims", "backend", "model",
                                      "strategy", "rank", "least_squares")}
    kwargs["sparse"] = {**(options.get("sparse") or {}), **given_sparse(inputs)}
    kwargs["dims"] = {**(kwargs["dims"] or {}), **counted_nnz(text, options, inputs)}
    key = (text, repr(sorted(kwargs.items(), key=str)), shapes)
    hit = _SPECIALISED.get(key)
    if hit is None:
        if len(_SPECIALISED) >= _SPECIALISED_MAX:
            _SPECIALISED.pop(next(iter(_SPECIALISED)))
        hit = _SPECIALISED[key] = options["compiler"](text, shapes=shapes, **kwargs)
    return hit


#: why an input is kept sparse without a pragma
GIVEN_SPARSE = "given as scipy.sparse at load"
NNZ_GIVEN = "its non-zeros given by nnz_{name}"


def given_sparse(inputs: dict) -> dict[str, str]:
    """The inputs given as ``scipy.sparse`` matrices (not 1x1), with the reason."""
    return {n: GIVEN_SPARSE for n, v in inputs.items()
            if sps.issparse(v) and v.shape != (1, 1)}


def with_sparse(module_ast, sparse: dict | None, nnz: dict, backend: str):
    """The program as if ``%#linview sparse X`` were written for every input in ``sparse``
    (``{input: reason}``) or with a ``nnz_X`` size, unless a pragma already says how X is
    stored (``sparse``/``stochastic`` stay as overrides).  Returns the module and the
    inputs it made sparse, with their reasons (for ``explain`` and ``cost``)."""
    sparse = dict(sparse or {})
    for key in nnz:
        sparse.setdefault(key[4:], NNZ_GIVEN.format(name=key[4:]))
    if not sparse:
        return module_ast, {}
    declared = {n for p in module_ast.pragmas if p.kind in ("sparse", "stochastic", "scalar")
                for n in p.names}
    params = set(getattr(module_ast, "params", ())) | {
        s.name for p in module_ast.pragmas if p.kind == "input" for s in p.specs}
    added = {n: why for n, why in sorted(sparse.items()) if n in params and n not in declared}
    if not added:
        return module_ast, {}
    pragma = syntax.Pragma("sparse", tuple(added))
    return replace(module_ast, pragmas=(*module_ast.pragmas, pragma)), added


def counted_nnz(text: str, options: dict, inputs: dict) -> dict[str, int]:
    """``{nnz_X: non-zeros}`` of the inputs given as ``scipy.sparse`` that no pragma
    declares: what the cost model prices a solve view by (``compiler/solve_choice.py``)."""
    from linview.frontend.parser import parse

    given = given_sparse(inputs)
    if not given:
        return {}
    declared = {n for p in parse(text, options["filename"]).pragmas
                if p.kind in ("sparse", "stochastic") for n in p.names}
    return {f"nnz_{n}": int(inputs[n].nnz) for n in sorted(given) if n not in declared}


def follow_sparse(compiled, inputs: dict):
    """``compiled`` again with its ``scipy.sparse`` inputs kept sparse (as if declared
    ``%#linview sparse``), or None when every such input is already sparse or stochastic
    Cached, like shape specialisations."""
    options = compiled.options
    asked = options.get("sparse") or {}  # already compiled for it (maybe kept dense)
    new = {d.name: GIVEN_SPARSE for d in compiled.program.inputs
           if d.storage == "dense" and not d.scalar and d.name in given_sparse(inputs)
           and d.name not in asked}
    if not new:
        return None
    kwargs = {k: options[k] for k in ("name", "filename", "dims", "backend", "model",
                                      "strategy", "rank", "least_squares")}
    kwargs["sparse"] = {**(options.get("sparse") or {}), **new}
    # their non-zeros, counted from the data: what a solve view is priced by
    kwargs["dims"] = {**(kwargs["dims"] or {}),
                      **{f"nnz_{n}": int(inputs[n].nnz) for n in sorted(new)}}
    shapes = options.get("shapes")
    if not shapes and all(has_shape(inputs.get(n)) for n in options["inputs"]):
        # the data's shapes: the cost model prices solve views at the sizes loaded
        shapes = tuple((n, *shape_of(inputs[n])) for n in options["inputs"])
    key = (options["text"], repr(sorted(kwargs.items(), key=str)), shapes, "sparse")
    hit = _SPECIALISED.get(key)
    if hit is None:
        if len(_SPECIALISED) >= _SPECIALISED_MAX:
            _SPECIALISED.pop(next(iter(_SPECIALISED)))
        hit = _SPECIALISED[key] = options["compiler"](options["text"], shapes=shapes,
                                                      **kwargs)
    return hit


def parse_shapes(values: list[str] | None) -> dict[str, tuple[int, int]]:
    """``["X=30x3,d=1x1"]`` -> ``{"X": (30, 3), "d": (1, 1)}`` (the CLI's ``--shapes``)."""
    out: dict[str, tuple[int, int]] = {}
    for chunk in values or []:
        for item in filter(None, (x.strip() for x in chunk.split(","))):
            name, _, val = item.partition("=")
            rows, _, cols = val.lower().partition("x")
            if not (name.strip().isidentifier() and rows.isdigit() and cols.isdigit()
                    and int(rows) > 0 and int(cols) > 0):
                raise CompileError(f"bad --shapes item '{item}'",
                                   hint="write shapes as NAME=ROWSxCOLS, e.g. --shapes "
                                   "X=100x5,d=1x1")
            out[name.strip()] = (int(rows), int(cols))
    return out
