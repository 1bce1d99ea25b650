"""``@STAR(relation[, alias, except, prefix, suffix, quote_identifiers])``: a relation's columns.

Each column is cast to its declared type and may be renamed with a prefix and suffix.
Sluice knows a relation's columns from ``columns (...)`` in its MODEL or ``columns:`` in
external_models.yaml.

>>> from sluice.core.model.macro import expand_sql
>>> cols = {"raw.foo": [("a", "STRING"), ("c", "STRING"), ("d", "INT")]}
>>> expand_sql("SELECT @STAR(raw.foo, bar, [c], 'baz_') FROM raw.foo AS bar", columns=cols)
'SELECT CAST(`bar`.`a` AS STRING) AS `baz_a`, CAST(`bar`.`d` AS INT) AS `baz_d` FROM raw.foo AS bar'
"""

from __future__ import annotations

from sqlglot import exp

from sluice.core.model.macro.evaluator import Evaluator
from sluice.core.model.macro.registry import Result, flag, operator, text_of


@operator(
    "STAR",
    ("relation", "alias", "except", "prefix", "suffix", "quote_identifiers"),
    1,
    aliases=(("except_", "except"), ("exclude", "except")),
)
def star(ev: Evaluator, args: dict[str, exp.Expr], rest: list[exp.Expr]) -> Result:
    relation = ev.value(args["relation"], "@STAR's relation")
    columns = ev.columns(relation, "STAR")
    alias = ev.value(args["alias"], "@STAR's alias").name if "alias" in args else None
    excluded = {e.name.lower() for e in (ev.items(args["except"]) if "except" in args else [])}
    prefix = text_of(ev.value(args["prefix"]), "prefix", "STAR") if "prefix" in args else ""
    suffix = text_of(ev.value(args["suffix"]), "suffix", "STAR") if "suffix" in args else ""
    quote = (
        flag(
            ev.constant(args["quote_identifiers"], "quote_identifiers"), "quote_identifiers", "STAR"
        )
        if "quote_identifiers" in args
        else True
    )
    out: list[exp.Expr] = []
    for name, type_ in columns:
        if name in excluded:
            continue
        column = exp.column(name, table=alias, quoted=quote)
        cast = exp.cast(column, exp.DataType.build(type_, dialect="spark"))
        out.append(exp.alias_(cast, f"{prefix}{name}{suffix}", quoted=quote))
    return out
