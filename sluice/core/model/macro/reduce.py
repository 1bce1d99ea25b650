"""``@REDUCE(items, (acc, item) -> expression)``: fold a list into one expression.

>>> from sluice.core.model.macro import expand_sql
>>> expand_sql("SELECT * FROM t WHERE @REDUCE(@EACH([a, b, c], x -> x = 1), (l, r) -> l AND r)")
'SELECT * FROM t WHERE a = 1 AND b = 1 AND c = 1'
"""

from __future__ import annotations

from sqlglot import exp

from sluice.core.model.macro.evaluator import Evaluator
from sluice.core.model.macro.registry import MacroError, Result, operator


@operator("REDUCE", ("items", "function"))
def reduce(ev: Evaluator, args: dict[str, exp.Expr], rest: list[exp.Expr]) -> Result:
    items = ev.items(args["items"])
    if not items:
        raise MacroError("@REDUCE got an empty list", "give it at least one item")
    acc: exp.Expr = items[0]
    for item in items[1:]:
        result = ev.apply(args["function"], [acc, item], "@REDUCE")
        acc = ev._one(result, "@REDUCE's function")
    return acc
