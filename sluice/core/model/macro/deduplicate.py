"""``@DEDUPLICATE(relation, partition_by, order_by)``: one row per partition, the first in order.

``order_by`` is a list of strings such as ``'ts DESC NULLS LAST'``. Spark has no QUALIFY,
so when Sluice knows the relation's columns it selects them from a subquery that numbers
the rows; otherwise sqlglot's rewrite of QUALIFY keeps its row number column ``_w``.

>>> from sluice.core.model.macro import expand_sql
>>> expand_sql("@DEDUPLICATE(s.t, [id], ['ts DESC'])", columns={"s.t": [("id", "INT"), ("ts", "INT")]})
'SELECT id, ts FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY id ORDER BY ts DESC) AS _w FROM s.t) AS _t WHERE _w = 1'
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from sluice.core.model.macro.evaluator import Evaluator
from sluice.core.model.macro.registry import MacroError, Result, operator, text_of


@operator("DEDUPLICATE", ("relation", "partition_by", "order_by"))
def deduplicate(ev: Evaluator, args: dict[str, exp.Expr], rest: list[exp.Expr]) -> Result:
    relation = ev.value(args["relation"], "@DEDUPLICATE's relation")
    partition = ev.items(args["partition_by"])
    if not partition:
        raise MacroError("@DEDUPLICATE needs columns to partition by", "write [id]")
    order: list[exp.Expr] = []
    for item in ev.items(args["order_by"]):
        text = text_of(item, "each order_by entry", "DEDUPLICATE")
        try:
            order.append(sqlglot.parse_one(text, read=ev.env.dialect, into=exp.Ordered))
        except (ParseError, TokenError):
            raise MacroError(
                f"@DEDUPLICATE: cannot read order_by entry '{text}'",
                "write entries like 'updated_at DESC NULLS LAST'",
            ) from None
    if not order:
        raise MacroError("@DEDUPLICATE needs an order_by", "write ['updated_at DESC']")
    window = exp.Window(
        this=exp.RowNumber(),
        partition_by=partition,
        order=exp.Order(expressions=order),
    )
    table = exp.to_table(relation.sql(ev.env.dialect), dialect=ev.env.dialect)
    known = (
        ev.env.columns_of(table.sql("spark").replace("`", "").lower())
        if ev.env.columns_of
        else None
    )
    if known:
        # Spark has no QUALIFY: number the rows in a subquery and keep the table's columns.
        ev.used_columns = True
        numbered = exp.select("*", exp.alias_(window, "_w")).from_(table)
        return (
            exp.select(*(exp.column(name) for name, _ in known))
            .from_(numbered.subquery("_t"))
            .where(exp.EQ(this=exp.column("_w"), expression=exp.Literal.number(1)))
        )
    query = exp.select("*").from_(table)
    query.set("qualify", exp.Qualify(this=exp.EQ(this=window, expression=exp.Literal.number(1))))
    return query
