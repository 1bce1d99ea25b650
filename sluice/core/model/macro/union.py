"""``@UNION('all' | 'distinct', table, table, ...)``: the union of the tables' shared columns.

Only columns every table has, with the same type, are kept, each cast to that type.

>>> from sluice.core.model.macro import expand_sql
>>> cols = {"s.foo": [("a", "INT"), ("b", "STRING"), ("c", "STRING")],
...         "s.bar": [("a", "INT"), ("b", "INT"), ("c", "STRING")]}
>>> expand_sql("@UNION('distinct', s.foo, s.bar)", columns=cols)
'SELECT CAST(a AS INT) AS a, CAST(c AS STRING) AS c FROM s.foo UNION SELECT CAST(a AS INT) AS a, CAST(c AS STRING) AS c FROM s.bar'
"""

from __future__ import annotations

from sqlglot import exp

from sluice.core.model.macro.evaluator import Evaluator
from sluice.core.model.macro.registry import MacroError, Result, operator, text_of


def _type(type_: str) -> str:
    return exp.DataType.build(type_, dialect="spark").sql("spark")


@operator("UNION", ("type",), varargs="tables", min_rest=1)
def union(ev: Evaluator, args: dict[str, exp.Expr], rest: list[exp.Expr]) -> Result:
    kind = text_of(ev.value(args["type"], "@UNION's type"), "the union type", "UNION").upper()
    if kind not in ("ALL", "DISTINCT"):
        raise MacroError(f"@UNION's type must be 'ALL' or 'DISTINCT', got '{kind}'", "write 'ALL'")
    tables = [ev.value(t, "a table") for t in rest]
    schemas = [dict((n, _type(t)) for n, t in ev.columns(table, "UNION")) for table in tables]
    shared = [
        (name, type_)
        for name, type_ in schemas[0].items()
        if all(s.get(name) == type_ for s in schemas[1:])
    ]
    if not shared:
        raise MacroError("@UNION: the tables have no column of the same name and type", None)
    selects = [
        exp.select(
            *(
                exp.alias_(exp.cast(exp.column(n), exp.DataType.build(t, dialect="spark")), n)
                for n, t in shared
            )
        ).from_(exp.to_table(table.sql("spark")))
        for table in tables
    ]
    query: exp.Query = selects[0]
    for select in selects[1:]:
        query = exp.union(query, select, distinct=kind == "DISTINCT")
    return query
