"""``@EACH(items, x -> expression)``: the expression for each item, as a list.

>>> from sluice.core.model.macro import expand_sql
>>> expand_sql("SELECT @EACH([a, b], x -> x + 1 AS x_@x) FROM t")
'SELECT a + 1 AS x_a, b + 1 AS x_b FROM t'
"""

from __future__ import annotations

from sqlglot import exp

from sluice.core.model.macro.evaluator import Evaluator
from sluice.core.model.macro.registry import Result, operator


@operator("EACH", ("items", "function"))
def each(ev: Evaluator, args: dict[str, exp.Expr], rest: list[exp.Expr]) -> Result:
    out: list[exp.Expr] = []
    for item in ev.items(args["items"]):
        result = ev.apply(args["function"], [item], "@EACH")
        out.extend(ev._as_list(result))
    return out
