"""``@SAFE_DIV(a, b)``: ``a / b``, NULL when ``b`` is 0.

>>> from sluice.core.model.macro import expand_sql
>>> expand_sql("SELECT @SAFE_DIV(a, b) FROM t")
'SELECT a / NULLIF(b, 0) FROM t'
"""

from __future__ import annotations

from sqlglot import exp

from sluice.core.model.macro.evaluator import Evaluator
from sluice.core.model.macro.registry import Result, operator


@operator("SAFE_DIV", ("numerator", "denominator"))
def safe_div(ev: Evaluator, args: dict[str, exp.Expr], rest: list[exp.Expr]) -> Result:
    numerator = ev.value(args["numerator"], "the numerator")
    denominator = ev.value(args["denominator"], "the denominator")
    return exp.Div(
        this=numerator, expression=exp.Nullif(this=denominator, expression=exp.Literal.number(0))
    )
