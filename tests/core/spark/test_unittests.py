"""SQLMesh-format unit tests rendered to steps and run on a real local SparkSession.

The session is ``local_spark`` from this folder's conftest: one in-process session for
the whole test run. The steps use temp views only, so any session does.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from sluice.core.errors import ModelError
from sluice.core.model.definition import Project
from sluice.core.model.loader import load_project
from sluice.core.spark import testing
from sluice.core.spark.steps.context import StepContext
from sluice.core.spark.steps.unittest import compare_rows, run_unit_test
from sluice.core.timeutil import to_ms
from tests.core.helpers import load

pytestmark = pytest.mark.spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

JAFFLE = Path(__file__).parents[3] / "examples" / "jaffle_shop"
NOW = to_ms("2024-03-05 10:30:00")


def _ctx() -> StepContext:
    return StepContext(job={}, emit=lambda event: None)


def _jaffle(tmp_path: Path, tests: dict[str, str]) -> Project:
    """The jaffle_shop example copied to ``tmp_path``, with extra test files."""
    root = tmp_path / "jaffle"
    shutil.copytree(JAFFLE, root, ignore=shutil.ignore_patterns(".sluice"))
    for name, text in tests.items():
        (root / "tests" / name).write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return load_project(root, use_cache=False)


def _run(spark: SparkSession, project: Project, pattern: str | None = None) -> list[dict[str, Any]]:
    steps = testing.unit_test_steps(project, pattern, NOW)
    results = [run_unit_test(spark, step, _ctx()) for step in steps]
    for step in steps:  # the views are gone: dropping them again finds nothing
        assert not any(spark.catalog.dropTempView(i["view"]) for i in step["inputs"])
    return results


WRONG = """
    test_wrong_value:
      model: jaffle.customers
      inputs:
        jaffle.stg_customers:
          rows:
            - {customer_id: 1, first_name: Michael, last_name: P.}
            - {customer_id: 2, first_name: Shawn, last_name: M.}
        jaffle.orders:
          rows:
            - {order_id: 10, customer_id: 1, order_date: 2018-01-01, amount: 10.0}
            - {order_id: 11, customer_id: 1, order_date: 2018-01-05, amount: 5.5}
      outputs:
        query:
          rows:
            - {customer_id: 1, number_of_orders: 2, customer_lifetime_value: 15.0}
            - {customer_id: 3, number_of_orders: 0, customer_lifetime_value: null}
"""


def test_the_example_test_renders_with_temp_views_and_inferred_types() -> None:
    project = load_project(JAFFLE, use_cache=False)
    (step,) = testing.unit_test_steps(project, None, NOW)
    assert step["type"] == "unit_test"
    assert step["label"] == "test test_customers_aggregates_orders"
    assert step["model"] == "jaffle.customers"
    assert step["line"] == 1
    orders, customers = step["inputs"]
    assert orders["table"] == "jaffle.orders"
    assert orders["view"].startswith(testing.VIEW_PREFIX)
    assert orders["view"] != customers["view"]
    assert orders["columns"] == [
        ["order_id", "BIGINT"], ["customer_id", "BIGINT"], ["order_date", "DATE"],
        ["amount", "DOUBLE"],
    ]  # fmt: skip
    assert orders["rows"][0] == [10, 1, "2018-01-01", 10.0]
    assert "jaffle." not in step["query"]
    assert f"FROM {orders['view']} AS orders" in step["query"]  # implicit alias kept
    assert f"FROM {customers['view']} AS c" in step["query"]
    assert step["expected"][0]["first_order"] == "2018-01-01"
    assert step["grain"] == ["customer_id"]


def test_the_example_test_passes_on_spark(local_spark: SparkSession) -> None:
    (result,) = _run(local_spark, load_project(JAFFLE, use_cache=False))
    assert result == {
        "step": "unit_test",
        "name": "test_customers_aggregates_orders",
        "passed": True,
        "diff": "",
        "notes": [],
    }


def test_a_wrong_expectation_fails_with_a_readable_diff(
    local_spark: SparkSession, tmp_path: Path
) -> None:
    project = _jaffle(tmp_path, {"test_wrong.yaml": WRONG})
    (result,) = _run(local_spark, project, "wrong")
    assert result["passed"] is False
    diff = result["diff"]
    lines = diff.splitlines()
    assert lines[0] == f"test_wrong_value ({tmp_path}/jaffle/tests/test_wrong.yaml:1) FAILED"
    assert "  row 1: customer_lifetime_value: expected 15.0, got 15.5" in lines
    # Customer 3 is not in the output, customer 2 was not expected: no pairing by grain.
    assert (
        "  missing row: {customer_id: 3, number_of_orders: 0, customer_lifetime_value: null}"
        in lines
    )
    assert (
        "  unexpected row: {customer_id: 2, number_of_orders: 0, customer_lifetime_value: null}"
        in lines
    )
    assert "  expected (-) and actual (+) rows:" in lines
    assert any(line.startswith("  - 1 ") and "15.0" in line for line in lines)
    assert any(line.startswith("  + 1 ") and "15.5" in line for line in lines)


def test_only_the_expected_columns_are_compared_in_any_order(
    local_spark: SparkSession, tmp_path: Path
) -> None:
    text = WRONG.replace("test_wrong_value", "test_subset").split("      outputs:")[0]
    text += textwrap.indent(
        textwrap.dedent("""
            outputs:
              query:
                rows:
                  - {customer_id: 2, most_recent_order: null}
                  - {customer_id: 1, most_recent_order: 2018-01-05, customer_lifetime_value: 15.5}
        """),
        "      ",
    )
    (result,) = _run(local_spark, _jaffle(tmp_path, {"test_subset.yaml": text}), "subset")
    assert result["passed"], result["diff"]


def test_ctes_are_checked_on_their_own(local_spark: SparkSession, tmp_path: Path) -> None:
    text = WRONG.replace("test_wrong_value", "test_ctes").split("      outputs:")[0]
    text += textwrap.indent(
        textwrap.dedent("""
            outputs:
              ctes:
                customer_orders:
                  rows:
                    - {customer_id: 1, first_order: 2018-01-01, number_of_orders: 3}
        """),
        "      ",
    )
    project = _jaffle(tmp_path, {"test_ctes.yaml": text})
    (step,) = testing.unit_test_steps(project, "test_ctes", NOW)
    assert step["expected"] is None
    (cte,) = step["ctes"]
    assert cte["query"].startswith("WITH customer_orders AS (")
    assert cte["query"].endswith("SELECT * FROM customer_orders")
    (result,) = _run(local_spark, project, "test_ctes")
    assert result["passed"] is False
    assert "  CTE customer_orders: row 1: number_of_orders: expected 3, got 2" in result["diff"]


def test_an_unknown_cte_is_an_error_at_the_test(tmp_path: Path) -> None:
    text = WRONG.replace("test_wrong_value", "test_bad_cte").split("      outputs:")[0]
    text += "      outputs:\n        ctes:\n          nope:\n            rows: []\n"
    project = _jaffle(tmp_path, {"test_bad_cte.yaml": text})
    with pytest.raises(ModelError, match="has no CTE named nope") as err:
        testing.unit_test_steps(project, "bad_cte", NOW)
    assert err.value.hint == "its CTEs: customer_orders"
    assert err.value.location == f"{tmp_path}/jaffle/tests/test_bad_cte.yaml:1"


def test_a_parent_without_rows_needs_declared_columns(
    local_spark: SparkSession, tmp_path: Path
) -> None:
    tests = {
        "test_missing.yaml": """
            test_no_orders:
              model: jaffle.customers
              inputs:
                jaffle.stg_customers:
                  rows: [{customer_id: 1, first_name: A, last_name: B}]
              outputs:
                query:
                  rows: [{customer_id: 1}]
        """,
        # raw_orders is a seed: its declared columns make an empty input.
        "test_seed.yaml": """
            test_empty_seed:
              model: jaffle.stg_orders
              outputs:
                query:
                  rows: []
        """,
    }
    project = _jaffle(tmp_path, tests)
    with pytest.raises(ModelError, match=r"no rows for jaffle\.orders") as err:
        testing.unit_test_steps(project, "no_orders", NOW)
    assert err.value.location == f"{tmp_path}/jaffle/tests/test_missing.yaml:1"
    assert "add `jaffle.orders:` with `rows:` under `inputs:`" in str(err.value.hint)
    (step,) = testing.unit_test_steps(project, "empty_seed", NOW)
    (seed,) = step["inputs"]
    assert seed["columns"] == [
        ["id", "INT"], ["user_id", "INT"], ["order_date", "DATE"], ["status", "STRING"],
    ]  # fmt: skip
    assert seed["rows"] == []
    (result,) = _run(local_spark, project, "empty_seed")
    assert result["passed"], result["diff"]


def test_declared_types_cast_the_input_values(local_spark: SparkSession, tmp_path: Path) -> None:
    tests = {
        "test_typed.yaml": """
            test_typed_seed:
              model: jaffle.stg_orders
              inputs:
                jaffle.raw_orders:
                  rows:
                    - {id: 1, user_id: 7.0, order_date: '2018-01-02', status: placed}
              outputs:
                query:
                  rows:
                    - {order_id: 1, customer_id: 7, order_date: 2018-01-02, status: placed}
            test_bad_value:
              model: jaffle.stg_orders
              inputs:
                jaffle.raw_orders:
                  rows:
                    - {id: one, user_id: 7}
              outputs:
                query:
                  rows: []
        """
    }
    typed, bad = _run(local_spark, _jaffle(tmp_path, tests), "test_")[-2:]
    assert typed["passed"], typed["diff"]
    assert bad["passed"] is False
    assert "input jaffle.raw_orders: ValueError: row 1, id: 'one' is not a INT" in bad["diff"]


def test_a_query_that_spark_rejects_is_a_failed_test(
    local_spark: SparkSession, tmp_path: Path
) -> None:
    project = load(
        tmp_path,
        {
            "config.yaml": "model_defaults: {dialect: spark, start: '2024-01-01'}\n",
            "models/src.sql": "MODEL (name s.src, kind FULL);\nSELECT 1 AS id\n",
            # (A function Spark does not know: an unknown column is refused at load now.)
            "models/m.sql": "MODEL (name s.m, kind FULL);\nSELECT id, no_such_function(id) AS x FROM s.src\n",
            "tests/test_m.yaml": """
                test_broken:
                  model: s.m
                  inputs:
                    s.src: {rows: [{id: 1}]}
                  outputs:
                    query: {rows: [{id: 1}]}
            """,
        },
    )
    (result,) = _run(local_spark, project)
    assert result["passed"] is False
    assert "the query failed:" in result["diff"]
    assert "no_such_function" in result["diff"].lower()  # Spark names it in capitals
    assert "JVM stacktrace" not in result["diff"]
    assert len(result["diff"].splitlines()) <= 10


INCREMENTAL = {
    "config.yaml": "model_defaults: {dialect: spark, start: '2024-01-01'}\n",
    "models/events.sql": """
        MODEL (name s.events, kind FULL);
        SELECT CAST('2024-01-01' AS DATE) AS ds, 1 AS id
    """,
    "models/daily.sql": """
        MODEL (
          name s.daily,
          kind INCREMENTAL_BY_TIME_RANGE (time_column ds),
          grain ds,
        );
        SELECT ds, COUNT(*) AS n, @start_ds AS first_day, @end_ds AS last_day
        FROM s.events
        WHERE ds BETWEEN @start_ds AND @end_ds
          AND ds NOT IN (SELECT ds FROM @this_model)
        GROUP BY ds
    """,
    "tests/test_daily.yaml": """
        test_daily_window:
          model: s.daily
          vars:
            start: 2024-01-02
            end: 2024-01-03
          inputs:
            s.events:
              rows:
                - {ds: 2024-01-01, id: 1}
                - {ds: 2024-01-02, id: 2}
                - {ds: 2024-01-02, id: 3}
                - {ds: 2024-01-03, id: 4}
                - {ds: 2024-01-04, id: 5}
          outputs:
            query:
              rows:
                - {ds: 2024-01-02, n: 2, first_day: '2024-01-02', last_day: '2024-01-03'}
                - {ds: 2024-01-03, n: 1, first_day: '2024-01-02', last_day: '2024-01-03'}
        test_daily_default_day:
          model: s.daily
          inputs:
            s.events:
              rows: [{ds: 2024-03-05, id: 1}, {ds: 2024-03-06, id: 2}]
          outputs:
            query:
              rows: [{ds: 2024-03-05, n: 1}]
    """,
}


def test_vars_render_the_time_macros_of_an_incremental_model(
    local_spark: SparkSession, tmp_path: Path
) -> None:
    project = load(tmp_path, INCREMENTAL)
    window, default = testing.unit_test_steps(project, "daily", NOW)
    assert "ds BETWEEN '2024-01-02' AND '2024-01-03'" in window["query"]
    # @this_model, not given as an input, is an empty view shaped like the expected rows.
    _, this = window["inputs"]
    assert this["table"] == "s.daily"
    assert this["rows"] == []
    assert f"FROM {this['view']}" in window["query"]
    # Without vars: the day of the execution time.
    assert "ds BETWEEN '2024-03-05' AND '2024-03-05'" in default["query"]
    results = _run(local_spark, project, "daily")
    assert [r["passed"] for r in results] == [True, True], [r["diff"] for r in results]


def test_a_timestamp_end_is_the_last_instant(tmp_path: Path) -> None:
    files = dict(INCREMENTAL)
    files["tests/test_daily.yaml"] = """
        test_until_noon:
          model: s.daily
          vars: {start: '2024-01-02 06:00:00', end: '2024-01-02 12:00:00', other: 1}
          inputs:
            s.events: {rows: [{ds: 2024-01-02, id: 1}]}
          outputs:
            query: {rows: []}
    """
    (step,) = testing.unit_test_steps(load(tmp_path, files), None, NOW)
    assert "ds BETWEEN '2024-01-02' AND '2024-01-02'" in step["query"]
    # No expected rows to type @this_model by: the query's column names, as STRING.
    assert step["inputs"][1]["columns"] == [
        ["ds", "STRING"], ["n", "STRING"], ["first_day", "STRING"], ["last_day", "STRING"],
    ]  # fmt: skip
    assert step["notes"] == ["vars other are not used: @VAR values come from config.yaml"]


def test_dash_k_selects_tests_by_substring_or_glob(tmp_path: Path) -> None:
    project = load(tmp_path, INCREMENTAL)

    def names(pattern: str | None) -> list[str]:
        return [s["name"] for s in testing.unit_test_steps(project, pattern, NOW)]

    assert names(None) == ["test_daily_window", "test_daily_default_day"]
    assert names("WINDOW") == ["test_daily_window"]
    assert names("*default*") == ["test_daily_default_day"]
    assert names("test_*_day") == ["test_daily_default_day"]
    assert names("nothing") == []


def test_compare_rows_tolerates_float_noise_and_rounding() -> None:
    types = ["bigint", "double", "decimal(10,4)", "date", "timestamp", "string"]
    columns = ["id", "x", "d", "day", "at", "s"]
    rows = [
        [2, 0.1 + 0.2, "1.3333", "2024-01-02", "2024-01-02 10:00:00", "b"],
        [1, 1 / 3, "2.5000", "2024-01-01", "2024-01-01 00:00:00.5", None],
    ]
    expected = [
        {"id": 1, "x": 0.3333, "d": 2.5, "day": "2024-01-01", "at": "2024-01-01T00:00:00.500"},
        {
            "id": 2,
            "x": 0.3,
            "d": "1.3333",
            "day": "2024-01-02 00:00:00",
            "s": "b",
            "at": "2024-01-02 10:00:00",
        },
    ]
    assert compare_rows(expected, columns, types, rows) == []
    assert compare_rows([{"id": 1}], ["ID"], ["int"], [[1]]) == []
    # Whole numbers are not rounded: 15 does not match 15.4.
    assert compare_rows([{"x": 15.0}], ["x"], ["double"], [[15.4]]) == [
        "row 1: x: expected 15.0, got 15.4",
        "expected (-) and actual (+) rows:",
        "  x",
        "- 15.0",
        "+ 15.4",
    ]


def test_compare_rows_reports_counts_and_absent_columns() -> None:
    lines = compare_rows([{"id": 1, "nope": 2}], ["id"], ["bigint"], [[1], [1]])
    assert lines[0] == "column nope not in the query's output (it returns: id)"
    assert lines[1] == "expected 1 rows, got 2"
    assert "unexpected row: {id: 1}" in lines
    assert compare_rows([], ["id"], ["bigint"], []) == []
    assert compare_rows([], ["id"], ["bigint"], [[1]])[:2] == [
        "expected 0 rows, got 1",
        "unexpected row: {id: 1}",
    ]
    assert compare_rows([{"a": None}], ["a"], ["string"], [[None]]) == []
    assert compare_rows([{"a": "x"}], ["a"], ["string"], [[None]])[0] == (
        "row 1: a: expected 'x', got null"
    )
    # Without a grain, rows pair up when most columns agree (or one row is left each side).
    expected = [{"a": 1, "b": 1}, {"a": 5, "b": 5}, {"a": 6, "b": 6}]
    lines = compare_rows(expected, ["a", "b"], ["int", "int"], [[1, 2], [7, 7], [8, 8]])
    assert lines[:5] == [
        "row 1: b: expected 1, got 2",
        "missing row: {a: 5, b: 5}",
        "missing row: {a: 6, b: 6}",
        "unexpected row: {a: 7, b: 7}",
        "unexpected row: {a: 8, b: 8}",
    ]
    lines = compare_rows(expected[1:2], ["a", "b"], ["int", "int"], [[7, 7]])
    assert lines[0] == "row 1: a: expected 5, got 7; b: expected 5, got 7"


def test_arrays_structs_and_timestamps_as_inputs(local_spark: SparkSession, tmp_path: Path) -> None:
    project = load(
        tmp_path,
        {
            "config.yaml": "model_defaults: {dialect: spark, start: '2024-01-01'}\n",
            # The source's columns are the test's inputs' (a star over an undeclared table:
            # unknown to the loader, so the plan-time column check leaves them to Spark).
            "models/src.sql": "MODEL (name s.src, kind FULL);\nSELECT * FROM raw.src\n",
            "models/m.sql": """
                MODEL (name s.m, kind FULL);
                SELECT id, tags[1] AS second_tag, info.k AS k, at + INTERVAL 1 HOUR AS later,
                  CAST(at AS DATE) AS day
                FROM s.src
            """,
            "tests/test_m.yaml": """
                test_nested:
                  model: s.m
                  inputs:
                    s.src:
                      rows:
                        - {id: 1, tags: [a, b], info: {k: 5}, at: 2024-01-01 23:30:00}
                        - {id: 2, tags: [c, d], info: null, at: null}
                  outputs:
                    query:
                      rows:
                        - {id: 1, second_tag: b, k: 5, later: 2024-01-02 00:30:00, day: 2024-01-01}
                        - {id: 2, second_tag: d, k: null, later: null, day: null}
            """,
        },
    )
    (step,) = testing.unit_test_steps(project, None, NOW)
    assert step["inputs"][0]["columns"] == [
        ["id", "BIGINT"], ["tags", "ARRAY<STRING>"], ["info", "STRUCT<`k`: BIGINT>"],
        ["at", "TIMESTAMP"],
    ]  # fmt: skip
    assert step["inputs"][0]["rows"][0] == [1, ["a", "b"], {"k": 5}, "2024-01-01 23:30:00"]
    (result,) = _run(local_spark, project)
    assert result["passed"], result["diff"]
