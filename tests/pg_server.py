"""Helpers of the PostgreSQL tests; the server itself is :mod:`linview.app.postgres.server`
(``initdb`` into a temporary folder, started as the ``postgres`` user when we are root)."""

from __future__ import annotations

from linview.app.postgres.server import PASSWORD_USER, PgServer, bindir

__all__ = ["PASSWORD", "PASSWORD_USER", "PgServer", "bindir", "floats", "run_cli"]

PASSWORD = "s3cret-Pa55word"


def run_cli(*argv: str) -> tuple[int, str, str]:
    """``linview ARGV`` in this process: (exit status, stdout, stderr)."""
    import contextlib
    import io

    from linview.app.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def floats(v) -> list[float]:
    """A NumPy row as plain floats (psycopg2 adapts lists of floats to float8[])."""
    return [float(x) for x in v]
