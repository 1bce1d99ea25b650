"""Preview a change in its own environment: unit tests, build, table diffs, in one job.

What a pull request needs from the engine, and what ``sluice preview`` does locally: run
the project's unit tests, build the environment the plan describes (limited to a recent
range for incremental models when the plan says so), then compare each changed model
with prod. All of it is one Spark job, so Spark starts once. What the driver reports for
state (intervals, test, audit and diff results) is checked and written here as it
arrives; the environment's record is committed here once the job has succeeded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sluice.core import jobs
from sluice.core.errors import ExecutionError
from sluice.core.intervals import Interval, merge
from sluice.core.model.definition import KindName, Project
from sluice.core.plan.output import written
from sluice.core.plan.plan import Plan, iso
from sluice.core.snapshot.naming import PROD
from sluice.core.snapshot.snapshot import Category
from sluice.core.spark import testing
from sluice.core.spark.results import UnitTestResult, result_of
from sluice.core.spark.spec import JobSpec, Step
from sluice.core.spark.submit import JobResult, Runner, run_recorded
from sluice.core.state import StateStore
from sluice.core.tablediff.result import DiffOptions, TableDiffResult, same_table_result


@dataclass(frozen=True)
class DiffTarget:
    """One model to compare with prod, or the reason it is not compared."""

    name: str
    source_table: str | None  # prod's table; None when prod does not have the model
    target_table: str
    keys: tuple[str, ...]
    where: str | None  # the range the environment built, for incremental models
    skipped: str | None = None  # why there is no diff (new model, no grain, cap)


@dataclass(frozen=True)
class PreviewResult:
    """What a preview did: test results, the build, and one diff per compared model."""

    plan: Plan
    tests: tuple[UnitTestResult, ...]
    built: int
    views: int
    diffs: dict[str, TableDiffResult]
    diff_errors: dict[str, str]
    skipped_diffs: dict[str, str]
    job: JobResult | None
    seconds: float = 0.0
    notes: tuple[str, ...] = field(default_factory=tuple)
    # What each table of the environment's own holds once built (this job or an earlier one)
    held: dict[str, tuple[Interval, ...]] = field(default_factory=dict)
    bytes_built: int | None = None  # the files of the tables the plan builds (None: unmeasured)
    rows_built: int | None = None  # the rows those tables hold (None: not counted)
    # The unit tests the job ran but reported no result of (a runner that checks its
    # results against the spec fails such a job: this is the preview's own check).
    untested: tuple[str, ...] = ()

    @property
    def tests_passed(self) -> bool:
        """Every unit test the job ran reported a result, and each passed."""
        return not self.untested and all(t["passed"] for t in self.tests)


def held_ranges(
    plan: Plan, state: StateStore, prod: dict[str, tuple[str, str]]
) -> dict[str, tuple[Interval, ...]]:
    """What each materialized table of the environment's own (a version prod does not use)
    holds once ``plan`` is applied: its recorded intervals and the plan's backfill.

    A re-run (a push that edits no model, a re-requested check) has nothing to backfill,
    yet its tables hold the ranges an earlier run built: those are what the PR shows and
    what its diffs compare.
    """
    own = [
        s
        for s in plan.snapshots
        if s.model.kind.materialized and prod.get(s.name, ("", ""))[1] != s.version
    ]
    recorded = state.get_intervals((s.name, s.version) for s in own)
    fills = {b.name: b.intervals for b in plan.backfill}
    held = {}
    for snap in own:
        ranges = merge([*recorded.get((snap.name, snap.version), ()), *fills.get(snap.name, ())])
        if ranges:
            held[snap.name] = tuple(ranges)
    return held


def diff_targets(
    plan: Plan,
    prod: dict[str, tuple[str, str]],
    *,
    cap: int,
    held: dict[str, tuple[Interval, ...]],
) -> list[DiffTarget]:
    """The models a reviewer should see compared with prod, most relevant first.

    ``prod`` maps model -> (prod's physical table, version); ``held``: what the
    environment's own tables hold (``held_ranges``). Directly modified models come first,
    then children a breaking change reaches; at most ``cap`` are compared, the rest are
    listed as skipped.
    """
    direct = [c.name for c in plan.directly_modified]
    indirect = [c.name for c in plan.indirectly_modified if c.category == Category.BREAKING]
    targets: list[DiffTarget] = []
    for name in dict.fromkeys(direct + indirect):
        snapshot = plan.snapshot(name)
        model = snapshot.model
        if not model.kind.has_views:
            continue
        source = prod.get(name)
        keys = tuple(g.lower() for g in model.grain)
        where = None
        ranges = held.get(name)
        if (
            model.kind.name == KindName.INCREMENTAL_BY_TIME_RANGE
            and plan.start is not None
            and ranges
        ):
            # Compare only what this environment built: a partial backfill is not a loss.
            column = model.kind.time_column
            parts = [f"{column} >= '{iso(a)}' AND {column} < '{iso(b)}'" for a, b in ranges]
            where = parts[0] if len(parts) == 1 else " OR ".join(f"({p})" for p in parts)
        skipped = None
        if source is None:
            skipped = "new in this environment: nothing in prod to compare with"
        elif not keys:
            skipped = f"no grain: declare `grain` in {model.path or name}'s MODEL to compare rows"
        elif len([t for t in targets if t.skipped is None]) >= cap:
            skipped = f"over the cap of {cap} compared models"
        targets.append(
            DiffTarget(name, source[0] if source else None, snapshot.table, keys, where, skipped)
        )
    return targets


def preview_environment(
    project: Project,
    state: StateStore,
    plan: Plan,
    runner: Runner,
    *,
    url: str | None = None,
    now: int,
    diff_cap: int = 10,
    diff_options: DiffOptions | None = None,
) -> PreviewResult:
    """Run unit tests, build ``plan``'s environment, and diff changed models against prod.

    The environment's record is committed (compare-and-swap on the plan's base) once the
    job has succeeded. ``url`` is accepted for older callers and not used: the driver gets
    no state URL, its writes go to ``state``.

    Raises:
        ExecutionError: the build failed; when the failing step is a model's build or
            audit, the error names the model's file and line.
        ConflictError: the environment moved on since the plan was computed.
    """
    options = diff_options or DiffOptions()
    steps: list[Step] = []
    for index, step in enumerate(testing.unit_test_steps(project, None, now)):
        steps.append({**step, "id": f"test:{index}"})
    built = views = 0
    spec: JobSpec = {
        "job_id": f"preview-{plan.environment}-{plan.plan_id[:12]}-{now}",
        "kind": "preview",
        "plan_id": plan.plan_id,
        "steps": [],  # set below, once there are any
    }
    # What the job needs from state is read, and its plan recorded, in one transaction;
    # what it did is committed in another once it succeeded.
    with state.together(f"prepare the preview of {plan.environment}"):
        record = state.get_environment(plan.environment)
        previous = None
        if record is not None and not record.invalidated:
            previous = {ref.name: ref.version for ref in record.snapshots}
        # A copy of prod with no model changed has nothing to review: it is not built, unless
        # the environment exists and reads other versions (an earlier commit's changes).
        stale = previous is not None and previous != {s.name: s.version for s in plan.snapshots}
        applies = bool(plan.changes_models or plan.backfill or plan.restated or stale)
        if applies:
            from sluice.core.workflow import record_plan

            record_plan(state, plan, now)
            applied = jobs.apply_job(
                plan,
                audits=project.audits,
                project_dir=project.path,
                table_format=project.config.sluice.spark.table_format,
                previous_versions=previous,
                now=now,
                before_all=project.before_all,
                after_all=project.after_all,
                recorded=jobs.recorded_builds(state, ((s.name, s.version) for s in plan.snapshots)),
                prod_schemas=jobs.prod_schemas(state),
            )
            spec["environment"] = applied["environment"]
            spec["base_plan_id"] = applied["base_plan_id"]
            built, _, views = jobs.job_counts(applied)
            steps += applied["steps"]
        prod = prod_tables(state)
        held = held_ranges(plan, state, prod)
        targets = diff_targets(plan, prod, cap=diff_cap, held=held)
        diffs: dict[str, TableDiffResult] = {}
        for target in targets:
            if target.skipped is not None or target.source_table is None:
                continue
            compare = DiffOptions(
                on=(),
                skip=options.skip,
                where=target.where,
                decimals=options.decimals,
                tolerance=options.tolerance,
                sample=options.sample,
            )
            if target.source_table == target.target_table:
                diffs[target.name] = same_table_result(
                    target.name,
                    PROD,
                    plan.environment,
                    target.target_table,
                    target.keys,
                    compare,
                    target.where,
                )
                continue
            steps.append(
                {
                    "type": "table_diff",
                    "id": f"diff:{target.name}",
                    "label": f"table diff {target.name}",
                    "name": target.name,
                    "source": target.source_table,
                    "target": target.target_table,
                    "source_label": PROD,
                    "target_label": plan.environment,
                    "keys": list(target.keys),
                    "options": compare.to_json(),
                }
            )
        if steps and applies:
            from sluice.core.workflow import check_base

            check_base(state, plan)
    from sluice.core.workflow import commit_environment, run_views_job

    job = None
    ttl_days = project.config.sluice.environment_ttl_days
    if steps:
        spec["steps"] = steps

        def commit() -> None:  # the job failed after its views step: the record follows
            with state.together(f"record the preview of {plan.environment}"):
                commit_environment(state, plan, now, ttl_days)

        try:
            if applies:
                job = run_views_job(runner, spec, state, plan, commit)
            else:
                job = run_recorded(runner, spec, state=state)
        except ExecutionError as exc:
            raise locate_failure(project, exc) from exc
    results = job.results if job is not None else {}
    tests = tuple(result_of(results, k, "unit_test") for k in results if k.startswith("test:"))
    untested = tuple(
        str(step["name"])
        for step in spec["steps"]
        if step["type"] == "unit_test" and step.get("id") not in results
    )
    errors: dict[str, str] = {}
    for key in results:
        if key.startswith("diff:"):
            name = key.removeprefix("diff:")
            payload = result_of(results, key, "table_diff")
            if "error" in payload:
                errors[name] = payload["error"]["message"]
            else:
                diffs[name] = TableDiffResult.from_json(payload)
    skipped = {t.name: t.skipped for t in targets if t.skipped is not None}
    with state.together(f"record the preview of {plan.environment}"):
        if job is not None and applies:
            commit_environment(state, plan, now, ttl_days)
        sizes = written(state, plan)
    return PreviewResult(
        plan=plan,
        tests=tests,
        built=built,
        views=views,
        diffs=diffs,
        diff_errors=errors,
        skipped_diffs=skipped,
        job=job,
        seconds=job.seconds if job is not None else 0.0,
        held=held,
        bytes_built=sizes.bytes,
        rows_built=sizes.rows,
        untested=untested,
    )


def prod_tables(state: StateStore) -> dict[str, tuple[str, str]]:
    record = state.get_environment(PROD)
    if record is None or record.invalidated:
        return {}
    from sluice.core.snapshot.naming import physical_table

    return {r.name: (physical_table(r.name, r.version), r.version) for r in record.snapshots}


_STEP = re.compile(r"at step '(?:build|audit) ([\w.]+)")
_SOURCE = re.compile(r"^\S+:\d+: (?=Spark job failed)")


def locate_failure(project: Project, error: ExecutionError) -> ExecutionError:
    """``error`` with the file and line of the model whose build or audit failed."""
    found = _STEP.search(error.message)
    model = project.models.get(found.group(1).rstrip(":")) if found else None
    if model is None or error.path is not None:
        return error
    # The step's file:line leads the message (the runner's words); the error carries it
    # once, as its location. The same class: a DriverLost stays one (callers retry those).
    message = _SOURCE.sub("", error.message, count=1)
    return type(error)(message, path=model.path, line=model.line, hint=error.hint)
