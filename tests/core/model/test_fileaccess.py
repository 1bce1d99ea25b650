"""SQL that reaches past the catalog: found, refused, and let through by sluice.allowed_paths.

The refusals themselves, one per kind, are rows of test_broken_projects.py.
"""

from pathlib import Path

import pytest
import sqlglot

from sluice.core.errors import ModelError
from sluice.core.model.fileaccess import find_in_text, find_in_tree, path_allowed
from sluice.core.model.loader import load_project
from tests.core.helpers import BASIC, load, write_project

ALLOW = "sluice:\n  allowed_paths: ['/data/landing/*', 's3://bucket/raw/*']\n"


def found(sql: str, dialect: str = "spark") -> list[tuple[str, str | None, int, int]]:
    tree = sqlglot.parse_one(sql, read=dialect)
    return [(a.what, a.path, a.line, a.col) for a in find_in_tree(tree)]


def test_the_tree_names_each_access_and_where_it_starts() -> None:
    sql = (
        "SELECT reflect('java.lang.System', 'getenv', 'HOME') AS home\n"
        "FROM s.t JOIN text.`/etc/passwd` AS p ON TRUE\n"
        "CROSS JOIN read_files('/data/x') AS f"
    )
    assert found(sql) == [
        ("calls reflect(), which runs any Java method", None, 1, 8),
        ("reads the file '/etc/passwd' directly (text.`/etc/passwd`)", "/etc/passwd", 2, 15),
        ("reads the file '/data/x' directly (read_files())", "/data/x", 3, 12),
    ]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT input_file_name() AS f FROM s.t",
        "SELECT * FROM csv.orders",  # a schema named csv: a table, or an unknown reference
        "SELECT * FROM range(10)",
        "SELECT from_protobuf(b, 'com.example.Event') AS e FROM s.t",  # a class, no file
        "SELECT transform(xs, x -> x + 1) AS ys FROM s.t",  # the higher-order function
        "SELECT `csv`.`my col` FROM s.t AS csv",  # a column of a table aliased csv
    ],
)
def test_plain_sql_reaches_nothing(sql: str) -> None:
    assert found(sql) == []


def test_hive_built_ins_spark_resolves_are_found() -> None:
    sql = "SELECT in_file(name, '/etc/passwd') AS a, reflect2(name, 'getBytes') AS b FROM s.t"
    assert [(a[0], a[1]) for a in found(sql)] == [
        ("reads the file '/etc/passwd' directly (in_file())", "/etc/passwd"),
        ("calls reflect2(), which runs any Java method", None),
    ]


def test_a_path_in_a_variable_is_not_a_literal() -> None:
    assert found("SELECT * FROM read_files(concat('/data/', 'x'))") == [
        ("calls read_files() with a path that is not a string literal", None, 1, 15)
    ]


def test_another_dialects_file_functions_are_found() -> None:
    assert [a[1] for a in found("SELECT * FROM read_csv_auto('/x.csv')", "duckdb")] == ["/x.csv"]


def test_text_that_does_not_parse_is_scanned_outside_literals_and_comments() -> None:
    text = (
        "INSERT OVERWRITE LOCAL DIRECTORY '/tmp/out' -- ADD JAR /x.jar\n"
        "SELECT 'parquet.`/not/read`', * FROM json.`/data/in` WHERE reflect ('a', 'b')"
    )
    assert [(a.what, a.path, a.line, a.col) for a in find_in_text(text)] == [
        ("uses INSERT OVERWRITE DIRECTORY, which writes files", None, 1, 1),
        ("reads the file '/data/in' directly (json.`/data/in`)", "/data/in", 2, 38),
        ("calls reflect(), which runs any Java method", None, 2, 60),
    ]


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("/data/landing/orders.csv", True),
        ("/data/landing/2024/orders.csv", True),  # fnmatch's * crosses folders
        ("s3://bucket/raw/x", True),
        ("/data/landingzone/x", False),
        ("/data/landing/../secrets/x", False),  # a '..' segment is never allowed
        ("/data/landing/.\\./secrets/x", False),  # nor a backslash: Hadoop reads .\. as ..
        ("/data/landing/x\\y", False),
        ("/DATA/landing/x", False),  # paths are case-sensitive
        ("/etc/passwd", False),
    ],
)
def test_path_allowed(path: str, allowed: bool) -> None:
    assert path_allowed(path, ["/data/landing/*", "s3://bucket/raw/*"]) is allowed


def test_an_allowed_path_is_read_and_is_no_dependency(tmp_path: Path) -> None:
    project = load(
        tmp_path,
        {
            **BASIC,
            "config.yaml": ALLOW,
            "models/d.sql": """
                MODEL (name s.d, kind FULL);
                SELECT o.id, a.name
                FROM parquet.`/data/landing/orders` AS o
                JOIN s.a AS a ON o.id = a.id
                JOIN csv.`s3://bucket/raw/x.csv` AS x ON x.id = o.id
            """,
            "audits/landing.sql": """
                AUDIT (name matches_landing);
                SELECT * FROM @this_model WHERE id NOT IN (SELECT id FROM json.`/data/landing/ids`)
            """,
        },
    )
    model = project.models["s.d"]
    assert model.depends_on == ("s.a",)
    assert model.query_sql is not None and "parquet.`/data/landing/orders`" in model.query_sql
    assert "matches_landing" in project.audits


def test_an_allowed_path_passes_in_another_dialect(tmp_path: Path) -> None:
    project = load(
        tmp_path,
        {
            "config.yaml": ALLOW,
            "models/d.sql": """
                MODEL (name s.d, kind FULL, dialect duckdb);
                SELECT * FROM read_parquet('/data/landing/x.parquet')
            """,
        },
    )
    assert project.models["s.d"].query_sql == "SELECT * FROM parquet.`/data/landing/x.parquet`"


def test_a_model_parsed_under_a_wider_allow_list_is_checked_again(tmp_path: Path) -> None:
    files = {
        "config.yaml": ALLOW,
        "models/d.sql": "MODEL (name s.d, kind FULL);\nSELECT * FROM text.`/data/landing/x`",
    }
    root = write_project(tmp_path, files)
    load_project(root)  # parsed and cached under the allow-list
    (root / "config.yaml").write_text("sluice: {}\n")
    with pytest.raises(ModelError) as info:
        load_project(root)
    assert info.value.message == (
        "model s.d reads the file '/data/landing/x' directly (text.`/data/landing/x`)"
    )


def test_every_error_of_a_project_is_reported_at_once(tmp_path: Path) -> None:
    with pytest.raises(Exception) as info:
        load(
            tmp_path,
            {
                **BASIC,
                "models/d.sql": "MODEL (name s.d);\nSELECT * FROM text.`/etc/passwd`",
                "models/e.sql": "MODEL (name s.e);\nSELECT reflect('a', 'b') AS x",
            },
        )
    text = str(info.value)
    assert "models/d.sql:2:15: model s.d reads the file '/etc/passwd' directly" in text
    assert "models/e.sql:2:8: model s.e calls reflect()" in text


def test_a_seed_linked_to_a_file_outside_the_project_is_refused(tmp_path: Path) -> None:
    # Seeds are the one file a project reads by path, and Sluice reads them itself.
    outside = tmp_path / "secret.csv"
    outside.write_text("id\n1\n")
    root = write_project(
        tmp_path / "p", {"models/s.sql": "MODEL (name s.s, kind SEED (path '../seeds/s.csv'));"}
    )
    (root / "seeds").mkdir()
    (root / "seeds" / "s.csv").symlink_to(outside)
    with pytest.raises(ModelError) as info:
        load_project(root, use_cache=False)
    # Refused before anything is read: every link leaving the project is (pycode.files).
    assert info.value.message.startswith("the symbolic link s.csv points outside the project")
    assert info.value.path == str(root / "seeds" / "s.csv")
