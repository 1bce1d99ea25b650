"""``@IF(condition, then[, else])``: ``then`` when the condition holds, else ``else`` or nothing.

>>> from sluice.core.model.macro import expand_sql
>>> expand_sql("SELECT a, @IF(1 > 2, b, c), @IF('x' IN ('x'), d) FROM t")
'SELECT a, c, d FROM t'
"""

from __future__ import annotations

from sqlglot import exp

from sluice.core.model.macro.evaluator import Evaluator
from sluice.core.model.macro.registry import Result, operator


@operator("IF", ("condition", "then", "else"), 2)
def if_(ev: Evaluator, args: dict[str, exp.Expr], rest: list[exp.Expr]) -> Result:
    if ev.truth(args["condition"], "the condition of @IF"):
        return ev.expand(args["then"].copy())
    other = args.get("else")
    return ev.expand(other.copy()) if other is not None else None
