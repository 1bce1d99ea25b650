"""``sluice drift`` on a real Spark: a prod built once (module-scoped); checked clean, then
changed by hand four ways (a view replaced, a table dropped, a table overwritten with other
rows, a column added), checked again through the CLI, and repaired through it; then a
view replaced by hand once more, repaired through the service's gate.

The clean check comes first and must find nothing (a check that always found drift would
pass the rest); the drifted one must name exactly the four models changed and what each
change was; the repair must leave prod as Sluice recorded it, its data back.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from sluice.bot.events.neutral import CheckRunEvent, DriftCheckEvent
from sluice.bot.flow import dispatch
from sluice.bot.flow.deps import make_deps
from sluice.bot.forge.memory import MemoryForge
from sluice.core import drift, workflow
from sluice.core.cli import cli
from sluice.core.drift.compare import DriftReport
from sluice.core.model.loader import load_project
from sluice.core.snapshot.naming import physical_table
from sluice.core.spark.session import SparkPaths
from sluice.core.spark.submit import InProcessRunner
from sluice.core.state import open_state
from sluice.core.timeutil import to_ms

pytestmark = pytest.mark.spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NOW = to_ms("2024-01-04")
FILES = {
    "config.yaml": "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n  cron: '@daily'\n",
    "models/raw.sql": "MODEL (name drifted.raw, kind FULL);\n"
    "SELECT * FROM VALUES (1, 'a', DATE'2024-01-01'), (2, 'b', DATE'2024-01-02'), "
    "(3, 'c', DATE'2024-01-03') AS t(id, name, ds)",
    # One model for each change made by hand, and two left alone (an incremental table,
    # partitioned by its time column, whose view names its columns; a VIEW model).
    "models/by_view.sql": "MODEL (name drifted.by_view, kind FULL);\nSELECT id, name FROM drifted.raw",
    "models/dropped.sql": "MODEL (name drifted.dropped, kind FULL);\nSELECT id FROM drifted.raw",
    "models/overwritten.sql": "MODEL (name drifted.overwritten, kind FULL);\n"
    "SELECT id, name FROM drifted.raw",
    "models/widened.sql": "MODEL (name drifted.widened, kind FULL);\nSELECT id, ds FROM drifted.raw",
    "models/daily.sql": "MODEL (name drifted.daily, kind INCREMENTAL_BY_TIME_RANGE (time_column ds));\n"
    "SELECT id, ds FROM drifted.raw WHERE ds BETWEEN @start_ds AND @end_ds",
    "models/names.sql": "MODEL (name drifted.names, kind VIEW);\nSELECT name FROM drifted.raw",
}
GATE = "sluice:\n  gate:\n    required_approvers:\n      users: [bob]\n"
CHANGED = ("drifted.by_view", "drifted.dropped", "drifted.overwritten", "drifted.widened")


@dataclass
class Prod:
    root: Path
    url: str
    spark: SparkSession
    clean: DriftReport
    clean_cli: Any
    drifted: dict[str, Any]
    drifted_exit: int

    def cli(self, *args: str) -> Any:
        return CliRunner().invoke(
            cli,
            ["drift", "prod", *args, "--project", str(self.root), "--state", self.url, "--in-process"],
        )  # fmt: skip

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.spark.sql(sql).collect()]


def _paths(spark: SparkSession) -> SparkPaths:
    root = Path(spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:")).parent
    return SparkPaths(root=root, logs=root / "logs")


def _tables(url: str) -> dict[str, str]:
    store = open_state(url)
    try:
        record = store.get_environment("prod")
        assert record is not None
        return {ref.name: physical_table(ref.name, ref.version) for ref in record.snapshots}
    finally:
        store.close()


@pytest.fixture(scope="module")
def prod(tmp_path_factory: pytest.TempPathFactory, local_spark: SparkSession) -> Iterator[Prod]:
    spark = local_spark
    spark.sql("DROP DATABASE IF EXISTS drifted CASCADE")
    spark.sql("DROP DATABASE IF EXISTS sluice__drifted CASCADE")
    root = tmp_path_factory.mktemp("drift") / "project"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    url = f"sqlite:///{root / '.sluice' / 'state.db'}"
    project = load_project(root, use_cache=False)
    store = open_state(url)
    runner = InProcessRunner(project.config.sluice.spark, _paths(spark))
    try:
        plan = workflow.plan_environment(project, store, "prod", end=NOW, execution_time=NOW)
        workflow.apply_plan(project, store, plan, runner, now=NOW)
        clean = drift.check(store, "prod", runner, now=NOW)
    finally:
        store.close()
    env = Prod(root, url, spark, clean, None, {}, 0)
    env.clean_cli = env.cli("--json")
    # Prod changed outside Sluice, four ways.
    tables = _tables(url)
    spark.sql("CREATE OR REPLACE VIEW drifted.by_view AS SELECT 1 AS id, 'x' AS name")
    spark.sql(f"DROP TABLE {tables['drifted.dropped']}")
    spark.sql(
        f"INSERT OVERWRITE TABLE {tables['drifted.overwritten']} "
        "SELECT * FROM VALUES (7, 'z'), (8, 'y') AS t(id, name)"
    )
    spark.sql(f"ALTER TABLE {tables['drifted.widened']} ADD COLUMNS (note STRING)")
    found = env.cli("--json")
    env.drifted, env.drifted_exit = json.loads(found.stdout), found.exit_code
    yield env


def test_a_clean_prod_has_no_drift(prod: Prod) -> None:
    report = prod.clean
    assert report.models == 7  # every model with a view: raw, four to change, daily, names
    assert report.differences == (), [d.detail for d in report.differences]
    assert report.sources == {"files": 6}  # every table's last write read from its files
    assert prod.clean_cli.exit_code == 0, prod.clean_cli.output
    document = json.loads(prod.clean_cli.stdout)
    assert document["drift"] is False and document["differences"] == []
    assert document["last_write_read_from"] == {"files": 6}


def test_each_change_made_by_hand_is_named(prod: Prod) -> None:
    assert prod.drifted_exit == 3  # drift found
    found = prod.drifted
    assert found["drift"] is True and found["drifted_models"] == sorted(CHANGED)
    kinds = {(d["model"], d["kind"]) for d in found["differences"]}
    assert kinds == {
        ("drifted.by_view", "view_changed"),
        ("drifted.dropped", "table_missing"),
        ("drifted.overwritten", "data"),
        ("drifted.widened", "columns"),
    }
    by = {d["model"]: d for d in found["differences"]}
    assert "is not the one Sluice made" in by["drifted.by_view"]["detail"]
    assert by["drifted.by_view"]["since"] is not None  # the catalog dates its definition
    assert by["drifted.by_view"]["repair"] == "repoint"
    assert "does not exist" in by["drifted.dropped"]["detail"]
    assert "it holds 2 rows, Sluice's last write left 3 rows" in by["drifted.overwritten"]["detail"]
    assert "1 column added (note string)" in by["drifted.widened"]["detail"]
    assert {by[m]["repair"] for m in CHANGED[1:]} == {"rebuild"}


def test_the_human_report_names_them_too(prod: Prod) -> None:
    shown = prod.cli()
    assert shown.exit_code == 3, shown.output
    assert "Drift in prod" in shown.stdout and "4 models of 7 differ" in shown.stdout
    assert "drifted.widened: columns" in shown.stdout
    assert "Next:" not in shown.stdout  # the check alone; --repair plans the fix


def test_repair_makes_prod_what_sluice_recorded_again(prod: Prod) -> None:
    planned = prod.cli("--repair", "--json")
    assert planned.exit_code == 3, planned.output  # shown, not applied
    repair = json.loads(planned.stdout)["repair"]
    assert repair["applied"] is False
    assert repair["repoint"] == sorted(CHANGED)
    assert repair["rebuild"] == ["drifted.dropped", "drifted.overwritten", "drifted.widened"]
    assert sorted(b["model"] for b in repair["backfill"]) == repair["rebuild"]
    done = prod.cli("--repair", "--apply")
    assert done.exit_code == 0, done.output
    assert "Repaired prod" in done.stdout
    again = prod.cli("--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["differences"] == []
    assert prod.rows("SELECT id, name FROM drifted.by_view ORDER BY id") == [
        (1, "a"), (2, "b"), (3, "c"),
    ]  # fmt: skip
    assert prod.rows("SELECT COUNT(*) FROM drifted.dropped") == [(3,)]
    assert prod.rows("SELECT id FROM drifted.overwritten ORDER BY id") == [(1,), (2,), (3,)]
    assert "note" not in prod.spark.table(_tables(prod.url)["drifted.widened"]).columns


def test_the_service_repairs_a_view_replaced_by_hand_once_another_approves(
    prod: Prod, tmp_path: Path
) -> None:
    """Through the service (issue 47): alice asks for the repair on the ``sluice/drift``
    check, bob (a required approver) approves it, and prod's view is Sluice's again."""
    prod.spark.sql("CREATE OR REPLACE VIEW drifted.by_view AS SELECT 9 AS id, 'hand' AS name")
    main = "d" * 40
    src = tmp_path / "main"  # the prod branch: the project prod runs, gated by bob
    shutil.copytree(prod.root, src, ignore=shutil.ignore_patterns(".sluice"))
    (src / "config.yaml").write_text(FILES["config.yaml"] + GATE)
    github = MemoryForge("octo/warehouse", name="github")
    github.roles.update({"alice": "write", "bob": "write"})
    github.commit_folder(main, src)
    github.refs["main"] = main
    store = open_state(prod.url)
    try:  # prod was promoted from main: its plan records it, as a promotion's does
        found = workflow.plan_commit(store, "prod")
        assert found is not None
        store.set_plan_commit(found[0], main)
    finally:
        store.close()
    deps = make_deps(
        forge_for=lambda _event: github, workdir=tmp_path / "work", state_url=prod.url,
        clock=lambda: NOW, runner_for=lambda project, _tree, _on: InProcessRunner(
            project.config.sluice.spark, _paths(prod.spark)),
    )  # fmt: skip
    try:
        deps.ledger.seen("github:octo/warehouse", None, NOW, sha=main)
        dispatch.handle(deps, DriftCheckEvent("github", "octo/warehouse", None))

        def click(user: str, label: str) -> None:
            check = github.checks[main]["sluice/drift"]
            [identifier] = [a.identifier for a in check.actions if a.label == label]
            run = github.run_id(main, "sluice/drift")  # Sluice's run: its buttons count
            event = CheckRunEvent("github", "octo/warehouse", None, "requested_action",
                                  "sluice/drift", main, (), user, identifier, run,
                                  requester_id=github.account_id(user))  # fmt: skip
            dispatch.handle(deps, event)

        click("alice", "Plan the repair")
        assert prod.rows("SELECT id FROM drifted.by_view") == [(9,)]  # asked, not approved
        click("bob", "Approve the repair")
    finally:
        deps.close()
    check = github.checks[main]["sluice/drift"]
    assert check.conclusion == "success", check.summary
    assert "asked by @alice and approved by @bob" in check.summary
    assert prod.rows("SELECT id, name FROM drifted.by_view ORDER BY id") == [
        (1, "a"), (2, "b"), (3, "c"),
    ]  # fmt: skip
