"""Generated catalog statements as one SQL script (:mod:`sluice.core.spark.steps.script`):
one Spark operation for all of them, the same effect as one call each, and an error that
names the statement that failed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from sluice.core.spark.steps.script import run_all

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


class Counting:
    """A session that counts the ``sql`` calls made through it."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.calls: list[str] = []

    def sql(self, statement: str) -> Any:
        self.calls.append(statement)
        return self.spark.sql(statement)


def _views(spark: SparkSession, schema: str) -> set[str]:
    return {r["viewName"] for r in spark.sql(f"SHOW VIEWS IN {schema}").collect()}


def test_statements_run_as_one_script_in_one_call(local_spark: SparkSession) -> None:
    spark = Counting(local_spark)
    statements = [
        "CREATE DATABASE IF NOT EXISTS scripted",
        # A trailing line comment cannot swallow the separator after it.
        "CREATE OR REPLACE VIEW scripted.a AS SELECT 1 AS `semi;colon` -- a comment",
        "CREATE OR REPLACE VIEW scripted.b AS SELECT 'x;y' AS `odd``name`",
        "CREATE OR REPLACE VIEW scripted.gone AS SELECT 2 AS n",
        "DROP VIEW IF EXISTS scripted.gone",
    ]
    run_all(spark, statements)  # type: ignore[arg-type]
    assert len(spark.calls) == 1 and spark.calls[0].startswith("BEGIN\n")
    assert _views(local_spark, "scripted") >= {"a", "b"} and "gone" not in _views(
        local_spark, "scripted"
    )
    assert local_spark.table("scripted.b").columns == ["odd`name"]
    assert local_spark.table("scripted.b").collect()[0][0] == "x;y"
    run_all(spark, statements)  # again: the same catalog
    assert len(spark.calls) == 2


def test_a_failing_statement_is_named_and_those_before_it_are_kept(
    local_spark: SparkSession,
) -> None:
    spark = Counting(local_spark)
    local_spark.sql("CREATE DATABASE IF NOT EXISTS scripted_bad")
    statements = [
        "CREATE OR REPLACE VIEW scripted_bad.first AS SELECT 1 AS n",
        "CREATE OR REPLACE VIEW scripted_bad.second AS SELECT * FROM scripted_bad.no_such_table",
        "CREATE OR REPLACE VIEW scripted_bad.third AS SELECT 3 AS n",
    ]
    with pytest.raises(Exception, match="no_such_table"):
        run_all(spark, statements)  # type: ignore[arg-type]
    # The script failed, then one call each up to the statement that fails.
    assert spark.calls[1:] == statements[:2]
    assert _views(local_spark, "scripted_bad") == {"first"}


def test_without_sql_scripting_one_call_each(local_spark: SparkSession) -> None:
    spark = Counting(local_spark)
    local_spark.conf.set("spark.sql.scripting.enabled", "false")
    try:
        run_all(
            spark,  # type: ignore[arg-type]
            [
                "CREATE DATABASE IF NOT EXISTS scripted_off",
                "CREATE OR REPLACE VIEW scripted_off.v AS SELECT 1 AS n",
            ],
        )
    finally:
        local_spark.conf.unset("spark.sql.scripting.enabled")
    assert len(spark.calls) == 3  # the refused script, then each statement
    assert _views(local_spark, "scripted_off") == {"v"}
