"""Where a SQLMesh project keeps things (issue 20, item 5): config.yml, $root seed paths,
an external_models/ folder, names inferred from paths, before_all / after_all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sluice.core.errors import ConfigError, ModelError, ProjectErrors, SluiceError
from sluice.core.model.definition import KindName
from sluice.core.model.loader import load_project
from tests.core.helpers import BASIC, load, write_project


def error_of(root: Path, files: dict[str, str]) -> SluiceError:
    with pytest.raises(SluiceError) as info:
        load(root, files)
    assert not isinstance(info.value, ProjectErrors), str(info.value)
    return info.value


# --- config.yml ----------------------------------------------------------------------------

YML = "model_defaults:\n  dialect: duckdb\n  start: '2024-01-01'\n"


def test_config_yml_is_read_like_config_yaml(tmp_path: Path) -> None:
    files = {k: v for k, v in BASIC.items() if k != "config.yaml"}
    project = load(tmp_path, {**files, "config.yml": YML})
    # Before, config.yml was ignored and the models fell back to the Spark dialect.
    assert {m.dialect for m in project.models.values()} == {"duckdb"}


def test_both_config_files_is_an_error_naming_both(tmp_path: Path) -> None:
    error = error_of(tmp_path, {**BASIC, "config.yml": YML})
    assert isinstance(error, ConfigError)
    assert error.message == "the project has both config.yaml and config.yml"
    assert error.path == str(tmp_path / "config.yml") and error.line == 1
    assert error.hint == "keep one: merge config.yml into config.yaml and delete it"


def test_an_error_in_config_yml_names_that_file(tmp_path: Path) -> None:
    files = {k: v for k, v in BASIC.items() if k != "config.yaml"}
    error = error_of(tmp_path, {**files, "config.yml": "model_defaults:\n  dialekt: spark\n"})
    assert isinstance(error, ConfigError) and error.path == str(tmp_path / "config.yml")
    assert error.line == 2 and "dialekt" in error.message


# --- $root in seed paths -------------------------------------------------------------------

SEED_CSV = "id,name\n1,a\n2,b\n"


@pytest.mark.parametrize("marker", ["$root", "$ROOT"])
def test_a_seed_path_may_start_at_the_project_root(tmp_path: Path, marker: str) -> None:
    project = load(
        tmp_path,
        {
            **BASIC,
            "seeds/deep/x.csv": SEED_CSV,
            "models/staging/nested/x.sql": f"""
                MODEL (name s.x, kind SEED (path '{marker}/seeds/deep/x.csv'));
            """,
        },
    )
    seed = project.models["s.x"]
    assert seed.kind.name == KindName.SEED and seed.kind.seed_path == "seeds/deep/x.csv"
    assert [name for name, _ in seed.columns] == ["id", "name"] and seed.seed_hash


def test_a_root_seed_path_cannot_leave_the_project(tmp_path: Path) -> None:
    (tmp_path / "secret.csv").write_text(SEED_CSV)
    error = error_of(
        tmp_path / "p",
        {**BASIC, "models/x.sql": "MODEL (name s.x, kind SEED (path '$root/../secret.csv'));"},
    )
    assert isinstance(error, ModelError) and "leads outside the project" in error.message
    assert error.hint == "keep seed files inside the project, e.g. seeds/"


def test_a_missing_root_seed_says_where_it_looked(tmp_path: Path) -> None:
    error = error_of(
        tmp_path, {**BASIC, "models/x.sql": "MODEL (name s.x, kind SEED (path '$root/none.csv'));"}
    )
    assert isinstance(error, ModelError)
    assert f"(looked for {tmp_path.resolve() / 'none.csv'})" in error.message
    assert error.hint == "the path is relative to the model file (or, after $root/, to the project)"


# --- external_models/ ----------------------------------------------------------------------


def test_external_models_may_be_a_folder_of_yaml_files(tmp_path: Path) -> None:
    project = load(
        tmp_path,
        {
            **BASIC,
            "external_models.yaml": "- name: raw.one\n  columns: {id: int}\n",
            "external_models/sales.yaml": "- name: raw.orders\n  columns: {id: int}\n",
            "external_models/crm/people.yml": "- name: raw.people\n  columns: {id: int}\n",
            "external_models/empty.yaml": "",
            "models/d.sql": "MODEL (name s.d);\nSELECT o.id FROM raw.orders o JOIN raw.people p "
            "ON o.id = p.id JOIN raw.one r ON r.id = o.id",
        },
    )
    externals = {n for n, m in project.models.items() if m.kind.name == KindName.EXTERNAL}
    assert externals == {"raw.one", "raw.orders", "raw.people"}
    assert project.models["raw.people"].path.endswith("external_models/crm/people.yml")


def test_a_bad_file_in_external_models_names_itself(tmp_path: Path) -> None:
    error = error_of(
        tmp_path, {**BASIC, "external_models/bad.yaml": "- name: raw.x\n- columns: {id: int}\n"}
    )
    assert isinstance(error, ModelError) and error.message == "each external model needs a name"
    assert error.path == str(tmp_path / "external_models" / "bad.yaml") and error.line == 2


def test_the_same_external_table_twice_is_an_error(tmp_path: Path) -> None:
    error = error_of(
        tmp_path,
        {
            **BASIC,
            "external_models.yaml": "- name: raw.x\n",
            "external_models/more.yaml": "- name: raw.x\n",
        },
    )
    assert "model raw.x is defined twice" in error.message


# --- model names inferred from paths ---------------------------------------------------------

INFER = (
    "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\nmodel_naming:\n  infer_names: true\n"
)


def test_names_are_inferred_from_paths_when_asked(tmp_path: Path) -> None:
    project = load(
        tmp_path,
        {
            "config.yaml": INFER,
            "models/sales/orders.sql": "MODEL (kind FULL);\nSELECT 1 AS id",
            "models/sales/totals.sql": "SELECT id FROM sales.orders",  # no MODEL at all
            "models/named.sql": "MODEL (name other.named);\nSELECT id FROM sales.totals",
        },
    )
    assert list(project.models) == ["sales.orders", "sales.totals", "other.named"]
    assert project.models["sales.totals"].kind.name == KindName.VIEW
    assert project.models["sales.totals"].depends_on == ("sales.orders",)


def test_without_infer_names_a_model_needs_its_name(tmp_path: Path) -> None:
    error = error_of(
        tmp_path, {**BASIC, "models/sales/orders.sql": "MODEL (kind FULL);\nSELECT 1 AS id"}
    )
    assert error.message == "the model has no name" and error.hint
    assert "infer_names" in error.hint


@pytest.mark.parametrize(
    ("file", "inferred"),
    [("models/top.sql", "top"), ("models/x/cat/sales/orders.sql", "cat.sales.orders")],
)
def test_a_path_that_gives_no_schema_table_name_is_an_error(
    tmp_path: Path, file: str, inferred: str
) -> None:
    error = error_of(tmp_path, {"config.yaml": INFER, file: "SELECT 1 AS id"})
    assert isinstance(error, ModelError)
    problem = "names the unknown catalog 'cat'" if "cat" in inferred else "is not schema.table"
    assert error.message == (
        f"the model has no name, and the one inferred from its path, '{inferred}', {problem}"
    )
    assert error.path == str(tmp_path / file) and error.line == 1
    assert error.hint and "models/<schema>/<table>.sql" in error.hint
    assert ("spark.sql.catalog.cat" in error.hint) == ("cat" in inferred)


def test_a_path_under_the_default_catalog_names_the_model_without_it(tmp_path: Path) -> None:
    config = (
        INFER
        + "gateways:\n  local:\n    connection:\n      type: duckdb\n"
        + ("      database: data/local.duckdb\n")
    )
    root = write_project(
        tmp_path,
        {
            "config.yaml": config,
            "models/local/sales/orders.sql": "SELECT 1 AS id",
            "models/sales/items.sql": "SELECT id FROM local.sales.orders",
        },
    )
    project = load_project(root)
    assert set(project.models) == {"sales.orders", "sales.items"}
    assert project.models["sales.items"].depends_on == ("sales.orders",)


def test_turning_inference_on_is_not_served_from_the_cache(tmp_path: Path) -> None:
    root = write_project(
        tmp_path, {**BASIC, "models/sales/orders.sql": "MODEL (kind FULL);\nSELECT 1 AS id"}
    )
    with pytest.raises(ModelError):
        load_project(root)
    (root / "config.yaml").write_text(INFER)
    assert "sales.orders" in load_project(root).models


# --- before_all / after_all ----------------------------------------------------------------


def test_before_all_and_after_all_are_carried_as_spark_sql(tmp_path: Path) -> None:
    project = load(
        tmp_path,
        {
            **BASIC,
            "config.yaml": "model_defaults:\n  dialect: duckdb\n"
            "before_all:\n"
            "  - CREATE SCHEMA IF NOT EXISTS audit_log\n"
            "  - CREATE TABLE IF NOT EXISTS audit_log.analytics (tbl VARCHAR, eval_time VARCHAR)\n"
            "after_all:\n"
            "  - CREATE VIEW IF NOT EXISTS audit_log.latest AS SELECT 1 AS x\n",
        },
    )
    assert project.before_all == (
        "CREATE SCHEMA IF NOT EXISTS audit_log",
        "CREATE TABLE IF NOT EXISTS audit_log.analytics (tbl STRING, eval_time STRING)",
    )
    assert project.after_all == ("CREATE VIEW IF NOT EXISTS audit_log.latest AS SELECT 1 AS x",)
    # No longer dropped with a note saying they configure SQLMesh.
    assert not any("before_all" in n or "after_all" in n for n in project.notes)


@pytest.mark.parametrize(
    ("statement", "fragment"),
    [
        # (DROP TABLE, CREATE OR REPLACE VIEW and CREATE TABLE without IF NOT EXISTS load
        # and refuse every job: tests/security/test_model_statements.py.)
        ("INSERT INTO s.a SELECT 2, 'y'", "IF NOT EXISTS here"),
        ("SET spark.sql.ansi.enabled = true", "IF NOT EXISTS here"),
        ("CREATE TABLE IF NOT EXISTS t (x INT) LOCATION '/tmp/x'", "uses LOCATION '/tmp/x'"),
        ("ADD JAR /tmp/evil.jar", "IF NOT EXISTS here"),
        (
            "CREATE VIEW IF NOT EXISTS v AS SELECT reflect('java.lang.System', 'exit', 1) AS x",
            "reflect()",
        ),
        ("CREATE VIEW IF NOT EXISTS v AS SELECT * FROM parquet.`/etc`", "/etc"),
        ("@grant_select_privileges()", "uses a macro (@...)"),
        ("CREATE SCHEMA IF NOT EXISTS a; CREATE SCHEMA IF NOT EXISTS b", "found 2"),
        ("CREATE TABLE IF NOT EXISTS (", "cannot parse it"),
    ],
)
def test_a_statement_that_could_harm_is_refused(
    tmp_path: Path, statement: str, fragment: str
) -> None:
    config = "model_defaults:\n  dialect: spark\nafter_all:\n  - CREATE SCHEMA IF NOT EXISTS ok\n"
    config += f"before_all:\n  - {json.dumps(statement)}\n"
    error = error_of(tmp_path, {**BASIC, "config.yaml": config})
    assert fragment in str(error), str(error)
    assert error.path == str(tmp_path / "config.yaml") and error.line == 6
    assert error.message.startswith("before_all statement 1") and error.hint


@pytest.mark.parametrize(
    ("value", "fragment"),
    [("CREATE SCHEMA IF NOT EXISTS x", "expected a list"), ("['  ;  ']", "empty statement")],
)
def test_before_all_must_be_a_list_of_statements(tmp_path: Path, value: str, fragment: str) -> None:
    error = error_of(
        tmp_path,
        {**BASIC, "config.yaml": f"model_defaults:\n  dialect: spark\nbefore_all: {value}\n"},
    )
    assert isinstance(error, ConfigError) and fragment in error.message and error.line == 3
