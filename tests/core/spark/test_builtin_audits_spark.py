"""SQLMesh's built-in audits on a real (in-process) Spark: each one's query runs, passes on
good rows and finds the bad ones (through the audit step the driver runs), and a project
using them applies end to end: blocking audits pass, a failing non-blocking one is recorded
without stopping the apply, a failing blocking one stops it and changes nothing.

The rendering and the argument checks are tested without Spark in
tests/core/model/test_builtin_audits.py."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from sluice.core import workflow
from sluice.core.errors import ExecutionError
from sluice.core.model.loader import load_project
from sluice.core.spark.render import audit_sql
from sluice.core.spark.spec import AuditStep
from sluice.core.spark.steps.build import AuditFailed, run_audit
from sluice.core.spark.steps.context import StepContext
from sluice.core.spark.submit import InProcessRunner
from sluice.core.state import open_state
from sluice.core.timeutil import to_ms

pytestmark = pytest.mark.spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class Case:
    audit: str
    args: dict[str, str]  # Spark SQL, as the header parser writes them
    schema: str  # the view's columns
    rows: list[str]  # each a VALUES row; none: an empty view
    violations: int  # rows the audit returns (0: it passes)


def case(audit: str, schema: str, rows: list[str], violations: int, **args: str) -> Case:
    return Case(audit, args, schema, rows, violations)


CASES = [
    # row counts and NULLs
    case("number_of_rows", "id INT", ["1", "2"], 0, threshold="1"),
    case("number_of_rows", "id INT", ["1"], 1, threshold="1"),  # not MORE than 1 row
    case("number_of_rows", "id INT", [], 1, threshold="0"),
    case("not_null", "id INT, name STRING", ["(1, 'a')", "(2, NULL)"], 1, columns="(id, name)"),
    case(
        "not_null",
        "id INT, name STRING",
        ["(1, 'a')", "(2, NULL)"],
        0,
        columns="(id, name)",
        condition="id < 2",
    ),
    case("at_least_one", "zip STRING", ["(NULL)", "('1')"], 0, column="zip"),
    case("at_least_one", "zip STRING", ["(NULL)", "(NULL)"], 1, column="zip"),
    case("at_least_one", "zip STRING", [], 0, column="zip"),  # as in SQLMesh: no group
    case(
        "not_null_proportion",
        "zip STRING",
        ["('1')", "('2')", "('3')", "(NULL)"],
        1,  # 3 of 4 is not above 0.8
        column="zip",
        threshold="0.8",
    ),
    case(
        "not_null_proportion",
        "zip STRING",
        ["('1')", "('2')", "('3')", "(NULL)"],
        0,
        column="zip",
        threshold="0.5",
    ),
    # values
    case("not_constant", "id INT", ["1", "1", "(NULL)"], 1, column="id"),
    case("not_constant", "id INT", ["1", "2"], 0, column="id"),
    case("unique_values", "id INT, name STRING", ["(1, 'a')", "(2, 'a')"], 1, columns="(id, name)"),
    case("unique_values", "id INT", ["(NULL)", "(NULL)", "1"], 1, columns="(id)"),
    case(
        "unique_combination_of_columns",
        "id INT, ds STRING",
        ["(1, 'a')", "(1, 'b')", "(2, 'a')"],
        0,
        columns="ARRAY(id, ds)",
    ),
    case(
        "unique_combination_of_columns",
        "id INT, ds STRING",
        ["(1, 'a')", "(1, 'a')", "(2, 'a')"],
        1,
        columns="ARRAY(id, ds)",
    ),
    case(
        "accepted_values",
        "name STRING",
        ["('a')", "('b')", "(NULL)", "('c')"],
        1,
        column="name",
        is_in="('a', 'b')",
    ),
    case(
        "not_accepted_values",
        "name STRING",
        ["('a')", "('x')"],
        1,
        column="name",
        is_in="('x', 'y')",
    ),
    # numbers
    case("sequential_values", "id INT", ["1", "2", "3"], 0, column="id"),
    case("sequential_values", "id INT", ["1", "2", "4"], 1, column="id"),
    case("sequential_values", "id INT", ["0", "5", "10"], 0, column="id", interval="5"),
    case(
        "accepted_range",
        "p DOUBLE",
        ["0.0", "50.0", "100.0"],
        0,
        column="p",
        min_v="0",
        max_v="100",
    ),
    case(
        "accepted_range",
        "p DOUBLE",
        ["0.0", "50.0", "100.0"],
        2,
        column="p",
        min_v="0",
        max_v="100",
        inclusive="FALSE",
    ),
    # a string range, as SQLMesh's sushi example writes one for zip codes
    case(
        "accepted_range",
        "zip STRING",
        ["('01234')", "('abcde')"],
        1,
        column="zip",
        min_v="'00000'",
        max_v="'99999'",
    ),
    case(
        "mutually_exclusive_ranges",
        "lo INT, hi INT",
        ["(1, 5)", "(6, 10)"],
        0,
        lower_bound_column="lo",
        upper_bound_column="hi",
    ),
    case(
        "mutually_exclusive_ranges",
        "lo INT, hi INT",
        ["(1, 5)", "(4, 10)"],
        1,
        lower_bound_column="lo",
        upper_bound_column="hi",
    ),
    case(
        "mutually_exclusive_ranges",
        "grp STRING, lo INT, hi INT",
        ["('a', 1, 5)", "('b', 4, 10)"],
        0,
        lower_bound_column="lo",
        upper_bound_column="hi",
        partition_clause="(grp)",
    ),
    # strings
    case("not_empty_string", "name STRING", ["('a')", "('')"], 1, column="name"),
    case("string_length_equal", "zip STRING", ["('12345')", "('1234')"], 1, column="zip", v="5"),
    case(
        "string_length_between",
        "name STRING",
        ["('ab')", "('abcdef')", "('')"],
        2,
        column="name",
        min_v="1",
        max_v="5",
    ),
    case(
        "valid_uuid",
        "u STRING",
        ["('123E4567-E89B-12D3-A456-426614174000')", "('not-a-uuid')", "(NULL)"],
        1,
        column="u",
    ),
    # 'a@bcd' has no dot after the '@': it fails only if the pattern's '\.' reached Spark
    # as an escaped dot, not as "any character".
    case(
        "valid_email",
        "e STRING",
        ["('jim.doe+x@example.co.uk')", "('a@bcd')", "('no at sign')"],
        2,
        column="e",
    ),
    # 'https:// x' fails only if '\s' reached Spark as whitespace, not as the letter 's'.
    case(
        "valid_url",
        "u STRING",
        ["('https://example.com/a?b=c')", "('https:// x')", "('mailto:x@y.z')"],
        2,
        column="u",
    ),
    case("valid_http_method", "m STRING", ["('GET')", "('get')", "('FETCH')"], 2, column="m"),
    case(
        "match_regex_pattern_list",
        "t STRING",
        ["('1 start')", "('end!')", "('neither')"],
        1,
        column="t",
        patterns=r"('^\\d.*', '.*!$')",
    ),
    case(
        "not_match_regex_pattern_list",
        "t STRING",
        ["('!start')", "('end9')", "('fine')"],
        2,
        column="t",
        patterns=r"('^!.*', '.*\\d$')",
    ),
    case(
        "match_like_pattern_list",
        "n STRING",
        ["('jim halpert')", "('pam beesly')", "('dwight')"],
        1,
        column="n",
        patterns="('jim%', 'pam%')",
    ),
    case(
        "not_match_like_pattern_list",
        "n STRING",
        ["('john doe')", "('ann smith')", "('bob')"],
        2,
        column="n",
        patterns="('%doe', '%smith')",
    ),
    # statistics
    case("mean_in_range", "age DOUBLE", ["20.0", "40.0"], 0, column="age", min_v="21", max_v="50"),
    case("mean_in_range", "age DOUBLE", ["60.0", "80.0"], 1, column="age", min_v="21", max_v="50"),
    case("stddev_in_range", "age DOUBLE", ["1.0", "1.0", "1.0"], 1, column="age", min_v="0.5"),
    case("stddev_in_range", "age DOUBLE", ["1.0", "2.0", "3.0"], 0, column="age", max_v="5"),
    case(
        "z_score",
        "age DOUBLE",
        ["1.0"] * 9 + ["100.0"],
        1,
        column="age",
        threshold="2",
    ),
    case("z_score", "age DOUBLE", ["1.0", "2.0", "3.0"], 0, column="age", threshold="3"),
    case(
        "kl_divergence",
        "a STRING, b STRING",
        ["('x', 'x')", "('y', 'y')"],
        0,
        source_column="a",
        target_column="b",
        threshold="0.1",
    ),
    case(
        "kl_divergence",
        "a STRING, b STRING",
        ["('x', 'x')", "('x', 'y')", "('x', 'y')", "('y', 'y')"],
        2,  # p = (.75, .25), q = (.25, .75): each value's term is .5 * ln 3 > .1
        source_column="a",
        target_column="b",
        threshold="0.1",
    ),
    case(
        "chi_square",
        "a STRING, b STRING",
        ["('x', 'p')"] * 10 + ["('y', 'q')"] * 10,
        0,  # a decides b: chi-square 20 > 3.84, dependent as expected
        column_a="a",
        column_b="b",
        critical_value="3.84",
    ),
    case(
        "chi_square",
        "a STRING, b STRING",
        ["('x', 'p')"] * 10 + ["('y', 'q')"] * 10,
        1,
        column_a="a",
        column_b="b",
        critical_value="3.84",
        dependent="FALSE",
    ),
    case(
        "forall",
        "price DOUBLE, name STRING",
        ["(1.0, 'a')", "(0.0, 'b')", "(2.0, '')"],
        2,
        criteria="ARRAY(price > 0, LENGTH(name) > 0)",
    ),
]


def _view(spark: SparkSession, name: str, c: Case) -> None:
    types = ", ".join(c.schema.split(", "))
    if c.rows:
        names = ", ".join(part.split()[0] for part in c.schema.split(", "))
        casts = ", ".join(
            f"CAST({part.split()[0]} AS {part.split()[1]}) AS {part.split()[0]}"
            for part in c.schema.split(", ")
        )
        spark.sql(
            f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT {casts} FROM VALUES "
            f"{', '.join(c.rows)} AS v({names})"
        )
    else:
        spark.createDataFrame([], types).createOrReplaceTempView(name)


@pytest.fixture(autouse=True)
def _drop_views(local_spark: SparkSession) -> Iterator[None]:
    """The worker's Spark session is shared with other modules' tests, which count what
    it holds: the temporary views these tests make go with each test."""
    yield
    for table in local_spark.catalog.listTables():
        if table.isTemporary and table.name.startswith("audited_"):
            local_spark.catalog.dropTempView(table.name)


@pytest.mark.parametrize(
    "c", CASES, ids=[f"{c.audit}-{i}-{c.violations}" for i, c in enumerate(CASES)]
)
def test_a_builtin_audit_finds_the_bad_rows_on_spark(local_spark: SparkSession, c: Case) -> None:
    view = f"audited_{c.audit}"
    _view(local_spark, view, c)
    step: AuditStep = {
        "type": "audit",
        "label": f"audit s.t: {c.audit}",
        "model": "s.t",
        "version": "v1",
        "audit": c.audit,
        "blocking": False,
        "sql": audit_sql(c.audit, c.args, None, view, 0, 0, 0),
    }
    written: list[dict[str, Any]] = []
    result = run_audit(local_spark, step, StepContext(job=cast(Any, {}), emit=written.append))
    assert result["violations"] == c.violations, (step["sql"], result["sample"])
    assert [e["passed"] for e in written if e.get("op") == "save_result"] == [c.violations == 0]
    if c.violations:
        blocking: AuditStep = {**step, "blocking": True}
        with pytest.raises(AuditFailed, match=f"audit {c.audit} on s.t failed"):
            run_audit(local_spark, blocking, StepContext(job=cast(Any, {}), emit=written.append))


def test_a_hostile_column_name_is_a_column_on_spark(local_spark: SparkSession) -> None:
    # A legal (quoted) column name full of quotes: audited as that column, nothing more.
    local_spark.sql(
        "CREATE OR REPLACE TEMP VIEW audited_hostile AS "
        "SELECT * FROM VALUES ('1'), ('1'), (NULL) AS v(`x' OR '1'='1`)"
    )
    for audit, args, violations in [
        ("not_null", {"columns": "(`x' OR '1'='1`)"}, 1),
        ("unique_values", {"columns": "(`x' OR '1'='1`)"}, 1),
        ("accepted_values", {"column": "`x' OR '1'='1`", "is_in": "('1\\' OR \\'1\\'=\\'1')"}, 2),
    ]:
        sql = audit_sql(audit, args, None, "audited_hostile", 0, 0, 0)
        assert local_spark.sql(f"SELECT * FROM ({sql}) AS a").count() == violations, sql


# --- a project using them, applied end to end ----------------------------------------------

NOW = to_ms("2024-01-03")
GOOD_ROWS = """
    SELECT 1 AS id, 'ham' AS name, 10.0 AS price, 'ann@example.com' AS email, DATE '2024-01-01' AS ds
    UNION ALL SELECT 2, 'eel', 20.0, 'not an email', DATE '2024-01-01'
    UNION ALL SELECT 1, 'ham', 10.0, 'ann@example.com', DATE '2024-01-02'
"""
PROJECT = {
    "config.yaml": """
        model_defaults:
          dialect: spark
          start: '2024-01-01'
          cron: '@daily'
        sluice:
          project: audited
    """,
    "models/items.sql": """
        MODEL (
          name builtin_audits.items,
          kind FULL,
          audits (
            unique_combination_of_columns(columns := (id, ds)),
            accepted_range(column := price, min_v := 0, max_v := 100),
            accepted_range(column := id, min_v := 1, inclusive := true),
            not_null(columns := [id, name]),
            valid_email_non_blocking(column := email),
            string_length_between(column := name, min_v := 1, max_v := 10, blocking := false),
            number_of_rows(threshold := 2),
          )
        );
    """
    + GOOD_ROWS,
}


@dataclass
class Project:
    root: Path
    url: str
    spark: SparkSession

    def apply(self) -> workflow.ApplyResult:
        from sluice.core.spark.session import SparkPaths

        project = load_project(self.root, use_cache=False)
        store = open_state(self.url)
        try:
            plan = workflow.plan_environment(project, store, "prod", end=NOW, execution_time=NOW)
            warehouse = self.spark.conf.get("spark.sql.warehouse.dir") or ""
            root = Path(warehouse.removeprefix("file:")).parent
            runner = InProcessRunner(
                project.config.sluice.spark, SparkPaths(root=root, logs=root / "logs")
            )
            return workflow.apply_plan(project, store, plan, runner, url=self.url, now=NOW)
        finally:
            store.close()

    def results(self) -> dict[str, bool]:
        store = open_state(self.url)
        try:
            record = store.get_environment("prod")
            assert record is not None
            return {r.name: r.passed for r in store.get_results(plan_id=record.plan_id)}
        finally:
            store.close()


@pytest.fixture
def audited(tmp_path: Path, local_spark: SparkSession) -> Iterator[Project]:
    root = tmp_path / "audited"
    for rel, text in PROJECT.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    yield Project(root, f"sqlite:///{root / '.sluice' / 'state.db'}", local_spark)


def test_a_project_s_builtin_audits_run_with_its_apply(audited: Project) -> None:
    audited.apply()
    assert audited.results() == {
        "builtin_audits.items:unique_combination_of_columns": True,
        "builtin_audits.items:accepted_range": True,
        "builtin_audits.items:accepted_range#2": True,
        "builtin_audits.items:not_null": True,
        "builtin_audits.items:valid_email": False,  # non-blocking: recorded, the apply went on
        "builtin_audits.items:string_length_between": True,
        "builtin_audits.items:number_of_rows": True,
    }
    assert audited.spark.sql("SELECT COUNT(*) FROM builtin_audits.items").collect()[0][0] == 3

    # A duplicate (id, ds): the blocking audit stops the apply, prod is left as it was.
    items = audited.root / "models" / "items.sql"
    items.write_text(
        items.read_text().replace(
            "DATE '2024-01-02'\n",
            "DATE '2024-01-02'\nUNION ALL SELECT 2, 'eel', 20.0, 'x', DATE '2024-01-01'\n",
        )
    )
    store = open_state(audited.url)
    before = store.get_environment("prod")
    store.close()
    with pytest.raises(ExecutionError, match="unique_combination_of_columns"):
        audited.apply()
    store = open_state(audited.url)
    try:
        assert store.get_environment("prod") == before
    finally:
        store.close()
    assert audited.spark.sql("SELECT COUNT(*) FROM builtin_audits.items").collect()[0][0] == 3
