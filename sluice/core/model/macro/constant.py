"""Evaluate a SQL expression of constants to a Python value (pure).

``@IF``, ``@EVAL``, ``@FILTER`` and ``@SQL`` need a value at load time: literals, ``NULL``,
``TRUE``/``FALSE``, arithmetic, comparisons, ``AND``/``OR``/``NOT``, ``BETWEEN``, ``IN``,
``IS [NOT] NULL``, ``||`` and a few string functions. Anything else (a column, a date
macro known only when the model runs) is refused with :class:`NotConstant`.

>>> import sqlglot
>>> evaluate(sqlglot.parse_one("2 BETWEEN 1 AND 3 AND 'a' IN ('a', 'b')"))
True
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from sqlglot import exp


class NotConstant(Exception):
    """The expression needs data or a value known only at run time."""

    def __init__(self, node: exp.Expr) -> None:
        self.node = node
        super().__init__(node.sql())


_COMPARE: dict[type[exp.Expr], Callable[[Any, Any], Any]] = {
    exp.EQ: operator.eq,
    exp.NEQ: operator.ne,
    exp.GT: operator.gt,
    exp.GTE: operator.ge,
    exp.LT: operator.lt,
    exp.LTE: operator.le,
}
_ARITHMETIC: dict[type[exp.Expr], Callable[[Any, Any], Any]] = {
    exp.Add: operator.add,
    exp.Sub: operator.sub,
    exp.Mul: operator.mul,
    exp.Mod: operator.mod,
}


def evaluate(node: exp.Expr) -> Any:
    """The Python value of ``node``; None stands for SQL NULL."""
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        text = str(node.this)
        return float(text) if any(c in text for c in ".eE") else int(text)
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Paren):
        return evaluate(node.this)
    if isinstance(node, exp.Neg):
        value = evaluate(node.this)
        return None if value is None else -value
    if isinstance(node, exp.Not):
        value = evaluate(node.this)
        return None if value is None else not value
    if isinstance(node, exp.And):
        left, right = evaluate(node.left), evaluate(node.right)
        if left is False or right is False:
            return False
        return None if left is None or right is None else True
    if isinstance(node, exp.Or):
        left, right = evaluate(node.left), evaluate(node.right)
        if left is True or right is True:
            return True
        return None if left is None or right is None else False
    if isinstance(node, exp.Is):
        value = evaluate(node.this)
        if isinstance(node.expression, exp.Null):
            return value is None
        return value is evaluate(node.expression)
    compare = _COMPARE.get(type(node)) or _ARITHMETIC.get(type(node))
    if compare is not None and isinstance(node, exp.Binary):
        left, right = evaluate(node.left), evaluate(node.right)
        if left is None or right is None:
            return None
        try:
            return compare(left, right)
        except (TypeError, ZeroDivisionError):
            raise NotConstant(node) from None
    if isinstance(node, exp.Div):
        left, right = evaluate(node.left), evaluate(node.right)
        if left is None or right is None or right == 0:
            return None
        try:
            return left / right
        except TypeError:
            raise NotConstant(node) from None
    if isinstance(node, exp.DPipe):
        left, right = evaluate(node.left), evaluate(node.right)
        return None if left is None or right is None else f"{left}{right}"
    if isinstance(node, exp.Between):
        value, low, high = (
            evaluate(node.this),
            evaluate(node.args["low"]),
            evaluate(node.args["high"]),
        )
        if value is None or low is None or high is None:
            return None
        try:
            return bool(low <= value <= high)
        except TypeError:
            raise NotConstant(node) from None
    if isinstance(node, exp.In):
        if node.args.get("query") or node.args.get("unnest"):
            raise NotConstant(node)
        value = evaluate(node.this)
        return value in [evaluate(e) for e in node.expressions]
    if isinstance(node, exp.Array | exp.Tuple):
        return [evaluate(e) for e in node.expressions]
    if isinstance(node, exp.Upper | exp.Lower | exp.Length):
        value = evaluate(node.this)
        if value is None:
            return None
        if not isinstance(value, str):
            raise NotConstant(node)
        if isinstance(node, exp.Length):
            return len(value)
        return value.upper() if isinstance(node, exp.Upper) else value.lower()
    if isinstance(node, exp.Concat):
        values = [evaluate(e) for e in node.expressions]
        return None if None in values else "".join(str(v) for v in values)
    raise NotConstant(node)


def to_expression(value: Any) -> exp.Expr:
    """A Python value as a SQL expression (the reverse of :func:`evaluate`); an expression
    (a blueprint's variable) is copied, as it may be used in several places."""
    if isinstance(value, exp.Expr):
        return value.copy()
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return exp.convert(value)
