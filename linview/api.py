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

from linview import budget, compile_options, lstsq, lstsq_switch, specialize
from linview.backends.numpy import runtime
from linview.backends.numpy.solve_codegen import has_solve_side
from linview.compile_options import (
    decode_source,
    module_ast_name,
    parse_model,
    parse_strategy,
)
from linview.compiler.cost import as_written, choose_model, strategy_chooser
from linview.compiler.delta import TriggerOptions
from linview.compiler.lower import Options, lower
from linview.compiler.lower_language import NeedsData
from linview.compiler.plan import Plan, make_plan, transient_views
from linview.compiler.timemodel import decide_triggers
from linview.errors import (
    CompileError,
    InputError,
    LinviewError,
    NumericalError,
    ShapeError,
    StateError,
)
from linview.frontend.parser import parse
from linview.solve.cost import split_nnz

BACKENDS = ("numpy", "spark")


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
        """Evaluate every view from ``inputs`` and return the live views object.

        When the data does not fit the program as compiled without it (a 1x1 input the
        program took for a matrix, a size assumed not to be 1), and sizes were left open,
        the program is specialised to the data's shapes (see :meth:`specialize`).
        ``reuse=`` (live views of another program, or a state file's path) and ``store=``
        (a folder) offer views by key: those with this program's keys are taken, the
        others computed (``views.reuse_report`` says which; ``backends/numpy/reuse.py``);
        ``take_over=True`` with live NumPy views keeps their arrays without a copy and
        closes them (``docs/view_store.md``).

        ``memory_budget`` (bytes, or a size such as ``"8G"``; default: half the machine's
        memory, see :mod:`linview.budget`): a load whose inputs and views would take more
        is refused with :class:`~linview.errors.MemoryBudgetError` before anything is
        allocated."""
        if (special := specialize.follow_sparse(self, inputs)) is not None:
            return special.load(**inputs)  # scipy.sparse inputs stay sparse
        limit = self._pop_budget(inputs)
        extra = {}
        if "reuse" in inputs or "store" in inputs or "_reuse" in inputs:
            from linview.backends.numpy import reuse

            inputs, extra = reuse.split_options(self, inputs)
        if self._scalar_given(inputs):  # a 1x1 input is a scalar
            return self.specialize(**inputs).load(**inputs, memory_budget=limit, **extra)
        self._check_budget(inputs, limit, self.lowered if self._solve_side else None)
        try:
            views = lstsq.loaded(self.module_class(**lstsq.load_options(self, inputs),
                                                   **extra),
                                 inputs, self, memory_budget=limit, extra=extra)
            return lstsq_switch.watch(views, self, limit)  # the rule during updates too
        except NumericalError as refused:  # least squares: QR, or pinv (linview.lstsq)
            return lstsq.load_instead(self, refused, inputs, memory_budget=limit, extra=extra)
        except MemoryError as e:
            raise budget.out_of_memory(e, self.name) from None
        except InputError as first:
            if not self.program.dim_symbols or self.options.get("shapes") or not all(
                    specialize.has_shape(inputs.get(n)) for n in self.options["inputs"]):
                raise
            try:
                special = self.specialize(**inputs)
            except ShapeError as e:
                raise InputError(f"the inputs' shapes do not fit the program: {e.message}",
                                 e.location, e.hint) from None
            except (InputError, CompileError):
                raise
            except LinviewError:
                raise first from None
            return special.load(**inputs, memory_budget=limit, **extra)

    def _scalar_given(self, inputs: dict) -> bool:
        """Whether a number (or 1x1 array) is given for an input compiled as a matrix,
        in a program not yet specialised to its data's shapes."""
        return not self.options.get("shapes") and any(
            not d.scalar and d.name in inputs and specialize.is_number(inputs[d.name])
            for d in self.program.inputs)

    def _pop_budget(self, inputs: dict):
        """The ``memory_budget`` option (an input of that name takes precedence)."""
        if "memory_budget" in inputs and "memory_budget" not in self.options["inputs"]:
            return inputs.pop("memory_budget")
        return None

    def _check_budget(self, inputs: dict, limit, program=None) -> None:
        """Refuse a load beyond the memory budget before it allocates (NumPy backend:
        Spark's views live in its executors)."""
        if self.backend == "numpy":
            program = program or self.program
            held = budget.load_held(program, inputs, dict(self.plan.sizes.bindings))
            budget.check(held, limit, program=program)

    def specialize(self, /, **inputs) -> CompiledProgram:
        """This program compiled for the shapes of ``inputs`` (arrays, numbers, or
        ``(rows, cols)`` tuples): every size is bound, 1x1 inputs are scalars.  Cached by
        shape signature, so repeated loads with the same shapes reuse one module."""
        return specialize.specialize(self.options["text"], self.options, inputs)

    def explain(self, after: str | None = None, views=None) -> str:
        from linview.compiler.explain import explain

        # a form load() chose instead, or why it kept the normal equations (linview.lstsq)
        why = self.options.get("why") or getattr(views, "least_squares", None)
        # views: its switches while running
        text = explain(self, after=after, views=views) + (f"\n\n{why}" if why else "")
        if self._solve_side:
            from linview.solve.explain import explain_solves

            text += explain_solves(self.lowered, self.options.get("sparse"))
        return text

    @property
    def _solve_side(self) -> bool:
        """Whether the module has solve views or sparse inputs (``sv.SolveModule``)."""
        return has_solve_side(self.program)


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
            model: str = "auto", strategy=None, rank: int = 1,
            shapes: tuple | None = None,
            least_squares: str = "auto", sparse: dict[str, str] | None = None
            ) -> CompiledProgram | specialize.DeferredProgram:
    """Compile linview source text to a trigger module (see the module docstring).

    ``dims`` binds symbolic sizes for planning (chain order, strategy choice); ``model``
    picks the iterative model of ``E^k`` and of recurrences ``T = A*T + B`` in loops
    (``exp``, ``linear``, ``skip=S``, or ``auto``: the cheapest by the cost model);
    ``strategy`` forces INCR/HYBRID/REEVAL for every view (a string) or per view (a dict);
    ``rank`` is the expected update rank.  ``shapes`` (``((input, rows, cols), ...)``)
    specialises the program to the shapes of the data, as ``load()`` does when sizes
    are left open; without it, a program whose sizes only the data can decide is returned
    as a :class:`~linview.specialize.DeferredProgram`, compiled at ``load()``.
    ``least_squares`` (least-squares problems, :mod:`linview.lstsq`): ``"auto"`` lets
    ``load()`` keep the normal equations (Woodbury) only where their predicted error is
    within 10× ``lstsq``'s, QR updates otherwise; ``"normal"`` keeps the normal equations
    unless ``load()`` refuses them (condition limit 1e8); ``"qr"`` forces QR updates.
    ``sparse`` (``{input: reason}``) keeps inputs sparse as ``%#linview sparse`` would
    (``load()`` passes it for inputs given as ``scipy.sparse``; ``dims`` ``nnz_X`` too).
    """
    if backend not in BACKENDS:
        raise CompileError(f"unknown backend '{backend}'", hint="backends: numpy, spark")
    if least_squares not in lstsq.FORMS:
        raise CompileError(f"unknown least_squares form '{least_squares}'",
                           hint="forms: " + ", ".join(lstsq.FORMS))
    lowered_as = "normal" if least_squares == "auto" else least_squares  # load() decides
    filename = filename or f"{name or 'program'}.m"
    source = source.removeprefix("\ufeff")  # a byte-order mark is not part of the program
    module_ast = parse(source, filename)
    dims = dict(dims or {})
    nnz = {k: dims.pop(k) for k in [k for k in dims if k.startswith("nnz_")]}
    module_ast, sparse = specialize.with_sparse(module_ast, sparse, nnz, backend)
    base = Options(shapes=tuple(shapes or ()), dims=tuple(sorted(dims.items())),
                   least_squares=lowered_as,
                   nnz=tuple(sorted((k[4:], v) for k, v in nnz.items())))
    params = module_ast.params if hasattr(module_ast, "params") else tuple(
        s.name for p in module_ast.pragmas if p.kind == "input" for s in p.specs) + tuple(
        sorted({n for p in module_ast.pragmas if p.kind == "scalar" for n in p.names}))
    kept = {"text": source, "name": name, "filename": filename, "dims": dims,
            "backend": backend, "model": model, "strategy": strategy, "rank": rank,
            "inputs": tuple(params), "shapes": shapes, "compiler": compile,
            "least_squares": least_squares, "sparse": sparse}
    if shapes:
        dims = {}  # every size is bound by the data
    try:
        if model == "auto":  # lowers once per candidate model and keeps the cheapest
            program, options = choose_model(module_ast, source, filename, dims, rank, base)
        else:
            options = replace(parse_model(model), shapes=base.shapes, dims=base.dims,
                              least_squares=lowered_as, nnz=base.nnz)
            program = lower(module_ast, source, filename, options)
    except (NeedsData, ShapeError) as e:
        if shapes or not (isinstance(e, NeedsData) or compile_options.open_inputs(module_ast)):
            raise
        reason = str(e) if isinstance(e, NeedsData) else "its sizes depend on the data"
        return specialize.DeferredProgram(name or module_ast_name(module_ast, filename),
                                          reason, kept)
    kept_dense = {d.name for d in program.inputs if d.name in sparse and d.storage == "dense"}
    nnz = {k: v for k, v in nnz.items() if k[4:] not in kept_dense}  # an inverse chose so
    kept["nnz"] = split_nnz(program, nnz)[1]  # non-zeros of sparse inputs, for cost
    known = {s.name for s in program.dim_symbols}
    unknown = sorted(set(dims) - known - {"k"})
    if unknown:
        raise CompileError(f"--dims names unknown sizes: {', '.join(unknown)}",
                           hint="sizes of this program: " + (", ".join(sorted(known)) or
                                                             "none (all literal)"))
    if name:
        program = replace(program, name=name)
    trig_opts = parse_strategy(strategy)
    if trig_opts.default is None and not trig_opts.strategies:
        trig_opts.choose = strategy_chooser(dims, rank)
    key = repr((source, options, sorted(dims.items()), repr(strategy), rank, backend)
               + ((sorted(sparse),) if sparse else ()))
    kept["dims"] = dims if not shapes else kept["dims"]
    plan = make_plan(program, bindings=dims, rank=rank, trigger_options=trig_opts,
                     source_hash=runtime.source_hash(key))
    plan = _decide(plan, trig_opts, strategy, backend)
    if backend == "numpy" and strategy != "reeval":  # what the module may switch to
        plan = replace(plan, written=as_written(module_ast, source, filename, options, plan,
                                                trig_opts))
    text, module = _emit(plan, backend, program.name)
    getattr(module, plan.class_name).PROGRAM_INFO = compile_options.program_info(
        source, program.name, filename, dims, model, rank, backend, strategy, shapes,
        least_squares)
    getattr(module, plan.class_name).KEY_PROGRAM = plan.program
    return CompiledProgram(program.name, plan, backend, text, module,
                           {**kept, "trigger_options": trig_opts}, lowered=program)


def _decide(plan: Plan, trig_opts: TriggerOptions, strategy, backend: str) -> Plan:
    """The plan's whole-trigger decisions and the views the module need not keep."""
    if trig_opts.choose is not None and not has_solve_side(plan.program):
        # cost-based: whole triggers may re-evaluate (the seconds model is NumPy's; it
        # prices a solve view as a dense solve, so a module with solve views maintains)
        decided = decide_triggers(plan, trig_opts)
        if backend == "numpy":
            plan = decided
        else:  # Spark: the driver's BLAS threads of a maintaining trigger (its views there)
            plan = replace(plan, triggers={x: replace(t, blas_threads=(
                t.blas_threads if decided.triggers[x].reevaluate
                else decided.triggers[x].blas_threads)) for x, t in plan.triggers.items()})
    if strategy == "reeval":  # every view re-evaluated: the program re-runs after X += U Vᵀ
        plan = replace(plan, triggers={
            x: replace(t, reevaluate="forced by strategy 'reeval'", blas_threads=None)
            for x, t in plan.triggers.items()})
    return replace(plan, transient=transient_views(plan))


def _emit(plan: Plan, backend: str, name: str) -> tuple[str, types.ModuleType]:
    """The backend's module text for ``plan``, and the module imported from it."""
    solve = has_solve_side(plan.program)  # solve views, sparse inputs
    gen = importlib.import_module(f"linview.backends.{backend}."
                                  f"{'solve_codegen' if solve else 'codegen'}")
    text = gen.generate(plan)
    try:
        pyast.parse(text)
    except SyntaxError as e:  # a bug in a backend, not the user's fault
        raise CompileError(f"internal error: generated code does not parse: {e}") from None
    return text, load_module(text, name)


def compile_file(path, **kwargs) -> CompiledProgram:
    """Compile the ``.m`` file at ``path`` (keyword arguments as for :func:`compile`)."""
    p = Path(path)
    try:
        text = decode_source(p.read_bytes())
    except OSError as e:
        raise CompileError(f"cannot read {path}: {e.strerror}") from None
    kwargs.setdefault("filename", compile_options.shown_path(p))
    kwargs.setdefault("name", p.stem)
    return compile(text, **kwargs)


def restore(path, program: CompiledProgram | None = None, **options):
    """Load views saved by ``views.save(path)``.  The state file's ``.m`` source is
    compiled again with its stored options (nothing stored is executed); with
    ``program``, that program is used instead and a state written by a different program
    (or different compile options) is refused.  Failures are :class:`StateError`."""
    from linview import statefile

    options.pop("memory_budget", None)  # a state is as large as the file that holds it
    meta, views = statefile.read(path)
    if program is None:
        if "source" not in meta:
            raise StateError(f"{path} does not hold its program's source (it was saved by "
                             "a module compiled ahead of time)",
                             hint="restore it with linview.restore(path, program=prog)")
        opts = meta["options"]
        try:
            program = compile(meta["source"], name=meta["name"], filename=meta["filename"],
                              dims=opts.get("dims"), backend=opts.get("backend", "numpy"),
                              model=opts.get("model", "auto"), strategy=opts.get("strategy"),
                              rank=opts.get("rank", 1),
                              shapes=tuple(tuple(s) for s in opts.get("shapes") or ()) or None,
                              least_squares=opts.get("least_squares", "auto"))
        except (LinviewError, TypeError, ValueError, AttributeError) as e:
            raise StateError(f"the program stored in {path} does not compile with this "
                             f"linview: {e}") from None
    elif (form := (meta.get("options") or {}).get("least_squares")) in ("qr", "pinv") \
            and program.options.get("least_squares", "auto") in ("auto", "normal"):
        # the stable form that load() chose for this program's data (linview.lstsq)
        program = lstsq.compiled_as(program, form) or program
    if "storage" in meta:  # a module with solve views (backends/numpy/solve_state.py)
        return _restore_solve(path, meta, views, program, options)
    cls = program.module_class
    if meta.get("hash") != cls.SOURCE_HASH and "keys" in meta and set(cls.INPUTS) <= set(views):
        # an edited program over the same inputs: every saved view whose key it still
        # has is reused, the others computed (backends/numpy/reuse.py)
        from linview.backends.numpy import reuse

        out = program.load(**{n: views[n] for n in cls.INPUTS}, **options,
                           _reuse=reuse.offer_of_saved(path, meta, views, own_inputs=True))
        out.saved_meta, out.updates = meta, int(meta["updates"])
        return out
    options.pop("store", None)  # the same program: every view comes from the file
    out = program.module_class._from_saved(meta, views, **options)
    from linview.backends.numpy import reuse

    reuse.restore_probes(out, path, meta)  # the saved probe vectors: guards as strict
    out.least_squares = meta.get("least_squares")  # the form load() chose, and why
    return lstsq_switch.watch(out, program)  # as the saved views were (linview.lstsq_switch)


def _restore_solve(path, meta: dict, views: dict, program: CompiledProgram, options: dict):
    """Views with solve views restored: the inputs loaded again in their storage, every
    solve view warm-started from its saved solution (its bound certified again)."""
    from linview.backends.numpy import solve_state

    inputs = solve_state.inputs_of(meta, views)
    if program.options.get("text") != meta.get("source"):
        if not set(program.module_class.INPUTS) <= set(inputs):
            raise StateError(f"the saved state {path} was written by a different program "
                             f"than {program.name!r}, over other inputs",
                             hint="restore it with the program that saved it")
        # an edited program over the saved inputs: the saved views it still has are
        # taken by key, its solve views warm from their saved solutions (backends/numpy/
        # reuse.py); a file written before keys were saved: every view is computed
        from linview.backends.numpy import reuse

        offer = reuse.offer_of_saved(path, meta, views) if "keys" in meta else reuse.Offer()
        out = program.load(**{n: inputs[n] for n in program.module_class.INPUTS},
                           **options, _reuse=offer)
        out.saved_meta, out.updates = meta, int(meta["updates"])
        return out
    opts = {k: v for k, v in (meta.get("solve_options") or {}).items() if v is not None}
    out = program.load(**inputs, **{**opts, **options},
                       _warm=solve_state.solutions_of(views),
                       _factors=solve_state.factors_of(views),
                       _restored=solve_state.dense_views_of(views))
    out.saved_meta, out.updates = meta, int(meta["updates"])
    out.stats["updates"] = out.updates
    if meta.get("least_squares"):  # the form load() chose, and why
        out.least_squares = meta["least_squares"]
    if meta.get("probe"):
        from linview.backends.numpy import reuse

        reuse.restore_probes(out, path, meta)  # the saved probe vectors: guards as strict
    return out


__all__ = ["compile", "compile_file", "restore", "CompiledProgram", "LinviewError"]
