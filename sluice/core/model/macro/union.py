"""``@UNION([condition,] ['all' | 'distinct',] table, table, ...)``: the union of the
tables' shared columns.

Only columns every table has, with the same type, are kept (in the first table's order),
each cast to that type; a column whose type is unknown on one side takes the other's. The
type defaults to ALL. A leading TRUE/FALSE condition decides whether to union at all:
when FALSE, only the first table is selected (with the columns shared by all).

>>> from sluice.core.model.macro import expand_sql
>>> cols = {"s.foo": [("a", "INT"), ("b", "STRING"), ("c", "STRING")],
...         "s.bar": [("a", "INT"), ("b", "INT"), ("c", "STRING")]}
>>> expand_sql("@UNION('distinct', s.foo, s.bar)", columns=cols)
'SELECT CAST(a AS INT) AS a, CAST(c AS STRING) AS c FROM s.foo UNION SELECT CAST(a AS INT) AS a, CAST(c AS STRING) AS c FROM s.bar'
>>> expand_sql("@UNION(1 > 2, 'all', s.foo, s.bar)", columns=cols)
'SELECT CAST(a AS INT) AS a, CAST(c AS STRING) AS c FROM s.foo'
"""

from __future__ import annotations

from sqlglot import exp

from sluice.core.model.macro import constant
from sluice.core.model.macro.evaluator import Evaluator
from sluice.core.model.macro.registry import MacroError, Result, operator

_USAGE = "write @UNION([condition,] ['all' | 'distinct',] table, table, ...)"


def _type(type_: str) -> str:
    return exp.DataType.build(type_, dialect="spark").sql("spark") if type_ else ""


def _condition(ev: Evaluator, node: exp.Expr) -> bool | None:
    """The leading argument's truth, when it is a condition (not a table, not a type)."""
    value = ev.value(node, "@UNION's first argument")
    if isinstance(value, exp.Literal) and value.is_string:
        return None
    try:
        result = constant.evaluate(value)
    except constant.NotConstant:
        return None  # a table
    if isinstance(result, bool) or result is None:
        return bool(result)
    raise MacroError(f"@UNION's condition must be TRUE or FALSE, got {result!r}", _USAGE)


@operator("UNION", (), varargs="tables", min_rest=1)
def union(ev: Evaluator, args: dict[str, exp.Expr], rest: list[exp.Expr]) -> Result:
    rest = list(rest)
    enabled = _condition(ev, rest[0])
    if enabled is not None:
        rest = rest[1:]
    kind = "ALL"
    first = ev.value(rest[0], "@UNION's type") if rest else None
    if isinstance(first, exp.Literal) and first.is_string:
        kind = str(first.this).upper()
        rest = rest[1:]
        if kind not in ("ALL", "DISTINCT"):
            raise MacroError(f"@UNION's type must be 'ALL' or 'DISTINCT', got '{kind}'", _USAGE)
    if not rest:
        raise MacroError("@UNION needs at least one table", _USAGE)
    tables = [ev.value(t, "a table") for t in rest]
    schemas = [{n: _type(t) for n, t in ev.columns(table, "UNION")} for table in tables]
    shared: list[tuple[str, str]] = []
    for name in schemas[0]:
        if not all(name in s for s in schemas[1:]):
            continue
        types = {s[name] for s in schemas if s[name]}
        if len(types) <= 1:
            shared.append((name, schemas[0][name] or next(iter(types), "")))
    if not shared:
        raise MacroError(
            "@UNION: the tables have no column of the same name and type",
            "@UNION keeps only the columns every table has with the same type; cast them "
            "to one type upstream, or write the UNION yourself",
        )

    def column(name: str, type_: str) -> exp.Expr:
        value: exp.Expr = exp.column(name)
        if type_:
            value = exp.cast(value, exp.DataType.build(type_, dialect="spark"))
        return exp.alias_(value, name)

    selects = [
        exp.select(*(column(n, t) for n, t in shared)).from_(exp.to_table(table.sql("spark")))
        # FALSE: the first table alone, with the columns the union would have had
        for table in (tables[:1] if enabled is False else tables)
    ]
    query: exp.Query = selects[0]
    for select in selects[1:]:
        query = exp.union(query, select, distinct=kind == "DISTINCT")
    return query
