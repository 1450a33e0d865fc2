"""``linview``: compile, explain, cost, bench, run and demo (the README lists every verb).

Every error a user can cause is a :class:`~linview.errors.LinviewError`, printed as
``error: ...`` without a traceback; the exit status is then 2.
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

    return linview.compile_file(args.program, dims=parse_dims(args.dims),
                                backend=getattr(args, "backend", "numpy"),
                                model=args.model, strategy=args.strategy,
                                rank=getattr(args, "rank", 1), **extra)


def load_options(args) -> dict:
    """Keyword arguments for ``load()``: the Spark session settings, if any."""
    if getattr(args, "backend", "numpy") != "spark":
        return {}
    return {k: v for k, v in (("master", args.master), ("partitions", args.partitions))
            if v is not None}


def _console():
    from rich.console import Console

    return Console()


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
    print(prog.explain(after=args.after))
    return 0


def cmd_cost(args) -> int:
    from linview.app.report import print_cost
    from linview.compiler.cost import cost_report

    prog = _compile(args)
    report = cost_report(prog, formulas=args.formulas)
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
    from linview.app.stream import run_stream

    prog = _compile(args)
    stats = run_stream(prog, inputs=args.input, updates=args.updates,
                       checkpoint=args.checkpoint, out=args.out,
                       checkpoint_every=args.checkpoint_every,
                       load_options=load_options(args))
    print(json.dumps(stats))
    return 0


def cmd_demo(args) -> int:
    from linview.app.demo import demo

    return demo(backend=args.backend, n=args.n)


# ------------------------------------------------------------------ parser
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="linview",
        description="Compile Octave linear-algebra programs into incremental trigger modules.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def common(sp, backend=True):
        sp.add_argument("program", help="the .m file")
        sp.add_argument("--dims", action="append", metavar="n=..,m=..",
                        help="bind symbolic sizes (for planning, cost and bench)")
        sp.add_argument("--model", default="auto",
                        help="iterative model of E^k and of loops T = A*T + B: exp, linear, "
                        "skip=S, or auto (cheapest by the cost model; default)")
        sp.add_argument("--strategy", default=None,
                        help="force incr, hybrid or reeval for every view (default: by cost)")
        if backend:
            sp.add_argument("--backend", default="numpy", choices=["numpy", "spark"])
            sp.add_argument("--master", default=None,
                            help="Spark master URL (spark backend; default local[*])")
            sp.add_argument("--partitions", type=int, default=None,
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
    e.set_defaults(func=cmd_explain)

    k = sub.add_parser("cost", help="predicted cost of re-evaluation vs incremental")
    common(k, backend=False)
    k.add_argument("--rank", type=int, default=1, help="update rank k (default 1)")
    k.add_argument("--json", action="store_true", help="machine-readable output")
    k.add_argument("--formulas", action="store_true", help="include symbolic formulas")
    k.set_defaults(func=cmd_cost)

    b = sub.add_parser("bench", help="measure re-evaluation vs incremental per update")
    common(b)
    b.add_argument("--updates", type=int, default=20, help="number of updates (default 20)")
    b.add_argument("--rank", type=int, default=1, help="update rank k (default 1)")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--input", default=None, help="the dynamic input to update")
    b.add_argument("--strategies", default="reeval,incr,hybrid,auto",
                   help="comma-separated strategies to measure")
    b.add_argument("--json", default=None, metavar="FILE", help="write results as JSON")
    b.add_argument("--json-only", action="store_true", help=argparse.SUPPRESS)
    b.add_argument("--plot", default=None, metavar="FILE.png", help="bar chart of results")
    b.set_defaults(func=cmd_bench)

    r = sub.add_parser("run", help="apply a stream of updates (JSON lines)")
    common(r)
    r.add_argument("--input", action="append", default=[], metavar="X=x.npy",
                   help="initial value of an input (.npy, .csv, or a number)")
    r.add_argument("--updates", required=True, help="a .jsonl file, a directory, or -")
    r.add_argument("--checkpoint", default=None, metavar="DIR")
    r.add_argument("--checkpoint-every", type=int, default=100)
    r.add_argument("--out", default=None, metavar="DIR", help="write outputs per batch")
    r.set_defaults(func=cmd_run)

    d = sub.add_parser("demo", help="run the OLS demo")
    d.add_argument("--backend", default="numpy", choices=["numpy", "spark"])
    d.add_argument("--n", type=int, default=1000, help="number of features")
    d.set_defaults(func=cmd_demo)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "strategies", None) is not None:
        args.strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    try:
        return args.func(args)
    except LinviewError as e:
        print(f"error: {e}", file=sys.stderr)
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


if __name__ == "__main__":
    sys.exit(main())
