"""`sluice query`: read-only checks and name rewriting (pure), and a real run on Spark.

Only the tests that run a query use Spark (the ``views`` fixture's ``local_spark`` marks
them spark, tests/conftest.py); the pure ones run in the fast, non-Spark stage."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING

import pytest

from sluice.core.errors import PlanError
from sluice.core.spark import results
from sluice.core.spark.steps.context import StepContext
from sluice.core.spark.steps.query import run_query
from sluice.core.spark.testing import query_step

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

RESOLVE = {"jaffle.orders": "jaffle__pr_12.orders", "jaffle.customers": "jaffle__pr_12.customers"}


def _sql(sql: str, limit: int = 100) -> str:
    step = query_step(sql, RESOLVE, limit)
    assert step["type"] == "query"
    assert step["label"] == "query"
    assert step["limit"] == limit
    text: str = step["sql"]
    return text


def test_model_names_read_the_environment_views() -> None:
    assert _sql("SELECT * FROM jaffle.orders") == (
        "SELECT * FROM jaffle__pr_12.orders AS orders LIMIT 100"
    )
    assert _sql("select o.id from jaffle.orders o join jaffle.customers as c on o.c = c.id") == (
        "SELECT o.id FROM jaffle__pr_12.orders AS o "
        "JOIN jaffle__pr_12.customers AS c ON o.c = c.id LIMIT 100"
    )
    # Quoted and differently cased names are the same name in Spark.
    assert _sql("SELECT * FROM `jaffle`.`Orders`") == (
        "SELECT * FROM jaffle__pr_12.orders AS Orders LIMIT 100"
    )
    # Tables that are not models are left as written.
    assert _sql("SELECT * FROM other.thing JOIN jaffle.orders USING (id)") == (
        "SELECT * FROM other.thing JOIN jaffle__pr_12.orders AS orders USING (id) LIMIT 100"
    )
    assert _sql("SELECT * FROM (SELECT id FROM jaffle.orders) AS t WHERE id IN "
                "(SELECT id FROM jaffle.customers)") == (
        "SELECT * FROM (SELECT id FROM jaffle__pr_12.orders AS orders) AS t WHERE id IN "
        "(SELECT id FROM jaffle__pr_12.customers AS customers) LIMIT 100"
    )  # fmt: skip


def test_ctes_named_like_models_are_not_rewritten() -> None:
    sql = "WITH orders AS (SELECT * FROM jaffle.orders) SELECT * FROM orders"
    assert _sql(sql) == (
        "WITH orders AS (SELECT * FROM jaffle__pr_12.orders AS orders) "
        "SELECT * FROM orders LIMIT 100"
    )
    resolve = {"orders": "elsewhere.orders"}  # even an unqualified name in resolve
    assert "elsewhere" not in query_step(sql, resolve, 10)["sql"]


def test_the_limit_caps_the_rows_and_a_smaller_one_stays() -> None:
    assert _sql("SELECT 1 LIMIT 5") == "SELECT 1 LIMIT 5"
    assert _sql("SELECT 1 LIMIT 500") == "SELECT 1 LIMIT 100"
    assert _sql("SELECT 1 UNION ALL SELECT 2") == "SELECT 1 UNION ALL SELECT 2 LIMIT 100"
    assert _sql("SELECT a FROM jaffle.orders ORDER BY a DESC", 3) == (
        "SELECT a FROM jaffle__pr_12.orders AS orders ORDER BY a DESC LIMIT 3"
    )
    assert _sql("VALUES (1), (2)", 1) == "SELECT * FROM VALUES (1), (2) AS _sluice_query LIMIT 1"
    assert _sql("(SELECT 1)", 1) == "SELECT * FROM ((SELECT 1)) AS _sluice_query LIMIT 1"
    assert _sql("SELECT 1;") == "SELECT 1 LIMIT 100"
    assert _sql("SELECT 1; -- done") == "SELECT 1 LIMIT 100"


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("INSERT INTO jaffle.orders SELECT 1", "INSERT is not a read-only query"),
        ("WITH a AS (SELECT 1) INSERT INTO t SELECT * FROM a", "INSERT is not a read-only query"),
        ("CREATE TABLE t AS SELECT 1", "CREATE is not a read-only query"),
        ("DROP TABLE jaffle.orders", "DROP is not a read-only query"),
        ("DELETE FROM t WHERE x = 1", "DELETE is not a read-only query"),
        ("SET spark.sql.ansi.enabled = false", "SET is not a read-only query"),
        ("ADD JAR /tmp/x.jar", "ADD JAR is not a read-only query"),
        ("SELECT 1; DROP TABLE t", "the text has 2 statements; a query is exactly one"),
        ("SELECT * FROM parquet.`/data/orders`", "parquet.`/data/orders` reads files directly"),
        ("SELECT * FROM csv.`/x.csv`", "csv.`/x.csv` reads files directly"),
        ("SELECT * FROM json.`/x`", "reads files directly"),
        ("SELECT * FROM text.`/etc/passwd`", "reads files directly"),
        ("SELECT * FROM orc.`s3://b/k`", "reads files directly"),
        ("SELECT reflect('java.lang.System', 'exit', 0)", "reflect() calls Java methods"),
        ("SELECT TRANSFORM(a) USING 'sh' AS (b) FROM t", "TRANSFORM ... USING runs a script"),
        ("", "the query is empty"),
        ("-- nothing\n;", "the query is empty"),
        ("SELEC 1 FROM", "the query is not valid Spark SQL"),
    ],
)
def test_anything_but_one_read_only_query_is_refused(sql: str, message: str) -> None:
    with pytest.raises(PlanError) as err:
        query_step(sql, RESOLVE, 100)
    assert message in err.value.message
    assert err.value.hint


@pytest.fixture
def views(local_spark: SparkSession) -> Iterator[SparkSession]:
    """Temp views standing in for an environment's views of jaffle.orders and customers."""
    orders = local_spark.createDataFrame(
        [
            (1, 10, date(2018, 1, 1), datetime(2018, 1, 1, 10, 30), Decimal("10.50"), ["a"]),
            (2, 10, date(2018, 1, 2), datetime(2018, 1, 2, 0, 0, 0, 500000), Decimal("0"), []),
            (3, 11, date(2018, 1, 3), None, None, None),
        ],
        "id INT, customer_id INT, day DATE, at TIMESTAMP, amount DECIMAL(10,2), tags ARRAY<STRING>",
    )
    orders.createOrReplaceTempView("v_orders")
    local_spark.sql(
        "SELECT 10 AS id, 'Ann' AS name UNION ALL SELECT 11, 'Bob'"
    ).createOrReplaceTempView("v_customers")
    yield local_spark
    local_spark.catalog.dropTempView("v_orders")
    local_spark.catalog.dropTempView("v_customers")


def test_a_query_runs_against_the_resolved_views(views: SparkSession) -> None:
    resolve = {"jaffle.orders": "v_orders", "jaffle.customers": "v_customers"}
    sql = """
        WITH totals AS (SELECT customer_id, SUM(amount) AS total FROM jaffle.orders GROUP BY 1)
        SELECT o.id, c.name, o.day, o.at, o.amount, o.tags, t.total,
               named_struct('at', o.at, 'n', 1) AS s, CAST(NULL AS DOUBLE) AS nothing
        FROM jaffle.orders AS o
        JOIN jaffle.customers AS c ON c.id = o.customer_id
        JOIN totals AS t ON t.customer_id = o.customer_id
        ORDER BY o.id
    """
    ctx = StepContext(job={}, emit=lambda event: None)
    step = query_step(sql, resolve, 2)
    result = run_query(views, step, ctx)
    wired = json.loads(json.dumps(result))  # JSON-safe as it is
    assert results.parse_result(wired) == result  # a typed query result, as the runner reads it
    results.check(result, 0, [step])  # of its step: at most the 2 rows it asked for
    assert result["columns"] == [
        "id",
        "name",
        "day",
        "at",
        "amount",
        "tags",
        "total",
        "s",
        "nothing",
    ]
    assert result["types"] == [
        "int", "string", "date", "timestamp", "decimal(10,2)", "array<string>",
        "decimal(20,2)", "struct<at:timestamp,n:int>", "double",
    ]  # fmt: skip
    assert result["rows"] == [
        [1, "Ann", "2018-01-01", "2018-01-01 10:30:00", "10.50", ["a"], "10.50",
         {"at": "2018-01-01T10:30:00.000Z", "n": 1}, None],
        [2, "Ann", "2018-01-02", "2018-01-02 00:00:00.5", "0.00", [], "10.50",
         {"at": "2018-01-02T00:00:00.500Z", "n": 1}, None],
    ]  # fmt: skip


def test_a_query_with_no_rows_still_has_its_columns(views: SparkSession) -> None:
    ctx = StepContext(job={}, emit=lambda event: None)
    step = query_step(
        "SELECT id, id FROM jaffle.orders WHERE id < 0", {"jaffle.orders": "v_orders"}, 5
    )
    assert run_query(views, step, ctx) == {
        "step": "query",
        "columns": ["id", "id"],
        "types": ["int", "int"],
        "rows": [],
    }
