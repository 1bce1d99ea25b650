"""Apply, virtual environments and virtual update on a real (in-process) Spark.

One module-scoped prod of the example project; each test works from it. The in-process
runner runs the very driver code spark-submit runs (see test_lifecycle_submit.py for that
path).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from sluice.core import workflow
from sluice.core.errors import ExecutionError, SluiceError
from sluice.core.model.loader import load_project
from sluice.core.spark.submit import InProcessRunner
from sluice.core.state import open_state
from sluice.core.timeutil import to_ms

pytestmark = pytest.mark.spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REPO = Path(__file__).resolve().parents[3]
NOW = to_ms("2018-05-01")


@dataclass
class Env:
    root: Path
    url: str
    spark: SparkSession

    def plan(self, env: str, **kwargs: object):  # type: ignore[no-untyped-def]
        project = load_project(self.root, use_cache=False)
        store = open_state(self.url)
        try:
            return project, workflow.plan_environment(
                project, store, env, end=NOW, execution_time=NOW, **kwargs
            )  # type: ignore[arg-type]
        finally:
            store.close()

    def apply(self, env: str, **kwargs: object) -> workflow.ApplyResult:
        project, plan = self.plan(env, **kwargs)
        store = open_state(self.url)
        try:
            runner = InProcessRunner(project.config.sluice.spark, _paths(self.spark))
            return workflow.apply_plan(project, store, plan, runner, url=self.url, now=NOW)
        finally:
            store.close()

    def edit(self, rel: str, old: str, new: str) -> None:
        path = self.root / rel
        text = path.read_text()
        assert old in text, f"{old!r} not in {rel}"
        path.write_text(text.replace(old, new))

    def rows(self, sql: str) -> list[tuple[object, ...]]:
        return [tuple(r) for r in self.spark.sql(sql).collect()]

    def view_target(self, view: str) -> str:
        text = str(self.spark.sql(f"SHOW CREATE TABLE {view}").collect()[0][0])
        return text.split("FROM", 1)[1].split(maxsplit=1)[0]


def _paths(spark: SparkSession):  # type: ignore[no-untyped-def]
    from sluice.core.spark.session import SparkPaths

    root = Path(spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:")).parent
    return SparkPaths(root=root, logs=root / "logs")


def _copy_example(dest: Path) -> Path:
    shutil.copytree(
        REPO / "examples" / "jaffle_shop", dest, ignore=shutil.ignore_patterns(".sluice")
    )
    return dest


@pytest.fixture(scope="module")
def prod(tmp_path_factory: pytest.TempPathFactory, local_spark: SparkSession) -> Iterator[Env]:
    root = _copy_example(tmp_path_factory.mktemp("apply") / "jaffle")
    env = Env(root, f"sqlite:///{root / '.sluice' / 'state.db'}", local_spark)
    result = env.apply("prod")
    # 3 seeds, 3 views, 2 full tables, 1 incremental, 1 Python model (customer_segments)
    assert result.tables_built + result.model_views == 10
    yield env


def test_prod_is_built_audited_and_readable(prod: Env) -> None:
    assert prod.rows("SELECT COUNT(*) FROM jaffle.customers") == [(100,)]
    assert prod.rows("SELECT COUNT(*) FROM jaffle.orders") == [(99,)]
    # The PySpark model: the 62 customers who ordered, segmented (its thresholds and the
    # stg_payments amounts, in dollars by the Python macro @cents_to_dollars).
    assert prod.rows(
        "SELECT segment, COUNT(*) FROM jaffle.customer_segments GROUP BY segment ORDER BY segment"
    ) == [("big spender", 3), ("loyal", 6), ("occasional", 53)]
    # The incremental model: one row per day with orders, no day twice, Jan..Apr 2018.
    assert (
        prod.rows("SELECT COUNT(*), COUNT(DISTINCT order_date) FROM jaffle.daily_revenue")[0][0]
        == prod.rows(
            "SELECT COUNT(DISTINCT order_date) FROM jaffle.orders WHERE order_date < '2018-05-01'"
        )[0][0]
    )
    # Its view shows the model's columns in the model's order, though the table is
    # partitioned by order_date (stored last).
    assert prod.spark.table("jaffle.daily_revenue").columns == [
        "order_date",
        "orders",
        "revenue",
        "completed_revenue",
    ]
    store = open_state(prod.url)
    try:
        record = store.get_environment("prod")
        assert record is not None
        daily = next(r for r in record.snapshots if r.name == "jaffle.daily_revenue")
        assert store.get_intervals([(daily.name, daily.version)])[(daily.name, daily.version)] == [
            (to_ms("2018-01-01"), to_ms("2018-05-01"))
        ]
        audits = {r.name: r.passed for r in store.get_results(plan_id=record.plan_id)}
        assert audits["jaffle.orders:unique_values"] and audits["jaffle.stg_orders:accepted_values"]
        # Each table it built has its size recorded: the bytes of its data files.
        sizes = store.get_table_sizes(r.name for r in record.snapshots)
        for ref in record.snapshots:
            table = prod.view_target(ref.name)
            kind = prod.spark.sql(f"DESCRIBE TABLE EXTENDED {table}").collect()
            if any(row["col_name"] == "Type" and row["data_type"] == "VIEW" for row in kind):
                assert (ref.name, ref.version) not in sizes  # a VIEW model holds no data
                continue
            location = next(row["data_type"] for row in kind if row["col_name"] == "Location")
            files = [
                f
                for f in Path(location.removeprefix("file:")).rglob("*")
                if f.is_file() and not f.name.startswith((".", "_"))
            ]
            assert sizes[(ref.name, ref.version)].bytes == sum(f.stat().st_size for f in files)
            assert sizes[(ref.name, ref.version)].bytes > 0
            # ... and the rows it holds, as a count of the table says.
            [count] = prod.spark.sql(f"SELECT COUNT(*) AS n FROM {table}").collect()
            assert sizes[(ref.name, ref.version)].rows == count["n"]
    finally:
        store.close()


def _files(spark: SparkSession) -> dict[str, float]:
    warehouse = Path(spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:"))
    return {str(p): p.stat().st_mtime for p in warehouse.rglob("*")}


def _tables(spark: SparkSession) -> set[str]:
    return {
        f"{db.name}.{t.name}"
        for db in spark.catalog.listDatabases()
        for t in spark.catalog.listTables(db.name)
        if t.tableType != "VIEW" and not t.isTemporary
    }


def test_pr_environment_then_promotion_by_virtual_update(prod: Env) -> None:
    prod_orders = prod.view_target("jaffle.orders")
    prod_customers = prod.view_target("jaffle.customers")
    prod.edit(
        "models/orders.sql",
        "  COALESCE(p.total_amount, 0) AS amount",
        "  COALESCE(p.total_amount, 0) AS amount,\n  o.status = 'completed' AS is_completed",
    )

    built = prod.apply("pr_1")
    # Only the changed model is built: its children's change is non-breaking.
    assert built.tables_built + built.model_views == 1
    pr_orders = prod.view_target("jaffle__pr_1.orders")
    assert pr_orders != prod_orders
    assert prod.view_target("jaffle__pr_1.customers") == prod_customers
    assert "is_completed" in prod.spark.table("jaffle__pr_1.orders").columns
    assert "is_completed" not in prod.spark.table("jaffle.orders").columns

    # Promote: prod takes the versions the PR built; nothing is computed or written.
    files, tables = _files(prod.spark), _tables(prod.spark)
    _, plan = prod.plan("prod")
    assert plan.backfill == ()
    promoted = prod.apply("prod")
    assert promoted.tables_built == 0 and promoted.views_swapped == 1
    assert _files(prod.spark) == files
    assert _tables(prod.spark) == tables
    assert prod.view_target("jaffle.orders") == pr_orders
    assert prod.rows("SELECT COUNT(*) FROM jaffle.orders WHERE is_completed") == prod.rows(
        "SELECT COUNT(*) FROM jaffle__pr_1.orders WHERE is_completed"
    )


def test_breaking_change_rebuilds_descendants_only(prod: Env) -> None:
    macro, scaled = (
        "@cents_to_dollars(amount) AS amount",
        "@cents_to_dollars(amount) * 1.1 AS amount",
    )
    prod.edit("models/stg_payments.sql", macro, scaled)
    result = prod.apply("pr_2")
    # stg_payments (a view), orders and its children customers, daily_revenue and
    # customer_segments (the Python model).
    assert result.tables_built + result.model_views == 5
    assert prod.view_target("jaffle__pr_2.raw_orders") == prod.view_target("jaffle.raw_orders")
    assert prod.view_target("jaffle__pr_2.customers") != prod.view_target("jaffle.customers")
    assert prod.view_target("jaffle__pr_2.customer_segments") != prod.view_target(
        "jaffle.customer_segments"
    )
    prod.edit("models/stg_payments.sql", scaled, macro)


def _unchanged(prod: Env, env: str, attempt: object) -> ExecutionError:
    store = open_state(prod.url)
    before = store.get_environment(env)
    store.close()
    with pytest.raises(ExecutionError) as info:
        attempt()  # type: ignore[operator]
    store = open_state(prod.url)
    try:
        assert store.get_environment(env) == before
    finally:
        store.close()
    return info.value


def test_a_failing_audit_stops_the_apply_and_changes_nothing(prod: Env) -> None:
    prod_orders = prod.view_target("jaffle.orders")
    prod.edit(
        "models/orders.sql",
        "  o.order_id,\n  o.customer_id,",
        "  CASE WHEN o.order_id = 3 THEN NULL ELSE o.order_id END AS order_id,\n  o.customer_id,",
    )
    try:
        error = _unchanged(prod, "prod", lambda: prod.apply("prod"))
        assert "not_null" in str(error) and "jaffle.orders" in str(error)
        assert prod.view_target("jaffle.orders") == prod_orders
    finally:
        prod.edit(
            "models/orders.sql",
            "  CASE WHEN o.order_id = 3 THEN NULL ELSE o.order_id END AS order_id,\n  o.customer_id,",
            "  o.order_id,\n  o.customer_id,",
        )


def test_a_query_spark_cannot_run_names_the_model(prod: Env) -> None:
    bad = prod.root / "models" / "bad.sql"
    bad.write_text(
        "MODEL (name jaffle.bad, kind FULL);\nSELECT no_such_function(order_id) AS x FROM jaffle.orders"
    )
    try:
        error = _unchanged(prod, "pr_3", lambda: prod.apply("pr_3"))
        assert "build jaffle.bad" in str(error)
        assert "no_such_function" in str(error).lower() or "UNRESOLVED_ROUTINE" in str(error)
        assert not prod.spark.catalog.databaseExists("jaffle__pr_3")
        # The model's file and line (once), Spark's error class and its one-line message;
        # no position in generated SQL, no plan.
        message = str(error).splitlines()
        first = message[0]
        assert first.startswith("models/bad.sql:1: Spark job failed at step 'build jaffle.bad'")
        assert first.count("models/bad.sql:1") == 1
        assert "UNRESOLVED_ROUTINE" in first or "no_such_function" in first.lower()
        assert not any(" pos " in line or "Project [" in line for line in message), message
        # A column the parent lacks never reaches Spark: the plan-time check names its place.
        bad.write_text("MODEL (name jaffle.bad, kind FULL);\nSELECT amout AS x FROM jaffle.orders")
        with pytest.raises(SluiceError) as found:
            prod.apply("pr_3")
        assert "models/bad.sql" in str(found.value) and "'amount'" in str(found.value)
    finally:
        bad.unlink()


def test_a_seed_row_that_does_not_fit_names_the_line(prod: Env) -> None:
    seed = prod.root / "seeds" / "raw_customers.csv"
    original = seed.read_text()
    seed.write_text(original + "101,Ann,X.\nnot-a-number,Bo,Y.\n")
    try:
        error = _unchanged(prod, "pr_4", lambda: prod.apply("pr_4"))
        assert "raw_customers.csv:103" in str(error) and "INT" in str(error)
    finally:
        seed.write_text(original)


def test_restatement_recomputes_without_duplicates(prod: Env) -> None:
    before = prod.rows("SELECT COUNT(*), SUM(orders) FROM jaffle.daily_revenue")
    result = prod.apply("prod", start=to_ms("2018-02-01"), restate=["jaffle.daily_revenue"])
    assert result.tables_built + result.model_views == 1
    assert prod.rows("SELECT COUNT(*), SUM(orders) FROM jaffle.daily_revenue") == before
    assert (
        prod.rows(
            "SELECT order_date FROM jaffle.daily_revenue GROUP BY order_date HAVING COUNT(*) > 1"
        )
        == []
    )


def test_unique_key_models_upsert(tmp_path: Path, local_spark: SparkSession) -> None:
    root = tmp_path / "upsert"
    (root / "models").mkdir(parents=True)
    (root / "seeds").mkdir()
    (root / "config.yaml").write_text("model_defaults:\n  start: '2024-01-01'\n")
    (root / "seeds" / "items.csv").write_text("id,name\n1,a\n2,b\n")
    (root / "models" / "items.sql").write_text(
        "MODEL (name upsert_t.items, kind SEED (path '../seeds/items.csv'));"
    )
    (root / "models" / "latest.sql").write_text(
        "MODEL (name upsert_t.latest, kind INCREMENTAL_BY_UNIQUE_KEY (unique_key id));\nSELECT id, name FROM upsert_t.items"
    )
    env = Env(root, f"sqlite:///{root / 'state.db'}", local_spark)
    env.apply("prod")
    assert sorted(env.rows("SELECT id, name FROM upsert_t.latest")) == [(1, "a"), (2, "b")]
    # Restating it upserts the same keys again: still one row per key.
    env.apply("prod", restate=["upsert_t.latest"])
    assert sorted(env.rows("SELECT id, name FROM upsert_t.latest")) == [(1, "a"), (2, "b")]


def test_janitor_removes_invalidated_environments_and_unused_tables(prod: Env) -> None:
    store = open_state(prod.url)
    try:
        if store.get_environment("pr_1") is None:
            pytest.skip("needs the PR environment of the promotion test")
        workflow.invalidate_environment(store, "pr_1")
        project = load_project(prod.root, use_cache=False)
        runner = InProcessRunner(project.config.sluice.spark, _paths(prod.spark))
        report = workflow.run_janitor(store, runner, url=prod.url, now=NOW, table_ttl_ms=0)
        assert "pr_1" in report.environments
        assert store.get_environment("pr_1") is None
        assert not prod.spark.catalog.databaseExists("jaffle__pr_1")
        # prod's previous orders table (replaced by the promotion) is unused now: dropped.
        assert report.tables
        live = {r.version for e in store.list_environments() for r in e.snapshots}
        for dropped in report.tables:
            name, version = dropped.split("@")
            assert version not in live
            schema, table = name.split(".")
            assert not prod.spark.catalog.tableExists(
                f"sluice__{schema}.{schema}__{table}__{version}"
            )
        assert prod.rows("SELECT COUNT(*) FROM jaffle.orders") == [(99,)]
    finally:
        store.close()


def test_cli_test_and_query_in_process(prod: Env) -> None:
    from click.testing import CliRunner

    from sluice.core.cli import cli

    tested = CliRunner().invoke(cli, ["test", "--project", str(prod.root), "--in-process"])
    assert tested.exit_code == 0, tested.output
    assert (
        "PASS test_customers_aggregates_orders" in tested.output
        and "1 passed, 0 failed" in tested.output
    )
    queried = CliRunner().invoke(
        cli,
        [
            "query",
            "prod",
            "SELECT COUNT(*) AS n FROM jaffle.orders",
            "--project",
            str(prod.root),
            "--state",
            prod.url,
            "--json",
            "--in-process",
        ],
    )
    assert queried.exit_code == 0, queried.output
    assert json.loads(queried.stdout)["rows"] == [[99]]
    refused = CliRunner().invoke(
        cli,
        [
            "query",
            "prod",
            "DROP TABLE jaffle.orders",
            "--project",
            str(prod.root),
            "--state",
            prod.url,
            "--in-process",
        ],
    )
    assert (
        refused.exit_code == 1 and "error:" in refused.output and "DROP" in refused.output.upper()
    )
    missing = CliRunner().invoke(
        cli,
        [
            "query",
            "pr_404",
            "SELECT 1",
            "--project",
            str(prod.root),
            "--state",
            prod.url,
            "--in-process",
        ],
    )
    assert missing.exit_code == 1 and "does not exist" in missing.output
