"""``@EVAL(expression)``: the value of a constant expression, as a literal.

>>> from sluice.core.model.macro import expand_sql
>>> expand_sql("@DEF(x, 1); SELECT @EVAL(5 + @x) AS six")
'SELECT 6 AS six'
"""

from __future__ import annotations

from sqlglot import exp

from sluice.core.model.macro import constant
from sluice.core.model.macro.evaluator import Evaluator
from sluice.core.model.macro.registry import Result, operator


@operator("EVAL", ("expression",))
def eval_(ev: Evaluator, args: dict[str, exp.Expr], rest: list[exp.Expr]) -> Result:
    return constant.to_expression(ev.constant(args["expression"], "the argument of @EVAL"))
