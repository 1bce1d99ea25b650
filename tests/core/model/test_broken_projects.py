"""A catalogue of broken projects: each broken in one way, and exactly what Sluice says.

Every case is a small project written to ``tmp_path``: a valid base (config.yaml and the
models s.a and s.b) with files added, replaced (``None`` removes one). Each row names the
error that loading (or, for the last rows, planning) must raise, the ``file:line`` it must
point at, its message word for word, and its hint: every error a user can cause says what
is wrong, where, and how to fix it. ``{root}`` in a message stands for the project folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from sluice.core.errors import (
    ConfigError,
    GraphError,
    ModelError,
    PlanError,
    ProjectErrors,
    SluiceError,
)
from sluice.core.model.loader import load_project
from sluice.core.plan.build import PlanRequest, build_plan
from sluice.core.snapshot.fingerprint import fingerprint_models
from sluice.core.timeutil import to_ms

BASE = {
    "config.yaml": "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n",
    "models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT 1 AS id, 'x' AS name\n",
    "models/b.sql": "MODEL (name s.b, kind FULL, grain id);\nSELECT id, name FROM s.a\n",
}

README_VALUES = "see the README's configuration table for the accepted values"
ALLOW_A_PATH = (
    "read data through a model, a seed or a table declared in external_models.yaml; "
    "to allow this path, add a glob that matches it to `allowed_paths` under `sluice:` "
    "in config.yaml"
)
ONE_QUERY = (
    "a model or audit is one SELECT query; load files with a SEED model, or declare the "
    "table in external_models.yaml"
)
NO_JAVA = "compute the value with SQL functions; calling Java cannot be allowed"


def lines(*text: str) -> str:
    """A file of these lines (so that a row's line numbers can be counted)."""
    return "\n".join(text) + "\n"


@dataclass(frozen=True)
class Broken:
    """One broken project and the error it must get."""

    id: str
    files: dict[str, str | bytes | None]
    error: type[SluiceError]
    where: str  # file:line, the file relative to the project
    message: str
    hint: str


CASES = [
    # --- config.yaml ---
    Broken(
        "config_invalid_yaml",
        {"config.yaml": lines("model_defaults:", "  dialect: spark", "   start: x")},
        ConfigError,
        "config.yaml:3",
        "invalid YAML: mapping values are not allowed here",
        "check the indentation and quoting near this line",
    ),
    Broken(
        "config_duplicate_key",
        {"config.yaml": lines("model_defaults: {}", "model_defaults: {}")},
        ConfigError,
        "config.yaml:2",
        "duplicate key 'model_defaults'",
        "remove one of the two entries",
    ),
    Broken(
        "config_not_a_mapping",
        {"config.yaml": "- model_defaults\n"},
        ConfigError,
        "config.yaml:1",
        "config.yaml must be a mapping of sections",
        "write `section:` lines such as `model_defaults:` and `variables:`, each with its settings indented under it",
    ),
    Broken(
        "config_unknown_section",
        {"config.yaml": lines("model_defaults: {}", "model_defualts: {}")},
        ConfigError,
        "config.yaml:2",
        "unknown section 'model_defualts'",
        "did you mean 'model_defaults'?",
    ),
    Broken(
        "config_unknown_setting",
        {"config.yaml": lines("model_defaults:", "  cronn: '@daily'")},
        ConfigError,
        "config.yaml:2",
        "unknown setting 'model_defaults.cronn'",
        "did you mean 'cron'?",
    ),
    Broken(
        "config_wrong_type",
        {"config.yaml": lines("sluice:", "  pr:", "    diff_limit: many")},
        ConfigError,
        "config.yaml:3",
        "invalid setting 'sluice.pr.diff_limit': expected a whole number, got 'many'",
        README_VALUES,
    ),
    Broken(
        "config_bad_choice",
        {"config.yaml": lines("sluice:", "  spark:", "    deploy_mode: sideways")},
        ConfigError,
        "config.yaml:3",
        "invalid setting 'sluice.spark.deploy_mode': expected 'client' or 'cluster', got 'sideways'",
        README_VALUES,
    ),
    Broken(
        "config_bad_project_name",
        {"config.yaml": lines("sluice:", "  project: Jaffle-Shop")},
        ConfigError,
        "config.yaml:2",
        "invalid setting 'sluice.project': expected a name of lower-case letters, digits and underscores, starting with a letter, got 'Jaffle-Shop'",
        README_VALUES,
    ),
    Broken(
        "config_below_minimum",
        {"config.yaml": lines("sluice:", "  environment_ttl_days: -1")},
        ConfigError,
        "config.yaml:2",
        "invalid setting 'sluice.environment_ttl_days': expected a number of at least 0, got -1",
        README_VALUES,
    ),
    Broken(
        "config_bad_date",
        {"config.yaml": lines("model_defaults:", "  start: someday")},
        ConfigError,
        "config.yaml:2",
        "invalid setting 'model_defaults.start': 'someday' is not a date; use YYYY-MM-DD, "
        "YYYY-MM-DD HH:MM:SS or a relative time such as '1 week ago', '3 days ago' or "
        "'yesterday'",
        README_VALUES,
    ),
    Broken(
        "config_bad_dialect",
        {"config.yaml": lines("model_defaults:", "  dialect: sparkk")},
        ConfigError,
        "config.yaml:2",
        "invalid setting 'model_defaults.dialect': unknown SQL dialect 'sparkk'; use a sqlglot dialect such as spark, duckdb, bigquery, snowflake, postgres",
        README_VALUES,
    ),
    Broken(
        "config_bad_cron",
        {"config.yaml": lines("model_defaults:", "  cron: every day")},
        ConfigError,
        "config.yaml:2",
        "invalid setting 'model_defaults.cron': invalid cron 'every day'; use @hourly, @daily, @weekly, @monthly or a 5-field cron like '0 6 * * *'",
        README_VALUES,
    ),
    Broken(
        "config_allowed_paths_string",
        {"config.yaml": lines("sluice:", "  allowed_paths: /data/*")},
        ConfigError,
        "config.yaml:2",
        "invalid setting 'sluice.allowed_paths': expected a list, got '/data/*'",
        README_VALUES,
    ),
    Broken(
        "config_allowed_paths_dotdot",
        {"config.yaml": lines("sluice:", "  allowed_paths:", "    - /data/../etc/*")},
        ConfigError,
        "config.yaml:2",
        "invalid setting 'sluice.allowed_paths': '/data/../etc/*' has a '..' segment; write the path it means",
        README_VALUES,
    ),
    Broken(
        "config_py",
        {"config.yaml": None, "config.py": "config = {}\n"},
        ConfigError,
        "config.py:1",
        "running config.py: 'config' in config.py is a dict, not a Config "
        "(sqlmesh.core.config.Config), which SQLMesh requires",
        "config.py runs as SQLMesh runs it (in Sluice's sandboxed process: the project's "
        "files only, no network, no environment variables, with stand-ins for "
        "sqlmesh.core.config's classes): fix the code, or write the settings in config.yaml",
    ),
    # --- MODEL header and query ---
    Broken(
        "model_no_header",
        {"models/c.sql": "SELECT 1 AS id\n"},
        ModelError,
        "models/c.sql:1",
        "not a model: the file must start with a MODEL (...) header",
        "start it with MODEL (name schema.table, kind FULL);",
    ),
    Broken(
        "model_no_paren",
        {"models/c.sql": lines("MODEL name s.c;", "SELECT 1 AS id")},
        ModelError,
        "models/c.sql:1",
        "expected '(' after MODEL",
        "write MODEL (name ..., ...); with the properties in parentheses",
    ),
    Broken(
        "model_header_unclosed",
        {"models/c.sql": lines("MODEL (", "  name s.c,", "  kind FULL", "SELECT 1 AS id")},
        ModelError,
        "models/c.sql:1",
        "the MODEL header is never closed",
        "add the missing ')'",
    ),
    Broken(
        "model_missing_comma",
        {"models/c.sql": lines("MODEL (", "  name s.c", "  kind FULL", ");", "SELECT 1 AS id")},
        ModelError,
        "models/c.sql:3",
        "expected ',' or ')' but found 'kind'",
        "separate the entries with commas",
    ),
    Broken(
        "model_unknown_property",
        {"models/c.sql": lines("MODEL (", "  name s.c,", "  kidn FULL", ");", "SELECT 1 AS id")},
        ModelError,
        "models/c.sql:3",
        "unknown model property 'kidn'",
        "did you mean 'kind'?",
    ),
    Broken(
        "model_property_twice",
        {
            "models/c.sql": lines(
                "MODEL (", "  name s.c,", "  kind FULL,", "  kind VIEW", ");", "SELECT 1 AS id"
            )
        },
        ModelError,
        "models/c.sql:4",
        "property 'kind' is set twice",
        "keep one",
    ),
    Broken(
        "model_no_name",
        {"models/c.sql": lines("MODEL (", "  kind FULL", ");", "SELECT 1 AS id")},
        ModelError,
        "models/c.sql:1",
        "the model has no name",
        "add `name schema.table` to MODEL (...), or set `model_naming: {infer_names: true}` "
        "in config.yaml to name it after its path",
    ),
    Broken(
        "model_bad_name",
        {"models/c.sql": lines("MODEL (", "  name w.cat.s.c", ");", "SELECT 1 AS id")},
        ModelError,
        "models/c.sql:2",
        "model name 'w.cat.s.c' must be schema.table or catalog.schema.table (letters, "
        "digits, underscores)",
        "for example `name jaffle.orders`",
    ),
    Broken(
        "model_unknown_catalog",
        {"models/c.sql": lines("MODEL (", "  name cat.s.c", ");", "SELECT 1 AS id")},
        ModelError,
        "models/c.sql:2",
        "model name 'cat.s.c' names the catalog 'cat', which Sluice does not know",
        "known catalogs: spark_catalog (Spark's current catalog). A catalog is configured in "
        "the Spark settings Sluice runs with (spark.sql.catalog.cat and its options: "
        "SLUICE_SPARK_CONF for the service, sluice.spark.conf in config.yaml for a local run); "
        "the project's default catalog is the one its default gateway connects to",
    ),
    Broken(
        "model_unknown_kind",
        {
            "models/c.sql": lines(
                "MODEL (", "  name s.c,", "  kind INCREMENTAL", ");", "SELECT 1 AS id"
            )
        },
        ModelError,
        "models/c.sql:3",
        "unknown model kind 'INCREMENTAL'",
        "did you mean 'INCREMENTAL_BY_UNIQUE_KEY' or 'INCREMENTAL_BY_TIME_RANGE'? use one of FULL, VIEW, INCREMENTAL_BY_TIME_RANGE, INCREMENTAL_BY_UNIQUE_KEY, SEED, SCD_TYPE_2, SCD_TYPE_2_BY_TIME, SCD_TYPE_2_BY_COLUMN, EMBEDDED (external tables go in external_models.yaml)",
    ),
    Broken(
        "model_custom_kind",
        {
            "models/c.sql": lines(
                "MODEL (",
                "  name s.c,",
                "  kind CUSTOM (materialization_properties (a = 1)),",
                ");",
                "SELECT 1 AS id",
            )
        },
        ModelError,
        "models/c.sql:3",
        "kind CUSTOM needs a materialization",
        "write CUSTOM (materialization 'name'), naming the custom materialization",
    ),
    Broken(
        "model_external_kind",
        {
            "models/c.sql": lines(
                "MODEL (", "  name s.c,", "  kind EXTERNAL", ");", "SELECT 1 AS id"
            )
        },
        ModelError,
        "models/c.sql:3",
        "EXTERNAL is not a model kind here",
        "declare external tables in external_models.yaml",
    ),
    Broken(
        "model_kind_parameter",
        {
            "models/c.sql": lines(
                "MODEL (", "  name s.c,", "  kind FULL (time_column ds)", ");", "SELECT 1 AS id"
            )
        },
        ModelError,
        "models/c.sql:3",
        "kind FULL has no parameter 'time_column'",
        "kind FULL takes no parameters",
    ),
    Broken(
        "model_no_time_column",
        {
            "models/c.sql": lines(
                "MODEL (",
                "  name s.c,",
                "  kind INCREMENTAL_BY_TIME_RANGE (batch_size 1)",
                ");",
                "SELECT 1 AS id",
            )
        },
        ModelError,
        "models/c.sql:3",
        "INCREMENTAL_BY_TIME_RANGE needs a time_column",
        "write INCREMENTAL_BY_TIME_RANGE (time_column event_date)",
    ),
    Broken(
        "model_time_column_not_returned",
        {
            "models/c.sql": lines(
                "MODEL (",
                "  name s.c,",
                "  kind INCREMENTAL_BY_TIME_RANGE (time_column ds)",
                ");",
                "SELECT 1 AS id, CURRENT_DATE AS day",
            )
        },
        ModelError,
        "models/c.sql:3",
        "time column 'ds' is not a column of s.c's query",
        "the query returns: id, day; name one of them (or alias the expression in the query)",
    ),
    Broken(
        "model_no_unique_key",
        {
            "models/c.sql": lines(
                "MODEL (", "  name s.c,", "  kind INCREMENTAL_BY_UNIQUE_KEY", ");", "SELECT 1 AS id"
            )
        },
        ModelError,
        "models/c.sql:3",
        "INCREMENTAL_BY_UNIQUE_KEY needs a unique_key",
        "write INCREMENTAL_BY_UNIQUE_KEY (unique_key id)",
    ),
    Broken(
        "model_bad_start",
        {
            "models/c.sql": lines(
                "MODEL (", "  name s.c,", "  start 'someday'", ");", "SELECT 1 AS id"
            )
        },
        ModelError,
        "models/c.sql:3",
        "'someday' is not a date; use YYYY-MM-DD, YYYY-MM-DD HH:MM:SS or a relative time "
        "such as '1 week ago', '3 days ago' or 'yesterday'",
        "quote it, for example '2024-01-01'",
    ),
    Broken(
        "model_bad_cron",
        {
            "models/c.sql": lines(
                "MODEL (", "  name s.c,", "  cron '@fortnightly'", ");", "SELECT 1 AS id"
            )
        },
        ModelError,
        "models/c.sql:3",
        "invalid cron '@fortnightly'",
        "use @hourly, @daily, @weekly, @monthly or a 5-field cron like '0 6 * * *'",
    ),
    Broken(
        "model_bad_bool",
        {
            "models/c.sql": lines(
                "MODEL (",
                "  name s.c,",
                "  kind FULL,",
                "  forward_only yes",
                ");",
                "SELECT 1 AS id",
            )
        },
        ModelError,
        "models/c.sql:4",
        "expected true or false, got 'yes'",
        "write true or false",
    ),
    Broken(
        "model_bad_choice",
        {
            "models/c.sql": lines(
                "MODEL (", "  name s.c,", "  on_destructive_change maybe", ");", "SELECT 1 AS id"
            )
        },
        ModelError,
        "models/c.sql:3",
        "'maybe' is not one of error, warn, allow",
        "write one of error, warn, allow",
    ),
    Broken(
        "model_bad_number",
        {
            "models/c.sql": lines(
                "MODEL (",
                "  name s.c,",
                "  kind INCREMENTAL_BY_TIME_RANGE (time_column ds, batch_size 0)",
                ");",
                "SELECT CURRENT_DATE AS ds",
            )
        },
        ModelError,
        "models/c.sql:3",
        "expected a whole number of at least 1, got '0'",
        "write the number without quotes",
    ),
    Broken(
        "model_unknown_dialect",
        {
            "models/c.sql": lines(
                "MODEL (", "  name s.c,", "  dialect sparkk", ");", "SELECT 1 AS id"
            )
        },
        ModelError,
        "models/c.sql:3",
        "unknown SQL dialect 'sparkk'",
        "use a sqlglot dialect such as spark, duckdb, bigquery, snowflake, postgres",
    ),
    Broken(
        "model_column_without_type",
        {
            "models/c.sql": lines(
                "MODEL (",
                "  name s.c,",
                "  columns (id INT, name)",
                ");",
                "SELECT 1 AS id, 'x' AS name",
            )
        },
        ModelError,
        "models/c.sql:3",
        "column 'name' needs a type",
        "write `name TYPE`, e.g. `id INT`",
    ),
    Broken(
        "model_unknown_column_type",
        {
            "models/c.sql": lines(
                "MODEL (", "  name s.c,", "  columns (id INTEGRAL)", ");", "SELECT 1 AS id"
            )
        },
        ModelError,
        "models/c.sql:3",
        "unknown type 'INTEGRAL' for column id",
        "use a type of the model's dialect, such as INT, BIGINT, DOUBLE, DECIMAL(10, 2), STRING, DATE, TIMESTAMP",
    ),
    Broken(
        "model_no_query",
        {"models/c.sql": lines("MODEL (", "  name s.c", ");")},
        ModelError,
        "models/c.sql:4",
        "model s.c has no query",
        "write a SELECT after the MODEL (...) header",
    ),
    Broken(
        "model_syntax_error",
        {"models/c.sql": lines("MODEL (", "  name s.c", ");", "SELECT id,", "FROM s.a WHERE")},
        ModelError,
        "models/c.sql:5",
        "cannot parse the query of s.c (spark): incomplete WHERE",
        "check the SQL near here; it is read as the 'spark' dialect",
    ),
    Broken(
        "model_unclosed_quote",
        {"models/c.sql": lines("MODEL (", "  name s.c", ");", "SELECT 'x AS id")},
        ModelError,
        "models/c.sql:4",
        "cannot read the query of s.c: the ' opened here is never closed",
        "close it with '",
    ),
    Broken(
        "model_two_statements",
        {"models/c.sql": lines("MODEL (", "  name s.c", ");", "SELECT 1 AS id;", "SELECT 2 AS id")},
        ModelError,
        "models/c.sql:4",
        "model s.c must hold exactly one SELECT query, found 2 statements",
        "a model holds one query; pre- and post-statements go before and after it",
    ),
    Broken(
        "model_not_a_select",
        {"models/c.sql": lines("MODEL (", "  name s.c", ");", "DELETE FROM s.a")},
        ModelError,
        "models/c.sql:4",
        "model s.c must hold exactly one SELECT query, found a DELETE statement",
        "a model holds one query; pre- and post-statements go before and after it",
    ),
    Broken(
        "model_table_without_schema",
        {"models/c.sql": lines("MODEL (", "  name s.c", ");", "SELECT id", "FROM a")},
        ModelError,
        "models/c.sql:5",
        "table 'a' in s.c has no schema",
        "write schema.table; refer to models and external tables by their full name",
    ),
    Broken(
        "model_catalog",
        {"models/c.sql": lines("MODEL (", "  name s.c", ");", "SELECT id", "FROM  warehouse.s.a")},
        ModelError,
        "models/c.sql:5",
        "'warehouse.s.a' names the catalog 'warehouse', which Sluice does not know",
        "known catalogs: spark_catalog (Spark's current catalog). A catalog is configured in "
        "the Spark settings Sluice runs with (spark.sql.catalog.warehouse and its options: "
        "SLUICE_SPARK_CONF for the service, sluice.spark.conf in config.yaml for a local run); "
        "the project's default catalog is the one its default gateway connects to",
    ),
    Broken(
        "model_unknown_macro",
        {"models/c.sql": lines("MODEL (", "  name s.c", ");", "SELECT @my_macro AS id")},
        ModelError,
        "models/c.sql:4",
        "unknown macro @my_macro",
        "Sluice supports @start_ds/@end_ds, @start_date, @start_ts, @execution_ds (and the other date forms), @this_model, @VAR('name') and the config's variables; a @DEF or a Python macro defines a name before it is used",
    ),
    Broken(
        "model_undefined_variable",
        {"models/c.sql": lines("MODEL (", "  name s.c", ");", "SELECT @VAR('threshold') AS id")},
        ModelError,
        "models/c.sql:4",
        "variable 'threshold' is not defined",
        "add 'threshold' under 'variables:' in config.yaml or give a default: @VAR('threshold', value)",
    ),
    Broken(
        "model_reads_itself",
        {
            "models/c.sql": lines(
                "MODEL (", "  name s.c,", "  kind FULL", ");", "SELECT id FROM s.c"
            )
        },
        ModelError,
        "models/c.sql:5",
        "model s.c reads itself",
        "only incremental models may read their own table, via @this_model",
    ),
    Broken(
        "model_not_utf8",
        {"models/c.sql": b"MODEL (name s.c);\nSELECT '\xff' AS id\n"},
        ModelError,
        "models/c.sql:1",
        "the file is not UTF-8 text",
        "save it as UTF-8",
    ),
    # --- SQL that reaches past the catalog: files by path, Java, scripts ---
    Broken(
        "file_read_text",
        {
            "models/c.sql": lines(
                "MODEL (", "  name s.c", ");", "SELECT value", "FROM text.`/etc/passwd`"
            )
        },
        ModelError,
        "models/c.sql:5",
        "model s.c reads the file '/etc/passwd' directly (text.`/etc/passwd`)",
        ALLOW_A_PATH,
    ),
    Broken(
        "file_read_parquet_s3",
        {
            "models/c.sql": lines(
                "MODEL (",
                "  name s.c",
                ");",
                "SELECT * FROM s.a",
                "JOIN parquet.`s3://bucket/raw/x` AS x USING (id)",
            )
        },
        ModelError,
        "models/c.sql:5",
        "model s.c reads the file 's3://bucket/raw/x' directly (parquet.`s3://bucket/raw/x`)",
        ALLOW_A_PATH,
    ),
    Broken(
        "file_read_not_allowed",
        {
            "config.yaml": lines("sluice:", "  allowed_paths: ['/data/landing/*']"),
            "models/c.sql": lines(
                "MODEL (", "  name s.c", ");", "SELECT * FROM csv.`/data/other/x.csv`"
            ),
        },
        ModelError,
        "models/c.sql:4",
        "model s.c reads the file '/data/other/x.csv' directly (csv.`/data/other/x.csv`)",
        ALLOW_A_PATH,
    ),
    Broken(
        "file_read_dotdot",
        {
            "config.yaml": lines("sluice:", "  allowed_paths: ['/data/landing/*']"),
            "models/c.sql": lines(
                "MODEL (", "  name s.c", ");", "SELECT * FROM csv.`/data/landing/../../etc/passwd`"
            ),
        },
        ModelError,
        "models/c.sql:4",
        "model s.c reads the file '/data/landing/../../etc/passwd' directly (csv.`/data/landing/../../etc/passwd`)",
        "write the path without '..': a path with '..' is never allowed",
    ),
    Broken(
        "file_read_duckdb",
        {
            "models/c.sql": lines(
                "MODEL (",
                "  name s.c,",
                "  dialect duckdb",
                ");",
                "SELECT *",
                "FROM read_parquet('/data/x.parquet')",
            )
        },
        ModelError,
        "models/c.sql:6",
        "model s.c reads the file '/data/x.parquet' directly (read_parquet())",
        ALLOW_A_PATH,
    ),
    Broken(
        "file_read_files_function",
        {
            "models/c.sql": lines(
                "MODEL (",
                "  name s.c",
                ");",
                "SELECT *",
                "FROM read_files('/data/x', format => 'json')",
            )
        },
        ModelError,
        "models/c.sql:5",
        "model s.c reads the file '/data/x' directly (read_files())",
        ALLOW_A_PATH,
    ),
    Broken(
        "file_read_reflect",
        {
            "models/c.sql": lines(
                "MODEL (",
                "  name s.c",
                ");",
                "SELECT id,",
                "  reflect('java.lang.System', 'getenv', 'HOME') AS home",
                "FROM s.a",
            )
        },
        ModelError,
        "models/c.sql:5",
        "model s.c calls reflect(), which runs any Java method",
        NO_JAVA,
    ),
    Broken(
        "file_read_transform",
        {
            "models/c.sql": lines(
                "MODEL (",
                "  name s.c",
                ");",
                "SELECT TRANSFORM (id) USING 'cat' AS (id)",
                "FROM s.a",
            )
        },
        ModelError,
        "models/c.sql:4",
        "model s.c runs a script with TRANSFORM ... USING",
        "compute the columns with SQL functions; running a script cannot be allowed",
    ),
    Broken(
        "file_read_load_data",
        {
            "models/c.sql": lines(
                "MODEL (", "  name s.c", ");", "LOAD DATA LOCAL INPATH '/etc/passwd' INTO TABLE s.a"
            )
        },
        ModelError,
        "models/c.sql:4",
        "model s.c uses LOAD DATA, which reads files into a table",
        ONE_QUERY,
    ),
    Broken(
        "file_read_add_jar",
        {
            "models/c.sql": lines(
                "MODEL (", "  name s.c", ");", "SELECT 1 AS id;", "ADD JAR /tmp/evil.jar"
            )
        },
        ModelError,
        "models/c.sql:5",
        "model s.c post-statement 1 uses ADD JAR, which reaches the file system",
        ONE_QUERY,
    ),
    Broken(
        "file_read_insert_directory",
        {
            "models/c.sql": lines(
                "MODEL (",
                "  name s.c",
                ");",
                "INSERT OVERWRITE DIRECTORY '/tmp/out' USING parquet",
                "SELECT * FROM s.a",
            )
        },
        ModelError,
        "models/c.sql:4",
        "model s.c uses INSERT OVERWRITE DIRECTORY, which writes files",
        ONE_QUERY,
    ),
    Broken(
        "file_read_create_location",
        {
            "models/c.sql": lines(
                "MODEL (", "  name s.c", ");", "CREATE TABLE s.x USING parquet LOCATION '/data/x'"
            )
        },
        ModelError,
        "models/c.sql:4",
        "model s.c sets a LOCATION, which reads or writes files at a path",
        ONE_QUERY,
    ),
    Broken(
        "file_read_format_schema",
        {"models/c.sql": lines("MODEL (", "  name s.c", ");", "SELECT *", "FROM parquet.orders")},
        GraphError,
        "models/c.sql:5",
        "model s.c reads 'parquet.orders', which is neither a model nor an external table (Spark would read the parquet files at the relative path 'orders')",
        "check the name, add a model named parquet.orders, or declare it in external_models.yaml",
    ),
    Broken(
        "file_read_audit",
        {
            "audits/leak.sql": lines(
                "AUDIT (name leak);", "SELECT *", "FROM json.`/etc/secrets.json`"
            )
        },
        ModelError,
        "audits/leak.sql:3",
        "audit leak reads the file '/etc/secrets.json' directly (json.`/etc/secrets.json`)",
        ALLOW_A_PATH,
    ),
    Broken(
        "file_read_audit_argument",
        {
            "models/c.sql": lines(
                "MODEL (",
                "  name s.c,",
                "  audits (forall(criteria := (java_method('java.lang.System', 'exit', 1) = 0)))",
                ");",
                "SELECT 1 AS id",
            )
        },
        ModelError,
        "models/c.sql:3",
        "audit argument '(java_method('java.lang.System', 'exit', 1) = 0)' calls java_method(), which runs any Java method",
        NO_JAVA,
    ),
    Broken(
        "file_read_audit_default",
        {
            "audits/x.sql": lines(
                "AUDIT (name x, defaults (v = reflect('a', 'b')));",
                "SELECT * FROM @this_model WHERE id = @v",
            )
        },
        ModelError,
        "audits/x.sql:1",
        "audit x calls reflect(), which runs any Java method",
        NO_JAVA,
    ),
    # --- seeds ---
    Broken(
        "seed_missing",
        {
            "models/c.sql": lines(
                "MODEL (", "  name s.c,", "  kind SEED (path '../seeds/none.csv')", ");"
            )
        },
        ModelError,
        "models/c.sql:1",
        "seed s.c: file '../seeds/none.csv' not found (looked for {root}/seeds/none.csv)",
        "the path is relative to the model file (or, after $root/, to the project)",
    ),
    Broken(
        "seed_outside",
        {"models/c.sql": lines("MODEL (", "  name s.c,", "  kind SEED (path '/etc/passwd')", ");")},
        ModelError,
        "models/c.sql:1",
        "seed s.c: path '/etc/passwd' leads outside the project",
        "keep seed files inside the project, e.g. seeds/",
    ),
    Broken(
        "seed_without_path",
        {"models/c.sql": lines("MODEL (", "  name s.c,", "  kind SEED", ");")},
        ModelError,
        "models/c.sql:3",
        "a SEED model needs a path",
        "write SEED (path '../seeds/file.csv')",
    ),
    Broken(
        "seed_with_query",
        {
            "seeds/c.csv": lines("id", "1"),
            "models/c.sql": lines(
                "MODEL (",
                "  name s.c,",
                "  kind SEED (path '../seeds/c.csv')",
                ");",
                "SELECT 1 AS id",
            ),
        },
        ModelError,
        "models/c.sql:5",
        "a SEED model has no query",
        "remove the SQL after the MODEL header",
    ),
    Broken(
        "seed_empty",
        {
            "seeds/c.csv": lines(),
            "models/c.sql": lines(
                "MODEL (", "  name s.c,", "  kind SEED (path '../seeds/c.csv')", ");"
            ),
        },
        ModelError,
        "seeds/c.csv:1",
        "seed s.c: the CSV file is empty or has no header row",
        "make the first line the column names, e.g. `id,name`",
    ),
    Broken(
        "seed_declared_column_missing",
        {
            "seeds/c.csv": lines("id,name", "1,a"),
            "models/c.sql": lines(
                "MODEL (",
                "  name s.c,",
                "  kind SEED (path '../seeds/c.csv'),",
                "  columns (id INT, nme STRING)",
                ");",
            ),
        },
        ModelError,
        "seeds/c.csv:1",
        "seed s.c: declared column(s) nme are not in the CSV header",
        "the header has: id, name",
    ),
    Broken(
        "seed_unknown_csv_setting",
        {
            "seeds/c.csv": lines("id", "1"),
            "models/c.sql": lines(
                "MODEL (",
                "  name s.c,",
                "  kind SEED (path '../seeds/c.csv', csv_settings (delimeter = ';'))",
                ");",
            ),
        },
        ModelError,
        "models/c.sql:3",
        "unknown csv setting 'delimeter'",
        "supported: delimiter, doublequote, escapechar, quotechar, skipinitialspace",
    ),
    # --- the graph ---
    Broken(
        "duplicate_model",
        {"models/c.sql": lines("MODEL (", "  name s.a", ");", "SELECT 2 AS id")},
        ModelError,
        "models/c.sql:1",
        "model s.a is defined twice (also in {root}/models/a.sql:1)",
        "rename one of them",
    ),
    Broken(
        "unknown_reference",
        {"models/c.sql": lines("MODEL (", "  name s.c", ");", "SELECT id", "FROM s.nope")},
        GraphError,
        "models/c.sql:5",
        "model s.c reads 's.nope', which is neither a model nor an external table",
        "check the name, add a model named s.nope, or declare it in external_models.yaml",
    ),
    Broken(
        "unknown_depends_on",
        {
            "models/c.sql": lines(
                "MODEL (", "  name s.c,", "  depends_on [s.a, s.nope]", ");", "SELECT 1 AS id"
            )
        },
        GraphError,
        "models/c.sql:1",
        "model s.c depends on unknown 's.nope'",
        "fix depends_on in the MODEL header",
    ),
    Broken(
        "cycle_through_depends_on",
        {
            "models/c.sql": lines(
                "MODEL (", "  name s.c,", "  depends_on [s.d]", ");", "SELECT 1 AS id"
            ),
            "models/d.sql": lines("MODEL (", "  name s.d", ");", "SELECT * FROM s.c"),
        },
        GraphError,
        "models/c.sql:1",
        "models depend on each other in a cycle: s.c -> s.d -> s.c",
        "a model cannot read, directly or through others, a model that reads it",
    ),
    Broken(
        "cycle",
        {
            "models/c.sql": lines("MODEL (", "  name s.c", ");", "SELECT * FROM s.e"),
            "models/d.sql": lines("MODEL (", "  name s.d", ");", "SELECT * FROM s.c"),
            "models/e.sql": lines("MODEL (", "  name s.e", ");", "SELECT * FROM s.d"),
        },
        GraphError,
        "models/c.sql:1",
        "models depend on each other in a cycle: s.c -> s.d -> s.e -> s.c",
        "a model cannot read, directly or through others, a model that reads it",
    ),
    # --- external_models.yaml ---
    Broken(
        "external_not_a_list",
        {"external_models.yaml": lines("raw.events:", "  id: int")},
        ModelError,
        "external_models.yaml:1",
        "external models are a list of {name, columns}",
        "write `- name: schema.table` entries, each with `columns: {name: type}`",
    ),
    Broken(
        "external_no_name",
        {"external_models.yaml": lines("- columns:", "    id: int")},
        ModelError,
        "external_models.yaml:1",
        "each external model needs a name",
        "- name: schema.table",
    ),
    Broken(
        "external_bad_name",
        {"external_models.yaml": "- name: events\n"},
        ModelError,
        "external_models.yaml:1",
        "external table 'events' must be schema.table or catalog.schema.table (letters, digits, "
        "underscores)",
        "name a table of the catalog, e.g. `- name: raw.events`",
    ),
    Broken(
        "external_path_name",
        {"external_models.yaml": "- name: parquet./etc/passwd\n"},
        ModelError,
        "external_models.yaml:1",
        "external table 'parquet./etc/passwd' must be schema.table or catalog.schema.table",
        "name a table of the catalog, e.g. `- name: raw.events`",
    ),
    Broken(
        "external_bad_columns",
        {"external_models.yaml": lines("- name: raw.events", "  columns: [id, ts]")},
        ModelError,
        "external_models.yaml:2",
        "columns of raw.events must map names to types",
        "write `columns:` with one `name: type` line per column",
    ),
    Broken(
        "external_invalid_yaml",
        {"external_models.yaml": lines("- name: raw.events", "  columns: {id: int")},
        ModelError,
        "external_models.yaml:3",
        "invalid YAML: expected ',' or '}', but got '<stream end>'",
        "check the indentation and quoting near this line",
    ),
    # --- audits ---
    Broken(
        "audit_no_header",
        {"audits/x.sql": "SELECT * FROM @this_model WHERE id < 0\n"},
        ModelError,
        "audits/x.sql:1",
        "not an audit file: it must start with AUDIT (name ...)",
        "start it with AUDIT (name assert_something); followed by its query",
    ),
    Broken(
        "audit_unknown_property",
        {"audits/x.sql": lines("AUDIT (name x, severity high);", "SELECT * FROM @this_model")},
        ModelError,
        "audits/x.sql:1",
        "unknown audit property 'severity'",
        "audits take blocking, defaults, dialect, name, standalone",
    ),
    Broken(
        "audit_no_name",
        {"audits/x.sql": lines("AUDIT (blocking false);", "SELECT * FROM @this_model")},
        ModelError,
        "audits/x.sql:1",
        "the audit has no name",
        "add `name assert_something` to AUDIT (...)",
    ),
    Broken(
        "audit_syntax_error",
        {"audits/x.sql": lines("AUDIT (name x);", "SELECT *", "FROM @this_model WHERE")},
        ModelError,
        "audits/x.sql:3",
        "cannot parse audit x: incomplete WHERE",
        "check the SQL near here; it is read as the 'spark' dialect",
    ),
    Broken(
        "audit_not_a_select",
        {"audits/x.sql": lines("AUDIT (name x);", "DELETE FROM @this_model")},
        ModelError,
        "audits/x.sql:2",
        "audit x must be one SELECT query",
        "write the query that returns the rows violating the audit",
    ),
    Broken(
        "audit_defined_twice",
        {
            "audits/x.sql": lines(
                "AUDIT (name x);",
                "SELECT * FROM @this_model;",
                "AUDIT (name x);",
                "SELECT * FROM @this_model",
            )
        },
        ModelError,
        "audits/x.sql:3",
        "audit x is defined twice (also in {root}/audits/x.sql:1)",
        "rename one of them",
    ),
    Broken(
        "audit_unknown",
        {
            "models/c.sql": lines(
                "MODEL (",
                "  name s.c,",
                "  audits (not_negative(column := id))",
                ");",
                "SELECT 1 AS id",
            )
        },
        ModelError,
        "models/c.sql:3",
        "model s.c uses unknown audit 'not_negative'",
        "define it in audits/not_negative.sql, or use one of SQLMesh's 29 built-in audits "
        "(not_null, unique_values, accepted_values, ...: the README lists them)",
    ),
    Broken(
        "audit_builtin_missing_argument",
        {
            "models/c.sql": lines(
                "MODEL (", "  name s.c,", "  audits (not_null)", ");", "SELECT 1 AS id"
            )
        },
        ModelError,
        "models/c.sql:3",
        "audit not_null on s.c: needs columns (a column name or a list of them)",
        "write not_null(columns := (id, ds))",
    ),
    Broken(
        "audit_missing_parameter",
        {
            "audits/x.sql": lines("AUDIT (name x);", "SELECT * FROM @this_model WHERE @column < 0"),
            "models/c.sql": lines("MODEL (", "  name s.c,", "  audits (x)", ");", "SELECT 1 AS id"),
        },
        ModelError,
        "models/c.sql:3",
        "audit x on s.c needs column",
        "pass them: x(column := ...)",
    ),
    # --- unit tests ---
    Broken(
        "test_input_not_read",
        {
            "tests/t.yaml": lines(
                "test_b:",
                "  model: s.b",
                "  inputs:",
                "    s.c:",
                "      rows: []",
                "  outputs:",
                "    query:",
                "      rows: []",
            )
        },
        ModelError,
        "tests/t.yaml:4",
        "test test_b: input 's.c' is not read by s.b",
        "s.b reads: s.a",
    ),
    Broken(
        "test_no_outputs",
        {
            "tests/t.yaml": lines(
                "test_b:", "  model: s.b", "  inputs:", "    s.a:", "      rows: []"
            )
        },
        ModelError,
        "tests/t.yaml:1",
        "test test_b: outputs must give `query` rows (and/or `ctes`)",
        "write `outputs:` then `query:` with `rows:` under it",
    ),
    Broken(
        "test_unknown_key",
        {
            "tests/t.yaml": lines(
                "test_b:", "  model: s.b", "  input: {}", "  outputs:", "    query: []"
            )
        },
        ModelError,
        "tests/t.yaml:3",
        "test test_b: unknown key 'input'",
        "a test has model, inputs, outputs, vars",
    ),
    Broken(
        "test_no_model",
        {"tests/t.yaml": lines("test_b:", "  outputs:", "    query: []")},
        ModelError,
        "tests/t.yaml:1",
        "test test_b: names no model",
        "add `model: schema.table`",
    ),
    Broken(
        "test_not_a_mapping",
        {"tests/t.yaml": "- test_b\n"},
        ModelError,
        "tests/t.yaml:1",
        "a unit-test file maps test names to tests",
        "write `test_name:` with `model:`, `inputs:` and `outputs:` under it",
    ),
    Broken(
        "test_bad_rows",
        {
            "tests/t.yaml": lines(
                "test_b:", "  model: s.b", "  outputs:", "    query:", "      rows: [1, 2]"
            )
        },
        ModelError,
        "tests/t.yaml:4",
        "test test_b: rows must be a list of column: value mappings",
        "write each row as `- column: value` lines",
    ),
    Broken(
        "test_input_query",
        {
            "tests/t.yaml": lines(
                "test_b:",
                "  model: s.b",
                "  inputs:",
                "    s.a:",
                "      query: SELECT * FROM text.`/etc/passwd`",
                "  outputs:",
                "    query: []",
            )
        },
        ModelError,
        "tests/t.yaml:5",
        "test test_b: 'query' is not supported here",
        "list the rows: `rows:` followed by `- column: value` mappings",
    ),
    Broken(
        "test_inputs_list",
        {
            "tests/t.yaml": lines(
                "test_b:", "  model: s.b", "  inputs:", "    - s.a", "  outputs:", "    query: []"
            )
        },
        ModelError,
        "tests/t.yaml:3",
        "test test_b: inputs must map each table the model reads to its rows",
        "write `inputs:` then `schema.table:` with `rows:` under it",
    ),
    Broken(
        "test_invalid_yaml",
        {"tests/t.yaml": lines("test_b:", "  model: s.b", " outputs: x")},
        ModelError,
        "tests/t.yaml:3",
        "invalid YAML: expected <block end>, but found '<block mapping start>'",
        "check the indentation and quoting near this line",
    ),
]

# Loads, but cannot be planned: the planner's errors name the model's file too.
PLAN_CASES = [
    Broken(
        "plan_too_many_intervals",
        {
            "models/c.sql": lines(
                "MODEL (",
                "  name s.c,",
                "  kind INCREMENTAL_BY_TIME_RANGE (time_column ds),",
                "  cron '@hourly',",
                "  start '1700-01-01'",
                ");",
                "SELECT CURRENT_DATE AS ds",
            )
        },
        PlanError,
        "models/c.sql:1",
        "model s.c: cron '@hourly' makes 2840593 intervals from 1700-01-01 00:00:00 to "
        "2024-01-21 00:00:00; a plan holds at most 2000000",
        "set a later start (the model's `start`, or --start) or a coarser cron",
    ),
]


def write(root: Path, files: dict[str, str | bytes | None]) -> Path:
    for rel, text in {**BASE, **files}.items():
        if text is None:
            continue
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
    return root


def check(error: SluiceError, case: Broken, root: Path) -> None:
    assert not isinstance(error, ProjectErrors), str(error)
    assert type(error) is case.error, str(error)
    assert error.path is not None and error.line is not None, str(error)
    where = f"{Path(error.path).relative_to(root).as_posix()}:{error.line}"
    assert where == case.where, str(error)
    assert error.message == case.message.replace("{root}", str(root)), str(error)
    assert error.hint == case.hint, str(error)


def test_the_base_project_loads(tmp_path: Path) -> None:
    project = load_project(write(tmp_path, {}), use_cache=False)
    assert list(project.models) == ["s.a", "s.b"]


def test_the_catalogue_has_one_row_per_error() -> None:
    ids = [case.id for case in [*CASES, *PLAN_CASES]]
    assert len(ids) == len(set(ids))
    assert len(ids) >= 30


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_a_broken_project_is_refused_on_load(tmp_path: Path, case: Broken) -> None:
    root = write(tmp_path.resolve() / "project", case.files)
    with pytest.raises(SluiceError) as info:
        load_project(root, use_cache=False)
    check(info.value, case, root)


@pytest.mark.parametrize("case", PLAN_CASES, ids=lambda case: case.id)
def test_a_broken_project_is_refused_on_plan(tmp_path: Path, case: Broken) -> None:
    root = write(tmp_path.resolve() / "project", case.files)
    project = load_project(root, use_cache=False)
    end = to_ms("2024-01-21")
    request = PlanRequest(
        environment="prod",
        models=project.models,
        fingerprints=fingerprint_models(project.models, project.audits),
        base={},
        base_plan_id=None,
        end=end,
        execution_time=end,
    )
    with pytest.raises(SluiceError) as info:
        build_plan(request)
    check(info.value, case, root)


def test_an_audit_argument_may_be_any_sql_expression(tmp_path: Path) -> None:
    # Found by the catalogue: `criteria := (amount > 0)`, SQLMesh's own example, was a
    # header syntax error ("unexpected '>'"), so `forall` could not be used at all.
    root = write(
        tmp_path,
        {
            "models/c.sql": lines(
                "MODEL (",
                "  name s.c,",
                "  audits (forall(criteria := (amount > 0 AND id IS NOT NULL)),",
                "          not_null(columns := [id, amount], blocking := false))",
                ");",
                "SELECT 1 AS id, 2 AS amount",
            )
        },
    )
    model = load_project(root, use_cache=False).models["s.c"]
    assert [(a.name, a.args, a.blocking) for a in model.audits] == [
        ("forall", (("criteria", "(amount > 0 AND NOT id IS NULL)"),), True),
        ("not_null", (("columns", "(id, amount)"),), False),
    ]
