"""config.yaml's before_all / after_all never name a schema Sluice manages, and a plan's
id covers them (issue 40 §3: what an approval covers is what the job runs)."""

from __future__ import annotations

import pytest

from sluice.core import jobs
from sluice.core.config import ModelDefaults, parse_config
from sluice.core.errors import ConfigError
from sluice.core.model.parse import parse_model
from sluice.core.plan.build import PlanRequest, build_plan
from sluice.core.plan.plan import Plan
from sluice.core.snapshot.fingerprint import fingerprint_models
from sluice.core.yamlio import parse_yaml

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
