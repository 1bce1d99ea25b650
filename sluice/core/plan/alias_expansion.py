"""How large sqlglot's ``qualify`` makes a query: the bound every caller checks first.

Spark lets a projection name an earlier one's alias (``x + 1 AS y, y * 2 AS z``), and
qualify replaces each such reference by the expression it stands for, itself already
expanded. So ``a0 + a0 AS a1, a1 + a1 AS a2, ...`` doubles with every projection: 18 of
them in a pull request's model took its plan 36 s of CPU and 550 MB in the service (red
team), 24 would take hours. :func:`expanded_size` counts what qualify would build without
building it; past :data:`MAX_EXPANDED` a caller does not qualify the query and treats
what it wanted to learn as unknown (the lineage: every column affected; the types: each
projection annotated alone; a star's columns: not known).

>>> import sqlglot
>>> expanded_size(sqlglot.parse_one("SELECT 1 AS a, a + a AS b, b + b AS c FROM t"))
49
>>> hostile = ", ".join(f"a{i} + a{i} AS a{i + 1}" for i in range(60))
>>> within(sqlglot.parse_one(f"SELECT 1 AS a0, {hostile} FROM t"))
False
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp

MAX_EXPANDED = 50_000
"""Most nodes a query may have once its alias references are expanded (as many as the
column check reads of a query: ``column_check.MAX_NODES``)."""


def expanded_size(query: exp.Expr) -> int:
    """How many nodes ``query`` has once every reference to an earlier projection's alias
    in its SELECTs (projections, WHERE, GROUP BY, HAVING, QUALIFY) is replaced by what
    that alias stands for: an upper bound of what qualify builds (the count stops soon
    after :data:`MAX_EXPANDED`)."""
    total = 0
    for select in query.find_all(exp.Select):
        sizes: dict[str, int] = {}  # an alias of this SELECT -> what it expands to
        for projection in select.expressions:
            grown = _grown(projection, sizes)
            total += grown
            if isinstance(projection, exp.Alias) and projection.alias:
                sizes[projection.alias] = grown
            if total > MAX_EXPANDED:
                return total
        for part in ("where", "group", "having", "qualify"):
            clause = select.args.get(part)
            if clause is not None:
                total += _grown(clause, sizes)
        if total > MAX_EXPANDED:
            return total
    return total


def within(query: exp.Expr) -> bool:
    """Whether ``query`` may be qualified (:func:`expanded_size` within the bound)."""
    return expanded_size(query) <= MAX_EXPANDED


def _grown(node: exp.Expr, sizes: Mapping[str, int]) -> int:
    """``node``'s nodes, each unqualified column counted with what its alias expands to."""
    count = 0
    for inner in node.walk():
        count += 1
        if isinstance(inner, exp.Column) and not inner.table:
            count += sizes.get(inner.name, 0)
    return count
