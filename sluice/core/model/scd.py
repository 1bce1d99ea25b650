"""SQLMesh's SCD type 2 kinds in a MODEL header (pure): ``SCD_TYPE_2`` (an alias of
``SCD_TYPE_2_BY_TIME``) and ``SCD_TYPE_2_BY_COLUMN``.

Owned here: the properties each kind takes, its unique key and settings read and checked
(:class:`~sluice.core.model.definition.Scd`), the types its validity columns may have,
and the checks of the model's query against them (the query returns the updated_at column
and never the validity columns Sluice writes). The build that keeps the history is
:mod:`sluice.core.spark.steps.scd`.

>>> from sluice.core.config import ModelDefaults
>>> from sluice.core.model.parse import parse_model
>>> text = ("MODEL (name s.prices, kind SCD_TYPE_2_BY_COLUMN (unique_key id, columns [price]));"
...         " SELECT id, price FROM s.raw")
>>> model = parse_model(text, "prices.sql", ModelDefaults(), {})
>>> model.kind.unique_key, model.kind.scd.columns, model.kind.scd.valid_to_name
(('id',), ('price',), 'valid_to')
>>> bad = text.replace("price FROM", "price, valid_to FROM")
>>> parse_model(bad, "prices.sql", ModelDefaults(), {})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
sluice.core.errors.ModelError: prices.sql:1:28: s.prices's query returns a column 'valid_to', ...
  hint: rename the query's column, or set valid_to_name to another name
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from sluice.core.model.definition import KindName, Scd
from sluice.core.model.header import Header, Node
from sluice.core.model.values import Source, read_bool, read_identifier, read_word_or_string

if TYPE_CHECKING:
    from sluice.core.model.parse import KindResult

# SQLMesh's SCD type 2 kinds (SCD_TYPE_2 is SCD_TYPE_2_BY_TIME): their shared properties,
# then each one's own.
_SCD_SHARED = frozenset(
    {
        "unique_key",
        "valid_from_name",
        "valid_to_name",
        "invalidate_hard_deletes",
        "time_data_type",
        "forward_only",
        "disable_restatement",
        "on_destructive_change",
        "batch_size",
        "lookback",
    }
)
SCD_KIND_PROPERTIES: dict[KindName, frozenset[str]] = {
    KindName.SCD_TYPE_2_BY_TIME: _SCD_SHARED | {"updated_at_name", "updated_at_as_valid_from"},
    KindName.SCD_TYPE_2_BY_COLUMN: _SCD_SHARED | {"columns", "execution_time_as_valid_from"},
}
KIND_ALIASES = {"SCD_TYPE_2": KindName.SCD_TYPE_2_BY_TIME}
# The types the validity columns may have (time_data_type), as Spark SQL.
SCD_TIME_TYPES = {
    exp.DataType.Type.TIMESTAMP: "TIMESTAMP",
    exp.DataType.Type.TIMESTAMPLTZ: "TIMESTAMP",
    exp.DataType.Type.TIMESTAMPTZ: "TIMESTAMP",
    exp.DataType.Type.DATETIME: "TIMESTAMP",
    exp.DataType.Type.TIMESTAMPNTZ: "TIMESTAMP_NTZ",
    exp.DataType.Type.DATE: "DATE",
}


def read_scd(
    ctx: Source, name: KindName, node: Node, params: dict[str, Node], dialect: str
) -> tuple[tuple[str, ...], Scd]:
    """The unique key and settings of an SCD type 2 kind, checked."""
    by_column = name == KindName.SCD_TYPE_2_BY_COLUMN
    if "unique_key" not in params:
        raise ctx.error(
            f"{name} needs a unique_key",
            node,
            f"write {name} (unique_key id{', columns [name, price]' if by_column else ''})",
        )
    if by_column and "columns" not in params:
        raise ctx.error(
            "SCD_TYPE_2_BY_COLUMN needs the columns whose changes open a new version",
            node,
            "write SCD_TYPE_2_BY_COLUMN (unique_key id, columns [name, price]), or columns * "
            "for every column",
        )
    unique_key = tuple(read_identifier(ctx, _unquoted(k)) for k in params["unique_key"].elements())
    if not unique_key or "*" in unique_key:
        raise ctx.error(
            "unique_key must name the key's columns",
            params["unique_key"],
            "write unique_key id, or unique_key (a, b) for a composite key",
        )
    settings: dict[str, Any] = {}
    for key in ("updated_at_name", "valid_from_name", "valid_to_name"):
        if key in params:
            settings[key] = read_identifier(ctx, _unquoted(params[key]))
    if not by_column:
        settings.setdefault("updated_at_name", "updated_at")
    for key in (
        "invalidate_hard_deletes",
        "updated_at_as_valid_from",
        "execution_time_as_valid_from",
        "disable_restatement",
    ):
        if key in params:
            settings[key] = read_bool(ctx, params[key], False)
    if by_column:
        columns = tuple(read_identifier(ctx, _unquoted(c)) for c in params["columns"].elements())
        if "*" in columns and columns != ("*",):
            raise ctx.error(
                "columns is either * (every column) or a list of columns, not both",
                params["columns"],
                "write columns * or columns [name, price]",
            )
        if not columns:
            raise ctx.error("columns names no column", params["columns"], "name one, or *")
        settings["columns"] = columns
    if "time_data_type" in params:
        settings["time_data_type"] = _scd_time_type(ctx, params["time_data_type"], dialect)
    valid_from = settings.get("valid_from_name", "valid_from")
    valid_to = settings.get("valid_to_name", "valid_to")
    if valid_from == valid_to:
        raise ctx.error(
            f"valid_from_name and valid_to_name are both '{valid_from}'",
            params.get("valid_to_name") or params.get("valid_from_name"),
            "give the two validity columns different names",
        )
    return unique_key, Scd(**settings)


def _unquoted(node: Node) -> Node:
    """A column given as a string (`'name'`, or `'*'`) read as the word it names."""
    if node.type == "string":
        return Node("word", node.value, (), node.line, node.col, node.start, node.end)
    return node


def listed_columns(node: Node | None) -> Node | None:
    """SCD_TYPE_2_BY_COLUMN's `columns`, for the output check (None for `*`)."""
    if node is None or any(_unquoted(i).value == "*" for i in node.elements()):
        return None
    items = tuple(_unquoted(i) for i in node.elements())
    return Node("list", "", items, node.line, node.col, node.start, node.end)


def _scd_time_type(ctx: Source, node: Node, dialect: str) -> str:
    text = read_word_or_string(ctx, node)
    try:
        parsed = exp.DataType.build(text, dialect=dialect)
    except (ParseError, TokenError, ValueError):
        parsed = None
    spark = SCD_TIME_TYPES.get(parsed.this) if parsed is not None else None
    if spark is None:
        raise ctx.error(
            f"time_data_type '{text}' is not a date or timestamp type",
            node,
            "write TIMESTAMP (the default), TIMESTAMP_NTZ or DATE",
        )
    return spark


def check_scd_outputs(
    ctx: Source, name: str, outputs: Sequence[str], kind: KindResult, header: Header
) -> None:
    """The validity columns are Sluice's to write: the query, returning ``outputs``, must
    not return them."""
    scd = kind.value.scd
    assert scd is not None
    updated_at = scd.updated_at_name
    if (
        outputs
        and updated_at
        and "updated_at_name" not in kind.params
        and (updated_at not in outputs)
    ):
        raise ctx.error(
            f"{name}'s query has no column '{updated_at}', which "
            f"{kind.value.name} reads to tell when each row last changed",
            header.properties.get("kind"),
            f"the query returns: {', '.join(outputs)}; return an updated_at column, or "
            "name yours with updated_at_name",
        )
    for column, key in (
        (scd.valid_from_name, "valid_from_name"),
        (scd.valid_to_name, "valid_to_name"),
    ):
        if column in outputs:
            raise ctx.error(
                f"{name}'s query returns a column '{column}', which its kind "
                f"{kind.value.name} writes itself (the {key.removesuffix('_name')} column)",
                kind.params.get(key) or header.properties.get("kind"),
                f"rename the query's column, or set {key} to another name",
            )
    if scd.columns and scd.columns != ("*",):
        for column in scd.columns:
            if column in kind.value.unique_key:
                raise ctx.error(
                    f"column '{column}' is part of the unique_key: compare the other columns",
                    kind.params.get("columns"),
                    "list the columns whose changes open a new version, without the key",
                )
