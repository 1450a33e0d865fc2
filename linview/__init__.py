"""linview: an incremental linear-algebra compiler.

Write a linear-algebra program as a GNU Octave function file, say which inputs change,
and linview compiles it into a *trigger module* that keeps every result fresh under
low-rank updates of those inputs (ΔX = U·Vᵀ), following LINVIEW (Nikolic, Elseidy and
Koch, SIGMOD 2014; Nikolic, *Efficient Incremental Data Analysis*, EPFL 2016, ch. 6)::

    import linview
    prog = linview.compile_file("examples/ols.m", backend="numpy")
    views = prog.load(X=X, Y=Y)
    views.update("X", u, v)          # X += u vᵀ, every view maintained incrementally
    views["beta"]
"""

from linview._layout import register_source_subpackages as _register

_register()

from linview.errors import (  # noqa: E402
    BackendError,
    CompileError,
    InputError,
    LinviewError,
    MemoryBudgetError,
    NumericalError,
    ParseError,
    ShapeError,
    StateError,
    UpdateError,
)
from linview.version import __version__  # noqa: E402

__all__ = [
    "BackendError", "CompileError", "InputError", "LinviewError", "MemoryBudgetError",
    "NumericalError",
    "ParseError", "ShapeError", "StateError", "UpdateError",
    "compile", "compile_file", "restore", "__version__",
]


def __getattr__(name):
    # The compiler pulls in sympy and lark; import it only when asked for.
    if name in ("compile", "compile_file", "restore", "CompiledProgram"):
        from linview import api

        return getattr(api, name)
    raise AttributeError(f"module 'linview' has no attribute {name!r}")
