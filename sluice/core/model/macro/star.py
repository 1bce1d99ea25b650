"""``@STAR(relation[, alias, exclude, prefix, suffix, quote_identifiers])``: a relation's columns.

Each column is cast to its type (when the type is known) and may be renamed with a prefix
and suffix; ``exclude`` (also spelled ``except_``) leaves columns out. Sluice knows a
relation's columns from ``columns (...)`` in its MODEL, a seed's CSV, ``columns:`` in
external_models.yaml, or the query of an upstream model that names all its columns.

>>> from sluice.core.model.macro import expand_sql
>>> cols = {"raw.foo": [("a", "STRING"), ("c", "STRING"), ("d", "INT")]}
>>> expand_sql("SELECT @STAR(raw.foo, bar, [c], 'baz_') FROM raw.foo AS bar", columns=cols)
'SELECT CAST(`bar`.`a` AS STRING) AS `baz_a`, CAST(`bar`.`d` AS INT) AS `baz_d` FROM raw.foo AS bar'
>>> expand_sql("SELECT @STAR(raw.foo, exclude := [a, d], suffix := '_x', quote_identifiers := FALSE) FROM raw.foo", columns=cols)
'SELECT CAST(c AS STRING) AS c_x FROM raw.foo'
"""

from __future__ import annotations

from sqlglot import exp

from sluice.core.model.macro.evaluator import Evaluator
from sluice.core.model.macro.registry import MacroError, Result, flag, operator, text_of


@operator(
    "STAR",
    ("relation", "alias", "exclude", "prefix", "suffix", "quote_identifiers"),
    1,
    aliases=(("except_", "exclude"), ("except", "exclude")),
)
def star(ev: Evaluator, args: dict[str, exp.Expr], rest: list[exp.Expr]) -> Result:
    relation = ev.value(args["relation"], "@STAR's relation")
    columns = ev.columns(relation, "STAR")
    alias = None
    if "alias" in args:
        given = ev.value(args["alias"], "@STAR's alias")
        if not isinstance(given, exp.Column | exp.Identifier | exp.Literal) or (
            isinstance(given, exp.Column) and given.table
        ):
            raise MacroError(
                f"@STAR's alias must be a name, got {given.sql(ev.env.dialect)}",
                "write the alias the FROM clause gives the table, e.g. @STAR(s.t, t)",
            )
        alias = given.name
    excluded = {e.name.lower() for e in (ev.items(args["exclude"]) if "exclude" in args else [])}
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
        column: exp.Expr = exp.column(name, table=alias, quoted=quote)
        if type_:
            column = exp.cast(column, exp.DataType.build(type_, dialect="spark"))
        out.append(exp.alias_(column, f"{prefix}{name}{suffix}", quoted=quote))
    if not out:
        raise MacroError(
            "@STAR leaves no column: every column is excluded",
            "exclude fewer columns",
        )
    return out
