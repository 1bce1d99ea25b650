"""A model's pre- and post-statements, and project statements that change what may exist
already (issue 41, item 6; ``../shared/compat/sqlmesh_sushi``'s customers.sql and
config.py: ``CREATE SCHEMA IF NOT EXISTS raw; DROP VIEW IF EXISTS raw.demographics;
CREATE VIEW raw.demographics AS (...)``).

The rule (docs in the README's project format, ``before_all`` / pre- and post-statements):
a model's statements are checked as config.yaml's ``before_all`` are. Those of the
allow-list (``CREATE SCHEMA|TABLE|VIEW ... IF NOT EXISTS``; a query, for a model) run in
the model's build, in a ``sql`` step the driver checks again. A ``DROP TABLE|VIEW`` or a
``CREATE`` without ``IF NOT EXISTS`` (or ``OR REPLACE``), run by a pull request's build,
would change objects outside its environment before anyone approved it: Sluice never
runs one. The project still loads and plans (the statement is part of the model's
version, so an edit is a change reviewed and approved; for ``before_all``, of the plan's
id and its review item); the plan's notes name it with file:line and what to do, and
the build that would run it is refused before the job starts (the model's; for
``before_all`` / ``after_all``, every job's). Anything else outside the allow-list
(``USING jdbc``, ``ADD JAR``, ``SET``, files) stays an error of the load.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sluice.core import jobs
from sluice.core.errors import ConfigError, ModelError
from sluice.core.model.definition import KindName
from sluice.core.plan import statements
from sluice.core.snapshot.fingerprint import fingerprint_models
from sluice.core.spark.render import build_steps
from sluice.core.spark.steps.context import StepContext
from sluice.core.spark.steps.sql import run_sql
from sluice.core.timeutil import to_ms
from tests.core.helpers import load, plan_of

END = to_ms("2024-01-03")
CONFIG = "model_defaults:\n  dialect: duckdb\n  start: '2024-01-01'\n"
SAFE = """
    MODEL (name s.customers, kind FULL);

    CREATE SCHEMA IF NOT EXISTS raw;
    CREATE VIEW IF NOT EXISTS raw.demographics AS (SELECT 1 AS customer_id, '00000' AS zip);

    SELECT d.customer_id, d.zip FROM raw.demographics AS d;

    CREATE TABLE IF NOT EXISTS raw.seen (customer_id INT);
"""
SUSHI = """
    MODEL (name s.customers, kind FULL);

    CREATE SCHEMA IF NOT EXISTS raw;
    DROP VIEW IF EXISTS raw.demographics;
    CREATE VIEW raw.demographics AS (
      SELECT 1 AS customer_id, '00000' AS zip
    );

    SELECT d.customer_id, d.zip FROM raw.demographics AS d
"""


def _files(model: str, config: str = CONFIG) -> dict[str, str]:
    return {
        "config.yaml": config,
        "external_models.yaml": "- name: raw.demographics\n  columns: {customer_id: int, zip: text}\n",
        "models/customers.sql": model,
    }


def test_allow_listed_statements_run_around_the_model_s_build(tmp_path: Path) -> None:
    project = load(tmp_path, _files(SAFE))
    model = project.models["s.customers"]
    assert model.pre_statements == (
        "CREATE SCHEMA IF NOT EXISTS raw",
        "CREATE VIEW IF NOT EXISTS raw.demographics AS (SELECT 1 AS customer_id, '00000' AS zip)",
    )
    assert model.post_statements == ("CREATE TABLE IF NOT EXISTS raw.seen (customer_id INT)",)
    assert model.query_sql == "SELECT d.customer_id, d.zip FROM raw.demographics AS d"
    assert model.statement_refusals == ()
    steps = build_steps(plan_of(project, end=END), project.audits, str(tmp_path), "parquet")
    around = [(s["type"], s.get("id"), s.get("statements")) for s in steps[1:]]
    assert around == [
        ("sql", "pre_statements s.customers", list(model.pre_statements)),
        ("build", None, None),
        ("sql", "post_statements s.customers", list(model.post_statements)),
    ]


def test_a_statement_that_changes_what_exists_is_planned_and_its_build_refused(
    tmp_path: Path,
) -> None:
    project = load(tmp_path, _files(SUSHI))  # the project loads: no error
    model = project.models["s.customers"]
    path = str(tmp_path / "models" / "customers.sql")
    lines = [line for line, _, _ in model.statement_refusals]
    assert lines == [4, 5]  # the DROP and the CREATE without IF NOT EXISTS, at their lines
    notes = [n for n in project.notes if "Sluice does not run it" in n]
    assert [n.split(": model")[0] for n in notes] == [f"{path}:4", f"{path}:5"]
    assert "DROP VIEW IF EXISTS raw.demographics" in notes[0]
    assert "CREATE VIEW IF NOT EXISTS" in notes[0]  # the hint says what to write instead
    plan = plan_of(project, end=END)
    assert "s.customers" in {b.name for b in plan.backfill}
    with pytest.raises(ModelError, match=r"model s\.customers is not built") as exc:
        build_steps(plan, project.audits, str(tmp_path), "parquet")
    assert (exc.value.path, exc.value.line) == (path, 4)


def test_an_edit_of_a_statement_is_a_new_version_of_the_model(tmp_path: Path) -> None:
    first = load(tmp_path / "a", _files(SAFE))
    edited = load(tmp_path / "b", _files(SAFE.replace("raw.seen", "raw.seen_too")))
    versions = [
        fingerprint_models(p.models, p.audits)["s.customers"].version for p in (first, edited)
    ]
    assert versions[0] != versions[1]


@pytest.mark.parametrize(
    ("statement", "fragment"),
    [
        ("ADD JAR /tmp/x.jar", "ADD JAR"),
        ("SET spark.sql.runSQLOnFiles = true", "SET"),
        ("CREATE TABLE IF NOT EXISTS raw.m USING jdbc OPTIONS (url 'jdbc:x')", "OPTIONS"),
        ("CREATE TEMPORARY FUNCTION f AS 'x.Y'", "CREATE FUNCTION"),
        ("INSERT INTO raw.seen SELECT 1", "INSERT"),
    ],
)
def test_other_statements_outside_the_allow_list_stay_errors(
    tmp_path: Path, statement: str, fragment: str
) -> None:
    model = f"MODEL (name s.t, kind FULL);\n{statement};\nSELECT 1 AS id\n"
    with pytest.raises(ModelError) as exc:
        load(tmp_path, {"config.yaml": CONFIG, "models/t.sql": model})
    assert exc.value.line == 2 and fragment in exc.value.message.upper(), str(exc.value)


def test_project_statements_that_change_what_exists_load_and_refuse_every_job(
    tmp_path: Path,
) -> None:
    config = CONFIG + (
        "before_all:\n"
        "  - CREATE SCHEMA IF NOT EXISTS raw\n"
        "  - DROP VIEW IF EXISTS raw.demographics\n"
        "  - CREATE OR REPLACE VIEW raw.demographics AS SELECT 1 AS customer_id\n"
    )
    project = load(tmp_path, _files("MODEL (name s.t, kind FULL);\nSELECT 1 AS id\n", config))
    assert len(project.before_all) == 3  # kept: in the plan's id and its review item
    yaml = str(tmp_path / "config.yaml")
    notes = [n for n in project.notes if "refuses every job" in n]
    assert [n.split(": before_all")[0] for n in notes] == [f"{yaml}:6", f"{yaml}:7"]
    plan = plan_of(project, end=END, before_all=project.before_all)
    with pytest.raises(ConfigError, match=r"before_all statement 2 .* not one Sluice runs"):
        jobs.apply_job(
            plan,
            audits=project.audits,
            project_dir=project.path,
            table_format="parquet",
            previous_versions=None,
            now=END,
            prod_schemas=frozenset(),
            before_all=project.before_all,
        )


class _Spark:
    def __init__(self) -> None:
        self.ran: list[str] = []

    def sql(self, statement: str) -> Any:
        self.ran.append(statement)
        return self

    def collect(self) -> list[Any]:
        return []


_CTX = StepContext(job={"job_id": "t", "kind": "apply", "steps": []}, emit=lambda _e: None)


@pytest.mark.parametrize("step_id", ["pre_statements s.t", "post_statements s.t", "before_all"])
def test_the_driver_refuses_a_statement_that_changes_what_exists(step_id: str) -> None:
    # Whatever made the job: a model's statement steps are checked as before_all's are.
    spark = _Spark()
    step: Any = {
        "type": "sql",
        "id": step_id,
        "label": "x",
        "statements": ["CREATE SCHEMA IF NOT EXISTS raw", "DROP VIEW IF EXISTS raw.v"],
    }
    with pytest.raises(ValueError, match="statement 2 is not one Sluice runs"):
        run_sql(spark, step, _CTX)  # type: ignore[arg-type]
    assert spark.ran == []
    assert statements.checked_step(step_id) is (step_id != "before_all")


def test_the_sushi_project_loads_every_model(tmp_path: Path) -> None:
    # ../shared/compat/sqlmesh_sushi (SQLMesh's example, Apache-2.0), unmodified: its
    # customers.sql's statements and config.py's before_all are named, not errors.
    import shutil

    shared = Path(__file__).resolve().parents[3] / "shared" / "compat" / "sqlmesh_sushi"
    if not shared.is_dir():
        pytest.skip("../shared/compat is not here")
    from sluice.core.model.loader import load_project

    root = tmp_path / "sushi"
    shutil.copytree(shared, root)
    project = load_project(root, use_cache=False)
    own = {n for n, m in project.models.items() if m.kind.name != KindName.EXTERNAL}
    assert len(own) == 17 and "sushi.customers" in own and "sushi.waiters" in own
    assert project.models["sushi.customers"].statement_refusals
