"""The columns a model's query returns, for ``@STAR`` and ``@UNION`` in the models that
read it (pure).

A query says its columns when every projection has a name (no ``*``, no unnamed
expression); a column's type is known when the projection casts it.

>>> query_columns("SELECT id, CAST(amount AS DECIMAL(10, 2)) AS amount, name AS who FROM s.t")
[('id', ''), ('amount', 'DECIMAL(10, 2)'), ('who', '')]
>>> query_columns("SELECT *, 1 AS one FROM s.t") is None
True
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError


def query_columns(query_sql: str) -> list[tuple[str, str]] | None:
    """(name, Spark type or "") of each column ``query_sql`` (Spark SQL) returns, or None
    when it does not name them all."""
    try:
        query = sqlglot.parse_one(query_sql, read="spark")
    except (ParseError, TokenError):
        return None
    while isinstance(query, exp.Subquery | exp.SetOperation):
        query = query.this if isinstance(query, exp.Subquery) else query.left
    if not isinstance(query, exp.Select):
        return None
    columns: list[tuple[str, str]] = []
    for projection in query.expressions:
        if isinstance(projection, exp.Star) or projection.is_star or not projection.alias_or_name:
            return None
        value = projection.this if isinstance(projection, exp.Alias) else projection
        type_ = value.to.sql("spark") if isinstance(value, exp.Cast) else ""
        columns.append((projection.alias_or_name.lower(), type_))
    return columns
