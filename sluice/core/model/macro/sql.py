"""``@SQL(text)``: parse a string (often built by other macros) as SQL.

>>> from sluice.core.model.macro import expand_sql
>>> expand_sql("@DEF(col, 'amount'); SELECT @SQL('SUM(' || @col || ')') AS total FROM t")
'SELECT SUM(amount) AS total FROM t'
"""

from __future__ import annotations

from sqlglot import exp

from sluice.core.model.macro.evaluator import Evaluator
from sluice.core.model.macro.registry import MacroError, Result, operator


@operator("SQL", ("text", "into"), 1)
def sql(ev: Evaluator, args: dict[str, exp.Expr], rest: list[exp.Expr]) -> Result:
    text = ev.constant(args["text"], "the argument of @SQL")
    if not isinstance(text, str):
        raise MacroError(
            f"@SQL needs a string of SQL, got {text!r}", "write @SQL('some SQL') or build a string"
        )
    return ev.parse(text, "@SQL")
