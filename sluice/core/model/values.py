"""A MODEL header's values read as what a property expects (pure): a column name, names,
``name = 'value'`` pairs, a string, a whole number, a boolean, one of some choices, a cron,
a date. A value of the wrong form is an error at its file:line:col with a hint.

>>> from sluice.core.errors import ModelError
>>> from sluice.core.model.header import Node
>>> class File:
...     source = "forward_only maybe"
...     def error(self, message, node, hint=None):
...         return ModelError(message, path="m.sql", line=node.line, col=node.col, hint=hint)
>>> read_bool(File(), Node("word", "TRUE", line=1, col=1), False)
True
>>> read_bool(File(), Node("word", "maybe", line=1, col=14, start=13, end=18), False)
Traceback (most recent call last):
...
sluice.core.errors.ModelError: m.sql:1:14: expected true or false, got 'maybe'
  hint: write true or false
"""

from __future__ import annotations

import re
from typing import Protocol

from sluice.core.errors import ModelError, PlanError
from sluice.core.intervals import check_cron
from sluice.core.model.header import Node, call_as_pair
from sluice.core.timeutil import DAY_MS, read_start, to_ms


class Source(Protocol):
    """The file the values come from: its text, and errors that point into it."""

    @property
    def source(self) -> str: ...

    def error(self, message: str, node: Node | None, hint: str | None = None) -> ModelError: ...


PLAIN_COLUMN = re.compile(r"[a-z_][a-z0-9_]*")
"""A column name Sluice itself puts into the SQL of a job (a time column, a unique key,
an SCD column): letters, digits and underscores, so no text of a PR ever becomes SQL
there (the job quotes it too)."""


def plain_column(name: str) -> bool:
    """Whether ``name`` (lower case) is a :data:`PLAIN_COLUMN`."""
    return PLAIN_COLUMN.fullmatch(name) is not None


def read_identifier(ctx: Source, node: Node) -> str:
    if node.type != "word" or "." in node.value:
        raise ctx.error(
            f"expected a column name, got '{node.text(ctx.source)}'",
            node,
            "name one column of the query, without a table prefix",
        )
    return node.value.strip('"`').lower()


def read_column(ctx: Source, node: Node) -> str:
    """A :data:`PLAIN_COLUMN` (a time column, a unique key's column)."""
    name = node.value.strip('"`').lower() if node.type == "word" else ""
    if node.type != "word" or not plain_column(name):
        raise ctx.error(
            f"expected a column name, got '{node.text(ctx.source)}'",
            node,
            "name one column of the query, without a table prefix: letters, digits and "
            "underscores (Sluice writes this name into the job's SQL)",
        )
    return name


def read_columns(ctx: Source, node: Node) -> tuple[str, ...]:
    """One column name or a list of them (``id`` or ``(a, b)``), each a plain name."""
    return tuple(read_column(ctx, item) for item in node.elements())


def read_names(ctx: Source, node: Node) -> tuple[str, ...]:
    items = node.elements()
    out = []
    for item in items:
        if item.type not in ("word", "string"):
            raise ctx.error(
                f"expected a name, got '{item.text(ctx.source)}'",
                item,
                "write a name, or a list of names such as (a, b)",
            )
        out.append(item.value.strip('"`').lower() if item.type == "word" else item.value)
    return tuple(out)


def read_pairs(ctx: Source, node: Node) -> tuple[tuple[str, str], ...]:
    if node.type == "call":
        node = call_as_pair(node, ctx.source).items[0]
    if node.type != "list" or any(i.type != "pair" for i in node.items):
        raise ctx.error(
            "expected a list of `name = 'value'` pairs",
            node,
            "for example (delimiter = ';', quotechar = '\"')",
        )
    return tuple((i.value.lower(), read_word_or_string(ctx, i.items[0])) for i in node.items)


def read_string(ctx: Source, node: Node) -> str:
    if node.type != "string":
        raise ctx.error(
            f"expected a quoted string, got '{node.text(ctx.source)}'",
            node,
            "quote it with single quotes",
        )
    return node.value


def read_word_or_string(ctx: Source, node: Node) -> str:
    if node.type not in ("word", "string", "number"):
        raise ctx.error(
            f"expected a single value, got '{node.text(ctx.source)}'",
            node,
            "write one word, number or quoted string",
        )
    return node.value


def read_int(ctx: Source, node: Node, minimum: int = 1) -> int:
    if node.type != "number" or not node.value.isdigit() or int(node.value) < minimum:
        raise ctx.error(
            f"expected a whole number of at least {minimum}, got '{node.text(ctx.source)}'",
            node,
            "write the number without quotes",
        )
    return int(node.value)


def read_bool(ctx: Source, node: Node | None, default: bool) -> bool:
    if node is None:
        return default
    if node.type == "bool":
        return node.value == "true"
    if node.type in ("word", "string") and node.value.lower() in ("true", "false"):
        return node.value.lower() == "true"
    raise ctx.error(
        f"expected true or false, got '{node.text(ctx.source)}'", node, "write true or false"
    )


def read_choice(ctx: Source, node: Node, choices: tuple[str, ...]) -> str:
    value = read_word_or_string(ctx, node).lower()
    if value not in choices:
        raise ctx.error(
            f"'{value}' is not one of {', '.join(choices)}",
            node,
            f"write one of {', '.join(choices)}",
        )
    return value


def read_cron(ctx: Source, node: Node) -> str:
    cron = read_word_or_string(ctx, node)
    try:
        return check_cron(cron)
    except PlanError as exc:
        raise ctx.error(exc.message, node, exc.hint) from None


def read_date(ctx: Source, node: Node, inclusive_day: bool = False) -> int:
    """A date property; an ``end`` given as a bare date includes that whole day."""
    text = read_word_or_string(ctx, node)
    try:
        ms = to_ms(text)
    except ValueError as exc:
        raise ctx.error(str(exc), node, "quote it, for example '2024-01-01'") from None
    return ms + DAY_MS if inclusive_day and len(text.strip()) == 10 else ms


def read_start_date(ctx: Source, node: Node) -> tuple[int, str | None]:
    """A ``start``: a date, or a relative time such as '1 week ago' (with its text, see
    :func:`sluice.core.timeutil.read_start`)."""
    text = read_word_or_string(ctx, node)
    try:
        return read_start(text)
    except ValueError as exc:
        raise ctx.error(str(exc), node, "quote it, for example '2024-01-01'") from None
