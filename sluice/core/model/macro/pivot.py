"""``@PIVOT(column, values[, alias, agg, cmp, prefix, suffix, then_value, else_value, quote,
distinct])``: one aggregated ``CASE`` column per value.

>>> from sluice.core.model.macro import expand_sql
>>> expand_sql("SELECT d, @PIVOT(status, ['ok', 'ko']) FROM t GROUP BY 1")
"SELECT d, SUM(CASE WHEN status = 'ok' THEN 1 ELSE 0 END) AS `'ok'`, SUM(CASE WHEN status = 'ko' THEN 1 ELSE 0 END) AS `'ko'` FROM t GROUP BY 1"
"""

from __future__ import annotations

from sqlglot import exp

from sluice.core.model.macro.evaluator import Evaluator
from sluice.core.model.macro.registry import MacroError, Result, flag, operator, text_of

_CMP: dict[str, type[exp.Binary]] = {
    "=": exp.EQ,
    "!=": exp.NEQ,
    "<>": exp.NEQ,
    "<": exp.LT,
    ">": exp.GT,
    "<=": exp.LTE,
    ">=": exp.GTE,
}


@operator(
    "PIVOT",
    (
        "column",
        "values",
        "alias",
        "agg",
        "cmp",
        "prefix",
        "suffix",
        "then_value",
        "else_value",
        "quote",
        "distinct",
    ),
    2,
)
def pivot(ev: Evaluator, args: dict[str, exp.Expr], rest: list[exp.Expr]) -> Result:
    column = ev.value(args["column"], "@PIVOT's column")
    values = ev.items(args["values"])

    def option(name: str, default: object) -> object:
        return ev.constant(args[name], name) if name in args else default

    alias = flag(option("alias", True), "alias", "PIVOT")
    quote = flag(option("quote", True), "quote", "PIVOT")
    distinct = flag(option("distinct", False), "distinct", "PIVOT")
    agg = text_of(ev.value(args["agg"]), "agg", "PIVOT") if "agg" in args else "SUM"
    cmp = text_of(ev.value(args["cmp"]), "cmp", "PIVOT") if "cmp" in args else "="
    prefix = text_of(ev.value(args["prefix"]), "prefix", "PIVOT") if "prefix" in args else ""
    suffix = text_of(ev.value(args["suffix"]), "suffix", "PIVOT") if "suffix" in args else ""
    then_value = ev.value(args["then_value"]) if "then_value" in args else exp.Literal.number(1)
    else_value = ev.value(args["else_value"]) if "else_value" in args else exp.Literal.number(0)
    if cmp not in _CMP:
        raise MacroError(f"@PIVOT: unknown comparison '{cmp}'", f"use one of {' '.join(_CMP)}")
    if not agg.replace("_", "").isalnum():
        raise MacroError(f"@PIVOT: '{agg}' is not a function name", "write agg := 'SUM'")
    out: list[exp.Expr] = []
    for value in values:
        case = (
            exp.case()
            .when(_CMP[cmp](this=column.copy(), expression=value.copy()), then_value.copy())
            .else_(else_value.copy())
        )
        projection: exp.Expr = exp.func(agg, exp.Distinct(expressions=[case]) if distinct else case)
        if alias:
            # As SQLMesh: the value's SQL, quotes included ("'ok'"); unquoted, its text.
            shown = (
                value.name
                if not quote and isinstance(value, exp.Literal)
                else value.sql(ev.env.dialect)
            )
            projection = exp.alias_(projection, f"{prefix}{shown}{suffix}", quoted=quote)
        out.append(projection)
    return out
