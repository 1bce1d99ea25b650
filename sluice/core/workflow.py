"""What Sluice does, composed from its parts: load, fingerprint, read state, plan.

Each function here is one user-facing operation; the CLI and the bot call these and
nothing below them. Time comes in as an argument, so every operation is reproducible.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from sluice.core.model.definition import Project
from sluice.core.model.loader import load_project
from sluice.core.plan.build import PlanRequest, build_plan, candidate_versions
from sluice.core.plan.plan import Plan
from sluice.core.snapshot.fingerprint import fingerprint_models
from sluice.core.snapshot.naming import PROD, check_environment_name
from sluice.core.snapshot.snapshot import Snapshot
from sluice.core.state import StateReader, StateStore, open_state
from sluice.core.state.records import EnvironmentRecord, PlanRecord

STATE_URL_ENV = "SLUICE_DATABASE_URL"


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
) -> Plan:
    """Plan bringing ``environment`` to the state of ``project``."""
    check_environment_name(environment)
    fingerprints = fingerprint_models(project.models, project.audits)
    env = read_environment(state, environment)
    intervals = state.get_intervals(candidate_versions(fingerprints, env.snapshots))
    return build_plan(
        PlanRequest(
            environment=environment,
            models=project.models,
            fingerprints=fingerprints,
            base=env.snapshots,
            base_plan_id=env.record.plan_id if env.record is not None else None,
            start=start,
            end=end,
            execution_time=execution_time,
            forward_only=forward_only,
            intervals=intervals,
        )
    )


def commit_plan(
    state: StateStore, plan: Plan, *, now: int, ttl_days: int | None = None
) -> EnvironmentRecord:
    """Record ``plan`` as what its environment now points at (compare-and-swap).

    The snapshots are stored first (idempotently), then the environment record is swapped
    only if it is still at the plan it was computed from.

    Raises:
        ConflictError: the environment moved on since the plan was computed; re-plan.
    """
    state.push_snapshots(s.to_stored() for s in plan.snapshots)
    state.save_plan(
        PlanRecord(plan.plan_id, plan.environment, plan.base_plan_id, now, plan.to_json())
    )
    expiration = None
    if plan.environment != PROD and ttl_days is not None:
        expiration = now + ttl_days * 86_400_000
    record = EnvironmentRecord(
        name=plan.environment,
        snapshots=tuple(s.ref for s in plan.snapshots),
        plan_id=plan.plan_id,
        previous_plan_id=plan.base_plan_id,
        start=plan.start,
        end=plan.end,
        expiration_ts=expiration,
        updated_ts=now,
    )
    state.update_environment(record, expected_plan_id=plan.base_plan_id)
    return record


__all__ = [
    "EnvironmentView",
    "commit_plan",
    "load_project",
    "open_project_state",
    "plan_environment",
    "read_environment",
    "state_url",
]
