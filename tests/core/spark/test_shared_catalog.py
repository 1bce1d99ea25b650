"""Two runners sharing one world: two workdirs (two CI runners, or two service processes
on two machines) with one state database on PostgreSQL, one Hive metastore on PostgreSQL
and one warehouse directory. The second sees the prod the first built, builds a PR
environment on it, and promotes it by virtual update; the first then reads the result.

The metastore needs PostgreSQL's JDBC driver (Debian: ``libpostgresql-jdbc-java``, which
``.ci/run`` installs), configured as the README's "A shared metastore on PostgreSQL" says.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from sluice.core import workflow
from sluice.core.config import SparkSettings
from sluice.core.model.loader import load_project
from sluice.core.spark.session import SparkPaths, uses_embedded_metastore
from sluice.core.spark.submit import SubmitRunner
from sluice.core.state import open_state
from sluice.core.timeutil import to_ms
from tests.helpers.hive_metastore import JAR, postgres_metastore_conf

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

END = to_ms("2018-04-30")
# Two models, the second reading the first: what two machines share is the point here,
# not the models (the example project's whole build on one machine is test_lifecycle's).
PROJECT = {
    "config.yaml": "model_defaults:\n  dialect: spark\n  start: '2018-04-01'\n"
    "sluice:\n  project: shop\n",
    "models/orders.sql": "MODEL (name shop.orders, kind FULL);\n"
    "SELECT id AS order_id, id % 10 AS customer_id FROM RANGE(0, 99) AS t(id)",
    "models/customers.sql": "MODEL (name shop.customers, kind FULL);\n"
    "SELECT\n  customer_id,\n  COUNT(*) AS number_of_orders\n"
    "FROM shop.orders\nGROUP BY customer_id",
}


def _catalog(metastore_url: str, warehouse: Path) -> SparkSettings:
    """The README's shared metastore settings, for a database of the test server."""
    return SparkSettings(master="local[2]", conf=postgres_metastore_conf(metastore_url, warehouse))


@pytest.fixture
def metastore_url(postgres_url: str) -> str:
    if not JAR.is_file():
        why = f"{JAR} is missing: run scripts/ensure-postgres.sh (Debian's libpostgresql-jdbc-java)"
        if os.environ.get("CI") == "true":
            pytest.fail(why)  # CI installs it: a missing driver is a broken setup there
        pytest.skip(why)
    return postgres_url


def test_a_second_runner_sees_promotes_and_shares_what_the_first_built(
    tmp_path: Path, fresh_postgres_url: str, metastore_url: str
) -> None:
    from sqlalchemy import create_engine, text

    # One more database on the server, for the metastore.
    admin = create_engine(metastore_url, isolation_level="AUTOCOMMIT")
    name = f"{make_url(fresh_postgres_url).database}_hive"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        _two_runners(
            tmp_path,
            fresh_postgres_url,
            str(make_url(metastore_url).set(database=name).render_as_string(hide_password=False)),
        )
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _two_runners(tmp_path: Path, state_url: str, hive_url: str) -> None:
    shared = tmp_path / "shared-warehouse"
    spark = _catalog(hive_url, shared)
    assert not uses_embedded_metastore(spark)  # jobs are not serialised on a lock file

    def runner(name: str) -> tuple[Path, SubmitRunner]:
        work = tmp_path / name  # a machine's own workdir: its logs, nothing shared
        checkout = work / "checkout"
        for file, text in PROJECT.items():
            (checkout / file).parent.mkdir(parents=True, exist_ok=True)
            (checkout / file).write_text(text)
        paths = SparkPaths(root=work / "spark", logs=work / "logs")
        return checkout, SubmitRunner(spark, paths)

    first_tree, first = runner("runner-1")
    second_tree, second = runner("runner-2")

    # Runner 1 builds prod.
    store = open_state(state_url)
    try:
        project = load_project(first_tree, use_cache=False)
        plan = workflow.plan_environment(project, store, "prod", end=END, execution_time=END)
        built = workflow.apply_plan(project, store, plan, first, now=END)
        assert built.tables_built > 0
    finally:
        store.close()
    files = sorted(p.relative_to(shared) for p in shared.rglob("*.parquet"))
    assert files, "prod's tables are in the shared warehouse"

    # Runner 2, on its own checkout and workdir, finds prod built: a PR changing one
    # model builds that model only, then its promotion writes no file.
    edited = second_tree / "models" / "customers.sql"
    edited.write_text(
        edited.read_text().replace("  customer_id,\n", "  customer_id,\n  1 AS shared_flag,\n")
    )
    store = open_state(state_url)
    try:
        project = load_project(second_tree, use_cache=False)
        pr = workflow.plan_environment(project, store, "pr_1", end=END, execution_time=END)
        assert [b.name for b in pr.backfill] == ["shop.customers"]
        assert workflow.apply_plan(project, store, pr, second, now=END).tables_built == 1
        before = sorted(shared.rglob("*.parquet"))
        promote = workflow.plan_environment(project, store, "prod", end=END, execution_time=END)
        assert promote.backfill == ()
        promoted = workflow.apply_plan(project, store, promote, second, now=END)
        assert promoted.tables_built == 0 and promoted.views_swapped >= 1
        assert sorted(shared.rglob("*.parquet")) == before  # a virtual update

        # Runner 1 reads prod through the shared catalog: the column runner 2 promoted.
        answer = workflow.query_environment(
            load_project(first_tree, use_cache=False), store, "prod",
            "SELECT COUNT(*) AS n, MIN(shared_flag) AS flag, SUM(number_of_orders) AS orders "
            "FROM shop.customers", first,
            limit=10,
        )  # fmt: skip
    finally:
        store.close()
    assert answer["rows"] == [[10, 1, 99]]
