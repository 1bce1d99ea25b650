"""``sluice plan --explain``: one line per model saying why it is in the plan (pure)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from sluice.core import workflow
from sluice.core.cli import cli as main
from sluice.core.plan.explain import explain
from sluice.core.state import open_state
from sluice.core.timeutil import to_ms
from tests.core.helpers import load

AT = to_ms("2024-01-10")
FILES = {
    "config.yaml": "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n  cron: '@daily'\n",
    "models/raw.sql": "MODEL (name s.raw, kind FULL);\nSELECT 1 AS id, 2 AS amount, DATE '2024-01-01' AS ds\n",
    "models/events.sql": (
        "MODEL (name s.events, kind INCREMENTAL_BY_TIME_RANGE (time_column ds));\n"
        "SELECT id, ds FROM s.raw WHERE ds BETWEEN @start_ds AND @end_ds\n"
    ),
    "models/totals.sql": "MODEL (name s.totals, kind FULL);\nSELECT sum(amount) AS total FROM s.raw\n",
    "models/gone.sql": "MODEL (name s.gone, kind FULL);\nSELECT 1 AS x\n",
}


def _prod(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    store = open_state(url)
    project = load(tmp_path / "v1", FILES)
    plan = workflow.plan_environment(project, store, "prod", end=AT, execution_time=AT)
    for backfill in plan.backfill:
        store.add_intervals(backfill.name, backfill.version, backfill.intervals)
    workflow.commit_plan(store, plan, now=AT)
    store.close()
    return url


def _edited() -> dict[str, str]:
    files = {k: v for k, v in FILES.items() if k != "models/gone.sql"}
    files["models/raw.sql"] = files["models/raw.sql"].replace(", 2 AS amount", ", 3 AS amount")
    files["models/new.sql"] = "MODEL (name s.new, kind FULL);\nSELECT 1 AS y\n"
    return files


def test_every_model_in_the_plan_gets_its_reason_removals_and_breaking_first(
    tmp_path: Path,
) -> None:
    url = _prod(tmp_path)
    store = open_state(url)
    plan = workflow.plan_environment(load(tmp_path / "v2", _edited()), store, "prod",
                                     end=AT, execution_time=AT)  # fmt: skip
    store.close()
    reasons = {r.model: r for r in explain(plan)}
    assert [r.model for r in explain(plan)][:2] == ["s.gone", "s.raw"]
    assert reasons["s.gone"].does == "removed"
    assert reasons["s.new"].does == "added"
    raw = reasons["s.raw"]
    assert raw.does == "directly modified"
    assert "changes amount" in raw.why and "breaking: models downstream are rebuilt" in raw.why
    assert raw.why.endswith("its table is computed in full (a full-refresh model)")
    totals = reasons["s.totals"]
    assert totals.does == "indirectly modified"
    assert "reaches it: s.raw" in totals.why and "s.raw.amount" in totals.why
    # A breaking change reaches every model downstream, also one that reads none of the
    # changed columns: it says so by naming no column it reads.
    events = reasons["s.events"]
    assert events.does == "indirectly modified" and "reaches it: s.raw;" in events.why
    assert "it reads" not in events.why and "missing 9 intervals" in events.why
    assert set(reasons) >= {"s.gone", "s.raw", "s.totals", "s.new"}


def test_a_day_due_is_a_table_missing_intervals(tmp_path: Path) -> None:
    url = _prod(tmp_path)
    store = open_state(url)
    later = AT + 2 * 86_400_000
    plan = workflow.plan_environment(load(tmp_path / "v1", FILES), store, "prod",
                                     end=later, execution_time=later)  # fmt: skip
    store.close()
    [reason] = [r for r in explain(plan) if r.model == "s.events"]
    assert reason.does == "built"
    assert reason.why == "its table is missing 2 intervals (2024-01-10 .. 2024-01-11)"


def test_the_cli_prints_the_reasons_and_json_carries_them(tmp_path: Path) -> None:
    url = _prod(tmp_path)
    project = tmp_path / "v2"
    load(project, _edited())
    runner = CliRunner()
    text = runner.invoke(main, ["plan", "--explain", "-p", str(project), "--state", url])
    assert text.exit_code == 0, text.output
    assert "Why each model is in the plan" in text.output and "s.totals" in text.output
    assert "Next: sluice apply prod" in text.output
    data = runner.invoke(main, ["plan", "--explain", "--json", "-p", str(project), "--state", url])
    assert data.exit_code == 0, data.output
    explained = json.loads(data.output)["explain"]
    assert {"model": "s.gone", "does": "removed",
            "why": "in prod, no longer in the project"} in explained  # fmt: skip
