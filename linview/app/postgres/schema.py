"""Schema changes of mapped tables: ALTER TABLE (seen in the stream's Relation messages, or
in the catalog after a stop) and TRUNCATE stop the run; a wrong answer is never an option."""

from __future__ import annotations

from linview.app.postgres.pgoutput import format_lsn
from linview.errors import InputError

RESTART = ("linview's copy of the inputs no longer matches the table: run again with "
           "--restart to load the tables afresh")


class SchemaChanged(InputError):
    """ALTER TABLE or TRUNCATE on a mapped table: the run stops."""


def check_schema(tx, columns: dict[str, list]) -> None:
    """Stop at a TRUNCATE of a mapped table, or at a Relation message whose columns (names
    and types) differ from those linview started with (``columns``)."""
    for name in tx.truncated:
        if name in columns:
            raise SchemaChanged(f"TRUNCATE of table {name} (transaction at LSN "
                                f"{format_lsn(tx.commit.end_lsn)}): linview's inputs no "
                                "longer match it", hint=RESTART)
    for rel in tx.relations:
        name = f"{rel.schema}.{rel.table}"
        if name not in columns:
            continue
        now = [(c.name, c.type_oid) for c in rel.columns]
        was = [tuple(c) for c in columns[name]]
        if now != was:
            raise SchemaChanged(f"ALTER TABLE {name} (transaction at LSN "
                                f"{format_lsn(tx.commit.end_lsn)}): its columns (name, "
                                f"type id) were {describe(was)} and are now {describe(now)}",
                                hint=RESTART)


def describe(cols) -> str:
    """Columns (name, type oid) in words."""
    return ", ".join(f"{n} ({t})" for n, t in cols)


def static_changed(name: str, table: str):
    raise InputError(f"table {table} changed, but input {name} that it holds is not dynamic "
                     "(a value the program was compiled around, e.g. a scalar)",
                     hint=f"{RESTART}, or declare '%#linview dynamic {name}'")


def check_columns(ckpt, catalog: dict) -> None:
    """The mapped tables' columns (name, type id) now against those the checkpoint
    ``ckpt`` started with (``columns.json``): an ALTER TABLE while linview was stopped."""
    import json

    cf = ckpt / "columns.json"
    if not cf.exists():
        return
    was = {t: [tuple(c) for c in cols] for t, cols in json.loads(cf.read_text()).items()}
    for name, cols in catalog.items():
        now = [tuple(c) for c in cols]
        if was.get(name, now) != now:
            raise SchemaChanged(f"ALTER TABLE {name} since checkpoint {ckpt}: its columns "
                                f"(name, type id) were {describe(was[name])} and are now "
                                f"{describe(now)}", hint=RESTART)
