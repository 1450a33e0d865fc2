"""The sizes of a program bound from its inputs' shapes (what ``load()`` checks first)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from linview.backends.numpy.kernels import Size, size_text
from linview.errors import InputError


def bind(module, arrays: Mapping[str, np.ndarray]) -> dict[str, int]:
    """``{size: value}``: every bare size of ``module.INPUTS`` bound from the shapes of
    ``arrays``; literal and compound sizes (``Size``) and ``NOT_ONE`` checked."""
    dims: dict[str, int] = {}
    checks = []
    for name, shape in module.INPUTS.items():
        for axis, size in enumerate(shape):
            got = arrays[name].shape[axis]
            if isinstance(size, str):
                if dims.setdefault(size, got) != got:
                    raise InputError(
                        f"input {name} has {('rows', 'columns')[axis]} {got}, but size "
                        f"'{size}' is {dims[size]} from another input", hint=hint(module))
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
                             f"expected {want}", hint=hint(module))
    for size, why in module.NOT_ONE:
        if (size.value(dims) if isinstance(size, Size) else dims.get(size)) == 1:
            raise InputError(f"{module.PROGRAM}: {why}")
    return dims


def hint(module) -> str:
    """The shapes the program expects, for an error message."""
    return "expected shapes: " + ", ".join(
        f"{n}({size_text(r)}, {size_text(c)})" for n, (r, c) in module.INPUTS.items())
