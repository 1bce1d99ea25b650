"""Runs that skip what did not change, on a real (in-process) Spark, one project for the
module: a run with nothing changed since prod's deploy, or since the last run, skips every
rebuild; a source changed reruns what reads it (through a view too) and nothing else; a
changed query reruns (one rendering the run's dates, each run; a deployed edit is built by
its deploy, which the next run counts as its last); and `sluice run --explain` / `--json`
say why each model ran or was skipped; last, the service's scheduled run skips the same
way and says so."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from sluice.bot.events.neutral import ScheduledRunEvent
from sluice.bot.flow import dispatch
from sluice.bot.flow.deps import make_deps
from sluice.bot.forge.memory import MemoryForge
from sluice.cli import cli
from sluice.core import runs, workflow
from sluice.core.model.definition import Project
from sluice.core.spark.session import SparkPaths
from sluice.core.spark.submit import InProcessRunner
from sluice.core.state import open_state
from sluice.core.state.sql import SqlStateStore
from sluice.core.timeutil import DAY_MS, to_ms
from tests.core.helpers import load

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

START = to_ms("2024-01-01")
FILES = {
    "config.yaml": "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n  cron: '@daily'\n",
    "external_models.yaml": "".join(
        f"- name: skipsrc.{s}\n  columns:\n    id: int\n    amount: int\n" for s in "abc"
    ),
    "models/fa.sql": "MODEL (name skipm.fa, kind FULL);\nSELECT id, amount FROM skipsrc.a\n",
    "models/fb.sql": "MODEL (name skipm.fb, kind FULL);\nSELECT id, amount FROM skipsrc.b\n",
    "models/fab.sql": (
        "MODEL (name skipm.fab, kind FULL);\n"
        "SELECT a.id, a.amount + b.amount AS total FROM skipm.fa AS a JOIN skipm.fb AS b "
        "ON a.id = b.id\n"
    ),
    "models/vc.sql": "MODEL (name skipm.vc, kind VIEW);\nSELECT id, amount FROM skipsrc.c\n",
    "models/fc.sql": "MODEL (name skipm.fc, kind FULL);\nSELECT SUM(amount) AS s FROM skipm.vc\n",
    "models/fd.sql": (
        "MODEL (name skipm.fd, kind FULL);\nSELECT COUNT(*) AS n, @end_ds AS upto FROM skipsrc.a\n"
    ),
}
SKIPPABLE = ["skipm.fa", "skipm.fab", "skipm.fb", "skipm.fc"]


@dataclass
class World:
    root: Path
    url: str
    store: SqlStateStore
    spark: SparkSession
    runner: InProcessRunner
    project: Project

    def run(self, day: int) -> workflow.ApplyResult:
        """``sluice run prod`` at the start of ``day`` (days after Jan 1), one hour in."""
        at = START + day * DAY_MS + 3_600_000
        plan = workflow.plan_run(self.project, self.store, "prod", now=at)
        return workflow.apply_plan(
            self.project, self.store, plan, self.runner, now=at, skip_unchanged=True
        )

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.spark.sql(sql).collect()]


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory,
    local_spark: SparkSession,
    inprocess_paths: SparkPaths,
) -> Iterator[World]:
    root = tmp_path_factory.mktemp("skip")
    local_spark.sql("DROP DATABASE IF EXISTS skipsrc CASCADE")
    local_spark.sql("CREATE DATABASE skipsrc")
    for name, rows in (("a", "(1, 10), (2, 20)"), ("b", "(1, 1), (2, 2)"), ("c", "(1, 5)")):
        local_spark.sql(
            f"CREATE TABLE skipsrc.{name} USING parquet AS "
            f"SELECT * FROM VALUES {rows} AS t(id, amount)"
        )
    project = load(root / "p", FILES)
    url = f"sqlite:///{root / 'state.db'}"
    store = open_state(url)
    runner = InProcessRunner(project.config.sluice.spark, inprocess_paths)
    at = START + 3 * DAY_MS
    plan = workflow.plan_environment(project, store, "prod", end=at, execution_time=at)
    workflow.apply_plan(project, store, plan, runner, now=at)
    found = World(root, url, store, local_spark, runner, project)
    # Prod's deploy recorded what its builds read: a run after it skips them, but for the
    # query that renders the run's dates.
    first = found.run(4)
    assert sorted(first.skipped) == SKIPPABLE and first.tables_built == 1
    assert first.decided["skipm.fd"].code == "query"
    yield found
    store.close()


def test_a_second_run_with_nothing_changed_skips_every_rebuild(world: World) -> None:
    second = world.run(5)
    assert sorted(second.skipped) == SKIPPABLE
    assert second.tables_built == 1 and second.decided["skipm.fd"].code == "query"
    # The skipped day is recorded as done: later the same day nothing is due.
    later = workflow.plan_run(
        world.project, world.store, "prod", now=START + 5 * DAY_MS + 7_200_000
    )
    assert later.backfill == ()
    assert world.rows("SELECT * FROM skipm.fab ORDER BY id") == [(1, 11), (2, 22)]


def test_a_changed_source_reruns_its_descendants_only(world: World) -> None:
    world.spark.sql("INSERT INTO skipsrc.b VALUES (1, 100)")
    third = world.run(6)
    ran = sorted(name for name, d in third.decided.items() if d.ran)
    assert ran == ["skipm.fab", "skipm.fb", "skipm.fd"]
    assert third.decided["skipm.fb"].changed == ("skipsrc.b",)
    assert third.decided["skipm.fab"].code == "input"  # fb's table was rebuilt
    assert sorted(third.skipped) == ["skipm.fa", "skipm.fc"]
    assert world.rows("SELECT * FROM skipm.fab ORDER BY id, total") == [(1, 11), (1, 110), (2, 22)]
    # A source behind a view counts as the reader's input.
    world.spark.sql("INSERT OVERWRITE TABLE skipsrc.c SELECT * FROM VALUES (1, 7) AS t(id, amount)")
    fourth = world.run(7)
    assert sorted(n for n, d in fourth.decided.items() if d.ran) == ["skipm.fc", "skipm.fd"]
    assert world.rows("SELECT s FROM skipm.fc") == [(7,)]


def test_a_changed_query_reruns(world: World) -> None:
    edited = {
        **FILES,
        "models/fa.sql": FILES["models/fa.sql"].replace("amount FROM", "amount * 2 AS amount FROM"),
    }
    world.project = load(world.root / "p2", edited)
    at = START + 8 * DAY_MS
    plan = workflow.plan_environment(world.project, world.store, "prod", end=at, execution_time=at)
    workflow.apply_plan(world.project, world.store, plan, world.runner, now=at)
    assert world.rows("SELECT * FROM skipm.fab ORDER BY id, total") == [
        (1, 21),
        (1, 120),
        (2, 42),
    ]
    # The deploy built fa's new version and fab over it, and recorded what they read: the
    # next run has nothing new for them. The query rendering the run's dates runs again.
    fifth = world.run(9)
    assert {n: d.code for n, d in fifth.decided.items() if d.ran} == {"skipm.fd": "query"}
    assert sorted(fifth.skipped) == SKIPPABLE


def test_run_explain_says_why_each_model_ran_or_was_skipped(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workflow, "make_runner", lambda *a, **k: world.runner)
    world.spark.sql("INSERT INTO skipsrc.a VALUES (2, 1)")
    args = ["run", "prod", "--project", str(world.root / "p2"), "--state", world.url]
    shown = CliRunner().invoke(cli, [*args, "--at", "2024-01-11T01:00:00", "--explain"])
    assert shown.exit_code == 0, shown.output
    lines = {line.split()[0]: line for line in shown.output.splitlines() if "skipm." in line}
    assert "1 model skipped" not in shown.output and "2 models skipped" in shown.output
    assert "ran: skipsrc.a changed since its last run" in lines["skipm.fa"]
    assert "skipped: its query and its 1 input are unchanged" in lines["skipm.fb"]
    assert "nothing to run: a view reads its parents" in lines["skipm.vc"]
    as_json = CliRunner().invoke(cli, [*args, "--at", "2024-01-12T01:00:00", "--json"])
    assert as_json.exit_code == 0, as_json.output
    found = json.loads(as_json.stdout)
    outcomes = {m["name"]: m["outcome"] for m in found["models"]}
    assert outcomes == {
        "skipm.fa": "skipped",
        "skipm.fb": "skipped",
        "skipm.fab": "skipped",
        "skipm.vc": "nothing to run",
        "skipm.fc": "skipped",
        "skipm.fd": "ran",
    }
    assert found["tables_built"] == 1 and len(found["skipped"]) == 4


def test_the_services_scheduled_run_skips_what_did_not_change_and_says_so(
    world: World, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The same skip through the service (issue 47): its scheduled run of prod, on this
    Spark, with nothing changed since the last run, rebuilds only the query that renders
    the run's dates, logs how many it skipped and records them with the run (what the
    web UI's history of prod shows)."""
    main = "e" * 40
    github = MemoryForge("octo/warehouse", name="github")
    github.commit_folder(main, world.root / "p2")  # the prod branch: the project prod runs
    github.refs["main"] = main
    found = workflow.plan_commit(world.store, "prod")
    assert found is not None
    world.store.set_plan_commit(found[0], main)  # promoted from main: its plan records it
    at = START + 13 * DAY_MS + 3_600_000
    deps = make_deps(
        forge_for=lambda _event: github, workdir=tmp_path / "work", state_url=world.url,
        clock=lambda: at, runner_for=lambda _project, _tree, _on: world.runner,
    )  # fmt: skip
    caplog.set_level(logging.INFO, logger="sluice.bot.flow.scheduled")
    before = world.rows("SELECT upto FROM skipm.fd")
    try:
        deps.ledger.seen("github:octo/warehouse", None, at, sha=main)  # promoted from main
        dispatch.handle(deps, ScheduledRunEvent("github", "octo/warehouse", None))
    finally:
        deps.close()
    said = [r.getMessage() for r in caplog.records if "scheduled run:" in r.getMessage()]
    assert any("1 table(s) brought up to date, 4 skipped (nothing they read changed)" in s
               for s in said), said  # fmt: skip
    [newest], _total = runs.recorded_runs(world.store, "prod", offset=0, limit=1)
    assert newest.ok and sorted(newest.payload["skipped"]) == SKIPPABLE, newest.payload
    assert world.rows("SELECT upto FROM skipm.fd") != before  # the query of the run's dates ran
