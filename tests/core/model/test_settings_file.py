"""Sluice's own settings in sluice.yaml beside the project's config (issue 41): a file
SQLMesh never reads, so a project keeps loading in SQLMesh, and a project configured in
config.py can hold them too. A `sluice:` section in config.yaml is still read; both at
once is an error."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.core.config import SETTINGS_FILES, load_config
from sluice.core.errors import ConfigError
from sluice.core.model.loader import load_project
from sluice.core.model.pycode import config_file as pycode_config

CONFIG = "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n"
SETTINGS = (
    "project: shop\ngate:\n  required_approvers:\n    users: [bob]\npr:\n  backfill_days: 3\n"
)
MODEL = "MODEL (name shop.orders, kind FULL);\nSELECT 1 AS id\n"


def _project(root: Path, files: dict[str, str]) -> Path:
    (root / "models").mkdir(parents=True, exist_ok=True)
    (root / "models" / "orders.sql").write_text(MODEL)
    for name, text in files.items():
        (root / name).write_text(text)
    return root


def test_sluice_yaml_holds_the_settings_and_config_yaml_stays_sqlmeshs(tmp_path: Path) -> None:
    _project(tmp_path, {"config.yaml": CONFIG, "sluice.yaml": SETTINGS})
    config = load_config(tmp_path)
    assert config.sluice.project == "shop"
    assert config.sluice.gate.required_approvers.users == ("bob",)
    assert config.sluice.pr.backfill_days == 3
    assert config.model_defaults.start is not None  # config.yaml is read as well
    assert not any("sluice" in note for note in config.notes)
    project = load_project(tmp_path, use_cache=False)
    assert project.config.sluice.project == "shop"


def test_the_same_settings_either_way_are_equal(tmp_path: Path) -> None:
    section = CONFIG + "sluice:\n" + "".join(f"  {line}\n" for line in SETTINGS.splitlines())
    _project(tmp_path / "a", {"config.yaml": CONFIG, "sluice.yaml": SETTINGS})
    _project(tmp_path / "b", {"config.yaml": section})
    assert load_config(tmp_path / "a").sluice == load_config(tmp_path / "b").sluice


def test_sluice_yml_and_no_config_at_all(tmp_path: Path) -> None:
    _project(tmp_path, {"sluice.yml": SETTINGS})
    assert load_config(tmp_path).sluice.gate.required_approvers.users == ("bob",)


def test_a_section_in_config_yaml_is_read_with_a_note_naming_sluice_yaml(tmp_path: Path) -> None:
    _project(tmp_path, {"config.yaml": CONFIG + "sluice:\n  project: shop\n"})
    config = load_config(tmp_path)
    assert config.sluice.project == "shop"
    [note] = [n for n in config.notes if "sluice.yaml" in n]
    assert "config.yaml:4:" in note and "SQLMesh refuses" in note


def test_ignored_sqlmesh_sections_point_at_sluice_yaml(tmp_path: Path) -> None:
    _project(tmp_path, {"config.yaml": CONFIG + "linter:\n  enabled: true\n"})
    [note] = load_config(tmp_path).notes
    assert "ignored linter (line 4)" in note and "go in sluice.yaml" in note
    assert "'sluice:'" not in note


@pytest.mark.parametrize(
    ("files", "where", "words"),
    [
        (
            {"config.yaml": CONFIG + "sluice:\n  project: other\n", "sluice.yaml": SETTINGS},
            "config.yaml:4",
            "both sluice.yaml and the `sluice:` section of config.yaml",
        ),
        ({"sluice.yaml": SETTINGS, "sluice.yml": SETTINGS}, "sluice.yml:1", "both sluice.yaml"),
        ({"sluice.yaml": "sluice:\n  project: shop\n"}, "sluice.yaml:1", "not a `sluice:`"),
        ({"sluice.yaml": "- project\n"}, "sluice.yaml:1", "must be a mapping"),
        ({"sluice.yaml": "project: shop\ngatee: {}\n"}, "sluice.yaml:2", "'sluice.gatee'"),
        (
            {"sluice.yaml": "pr:\n  backfill_days: many\n"},
            "sluice.yaml:2",
            "'sluice.pr.backfill_days'",
        ),
        (  # plain YAML: Jinja is text, never rendered
            {"sluice.yaml": 'pr:\n  backfill_days: "{{ 3 }}"\n'},
            "sluice.yaml:2",
            "'sluice.pr.backfill_days'",
        ),
    ],
)
def test_a_wrong_settings_file_is_an_error_at_its_line(
    tmp_path: Path, files: dict[str, str], where: str, words: str
) -> None:
    _project(tmp_path, files)
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path)
    name, line = where.split(":")
    assert words in str(caught.value)
    assert Path(str(caught.value.path)).name == name and caught.value.line == int(line)


def test_a_config_py_project_takes_its_settings_from_sluice_yaml(tmp_path: Path) -> None:
    # config.py cannot hold Sluice's settings (they are never the project's code); its
    # sluice.yaml can, so such a project can have a gate.
    config_py = (
        "from sqlmesh.core.config import Config, ModelDefaultsConfig\n"
        "config = Config(model_defaults=ModelDefaultsConfig(dialect='spark', start='2024-01-01'))\n"
    )
    _project(tmp_path, {"config.py": config_py, "sluice.yaml": SETTINGS})
    config = load_config(tmp_path, python=pycode_config.read)
    assert config.sluice.gate.required_approvers.users == ("bob",)
    assert config.model_defaults.dialect == "spark"


def test_the_names_are_one_constant() -> None:
    assert SETTINGS_FILES == ("sluice.yaml", "sluice.yml")
