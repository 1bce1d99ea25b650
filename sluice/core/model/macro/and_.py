"""``@AND(a, b, ...)``: the operands joined with AND, NULL operands left out.

>>> from sluice.core.model.macro import expand_sql
>>> expand_sql("SELECT * FROM t WHERE @AND(a > 1, NULL, b = 2)")
'SELECT * FROM t WHERE a > 1 AND b = 2'
"""

from __future__ import annotations

from sqlglot import exp

from sluice.core.model.macro.evaluator import Evaluator
from sluice.core.model.macro.registry import Result, operator


def operands(ev: Evaluator, rest: list[exp.Expr]) -> list[exp.Expr]:
    out: list[exp.Expr] = []
    for node in rest:
        for item in ev._as_list(ev.expand(node.copy())):
            if not isinstance(item, exp.Null):
                out.append(item)
    return out


@operator("AND", (), varargs="operands")
def and_(ev: Evaluator, args: dict[str, exp.Expr], rest: list[exp.Expr]) -> Result:
    items = operands(ev, rest)
    return exp.and_(*items) if items else None
