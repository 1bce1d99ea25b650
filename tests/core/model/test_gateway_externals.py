"""External models declared for a gateway (``gateway: prod`` in an external models file,
as ``../shared/compat/sqlmesh_sushi``'s external_models/prod.yaml): SQLMesh 0.236.4 loads
one only when that gateway is the project's (``default_gateway``, else the first of
``gateways``); Sluice does the same, with a note naming the file and line."""

from __future__ import annotations

from pathlib import Path

from sluice.core.model.definition import KindName
from tests.core.helpers import load

EXTERNALS = """
- name: raw.everywhere
  columns: {id: int}
- name: prod_raw.only_prod
  gateway: prod
  columns: {id: int}
"""
MODEL = "MODEL (name s.m, kind FULL);\nSELECT id FROM raw.everywhere\n"


def _externals(tmp_path: Path, config: str) -> set[str]:
    project = load(
        tmp_path, {"config.yaml": config, "external_models.yaml": EXTERNALS, "models/m.sql": MODEL}
    )
    return {n for n, m in project.models.items() if m.kind.name == KindName.EXTERNAL}


def test_an_external_model_of_another_gateway_is_left_out_with_a_note(tmp_path: Path) -> None:
    config = (
        "gateways:\n  local:\n    connection: {type: duckdb}\n"
        "  prod:\n    connection: {type: duckdb}\n"
        "default_gateway: local\nmodel_defaults:\n  dialect: duckdb\n  start: '2024-01-01'\n"
    )
    project = load(
        tmp_path, {"config.yaml": config, "external_models.yaml": EXTERNALS, "models/m.sql": MODEL}
    )
    assert "prod_raw.only_prod" not in project.models
    note = next(n for n in project.notes if "prod_raw.only_prod" in n)
    assert note.startswith(f"{tmp_path / 'external_models.yaml'}:3: external model")
    assert "gateway 'prod', not the project's (local)" in note


def test_it_is_loaded_on_its_own_gateway(tmp_path: Path) -> None:
    config = (
        "gateways:\n  prod:\n    connection: {type: duckdb}\n"
        "model_defaults:\n  dialect: duckdb\n  start: '2024-01-01'\n"
    )
    assert _externals(tmp_path / "a", config) == {"raw.everywhere", "prod_raw.only_prod"}
    plain = "model_defaults:\n  dialect: duckdb\n  start: '2024-01-01'\n"
    assert _externals(tmp_path / "b", plain) == {"raw.everywhere"}  # no gateway: not prod
