"""Job specs for the Spark driver: apply a plan, clean up environments (pure).

One command is one job: every table build, audit and view swap of an apply go to the
driver together, so Spark starts once. A spec holds no state URL and no environment
record: the driver reports its writes as events, and the service commits the
environment record (:func:`environment_record`) once the job has succeeded.

The one thing a job takes from state besides the plan: which of its physical tables an
earlier Sluice job built (:func:`recorded_builds`, the versions state records filled
intervals of). Their build steps say ``adopt_unmarked`` (:func:`adopt_recorded`), so a
table built before Sluice marked its tables is marked and written into, not refused (the
rule: :mod:`sluice.core.spark.steps.swap`). The flag comes from state alone, never from
the project or the plan a pull request computes.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sluice.core.errors import ConfigError
from sluice.core.model.definition import Audit, KindName
from sluice.core.plan import statements
from sluice.core.plan.plan import Plan
from sluice.core.snapshot.naming import (
    PHYSICAL_PREFIX,
    PROD,
    model_view_schema,
    physical_table,
    view_name,
)
from sluice.core.spark.render import build_steps, managed_schemas, view_steps
from sluice.core.spark.spec import JobSpec, SqlStep, Step
from sluice.core.state.records import EnvironmentRecord, StoredSnapshot, TableKey

if TYPE_CHECKING:
    from sluice.core.state.store import StateReader

DAY_MS = 86_400_000


def environment_record(plan: Plan, now: int, ttl_days: int | None) -> EnvironmentRecord:
    """The record the environment gets once ``plan`` is applied."""
    expiration = None
    if plan.environment != PROD and ttl_days is not None:
        expiration = now + ttl_days * DAY_MS
    return EnvironmentRecord(
        name=plan.environment,
        snapshots=tuple(s.ref for s in plan.snapshots),
        plan_id=plan.plan_id,
        previous_plan_id=plan.base_plan_id,
        start=plan.start,
        end=plan.end,
        expiration_ts=expiration,
        updated_ts=now,
    )


def apply_job_id(plan: Plan, now: int) -> str:
    """The id of the job applying ``plan`` at ``now`` (its log file's name)."""
    return f"apply-{plan.environment}-{plan.plan_id[:12]}-{now}"


def apply_job(
    plan: Plan,
    *,
    audits: Mapping[str, Audit],
    project_dir: str,
    table_format: str,
    previous_versions: Mapping[str, str] | None,
    now: int,
    restate_ranges: Mapping[str, list[tuple[int, int]]] | None = None,
    before_all: Sequence[str] = (),
    after_all: Sequence[str] = (),
    recorded: Collection[TableKey] = (),
    prod_schemas: Collection[str],
) -> JobSpec:
    """The job that builds and audits ``plan`` and points its environment's views.

    ``previous_versions`` maps model -> version the environment's views point at now
    (None when it has none), so only views that change are replaced. Committing the
    environment's record is the caller's, once the job has succeeded. ``before_all`` and
    ``after_all`` (the project's, checked Spark SQL) run first and last, as ``sql`` steps
    with those ids (they alone are no reason to start Spark: see ``ALL_STEPS``).
    ``recorded``: the physical tables state records a build of (:func:`recorded_builds`);
    their build steps may adopt the table when it has no mark (:func:`adopt_recorded`).
    Left out, none may: an unmarked table is refused.
    ``prod_schemas``: the schemas of prod's environment as in force (:func:`prod_schemas`,
    from state), which no statement of the project or of a model may name, whatever the
    plan's own models are (a pull request may turn prod's model into an external one);
    required, so no caller forgets prod (empty only where prod does not exist yet).
    """
    given = {"before_all": before_all, "after_all": after_all}
    check_statements(plan, given, project_dir, prod_schemas)
    steps: list[Step] = []
    if before_all:
        steps.append(_statements_step("before_all", before_all))
    if plan.rebuild:  # a drift repair: the tables it builds again are dropped first
        steps.append(
            {
                "type": "drop",
                "label": "drop the tables the repair builds again",
                "views": [],
                "schemas": [],
                "tables": sorted(plan.snapshot(name).table for name in plan.rebuild),
            }
        )
    steps += adopt_recorded(
        build_steps(plan, audits, project_dir, table_format, restate_ranges, prod_schemas),
        recorded,
    )
    steps.append(view_steps(plan, previous_versions))
    if after_all:
        steps.append(_statements_step("after_all", after_all))
    return {
        "job_id": apply_job_id(plan, now),
        "kind": "apply",
        "environment": plan.environment,
        "plan_id": plan.plan_id,
        "base_plan_id": plan.base_plan_id,
        "steps": steps,
    }


def job_counts(spec: JobSpec) -> tuple[int, int, int]:
    """What an apply job does, counted as its plan counts it: (tables built, the plan's
    backfill; physical views made for VIEW models, the plan's model views; views of the
    environment pointed at their versions)."""
    builds = [s for s in spec["steps"] if s["type"] == "build"]
    model_views = sum(1 for s in builds if "view_sql" in s)
    views = sum(len(s["views"]) for s in spec["steps"] if s["type"] == "views")
    return len(builds) - model_views, model_views, views


def recorded_builds(state: StateReader, tables: Iterable[TableKey]) -> frozenset[TableKey]:
    """Those of ``tables`` (``(model, version)``) that state records a Sluice build of: the
    versions with recorded intervals. Only a job's build of that very version records
    them, once its batch is written (and its blocking audits passed): the write checker
    (:mod:`sluice.core.spark.writes`) takes intervals for no other. A table an earlier
    Sluice built, before it marked its tables, is one of these; a table made ahead under
    a version's name, with nothing built, is not.

    For :func:`apply_job`'s ``recorded``; e.g. ``recorded_builds(state, ((s.name,
    s.version) for s in plan.snapshots))``.
    """
    return frozenset(key for key, spans in state.get_intervals(set(tables)).items() if spans)


def prod_schemas(state: StateReader) -> frozenset[str]:
    """The schemas of prod's environment as state records it now (lower case, without a
    catalog): of its models' views and of their physical tables, its external models'
    left out (Sluice makes nothing there). Empty before prod's first apply.

    For :func:`apply_job`'s ``prod_schemas``: what prod is comes from state, never from
    the plan a pull request computes (which may have turned prod's model into an
    external or embedded one, or dropped it).
    """
    record = state.get_environment(PROD)
    if record is None:
        return frozenset()
    stored = state.get_snapshots(ref.id for ref in record.snapshots)
    names = []
    for ref in record.snapshots:
        snap = stored.get(ref.id)
        # A snapshot state no longer holds counts: its schema is managed all the same.
        if snap is None or snap.payload["model"]["kind"]["name"] != KindName.EXTERNAL.value:
            names.append(ref.name)
    views = statements.model_schemas(names)
    return frozenset(views | {PHYSICAL_PREFIX + schema for schema in views})


def adopt_recorded(steps: list[Step], recorded: Collection[TableKey]) -> list[Step]:
    """``steps``, each build step told (``adopt_unmarked``) whether its table is one state
    records a build of (``recorded``): the only place the flag is set. What the build
    does with it: :func:`sluice.core.spark.steps.swap.check_mark`."""
    for step in steps:
        if step["type"] == "build":
            step["adopt_unmarked"] = (step["model"], step["version"]) in recorded
    return steps


def check_statements(
    plan: Plan,
    given: Mapping[str, Sequence[str]],
    project_dir: str = ".",
    prod_schemas: Collection[str] = (),
) -> None:
    """The project's statements name no schema Sluice manages: physical and environment
    schemas by their form, the schemas of prod's environment as in force
    (``prod_schemas``, :func:`prod_schemas`), and those of the plan's models of every
    kind but external (and of those it removes).

    Raises:
        ConfigError: naming config.yaml, the statement and the schema.
    """
    schemas = managed_schemas(plan, prod_schemas)
    config = Path(project_dir, "config.yaml")
    if not config.exists() and Path(project_dir, "config.py").exists():
        config = Path(project_dir, "config.py")
    for key, sqls in given.items():
        for index, sql in enumerate(sqls):
            shaped = statements.check(sql)
            if shaped is not None:  # the loader named it (file:line) in the plan's notes
                raise ConfigError(
                    f"{key} statement {index + 1} ({sql}) is not one Sluice runs: it "
                    f"{shaped.what}; no job of the project runs until it is rewritten",
                    path=str(config),
                    line=None,
                    hint=shaped.hint,
                )
            problem = statements.refusal(sql, schemas)
            if problem is not None:
                raise ConfigError(
                    f"{key} statement {index + 1} ({sql}) {problem}",
                    path=str(config),
                    line=None,
                    hint=statements.HINT,
                )


_NO_VIEWS = frozenset({KindName.EXTERNAL.value, KindName.EMBEDDED.value})
"""The kinds of models without environment views (``Kind.has_views``)."""

ALL_STEPS = frozenset({"before_all", "after_all"})
"""The ids of the steps that run config.yaml's before_all / after_all statements."""


def _statements_step(key: str, statements: Sequence[str]) -> SqlStep:
    return {
        "type": "sql",
        "id": key,
        "label": f"run the project's {key} statements",
        "statements": list(statements),
    }


def janitor_job(
    environments: Iterable[EnvironmentRecord],
    snapshots: Mapping[tuple[str, str], StoredSnapshot],
    tables: Iterable[tuple[str, str]],
    now: int,
) -> JobSpec:
    """Drop the views (and schemas) of ``environments`` and the physical ``tables``."""
    views: list[str] = []
    schemas: set[str] = set()
    for env in environments:
        for ref in env.snapshots:
            stored = snapshots.get((ref.name, ref.identifier))
            if stored is not None and stored.payload["model"]["kind"]["name"] in _NO_VIEWS:
                continue
            views.append(view_name(ref.name, env.name))
            schemas.add(model_view_schema(ref.name, env.name))
    steps: list[Step] = [
        {
            "type": "drop",
            "label": "drop expired environments and unused tables",
            "views": sorted(views),
            "schemas": sorted(schemas),
            "tables": sorted(physical_table(name, version) for name, version in tables),
        }
    ]
    return {"job_id": f"janitor-{now}", "kind": "janitor", "steps": steps}
