"""Rollback: point an environment back at a plan it had before, by virtual update.

Every applied plan is recorded with the snapshots it pointed the environment at, and
each plan names the plan it replaced (``base_plan_id``), so an environment's history is
a chain walked back from its current plan. Rolling back to an earlier plan is a new plan
whose snapshots are exactly that plan's: when every table it needs still holds the data
it held (the janitor keeps tables unused for ``table_ttl_days``), the job only re-points
views and writes no data file. Anything that would need data computed again is refused,
naming the models, instead of started.

>>> # sluice rollback prod             -> back to the plan before the current one
>>> # sluice rollback prod --to 3f9c.. -> back to any earlier plan of prod's history
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sluice.core.errors import PlanError
from sluice.core.model.graph import topological_order
from sluice.core.plan.build import PlanRequest, TableKey, build_plan, candidate_versions
from sluice.core.plan.plan import Plan
from sluice.core.snapshot.naming import PROD, check_environment_name
from sluice.core.snapshot.snapshot import Snapshot
from sluice.core.state.records import PlanRecord
from sluice.core.state.store import StateReader
from sluice.core.timeutil import to_ms
from sluice.core.workflow import PLAN_SNAPSHOTS, read_environment


@dataclass(frozen=True)
class Rollback:
    """A plan that points ``plan.environment`` back at ``target``'s snapshots."""

    plan: Plan
    target: PlanRecord
    changed: tuple[tuple[str, str | None, str | None], ...]
    """``(model, version now, version after)`` for every model whose table changes
    (None: the model is not in the environment on that side)."""


def history(state: StateReader, environment: str, limit: int = 20) -> list[PlanRecord]:
    """The plans ``environment`` was at, newest (its current plan) first."""
    record = state.get_environment(check_environment_name(environment))
    found: list[PlanRecord] = []
    plan_id = record.plan_id if record is not None else None
    while plan_id is not None and len(found) < limit:
        plan = state.get_plan(plan_id)
        if plan is None or plan.environment != environment:
            break
        found.append(plan)
        plan_id = plan.base_plan_id
    return found


def kept_tables(state: StateReader, environment: str = PROD, plans: int = 2) -> set[TableKey]:
    """The ``(model, version)`` tables of the ``plans`` plans ``environment`` was at before
    its current one: what the janitor keeps so that rolling back stays a view swap."""
    kept: set[TableKey] = set()
    for plan in history(state, environment, limit=plans + 1)[1:]:
        refs = plan.payload.get(PLAN_SNAPSHOTS)
        if isinstance(refs, list):
            kept |= {(str(name), str(version)) for name, _, version in refs}
    return kept


def plan_rollback(
    state: StateReader, environment: str, *, to: str | None = None, now: int
) -> Rollback:
    """The plan rolling ``environment`` back to plan ``to`` (an id, or the start of one
    that names one plan of its history; default: the previous one).

    Raises:
        PlanError: no such plan in the environment's history, its snapshots were not
            recorded, or going back would need data computed again (a dropped table,
            missing intervals, a table changed in place by a forward-only plan).
    """
    record = state.get_environment(check_environment_name(environment))
    if record is None or record.invalidated:
        raise PlanError(
            f"environment '{environment}' does not exist",
            hint="`sluice environments` lists the environments there are",
        )
    target_id = to.lower() if to else record.previous_plan_id
    if target_id is None:
        raise PlanError(
            f"{environment} has no earlier plan to roll back to",
            hint=f"it has been at plan {record.plan_id} since it was first applied",
        )
    past = history(state, environment, limit=1_000)
    # `to` may be the start of an id, as `--list` and the PR comment show them.
    found = [p for p in past if p.plan_id.lower().startswith(target_id)]
    known = ", ".join(p.plan_id[:12] for p in past[1:6]) or "none"
    if len(found) > 1:
        raise PlanError(
            f"{target_id} starts several plans of {environment}'s history",
            hint=f"give more of the id of one of its earlier plans ({known})",
        )
    if not found:
        raise PlanError(
            f"plan {target_id} is not in {environment}'s history",
            hint=f"roll back to one of its earlier plans ({known}); "
            f"`sluice rollback {environment} --list` shows them",
        )
    target = found[0]
    target_id = target.plan_id
    if target_id == record.plan_id:
        raise PlanError(f"{environment} is at plan {target_id} already", hint="nothing to do")
    refs = target.payload.get(PLAN_SNAPSHOTS)
    if not isinstance(refs, list):
        raise PlanError(
            f"plan {target_id} was recorded without its snapshots (before Sluice kept them)",
            hint="roll back to a later plan, or check out that commit and apply it",
        )
    ids = [(str(name), str(identifier)) for name, identifier, _ in refs]
    stored = state.get_snapshots(ids)
    missing = [name for name, identifier in ids if (name, identifier) not in stored]
    if missing:
        raise PlanError(
            f"rolling {environment} back to plan {target_id} would compute data again for "
            f"{', '.join(sorted(missing))}: the janitor dropped their tables",
            hint="check out that plan's commit and apply it (`sluice plan` shows the cost)",
        )
    wanted = {s.name: s for s in map(Snapshot.from_stored, stored.values())}
    models = {s.name: s.model for s in wanted.values()}
    order = topological_order(models)
    fingerprints = {name: wanted[name].fingerprint for name in order}
    current = read_environment(state, environment).snapshots
    end = to_ms(str(target.payload.get("end") or record.end))
    plan = build_plan(
        PlanRequest(
            environment=environment,
            models={name: models[name] for name in order},
            fingerprints=fingerprints,
            base=current,
            base_plan_id=record.plan_id,
            start=record.start,
            end=end,
            execution_time=now,
            intervals=state.get_intervals(candidate_versions(fingerprints, current)),
        )
    )
    moved = sorted(s.name for s in plan.snapshots if s.version != wanted[s.name].version)
    rebuild = sorted({b.name for b in plan.backfill} | set(moved))
    if rebuild:
        raise PlanError(
            f"rolling {environment} back to plan {target_id} would compute data again for "
            f"{', '.join(rebuild)}: "
            + (
                "their tables no longer hold that plan's data (dropped by the janitor, "
                "or changed in place by a forward-only plan)"
            ),
            hint="check out that plan's commit and apply it (`sluice plan` shows the cost)",
        )
    # Exactly the target's snapshots (categories as recorded then).
    plan = replace(plan, snapshots=tuple(wanted[name] for name in order))
    now_versions = {name: snap.version for name, snap in current.items()}
    after = {name: snap.version for name, snap in wanted.items()}
    changed = tuple(
        (name, now_versions.get(name), after.get(name))
        for name in sorted(set(now_versions) | set(after))
        if now_versions.get(name) != after.get(name)
    )
    return Rollback(plan, target, changed)
