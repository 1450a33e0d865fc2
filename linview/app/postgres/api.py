"""The Python face of live views over PostgreSQL: a source object.

    from linview.app.postgres.api import PostgresSource

    src = PostgresSource("postgresql://me@db:5432/shop", tables={"X": "obs.x", "Y": "obs.y"})
    views = prog.load(**src.inputs())        # the inputs as of one snapshot, loaded
    stats = src.run(prog, once=True)         # what ``linview run --source`` does
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from linview.app.postgres.tables import TableInput, parse_table_spec


@dataclass
class PostgresSource:
    """Tables as a program's inputs: ``tables`` maps an input to ``TABLE.COLUMN`` (rows
    layout; ``SCHEMA.TABLE.COLUMN`` too); the other fields are ``linview run``'s options."""

    dsn: str
    tables: dict[str, str]
    key: str = "id"
    sink: str = "linview"
    params: dict[str, float] = field(default_factory=dict)
    checkpoint: str | None = None
    on_error: str = "stop"
    window_ms: float = 50.0
    shapes: dict[str, tuple[int, int]] = field(default_factory=dict)

    def _inputs(self) -> list[TableInput]:
        return [parse_table_spec(f"{name}={where}") for name, where in self.tables.items()]

    def inputs(self) -> dict[str, np.ndarray | float]:
        """Every input as of one snapshot of the tables (COPY), the params beside them."""
        from linview.app.postgres import catalog
        from linview.app.postgres.source import Connection

        conn = Connection(self.dsn)
        sql = conn.sql()
        try:
            tables: dict[str, list[TableInput]] = {}
            for ti in self._inputs():
                tables.setdefault(ti.name, []).append(ti)
            catalog.columns(sql, {t: (tis[0].schema, tis[0].table,
                                      [self.key, *(ti.column for ti in tis)])
                                  for t, tis in tables.items()})
            arrays, _ = catalog.load(sql, tables, self.key, None, 0, self.shapes)
        finally:
            sql.close()
        return {**arrays, **self.params}

    def run(self, prog, *, once: bool = True, restart: bool = False, warn=print) -> dict:
        """Keep ``prog``'s outputs fresh in the sink's tables (``once``: apply what was
        committed before the start, then return); the stats of the run."""
        from linview.app.postgres.runner import PostgresRun

        run = PostgresRun(prog, dsn=self.dsn, tables=self._inputs(), key=self.key,
                          sink=self.sink, params=[f"{k}={v}" for k, v in self.params.items()],
                          checkpoint=self.checkpoint, restart=restart, on_error=self.on_error,
                          window=self.window_ms / 1000, shapes=self.shapes, warn=warn)
        return run.serve(once=once)
