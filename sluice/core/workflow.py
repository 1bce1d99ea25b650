"""What Sluice does, composed from its parts: load, fingerprint, read state, plan.

Each function here is one user-facing operation; the CLI and the bot call these and
nothing below them. Time comes in as an argument, so every operation is reproducible.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from sluice.core import jobs, skip
from sluice.core.errors import ConflictError, PlanError
from sluice.core.intervals import Interval
from sluice.core.model.definition import KindName, Model, Project
from sluice.core.model.graph import descendants
from sluice.core.model.loader import load_project
from sluice.core.model.names import lookup_name
from sluice.core.plan.build import PlanRequest, TableKey, build_plan, candidate_versions
from sluice.core.plan.cost import estimate_scan
from sluice.core.plan.output import Written, estimate_output, written
from sluice.core.plan.plan import Plan
from sluice.core.snapshot.fingerprint import fingerprint_models
from sluice.core.snapshot.naming import PROD, check_environment_name, view_name
from sluice.core.snapshot.snapshot import Snapshot
from sluice.core.spark import dev_server, testing
from sluice.core.spark.connect import make_runner as spark_runner
from sluice.core.spark.results import QueryResult, UnitTestResult, result_key, result_of
from sluice.core.spark.session import SparkPaths
from sluice.core.spark.spec import JobSpec, TableDiffStep
from sluice.core.spark.submit import (
    JOB_TIMEOUT_S,
    InProcessRunner,
    JobProgress,
    JobResult,
    OnEvent,
    Runner,
    run_recorded,
)
from sluice.core.state import OpenStateReader, StateReader, StateStore, StateWriter, open_state
from sluice.core.state.readonly import read_state
from sluice.core.state.records import VIEWS_DROPPED, EnvironmentRecord, PlanRecord, SnapshotRef
from sluice.core.state.records import JobResult as StoredResult
from sluice.core.tablediff.result import (
    DiffOptions,
    TableDiffError,
    TableDiffResult,
    same_table_result,
)
from sluice.core.tablediff.where import parse_where

STATE_URL_ENV = "SLUICE_DATABASE_URL"

logger = logging.getLogger(__name__)


def state_url(project: Project, override: str | None = None) -> str:
    """Where state lives: --state, then $SLUICE_DATABASE_URL, then config, then SQLite."""
    if override:
        return override
    if os.environ.get(STATE_URL_ENV):
        return os.environ[STATE_URL_ENV]
    if project.config.sluice.state.url:
        return project.config.sluice.state.url
    path = (Path(project.path) / ".sluice" / "state.db").resolve()
    return f"sqlite:///{path}"


def open_project_state(project: Project, override: str | None = None) -> StateStore:
    """Open (creating and migrating if needed) the state store of ``project``."""
    return open_state(state_url(project, override))


def read_project_state(project: Project, override: str | None = None) -> OpenStateReader:
    """The state of ``project`` to read only: a SQLite file read-only through sqlite3 (an
    absent one is empty and stays absent); any other, opened as :func:`open_project_state`
    does."""
    url = state_url(project, override)
    reader = read_state(url)
    return reader if reader is not None else open_state(url)


@dataclass(frozen=True)
class EnvironmentView:
    """An environment as read from state: its record (None if new) and its snapshots."""

    record: EnvironmentRecord | None
    snapshots: dict[str, Snapshot]


def read_environment(state: StateReader, name: str) -> EnvironmentView:
    """The environment ``name``; a missing one starts as a copy of prod."""
    record = state.get_environment(name)
    source = record
    if (record is None or record.invalidated) and name != PROD:
        source = state.get_environment(PROD)
    if source is None or (source.invalidated and source is record):
        return EnvironmentView(record, {})
    stored = state.get_snapshots((r.name, r.identifier) for r in source.snapshots)
    snapshots = {s.name: Snapshot.from_stored(s) for s in stored.values()}
    return EnvironmentView(record, snapshots)


def plan_environment(
    project: Project,
    state: StateReader,
    environment: str,
    *,
    end: int,
    execution_time: int,
    start: int | None = None,
    forward_only: bool = False,
    restate: Iterable[str] = (),
    against: str | None = None,
    refresh: bool = False,
) -> Plan:
    """Plan bringing ``environment`` to the state of ``project``.

    ``restate`` names models whose data in the plan's range is recomputed; ``+name``
    restates the model and everything downstream of it. The changes are those from what
    ``environment`` holds now, or with ``against`` from that environment's state (a pull
    request's environment is planned against prod, so its plan says what the PR changes
    however many times it was built); the plan still applies only on top of
    ``environment``'s current record. ``refresh``: a scheduled run's plan, which rebuilds
    FULL and INCREMENTAL_BY_UNIQUE_KEY tables on each new interval of their cron.
    """
    check_environment_name(environment)
    restated = resolve_restatements(project, restate)
    fingerprints = fingerprint_models(project.models, project.audits)
    env = read_environment(state, environment)
    base = env if against is None or against == environment else read_environment(state, against)
    intervals = state.get_intervals(candidate_versions(fingerprints, base.snapshots))
    plan = build_plan(
        PlanRequest(
            environment=environment,
            models=project.models,
            fingerprints=fingerprints,
            base=base.snapshots,
            base_plan_id=env.record.plan_id if env.record is not None else None,
            start=start,
            end=end,
            execution_time=execution_time,
            forward_only=forward_only,
            intervals=intervals,
            restate=restated,
            before_all=project.before_all,
            after_all=project.after_all,
            refresh=refresh,
        )
    )
    return with_scan_estimate(state, plan, intervals)


def with_scan_estimate(
    state: StateReader, plan: Plan, intervals: Mapping[TableKey, list[Interval]]
) -> Plan:
    """``plan`` with the bytes its backfill reads (:mod:`sluice.core.plan.cost`) and the
    rows and bytes it writes (:mod:`sluice.core.plan.output`), as every plan judged by a
    gate or a policy needs (a PR's, a drift repair's); a plan with no backfill reads
    nothing and is returned as it is."""
    if not plan.backfill:
        return plan
    snapshots = {s.name: s for s in plan.snapshots}
    sizes = state.get_table_sizes(snapshots)  # external parents are never measured
    scan = estimate_scan(snapshots, plan.backfill, sizes, intervals)
    output = estimate_output(snapshots, plan.backfill, sizes, intervals)
    return dataclasses.replace(plan, scan=scan, output=output)


def resolve_restatements(project: Project, names: Iterable[str]) -> frozenset[str]:
    """Model names to restate; ``+name`` adds every model downstream of ``name``.

    Raises:
        PlanError: for a name that is not a model of the project.
    """
    chosen: set[str] = set()
    for raw in names:
        downstream = raw.startswith("+")
        name = lookup_name(raw.lstrip("+"), project.config.catalogs)  # local.s.t is s.t
        model = project.models.get(name)
        if model is None or model.kind.name == KindName.EXTERNAL:
            raise PlanError(
                f"cannot restate '{name}': it is not a model of this project",
                hint="name a model, e.g. --restate-model jaffle.orders (or +jaffle.orders "
                "for it and everything downstream)",
            )
        _check_restatable(model)
        chosen.add(name)
        if downstream:
            # As SQLMesh does: models that keep a history nothing can recompute (SCD type
            # 2, unless `disable_restatement false`) are left out of a `+name` restatement.
            chosen |= {
                d for d in descendants(project.models, [name]) if _restatable(project.models[d])
            }
    return frozenset(chosen)


def _restatable(model: Model) -> bool:
    return model.kind.scd is None or not model.kind.scd.disable_restatement


def _check_restatable(model: Model) -> None:
    if not _restatable(model):
        raise PlanError(
            f"cannot restate '{model.name}': a {model.kind.name} model keeps a history its "
            "query cannot recompute, so restating it is disabled",
            path=model.path or None,
            line=model.line if model.path else None,
            hint="set `disable_restatement false` in its kind to allow it (a restatement "
            "then rebuilds the table from the query alone, dropping the history)",
        )


PLAN_SNAPSHOTS = "snapshots"
"""The key of a recorded plan's payload holding ``[name, identifier, version]`` of every
snapshot the plan points its environment at (what a rollback to it restores)."""


def record_plan(state: StateWriter, plan: Plan, now: int, commit: str | None = None) -> None:
    """Store the plan and its snapshots (idempotent): the first half of applying it.
    ``commit``: the one its project came from (:attr:`PlanRecord.project_commit`)."""
    state.push_snapshots(s.to_stored() for s in plan.snapshots)
    payload = {
        **plan.to_json(),
        PLAN_SNAPSHOTS: [[s.name, s.identifier, s.version] for s in plan.snapshots],
    }
    record = PlanRecord(plan.plan_id, plan.environment, plan.base_plan_id, now, payload, commit)
    state.save_plan(record)


def plan_commit(state: StateReader, environment: str) -> tuple[str, str | None] | None:
    """(the plan ``environment`` is at, the commit its project came from: None when no
    promotion recorded one); None when the environment does not exist."""
    record = state.get_environment(environment)
    if record is None or record.invalidated:
        return None
    found = state.get_plan(record.plan_id)
    return record.plan_id, (found.project_commit if found is not None else None)


def carried_commit(state: StateReader, plan: Plan) -> str | None:
    """The commit a plan that changes no model keeps: its base plan's (a scheduled run, a
    drift repair: prod's models are still those the promotion applied). None for a plan
    that changes models (only its promotion knows the commit), or whose base has none."""
    if plan.changes_models or plan.base_plan_id is None:
        return None
    base = state.get_plan(plan.base_plan_id)
    return base.project_commit if base is not None else None


def commit_plan(
    state: StateStore, plan: Plan, *, now: int, ttl_days: int | None = None
) -> EnvironmentRecord:
    """Record ``plan`` as what its environment points at, without any Spark work.

    For plans whose data is already in place (and for tests of the state layer); apply
    goes through :func:`apply_plan`, which builds and swaps the views first.

    Raises:
        ConflictError: the environment moved on since the plan was computed; re-plan.
    """
    record_plan(state, plan, now)
    return commit_environment(state, plan, now, ttl_days)


def commit_environment(
    state: StateStore, plan: Plan, now: int, ttl_days: int | None
) -> EnvironmentRecord:
    """Point the environment's record at ``plan`` (compare-and-swap on its base plan).

    Done by the service once ``plan``'s job has succeeded, never by the driver.

    Raises:
        ConflictError: the environment moved on since the plan was computed; re-plan.
    """
    record = jobs.environment_record(plan, now, ttl_days)
    state.update_environment(record, expected_plan_id=plan.base_plan_id)
    return record


def check_base(state: StateReader, plan: Plan) -> None:
    """Refuse to start ``plan``'s job when its environment moved on since the plan was made.

    Checked right before the job starts (the driver has no state to check it with), so a
    stale plan re-points no views. The environment's record is still guarded by the
    commit's compare-and-swap on the same base plan, which catches a change made while
    the job ran.

    Raises:
        ConflictError: naming the plan the environment is at now.
    """
    env = plan.environment
    record = state.get_environment(env)
    current = record.plan_id if record is not None else None
    if current is not None and current.startswith(JANITOR_HOLDS):
        raise ConflictError(
            f"environment '{env}' is being cleared by the janitor (it drops views that "
            "jobs cut short left, which no record named)",
            hint=f"run it again in a minute: re-run `sluice plan {env}` and apply the new plan",
        )
    if current != plan.base_plan_id:
        raise ConflictError(
            f"environment '{env}' changed since this plan was made: it is now at plan "
            f"'{current}', the plan expected '{plan.base_plan_id}'",
            hint=f"re-run `sluice plan {env}` and apply the new plan",
        )


def run_views_job(
    runner: Runner, spec: JobSpec, state: StateStore, plan: Plan, commit: Callable[[], None]
) -> JobResult:
    """Run ``spec``, a job that re-points ``plan``'s environment's views (its ``views``
    step), recording its writes in ``state``.

    A job that fails after its views step finished (out of time, a statement after all
    failing, a table diff cut short) leaves every view reading the plan's versions: the
    record must say so, or the state tells another story than the catalog (a promotion
    "failed, prod unchanged" with prod's views swapped; PR views no record names). So
    ``commit`` (the environment's record to ``plan``) is called then, and the failure is
    raised as :class:`FailedAfterViews`. A driver lost is raised as it is (run again, the
    job finishes the swap and commits), and so is a job stopped on purpose.

    Raises:
        FailedAfterViews: the job failed after its views step; the record was committed.
        ExecutionError: the job failed before (or in) its views step; the record is as it
            was.
    """
    from sluice.core.errors import DriverLost, ExecutionError, FailedAfterViews, JobCancelled

    progress = JobProgress()
    try:
        return run_recorded(runner, spec, state=state, progress=progress)
    except (DriverLost, JobCancelled):
        raise
    except ExecutionError as exc:
        views = [i for i, step in enumerate(spec["steps"]) if step["type"] == "views"]
        if not progress.finished(views):
            raise
        commit()
        env = plan.environment
        raise FailedAfterViews(
            f"{exc.message} (after the views step: {env}'s views read plan {plan.plan_id}'s "
            f"versions, and its record was committed to that plan)",
            path=exc.path,
            line=exc.line,
            hint=exc.hint,
        ) from exc


@dataclass(frozen=True)
class ApplyResult:
    """What applying a plan did."""

    plan: Plan
    tables_built: int  # the plan's backfill: tables (VIEW models' views are not tables)
    views_swapped: int
    job: JobResult | None
    written: Written | None = None  # what the built tables hold (None: nothing built)
    model_views: int = 0  # physical views made for VIEW models (the plan's create_views)
    # A scheduled run's (skip_unchanged): each checked rebuild's decision, and why each
    # other model built always runs (sluice/core/skip.py).
    decided: Mapping[str, skip.Decision] = dataclasses.field(default_factory=dict)
    always: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @property
    def skipped(self) -> list[str]:
        """The models whose rebuild was skipped: nothing they read had changed."""
        return [name for name, d in self.decided.items() if not d.ran]

    def explain(self) -> list[skip.Explanation]:
        """Why each model of the plan ran, was skipped or had nothing to do."""
        return skip.explain(self.plan, self.decided, self.always)


def apply_plan(
    project: Project,
    state: StateStore,
    plan: Plan,
    runner: Runner,
    *,
    url: str | None = None,
    now: int,
    keep: bool = False,
    skip_unchanged: bool | None = None,
    commit: str | None = None,
) -> ApplyResult:
    """Build what ``plan`` needs, audit it, point the environment's views, commit.

    ``commit``: the commit ``project`` is (a promotion's), recorded with the plan; without
    it, a plan that changes no model records its base plan's (:func:`carried_commit`), any
    other none. Prod's scheduled runs and drift repairs load prod's project there.

    ``skip_unchanged`` (a scheduled run's plan): a rebuild whose query and inputs are
    those its version's last run saw is skipped (:mod:`sluice.core.skip`); what each
    rebuild that ran read is recorded for the next run. By default (None) prod's builds
    record what they read (nothing skipped), so a run right after a deploy may skip them;
    False: neither (every build runs unchecked, as before skipping: the bench's baseline).

    ``keep``: the environment never expires (a promotion tier such as ``staging``);
    otherwise an environment other than prod expires after ``environment_ttl_days``.

    One Spark job builds, audits and points the views; the environment's views change
    only after every table is built and audited, and its record (committed here, by
    compare-and-swap) only after the job succeeded. What the driver reports (intervals,
    audit results) is checked and written to ``state`` as it arrives, so applying a plan
    again after a crash finishes the rest.

    ``url`` is accepted for older callers and not used: the driver gets no state URL.

    Raises:
        ExecutionError: a query, an audit or Spark failed; the environment is unchanged.
        ConflictError: the environment moved on since the plan was computed.
    """
    ttl_days = None if keep else project.config.sluice.environment_ttl_days
    # What the job needs from state is read, and its plan recorded, in one transaction;
    # what it did is committed in another once it succeeded.
    with state.together(f"prepare applying a plan to {plan.environment}"):
        record = state.get_environment(plan.environment)
        if (
            record is not None
            and not record.invalidated
            and not plan.has_changes
            and not plan.backfill
        ):
            return ApplyResult(plan, 0, 0, None)
        record_plan(state, plan, now, commit or carried_commit(state, plan))
        previous = None
        if record is not None and not record.invalidated:
            # a drift repair's views are made again whatever their version
            previous = {
                ref.name: ref.version for ref in record.snapshots if ref.name not in plan.repoint
            }
        restate = {name: [(plan.start or 0, plan.end)] for name in plan.restated}
        spec = jobs.apply_job(
            plan,
            audits=project.audits,
            project_dir=project.path,
            table_format=project.config.sluice.spark.table_format,
            previous_versions=previous,
            now=now,
            restate_ranges=restate,
            before_all=project.before_all,
            after_all=project.after_all,
            recorded=jobs.recorded_builds(state, ((s.name, s.version) for s in plan.snapshots)),
            prod_schemas=jobs.prod_schemas(state),
        )
        always: dict[str, str] = {}
        if skip_unchanged:
            builds = [(s["model"], s["version"]) for s in spec["steps"] if s["type"] == "build"]
            always = skip.attach(plan, spec["steps"], state.get_run_inputs(builds))
        elif skip_unchanged is None and plan.environment == PROD:
            # What prod's builds read is recorded too (none is skipped: no record is given),
            # so the first run after a deploy may skip what the deploy just built.
            always = skip.attach(plan, spec["steps"], {})
        if not _needs_spark(spec):
            # Nothing to build and no view to create or drop (a project without models):
            # the commit alone, without starting Spark for it.
            commit_environment(state, plan, now, ttl_days)
            return ApplyResult(plan, 0, 0, None)
        check_base(state, plan)

    def follow() -> None:  # the job failed after its views step: the record follows them
        with state.together(f"commit {plan.environment}"):
            commit_environment(state, plan, now, ttl_days)

    result = run_views_job(runner, spec, state, plan, follow)
    built, model_views, views = jobs.job_counts(spec)
    decided, seen = skip.outcomes(spec["steps"], result.results, now)
    built -= sum(1 for d in decided.values() if not d.ran)
    with state.together(f"commit {plan.environment}"):
        commit_environment(state, plan, now, ttl_days)
        state.save_run_inputs(seen)
        held = written(state, plan) if built else None
    return ApplyResult(plan, built, views, result, held, model_views, decided, always)


def plan_run(project: Project, state: StateReader, environment: str, *, now: int) -> Plan:
    """The plan of a scheduled run: the intervals of ``environment``'s models that are
    due at ``now`` by each model's cron, and nothing else. A FULL or
    INCREMENTAL_BY_UNIQUE_KEY table already built is rebuilt once a new interval of its
    cron is due (its apply may then skip it: ``apply_plan(..., skip_unchanged=True)``).

    A run processes what the environment has, so the project must be the one its plan
    was made from (the prod branch's checkout, for prod); every missed interval is in one
    plan, so a run after missed schedules catches up once.

    Raises:
        PlanError: the environment does not exist, or the project differs from it.
    """
    record = state.get_environment(check_environment_name(environment))
    if record is None or record.invalidated:
        raise PlanError(
            f"environment '{environment}' does not exist",
            hint=f"apply a plan to it first (`sluice apply {environment}`)",
        )
    plan = plan_environment(project, state, environment, end=now, execution_time=now, refresh=True)
    if plan.has_changes:
        changed = [c.name for c in (*plan.directly_modified, *plan.indirectly_modified)]
        changed += [*plan.added, *plan.removed, *plan.metadata_only]
        shown = ", ".join(sorted(changed)[:5]) + (" ..." if len(changed) > 5 else "")
        raise PlanError(
            f"this checkout is not what {environment} runs: {shown} differ from its plan "
            f"{record.plan_id}",
            hint=f"run from the checkout {environment} was applied from (for prod, its "
            f"branch), or apply this one first (`sluice plan {environment}` shows the changes)",
        )
    return plan


def _needs_spark(spec: JobSpec) -> bool:
    """Whether a job has work for Spark (else only the environment record changes)."""
    return any(
        not (step["type"] == "views" and not (step["views"] or step["drop"]))
        and step.get("id") not in jobs.ALL_STEPS
        for step in spec["steps"]
    )


def invalidate_environment(state: StateWriter, name: str) -> None:
    """Mark ``name`` for removal by the next janitor run (prod cannot be invalidated)."""
    if check_environment_name(name) == PROD:
        raise PlanError(
            "prod cannot be invalidated", hint="invalidate a virtual environment such as pr_12"
        )
    state.invalidate_environment(name)


@dataclass(frozen=True)
class JanitorReport:
    """What a janitor run removed and what waits for its TTL."""

    environments: tuple[str, ...]
    tables: tuple[str, ...]
    waiting: int


JANITOR_HOLDS = "janitor-"
"""How the plan id of the record the janitor holds an environment with begins (a plan's own
id is hex): a job refuses to start on it (:func:`check_base`)."""

UNSWEPT_QUIET_MS = 2 * int((JOB_TIMEOUT_S or 7_200) * 1000)
"""How long a plan of an environment no record names must have been recorded before the
janitor drops the views it could have made: a job that recorded it has ended by then."""


def _never_busy(_environment: str) -> bool:
    return False


def _swept(
    state: StateStore,
    envs: list[EnvironmentRecord],
    expired: list[EnvironmentRecord],
    *,
    now: int,
    quiet_ms: int,
    busy: Callable[[str], bool],
) -> tuple[list[EnvironmentRecord], list[str]]:
    """What the janitor drops besides: the views plans recorded for an environment could
    have made that no live record names. ``expired`` (the records to drop) with each one's
    views widened to those of its environment's plans, plus a record the janitor holds
    (invalidated, plan id ``janitor-<now>``) for each environment with plans but no record:
    a job cut short after its views step and before its record (out of time inside the
    views step, the service lost between) left views no record named. The plan is the
    intent: it is recorded, with its environment and versions, before its job starts.

    Never prod's; never another repository's (each has its own state and schema prefix);
    never those of an environment with a live record (they wait for it to expire), whose
    newest plan was recorded less than ``quiet_ms`` ago, or that ``busy`` says a running
    job builds: asked after the hold is written, so a job that starts later refuses to
    (:func:`check_base`) and one that ran already is seen. Returns the records and the
    plan ids whose views go."""
    records = {e.name: e for e in envs}
    doomed = {e.name: e for e in expired}
    plans: dict[str, list[tuple[str, int]]] = {}
    for environment, plan_id, created in state.unswept_plans():
        if environment != PROD:
            plans.setdefault(environment, []).append((plan_id, created))
    widened = dict(doomed)
    swept: list[str] = []
    for environment, recorded in sorted(plans.items()):
        record = records.get(environment)
        if record is not None and environment not in doomed:
            continue  # live: its plans' views go when it expires
        if max(created for _, created in recorded) > now - quiet_ms or busy(environment):
            continue
        refs: dict[tuple[str, str], SnapshotRef] = {}
        for plan_id, _ in recorded:
            found = state.get_plan(plan_id)
            for item in (found.payload.get(PLAN_SNAPSHOTS) or []) if found is not None else []:
                name, identifier, version = (str(part) for part in item)
                refs[(name, identifier)] = SnapshotRef(name, identifier, version)
        if record is None:
            hold = EnvironmentRecord(
                name=environment,
                snapshots=tuple(refs.values()),
                plan_id=f"{JANITOR_HOLDS}{now}",
                previous_plan_id=None,
                start=None,
                end=None,
                expiration_ts=None,
                invalidated=True,
                updated_ts=now,
            )
            try:
                state.update_environment(hold, expected_plan_id=None)
            except ConflictError:
                continue  # a job recorded it meanwhile: it is live
            if busy(environment):
                state.delete_environment(environment)  # the hold: no job commits over it
                continue
            widened[environment] = hold
        else:
            mine = {(r.name, r.identifier) for r in record.snapshots}
            more = tuple(r for key, r in refs.items() if key not in mine)
            widened[environment] = dataclasses.replace(record, snapshots=record.snapshots + more)
        swept += [plan_id for plan_id, _ in recorded]
    return list(widened.values()), swept


def run_janitor(
    state: StateStore,
    runner: Runner,
    *,
    url: str | None = None,
    now: int,
    table_ttl_ms: int,
    keep: Iterable[TableKey] = (),
    quiet_ms: int = UNSWEPT_QUIET_MS,
    busy: Callable[[str], bool] = _never_busy,
) -> JanitorReport:
    """Drop invalidated and expired environments, then tables unreferenced for the TTL.

    ``keep``: tables to keep however long unused (those of prod's last plans, so that a
    rollback stays a view swap: :func:`sluice.core.rollback.kept_tables`). The Spark job
    drops views and tables; their records go from ``state`` here, after it succeeded
    (``url`` is accepted for older callers and not used).

    Also the views of environments no record names that recorded plans could have made
    (a job cut short between its views and its record), once no job can be making them:
    ``quiet_ms`` after their newest plan and not ``busy`` (a running job's environment,
    asked of the caller's queue): :func:`_swept`. Each plan whose views went is marked
    (a ``views_dropped`` result), so it is not visited again.
    """
    envs = state.list_environments()
    expired = [
        e
        for e in envs
        if e.name != PROD
        and (e.invalidated or (e.expiration_ts is not None and e.expiration_ts <= now))
    ]
    live = [e for e in envs if e not in expired]
    expired, swept = _swept(state, envs, expired, now=now, quiet_ms=quiet_ms, busy=busy)
    referenced = {(ref.name, ref.version) for e in live for ref in e.snapshots} | set(keep)
    since = state.set_orphans(state.list_tables() - referenced, now)
    drop = sorted(key for key, ts in since.items() if now - ts >= table_ttl_ms)
    if not expired and not drop:
        return JanitorReport((), (), len(since))
    refs = [(r.name, r.identifier) for e in expired for r in e.snapshots]
    try:
        run_recorded(
            runner, jobs.janitor_job(expired, state.get_snapshots(refs), drop, now), state=state
        )
    except BaseException:
        for env in expired:  # the janitor's holds go; the next pass finds the views again
            if env.plan_id.startswith(JANITOR_HOLDS):
                state.delete_environment(env.name)
        raise
    for env in expired:
        state.delete_environment(env.name)
    state.save_results(
        StoredResult(f"janitor-{now}", plan_id, VIEWS_DROPPED, "janitor", True, {}, now)
        for plan_id in swept
    )
    state.forget_tables(drop)
    return JanitorReport(
        tuple(e.name for e in expired), tuple(f"{n}@{v}" for n, v in drop), len(since) - len(drop)
    )


def run_unit_tests(
    project: Project, runner: Runner, *, pattern: str | None, now: int, url: str | None = None
) -> list[UnitTestResult]:
    """Run the project's unit tests (those matching ``pattern``) on Spark; one result each.

    With ``url``, the results are also stored in that state database (opened here: the
    driver gets no state URL and reports its results as events).
    """
    steps = testing.unit_test_steps(project, pattern, now)
    if not steps:
        return []
    spec: JobSpec = {"job_id": f"test-{now}", "kind": "test", "steps": [*steps]}
    if url is None:
        job = run_recorded(runner, spec, state=None)
    else:
        store = open_state(url)
        try:
            job = run_recorded(runner, spec, state=store)
        finally:
            store.close()
    keys = [result_key(index, step) for index, step in enumerate(spec["steps"])]
    return [result_of(job.results, key, "unit_test") for key in keys]


def query_environment(
    project: Project, state: StateReader, environment: str, sql: str, runner: Runner, *, limit: int
) -> QueryResult:
    """Run a read-only query with model names resolved to ``environment``'s views."""
    check_environment_name(environment)
    record = state.get_environment(environment)
    if record is None or record.invalidated:
        known = ", ".join(e.name for e in state.list_environments() if not e.invalidated) or "none"
        raise PlanError(
            f"environment '{environment}' does not exist",
            hint=f"apply a plan to it first (sluice apply {environment}); environments: {known}",
        )
    stored = state.get_snapshots((r.name, r.identifier) for r in record.snapshots)
    resolve = {
        s.name: view_name(s.name, environment)
        for s in stored.values()
        if s.payload["model"]["kind"]["name"]
        not in (KindName.EXTERNAL.value, KindName.EMBEDDED.value)
    }
    step = testing.query_step(sql, resolve, limit, project.config.catalogs)
    job = run_recorded(
        runner, {"job_id": f"query-{environment}", "kind": "query", "steps": [step]}, state=None
    )
    return result_of(job.results, "0", "query")


def make_runner(
    project: Project,
    *,
    in_process: bool = False,
    mode: Literal["submit", "connect"] | None = None,
    on_event: OnEvent | None = None,
    timeout: float | None = JOB_TIMEOUT_S,
) -> Runner:
    """The runner for ``project``'s Spark settings (``spark.mode``: spark-submit, or a warm
    Spark Connect server, or a running ``sluice spark start`` server), or this process, or
    the ``mode`` the caller chose; each job may run ``timeout`` seconds (None: no limit)."""
    paths = SparkPaths.for_project(Path(project.path))
    settings = project.config.sluice.spark
    if in_process:
        return InProcessRunner(settings, paths, on_event=on_event, timeout=timeout)
    if mode is not None:
        settings = settings.model_copy(update={"mode": mode})
    elif settings.mode == "submit":
        # a developer's `sluice spark start` server for this project, when one runs
        found = dev_server.connection(settings, paths)
        if found is not None:
            url, token = found  # the token goes to the job's child's environment only
            logger.info("running on the Spark Connect server %s (sluice spark status)", url)
            settings = settings.model_copy(update={"mode": "connect", "remote": url})
            return spark_runner(settings, paths, on_event=on_event, timeout=timeout, token=token)
    return spark_runner(settings, paths, on_event=on_event, timeout=timeout)


def table_diff(
    state: StateStore,
    runner: Runner,
    *,
    source: str,
    target: str,
    model: str | None = None,
    options: DiffOptions | None = None,
    url: str | None = None,
    now: int,
) -> TableDiffResult:
    """Compare ``model`` between environments ``source`` and ``target`` (``prod``, ``pr_12``).

    Each side reads the physical table of the model's version in that environment, joined
    on ``options.on`` or else the model's grain. With ``model`` None, ``source`` and
    ``target`` are two tables and ``options.on`` is required. When both sides are the same
    physical table the answer is "identical" without starting Spark. The result is stored
    in ``state`` (``kind="table_diff"``) either way (``url`` is accepted for older callers
    and not used: the driver reports the result, and it is written here).

    Raises:
        TableDiffError: unknown model or environment, no keys, a bad ``--where``, a key or
            filter column missing on one side, columns of types that do not compare.
        ExecutionError: Spark failed.
    """
    from sluice.core.state import JobResult as StoredResult

    options = options or DiffOptions()
    where = parse_where(options.where).sql if options.where is not None else None
    plan_id = None
    if model is None:
        name, tables, keys = f"{source} vs {target}", (source, target), options.on
        if not keys:
            raise TableDiffError(
                f"no join keys to compare {source} with {target}",
                hint="give the key columns with --on (tables have no grain)",
            )
    else:
        name = model.lower()
        tables, grain, plan_id = _diff_tables_of(state, name, source, target)
        keys = options.on or grain
        if not keys:
            raise TableDiffError(
                f"{name} has no grain, so there are no join keys",
                hint=f"give the key columns with --on, or declare `grain` in {name}'s MODEL",
            )
    if tables[0] == tables[1]:
        result = same_table_result(name, source, target, tables[0], keys, options, where)
        state.save_results(
            [
                StoredResult(
                    f"table-diff-{now}",
                    plan_id,
                    "table_diff",
                    name,
                    True,
                    dict(result.to_json()),
                    now,
                )
            ]
        )
        return result
    step: TableDiffStep = {
        "type": "table_diff",
        "label": f"table diff {name}",
        "name": name,
        "source": tables[0],
        "target": tables[1],
        "source_label": source,
        "target_label": target,
        "keys": list(keys),
        "options": options.to_json(),
    }
    spec: JobSpec = {
        "job_id": f"table-diff-{now}",
        "kind": "table_diff",
        "plan_id": plan_id,
        "steps": [step],
    }
    job = run_recorded(runner, spec, state=state)
    payload = result_of(job.results, "0", "table_diff")
    if "error" in payload:
        raise TableDiffError(payload["error"]["message"], hint=payload["error"]["hint"])
    return TableDiffResult.from_json(payload)


def _diff_tables_of(
    state: StateReader, model: str, source: str, target: str
) -> tuple[tuple[str, str], tuple[str, ...], str | None]:
    """The physical tables of ``model`` in two environments, its grain, the target's plan."""
    from difflib import get_close_matches

    from sluice.core.snapshot.naming import physical_table

    records = []
    for env in (source, target):
        check_environment_name(env)
        record = state.get_environment(env)
        if record is None or record.invalidated:
            known = ", ".join(e.name for e in state.list_environments() if not e.invalidated)
            raise TableDiffError(
                f"environment '{env}' does not exist"
                + (" (it was invalidated)" if record is not None else ""),
                hint=f"apply a plan to it first (sluice apply {env}); environments: {known or 'none'}",
            )
        records.append(record)
    refs = [{r.name: r for r in record.snapshots} for record in records]
    for env, found in zip((source, target), refs, strict=True):
        if model not in found:
            models = sorted(set(refs[0]) | set(refs[1]))
            close = get_close_matches(model, models, n=3)
            absent = "either environment" if all(model not in r for r in refs) else f"'{env}'"
            listed = (
                f"did you mean {', '.join(close)}?" if close else f"models: {', '.join(models)}"
            )
            raise TableDiffError(f"model {model} is not in {absent}", hint=listed)
    stored = state.get_snapshots(r[model].id for r in refs)
    tables: list[str] = []
    grain: tuple[str, ...] = ()
    for ref in (refs[0][model], refs[1][model]):
        payload = stored[ref.id].payload["model"]
        external = payload["kind"]["name"] == KindName.EXTERNAL.value
        tables.append(model if external else physical_table(model, ref.version))
        grain = tuple(str(g).lower() for g in payload.get("grain", ())) or grain
    return (tables[0], tables[1]), grain, records[1].plan_id


__all__ = [
    "ApplyResult",
    "EnvironmentView",
    "JanitorReport",
    "apply_plan",
    "carried_commit",
    "check_base",
    "commit_environment",
    "commit_plan",
    "invalidate_environment",
    "load_project",
    "make_runner",
    "open_project_state",
    "plan_commit",
    "plan_environment",
    "query_environment",
    "read_environment",
    "record_plan",
    "resolve_restatements",
    "run_janitor",
    "run_unit_tests",
    "state_url",
    "table_diff",
]
