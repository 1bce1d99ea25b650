"""``@RESOLVE_TEMPLATE(template[, mode])``: the parts of the model's own physical table.

The template's ``@{catalog_name}``, ``@{schema_name}`` and ``@{table_name}`` stand for the
parts of the table Sluice builds for this version of the model (see
:mod:`sluice.core.snapshot.naming`: ``sluice__<schema>.<schema>__<table>__<version>``, in
Spark's ``spark_catalog`` unless the name says another catalog). The version is a hash of
the query itself, so, like ``@this_model``, the parts are known only when the model runs:
they stay placeholders until then (a model's fingerprint covers the template, not the
name).

``mode := 'literal'`` (the default) gives a string, e.g. for a column saying which table
wrote a row. ``mode := 'table'`` gives a table, and Sluice allows only the model's own
table (``'[@{catalog_name}.]@{schema_name}.@{table_name}'``, the same as ``@this_model``):
a table derived from the name (a ``$properties`` metadata table, another schema) is not a
model or external table Sluice can check at plan time, so it is refused.

>>> from sluice.core.model.macro import expand_sql
>>> expand_sql("SELECT * FROM @RESOLVE_TEMPLATE('@{schema_name}.@{table_name}', mode := 'table')")
'SELECT * FROM __sluice_macro__this_model'
>>> expand_sql("SELECT @RESOLVE_TEMPLATE('@{schema_name}/@{table_name}') AS written_by")
"SELECT CONCAT(__sluice_macro__this_model_schema, '/', __sluice_macro__this_model_table) AS written_by"
"""

from __future__ import annotations

import re

from sqlglot import exp

from sluice.core.model.macro import lexer
from sluice.core.model.macro.evaluator import Evaluator
from sluice.core.model.macro.registry import MacroError, Result, operator, text_of

_WHOLE = re.compile(
    r"^\s*(?:@\{\s*catalog_name\s*\}\.)?@\{\s*schema_name\s*\}\.@\{\s*table_name\s*\}\s*$", re.I
)
_PART = re.compile(r"@\{\s*(\w+)\s*\}")
PARTS = {
    "catalog_name": "this_model_catalog",
    "schema_name": "this_model_schema",
    "table_name": "this_model_table",
}
"""Each placeholder and the run-time value (``macros.render``) it becomes."""


@operator("RESOLVE_TEMPLATE", ("template", "mode"), 1)
def resolve_template(ev: Evaluator, args: dict[str, exp.Expr], rest: list[exp.Expr]) -> Result:
    template = text_of(ev.value(args["template"]), "the template", "RESOLVE_TEMPLATE")
    mode = (
        text_of(ev.value(args["mode"]), "mode", "RESOLVE_TEMPLATE").lower()
        if "mode" in args
        else "literal"
    )
    if mode not in ("literal", "table"):
        raise MacroError(
            f"@RESOLVE_TEMPLATE: unknown mode '{mode}'", "write mode := 'literal' or 'table'"
        )
    unknown = [m.group(1) for m in _PART.finditer(template) if m.group(1).lower() not in PARTS]
    if unknown:
        raise MacroError(
            f"@RESOLVE_TEMPLATE: unknown placeholder @{{{unknown[0]}}}",
            "the template may use @{catalog_name}, @{schema_name} and @{table_name}",
        )
    if mode == "table":
        if not _WHOLE.match(template):
            raise MacroError(
                f"@RESOLVE_TEMPLATE('{template}', mode := 'table') names a table Sluice cannot "
                "check at plan time",
                "a query reads models and external tables; the only table a template may "
                "name is the model's own, '@{schema_name}.@{table_name}' (the same as "
                "@this_model, for incremental models)",
            )
        return exp.to_table(lexer.PREFIX + "this_model")
    pieces: list[exp.Expr] = []
    last = 0
    for match in _PART.finditer(template):
        if match.start() > last:
            pieces.append(exp.Literal.string(template[last : match.start()]))
        pieces.append(exp.column(lexer.PREFIX + PARTS[match.group(1).lower()]))
        last = match.end()
    if last < len(template) or not pieces:
        pieces.append(exp.Literal.string(template[last:]))
    return pieces[0] if len(pieces) == 1 else exp.func("CONCAT", *pieces)
