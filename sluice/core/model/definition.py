"""The value types of a loaded project: models, kinds, audits, unit tests (pure data)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields, is_dataclass, replace
from datetime import datetime
from enum import StrEnum
from functools import cached_property
from typing import Any

import sqlglot
from sqlglot import exp

from sluice.core.config import ProjectConfig
from sluice.core.timeutil import relative_ms


class KindName(StrEnum):
    """How a model's data is materialized."""

    FULL = "FULL"
    VIEW = "VIEW"
    INCREMENTAL_BY_TIME_RANGE = "INCREMENTAL_BY_TIME_RANGE"
    INCREMENTAL_BY_UNIQUE_KEY = "INCREMENTAL_BY_UNIQUE_KEY"
    SEED = "SEED"
    EXTERNAL = "EXTERNAL"
    SCD_TYPE_2_BY_TIME = "SCD_TYPE_2_BY_TIME"  # `SCD_TYPE_2` is read as this
    SCD_TYPE_2_BY_COLUMN = "SCD_TYPE_2_BY_COLUMN"
    CUSTOM = "CUSTOM"
    """SQLMesh's custom materialization (a Python class Sluice does not run): planned,
    its build refused unless the trusted ``sluice.materializations`` maps it to a
    built-in kind (then the model has that kind)."""
    EMBEDDED = "EMBEDDED"
    """No table and no view: its query is inlined into each model reading it, as a
    subquery (SQLMesh's EMBEDDED)."""


@dataclass(frozen=True)
class Scd:
    """The settings of an SCD type 2 kind (SQLMesh's names and defaults).

    Each run compares the query's rows with the table's current rows (``valid_to`` NULL)
    by ``unique_key``: a changed row is closed and its new version opened, a new key is
    opened, and (``invalidate_hard_deletes``) a key gone from the query is closed. By time,
    a row changed when its ``updated_at`` grew; by column, when one of ``columns`` (``*``:
    every column but the key) differs, NULL equal to NULL.
    """

    updated_at_name: str | None = None  # by time
    columns: tuple[str, ...] = ()  # by column; ("*",) for every column
    valid_from_name: str = "valid_from"
    valid_to_name: str = "valid_to"
    invalidate_hard_deletes: bool = False
    time_data_type: str = "TIMESTAMP"  # Spark SQL type of the validity columns
    updated_at_as_valid_from: bool = False
    execution_time_as_valid_from: bool = False
    disable_restatement: bool = True  # SQLMesh's default: the history cannot be recomputed


@dataclass(frozen=True)
class Kind:
    """A model kind with its parameters."""

    name: KindName
    time_column: str | None = None
    time_column_format: str | None = None
    unique_key: tuple[str, ...] = ()
    batch_size: int | None = None
    lookback: int = 0
    seed_path: str | None = None  # relative to the project directory
    csv_settings: tuple[tuple[str, str], ...] = ()
    scd: Scd | None = None  # the SCD type 2 kinds only
    materialization: str | None = None  # CUSTOM's, kept when mapped to a built-in kind

    @property
    def is_incremental_by_time(self) -> bool:
        return self.name == KindName.INCREMENTAL_BY_TIME_RANGE

    @property
    def is_scd_type_2(self) -> bool:
        return self.name in (KindName.SCD_TYPE_2_BY_TIME, KindName.SCD_TYPE_2_BY_COLUMN)

    @property
    def materialized(self) -> bool:
        """Whether the kind stores data in a physical table Sluice writes."""
        return self.name not in (KindName.VIEW, KindName.EXTERNAL, KindName.EMBEDDED)

    @property
    def has_views(self) -> bool:
        """Whether the model has a physical table or view and environment views (an
        external table is read as it is; an embedded model's query is inlined)."""
        return self.name not in (KindName.EXTERNAL, KindName.EMBEDDED)


@dataclass(frozen=True)
class AuditCall:
    """A model's use of an audit: the audit's name, its arguments (Spark SQL), blocking."""

    name: str
    args: tuple[tuple[str, str], ...] = ()
    blocking: bool = True
    # Where the model's header names it, for messages; not part of what the call means.
    line: int = field(default=0, compare=False)
    col: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Audit:
    """A project audit from audits/*.sql: a query returning the rows that violate it."""

    name: str
    query_sql: str  # Spark SQL with macro placeholders
    parameters: frozenset[str] = frozenset()  # @names it uses besides the built-ins
    defaults: tuple[tuple[str, str], ...] = ()
    blocking: bool = True
    path: str = ""
    line: int = 0
    standalone: bool = False  # runs on its own (`standalone true`), not on a model


@dataclass(frozen=True)
class TableRef:
    """A table a query reads, and where."""

    name: str
    line: int
    col: int


@dataclass(frozen=True)
class Model:
    """One model, as loaded and validated; everything downstream works from this."""

    name: str  # "schema.table", lower case
    kind: Kind
    dialect: str = "spark"
    query_sql: str | None = None  # canonical Spark SQL with macro placeholders
    columns: tuple[tuple[str, str], ...] = ()  # declared (name, Spark type)
    depends_on: tuple[str, ...] = ()
    references: tuple[TableRef, ...] = ()
    cron: str = "@daily"
    start: int | None = None  # epoch ms
    start_relative: str | None = None
    """A relative ``start`` as written ("1 week ago"): ``start`` is it as of the load
    (:func:`fresh_start`), the fingerprint covers this text."""
    end: int | None = None
    grain: tuple[str, ...] = ()
    owner: str | None = None
    tags: tuple[str, ...] = ()
    description: str | None = None
    column_descriptions: tuple[tuple[str, str], ...] = ()
    audits: tuple[AuditCall, ...] = ()
    forward_only: bool = False
    on_destructive_change: str = "error"
    partitioned_by: tuple[str, ...] = ()  # columns, or Spark SQL expressions such as DATE(ts)
    # The properties of SQLMesh's MODEL header read by sluice.core.model.properties:
    clustered_by: tuple[str, ...] = ()  # columns, or Spark SQL expressions
    table_format: str | None = None  # iceberg, delta, hive...: Spark's USING, when set
    storage_format: str | None = None  # parquet, orc...: the files' format
    physical_properties: tuple[tuple[str, str], ...] = ()  # TBLPROPERTIES of the table
    virtual_properties: tuple[tuple[str, str], ...] = ()  # TBLPROPERTIES of the views
    session_properties: tuple[tuple[str, str], ...] = ()  # SET for the model's build only
    allow_partials: bool = False
    gateway: str | None = None
    optimize_query: bool | None = None
    column_references: tuple[str, ...] = ()  # SQLMesh's `references` (join keys)
    signals: tuple[str, ...] = ()  # each signal call as written
    python_code: str | None = None
    """A Python model's code (its function and the project code it uses, no comments)."""
    python_entry: str | None = None
    """A Python model's function name in its file (``path``)."""
    python_variables: tuple[tuple[str, Any], ...] = ()
    """The config.yaml variables a Python model's ``context.var`` reads (all of them when
    a name is not a literal): part of its version, passed to the driver."""
    seed_hash: str | None = None
    stamp: str | None = None  # changing it forces a new version
    pre_statements: tuple[str, ...] = ()
    """SQLMesh's pre-statements (Spark SQL), run in the model's build before its query."""
    post_statements: tuple[str, ...] = ()
    """Its post-statements, run in its build after the query (and its audits)."""
    statement_refusals: tuple[tuple[int, str, str], ...] = ()
    """(line, what, hint) of each pre- or post-statement Sluice does not run (outside the
    allow-list of :mod:`sluice.core.plan.statements`): the model's build is refused."""
    path: str = ""
    line: int = 1
    # What the project's notes say about it (file:line: what, hint): not part of the model.
    warnings: tuple[str, ...] = field(default=(), compare=False)
    column_uses: str | None = field(default=None, compare=False)
    """The columns its query references, for the plan-time check
    (:mod:`sluice.core.model.column_check`): derived from the query, not part of it."""

    @property
    def catalog(self) -> str | None:
        """The configured catalog the name carries (None: Spark's current catalog)."""
        return self.name.split(".")[0] if self.name.count(".") == 2 else None

    @property
    def schema(self) -> str:
        return self.name.split(".")[-2]

    @property
    def table(self) -> str:
        return self.name.split(".")[-1]

    @cached_property
    def query(self) -> exp.Query | None:
        """The parsed Spark query (parsed lazily: re-plans read most models from cache)."""
        if self.query_sql is None:
            return None
        parsed = sqlglot.parse_one(self.query_sql, read="spark")
        assert isinstance(parsed, exp.Query)
        return parsed

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form, stored with each snapshot and in the parse cache:
        what ``dataclasses.asdict`` gives (tests hold them equal), built without its
        generic walk, which deep-copies every leaf (several times the cost, written once
        per model on a cold load)."""
        return _plain(self)  # type: ignore[no-any-return]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Model:
        """Inverse of :meth:`to_dict`."""
        kind = dict(data["kind"])
        kind["name"] = KindName(kind["name"])
        kind["unique_key"] = tuple(kind.get("unique_key", ()))
        kind["csv_settings"] = tuple(tuple(p) for p in kind.get("csv_settings", ()))
        if kind.get("scd") is not None:
            kind["scd"] = Scd(**{**kind["scd"], "columns": tuple(kind["scd"]["columns"])})
        return cls(
            **{
                **data,
                "kind": Kind(**kind),
                "columns": tuple(tuple(c) for c in data.get("columns", ())),
                "depends_on": tuple(data.get("depends_on", ())),
                "references": tuple(TableRef(**r) for r in data.get("references", ())),
                "grain": tuple(data.get("grain", ())),
                "tags": tuple(data.get("tags", ())),
                "column_descriptions": tuple(tuple(c) for c in data.get("column_descriptions", ())),
                "audits": tuple(
                    AuditCall(
                        a["name"],
                        tuple(tuple(x) for x in a["args"]),
                        a["blocking"],
                        a.get("line", 0),
                        a.get("col", 0),
                    )
                    for a in data.get("audits", ())
                ),
                "partitioned_by": tuple(data.get("partitioned_by", ())),
                "clustered_by": tuple(data.get("clustered_by", ())),
                "physical_properties": _pairs(data.get("physical_properties", ())),
                "virtual_properties": _pairs(data.get("virtual_properties", ())),
                "session_properties": _pairs(data.get("session_properties", ())),
                "column_references": tuple(data.get("column_references", ())),
                "signals": tuple(data.get("signals", ())),
                "python_variables": tuple((str(k), v) for k, v in data.get("python_variables", ())),
                "warnings": tuple(data.get("warnings", ())),
                "pre_statements": tuple(data.get("pre_statements", ())),
                "post_statements": tuple(data.get("post_statements", ())),
                "statement_refusals": tuple(
                    (int(line), str(what), str(hint))
                    for line, what, hint in data.get("statement_refusals", ())
                ),
            }
        )


_LEAVES = (str, int, float, bool, type(None))
_FIELDS: dict[type, tuple[str, ...]] = {}


def _plain(value: Any) -> Any:
    """``dataclasses.asdict``'s result for ``value``: dataclasses as dicts, tuples, lists
    and dicts rebuilt, immutable leaves as they are, anything else deep-copied."""
    if isinstance(value, _LEAVES):
        return value  # a StrEnum too: deepcopy returns an enum member itself
    kind = type(value)
    if kind is tuple or kind is list:
        return kind(_plain(v) for v in value)
    names = _FIELDS.get(kind)
    if names is None and is_dataclass(value) and not isinstance(value, type):
        names = _FIELDS[kind] = tuple(f.name for f in fields(value))
    if names is not None:
        return {name: _plain(getattr(value, name)) for name in names}
    if kind is dict:
        return {_plain(k): _plain(v) for k, v in value.items()}
    return copy.deepcopy(value)


def _pairs(items: Any) -> tuple[tuple[str, str], ...]:
    return tuple((str(k), str(v)) for k, v in items)


@dataclass(frozen=True)
class UnitTest:
    """A SQLMesh-format unit test: fixed input rows, the rows the model must return."""

    name: str
    model: str
    inputs: tuple[tuple[str, tuple[dict[str, Any], ...]], ...]
    outputs: tuple[dict[str, Any], ...]
    output_query: bool = True
    ctes: tuple[tuple[str, tuple[dict[str, Any], ...]], ...] = ()
    variables: tuple[tuple[str, Any], ...] = ()
    path: str = ""
    line: int = 0


@dataclass(frozen=True)
class Project:
    """A loaded, validated project: models in dependency order, audits, unit tests."""

    path: str
    models: dict[str, Model]
    audits: dict[str, Audit] = field(default_factory=dict)
    tests: tuple[UnitTest, ...] = ()
    notes: tuple[str, ...] = ()
    config: ProjectConfig = field(default_factory=ProjectConfig)
    # config.yaml's before_all / after_all, as Spark SQL: the Spark job runs them before
    # its first step and after its last.
    before_all: tuple[str, ...] = ()
    after_all: tuple[str, ...] = ()


def fresh_start(model: Model, now: datetime | None = None) -> Model:
    """``model`` with a relative start ("1 week ago") counted from ``now`` (a model read
    from the parse cache keeps the start of the day it was parsed)."""
    if model.start_relative is None:
        return model
    start = relative_ms(model.start_relative, now)
    return model if start is None or start == model.start else replace(model, start=start)
