"""A pull request's statements never name the schema of prod's views, whatever its own
plan says (red team F2).

The schemas a statement may not name were the plan's own models' (with views), so a PR
that turned prod's ``shop.orders`` (FULL) into an external or EMBEDDED model, or deleted
it and declared it external, had no model in ``shop`` any more: its model's
pre-statement or config.yaml's ``before_all`` could then create ``shop.customers`` in
prod's view schema before anyone approved it. The schemas Sluice manages come from
prod's environment as in force (its models' view and physical schemas, read from state
when the job is made), plus the PR's own models of every kind but external. And a
statement's table or view is named with its schema: an unqualified name lands in
Spark's current database (``default``), which may be prod's too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sluice.core import jobs, workflow
from sluice.core.errors import ConfigError, ModelError, SluiceError
from sluice.core.plan import statements
from sluice.core.spark.submit import JobResult
from sluice.core.state import open_state
from sluice.core.timeutil import to_ms
from tests.core.helpers import load

END = to_ms("2024-01-03")
CONFIG = "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n"
PROD = {
    "config.yaml": CONFIG,
    "models/a.sql": "MODEL (name shop.orders, kind FULL);\nSELECT 1 AS id\n",
    "models/t.sql": "MODEL (name x.t, kind FULL);\nSELECT 1 AS id\n",
}
FORGE = (
    "MODEL (name x.t, kind FULL);\n"
    "CREATE TABLE IF NOT EXISTS shop.customers AS SELECT 'forged' AS note;\n"
    "SELECT 1 AS id\n"
)
# How a PR takes shop.orders out of its own plan's models with views.
TURNED = {
    "external": {"external_models.yaml": "- name: shop.orders\n  columns: {id: int}\n"},
    "embedded": {"models/a.sql": "MODEL (name shop.orders, kind EMBEDDED);\nSELECT 1 AS id\n"},
}


class _Recorder:
    def __init__(self) -> None:
        self.specs: list[dict[str, Any]] = []

    def run(self, spec: dict[str, Any]) -> JobResult:
        self.specs.append(spec)
        return JobResult(spec["job_id"], {}, 0.1, None)


def _apply_pr(tmp_path: Path, files: dict[str, str]) -> tuple[_Recorder, Exception | None]:
    """Apply prod's project to prod, then ``files`` to pr_7: the runner and the error."""
    store = open_state(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        prod = load(tmp_path / "prod", PROD)
        plan = workflow.plan_environment(prod, store, "prod", end=END, execution_time=END)
        workflow.apply_plan(prod, store, plan, _Recorder(), now=END)
        pr = load(tmp_path / "pr", files)
        plan = workflow.plan_environment(pr, store, "pr_7", end=END, execution_time=END)
        runner = _Recorder()
        try:
            workflow.apply_plan(pr, store, plan, runner, now=END)
        except SluiceError as exc:
            return runner, exc
        return runner, None
    finally:
        store.close()


@pytest.mark.parametrize("how", sorted(TURNED))
def test_a_model_statement_may_not_create_in_prod_s_schema_a_pr_took_from_its_plan(
    tmp_path: Path, how: str
) -> None:
    files = {"config.yaml": CONFIG, "models/t.sql": FORGE, **TURNED[how]}
    if how == "external":
        files.pop("models/a.sql", None)  # deleted, and declared external
    runner, error = _apply_pr(tmp_path, files)
    assert runner.specs == []  # no job ran
    assert isinstance(error, ModelError), error
    assert "names the schema 'shop'" in error.message
    assert error.path is not None and error.path.endswith("t.sql")


@pytest.mark.parametrize("how", sorted(TURNED))
def test_before_all_may_not_create_in_prod_s_schema_a_pr_took_from_its_plan(
    tmp_path: Path, how: str
) -> None:
    config = CONFIG + "before_all:\n  - CREATE TABLE IF NOT EXISTS shop.customers (note STRING)\n"
    files = {
        "config.yaml": config,
        "models/t.sql": "MODEL (name x.t, kind FULL);\nSELECT 2 AS id\n",
        **TURNED[how],
    }
    runner, error = _apply_pr(tmp_path, files)
    assert runner.specs == []
    assert isinstance(error, ConfigError), error
    assert "names the schema 'shop'" in error.message


def test_the_control_other_schemas_run(tmp_path: Path) -> None:
    files = {
        "config.yaml": CONFIG,
        "models/t.sql": FORGE.replace("shop.customers", "raw.customers"),
        **TURNED["external"],
    }
    runner, error = _apply_pr(tmp_path, files)
    assert error is None
    [spec] = runner.specs
    assert any(s.get("id") == "pre_statements x.t" for s in spec["steps"])


def test_prod_schemas_are_prod_s_views_and_tables_not_its_externals(tmp_path: Path) -> None:
    store = open_state(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        assert jobs.prod_schemas(store) == frozenset()
        files = {**PROD, "external_models.yaml": "- name: raw.src\n  columns: {id: int}\n"}
        prod = load(tmp_path / "prod", files)
        plan = workflow.plan_environment(prod, store, "prod", end=END, execution_time=END)
        workflow.apply_plan(prod, store, plan, _Recorder(), now=END)
        assert jobs.prod_schemas(store) == {"shop", "x", "sluice__shop", "sluice__x"}
    finally:
        store.close()


@pytest.mark.parametrize(
    "statement",
    [
        "CREATE VIEW IF NOT EXISTS revenue AS SELECT 1 AS id",
        "CREATE TABLE IF NOT EXISTS revenue (id INT)",
        "CREATE TABLE IF NOT EXISTS raw.r AS SELECT * FROM revenue",
    ],
)
def test_a_statement_names_its_tables_with_their_schema(tmp_path: Path, statement: str) -> None:
    model = f"MODEL (name x.t, kind FULL);\n{statement};\nSELECT 1 AS id\n"
    with pytest.raises(ModelError) as exc:
        load(tmp_path / "m", {"config.yaml": CONFIG, "models/t.sql": model})
    assert exc.value.line == 2, str(exc.value)
    assert "'revenue' without its schema" in exc.value.message
    assert "write schema.revenue (e.g. raw.revenue)" in exc.value.message
    config = CONFIG + f"before_all:\n  - {statement}\n"
    with pytest.raises(ConfigError) as caught:
        load(
            tmp_path / "c",
            {
                "config.yaml": config,
                "models/t.sql": "MODEL (name x.t, kind FULL);\nSELECT 1 AS id\n",
            },
        )
    assert caught.value.line == 5, str(caught.value)
    assert "write schema.revenue" in caught.value.message
    assert statements.check(statement) is not None  # and the driver's check refuses it


@pytest.mark.parametrize("kind", ["SCHEMA", "DATABASE"])
def test_a_schema_is_named_by_its_name(kind: str) -> None:
    assert statements.check(f"CREATE {kind} IF NOT EXISTS raw") is None


def test_a_cte_is_no_unqualified_table(tmp_path: Path) -> None:
    statement = "CREATE TABLE IF NOT EXISTS raw.r AS WITH c AS (SELECT 1 AS id) SELECT id FROM c"
    model = f"MODEL (name x.t, kind FULL);\n{statement};\nSELECT 1 AS id\n"
    project = load(tmp_path, {"config.yaml": CONFIG, "models/t.sql": model})
    assert project.models["x.t"].pre_statements == (statement,)
