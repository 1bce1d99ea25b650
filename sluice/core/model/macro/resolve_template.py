"""``@RESOLVE_TEMPLATE(template[, mode])``: the model's own physical table, by its parts.

Sluice names a model's physical table when the model runs, so only the whole name is
available: ``'@{catalog_name}.@{schema_name}.@{table_name}'`` (or without the catalog)
with ``mode := 'table'`` becomes ``@this_model``. Other templates are refused.

>>> from sluice.core.model.macro import expand_sql
>>> expand_sql("SELECT * FROM @RESOLVE_TEMPLATE('@{schema_name}.@{table_name}', mode := 'table')")
'SELECT * FROM __sluice_macro__this_model'
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


@operator("RESOLVE_TEMPLATE", ("template", "mode"), 1)
def resolve_template(ev: Evaluator, args: dict[str, exp.Expr], rest: list[exp.Expr]) -> Result:
    template = text_of(ev.value(args["template"]), "the template", "RESOLVE_TEMPLATE")
    mode = (
        text_of(ev.value(args["mode"]), "mode", "RESOLVE_TEMPLATE").lower()
        if "mode" in args
        else "literal"
    )
    if mode not in ("literal", "table"):
        raise MacroError(f"@RESOLVE_TEMPLATE: unknown mode '{mode}'", "write 'literal' or 'table'")
    if mode != "table" or not _WHOLE.match(template):
        raise MacroError(
            f"@RESOLVE_TEMPLATE('{template}', mode := '{mode}') is not supported by Sluice",
            "Sluice names physical tables when a model runs; only "
            "'@{schema_name}.@{table_name}' with mode := 'table' (the model's own table, "
            "@this_model) is available",
        )
    return exp.to_table(lexer.PREFIX + "this_model")
