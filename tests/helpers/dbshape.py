"""What a database holds (tables, columns, indexes, per SQLAlchemy's inspector) and what
the owners of the state database declare, in one comparable form."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Dialect, Engine, MetaData, inspect, select

from sluice.bot.flow.audit import AUDIT
from sluice.bot.flow.ledger_schema import LEDGER
from sluice.bot.queue.schema import QUEUE
from sluice.core.db import migrate as runner
from sluice.core.state.migrations import STATE

TRACKS = (STATE, QUEUE, LEDGER, AUDIT)
"""Every track, in the order the owners migrate them."""

Shape = dict[str, dict[str, Any]]


def declared(dialect: Dialect, *metadatas: MetaData) -> Shape:
    """The tables of ``metadatas`` (default: every owner's, and the version table)."""
    if not metadatas:
        metadatas = (*(t.tables for t in TRACKS), runner.metadata)
    shape: Shape = {}
    for md in metadatas:
        for table in md.tables.values():
            shape[table.name] = {
                "columns": {
                    c.name: (c.type.compile(dialect=dialect), c.nullable) for c in table.columns
                },
                "primary_key": sorted(c.name for c in table.primary_key.columns),
                "indexes": {
                    i.name: (tuple(c.name for c in i.columns), bool(i.unique))
                    for i in table.indexes
                },
            }
    return shape


def inspected(engine: Engine | Connection) -> Shape:
    """The tables the database holds."""
    insp = inspect(engine)
    shape: Shape = {}
    for name in insp.get_table_names():
        shape[name] = {
            "columns": {
                c["name"]: (str(c["type"].compile(dialect=insp.dialect)), c["nullable"])
                for c in insp.get_columns(name)
            },
            "primary_key": sorted(insp.get_pk_constraint(name)["constrained_columns"]),
            "indexes": {
                str(i["name"]): (tuple(i["column_names"]), bool(i["unique"]))
                for i in insp.get_indexes(name)
            },
        }
    return shape


def recorded(engine: Engine) -> dict[str, list[int]]:
    """Per track, the migration numbers in the version table."""
    out: dict[str, list[int]] = {}
    with engine.connect() as conn:
        rows = conn.execute(
            select(runner.versions.c.track, runner.versions.c.number).order_by("number")
        )
        for track, number in rows:
            out.setdefault(track, []).append(number)
    return out
