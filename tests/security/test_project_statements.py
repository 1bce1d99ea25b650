"""config.yaml's before_all / after_all never name a schema Sluice manages, and a plan's
id covers them (issue 40 §3: what an approval covers is what the job runs).

And each statement is allow-listed whole (sluice.core.plan.statements): a pull request's
own build runs them before any approval, and Spark's CREATE can name any data source
(``USING jdbc OPTIONS (url 'jdbc:derby:metastore_db', sessionInitStatement ...)`` ran SQL
on the embedded Hive metastore; ``USING text OPTIONS (path ...)`` read any file). Every
spelling below is refused with config.yaml:line, by the loader, by the check the driver
runs, and a model's table_format / storage_format names a known format only.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sluice.core import jobs
from sluice.core.config import ModelDefaults, parse_config
from sluice.core.errors import ConfigError, ModelError, ProjectErrors, SluiceError
from sluice.core.model.parse import parse_model
from sluice.core.model.properties import table_layout
from sluice.core.plan import statements
from sluice.core.plan.build import PlanRequest, build_plan
from sluice.core.plan.plan import Plan
from sluice.core.snapshot.fingerprint import fingerprint_models
from sluice.core.spark.render import build_steps
from sluice.core.spark.steps.context import StepContext
from sluice.core.spark.steps.sql import run_sql
from sluice.core.yamlio import parse_yaml
from tests.core.helpers import BASIC, load

DAY = 86_400_000


def config_error(statements: list[str], key: str = "before_all") -> ConfigError:
    text = (
        "model_defaults:\n  dialect: spark\n"
        + f"{key}:\n"
        + "".join(f"  - {s}\n" for s in statements)
    )
    with pytest.raises(ConfigError) as caught:
        parse_config(parse_yaml(text, "config.yaml"))
    return caught.value


@pytest.mark.parametrize(
    ("sql", "schema"),
    [
        (
            "CREATE TABLE IF NOT EXISTS sluice__shop.shop__orders__0123456789ab (id INT)",
            "sluice__shop",
        ),
        ("CREATE SCHEMA IF NOT EXISTS sluice__shop", "sluice__shop"),
        ("CREATE VIEW IF NOT EXISTS shop__pr_7.orders AS SELECT 1 AS id", "shop__pr_7"),
        ("CREATE VIEW IF NOT EXISTS raw.v AS SELECT * FROM sluice__shop.t", "sluice__shop"),
        ("CREATE TABLE IF NOT EXISTS spark_catalog.SLUICE__Shop.t (id INT)", "sluice__shop"),
    ],
)
@pytest.mark.parametrize("key", ["before_all", "after_all"])
def test_a_statement_naming_a_sluice_schema_is_refused_with_file_line(
    sql: str, schema: str, key: str
) -> None:
    error = config_error(["CREATE SCHEMA IF NOT EXISTS raw", sql], key)
    assert (error.path, error.line) == ("config.yaml", 5)
    assert error.message.startswith(f"{key} statement 2 names the schema '{schema}'")
    assert error.hint is not None and "sluice__*" in error.hint


def test_other_schemas_are_the_projects_own() -> None:
    text = "before_all:\n  - CREATE SCHEMA IF NOT EXISTS raw\n  - CREATE TABLE IF NOT EXISTS raw.t (id INT)\n"
    assert parse_config(parse_yaml(text, "config.yaml")).before_all[1].startswith("CREATE TABLE")


def _plan(before: tuple[str, ...] = (), after: tuple[str, ...] = ()) -> Plan:
    text = "MODEL (name shop.orders, kind FULL);\nSELECT 1 AS id\n"
    model = parse_model(text, "models/orders.sql", ModelDefaults(), {})
    assert model is not None
    models = {model.name: model}
    return build_plan(
        PlanRequest(
            environment="prod",
            models=models,
            fingerprints=fingerprint_models(models, {}),
            base={},
            base_plan_id=None,
            end=19_800 * DAY,
            execution_time=19_800 * DAY,
            before_all=before,
            after_all=after,
        )
    )


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE TABLE IF NOT EXISTS shop.orders (id INT)",  # where prod's view goes
        "CREATE VIEW IF NOT EXISTS raw.v AS SELECT * FROM shop.orders",
    ],
)
def test_a_statement_naming_the_schema_of_a_models_views_is_refused_in_the_job(sql: str) -> None:
    with pytest.raises(ConfigError) as caught:
        jobs.apply_job(
            _plan(),
            audits={},
            project_dir="proj",
            table_format="parquet",
            previous_versions=None,
            now=1,
            prod_schemas=frozenset(),
            after_all=["CREATE SCHEMA IF NOT EXISTS raw", sql],
        )
    error = caught.value
    assert error.path == "proj/config.yaml"
    assert "after_all statement 2" in error.message
    assert "names the schema 'shop', the schema of prod's views of its models" in error.message


def test_a_plans_id_covers_the_projects_statements() -> None:
    plain = _plan()
    assert _plan().plan_id == plain.plan_id
    before = _plan(before=("CREATE SCHEMA IF NOT EXISTS raw",))
    after = _plan(after=("CREATE SCHEMA IF NOT EXISTS raw",))
    assert len({plain.plan_id, before.plan_id, after.plan_id}) == 3
    # The models' content is the same: only the id (what the job runs) moves.
    assert before.content_hash == plain.content_hash


# --- the allow-list --------------------------------------------------------------------------

_JDBC = "OPTIONS (url 'jdbc:derby:metastore_db', dbtable 'APP.DBS')"
_INIT = (
    "OPTIONS (url 'jdbc:derby:metastore_db', dbtable 'APP.DBS', sessionInitStatement "
    "\"UPDATE APP.DBS SET OWNER_NAME = 'pwned-by-pr' WHERE NAME = 'default'\")"
)

HOSTILE: list[tuple[str, str]] = [
    # The red team's statement, and every spelling of a JDBC (or any other) provider.
    (f"CREATE TABLE IF NOT EXISTS raw.m USING jdbc {_INIT}", "USING JDBC"),
    (f"create table if not exists raw.m using jdbc {_JDBC.lower()}", "USING JDBC"),
    (f"CREATE TABLE IF NOT EXISTS raw.m USING JDBC {_JDBC}", "USING JDBC"),
    (f"CREATE TABLE IF NOT EXISTS raw.m USING `jdbc` {_JDBC}", "USING JDBC"),
    (f"CREATE TABLE IF NOT EXISTS raw.m USING `JdBc` {_JDBC}", "USING JDBC"),
    (f"CREATE TABLE IF NOT EXISTS raw.m USING org.apache.spark.sql.jdbc {_JDBC}", ""),
    ("CREATE TABLE IF NOT EXISTS raw.m (a INT) USING org.apache.spark.sql.jdbc", ""),
    ("CREATE TABLE IF NOT EXISTS raw.m (a INT) USING `org.apache.spark.sql.jdbc`", "ORG.APACHE"),
    (
        "CREATE TABLE IF NOT EXISTS raw.m USING "
        "`org.apache.spark.sql.execution.datasources.jdbc.JdbcRelationProvider`",
        "ORG.APACHE.SPARK",
    ),
    (f"CREATE/**/TABLE/**/IF NOT EXISTS raw.m USING/* c */jdbc {_JDBC}", "USING JDBC"),
    (f"CREATE TABLE IF NOT EXISTS raw.m -- a comment\nUSING jdbc\n{_JDBC}", "USING JDBC"),
    (f"CREATE TABLE IF NOT EXISTS raw.m (a INT) USING jdbc {_JDBC}", "USING JDBC"),
    (f"CREATE TABLE IF NOT EXISTS raw.m USING jdbc {_JDBC} AS SELECT 1 AS a", "USING JDBC"),
    # Files by path through a data source.
    ("CREATE TABLE IF NOT EXISTS raw.m USING text OPTIONS (path '/etc/passwd')", "USING TEXT"),
    ("CREATE TABLE IF NOT EXISTS raw.m USING csv OPTIONS ('path' = '/etc/passwd')", "USING CSV"),
    ("CREATE TABLE IF NOT EXISTS raw.m USING binaryFile OPTIONS (path '/')", "USING BINARYFILE"),
    ("CREATE TABLE IF NOT EXISTS raw.m (a STRING) USING text", "USING TEXT"),
    ("CREATE TABLE IF NOT EXISTS raw.m (a STRING) USING hive", "USING HIVE"),
    ("CREATE TABLE IF NOT EXISTS raw.m (a INT) USING parquet OPTIONS (path '/data')", "OPTIONS"),
    ("CREATE TABLE IF NOT EXISTS raw.m (a INT) USING `parquet` OPTIONS (path '/d')", "OPTIONS"),
    ("CREATE TABLE IF NOT EXISTS raw.m (a INT) OPTIONS (path '/data')", "OPTIONS"),
    (
        "CREATE TABLE IF NOT EXISTS raw.m USING delta OPTIONS (path '/d') AS SELECT 1 AS a",
        "OPTIONS",
    ),
    ("CREATE TABLE IF NOT EXISTS raw.m (a INT) USING parquet LOCATION '/tmp/x'", "LOCATION"),
    ("CREATE TABLE IF NOT EXISTS raw.m LOCATION '/tmp/x' AS SELECT 1 AS a", "LOCATION"),
    ("CREATE SCHEMA IF NOT EXISTS raw LOCATION '/etc'", "LOCATION"),
    ("CREATE DATABASE IF NOT EXISTS raw LOCATION '/etc'", "LOCATION"),
    ("CREATE SCHEMA IF NOT EXISTS raw WITH DBPROPERTIES ('location' = '/x')", ""),
    # Table properties that point at files, providers or classes, or forge Sluice's mark.
    ("CREATE TABLE IF NOT EXISTS raw.m (a INT) TBLPROPERTIES ('path' = '/etc')", "'path'"),
    ("CREATE TABLE IF NOT EXISTS raw.m (a INT) TBLPROPERTIES (path = '/etc')", "'path'"),
    ("CREATE TABLE IF NOT EXISTS raw.m (a INT) TBLPROPERTIES ('location' = '/x')", "location"),
    ("CREATE TABLE IF NOT EXISTS raw.m (a INT) TBLPROPERTIES ('provider' = 'jdbc')", "provider"),
    (
        "CREATE TABLE IF NOT EXISTS raw.m (a INT) TBLPROPERTIES ('sluice.created_by' = 'x')",
        "sluice.created_by",
    ),
    (
        "CREATE TABLE IF NOT EXISTS raw.m (a INT) TBLPROPERTIES ('SLUICE.Created_By' = 'x')",
        "SLUICE",
    ),
    (
        "CREATE TABLE IF NOT EXISTS raw.m (a INT) TBLPROPERTIES "
        "('spark.sql.sources.provider' = 'jdbc')",
        "spark.sql.sources.provider",
    ),
    (
        "CREATE TABLE IF NOT EXISTS raw.m (a INT) TBLPROPERTIES "
        "('storage_handler' = 'org.apache.hive.storage.jdbc.JdbcStorageHandler')",
        "storage_handler",
    ),
    (
        "CREATE TABLE IF NOT EXISTS raw.m (a INT) TBLPROPERTIES "
        "('hive.sql.jdbc.url' = 'jdbc:derby:metastore_db')",
        "hive.sql.jdbc.url",
    ),
    ("CREATE TABLE IF NOT EXISTS raw.m (a INT) TBLPROPERTIES ('note' = 'jdbc:derby:x')", "JDBC"),
    (
        "CREATE TABLE IF NOT EXISTS raw.m (a INT) USING iceberg TBLPROPERTIES "
        "('write.data.path' = '/etc')",
        "write.data.path",
    ),
    (
        "CREATE TABLE IF NOT EXISTS raw.m (a INT) USING iceberg TBLPROPERTIES "
        "('write.location-provider.impl' = 'x.Y')",
        "write.location-provider.impl",
    ),
    ("CREATE TABLE IF NOT EXISTS raw.m (a INT) TBLPROPERTIES ('a b' = 'c')", "plain key"),
    ("CREATE TABLE IF NOT EXISTS raw.m (a INT) COMMENT '${env:HOME}'", "${env:HOME}"),
    ("CREATE TABLE IF NOT EXISTS raw.m (a INT) -- ${system:user.dir}", "${system:user.dir}"),
    ("CREATE TABLE IF NOT EXISTS raw.m (a INT) TBLPROPERTIES ('k' = '${env:X}')", "${env:X}"),
    # Hive's formats, serdes and other CREATE forms.
    ("CREATE TABLE IF NOT EXISTS raw.m (a INT) STORED AS TEXTFILE", "STORED AS"),
    (
        "CREATE TABLE IF NOT EXISTS raw.m (a INT) STORED AS INPUTFORMAT 'x.In' OUTPUTFORMAT 'x.Out'",
        "INPUTFORMAT",
    ),
    (
        "CREATE TABLE IF NOT EXISTS raw.m (a INT) "
        "ROW FORMAT SERDE 'org.apache.hadoop.hive.serde2.OpenCSVSerde'",
        "SERDE",
    ),
    ("CREATE TABLE IF NOT EXISTS raw.m (a INT) ROW FORMAT DELIMITED", "ROW FORMAT"),
    ("CREATE TABLE IF NOT EXISTS raw.m (a INT) CLUSTERED BY (a) INTO 2 BUCKETS", "CLUSTERED"),
    ("CREATE TABLE IF NOT EXISTS raw.m LIKE raw.x", "LIKE"),
    ("CREATE TABLE IF NOT EXISTS raw.m LIKE raw.x USING jdbc", ""),
    ("CREATE TABLE IF NOT EXISTS raw.m SHALLOW CLONE raw.x", "CLONE"),
    ("CREATE EXTERNAL TABLE IF NOT EXISTS raw.m (a INT)", "EXTERNAL"),
    ("CREATE EXTERNAL TABLE IF NOT EXISTS raw.m (a INT) LOCATION '/etc'", "EXTERNAL"),
    ("CREATE TEMPORARY VIEW v USING csv OPTIONS (path '/etc/passwd')", ""),
    (f"CREATE TEMPORARY VIEW IF NOT EXISTS v USING jdbc {_JDBC}", ""),
    (f"CREATE GLOBAL TEMPORARY VIEW v USING jdbc {_JDBC}", ""),
    (f"CREATE TEMPORARY TABLE IF NOT EXISTS t USING jdbc {_JDBC}", ""),
    ("CREATE FUNCTION IF NOT EXISTS f AS 'x.Y' USING JAR '/tmp/x.jar'", "CREATE FUNCTION"),
    ("CREATE TEMPORARY FUNCTION f AS 'x.Y'", ""),
    ("ADD JAR /tmp/x.jar", ""),
    ("ADD FILE /etc/passwd", ""),
    ("CACHE TABLE c OPTIONS ('storageLevel' 'DISK_ONLY') AS SELECT * FROM raw.x", ""),
    ("CACHE LAZY TABLE raw.x", ""),
    ("SET spark.sql.runSQLOnFiles = true", ""),
    ("CREATE SCHEMA IF NOT EXISTS a; CREATE TABLE IF NOT EXISTS a.m USING jdbc " + _JDBC, "2"),
    ("CREATE SCHEMA IF NOT EXISTS a;\nADD JAR /tmp/x.jar", ""),
    # Columns and names: only types, NOT NULL and COMMENT; plain names.
    (
        "CREATE TABLE IF NOT EXISTS raw.m (a INT DEFAULT reflect('java.lang.System', 'exit', 1))",
        "",
    ),
    ("CREATE TABLE IF NOT EXISTS raw.m (a INT GENERATED ALWAYS AS (1))", "GENERATED"),
    ("CREATE TABLE IF NOT EXISTS `raw`.`m/../x` (a INT)", "plain name"),
    ("CREATE TABLE IF NOT EXISTS raw.m (a INT) PARTITIONED BY (years(a))", "partitions by"),
    # What a CTAS or a view reads.
    ("CREATE VIEW IF NOT EXISTS raw.v AS SELECT * FROM csv.`/etc/passwd`", "/etc/passwd"),
    ("CREATE TABLE IF NOT EXISTS raw.m AS SELECT * FROM text.`/etc/passwd`", "/etc/passwd"),
    ("CREATE VIEW IF NOT EXISTS raw.v AS SELECT * FROM `csv`.`/etc/passwd`", "/etc/passwd"),
    (
        "CREATE VIEW IF NOT EXISTS raw.v AS SELECT * FROM "
        "`org.apache.spark.sql.execution.datasources.csv.CSVFileFormat`.`config.yaml`",
        "not a plain table name",
    ),
    ("CREATE VIEW IF NOT EXISTS raw.v AS SELECT * FROM text.notes", "relative path"),
    ("CREATE VIEW IF NOT EXISTS raw.v AS SELECT * FROM IDENTIFIER('raw.x')", "IDENTIFIER"),
    (
        "CREATE VIEW IF NOT EXISTS raw.v AS SELECT * FROM IDENTIFIER('csv.`/etc/passwd`')",
        "IDENTIFIER",
    ),
    (
        "CREATE VIEW IF NOT EXISTS raw.v AS SELECT java_method('java.lang.System', 'exit', 1) AS x",
        "java_method",
    ),
    (
        "CREATE TABLE IF NOT EXISTS raw.m AS "
        "WITH f AS (SELECT * FROM json.`/etc/x`) SELECT * FROM f",
        "/etc/x",
    ),
]


def _config(statement: str, key: str = "before_all", dialect: str = "spark") -> str:
    other = "after_all" if key == "before_all" else "before_all"
    return (
        f"model_defaults:\n  dialect: {dialect}\n  start: '2024-01-01'\n"
        f"{other}:\n  - CREATE SCHEMA IF NOT EXISTS ok\n"
        f"{key}:\n  - CREATE SCHEMA IF NOT EXISTS raw\n  - {json.dumps(statement)}\n"
    )


def load_error(root: Path, config: str) -> SluiceError:
    with pytest.raises(SluiceError) as caught:
        load(root, {**BASIC, "config.yaml": config})
    error = caught.value
    assert not isinstance(error, ProjectErrors), str(error)
    return error


@pytest.mark.parametrize("key", ["before_all", "after_all"])
@pytest.mark.parametrize(("sql", "fragment"), HOSTILE)
def test_every_spelling_outside_the_allow_list_is_refused_with_file_line(
    tmp_path: Path, sql: str, fragment: str, key: str
) -> None:
    error = load_error(tmp_path, _config(sql, key))
    assert (error.path, error.line) == (str(tmp_path / "config.yaml"), 8), str(error)
    assert error.message.startswith(f"{key} statement 2"), error.message
    assert fragment in error.message, error.message
    assert error.hint


@pytest.mark.parametrize(("sql", "fragment"), HOSTILE)
def test_the_check_the_driver_runs_refuses_them_too(sql: str, fragment: str) -> None:
    if ".`/" in sql and "OPTIONS" not in sql and "IDENTIFIER" not in sql:
        # format.`path`: the loader checks it against sluice.allowed_paths (which the
        # driver does not know); it is no data source of the project's choosing.
        return
    assert statements.check(sql) is not None, sql


def test_the_red_teams_project_is_refused_at_its_line(tmp_path: Path) -> None:
    config = (
        "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n  cron: '@daily'\n"
        "before_all:\n"
        "  - CREATE SCHEMA IF NOT EXISTS raw\n"
        "  - >-\n"
        "    CREATE TABLE IF NOT EXISTS raw.m USING jdbc OPTIONS (url 'jdbc:derby:metastore_db',"
        " dbtable 'APP.DBS',\n"
        "    sessionInitStatement \"UPDATE APP.DBS SET OWNER_NAME = 'pwned-by-pr' WHERE NAME ="
        " 'default'\")\n"
        '  - "CREATE TABLE IF NOT EXISTS raw.m2 AS SELECT NAME, OWNER_NAME FROM raw.m"\n'
    )
    error = load_error(tmp_path, config)
    assert (error.path, error.line) == (str(tmp_path / "config.yaml"), 7)
    assert error.message.startswith("before_all statement 2: uses USING JDBC"), error.message


def test_a_statement_of_another_dialect_is_held_to_the_same_list(tmp_path: Path) -> None:
    sql = "CREATE TABLE IF NOT EXISTS raw.m WITH (format = 'jdbc') AS SELECT 1 AS a"
    error = load_error(tmp_path, _config(sql, dialect="trino"))
    assert error.line == 8 and "USING JDBC" in error.message, error.message


LEGITIMATE: list[tuple[str, str]] = [
    ("CREATE SCHEMA IF NOT EXISTS audit_log", "CREATE SCHEMA IF NOT EXISTS audit_log"),
    (
        "CREATE DATABASE IF NOT EXISTS spark_catalog.ops",
        "CREATE DATABASE IF NOT EXISTS spark_catalog.ops",
    ),
    (
        "CREATE TABLE IF NOT EXISTS ops.analytics (table_name VARCHAR, eval_time VARCHAR)",
        "CREATE TABLE IF NOT EXISTS ops.analytics (table_name STRING, eval_time STRING)",
    ),
    (
        "CREATE TABLE IF NOT EXISTS raw.t (id INT NOT NULL COMMENT 'key', ds STRING) USING parquet "
        "PARTITIONED BY (ds) COMMENT 'raw rows' TBLPROPERTIES ('team' = 'web', 'retention_days' = 7)",
        "CREATE TABLE IF NOT EXISTS raw.t (id INT NOT NULL COMMENT 'key', ds STRING) USING PARQUET "
        "PARTITIONED BY (ds) COMMENT 'raw rows' TBLPROPERTIES ('team'='web', 'retention_days'=7)",
    ),
    (
        "CREATE TABLE IF NOT EXISTS raw.h (id INT) PARTITIONED BY (ds STRING)",
        "CREATE TABLE IF NOT EXISTS raw.h (id INT, ds STRING) PARTITIONED BY (ds)",
    ),
    (
        "CREATE TABLE IF NOT EXISTS raw.i (id INT) USING iceberg TBLPROPERTIES "
        "('format-version' = '2', 'write.format.default' = 'orc')",
        "CREATE TABLE IF NOT EXISTS raw.i (id INT) USING ICEBERG TBLPROPERTIES "
        "('format-version'='2', 'write.format.default'='orc')",
    ),
    (
        "create table if not exists raw.d using DELTA as select 1 as id",
        "CREATE TABLE IF NOT EXISTS raw.d USING DELTA AS SELECT 1 AS id",
    ),
    (
        "CREATE TABLE IF NOT EXISTS raw.o USING orc AS WITH c AS (SELECT 1 AS id) SELECT * FROM c",
        "CREATE TABLE IF NOT EXISTS raw.o USING ORC AS WITH c AS (SELECT 1 AS id) SELECT * FROM c",
    ),
    (
        "CREATE VIEW IF NOT EXISTS audit_log.latest (x COMMENT 'one', y) COMMENT 'v' "
        "AS SELECT 1 AS x, 2 AS y /* a comment */",
        "CREATE VIEW IF NOT EXISTS audit_log.latest (x COMMENT 'one', y) COMMENT 'v' "
        "AS SELECT 1 AS x, 2 AS y",
    ),
    (
        "CREATE VIEW IF NOT EXISTS ops.latest_eval AS SELECT MAX(eval_time) AS eval_time "
        "FROM ops.analytics AS a JOIN raw.t AS t ON a.table_name = t.ds",
        "CREATE VIEW IF NOT EXISTS ops.latest_eval AS SELECT MAX(eval_time) AS eval_time "
        "FROM ops.analytics AS a JOIN raw.t AS t ON a.table_name = t.ds",
    ),
]


@pytest.mark.parametrize(("sql", "spark_sql"), LEGITIMATE)
def test_the_statements_the_readme_documents_still_load(
    tmp_path: Path, sql: str, spark_sql: str
) -> None:
    project = load(
        tmp_path,
        {**BASIC, "config.yaml": _config(sql, dialect="duckdb" if "VARCHAR" in sql else "spark")},
    )
    assert project.before_all == ("CREATE SCHEMA IF NOT EXISTS raw", spark_sql)
    assert statements.check(spark_sql) is None


def test_a_path_sluice_allowed_paths_allow_may_still_be_read(tmp_path: Path) -> None:
    sql = "CREATE VIEW IF NOT EXISTS raw.v AS SELECT * FROM parquet.`/data/shared/x`"
    config = _config(sql) + "sluice:\n  allowed_paths: ['/data/shared/*']\n"
    project = load(tmp_path, {**BASIC, "config.yaml": config})
    assert project.before_all[1] == sql


# --- the driver checks the project's statements again -----------------------------------------


class _Spark:
    def __init__(self) -> None:
        self.ran: list[str] = []

    def sql(self, statement: str) -> Any:
        self.ran.append(statement)
        return self

    def collect(self) -> list[Any]:
        return []


_CTX = StepContext(job={"job_id": "t", "kind": "apply", "steps": []}, emit=lambda _e: None)


@pytest.mark.parametrize("step_id", sorted(statements.STEP_IDS))
def test_the_sql_step_refuses_a_project_statement_it_would_not_load(step_id: str) -> None:
    spark = _Spark()
    hostile = f"CREATE TABLE IF NOT EXISTS raw.m USING jdbc {_INIT}"
    step: Any = {
        "type": "sql",
        "id": step_id,
        "label": "x",
        "statements": ["CREATE SCHEMA IF NOT EXISTS raw", hostile],
    }
    with pytest.raises(ValueError, match=f"{step_id} statement 2 is not one Sluice runs"):
        run_sql(spark, step, _CTX)  # type: ignore[arg-type]
    assert spark.ran == []  # none runs, not even the first
    step["statements"] = ["CREATE SCHEMA IF NOT EXISTS raw"]
    run_sql(spark, step, _CTX)  # type: ignore[arg-type]
    assert spark.ran == ["CREATE SCHEMA IF NOT EXISTS raw"]


def test_the_sql_steps_sluice_makes_itself_are_not_project_statements() -> None:
    assert statements.STEP_IDS == jobs.ALL_STEPS
    spark = _Spark()
    step: Any = {"type": "sql", "label": "x", "statements": ["SELECT 1"]}
    run_sql(spark, step, _CTX)  # type: ignore[arg-type]
    assert spark.ran == ["SELECT 1"]


# --- a model's table_format / storage_format -----------------------------------------------------


def _model(props: str) -> Any:
    text = f"MODEL (\n  name shop.events,\n  kind FULL,\n  {props}\n);\nSELECT 1 AS id\n"
    return parse_model(text, "models/events.sql", ModelDefaults(), {})


@pytest.mark.parametrize(
    "props",
    [
        "table_format jdbc",
        "table_format JDBC",
        "table_format 'jdbc'",
        'table_format "jdbc"',
        "storage_format text",
        "storage_format csv",
        "storage_format binaryFile",
        "table_format org.apache.spark.sql.jdbc",
        "table_format 'org.apache.spark.sql.jdbc'",
        "storage_format 'com.example.Evil'",
        "table_format iceberg,\n  storage_format jdbc",
    ],
)
def test_a_models_format_is_a_known_one(props: str) -> None:
    with pytest.raises(ModelError) as caught:
        _model(props)
    error = caught.value
    assert error.path == "models/events.sql" and error.line in (4, 5), str(error)
    assert "format" in error.message and error.hint and "parquet" in error.hint


@pytest.mark.parametrize("fmt", ["parquet", "orc", "delta", "iceberg", "hive", "PARQUET"])
def test_the_known_formats_load(fmt: str) -> None:
    assert _model(f"table_format {fmt}").table_format == fmt.lower()


@pytest.mark.parametrize(
    ("table_format", "storage_format", "default"),
    [("jdbc", None, "parquet"), (None, "text", "parquet"), (None, None, "org.x.Source")],
)
def test_a_format_read_any_other_way_is_refused_where_the_table_is_made(
    table_format: str | None, storage_format: str | None, default: str
) -> None:
    """A Python model's decorator, a cache or the service's setting: table_layout (which
    every build step's USING comes from) refuses it, naming the model's file and line."""
    model = replace(
        _model("owner x"),
        table_format=table_format,
        storage_format=storage_format,
    )
    with pytest.raises(ModelError) as caught:
        table_layout(model, default)
    assert caught.value.path == "models/events.sql" and "not a format" in caught.value.message
    models = {model.name: model}
    plan = build_plan(
        PlanRequest(
            environment="prod",
            models=models,
            fingerprints=fingerprint_models(models, {}),
            base={},
            base_plan_id=None,
            end=19_800 * DAY,
            execution_time=19_800 * DAY,
        )
    )
    with pytest.raises(ModelError):
        build_steps(plan, {}, "proj", default)
