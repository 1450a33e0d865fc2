"""Helpers of the PostgreSQL tests; the server itself is :mod:`linview.app.postgres.server`
(``initdb`` into a temporary folder, started as the ``postgres`` user when we are root)."""

from __future__ import annotations

import numpy as np

from linview.app.postgres.server import PASSWORD_USER, PgServer, bindir

__all__ = ["PASSWORD", "PASSWORD_USER", "PgServer", "bindir", "floats", "obs_table", "run_cli"]

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


def obs_table(conn, rows: int, cols: int, seed: int) -> np.random.Generator:
    """Table ``obs(id int PRIMARY KEY, x float8[], y float8)`` holding ``rows`` random
    observations (ids 1..rows; per row ``cols`` values of x, then y, all drawn from one
    generator of ``seed``); the generator, for more draws."""
    rng = np.random.default_rng(seed)
    cur = conn.cursor()
    cur.execute("CREATE TABLE obs (id int PRIMARY KEY, x float8[], y float8)")
    for i in range(1, rows + 1):
        cur.execute("INSERT INTO obs VALUES (%s, %s, %s)",
                    (i, floats(rng.standard_normal(cols)), float(rng.standard_normal())))
    return rng
