"""SQLMesh custom materializations (``kind CUSTOM (materialization 'name', ...)``, issue
41): a Python class of the project's that writes the table through SQLMesh's engine
adapter, which Sluice does not run on Spark. The model loads and is planned; the
trusted ``sluice.materializations`` (the prod branch's settings, never a pull request's
own) may map the materialization to the built-in kind it builds as (``custom_full:
FULL``); without a mapping the plan says so (file:line, what to set) and the build of
that model is refused before the job starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.core.config import SluiceSettings
from sluice.core.errors import ModelError
from sluice.core.model.definition import KindName
from sluice.core.model.loader import load_project
from sluice.core.snapshot.fingerprint import fingerprint_models
from sluice.core.spark.render import build_steps
from sluice.core.timeutil import to_ms
from tests.core.helpers import load, plan_of, write_project

END = to_ms("2024-01-03")
FILES = {
    "config.yaml": """
        model_defaults:
          dialect: duckdb
          start: '2024-01-01'
    """,
    "models/orders.sql": """
        MODEL (name s.orders, kind FULL);
        SELECT 1 AS id
    """,
    "models/active.sql": """
        MODEL (
          name s.active,
          kind CUSTOM (
            materialization 'custom_full',
            materialization_properties (custom_property = 'x')
          ),
        );
        SELECT id FROM s.orders
    """,
}


def test_an_unmapped_custom_materialization_is_planned_and_its_build_refused(
    tmp_path: Path,
) -> None:
    project = load(tmp_path, FILES)
    model = project.models["s.active"]
    assert model.kind.name == KindName.CUSTOM and model.kind.materialization == "custom_full"
    assert model.depends_on == ("s.orders",)
    path = str(tmp_path / "models" / "active.sql")
    (refused,) = [n for n in project.notes if "has kind CUSTOM" in n]
    assert refused.startswith(f"{path}:1: model s.active has kind CUSTOM (materialization")
    assert "sluice: {materializations: {custom_full: FULL}}" in refused
    assert any(
        n.startswith(f"{path}:5: materialization_properties") and "not used" in n
        for n in project.notes
    )
    plan = plan_of(project, end=END)
    assert {b.name for b in plan.backfill} == {"s.orders", "s.active"}
    with pytest.raises(ModelError, match=r"model s\.active is not built") as exc:
        build_steps(plan, project.audits, str(tmp_path), "parquet")
    assert exc.value.path == path and exc.value.line == 1
    assert exc.value.hint and "materializations: {custom_full: FULL}" in exc.value.hint


def test_the_trusted_settings_map_a_materialization_to_a_built_in_kind(
    tmp_path: Path,
) -> None:
    root = write_project(tmp_path, FILES)
    trusted = SluiceSettings(materializations={"Custom_Full": "FULL"})
    project = load_project(root, use_cache=False, sluice=trusted)
    model = project.models["s.active"]
    assert model.kind.name == KindName.FULL and model.kind.materialization == "custom_full"
    assert any("built as kind FULL" in n for n in project.notes)
    plan = plan_of(project, end=END)
    steps = build_steps(plan, project.audits, str(tmp_path), "parquet")
    assert [s["model"] for s in steps if s["type"] == "build"] == ["s.orders", "s.active"]
    # Another kind for it is another version of the model.
    as_view = load_project(
        root, use_cache=False, sluice=SluiceSettings(materializations={"custom_full": "VIEW"})
    )
    versions = [
        fingerprint_models(p.models, p.audits)["s.active"].version for p in (project, as_view)
    ]
    assert versions[0] != versions[1]


def test_a_pull_request_s_own_mapping_is_not_used_when_the_trusted_settings_are_given(
    tmp_path: Path,
) -> None:
    # The service loads a pull request's tree with the prod branch's `sluice:` settings
    # (bot/flow/trust.py load_trusted): the head's own section maps nothing then.
    files = dict(FILES)
    files["config.yaml"] = (
        "model_defaults: {dialect: duckdb, start: '2024-01-01'}\n"
        "sluice:\n  materializations:\n    custom_full: FULL\n"
    )
    root = write_project(tmp_path, files)
    assert load_project(root, use_cache=False).models["s.active"].kind.name == KindName.FULL
    prod = SluiceSettings()
    trusted = load_project(root, use_cache=False, sluice=prod)
    assert trusted.models["s.active"].kind.name == KindName.CUSTOM


def test_only_built_in_kinds_without_parameters_may_be_mapped() -> None:
    with pytest.raises(ValueError, match="FULL"):
        SluiceSettings(materializations={"custom_full": "INCREMENTAL_BY_TIME_RANGE"})  # type: ignore[dict-item]
