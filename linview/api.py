"""The public API: ``compile``/``compile_file`` → :class:`CompiledProgram` → ``load``.

::

    prog = linview.compile_file("examples/ols.m", dims={"n": 1000}, backend="numpy")
    views = prog.load(X=X, Y=Y)
    views.update("X", U, V)
    views["beta"], views.outputs, views.verify(), views.refresh()
    views.save("state.npz"); views = linview.restore("state.npz")
"""

from __future__ import annotations

import ast as pyast
import builtins
import importlib
import sys
import types
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from linview.backends.numpy import runtime
from linview.compiler.cost import choose_model, strategy_chooser
from linview.compiler.delta import STRATEGIES, Strategy, TriggerOptions
from linview.compiler.ir import Op
from linview.compiler.lower import Options, lower
from linview.compiler.plan import Plan, make_plan
from linview.errors import CompileError, LinviewError, StateError
from linview.frontend.parser import parse

BACKENDS = ("numpy", "spark")


def parse_model(model: str) -> Options:
    """``exp``, ``linear``, ``skip=S`` (or ``skip`` for s = 4)."""
    if model.startswith("skip"):
        _, _, s = model.partition("=")
        try:
            skip = int(s) if s else 4
        except ValueError:
            skip = 0
        if skip < 2:
            raise CompileError(f"bad skip size in model '{model}'",
                               hint="write e.g. --model skip=4 (s >= 2)")
        return Options(model="skip", skip=skip)
    if model not in ("exp", "linear"):
        raise CompileError(f"unknown iterative model '{model}'",
                           hint="valid models: exp, linear, skip=S, auto")
    return Options(model=model)


def parse_strategy(strategy) -> TriggerOptions:
    """``None`` (cost-based), one strategy name for every view, or ``{view: name}``."""
    def one(s) -> Strategy:
        if isinstance(s, Strategy):
            return s
        if s not in STRATEGIES:
            raise CompileError(f"unknown strategy '{s}'",
                               hint="valid strategies: " + ", ".join(STRATEGIES))
        return Strategy(s)

    if strategy is None or strategy == "auto":
        return TriggerOptions()
    if isinstance(strategy, dict):
        return TriggerOptions(strategies={k: one(v) for k, v in strategy.items()})
    return TriggerOptions(default=one(strategy))


@dataclass
class CompiledProgram:
    """A compiled program: its IR plan, the generated module text and its class."""

    name: str
    plan: Plan
    backend: str
    source: str
    module: types.ModuleType = field(repr=False)
    options: dict = field(default_factory=dict)
    lowered: object = field(default=None, repr=False)  # the program as lowered, pre-passes

    @property
    def program(self):
        return self.plan.program

    @property
    def module_class(self) -> type:
        return getattr(self.module, self.plan.class_name)

    def load(self, /, **inputs) -> runtime.TriggerModule:
        """Evaluate every view from ``inputs`` and return the live views object."""
        return self.module_class(**inputs)

    def explain(self, after: str | None = None) -> str:
        from linview.compiler.explain import explain

        return explain(self, after=after)


def load_module(source: str, name: str) -> types.ModuleType:
    """Import generated module text as a module object (not written anywhere)."""
    modname = f"linview_generated_{name}_{runtime.source_hash(source)}"
    if modname in sys.modules:
        return sys.modules[modname]
    module = types.ModuleType(modname)
    module.__file__ = f"<linview:{name}>"
    exec(builtins.compile(source, module.__file__, "exec"), module.__dict__)  # noqa: S102
    for obj in module.__dict__.values():
        if isinstance(obj, type) and issubclass(obj, runtime.TriggerModule):
            obj.MODULE_SOURCE = source
    sys.modules[modname] = module
    return module


def compile(source: str, name: str | None = None, *, filename: str | None = None,  # noqa: A001
            dims: dict[str, int] | None = None, backend: str = "numpy",
            model: str = "auto", strategy=None, rank: int = 1) -> CompiledProgram:
    """Compile linview source text to a trigger module (see the module docstring).

    ``dims`` binds symbolic sizes for planning (chain order, strategy choice); ``model``
    picks the iterative model of ``E^k`` and of recurrences ``T = A*T + B`` in loops
    (``exp``, ``linear``, ``skip=S``, or ``auto``: the cheapest by the cost model);
    ``strategy`` forces INCR/HYBRID/REEVAL for every view (a string) or per view (a dict);
    ``rank`` is the expected update rank.
    """
    if backend not in BACKENDS:
        raise CompileError(f"unknown backend '{backend}'", hint="backends: numpy, spark")
    filename = filename or f"{name or 'program'}.m"
    module_ast = parse(source, filename)
    dims = dict(dims or {})
    if model == "auto":  # lowers once per candidate model and keeps the cheapest
        program, options = choose_model(module_ast, source, filename, dims, rank)
    else:
        options = parse_model(model)
        program = lower(module_ast, source, filename, options)
    known = {s.name for s in program.dim_symbols}
    unknown = sorted(set(dims) - known - {"k"})
    if unknown:
        raise CompileError(f"--dims names unknown sizes: {', '.join(unknown)}",
                           hint="sizes of this program: " + (", ".join(sorted(known)) or
                                                             "none (all literal)"))
    if name:
        program = replace(program, name=name)
    if backend != "numpy" and any(st.expr.op is Op.SOLVE for st in program.statements):
        raise CompileError("solve views run on the NumPy backend only",
                           hint="drop the solve/tolerance/sparse/stochastic pragmas to keep "
                           "inv(A) on Spark")
    trig_opts = parse_strategy(strategy)
    if trig_opts.default is None and not trig_opts.strategies:
        trig_opts.choose = strategy_chooser(dims, rank)
    key = repr((source, options, sorted(dims.items()), repr(strategy), rank, backend))
    plan = make_plan(program, bindings=dims, rank=rank, trigger_options=trig_opts,
                     source_hash=runtime.source_hash(key))
    gen = importlib.import_module(f"linview.backends.{backend}.codegen")
    text = gen.generate(plan)
    try:
        pyast.parse(text)
    except SyntaxError as e:  # a bug in a backend, not the user's fault
        raise CompileError(f"internal error: generated code does not parse: {e}") from None
    module = load_module(text, program.name)
    out = CompiledProgram(program.name, plan, backend, text, module,
                          {"dims": dims, "model": model, "strategy": strategy, "rank": rank,
                           "trigger_options": trig_opts}, lowered=program)
    if backend == "numpy" and any(st.expr.op is Op.SOLVE for st in program.statements):
        out = SolveProgram(**{k: getattr(out, k) for k in out.__dataclass_fields__})
    return out


@dataclass
class SolveProgram(CompiledProgram):
    """A program with solve views: ``load`` returns :class:`linview.solve_program.SolveViews`
    (residuals, push/Krylov/Cholesky maintenance) instead of the generated module."""

    def load(self, /, **inputs):
        from linview.solve_program import SolveViews

        return SolveViews(self.lowered, dict(self.options.get("dims") or {}), **inputs)

    def explain(self, after: str | None = None) -> str:
        from linview.solve_program import explain_solves

        return super().explain(after) + explain_solves(self.lowered)


def _shown_path(p: Path) -> str:
    """How messages and generated modules name a source file: relative to the working
    directory when it is below it, else by its file name (never a machine's absolute path)."""
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return p.name


def compile_file(path, **kwargs) -> CompiledProgram:
    """Compile the ``.m`` file at ``path`` (keyword arguments as for :func:`compile`)."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise CompileError(f"cannot read {path}: {e.strerror}") from None
    kwargs.setdefault("filename", _shown_path(p))
    kwargs.setdefault("name", p.stem)
    return compile(text, **kwargs)


def restore(path, program: CompiledProgram | None = None, **options):
    """Load views saved by ``views.save(path)``.  With ``program``, refuse a state that a
    different program (or different compile options) wrote."""
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = pyast.literal_eval(str(z["__meta__"]))
            source = str(z["__module__"])
            views = {k[5:]: z[k] for k in z.files if k.startswith("view:")}
    except (OSError, KeyError, ValueError, SyntaxError) as e:
        raise StateError(f"cannot read saved state {path}: {e}") from None
    if meta.get("kind") == "solve":  # a program with solve views (linview/solve_state.py)
        from linview.solve_program import SolveViews
        from linview.solve_state import restore_state

        if program is None:
            program = compile(meta["source"], name=meta["program"], filename=meta["filename"])
        return restore_state(path, program, SolveViews, **options)
    if program is not None:
        cls = program.module_class
    else:
        module = load_module(source, str(meta.get("program", "restored")))
        classes = [o for o in module.__dict__.values() if isinstance(o, type)
                   and issubclass(o, runtime.TriggerModule) and o is not runtime.TriggerModule]
        if not classes:
            raise StateError(f"saved state {path} holds no trigger module")
        cls = classes[0]
    return cls._from_saved(meta, views, **options)


__all__ = ["compile", "compile_file", "restore", "CompiledProgram", "LinviewError"]
