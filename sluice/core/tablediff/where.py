"""``--where``: a user's filter, parsed and re-generated, never pasted into SQL (pure).

The text must be exactly one boolean condition in Spark SQL: no `;`, no statement, no
subquery, no table, no aggregate or window, no function that runs code or draws random
numbers, and only plain (unqualified) column names. What reaches Spark is the SQL sqlglot
generates from the parsed tree, so nothing typed can escape the condition. Whether the
columns exist on both sides, and whether the condition is really boolean, is checked
against the tables' schemas in the driver (:mod:`sluice.core.tablediff.compute`).
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokenizer_core import TokenType

from sluice.core.tablediff.result import TableDiffError

_HINT = (
    "give one boolean condition over columns of both tables, e.g. "
    "--where \"order_date >= '2018-02-01' AND status <> 'returned'\""
)
# Functions that call Java or scripts, or whose value differs between the two reads.
_REFUSED_FUNCTIONS = frozenset(
    {"reflect", "java_method", "try_reflect", "rand", "randn", "random", "uuid", "shuffle"}
)
# Roots that are values, never conditions (a column or a function may be boolean: Spark
# checks those against the schema).
_VALUE_ROOTS = (exp.Literal, exp.Null, exp.Star, exp.Neg, exp.Interval, exp.Array, exp.Tuple)


@dataclass(frozen=True)
class WhereFilter:
    """A parsed ``--where``.

    Attributes:
        sql: The condition as Spark SQL, generated from the parse tree (comments dropped).
        columns: The column names it reads, lower-cased, in order of appearance.
    """

    sql: str
    columns: tuple[str, ...]


def parse_where(text: str) -> WhereFilter:
    """Parse ``text`` as one boolean Spark SQL condition.

    Raises:
        TableDiffError: naming what is wrong with the condition.
    """
    shown = _shown(text)
    if not text.strip():
        raise TableDiffError("--where is empty", hint=_HINT)
    try:
        tokens = sqlglot.tokenize(text, read="spark")
    except TokenError as exc:
        raise TableDiffError(f"--where {shown} does not parse: {exc}", hint=_HINT) from None
    if any(token.token_type == TokenType.SEMICOLON for token in tokens):
        raise TableDiffError(
            f"--where {shown} contains `;`: a filter is one condition, not statements",
            hint=_HINT,
        )
    try:
        node = sqlglot.parse_one(text, read="spark", into=exp.Condition)
    except ParseError as exc:
        raise TableDiffError(
            f"--where {shown} does not parse as a Spark SQL condition: {_parse_problem(exc)}",
            hint=_HINT,
        ) from None
    _check(node, shown)
    lambda_vars = {
        ident.name.lower() for lam in node.find_all(exp.Lambda) for ident in lam.expressions
    }
    columns: list[str] = []
    for column in node.find_all(exp.Column):
        name = column.name.lower()
        if name not in lambda_vars and name not in columns:
            columns.append(name)
    return WhereFilter(node.sql(dialect="spark", comments=False), tuple(columns))


def _shown(text: str) -> str:
    """The text quoted for a message, shortened when long."""
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= 80 else flat[:77] + "...")


def _parse_problem(exc: ParseError) -> str:
    if exc.errors:
        first = exc.errors[0]
        where = f" at column {first.get('col')}" if first.get("col") else ""
        return f"{first.get('description', 'syntax error')}{where}"
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else "syntax error"


def _check(node: exp.Expr, shown: str) -> None:
    """Refuse anything but a condition over plain columns."""
    root = node
    while isinstance(root, exp.Paren):
        root = root.this
    if isinstance(root, _VALUE_ROOTS) or (
        isinstance(root, exp.Binary) and not isinstance(root, exp.Predicate | exp.Connector)
    ):
        raise TableDiffError(
            f"--where {shown} is a value, not a condition",
            hint="compare it with something, e.g. amount > 0",
        )
    for part in node.walk():
        problem = _problem(part)
        if problem:
            raise TableDiffError(f"--where {shown}: {problem}", hint=_HINT)


def _problem(part: exp.Expr) -> str | None:
    if isinstance(part, exp.Query | exp.Subquery | exp.Table):
        return "subqueries and tables are not allowed in a filter"
    if isinstance(part, exp.DDL | exp.DML | exp.Command):
        return "statements are not allowed in a filter"
    if isinstance(part, exp.AggFunc | exp.Window):
        return "aggregate and window functions are not allowed in a filter"
    if isinstance(part, exp.Placeholder | exp.Parameter):
        return "parameters are not allowed: write the value"
    if isinstance(part, exp.Star):
        return "`*` is not allowed in a filter"
    if isinstance(part, exp.Column) and (part.table or part.args.get("db")):
        return f"{part.sql(dialect='spark')} is qualified: use the plain column name"
    if isinstance(part, exp.Func):
        name = part.name if isinstance(part, exp.Anonymous) else part.sql_name()
        if name.lower() in _REFUSED_FUNCTIONS:
            return f"{name.lower()}() is not allowed: a filter must select the same rows every time it runs"
    return None
