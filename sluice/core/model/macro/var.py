"""``@VAR('name'[, default])``: a variable of config.yaml (``@name`` is the short form).

>>> from sluice.core.model.macro import expand_sql
>>> expand_sql("SELECT @VAR('limit'), @VAR('missing', 0), @limit FROM t", variables={"limit": 5})
'SELECT 5, 0, 5 FROM t'
"""

from __future__ import annotations

from sqlglot import exp

from sluice.core.model.macro import constant
from sluice.core.model.macro.evaluator import Evaluator
from sluice.core.model.macro.registry import MacroError, Result, operator, text_of


@operator("VAR", ("name", "default"), 1)
def var(ev: Evaluator, args: dict[str, exp.Expr], rest: list[exp.Expr]) -> Result:
    name = text_of(args["name"], "the variable name", "VAR").lower()
    variables = ev._variables
    if name in variables:
        return constant.to_expression(variables[name])
    if "default" in args:
        return ev.expand(args["default"].copy())
    raise MacroError(
        f"variable '{name}' is not defined",
        f"add '{name}' under 'variables:' in config.yaml or give a default: @VAR('{name}', value)",
    )
