"""``@SAFE_ADD(a, b, ...)``: the sum with NULLs taken as 0; NULL when every operand is NULL.

>>> from sluice.core.model.macro import expand_sql
>>> expand_sql("SELECT @SAFE_ADD(a, b) FROM t")
'SELECT CASE WHEN a IS NULL AND b IS NULL THEN NULL ELSE COALESCE(a, 0) + COALESCE(b, 0) END FROM t'
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from sluice.core.model.macro.evaluator import Evaluator
from sluice.core.model.macro.registry import Result, operator


def null_safe(
    ev: Evaluator, operands: list[exp.Expr], combine: Callable[[exp.Expr, exp.Expr], exp.Expr]
) -> exp.Expr:
    """``CASE WHEN all NULL THEN NULL ELSE COALESCE(a, 0) op COALESCE(b, 0) ... END``."""
    values = [ev.value(o, "an operand") for o in operands]
    all_null = exp.and_(*(exp.Is(this=v.copy(), expression=exp.null()) for v in values))
    total: exp.Expr = exp.func("COALESCE", values[0].copy(), exp.Literal.number(0))
    for value in values[1:]:
        total = combine(total, exp.func("COALESCE", value.copy(), exp.Literal.number(0)))
    return exp.case().when(all_null, exp.null()).else_(total)


@operator("SAFE_ADD", (), varargs="operands", min_rest=2)
def safe_add(ev: Evaluator, args: dict[str, exp.Expr], rest: list[exp.Expr]) -> Result:
    return null_safe(ev, rest, lambda a, b: exp.Add(this=a, expression=b))
