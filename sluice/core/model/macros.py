"""SQLMesh's built-in macro variables (pure).

At load time every ``@name`` in a query becomes a placeholder column (or table)
``__sluice_macro__name`` so the query parses in any dialect and its fingerprint does not
depend on dates; ``@VAR('x')`` is replaced by the value of variable ``x`` right away, so a
changed variable changes the data fingerprint. At run time :func:`render` swaps the
placeholders for literals of the interval being computed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from sluice.core.errors import ModelError
from sluice.core.model import macro
from sluice.core.model.scan import LineIndex
from sluice.core.timeutil import to_datetime

PREFIX = macro.lexer.PREFIX

_TIME_SUFFIXES = ("ds", "ts", "tstz", "date", "dt", "dtntz", "epoch", "millis", "hour")
TIME_VARIABLES = frozenset(
    f"{prefix}_{suffix}" for prefix in ("start", "end", "execution") for suffix in _TIME_SUFFIXES
)
BUILTIN_VARIABLES = TIME_VARIABLES | {"this_model"}

_MACRO = r"@\{?[A-Za-z_][A-Za-z0-9_]*\}?"
_VAR_ARGS = re.compile(r"\(\s*'([^']*)'\s*(?:,\s*(?P<default>[^)]*?))?\s*\)", re.S)


@dataclass(frozen=True)
class Substituted:
    """A query with its macros replaced, and which built-in macros it used."""

    text: str
    used: frozenset[str]
    source: str = ""
    """The text before the macros were replaced."""
    edits: tuple[tuple[int, int, int, int], ...] = ()
    """Each replacement: (start, end) in ``text``, (start, end) in ``source``."""
    lexed: macro.Lexed | None = None
    line_offset: int = 0
    path: str = ""

    def source_position(self, line: int, col: int) -> tuple[int, int]:
        """Where 1-based (line, col) of ``text`` stands in ``source``.

        A position inside a replacement maps to the start of the macro it replaced.
        """
        if not self.edits:
            return line, col
        offset = _offset(self.text, line, col)
        mapped = offset
        for start, end, source_start, source_end in self.edits:
            if start > offset:
                break
            mapped = source_start if offset < end else source_end + (offset - end)
        return LineIndex(self.source).position(mapped)


def _offset(text: str, line: int, col: int) -> int:
    """The offset of 1-based (line, col) in ``text``."""
    start = 0
    for _ in range(line - 1):
        newline = text.find("\n", start)
        if newline < 0:
            break
        start = newline + 1
    return min(start + col - 1, len(text))


def literal_sql(value: Any) -> str:
    """A Python value from config ``variables`` as a SQL literal."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def substitute(
    text: str,
    variables: Mapping[str, Any],
    path: str,
    allowed: frozenset[str] = BUILTIN_VARIABLES,
    line_offset: int = 0,
) -> Substituted:
    """Spell the macros of ``text`` as names sqlglot parses (see :mod:`.macro.lexer`).

    Nothing is evaluated yet: :func:`expand` does that on the parsed statements.
    """
    lexed = macro.lex(text)
    used = frozenset(site.name for site in lexed.names)
    return Substituted(lexed.text, used, lexed.source, lexed.edits, lexed, line_offset, path)


def expand(
    statements: list[exp.Expr],
    subst: Substituted,
    variables: Mapping[str, Any],
    dialect: str,
    *,
    columns_of: macro.ColumnsOf | None = None,
    keep_unknown: bool = False,
) -> list[exp.Expr]:
    """Evaluate the macros of parsed ``statements``; ``@DEF`` statements are consumed.

    Raises:
        ModelError: a macro is wrong, with the file and line of its call.
    """
    if _no_macros(subst):
        return statements
    env = macro.MacroEnv(
        path=subst.path,
        dialect=dialect,
        variables=variables,
        line_offset=subst.line_offset,
        lexed=subst.lexed,
        columns_of=columns_of,
        keep_unknown=keep_unknown,
    )
    return macro.Evaluator(env).statements(statements)


def _no_macros(subst: Substituted) -> bool:
    """Whether ``subst`` holds nothing to evaluate: its text had no macro for the lexer
    to spell (no call, ``@name``, clause operator or embedding: no edit), and no name
    that spells one of the lexer's markers (all start ``__sluice``), which the evaluator
    would read as macros. Then evaluating changes nothing, and most models of a project
    skip the walk over their whole tree (a fifth of loading them)."""
    lexed = subst.lexed
    if lexed is not None and (lexed.edits or lexed.calls or lexed.names or lexed.clauses):
        return False
    return "__sluice" not in subst.text.lower()


ColumnsOf = macro.ColumnsOf


def resolve_name(text: str, variables: Mapping[str, Any], path: str, line: int) -> str:
    """A name written with macros (``@{schema}.orders``, ``@schema.t_@{suffix}``) resolved.

    Raises:
        ModelError: an unknown variable, naming the line.
    """
    if "@" not in text:
        return text
    lexed = macro.lex(text)
    env = macro.MacroEnv(path=path, variables=variables, line_offset=line - 1, lexed=lexed)
    try:
        table = exp.to_table(lexed.text)
    except (ParseError, TokenError, ValueError):
        raise ModelError(
            f"cannot read the name '{text}'", path=path, line=line, hint="write schema.table"
        ) from None
    result = macro.Evaluator(env).expand(table)
    if not isinstance(result, exp.Table):
        raise ModelError(
            f"the name '{text}' is not a table name after its macros",
            path=path,
            line=line,
            hint="use variables holding names, e.g. @{schema}.orders",
        )
    return result.sql("spark").replace("`", "")


def time_values(start: int, end: int, execution: int) -> dict[str, exp.Expr]:
    """Literals for the time macros of the half-open interval [start, end).

    As in SQLMesh, ``end`` values are inclusive: the last instant of the interval.
    """
    values: dict[str, exp.Expr] = {}
    for prefix, ms in (("start", start), ("end", end - 1), ("execution", execution)):
        dt = to_datetime(ms)
        naive = dt.replace(tzinfo=None)
        ts = naive.isoformat(sep=" ")
        values[f"{prefix}_ds"] = exp.Literal.string(naive.strftime("%Y-%m-%d"))
        values[f"{prefix}_ts"] = exp.Literal.string(ts)
        values[f"{prefix}_tstz"] = exp.Literal.string(dt.isoformat(sep=" "))
        values[f"{prefix}_date"] = exp.cast(exp.Literal.string(naive.strftime("%Y-%m-%d")), "DATE")
        values[f"{prefix}_dt"] = exp.cast(exp.Literal.string(ts), "TIMESTAMP")
        values[f"{prefix}_dtntz"] = exp.cast(exp.Literal.string(ts), "TIMESTAMP")
        values[f"{prefix}_epoch"] = exp.Literal.number(ms / 1000)
        values[f"{prefix}_millis"] = exp.Literal.number(ms)
        values[f"{prefix}_hour"] = exp.Literal.number(dt.hour)
    return values


def render(query: exp.Expr, values: Mapping[str, exp.Expr | str]) -> exp.Expr:
    """Replace placeholders in a parsed query: columns by literals, tables by table names.

    When ``this_model`` is a table name, the parts @RESOLVE_TEMPLATE uses are given too.
    """
    own = values.get("this_model")
    if isinstance(own, str):
        values = {**this_model_parts(own), **values}

    def swap(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and not node.table and node.name.startswith(PREFIX):
            value = values.get(node.name[len(PREFIX) :])
            if isinstance(value, exp.Expr):
                return value.copy()
        if isinstance(node, exp.Table) and node.name.startswith(PREFIX):
            value = values.get(node.name[len(PREFIX) :])
            if isinstance(value, str):
                table = exp.to_table(value)
                if node.alias:
                    table.set("alias", node.args["alias"].copy())
                return table
        return node

    return query.transform(swap)


def this_model_parts(table_name: str) -> dict[str, exp.Expr]:
    """The catalog, schema and table of the model's own table, as string literals (Spark's
    ``spark_catalog`` when the name has no catalog)."""
    table = exp.to_table(table_name)
    return {
        "this_model_catalog": exp.Literal.string(table.catalog or "spark_catalog"),
        "this_model_schema": exp.Literal.string(table.db),
        "this_model_table": exp.Literal.string(table.name),
    }


def display(sql: str) -> str:
    """Show placeholders the way the user wrote them (for diffs and messages)."""
    return re.sub(rf"`?{PREFIX}([a-z_]+)`?", r"@\1", sql)
