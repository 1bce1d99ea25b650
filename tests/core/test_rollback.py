"""Rollback without Spark: the plan that points an environment back at an earlier plan's
tables, and the refusals when that would need data computed again."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from sluice.core import rollback, workflow
from sluice.core.errors import PlanError
from sluice.core.plan.plan import Plan
from sluice.core.state import TableSize, open_state
from sluice.core.state.schema import plans
from sluice.core.state.sql import SqlStateStore
from sluice.core.timeutil import to_ms
from tests.core.helpers import BASIC, load

END = to_ms("2024-01-10")


def _apply(store: SqlStateStore, root: Path, files: dict[str, str], env: str = "prod") -> Plan:
    """Plan ``files`` for ``env`` and commit it as if its job built every table."""
    project = load(root, files)
    plan = workflow.plan_environment(
        project, store, env, end=END, execution_time=END, against="prod"
    )
    for backfill in plan.backfill:
        store.add_intervals(backfill.name, backfill.version, backfill.intervals)
    workflow.commit_plan(store, plan, now=END, ttl_days=7)
    return plan


def _versions(store: SqlStateStore, env: str = "prod") -> dict[str, str]:
    record = store.get_environment(env)
    assert record is not None
    return {ref.name: ref.version for ref in record.snapshots}


@pytest.fixture
def store(tmp_path: Path) -> SqlStateStore:
    return open_state(f"sqlite:///{tmp_path / 'state.db'}")


V2 = {**BASIC, "models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT 2 AS id, 'y' AS name\n"}


def test_a_rollback_points_back_at_the_previous_plans_tables(
    store: SqlStateStore, tmp_path: Path
) -> None:
    first = _apply(store, tmp_path / "v1", BASIC)
    v1 = _versions(store)
    second = _apply(store, tmp_path / "v2", V2)
    v2 = _versions(store)
    assert v1 != v2
    back = rollback.plan_rollback(store, "prod", now=END + 1)
    assert back.target.plan_id == first.plan_id
    assert {s.name: s.version for s in back.plan.snapshots} == v1
    assert back.plan.backfill == ()  # every table still holds its data: views only
    assert back.plan.base_plan_id == second.plan_id
    assert {name for name, _, _ in back.changed} == {"s.a", "s.b", "s.c"}
    assert all(before == v2[n] and after == v1[n] for n, before, after in back.changed)
    workflow.commit_plan(store, back.plan, now=END + 1)
    assert _versions(store) == v1
    # The history is the chain of applied plans, newest first; a rollback is one of them.
    ids = [p.plan_id for p in rollback.history(store, "prod")]
    assert ids == [back.plan.plan_id, second.plan_id, first.plan_id]
    # And it can be undone by rolling forward to the plan rolled back from.
    again = rollback.plan_rollback(store, "prod", to=second.plan_id, now=END + 2)
    assert {s.name: s.version for s in again.plan.snapshots} == v2


def test_a_dropped_table_is_named_instead_of_rebuilt(store: SqlStateStore, tmp_path: Path) -> None:
    _apply(store, tmp_path / "v1", BASIC)
    v1 = _versions(store)
    _apply(store, tmp_path / "v2", V2)
    # Intervals missing from a table (e.g. a restatement failed half-way): recomputing.
    store.remove_intervals("s.b", v1["s.b"], 0, END)
    with pytest.raises(PlanError, match=r"would compute data again for s\.b: their") as err:
        rollback.plan_rollback(store, "prod", now=END + 1)
    assert "apply it" in (err.value.hint or "")
    store.forget_tables([("s.a", v1["s.a"])])  # what the janitor does once it dropped it
    with pytest.raises(PlanError, match=r"again for s\.a: the janitor dropped their tables"):
        rollback.plan_rollback(store, "prod", now=END + 1)


def test_what_cannot_be_rolled_back_says_why(store: SqlStateStore, tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="environment 'prod' does not exist"):
        rollback.plan_rollback(store, "prod", now=END)
    first = _apply(store, tmp_path / "v1", BASIC)
    with pytest.raises(PlanError, match="prod has no earlier plan to roll back to"):
        rollback.plan_rollback(store, "prod", now=END)
    _apply(store, tmp_path / "v2", V2)
    pr = _apply(store, tmp_path / "pr", {**BASIC, "models/d.sql": "MODEL (name s.d);\nSELECT 1"},
                env="pr_1")  # fmt: skip
    with pytest.raises(PlanError, match=f"plan {pr.plan_id} is not in prod's history"):
        rollback.plan_rollback(store, "prod", to=pr.plan_id, now=END)
    current = store.get_environment("prod")
    assert current is not None
    with pytest.raises(PlanError, match=r"is at plan .* already"):
        rollback.plan_rollback(store, "prod", to=current.plan_id, now=END)
    # A plan recorded before plans kept their snapshots cannot be restored from state.
    record = store.get_plan(first.plan_id)
    assert record is not None
    with store.engine.begin() as conn:
        conn.execute(plans.delete().where(plans.c.plan_id == first.plan_id))
    payload = {k: v for k, v in record.payload.items() if k != workflow.PLAN_SNAPSHOTS}
    store.save_plan(replace(record, payload=payload))
    with pytest.raises(PlanError, match="recorded without its snapshots"):
        rollback.plan_rollback(store, "prod", now=END)


def test_the_cli_lists_environments_and_plans_and_says_what_a_rollback_changes(
    tmp_path: Path,
) -> None:
    import json

    from click.testing import CliRunner

    from sluice.core.cli import cli

    root = tmp_path / "project"
    state = f"sqlite:///{tmp_path / 'cli.db'}"
    store = open_state(state)
    first = _apply(store, root, BASIC)
    second = _apply(store, root, V2)
    _apply(store, root, V2, env="pr_4")
    _apply(store, tmp_path / "older", BASIC, env="pr_5")
    prod = store.get_environment("prod")
    assert prod is not None
    for ref in prod.snapshots:  # what the jobs that built prod's tables measured
        store.set_table_size(ref.name, ref.version, TableSize(1000, measured_ts=0))
    store.close()
    args = ["--project", str(root), "--state", state]
    listed = CliRunner().invoke(cli, ["environments", "--json", *args])
    assert listed.exit_code == 0, listed.output
    rows = {r["name"]: r for r in json.loads(listed.output)}
    assert rows["prod"]["plan_id"] == second.plan_id
    assert rows["prod"]["previous_plan_id"] == first.plan_id
    assert rows["prod"]["models"] == 3 and rows["prod"]["expires"] is None
    assert rows["pr_4"]["expires"] is not None
    # Size: prod owns every table its views read; a PR environment only the tables prod
    # does not read (pr_4 is prod's copy; pr_5 changed s.a, whose change reaches more).
    assert rows["prod"]["own_tables"] == 3 and rows["pr_4"]["own_tables"] == 0
    assert 1 <= rows["pr_5"]["own_tables"] <= 3
    assert rows["prod"]["own_bytes"] == 3000 and rows["pr_4"]["own_bytes"] is None
    assert rows["pr_5"]["own_bytes"] is None  # its own tables were never measured
    table = CliRunner().invoke(cli, ["environments", *args])
    assert table.exit_code == 0 and "own" in table.output and "pr_5" in table.output
    assert "2.9 KB" in table.output
    history = CliRunner().invoke(cli, ["rollback", "--list", *args])
    assert history.exit_code == 0, history.output
    assert second.plan_id[:12] in history.output and first.plan_id[:12] in history.output
    dry = CliRunner().invoke(cli, ["rollback", "prod", "--dry-run", *args])
    assert dry.exit_code == 0, dry.output
    assert f"Rolling prod back to plan {first.plan_id[:12]}" in dry.output
    assert "3 models change tables, no data is computed" in dry.output
    assert "s.a: " in dry.output and "nothing changed" in dry.output
    after = open_state(state)
    assert after.get_environment("prod").plan_id == second.plan_id  # type: ignore[union-attr]
    after.close()
    refused = CliRunner().invoke(cli, ["rollback", "prod", "--to", "nope", *args])
    assert refused.exit_code == 1
    assert "plan nope is not in prod's history" in refused.output
    # The start of an id, as --list shows it, names the plan (any case).
    short = first.plan_id[:8].upper()
    by_prefix = CliRunner().invoke(cli, ["rollback", "prod", "--to", short, "--dry-run", *args])
    assert by_prefix.exit_code == 0, by_prefix.output
    assert f"Rolling prod back to plan {first.plan_id[:12]}" in by_prefix.output
    current = CliRunner().invoke(cli, ["rollback", "prod", "--to", second.plan_id[:8], *args])
    assert current.exit_code == 1 and "is at plan" in current.output


class _Recorder:
    """A runner that records the janitor's job and reports success (no Spark)."""

    def __init__(self) -> None:
        self.specs: list[dict[str, object]] = []

    def run(self, spec: dict[str, object]) -> object:
        from sluice.core.spark.submit import JobResult

        self.specs.append(spec)
        return JobResult(str(spec["job_id"]), {}, 0.0, None)


def test_the_janitor_keeps_the_tables_of_prod_s_last_plans(
    store: SqlStateStore, tmp_path: Path
) -> None:
    _apply(store, tmp_path / "v1", BASIC)
    v1 = _versions(store)
    _apply(store, tmp_path / "v2", V2)
    v2 = _versions(store)
    v3_files = {
        **BASIC,
        "models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT 3 AS id, 'z' AS name\n",
    }
    _apply(store, tmp_path / "v3", v3_files)
    # One plan back kept: v2's tables stay, v1's go once unused for the TTL.
    keep = rollback.kept_tables(store, "prod", plans=1)
    assert keep == {(name, version) for name, version in v2.items()}
    runner = _Recorder()
    report = workflow.run_janitor(store, runner, now=END, table_ttl_ms=0, keep=keep)  # type: ignore[arg-type]
    dropped = {tuple(t.split("@")) for t in report.tables}
    assert dropped == {(name, version) for name, version in v1.items()}
    assert (
        rollback.plan_rollback(store, "prod", now=END + 2).plan.backfill == ()
    )  # to v2: views only
    # Nothing kept: v2's tables go too, and rolling back to it is refused, naming them.
    report = workflow.run_janitor(store, runner, now=END + 3, table_ttl_ms=0, keep=())  # type: ignore[arg-type]
    assert {tuple(t.split("@")) for t in report.tables} == set(v2.items())
    with pytest.raises(PlanError, match="the janitor dropped their tables"):
        rollback.plan_rollback(store, "prod", now=END + 5)
