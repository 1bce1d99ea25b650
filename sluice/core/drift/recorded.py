"""What Sluice recorded of an environment: the truth ``sluice drift`` holds the catalog to
(reads state only; no Spark, no project checkout).

For each model of the environment's current plan, from its stored snapshot: its view and
the query Sluice makes it (:func:`~sluice.core.spark.render.environment_view_sql`), its
physical table (or a VIEW model's physical view) and the mark Sluice gives it, the query
whose analysis gives the columns Sluice creates, the intervals state records as filled,
and the size the last job that wrote the table measured (bytes, rows, when).
"""

from __future__ import annotations

from dataclasses import dataclass

from sluice.core.errors import PlanError, SluiceError
from sluice.core.intervals import Interval, merge
from sluice.core.model.definition import KindName
from sluice.core.snapshot.naming import check_environment_name, view_name
from sluice.core.snapshot.snapshot import Snapshot
from sluice.core.spark.render import (
    embedded_queries,
    environment_view_sql,
    physical_names,
    render_query,
)
from sluice.core.state.records import TableSize
from sluice.core.state.store import StateReader
from sluice.core.workflow import read_environment


@dataclass(frozen=True)
class RecordedModel:
    """One model of an environment as Sluice recorded it.

    Attributes:
        name: The model.
        kind: Its kind (``FULL``, ``VIEW``, ...).
        version: The version its environment's view reads.
        view: The environment's view of it.
        view_sql: The query Sluice makes that view.
        table: Its physical table (a VIEW model's: its physical view).
        table_is_view: A VIEW model's physical object is a view.
        mark: The ``sluice.created_by`` value Sluice gives its table.
        query: Its query against its parents' tables, whose analysis gives the columns
            Sluice creates (None: a Python model, a seed, a VIEW model).
        declared: Its declared columns' names (a Python model's, a seed's): compared
            by name when there is no query.
        extra: Columns its build adds besides the query's (SCD type 2's validity).
        time_column: An INCREMENTAL_BY_TIME_RANGE model's time column.
        intervals: The intervals state records as filled (merged).
        size: What the last job that wrote its table measured (None: none did).
        restatable: Whether its table can be built again from its query (not an SCD type
            2 history that disables restatement).
    """

    name: str
    kind: str
    version: str
    view: str
    view_sql: str
    table: str
    table_is_view: bool
    mark: str
    query: str | None
    declared: tuple[str, ...]
    extra: tuple[str, ...]
    time_column: str | None
    intervals: tuple[Interval, ...]
    size: TableSize | None
    restatable: bool


@dataclass(frozen=True)
class RecordedEnvironment:
    """An environment as Sluice recorded it: its plan, when it was last applied, its
    models with views (external and embedded models have none: not checked)."""

    name: str
    plan_id: str
    applied_ts: int
    end: int | None
    models: tuple[RecordedModel, ...]


def gather(state: StateReader, environment: str) -> RecordedEnvironment:
    """What state records of ``environment``.

    Raises:
        PlanError: the environment does not exist (or was invalidated).
    """
    check_environment_name(environment)
    record = state.get_environment(environment)
    if record is None or record.invalidated:
        known = ", ".join(e.name for e in state.list_environments() if not e.invalidated)
        raise PlanError(
            f"environment '{environment}' does not exist",
            hint=f"apply a plan to it first (sluice apply {environment}); environments: "
            f"{known or 'none'}",
        )
    snapshots = read_environment(state, environment).snapshots
    keys = {(s.name, s.version) for s in snapshots.values()}
    intervals = state.get_intervals(keys)
    sizes = state.get_table_sizes({name for name, _ in keys})
    tables = physical_names(snapshots.values())
    embedded = embedded_queries(snapshots.values())
    end = record.end if record.end is not None else record.updated_ts
    models = [
        _model(snap, environment, tables, embedded, end, intervals, sizes)
        for snap in sorted(snapshots.values(), key=lambda s: s.name)
        if snap.model.kind.has_views
    ]
    return RecordedEnvironment(
        environment, record.plan_id, record.updated_ts, record.end, tuple(models)
    )


def _model(
    snap: Snapshot,
    environment: str,
    tables: dict[str, str],
    embedded: dict[str, str],
    end: int,
    intervals: dict[tuple[str, str], list[Interval]],
    sizes: dict[tuple[str, str], TableSize],
) -> RecordedModel:
    model = snap.model
    is_view = model.kind.name == KindName.VIEW
    query = None
    if model.query_sql is not None and model.python_code is None and not is_view:
        try:
            query = render_query(model, tables, snap.table, end, end, end, embedded)
        except SluiceError:  # its columns are then not compared, its table still is
            query = None
    declared = () if query is not None else tuple(name for name, _ in model.columns)
    scd = model.kind.scd
    extra = (scd.valid_from_name, scd.valid_to_name) if scd is not None else ()
    key = (snap.name, snap.version)
    return RecordedModel(
        name=snap.name,
        kind=model.kind.name.value,
        version=snap.version,
        view=view_name(snap.name, environment),
        view_sql=environment_view_sql(snap),
        table=snap.table,
        table_is_view=is_view,
        mark=f"{snap.name}@{snap.version}",
        query=query,
        declared=declared,
        extra=extra,
        time_column=model.kind.time_column if model.kind.is_incremental_by_time else None,
        intervals=tuple(merge(intervals.get(key, []))),
        size=sizes.get(key),
        restatable=scd is None or not scd.disable_restatement,
    )
