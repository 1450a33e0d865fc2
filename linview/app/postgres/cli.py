"""The options of ``linview run --source postgresql://...`` and the verb behind them."""

from __future__ import annotations

import json

from linview.errors import InputError

SOURCE_HELP = """\
live views over PostgreSQL (docs/postgres.md):
  linview run ols.m --source postgresql://USER@HOST:PORT/DB --table X=obs.x \\
      --table Y=obs.y [--key id] [--sink linview] [--checkpoint DIR] [--once]
  The inputs are loaded from one snapshot of the tables, then kept fresh from a logical
  replication slot; each output is the table SINK.OUTPUT(row, value float8[]).
"""


def add_source_arguments(r) -> None:
    g = r.add_argument_group("PostgreSQL source (--source postgresql://...)")
    g.add_argument("--source", default=None, metavar="postgresql://USER@HOST:PORT/DB",
                   help="read the inputs from tables of this database and keep the results "
                   "there (the password from PGPASSWORD or ~/.pgpass)")
    g.add_argument("--table", action="append", default=[], metavar="INPUT=TABLE.COLUMN",
                   help="rows layout: the key column is the 1-based row, COLUMN a float8[] "
                   "(or a number for a one-column input); SCHEMA.TABLE.COLUMN also works")
    g.add_argument("--edges", action="append", default=[], metavar="INPUT=TABLE(SRC,DST)",
                   help="edges layout: one row per link SRC -> DST (1-based node ids) of a "
                   "stochastic input (%%#linview stochastic INPUT)")
    g.add_argument("--entries", action="append", default=[],
                   metavar="INPUT=TABLE(I,J,VALUE)", help="entries layout: one row per "
                   "entry INPUT(I, J) (1-based); entries without a row are zero")
    g.add_argument("--key", default="id", help="the key column of the tables (default id)")
    g.add_argument("--sink", default="linview", metavar="SCHEMA",
                   help="schema of the result tables and the progress table (default linview)")
    g.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="a scalar input, e.g. --param d=0.85")
    g.add_argument("--window-ms", type=float, default=50.0, metavar="MS",
                   help="transactions committed in one window of this many ms (windows "
                   "on a grid of commit times) form one micro-batch (default 50)")
    g.add_argument("--batch-rows", type=int, default=None, metavar="N",
                   help="at most N row changes per micro-batch when catching up (whole "
                   "transactions; default: a quarter of the widest rows input's columns, "
                   "16 to 256)")
    g.add_argument("--reevaluate-above", type=int, default=None, metavar="N",
                   help="a micro-batch of more than N rank-1 changes (a row of one input "
                   "is one) re-evaluates every view instead of running the triggers "
                   "(default: chosen per batch from the measured costs)")
    g.add_argument("--behind-gap-ms", type=float, default=20.0, metavar="MS",
                   help="catching up, a micro-batch behind (its first transaction more "
                   "than 0.2 s past its window) takes the transactions that keep arriving "
                   "until none comes for MS ms, up to --batch-rows (default 20)")
    g.add_argument("--trace", default=None, metavar="FILE",
                   help="append when each micro-batch's phases ran (read, triggers, result "
                   "transaction, fsync, checkpoint, ...), one JSON line per batch, to FILE")


def cmd_run_postgres(args, prog, status) -> int:
    if args.updates is not None or args.input or args.out:
        raise InputError("--source reads the inputs and updates from the database and "
                         "writes the results there",
                         hint="drop --updates, --input and --out (scalars: --param)")
    if not args.table and not args.edges and not args.entries:
        raise InputError("--source needs at least one --table INPUT=TABLE.COLUMN, --edges "
                         "INPUT=TABLE(SRC,DST) or --entries INPUT=TABLE(I,J,VALUE)")
    if min(args.window_ms, args.behind_gap_ms) < 0 or (args.batch_rows is not None
                                                        and args.batch_rows < 1) \
            or (args.reevaluate_above is not None and args.reevaluate_above < 0):
        raise InputError("--window-ms, --behind-gap-ms and --reevaluate-above must be at "
                         "least 0 and --batch-rows at least 1")
    if args.backend == "spark":
        return _run_spark(args, prog, status)
    return _serve(args, prog, status, None)


def _run_spark(args, prog, status) -> int:
    """On Spark: the session from start to stop (the JVM stopped and the temporary folders
    removed on every way out); the slot is read on the driver, views are distributed
    where large (``--spark-driver-mib``)."""
    import contextlib
    from pathlib import Path

    from linview.app import signals
    from linview.app.spark_stream import active_session, driver_view_elements, session
    from linview.backends.spark.session import remove_temp_dirs

    forget = signals.on_exit_now(remove_temp_dirs)
    spark, given = None, active_session()
    try:
        spark = session(args)
        opts = {"driver_view_elements": driver_view_elements(args), "spark": spark,
                **{k: v for k, v in (("master", args.master), ("partitions", args.partitions))
                   if v is not None}}
        if args.checkpoint:  # lineage cuts that survive an executor: files beside the state
            opts["checkpoint_dir"] = str(Path(args.checkpoint) / "rdd")
        with signals.handled():  # PySpark's context put its own SIGINT handler in place
            return _serve(args, prog, status, opts)
    finally:
        if spark is not None and spark is not given:  # a session of the caller's stays
            with contextlib.suppress(Exception):
                spark.stop()
            remove_temp_dirs()
        forget()


def _serve(args, prog, status, load_options: dict | None) -> int:
    from linview.app.postgres.edges import parse_edges_spec
    from linview.app.postgres.entries import parse_entries_spec
    from linview.app.postgres.runner import PostgresRun
    from linview.app.postgres.tables import parse_table_spec
    from linview.specialize import parse_shapes

    run = PostgresRun(prog, dsn=args.source, tables=[parse_table_spec(t) for t in args.table],
                      edges=[parse_edges_spec(e) for e in args.edges],
                      entries=[parse_entries_spec(e) for e in args.entries],
                      key=args.key, sink=args.sink, params=args.param,
                      checkpoint=args.checkpoint, checkpoint_every=args.checkpoint_every,
                      restart=args.restart, on_error=args.on_error,
                      window=args.window_ms / 1000, shapes=parse_shapes(args.shapes),
                      warn=status.warn, batch_rows=args.batch_rows,
                      reevaluate_above=args.reevaluate_above, load_options=load_options,
                      trace=args.trace, behind_gap=args.behind_gap_ms / 1000)
    stats = run.serve(once=args.once, progress=status.update)
    print(json.dumps(stats))
    return 0
