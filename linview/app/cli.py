"""``linview``: compile, explain, cost, bench, run and demo (the README lists every verb).

Every error a user can cause is a :class:`~linview.errors.LinviewError`, printed as
``error: ...`` without a traceback; the exit status is then 2.  So is running out of
memory: a load beyond the memory budget is refused before it allocates
(:mod:`linview.budget`), and a ``MemoryError`` raised anyway is reported as what it is.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from linview.errors import CompileError, LinviewError

EXIT_USER_ERROR = 2
EXIT_INTERNAL_ERROR = 3


def parse_dims(values: list[str] | None) -> dict[str, int]:
    """``["n=4000,p=1", "m=10"]`` → ``{"n": 4000, "p": 1, "m": 10}``."""
    dims: dict[str, int] = {}
    for chunk in values or []:
        for item in filter(None, (x.strip() for x in chunk.split(","))):
            name, eq, val = item.partition("=")
            try:
                if not eq or not name.strip().isidentifier():
                    raise ValueError
                n = int(val)
                if n <= 0:
                    raise ValueError
            except ValueError:
                raise CompileError(f"bad --dims item '{item}'",
                                   hint="write sizes as NAME=POSITIVE_INT, e.g. --dims "
                                   "n=4000,p=1") from None
            dims[name.strip()] = n
    return dims


def _compile(args, **extra):
    import linview
    from linview.specialize import parse_shapes

    prog = linview.compile_file(args.program, dims=parse_dims(args.dims),
                                backend=getattr(args, "backend", "numpy"),
                                model=args.model, strategy=args.strategy,
                                rank=getattr(args, "rank", 1), **extra)
    shapes = parse_shapes(getattr(args, "shapes", None))
    return prog.specialize(**shapes) if shapes else prog


def load_options(args) -> dict:
    """Keyword arguments for ``load()``: the Spark session settings, if any."""
    if getattr(args, "backend", "numpy") != "spark":
        return {}
    return {k: v for k, v in (("master", args.master), ("partitions", args.partitions))
            if v is not None}


def _console():
    from linview.app.report import console

    return console()


# ------------------------------------------------------------------ commands
def cmd_compile(args) -> int:
    prog = _compile(args)
    if args.output:
        Path(args.output).write_text(prog.source)
        print(f"wrote {args.output} ({prog.backend} backend, class {prog.plan.class_name})")
    else:
        sys.stdout.write(prog.source)
    return 0


def cmd_explain(args) -> int:
    prog = _compile(args)
    if args.against:
        from linview.app.against import listing

        print(listing(prog, args.against))
        return 0
    print(prog.explain(after=args.after))
    return 0


def cmd_cost(args) -> int:
    from linview.app.report import print_cost
    from linview.compiler.cost import cost_report

    prog = _compile(args)
    report = cost_report(prog, formulas=args.formulas)
    from linview.backends.numpy.solve_codegen import has_solve_side

    if has_solve_side(prog.program):
        from linview.solve.cost import solve_cost_report  # solve views: their own pricing

        report["solve"] = solve_cost_report(prog, tolerance=args.tolerance,
                                            batch=args.batch, damping=args.damping)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_cost(_console(), report)
    return 0


def cmd_bench(args) -> int:
    from linview.app.bench import run_bench
    from linview.app.report import print_bench

    prog = _compile(args)
    result = run_bench(prog, updates=args.updates, seed=args.seed, rank=args.rank,
                       strategies=args.strategies, progress=not args.json_only,
                       input_name=args.input, load_options=load_options(args))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    if args.plot:
        from linview.app.report import plot_bench

        plot_bench(result, args.plot)
    if not args.json_only:
        print_bench(_console(), result)
    return 0


def cmd_run(args) -> int:
    from linview.app.run_cli import cmd_run as run
    from linview.app.run_cli import quiet_blas_workers

    quiet_blas_workers()  # before NumPy loads OpenBLAS
    return run(args, _compile, load_options)


def cmd_calibrate(args) -> int:
    from linview.compiler import calibrate

    path = calibrate.cache_path()
    noisy = ""
    if args.show:
        r, why = calibrate.load(path)
        if r is None:
            print(f"{path}: {why}; run 'linview calibrate' to measure")
            return 0
    else:
        cal = calibrate.measure()
        r, noisy = cal.rates, cal.noisy
        try:
            if not noisy:  # a busy machine's rates would mislead later runs
                calibrate.save(cal, path)
        except OSError as e:
            raise LinviewError(f"cannot write the calibration to {path}: {e.strerror}",
                     hint="set LINVIEW_CACHE_DIR to a writable folder") from None
    if args.json:
        print(json.dumps({"path": str(path), "rates": r.as_dict(), "noisy": noisy,
                          "cached": not noisy}, indent=2))
        return 0
    if noisy:
        print(f"noisy calibration ({noisy}): not cached, used by no later run; "
              "measure again when the machine is quiet")
    print(f"calibration ({'not cached' if noisy else path}):")
    print(f"  gemm            {r.gemm_flops / 1e9:8.1f} GFlop/s (all BLAS threads), "
          f"{r.gemm1_flops / 1e9:.1f} (one)")
    print(f"  memory stream   {r.stream_bytes / 1e9:8.1f} GB/s (all BLAS threads), "
          f"{r.stream1_bytes / 1e9:.1f} (one)")
    print(f"  thin product    {r.thin_bytes / 1e9:8.1f} GB/s of the matrix (all BLAS threads), "
          f"{r.thin1_bytes / 1e9:.1f} (one)")
    print(f"  call overhead   {r.call_s * 1e6:8.2f} µs")
    return 0


def cmd_demo(args) -> int:
    if args.db:
        from linview.app.postgres.demo import demo_db

        return demo_db()
    from linview.app.demo import demo

    return demo(backend=args.backend, n=args.n)


# ------------------------------------------------------------------ parser
def _size(text: str) -> int:
    """An argparse type: a size such as ``8G`` (:func:`linview.budget.parse_size`)."""
    from linview.budget import parse_size

    try:
        return parse_size(text)
    except LinviewError as e:
        raise argparse.ArgumentTypeError(e.message) from None


def _memory_budget(sp) -> None:
    sp.add_argument("--memory-budget", type=_size, default=None, metavar="SIZE",
                    help="refuse a load whose inputs and views would need more memory than "
                    "this (e.g. 8G; default: half of this machine's memory)")


def _count(minimum: int):
    """An argparse type: an integer >= ``minimum`` (argparse reports anything else)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value
    return parse


def build_parser() -> argparse.ArgumentParser:
    """Long on purpose: A flat list of argparse declarations, one block per verb."""
    p = argparse.ArgumentParser(
        prog="linview",
        description="Compile Octave linear-algebra programs into incremental trigger modules.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def common(sp, backend=True):
        sp.add_argument("program", help="the .m file")
        sp.add_argument("--dims", action="append", metavar="n=..,m=..",
                        help="bind symbolic sizes (for planning, cost and bench); "
                        "nnz_M=... gives the non-zeros of a sparse or stochastic input M")
        sp.add_argument("--shapes", action="append", metavar="X=RxC,..",
                        help="compile for these input shapes, as load() does for data")
        sp.add_argument("--model", default="auto",
                        help="iterative model of E^k and of loops T = A*T + B: exp, linear, "
                        "skip=S, written (as written: loops step by step, ^ by squaring), "
                        "or auto (cheapest by the cost model; default)")
        sp.add_argument("--strategy", default=None,
                        help="force incr, hybrid or reeval for every view (default: by cost)")
        if backend:
            sp.add_argument("--backend", default="numpy", choices=["numpy", "spark"])
            sp.add_argument("--master", default=None,
                            help="Spark master URL (spark backend; default local[*])")
            sp.add_argument("--partitions", type=_count(1), default=None,
                            help="blocks per distributed view (spark backend)")

    c = sub.add_parser("compile", help="emit the trigger module")
    common(c)
    c.add_argument("-o", "--output", help="write the module here (default: stdout)")
    c.set_defaults(func=cmd_compile)

    e = sub.add_parser("explain", help="print the program and its triggers")
    common(e)
    e.add_argument("--after", default=None,
                   help="show the program or triggers after this pass: lower, "
                        "materialize_products, propagate_copies, eliminate_dead_views, "
                        "materialize_outputs, optimize (all program passes), delta, triggers")
    e.add_argument("--against", metavar="STATE",
                   help="a state file or a linview run checkpoint folder: list the views "
                        "this program would reuse from it and those it would recompute, "
                        "with predicted seconds (docs/view_store.md)")
    e.set_defaults(func=cmd_explain)

    k = sub.add_parser("cost", help="predicted cost of re-evaluation vs incremental")
    common(k, backend=False)
    k.add_argument("--rank", type=_count(1), default=1, help="update rank k (default 1)")
    k.add_argument("--json", action="store_true", help="machine-readable output")
    k.add_argument("--formulas", action="store_true", help="include symbolic formulas")
    k.add_argument("--tolerance", type=float, default=None,
                   help="solve views kept by push: predict, at this certified L1 tolerance, "
                   "whether maintenance pays against warm power iteration")
    k.add_argument("--batch", type=_count(1), default=1,
                   help="edge changes per micro-batch for --tolerance (default 1)")
    k.add_argument("--damping", type=float, default=0.85,
                   help="s of (I - s*M) for --tolerance (default 0.85)")
    k.set_defaults(func=cmd_cost)

    b = sub.add_parser("bench", help="measure re-evaluation vs incremental per update")
    common(b)
    b.add_argument("--updates", type=_count(1), default=20,
                   help="number of updates (default 20)")
    b.add_argument("--rank", type=_count(1), default=1, help="update rank k (default 1)")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--input", default=None, help="the dynamic input to update")
    b.add_argument("--strategies", default="reeval,incr,hybrid,auto",
                   help="comma-separated strategies to measure: reeval (the program as "
                   "written, the baseline), reeval_model (as compiled), incr, hybrid, auto")
    b.add_argument("--json", default=None, metavar="FILE", help="write results as JSON")
    b.add_argument("--json-only", action="store_true", help=argparse.SUPPRESS)
    b.add_argument("--plot", default=None, metavar="FILE.png", help="bar chart of results")
    _memory_budget(b)
    b.set_defaults(func=cmd_bench)

    r = sub.add_parser("run", help="apply a stream of update records (JSON lines, Parquet)")
    common(r)
    from linview.app.run_cli import add_run_arguments

    add_run_arguments(r)
    _memory_budget(r)
    r.set_defaults(func=cmd_run)

    cal = sub.add_parser("calibrate", help="measure this machine's rates for the cost model")
    cal.add_argument("--show", action="store_true", help="print the cached rates, measure "
                     "nothing")
    cal.add_argument("--json", action="store_true", help="machine-readable output")
    cal.set_defaults(func=cmd_calibrate)

    d = sub.add_parser("demo", help="run the OLS demo")
    d.add_argument("--backend", default="numpy", choices=["numpy", "spark"])
    d.add_argument("--n", type=_count(1), default=1000, help="number of features")
    _memory_budget(d)
    d.add_argument("--db", action="store_true", help="a throwaway PostgreSQL, a writer "
                   "committing transactions and the result table staying fresh "
                   "(docs/postgres.md; needs PostgreSQL and the db extra)")
    d.set_defaults(func=cmd_demo)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "strategies", None) is not None:
        args.strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    from linview import budget
    from linview.app import signals

    try:
        if getattr(args, "memory_budget", None) is not None:
            budget.set_default(args.memory_budget)  # every load of this command
        with signals.handled():  # SIGINT, SIGTERM, SIGHUP: docs/stopping.md
            return args.func(args)
    except LinviewError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USER_ERROR
    except signals.Interrupted as e:
        print(f"interrupted by {e.name}", file=sys.stderr)
        return e.code
    except MemoryError as e:  # beyond what the budget foresaw: not a bug, not a traceback
        name = Path(args.program).stem if hasattr(args, "program") else "demo"
        print(f"error: {budget.out_of_memory(e, name, args.command)}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as e:  # noqa: BLE001 - the CLI never shows a raw traceback
        print(f"internal error: {type(e).__name__}: {e}\n(this is a bug in linview; please "
              "report it with the program and command line)", file=sys.stderr)
        return EXIT_INTERNAL_ERROR
    finally:
        budget.set_default(None)  # main() may run again in this process


if __name__ == "__main__":
    sys.exit(main())
