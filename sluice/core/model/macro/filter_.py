"""``@FILTER(items, x -> condition)``: the items for which the condition holds.

>>> from sluice.core.model.macro import expand_sql
>>> expand_sql("SELECT @EACH(@FILTER([1, 2, 3], x -> x > 1), x -> x * 10) FROM t")
'SELECT 2 * 10, 3 * 10 FROM t'
"""

from __future__ import annotations

from sqlglot import exp

from sluice.core.model.macro import constant
from sluice.core.model.macro.evaluator import Evaluator
from sluice.core.model.macro.registry import MacroError, Result, operator


@operator("FILTER", ("items", "function"))
def filter_(ev: Evaluator, args: dict[str, exp.Expr], rest: list[exp.Expr]) -> Result:
    kept: list[exp.Expr] = []
    for item in ev.items(args["items"]):
        result = ev.apply(args["function"], [item], "@FILTER")
        condition = ev._one(result, "@FILTER's function")
        try:
            value = constant.evaluate(condition)
        except constant.NotConstant:
            raise MacroError(
                f"@FILTER's condition must be evaluable when the model loads; "
                f"'{condition.sql(ev.env.dialect)}' is not",
                "compare literals: x -> x > 1",
            ) from None
        if value is True:
            kept.append(item)
    return kept
