"""The ``linview run`` verb: its options, its help text and its live status line."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import sys
import time

#: OpenBLAS's idle workers spin for 2^28 cycles (~0.1 s) after each parallel call before
#: they sleep; OPENBLAS_THREAD_TIMEOUT=4 (its minimum, 2^4 cycles) puts them to sleep at
#: once.  A stream service shares its cores with the steps between triggers (Spark's JVM
#: in local mode, the log, the outputs): with spinning workers Spark's own micro-batch
#: steps took about twice as long (``bench/stream_bench.py``, batches of 256).  Read by
#: OpenBLAS when it loads, so set before NumPy is imported; a user's value wins.
BLAS_ENV = {"OPENBLAS_THREAD_TIMEOUT": "4"}


def quiet_blas_workers() -> None:
    """Set :data:`BLAS_ENV` for this process and its children (unless already set)."""
    for k, v in BLAS_ENV.items():
        os.environ.setdefault(k, v)

RECORDS_HELP = """\
update records (JSON lines, or Parquet rows with the same fields; indices 1-based):
  {"input": "X", "u": [...], "v": [...]}           X += u v'  ("U"/"V": k lists, rank k)
  {"input": "X", "row": 17, "add": [...]}          row 17 += values ("delta" = "add")
  {"input": "X", "row": 17, "set": [...]}          row 17 := values
  {"input": "X", "col": 3, "add": [...]}           a column (also "set")
  {"input": "X", "cell": [2, 5], "set": 0.5}       one entry (also "add")
  {"observe": {"X": [...], "Y": [...]}}            next slot of a ring over the rows:
                                                   a sliding window of the inputs' rows
  {"observe": {"X": [...], "Y": [...]}, "row": 4}  observation into row 4
  {"remove": 4}                                    zero row 4 of every dynamic input
                                                   ("inputs": ["X", "Y"] to choose)
  {"forget": 0.99}                                 forgetting factor: every earlier
                                                   observation's weight times 0.99
  {"scale": 2.0, "inputs": ["A"]}                  A := 2 A
  {"input": "M", "edge": [3, 7], "op": "insert"}   link 3 -> 7 of a stochastic M (entry
                                                   M(7, 3); "delete" too, "weight": w)
  any record + "batch": ID   consecutive records with one id form one micro-batch
An index is a JSON integer (1.0, 1.7 and true are refused).  A bad record is reported
with its file and line; --on-error stop (default) ends the run there, skip drops it.

examples:
  linview run ols.m --input X=X.npy --input Y=Y.npz:y --updates upd.jsonl --out out
  linview run ols.m --input X=X.mat --updates DIR --checkpoint ck --out out --max-batch 64
  tail -f upd.jsonl | linview run ols.m --input X=X.parquet --input Y=Y.csv --updates -
  linview run pagerank_solve.m --input M=links.npz --input d=0.85 --updates edges.jsonl
  linview run ols.m --backend spark --input X=X.npy --updates DIR --checkpoint ck \\
      --out out --once
"""


def add_run_arguments(r) -> None:
    r.formatter_class = argparse.RawDescriptionHelpFormatter
    r.epilog = RECORDS_HELP
    r.add_argument("--input", action="append", default=[], metavar="X=FILE",
                   help="initial value of an input: .npy, .npz[:KEY], .mat[:KEY], .parquet "
                   "(columns row, values), .csv, or a number")
    r.add_argument("--updates", default=None,
                   help="a .jsonl/.parquet file, a directory of them, or - (stdin); "
                   "with --backend spark, a directory watched by Structured Streaming. "
                   "--updates, --checkpoint and --out are paths on the driver's own "
                   "filesystem (local, or a shared directory mounted there); URIs such as "
                   "hdfs:// or s3a:// are refused")
    from linview.app.postgres.cli import add_source_arguments

    add_source_arguments(r)  # --source postgresql://... (docs/postgres.md)
    r.add_argument("--checkpoint", default=None, metavar="DIR",
                   help="state, write-ahead log (and Spark's query checkpoint): a rerun "
                   "of the same command resumes where the last one stopped")
    r.add_argument("--store", default=None, metavar="DIR",
                   help="numpy: a folder of views by key, shared by programs over the same "
                   "inputs: views found there are not computed again, computed ones are "
                   "added (docs/view_store.md)")
    r.add_argument("--checkpoint-every", type=int, default=100, metavar="N",
                   help="save the views every N batches (default 100)")
    r.add_argument("--restart", action="store_true",
                   help="discard the checkpoint and the outputs, start from the inputs")
    r.add_argument("--out", default=None, metavar="DIR",
                   help="results table OUT/results/*.parquet, OUT/latest.npz, OUT/log.jsonl")
    r.add_argument("--max-batch", type=int, default=None, metavar="N",
                   help="records without a batch id per micro-batch (numpy; default 1); "
                   "files per micro-batch (spark: maxFilesPerTrigger; default 1)")
    r.add_argument("--on-error", choices=["stop", "skip"], default="stop",
                   help="a bad record stops the run (default) or is skipped with a warning")
    r.add_argument("--once", action="store_true",
                   help="spark: process the files there now and stop (default: run until "
                   "Ctrl-C)")
    r.add_argument("--verify", action="store_true",
                   help="at the end, check every view against a re-evaluation from the "
                   "inputs (exact, but as costly as load(); a sparse LU for solve views: "
                   "its predicted time is printed first). Without it the end-of-run check "
                   "is the probe, a small fraction of the run")
    r.add_argument("--quiet", action="store_true", help="no status line, no warnings")
    r.add_argument("--spark-driver-mib", type=float, default=64, metavar="MIB",
                   help="spark: views of at most this many MiB stay on the driver, where "
                   "a micro-batch costs milliseconds instead of Spark jobs (default 64; 0: "
                   "distribute every view with both sides >= 256)")
    r.add_argument("--spark-log-level", default="ERROR", metavar="LEVEL",
                   help="Spark's log level (default ERROR; WARN, INFO, ...)")


#: ``scheme:/...`` (a scheme of two letters or more, so ``C:/`` stays a path)
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:/")


def check_local_paths(args) -> None:
    """``--updates``, ``--checkpoint`` and ``--out`` are read and written by the driver
    as local paths: a URI (``hdfs://``, ``s3a://``, ``file://``) is refused by name
    instead of becoming a local directory called ``hdfs:``."""
    from linview.errors import InputError

    for flag in ("updates", "checkpoint", "out"):
        value = getattr(args, flag)
        if value and _URI.match(value):
            raise InputError(f"--{flag} {value}: a URI, but linview run reads and writes "
                             "--updates, --checkpoint and --out on the driver's own "
                             "filesystem", hint="give a local path (on a cluster, a shared "
                             "directory mounted on the driver, e.g. NFS)")


def cmd_run(args, compile_program, load_options) -> int:
    from linview.errors import CompileError

    for flag in ("checkpoint_every", "max_batch"):
        v = getattr(args, flag)
        if v is not None and v < 1:
            raise CompileError(f"--{flag.replace('_', '-')} must be at least 1")
    check_local_paths(args)
    if args.source is None and args.updates is None:
        raise CompileError("linview run needs --updates (or --source postgresql://...)")
    prog = compile_program(args)
    status = Status(quiet=args.quiet)
    if args.source is not None:
        from linview.app.postgres.cli import cmd_run_postgres

        try:
            return cmd_run_postgres(args, prog, status)
        finally:
            status.stop()
    try:
        if args.backend == "spark":
            from linview.app.spark_stream import run_structured

            stats = run_structured(prog, args, load_options(args), status)
        else:
            from linview.app.stream_run import run_stream

            stats = run_stream(prog, inputs=args.input, updates=args.updates,
                               checkpoint=args.checkpoint, out=args.out,
                               checkpoint_every=args.checkpoint_every,
                               max_batch=args.max_batch or 1, on_error=args.on_error,
                               restart=args.restart, progress=status.update,
                               warn=status.warn, verify=args.verify, say=status.note,
                               load_options={"store": args.store} if args.store else None)
    finally:
        status.stop()
    stats["backend"] = args.backend
    with contextlib.suppress(OSError):  # SIGHUP: the terminal may be gone
        print(json.dumps(stats), flush=True)
    return exit_code(stats, args.checkpoint)


def exit_code(stats: dict, checkpoint: str | None) -> int:
    """0, or 128 + the signal's number when one stopped the run (130 SIGINT, 143 SIGTERM,
    129 SIGHUP), after saying where it stopped."""
    name = stats.get("interrupted")
    if not name:
        return 0
    where = (f"saved at batch {stats['batch']} in {checkpoint}; run the same command to "
             "resume" if checkpoint else f"stopped after batch {stats['batch']} (no "
             "--checkpoint: nothing saved)")
    with contextlib.suppress(OSError):
        print(f"interrupted by {name}: {where}", file=sys.stderr)
    return 128 + int(signal.Signals[name])


def status_text(*, rate: float, batches: int, record: int, lag: float | None, skipped: int,
                refreshes: int, check: dict | None, now: float) -> str:
    """The status line: updates/s, batches, position, lag, skipped records, refreshes and
    the last error check (``check``: the module's ``last_check``, None before any)."""
    parts = [f"{rate:,.0f} updates/s", f"{batches} batches", f"record {record}"]
    if lag is not None:
        parts.append(f"lag {lag:.1f}s")
    parts += [f"skipped {skipped}", f"refreshes {refreshes}"]
    if check is None:
        parts.append("check –")
    else:
        age = max(now - check["at"], 0.0)
        parts.append(f"check {'ok' if check['ok'] else 'FAILED'} ({check['by']} "
                     f"{check['error']:.1e}, {_age(age)} ago)")
    return " · ".join(parts)


def _age(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds / 60:.0f}min"
    return f"{seconds / 3600:.1f}h"


class Status:
    """A live status line on a terminal (rich): updates/s, batches, lag, last check."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.live = None
        self.t0 = time.perf_counter()
        self.last = 0.0
        if not quiet and sys.stderr.isatty():
            from rich.console import Console
            from rich.live import Live

            self.live = Live("", console=Console(stderr=True), transient=True,
                             refresh_per_second=4)
            self.live.start()

    def warn(self, msg: str) -> None:
        if not self.quiet:
            if self.live is not None:
                self.live.console.print(f"warning: {msg}", markup=False)
            else:
                print(f"warning: {msg}", file=sys.stderr)

    def note(self, msg: str) -> None:
        """A line for the user that is not a warning (printed with --quiet too)."""
        if self.live is not None:
            self.live.console.print(msg, markup=False)
        else:
            print(msg, file=sys.stderr, flush=True)

    def update(self, stream, lag: float | None = None) -> None:
        now = time.perf_counter()
        if self.live is None or now - self.last < 0.25:
            return
        self.last = now
        st = stream.stats
        views = stream.views
        self.live.update(status_text(
            rate=st["applied"] / max(now - self.t0, 1e-9), batches=st["batches"],
            record=stream.pos["offset"], lag=lag, skipped=st["skipped"],
            refreshes=getattr(views, "stats", {}).get("refreshes", 0),
            check=getattr(views, "last_check", None), now=time.time()))

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None
