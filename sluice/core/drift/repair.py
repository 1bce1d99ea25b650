"""The plan that mends drift: views made again, tables dropped and built again.

Built from state alone, as a rollback is (:mod:`sluice.core.rollback`): the environment's
own snapshots (no model changes), with

- ``repoint``: the models whose environment view is made again whatever its version (a
  view redefined or dropped by hand, and the view of every table rebuilt);
- ``rebuild``: the models whose physical table the job drops first (it is missing, not
  Sluice's, reshaped or holds other data than Sluice wrote), then builds again over every
  interval state records (a restatement from the model's start), or whose VIEW model's
  view it makes again.

It is a plan like any other: ``sluice plan``'s output shows it, what its backfill reads
is estimated from the recorded table sizes as a pull request's plan's is, its id is new
(its base is the environment's current plan, so applying it is a compare-and-swap), and
it applies through :func:`sluice.core.workflow.apply_plan`. Only prod's tables are rebuilt: another
environment reads prod's tables or its own pull request's, which applying that pull
request again rebuilds; its views are made again all the same.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass

from sluice.core.drift.compare import DriftReport
from sluice.core.errors import PlanError
from sluice.core.model.definition import KindName
from sluice.core.model.graph import topological_order
from sluice.core.plan.build import PlanRequest, build_plan, candidate_versions
from sluice.core.plan.plan import Plan
from sluice.core.snapshot.naming import PROD
from sluice.core.state.store import StateReader
from sluice.core.workflow import read_environment, with_scan_estimate


@dataclass(frozen=True)
class Repair:
    """The repair plan of a drift report, and what it leaves (model -> why)."""

    plan: Plan
    left: tuple[tuple[str, str], ...]


def plan_repair(state: StateReader, report: DriftReport, *, now: int) -> Repair:
    """The plan mending ``report``'s differences that Sluice can mend.

    Raises:
        PlanError: the environment moved on since the report (check again), or does not
            exist.
    """
    environment = report.environment
    record = state.get_environment(environment)
    if record is None or record.invalidated or record.plan_id != report.plan_id:
        raise PlanError(
            f"{environment} changed since its drift was checked (it is now at plan "
            f"{record.plan_id if record is not None else None}, the check saw "
            f"{report.plan_id})",
            hint=f"check it again: sluice drift {environment} --repair",
        )
    current = read_environment(state, environment).snapshots
    left: dict[str, str] = {}
    repoint: set[str] = set()
    rebuild: set[str] = set()
    for difference in report.differences:
        name = difference.model
        if difference.repair == "repoint":
            repoint.add(name)
        elif difference.repair == "rebuild" and environment != PROD:
            left[name] = (
                f"its table is not {environment}'s own to rebuild: apply its pull request "
                "again, or repair prod"
            )
        elif difference.repair == "rebuild":
            rebuild.add(name)
        else:
            left.setdefault(name, difference.detail)
    repoint |= {n for n in rebuild if current[n].model.kind.has_views}
    views = {n for n in rebuild if current[n].model.kind.name == KindName.VIEW}
    tables = rebuild - views
    models = {name: snap.model for name, snap in current.items()}
    order = topological_order(models)
    fingerprints = {name: current[name].fingerprint for name in order}
    intervals = state.get_intervals(candidate_versions(fingerprints, current))
    ends = [e for (n, _), spans in intervals.items() if n in tables for _, e in spans]
    end = max([record.end or 0, *ends]) or now
    plan = build_plan(
        PlanRequest(
            environment=environment,
            models={name: models[name] for name in order},
            fingerprints=fingerprints,
            base=current,
            base_plan_id=record.plan_id,
            start=None,
            end=end,
            execution_time=now,
            intervals=intervals,
            restate=frozenset(tables),
        )
    )
    plan = dataclasses.replace(
        plan,
        snapshots=tuple(current[name] for name in order),
        create_views=tuple(sorted(set(plan.create_views) | views)),
        repoint=tuple(sorted(repoint)),
        rebuild=tuple(sorted(tables)),
    )
    plan = dataclasses.replace(plan, plan_id=_repair_id(plan))
    # What the rebuild reads, as a PR's plan has it: a budget's max_bytes and a policy on
    # plan.backfill.bytes judge the repair on it.
    plan = with_scan_estimate(state, plan, intervals)
    return Repair(plan, tuple(sorted(left.items())))


def _repair_id(plan: Plan) -> str:
    """A repair's own id: the plan's, with what it makes again."""
    value = [
        plan.plan_id,
        "repair",
        list(plan.repoint),
        list(plan.rebuild),
        list(plan.create_views),
    ]
    text = json.dumps(value, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]
