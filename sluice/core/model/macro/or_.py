"""``@OR(a, b, ...)``: the operands joined with OR, NULL operands left out.

>>> from sluice.core.model.macro import expand_sql
>>> expand_sql("SELECT * FROM t WHERE @OR(a > 1, NULL, b = 2)")
'SELECT * FROM t WHERE a > 1 OR b = 2'
"""

from __future__ import annotations

from sqlglot import exp

from sluice.core.model.macro.and_ import operands
from sluice.core.model.macro.evaluator import Evaluator
from sluice.core.model.macro.registry import Result, operator


@operator("OR", (), varargs="operands")
def or_(ev: Evaluator, args: dict[str, exp.Expr], rest: list[exp.Expr]) -> Result:
    items = operands(ev, rest)
    return exp.or_(*items) if items else None
