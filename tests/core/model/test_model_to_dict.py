"""``Model.to_dict`` (the parse cache's and each snapshot's stored form) is hand-written for
speed (issue 21): it must stay exactly what ``dataclasses.asdict`` gives, on every model the
fixture and example projects hold (every kind, SCD settings, audits, Python models with
their config variables), and on values asdict deep-copies."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from sluice.core.model.definition import Kind, KindName, Model, Scd, TableRef
from sluice.core.model.loader import load_project

ROOT = Path(__file__).resolve().parents[3]
PROJECTS = sorted(
    [p for p in (ROOT / "tests" / "fixtures" / "sqlmesh_projects").iterdir() if p.is_dir()]
    + [ROOT / "tests" / "fixtures" / "sqlmesh_init_duckdb"]
    + [p for p in (ROOT / "examples").iterdir() if (p / "models").is_dir()]
)


@pytest.mark.parametrize("project", PROJECTS, ids=lambda p: p.name)
def test_to_dict_is_asdict_on_every_fixture_model(project: Path) -> None:
    models = load_project(project, use_cache=False).models.values()
    assert models
    for model in models:
        mine, theirs = model.to_dict(), asdict(model)
        assert mine == theirs, model.name
        # Same types, too (a tuple stays a tuple), so the cached JSON is the same text.
        assert repr(mine) == repr(theirs), model.name
        assert json.dumps(mine, default=str) == json.dumps(theirs, default=str)
        assert Model.from_dict(json.loads(json.dumps(mine))) == model


def test_to_dict_copies_what_asdict_copies() -> None:
    """Mutable values under ``Any`` (a Python model's config variables) come out as copies,
    so changing the result never changes the model."""
    nested = {"regions": ["eu", "us"], "limits": {"max": 3}}
    model = Model(
        name="shop.orders",
        kind=Kind(KindName.SCD_TYPE_2_BY_COLUMN, unique_key=("id",), scd=Scd(columns=("*",))),
        references=(TableRef("raw.orders", 2, 5),),
        python_variables=(("config", nested), ("n", 1.5), ("flag", None)),
    )
    mine = model.to_dict()
    assert mine == asdict(model) and repr(mine) == repr(asdict(model))
    mine["python_variables"][0][1]["regions"].append("ap")
    assert nested["regions"] == ["eu", "us"]
    assert isinstance(mine["kind"]["name"], KindName)
    assert replace(model, warnings=("x",)).to_dict()["warnings"] == ("x",)
