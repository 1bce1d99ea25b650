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

from sluice.core.errors import ModelError
from sluice.core.model.scan import LineIndex, find_code
from sluice.core.timeutil import to_datetime

PREFIX = "__sluice_macro__"

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
    """Replace the macros in ``text``; ``allowed`` names the ``@names`` that may appear.

    Raises:
        ModelError: for an unknown macro or variable, with file:line:col.
    """
    out: list[str] = []
    used: set[str] = set()
    edits: list[tuple[int, int, int, int]] = []
    size = 0  # length of the output so far
    last = 0
    lines: LineIndex | None = None

    def emit(replacement: str, source_start: int, source_end: int) -> None:
        nonlocal size
        out.append(text[last:source_start])
        size += source_start - last
        edits.append((size, size + len(replacement), source_start, source_end))
        out.append(replacement)
        size += len(replacement)

    def fail(offset: int, message: str, hint: str) -> ModelError:
        nonlocal lines
        lines = lines or LineIndex(text)
        line, col = lines.position(offset)
        return ModelError(message, path=path, line=line + line_offset, col=col, hint=hint)

    for match in find_code(text, _MACRO):
        name = match.group()[1:].strip("{}")
        if name.upper() == "VAR":
            args = _VAR_ARGS.match(text, match.end())
            if args is None:
                raise fail(match.start(), "@VAR needs a variable name", "write @VAR('name')")
            var = args.group(1)
            if var in variables:
                emit(literal_sql(variables[var]), match.start(), args.end())
            elif args.group("default") is not None:
                emit(args.group("default"), match.start(), args.end())
            else:
                raise fail(
                    match.start(),
                    f"variable '{var}' is not defined",
                    f"add '{var}' under 'variables:' in config.yaml or give a default: "
                    f"@VAR('{var}', value)",
                )
            last = args.end()
            continue
        key = name.lower()
        if key not in allowed:
            raise fail(
                match.start(),
                f"unknown macro @{name}",
                "Sluice supports @start_ds/@end_ds, @start_date, @start_ts, @execution_ds "
                "(and the other date forms), @this_model and @VAR('name'); Python macros "
                "are not run",
            )
        used.add(key)
        emit(PREFIX + key, match.start(), match.end())
        last = match.end()
    out.append(text[last:])
    return Substituted("".join(out), frozenset(used), text, tuple(edits))


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
    """Replace placeholders in a parsed query: columns by literals, tables by table names."""

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


def display(sql: str) -> str:
    """Show placeholders the way the user wrote them (for diffs and messages)."""
    return re.sub(rf"`?{PREFIX}([a-z_]+)`?", r"@\1", sql)
