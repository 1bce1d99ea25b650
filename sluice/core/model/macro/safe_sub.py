"""``@SAFE_SUB(a, b, ...)``: the difference with NULLs taken as 0; NULL when all are NULL.

>>> from sluice.core.model.macro import expand_sql
>>> expand_sql("SELECT @SAFE_SUB(a, b) FROM t")
'SELECT CASE WHEN a IS NULL AND b IS NULL THEN NULL ELSE COALESCE(a, 0) - COALESCE(b, 0) END FROM t'
"""

from __future__ import annotations

from sqlglot import exp

from sluice.core.model.macro.evaluator import Evaluator
from sluice.core.model.macro.registry import Result, operator
from sluice.core.model.macro.safe_add import null_safe


@operator("SAFE_SUB", (), varargs="operands", min_rest=2)
def safe_sub(ev: Evaluator, args: dict[str, exp.Expr], rest: list[exp.Expr]) -> Result:
    return null_safe(ev, rest, lambda a, b: exp.Sub(this=a, expression=b))
