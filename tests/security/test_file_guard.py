"""SQL from a pull request reads tables, not files: the hostile ways around the guard.

Spark runs what the guard passes with the cluster's rights, so every row here is SQL a
pull request could write to read a file, call Java, or make Spark paste in a setting or
an environment variable, in a model query, an audit, an audit's default or an audit
argument. Each must be refused on load with file:line and a hint. (That Spark really
reads files through ``IDENTIFIER``, replaces ``${env:X}`` and un-escapes ``.\\.`` in a
path was checked by hand against Spark 4.3; the SQL below never reaches Spark.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from sluice.core.errors import GraphError, ModelError, SluiceError
from sluice.core.model.audits import builtin_audit_sql
from sluice.core.model.definition import AuditCall
from sluice.core.model.fileaccess import find_in_tree
from sluice.core.model.loader import load_project
from tests.core.helpers import BASIC, load

ALLOW = "sluice:\n  allowed_paths: ['/data/landing/*']\n"


def refused(tmp_path: Path, files: dict[str, str]) -> SluiceError:
    with pytest.raises(SluiceError) as info:
        load(tmp_path, {**BASIC, **files})
    return info.value


def model(sql: str, dialect: str = "spark") -> dict[str, str]:
    return {"models/d.sql": f"MODEL (name s.d, kind FULL, dialect {dialect});\n{sql}\n"}


# --- IDENTIFIER(...): a table name Spark works out when the query runs ---------------

COMPUTED = [
    # string concatenation, || and concat(), any case, in FROM, JOIN, subquery and CTE
    "SELECT * FROM IDENTIFIER('parquet.`' || '/etc' || '/passwd`')",
    "SELECT a.id FROM s.a AS a JOIN identifier(concat('text.`', '/etc/passwd`')) AS p ON TRUE",
    "SELECT * FROM (SELECT * FROM Identifier('te' || 'xt.`/etc/passwd`')) AS x",
    "WITH c AS (SELECT * FROM IdEnTiFiEr(CONCAT('csv.`/etc/', 'passwd`'))) SELECT * FROM c",
    # adjacent literals are one concatenation to Spark
    "SELECT * FROM IDENTIFIER('te' 'xt.`/etc/passwd`')",
    # constant expressions Spark folds: a cast, a collation, a CASE, coalesce, upper()
    "SELECT * FROM IDENTIFIER(CAST('text.`/etc/passwd`' AS STRING))",
    "SELECT * FROM IDENTIFIER('text.`/etc/passwd`' COLLATE UTF8_BINARY)",
    "SELECT * FROM IDENTIFIER(CASE WHEN TRUE THEN 'text.`/etc/passwd`' END)",
    "SELECT * FROM IDENTIFIER(coalesce('text.`/etc/passwd`'))",
    "SELECT * FROM IDENTIFIER(upper('text.') || '`/etc/passwd`')",
    # a raw string is not a plain literal; a session variable is a value set elsewhere
    "SELECT * FROM IDENTIFIER(r'text.`/etc/passwd`')",
    "SELECT * FROM IDENTIFIER(session.p)",
    # a computed column name (no file, but nothing computed is let through)
    "SELECT IDENTIFIER(concat('i', 'd')) AS x FROM s.a",
]


@pytest.mark.parametrize("sql", COMPUTED)
def test_identifier_with_a_computed_name_is_refused(tmp_path: Path, sql: str) -> None:
    error = refused(tmp_path, model(sql))
    assert isinstance(error, ModelError)
    assert error.message.startswith("model s.d uses IDENTIFIER() with a name computed")
    assert error.location is not None and error.location.endswith(
        f"models/d.sql:2:{sql.upper().index('IDENTIFIER') + 1}"
    )
    assert error.hint is not None and "name the table directly" in error.hint


@pytest.mark.parametrize(
    ("sql", "path"),
    [
        ("SELECT * FROM IDENTIFIER('parquet.`/etc/passwd`')", "/etc/passwd"),
        ("SELECT * FROM identifier((('text.`/etc/passwd`')))", "/etc/passwd"),
        ("SELECT * FROM IDENTIFIER('`binaryFile`.`/etc/hostname`')", "/etc/hostname"),
        ("SELECT * FROM IDENTIFIER('json.`file:///etc/passwd`')", "file:///etc/passwd"),
        # a path listed in allowed_paths is still refused through IDENTIFIER
        ("SELECT * FROM IDENTIFIER('csv.`/data/landing/x.csv`')", "/data/landing/x.csv"),
        ("SELECT * FROM s.a WHERE id IN (SELECT 1 FROM IDENTIFIER('orc.`/x`'))", "/x"),
    ],
)
def test_identifier_naming_a_file_is_refused(tmp_path: Path, sql: str, path: str) -> None:
    error = refused(tmp_path, {**model(sql), "config.yaml": ALLOW})
    assert isinstance(error, ModelError)
    assert error.message.startswith(f"model s.d reads the file '{path}' directly (IDENTIFIER(")
    assert error.hint is not None and "without IDENTIFIER" in error.hint


def test_identifier_naming_a_format_schema_is_a_relative_path(tmp_path: Path) -> None:
    # Spark reads text.plainfile as the file `plainfile` next to the driver when the
    # catalog has no such table.
    error = refused(tmp_path, model("SELECT * FROM IDENTIFIER('text.plainfile')"))
    assert error.message == (
        "model s.d reads IDENTIFIER('text.plainfile'), which Spark reads as the text files "
        "at the relative path 'plainfile' when the catalog has no such table"
    )
    assert error.location is not None and error.location.endswith("models/d.sql:2:15")


@pytest.mark.parametrize(
    "name", ["a.b.c.d", "s. a", "s.a'", "s.a\\\\", "`s`.`/tmp`", "s.a; DROP", "`/x`", ""]
)
def test_identifier_that_is_no_table_name_is_refused(tmp_path: Path, name: str) -> None:
    error = refused(tmp_path, model(f"SELECT * FROM IDENTIFIER('{name}')"))
    assert isinstance(error, ModelError)
    assert "IDENTIFIER(" in error.message, error.message


def test_identifier_used_as_a_function_name_is_refused(tmp_path: Path) -> None:
    # Spark calls IDENTIFIER('java_method')(...) as java_method(...).
    for sql in (
        "SELECT IDENTIFIER('java_method')('java.lang.System', 'getenv', 'HOME') AS x",
        "SELECT IDENTIFIER('refl' || 'ect')('java.lang.System', 'getenv', 'HOME') AS x",
    ):
        error = refused(tmp_path, model(sql))
        assert error.message == (
            "model s.d uses IDENTIFIER() with a computed name or as a function's name, which "
            "can reach a file or a Java method"
        )
        assert error.location is not None and error.location.endswith("models/d.sql:2:8")


def test_a_literal_identifier_is_the_table_it_names(tmp_path: Path) -> None:
    project = load(
        tmp_path,
        {
            **BASIC,
            **model(
                "SELECT x.id FROM IDENTIFIER('s.a') AS x "
                "JOIN IDENTIFIER('`s`.`b`') AS y ON x.id = y.id"
            ),
        },
    )
    d = project.models["s.d"]
    assert d.depends_on == ("s.a", "s.b")
    assert d.query_sql == "SELECT x.id FROM s.a AS x JOIN s.b AS y ON x.id = y.id"


def test_a_literal_identifier_counts_as_a_reference(tmp_path: Path) -> None:
    error = refused(tmp_path, model("SELECT *\nFROM IDENTIFIER('s.missing')"))
    assert isinstance(error, GraphError)
    assert error.message.startswith("model s.d reads 's.missing', which is neither a model")
    assert error.location is not None and error.location.endswith("models/d.sql:3:6")
    error = refused(tmp_path, model("SELECT * FROM IDENTIFIER('a')"))
    assert error.message == "table 'a' in s.d has no schema"


def test_snowflakes_identifier_is_checked_too(tmp_path: Path) -> None:
    error = refused(
        tmp_path, model("SELECT * FROM IDENTIFIER('parquet.`/etc/passwd`')", "snowflake")
    )
    assert error.message.startswith("model s.d reads the file '/etc/passwd' directly")
    error = refused(
        tmp_path, model("SELECT * FROM IDENTIFIER('parquet.`' || '/etc/passwd`')", "snowflake")
    )
    assert "IDENTIFIER() with a name computed" in error.message
    project = load(tmp_path, {**BASIC, **model("SELECT * FROM IDENTIFIER('s.a')", "snowflake")})
    assert project.models["s.d"].depends_on == ("s.a",)


# --- audits, audit defaults and audit arguments ---------------------------------------


def test_identifier_in_an_audit_is_refused(tmp_path: Path) -> None:
    error = refused(
        tmp_path,
        {
            "audits/x.sql": (
                "AUDIT (name x);\nSELECT * FROM @this_model\n"
                "WHERE id IN (SELECT 1 FROM IDENTIFIER('text.`' || '/etc/passwd`'))\n"
            )
        },
    )
    assert error.message.startswith("audit x uses IDENTIFIER() with a name computed")
    assert error.location is not None and error.location.endswith("audits/x.sql:3:28")


def test_identifier_over_an_audit_parameter_is_refused(tmp_path: Path) -> None:
    # The model passes the name as a string: IDENTIFIER(@source) would read any file.
    error = refused(
        tmp_path,
        {"audits/x.sql": "AUDIT (name x);\nSELECT * FROM IDENTIFIER(@source)\n"},
    )
    assert error.message.startswith("audit x uses IDENTIFIER() with a name computed")


def test_identifier_in_an_audit_default_is_refused(tmp_path: Path) -> None:
    error = refused(
        tmp_path,
        {
            "audits/x.sql": (
                "AUDIT (name x, defaults (n = (SELECT max(id) FROM "
                "IDENTIFIER('text.`/etc/passwd`'))));\n"
                "SELECT * FROM @this_model WHERE id > @n\n"
            )
        },
    )
    assert error.message.startswith("audit x reads the file '/etc/passwd' directly (IDENTIFIER(")
    assert error.location is not None and error.location.endswith("audits/x.sql:1:51")


@pytest.mark.parametrize(
    "audit",
    [
        "forall(criteria := (id IN (SELECT 1 FROM IDENTIFIER('text.`/etc/passwd`'))))",
        "forall(criteria := (id IN (SELECT 1 FROM IDENTIFIER(concat('a', 'b')))))",
        "number_of_rows(threshold := (SELECT count(*) FROM identifier('json.`/x`')))",
    ],
)
def test_identifier_in_an_audit_argument_is_refused(tmp_path: Path, audit: str) -> None:
    files = {"models/d.sql": f"MODEL (name s.d, kind FULL, audits ({audit}));\nSELECT 1 AS id\n"}
    error = refused(tmp_path, files)
    assert isinstance(error, ModelError)
    assert error.message.startswith("audit argument")
    assert "IDENTIFIER(" in error.message
    assert error.location is not None and "models/d.sql:1" in error.location


@pytest.mark.parametrize(
    ("sql", "col"),
    [
        ("SELECT * FROM @this_model WHERE id IN (SELECT 1 FROM text.plainfile)", 54),
        ("SELECT * FROM binaryfile.metastore_db", 15),
        ("SELECT * FROM @this_model AS m JOIN `csv`.`derby` AS d ON TRUE", 37),
    ],
)
def test_an_audit_reading_a_format_schema_is_refused(tmp_path: Path, sql: str, col: int) -> None:
    # Audits are not checked against the project's models: text.plainfile would be the
    # file `plainfile` in the driver's working directory.
    error = refused(tmp_path, {"audits/x.sql": f"AUDIT (name x);\n{sql}\n"})
    assert error.message.startswith("audit x reads ")
    assert "at the relative path" in error.message
    assert error.location is not None and error.location.endswith(f"audits/x.sql:2:{col}")


def test_an_audit_argument_reading_a_format_schema_is_refused(tmp_path: Path) -> None:
    files = {
        "models/d.sql": (
            "MODEL (name s.d, kind FULL,\n"
            "  audits (forall(criteria := (id IN (SELECT 1 FROM text.plainfile)))));\n"
            "SELECT 1 AS id\n"
        )
    }
    error = refused(tmp_path, files)
    assert "relative path 'plainfile'" in error.message
    assert error.location is not None and error.location.endswith("models/d.sql:2:52")


def test_a_unique_values_column_cannot_close_the_string_it_is_shown_in() -> None:
    # `x' || java_method(...) || '` is a (legal) column name; pasted into '...' it was code.
    column = "`x' || java_method('java.lang.System', 'getenv', 'HOME') || '`"
    sql = builtin_audit_sql(AuditCall("unique_values", (("columns", f"({column})"),)), "s.t")
    tree = sqlglot.parse_one(sql, read="spark")
    assert not [f for f in tree.find_all(exp.Anonymous) if f.name.lower() == "java_method"]
    assert find_in_tree(tree) == []


# --- ${...}: Spark pastes in settings and environment variables before it parses ------


@pytest.mark.parametrize(
    ("sql", "col"),
    [
        ("SELECT '${env:AWS_SECRET_ACCESS_KEY}' AS k", 8),
        ("SELECT 'a', \"${system:user.home}\" AS k", 13),
        # a path allowed_paths permit, but for what Spark pastes into it
        ("SELECT * FROM text.`/data/landing/${system:user.dir}`", 20),
        ("SELECT '${spark.hadoop.javax.jdo.option.ConnectionPassword}' AS p", 8),
        ("SELECT '${sparkconf:spark.app.name}' AS p", 8),
        ("SELECT * FROM s.a WHERE id = ${hiveconf:x}", 0),
        ("SELECT `${env:HOME}` FROM s.a", 8),
    ],
)
def test_spark_variable_substitution_is_refused(tmp_path: Path, sql: str, col: int) -> None:
    error = refused(tmp_path, {**model(sql), "config.yaml": ALLOW})
    assert isinstance(error, ModelError)
    assert "which Spark replaces with a setting" in error.message, error.message
    assert error.location is not None
    assert error.location.endswith(f"models/d.sql:2:{col}" if col else "models/d.sql:2")
    assert error.hint is not None and "@VAR" in error.hint


def test_substitution_in_a_dialect_that_escapes_differently_is_refused(tmp_path: Path) -> None:
    error = refused(tmp_path, model("SELECT '$' || '{env:X}' AS ok, '${env:X}' AS k", "duckdb"))
    assert "'${env:X}'" in error.message


def test_substitution_in_audits_and_their_arguments_is_refused(tmp_path: Path) -> None:
    error = refused(
        tmp_path / "audit",
        {"audits/x.sql": "AUDIT (name x);\nSELECT * FROM @this_model WHERE '${env:HOME}' = 'x'\n"},
    )
    assert error.message.startswith("audit x writes '${env:HOME}'")
    files = {
        "models/d.sql": (
            "MODEL (name s.d, kind FULL,\n"
            "  audits (accepted_values(column := id, is_in := ('${env:HOME}', 'b'))));\n"
            "SELECT 1 AS id\n"
        )
    }
    error = refused(tmp_path / "argument", files)
    assert "'${env:HOME}'" in error.message and error.message.startswith("audit argument")
    assert error.location is not None and error.location.endswith("models/d.sql:2")


def test_the_characters_themselves_can_still_be_written(tmp_path: Path) -> None:
    project = load(tmp_path, {**BASIC, **model("SELECT '$' || '{x}' AS a, '$x {y}' AS b")})
    assert project.models["s.d"].query_sql == "SELECT '$' || '{x}' AS a, '$x {y}' AS b"


# --- paths that step out of sluice.allowed_paths --------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/data/landing/.\\./.\\./etc/passwd",  # Hadoop un-escapes .\. to ..
        "/data/landing/\\.\\./x",
        "/data/landing/x\\",
    ],
)
def test_a_backslash_escape_cannot_hide_dotdot(tmp_path: Path, path: str) -> None:
    error = refused(tmp_path, {**model(f"SELECT * FROM csv.`{path}`"), "config.yaml": ALLOW})
    assert error.message == f"model s.d reads the file '{path}' directly (csv.`{path}`)"
    assert error.hint is not None and "'\\'" in error.hint


# --- statements that change settings or name paths ------------------------------------


@pytest.mark.parametrize(
    ("sql", "what"),
    [
        ("SET spark.sql.runSQLOnFiles=true;\nSELECT 1 AS a", "uses SET, which changes"),
        ("SET spark.sql.legacy.allowNonEmptyLocationInCTAS = true", "uses SET, which changes"),
        (
            "CREATE TEMPORARY VIEW v USING text OPTIONS (path '/etc/passwd')",
            "sets OPTIONS, which can point",
        ),
        (
            "CREATE TABLE t (a STRING) USING text OPTIONS (path '/etc/passwd')",
            "sets OPTIONS, which can point",
        ),
        ("CREATE TABLE t (a STRING) USING text LOCATION '/etc'", "sets a LOCATION"),
        ("ADD FILE /etc/passwd", "uses ADD FILE"),
        ("ADD ARCHIVES /x.zip", "uses ADD ARCHIVES"),
        (
            "CACHE TABLE c OPTIONS ('storageLevel' 'DISK_ONLY') AS SELECT * FROM s.a",
            "uses CACHE TABLE",
        ),
        ("EXECUTE IMMEDIATE 'SELECT * FROM text.`/etc/passwd`'", "uses EXECUTE IMMEDIATE"),
        ("LOAD DATA LOCAL INPATH '/etc/passwd' INTO TABLE s.a", "uses LOAD DATA"),
    ],
)
def test_statements_are_refused_saying_what_they_do(tmp_path: Path, sql: str, what: str) -> None:
    error = refused(tmp_path, model(sql))
    # A statement before the query is its pre-statement: "model s.d pre-statement 1 uses SET".
    assert error.message.startswith("model s.d ") and what in error.message, error.message


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM s.a WITH ('path' = '/etc/passwd')",  # read options on a table
        "TABLE text.`/etc/passwd`",
        "FROM text.`/etc/passwd`",  # Spark 4's FROM-first query
        "SELECT * FROM text.`/etc/passwd` |> SELECT value",
    ],
)
def test_other_spellings_of_a_file_read_are_refused(tmp_path: Path, sql: str) -> None:
    error = refused(tmp_path, model(sql))
    assert isinstance(error, ModelError)


@pytest.mark.parametrize("schema", ["text", "parquet", "CSV", "json", "binaryFile", "orc", "avro"])
def test_an_external_model_in_a_file_format_schema_is_refused(tmp_path: Path, schema: str) -> None:
    root = tmp_path / "p"
    (root / "models").mkdir(parents=True)
    (root / "models" / "m.sql").write_text(
        f"MODEL (name s.m, kind FULL);\nSELECT * FROM {schema.lower()}.notes\n"
    )
    (root / "external_models.yaml").write_text(f"- name: {schema}.notes\n  columns: {{a: int}}\n")
    with pytest.raises(SluiceError) as info:
        load_project(root, use_cache=False)
    text = str(info.value)
    assert "external_models.yaml:1" in text and "named like a file format" in text
