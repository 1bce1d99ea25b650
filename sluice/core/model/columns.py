"""The columns the loader knows of a table, for macros that ask (pure).

A Python macro's ``evaluator.columns_to_types("schema.table")`` is answered from here
while the project loads: the declared ``columns`` of a model (SQL or Python), a seed's
columns (declared, or read from its CSV header), an external model's, and otherwise a
SQL model's output columns when every one has a name (no ``*``), typed by its cast
(``x::INT AS y``) or ``UNKNOWN``.

>>> from sluice.core.model.definition import Kind, KindName, Model
>>> parent = Model(name="shop.orders", kind=Kind(KindName.FULL), path="orders.sql", line=1,
...                query_sql="SELECT id, CAST(amount AS DOUBLE) AS amount, note FROM raw.o")
>>> table_columns("shop.orders", {"shop.orders": parent})
[('id', 'UNKNOWN'), ('amount', 'DOUBLE'), ('note', 'UNKNOWN')]
>>> table_columns("shop.missing", {"shop.orders": parent}) is None
True
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp

from sluice.core.model.definition import Model

UNKNOWN = "UNKNOWN"


def table_columns(name: str, models: Mapping[str, Model]) -> list[tuple[str, str]] | None:
    """The (name, Spark type) columns of the table ``name`` (lower case) among
    ``models`` (by name), or None when it is not one of them or its columns are unknown."""
    model = models.get(name.lower())
    if model is None:
        return None
    if model.columns:
        return [(c, t) for c, t in model.columns]
    if model.query_sql is None:
        return None
    try:
        query = model.query
    except Exception:
        return None
    if not isinstance(query, exp.Query):
        return None
    found: list[tuple[str, str]] = []
    for projection in query.selects:
        column = projection.alias_or_name
        if not column or isinstance(projection, exp.Star) or projection.is_star:
            return None
        value = projection.this if isinstance(projection, exp.Alias) else projection
        kind = value.to.sql("spark") if isinstance(value, exp.Cast) else UNKNOWN
        found.append((column, kind))
    return found
