"""The MODEL properties beyond the basics, as SQLMesh documents them (pure).

Read here: ``partitioned_by`` and ``clustered_by`` (columns or expressions such as
``DATE(ts)``), ``table_format``, ``storage_format``, ``physical_properties`` (formerly
``table_properties``), ``virtual_properties``, ``session_properties``, ``references``,
``allow_partials``, ``gateway``, ``signals``, ``optimize_query``, ``formatting``,
``ignored_rules``, ``description`` and ``blueprints``.

What Spark can use is applied when the model's table or view is created (see
:func:`table_layout`); everything else is accepted with a note ("file:line: what" and a
hint), never dropped silently. Which ones change a model's version follows SQLMesh's
fingerprints (:mod:`sluice.core.snapshot.fingerprint`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from sluice.core.errors import ModelError
from sluice.core.model.definition import KindName, Model
from sluice.core.model.header import Node, call_as_pair
from sluice.core.plan import statements
from sluice.core.snapshot.naming import MARK_PREFIX
from sluice.core.spark.tuning import SPARK_TUNING, is_tuning, spelled

PROPERTIES = frozenset(
    {
        "references",
        "clustered_by",
        "allow_partials",
        "gateway",
        "signals",
        "physical_properties",
        "table_properties",
        "virtual_properties",
        "session_properties",
        "table_format",
        "storage_format",
        "optimize_query",
        "formatting",
        "ignored_rules",
        "blueprints",
    }
)
"""The properties this module reads, besides ``partitioned_by`` and ``description``."""


SPARK_SQL_TUNING = tuple(k for k in SPARK_TUNING if k.startswith("spark.sql."))
"""The tuning keys a model's ``session_properties`` apply (the others size the application)."""

TRANSFORM_FORMATS = frozenset({"iceberg"})
"""Table formats whose Spark tables take partition transforms (``days(ts)``)."""

FORMATS = ("parquet", "orc", "delta", "iceberg", "hive")
"""The formats a model's ``table_format`` / ``storage_format`` (and
``sluice.spark.table_format``) may name: what becomes ``USING`` of its physical table
(``hive``: Spark's default). Anything else (``jdbc``, ``text``, a class name) is a data
source that reads or writes past the catalog, so it is refused."""
_FORMAT_HINT = f"write one of {', '.join(FORMATS)}"
_RESERVED = frozenset(
    {"location", "path", "provider", "owner", "external", "comment", "is_managed_location"}
)
_TRANSFORMS = {"year": "years", "month": "months", "day": "days", "hour": "hours"}
_SPARK_TRANSFORMS = frozenset({"years", "months", "days", "hours", "bucket", "truncate"})


@dataclass(frozen=True)
class _Src:
    source: str
    path: str

    def error(self, message: str, node: Node, hint: str) -> ModelError:
        return ModelError(message, path=self.path, line=node.line, col=node.col, hint=hint)

    def note(self, node: Node, what: str, hint: str) -> str:
        return f"{self.path}:{node.line}:{node.col}: {what}\n  hint: {hint}"


def read_properties(
    source: str,
    path: str,
    props: Mapping[str, Node],
    keys: Mapping[str, Node],
    dialect: str,
    name: str,
) -> tuple[dict[str, Any], list[str]]:
    """The :class:`Model` fields of the properties in ``props``, and the notes for those
    Spark does not use.

    Raises:
        ModelError: a value of the wrong form, with file:line:col and a hint.
    """
    src = _Src(source, path)
    fields: dict[str, Any] = {}
    notes: list[str] = []
    if "partitioned_by" in props:
        fields["partitioned_by"] = _expressions(src, props["partitioned_by"], dialect)
    if "clustered_by" in props:
        fields["clustered_by"] = _expressions(src, props["clustered_by"], dialect)
    if "description" in props:
        fields["description"] = description(src, props["description"])
    for key in ("table_format", "storage_format"):
        if key in props:
            fields[key] = _format(src, props[key], key)
    if "physical_properties" in props and "table_properties" in props:
        raise src.error(
            "physical_properties and table_properties are the same property",
            keys["table_properties"],
            "keep physical_properties (table_properties is its former name)",
        )
    physical = props.get("physical_properties") or props.get("table_properties")
    if physical is not None:
        pairs = _pairs(src, physical, "physical_properties")
        fields["physical_properties"] = _keep(src, physical, pairs, name, "table", notes)
    if "virtual_properties" in props:
        pairs = _pairs(src, props["virtual_properties"], "virtual_properties")
        fields["virtual_properties"] = _keep(
            src, props["virtual_properties"], pairs, name, "views", notes
        )
    if "session_properties" in props:
        fields["session_properties"] = _session(src, props["session_properties"], name, notes)
    if "references" in props:
        fields["column_references"] = tuple(i.text(source) for i in props["references"].elements())
    if "allow_partials" in props:
        fields["allow_partials"] = _bool(src, props["allow_partials"])
        if fields["allow_partials"]:
            notes.append(
                src.note(
                    keys["allow_partials"],
                    f"allow_partials of {name} is accepted, not applied: Sluice builds "
                    "complete intervals only",
                    "an interval still in progress is built once it has ended",
                )
            )
    if "gateway" in props:
        fields["gateway"] = _word(src, props["gateway"], "gateway")
        notes.append(
            src.note(
                keys["gateway"],
                f"gateway '{fields['gateway']}' of {name} is accepted, not applied: Sluice "
                "runs every model on the project's Spark",
                "its SQL is transpiled to Spark SQL from the model's dialect",
            )
        )
    if "signals" in props:
        fields["signals"] = tuple(i.text(source) for i in props["signals"].elements())
        notes.append(
            src.note(
                keys["signals"],
                f"signals of {name} are accepted, not evaluated: the model is built on its cron",
                "signals are Python functions, which Sluice does not run",
            )
        )
    if "optimize_query" in props:
        fields["optimize_query"] = _bool(src, props["optimize_query"])
        notes.append(
            src.note(
                keys["optimize_query"],
                f"optimize_query of {name} is accepted: Sluice never rewrites a query "
                "beyond transpiling it to Spark SQL",
                "nothing to do; the value is part of the model's version, as in SQLMesh",
            )
        )
    for key, why in (
        ("formatting", "it concerns `sqlmesh format`"),
        ("ignored_rules", "it concerns SQLMesh's linter"),
    ):
        if key in props:
            if key == "formatting":
                _bool(src, props[key])
            notes.append(
                src.note(
                    keys[key],
                    f"{key} of {name} is accepted, with no effect in Sluice: {why}",
                    "nothing to do; it does not change the model's version",
                )
            )
    return fields, notes


def description(src: _Src, node: Node) -> str:
    """``description 'text'``, also in double quotes (sqlglot reads those as a name)."""
    if node.type == "string" or (node.type == "word" and src.source[node.start] in '"`'):
        return node.value
    raise src.error(
        f"expected a quoted string, got '{node.text(src.source)}'",
        node,
        "quote the description, e.g. description 'Daily revenue per customer'",
    )


def _expressions(src: _Src, node: Node, dialect: str) -> tuple[str, ...]:
    """Columns (lower case) or Spark SQL expressions: ``ds``, ``(ds, region)``,
    ``DATE(ts)``, ``(DATE(ts), region)``, ``'ds'``."""
    out: list[str] = []
    for item in node.elements():
        if item.type == "string" or (item.type == "word" and "." not in item.value):
            out.append(item.value.strip('"`').lower() if item.type == "word" else item.value)
            continue
        text = item.text(src.source)
        try:
            parsed = sqlglot.parse_one(text, read=dialect)
        except (ParseError, TokenError):
            parsed = None
        if parsed is None or isinstance(parsed, exp.Query | exp.Star):
            raise src.error(
                f"expected a column or an expression, got '{text}'",
                item,
                "write columns or expressions of the query's columns, e.g. (DATE(ts), region)",
            )
        if isinstance(parsed, exp.Column) and not parsed.table:
            out.append(parsed.name.lower())
        else:
            out.append(parsed.sql("spark", normalize=True))
    names = [o for o in out if _is_column(o)]
    if len(names) != len(set(names)):
        raise src.error("a column is named twice", node, "name each column once, e.g. (ds, region)")
    return tuple(out)


def _is_column(text: str) -> bool:
    return re.fullmatch(r"[a-z_][a-z0-9_]*", text) is not None


def _format(src: _Src, node: Node, key: str) -> str:
    value = _word(src, node, key).lower()
    if value not in FORMATS:
        raise src.error(
            f"{key} '{value}' is not a format Sluice creates tables with", node, _FORMAT_HINT
        )
    return value


def _word(src: _Src, node: Node, key: str) -> str:
    if node.type not in ("word", "string"):
        raise src.error(
            f"{key} must be one name, got '{node.text(src.source)}'",
            node,
            f"write `{key} name`",
        )
    return node.value.strip('"`')


def _bool(src: _Src, node: Node) -> bool:
    if node.type in ("bool", "word", "string") and node.value.lower() in ("true", "false"):
        return node.value.lower() == "true"
    raise src.error(
        f"expected true or false, got '{node.text(src.source)}'", node, "write true or false"
    )


def _pairs(src: _Src, node: Node, key: str, *, lower: bool = True) -> tuple[tuple[str, str], ...]:
    """``(key = value, ...)`` with values as text (strings unquoted); keys lower case
    unless ``lower`` is False."""
    if node.type == "call":
        node = call_as_pair(node, src.source).items[0]
    if node.type != "list" or any(i.type != "pair" for i in node.items):
        raise src.error(
            f"{key} must be a list of `name = value` pairs",
            node,
            f"for example {key} (retention_days = 7, owner_team = 'data')",
        )
    out: list[tuple[str, str]] = []
    for item in node.items:
        value = item.items[0]
        if value.type in ("string", "number"):
            text = value.value
        elif value.type == "bool":
            text = value.value.lower()
        elif value.type == "word":
            text = value.value.strip('"`')
        else:
            text = value.text(src.source)
        written = item.value.strip('"`')
        out.append((written.lower() if lower else written, text))
    return tuple(out)


def _session(src: _Src, node: Node, name: str, notes: list[str]) -> tuple[tuple[str, str], ...]:
    """``session_properties``: the Spark SQL tuning settings a model's build runs with.

    A model may set what the prod branch's ``sluice.spark.conf`` may
    (:data:`sluice.core.spark.tuning.SPARK_TUNING`): the ``spark.sql.*`` ones are applied
    around its build; the others size the whole Spark application, so they are noted and
    not applied. Any other ``spark.*`` key (variable substitution, the parser, catalogs,
    extensions, the warehouse, ...) is refused: it could change what the job's SQL reads
    or runs. A key of another engine (no ``spark.`` prefix) is noted and not applied.

    Raises:
        ModelError: a ``spark.*`` key that is not tuning, naming the pair's line.
    """
    pairs = _pairs(src, node, "session_properties", lower=False)
    items = node.items if node.type == "list" else call_as_pair(node, src.source).items[0].items
    kept: list[tuple[str, str]] = []
    for (key, value), item in zip(pairs, items, strict=True):
        lowered = key.lower()
        if is_tuning(key):
            if lowered.startswith("spark.sql."):
                kept.append((spelled(key), value))
                continue
            notes.append(
                src.note(
                    item,
                    f"session property '{key}' of {name} is not applied: it sizes the whole "
                    "Spark application, not one model's build",
                    "set it in `sluice.spark.conf` on the prod branch (or the service's "
                    "SLUICE_SPARK_CONF), and remove it here",
                )
            )
        elif lowered.startswith("spark."):
            raise src.error(
                f"session property '{key}' of {name} is not a Spark tuning setting: a model "
                "may only size its build (shuffle partitions, adaptive execution, broadcast "
                "joins, file sizes, compression, time zone)",
                item,
                "remove it; settings that change how Spark reads SQL, finds tables or loads "
                "code are the service's (SLUICE_SPARK_CONF); the allowed keys are "
                + ", ".join(k + ("*" if k.endswith(".") else "") for k in SPARK_SQL_TUNING),
            )
        else:
            notes.append(
                src.note(
                    item,
                    f"session property '{key}' of {name} is not applied: Sluice sets only "
                    "Spark SQL tuning settings for a model's build",
                    "it configures another engine; remove it, or name a spark.sql.* tuning key",
                )
            )
    return tuple(kept)


def _keep(
    src: _Src,
    node: Node,
    pairs: tuple[tuple[str, str], ...],
    name: str,
    where: str,
    notes: list[str],
) -> tuple[tuple[str, str], ...]:
    """The pairs Spark takes as TBLPROPERTIES; a note for each of the others."""
    kept = []
    for key, value in pairs:
        if key.startswith(MARK_PREFIX):
            raise src.error(
                f"property '{key}' of {name} is Sluice's own: tables and views Sluice "
                f"creates carry {MARK_PREFIX}* properties to tell them from tables it did not",
                node,
                f"remove it, or name the property without the '{MARK_PREFIX}' prefix",
            )
        if where == "table" and key != "creatable_type" and key not in _RESERVED:
            problem = statements.property_problem(key)
            if problem is not None:
                raise src.error(
                    f"{problem} ({name})",
                    node,
                    "Sluice decides where and how a model's table is stored; remove it",
                )
        if key == "creatable_type" or key in _RESERVED:
            notes.append(
                src.note(
                    node,
                    f"property '{key}' of {name} is not applied to its {where}: "
                    + (
                        "Spark creates plain tables and views"
                        if key == "creatable_type"
                        else f"'{key}' is a reserved Spark table property"
                    ),
                    "Sluice decides where and how tables are stored; remove it",
                )
            )
            continue
        kept.append((key, value))
    return tuple(kept)


def blueprint_variables(source: str, path: str, node: Node, dialect: str) -> list[dict[str, Any]]:
    """``blueprints ((name := a, region := 'eu'), (name := b, region := 'us'))``: each
    entry's variables, as values the macro evaluator substitutes (a word is a column or
    a name, a string a string literal).

    Raises:
        ModelError: an entry that is not a list of ``name := value``.
    """
    src = _Src(source, path)
    hint = "write blueprints ((name := value, ...), (name := value, ...))"
    entries = node.elements()
    if not entries or node.type != "list":
        raise src.error("blueprints must be a list of entries", node, hint)
    result: list[dict[str, Any]] = []
    for entry in entries:
        pairs = entry.elements()
        if not pairs or any(p.type != "pair" for p in pairs):
            raise src.error(
                f"blueprint '{entry.text(source)}' is not a list of `name := value`",
                entry,
                hint,
            )
        values: dict[str, Any] = {}
        for pair in pairs:
            value = pair.items[0]
            if value.type == "string":
                values[pair.value.lower()] = value.value
            elif value.type == "word" and not value.value.startswith("@"):
                values[pair.value.lower()] = exp.column(value.value.strip('"`'))
            else:
                text = value.text(source)
                try:
                    values[pair.value.lower()] = sqlglot.parse_one(text, read=dialect)
                except (ParseError, TokenError):
                    raise src.error(
                        f"cannot read the blueprint value '{text}'", value, hint
                    ) from None
        result.append(values)
    return result


@dataclass(frozen=True)
class TableLayout:
    """How a model's physical table is created on Spark."""

    provider: str  # USING ...
    partitioned_by: tuple[str, ...]  # columns, or transforms where the format has them
    clustered_by: tuple[str, ...]  # CLUSTER BY columns
    properties: tuple[tuple[str, str], ...]  # TBLPROPERTIES
    notes: tuple[tuple[str, str], ...]  # (what was not applied and why, hint)


def table_layout(model: Model, default_format: str) -> TableLayout:
    """What Spark gets of the model's partitioning, clustering, formats and properties.

    Raises:
        ModelError: a format not in :data:`FORMATS` (a Python model's, or
            ``sluice.spark.table_format``), naming the model's file and line.
    """
    for what, value in (
        ("table_format", model.table_format),
        ("storage_format", model.storage_format),
        ("sluice.spark.table_format", default_format),
    ):
        if value is not None and str(value).lower() not in FORMATS:
            raise ModelError(
                f"{model.name}: {what} '{value}' is not a format Sluice creates tables with",
                path=model.path,
                line=model.line,
                hint=_FORMAT_HINT,
            )
    notes: list[tuple[str, str]] = []
    table_format = model.table_format if model.table_format != "hive" else None
    provider = (table_format or model.storage_format or default_format).lower()
    props = list(model.physical_properties)
    if table_format and model.storage_format:
        if table_format in TRANSFORM_FORMATS:
            props.append(("write.format.default", model.storage_format))
        else:
            notes.append(
                (
                    f"storage_format '{model.storage_format}' is not applied: "
                    f"table_format '{table_format}' decides its files' format",
                    "remove storage_format, or use table_format iceberg",
                )
            )
    transforms = provider in TRANSFORM_FORMATS
    parts: list[str] = []
    for entry in model.partitioned_by:
        applied = entry if _is_column(entry) else (_transform(entry) if transforms else None)
        if applied is None:
            notes.append(
                (
                    f"partitioned_by '{entry}' is not applied: Spark's {provider} tables "
                    + ("take no such transform" if transforms else "are partitioned by columns"),
                    "compute it in the query (`DATE(ts) AS day`) and partition by that column"
                    + ("" if transforms else ", or set table_format iceberg"),
                )
            )
        elif model.kind.name not in (KindName.VIEW, KindName.EXTERNAL):
            parts.append(applied)
    clusters: list[str] = []
    for entry in model.clustered_by:
        if not _is_column(entry) or entry in ("auto", "none"):
            notes.append(
                (
                    f"clustered_by '{entry}' is not applied: Spark clusters by columns",
                    "name columns of the query",
                )
            )
        elif parts or model.kind.is_incremental_by_time:
            notes.append(
                (
                    f"clustered_by '{entry}' is not applied: Spark does not cluster a "
                    "partitioned table",
                    "remove partitioned_by or clustered_by",
                )
            )
        else:
            clusters.append(entry)
    return TableLayout(provider, tuple(parts), tuple(clusters), tuple(props), tuple(notes))


def _transform(sql: str) -> str | None:
    """A partition expression as a Spark partition transform, when there is one."""
    node = sqlglot.parse_one(sql, read="spark")
    if isinstance(node, exp.Anonymous) and node.name.lower() in _SPARK_TRANSFORMS:
        return node.sql("spark")
    column = node.find(exp.Column)
    if column is None:
        return None
    unit: str | None = None
    if isinstance(node, exp.TsOrDsToDate | exp.Date) or (
        isinstance(node, exp.Cast) and node.to.is_type("date")
    ):
        unit = "day"
    elif isinstance(node, exp.DateTrunc | exp.TimestampTrunc):
        unit = str(node.args["unit"].name).lower()
    transform = _TRANSFORMS.get(unit or "")
    return f"{transform}({column.sql('spark')})" if transform else None


def layout_notes(model: Model, default_format: str) -> tuple[str, ...]:
    """:func:`table_layout`'s notes as warnings naming the model's file and line."""
    if not model.kind.materialized and not model.physical_properties:
        return ()
    return tuple(
        f"{model.path}:{model.line}: {model.name}: {what}\n  hint: {hint}"
        for what, hint in table_layout(model, default_format).notes
    )
