"""``@DEF(name, value);``: bind ``@name`` for the rest of the model (a statement of its own).

The value may be a function, called as ``@name(args)``.

>>> from sluice.core.model.macro import expand_sql
>>> expand_sql("@DEF(size, 1); @DEF(twice, x -> x * 2); SELECT @twice(a) FROM t WHERE b > @size")
'SELECT a * 2 FROM t WHERE b > 1'
"""

from __future__ import annotations

from sqlglot import exp

from sluice.core.model.macro.evaluator import Evaluator
from sluice.core.model.macro.registry import MacroError, Result, operator


@operator("DEF", ("name", "value"))
def def_(ev: Evaluator, args: dict[str, exp.Expr], rest: list[exp.Expr]) -> Result:
    # Statements are handled by Evaluator.statements; here @DEF sits inside an expression.
    raise MacroError(
        "@DEF must be a statement of its own before the query",
        "write @DEF(name, value); on its own, ended with a semicolon",
    )
