"""Which change of which table becomes which update: the :class:`~.tables.Mapper` of a run,
with the handlers of the edges and entries layouts, the inputs that the program declares
static (a change to their table stops the run) and the sizes that may grow (:mod:`.grow`).
"""

from __future__ import annotations

from linview.app.postgres import edges, entries, grow
from linview.app.postgres.keys import Keys
from linview.app.postgres.schema import static_changed
from linview.app.postgres.tables import Mapper
from linview.errors import InputError


def layouts(tables: dict, links: dict, cells: dict) -> dict[str, str]:
    """Input -> its table's layout: ``"rows"``, ``"edges"`` or ``"entries"``."""
    out = {ti.input: "rows" for tis in tables.values() for ti in tis}
    out.update({ei.input: "edges" for ei in links.values()})
    out.update({ei.input: "entries" for ei in cells.values()})
    return out


def mapper(program, views, tables: dict, links: dict, cells: dict, table_of: dict,
           key: str, keys: Keys) -> tuple[Mapper, dict]:
    """The mapper over the views' current shapes, and the sizes that may grow
    (:func:`.grow.groups`; on Spark rows tables only)."""
    vs = views._views
    dynamic = set(getattr(views, "DYNAMIC", ()))
    static = {n: t for n, t in table_of.items() if dynamic and n not in dynamic}
    for name, table in static.items():
        if table not in tables:
            raise InputError(f"input {name} reads table {table}, but the program does "
                             "not declare it dynamic", hint="add '%#linview dynamic "
                             f"{name}' to the program")
    kinds = {n: k for n, k in layouts(tables, links, cells).items() if n not in static}
    spark = hasattr(views, "distributed")
    groups = grow.groups(program, {n: k for n, k in kinds.items()
                                   if grow.can_grow(vs[n], k, spark)})
    growable = set(groups)
    shapes = {n: tuple(vs[n].shape) for n in kinds}

    def limit(name: str, axis: int):  # a growing size has no upper bound here
        return None if (name, axis) in growable else shapes[name][axis]

    handlers = {t: (lambda ch, cols, present, n=n, t=t: static_changed(n, t))
                for n, t in static.items()}
    for t, ei in links.items():
        n = limit(ei.input, 0)
        handlers[t] = (lambda ch, cols, present, ei=ei, n=n:
                       edges.changes(ei, ch, cols, n, present))
    for t, ei in cells.items():
        shape = (limit(ei.input, 0), limit(ei.input, 1))
        handlers[t] = (lambda ch, cols, present, ei=ei, shape=shape:
                       entries.changes(ei, ch, cols, shape, present))
    m = Mapper(tables, shapes, key, keys, handlers)
    m.growable = growable
    return m, groups


def widest(mapper: Mapper, tables: dict, default: int) -> int:
    """The widest (non-static) rows input's columns, or ``default`` without one."""
    return max((mapper.shapes[ti.input][1] for tis in tables.values() for ti in tis
                if ti.input in mapper.shapes), default=default)
