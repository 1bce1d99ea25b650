"""A schedule with many intervals plans with a warning, as SQLMesh plans it (issue 20,
item 8); only a schedule past the hard limit is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.core.errors import PlanError
from sluice.core.intervals import MAX_INTERVALS, WARN_INTERVALS
from sluice.core.plan.build import PlanRequest, build_plan
from sluice.core.plan.plan import Plan
from sluice.core.snapshot.fingerprint import fingerprint_models
from sluice.core.timeutil import to_ms
from tests.core.helpers import load

END = to_ms("2026-01-01")
CONFIG = "model_defaults:\n  dialect: spark\n"


def model(cron: str, start: str) -> str:
    return (
        "MODEL (\n  name s.c,\n  kind INCREMENTAL_BY_TIME_RANGE (time_column ds),\n"
        f"  cron '{cron}',\n  start '{start}'\n);\nSELECT CURRENT_DATE AS ds\n"
    )


def plan_of(root: Path, cron: str, start: str) -> Plan:
    project = load(root, {"config.yaml": CONFIG, "models/c.sql": model(cron, start)})
    return build_plan(
        PlanRequest(
            environment="prod",
            models=project.models,
            fingerprints=fingerprint_models(project.models, project.audits),
            base={},
            base_plan_id=None,
            end=END,
            execution_time=END,
        )
    )


def test_every_five_minutes_since_2020_plans_with_a_warning(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "*/5 * * * *", "2020-01-01")
    (backfill,) = plan.backfill
    assert WARN_INTERVALS < len(backfill.intervals) == 631_296 < MAX_INTERVALS
    (warning,) = plan.warnings
    assert warning == (
        f"{tmp_path / 'models' / 'c.sql'}:1: model s.c: cron '*/5 * * * *' makes 631296 "
        "intervals from 2020-01-01 00:00:00 to 2026-01-01 00:00:00; planned, but the "
        "backfill is long\n"
        "  hint: set a later start (the model's `start`, or --start) or a coarser cron"
    )
    assert plan.to_json()["warnings"] == [warning]


def test_an_ordinary_schedule_has_no_warning(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "@hourly", "2024-01-01")
    assert plan.warnings == () and plan.to_json()["warnings"] == []


def test_past_the_hard_limit_a_plan_is_still_refused(tmp_path: Path) -> None:
    with pytest.raises(PlanError) as info:
        plan_of(tmp_path, "@hourly", "1700-01-01")
    assert info.value.message.endswith(f"a plan holds at most {MAX_INTERVALS}")
    assert info.value.line == 1 and info.value.hint
