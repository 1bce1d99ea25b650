"""Every input Sluice reads has a row in docs/security.md's "Every input, classified"
(issue 40 §7: keep it from reopening).

The inputs are enumerated from the code that owns them, never from a list here: the
pydantic models of config.yaml (nested keys as dotted paths; ``sluice.gate`` and
``sluice.deploy`` through the models that validate them), the service's settings, the
Action's inputs, the MODEL header's properties and kind parameters, the loader's file
kinds, the ``/sluice`` commands and the neutral events' fields. A name without a row of
its kind fails, naming what to add where.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from sluice.bot.entry.settings import ServiceSettings
from sluice.bot.events import neutral
from sluice.bot.events.commands import USAGE
from sluice.core import sandbox
from sluice.core.config import SQLMESH_ONLY_KEYS, ProjectConfig
from sluice.core.gate_settings import DeploySettings, GateSettings
from sluice.core.model import loader
from sluice.core.model.parse import KIND_PROPERTIES, MODEL_PROPERTIES
from sluice.core.model.pycode.macros import macro_files

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "security.md"
SECTION = "## Every input, classified"
COLUMNS = ["input", "kind", "who decides it", "what it may reach", "test"]

# The dict-typed keys of config.yaml whose content another model validates.
VALIDATED_ELSEWHERE: dict[str, type[BaseModel]] = {
    "sluice.gate": GateSettings,
    "sluice.deploy": DeploySettings,
}


# --- the table ---------------------------------------------------------------------------


def parse_table(text: str) -> dict[str, set[str]]:
    """The section's names by kind: each row's first column holds the names (code spans),
    its second the kind. Raises AssertionError on a malformed section or row."""
    assert SECTION in text, f"docs/security.md has no '{SECTION}' section"
    body = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    rows = [line for line in body.splitlines() if line.startswith("|")]
    assert rows, f"'{SECTION}' holds no table"
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert header == COLUMNS, f"the table's columns should be {COLUMNS}, not {header}"
    named: dict[str, set[str]] = {}
    for row in rows[2:]:
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        assert len(cells) == len(COLUMNS) and all(cells), f"a row without every column: {row}"
        names = re.findall(r"`([^`]+)`", cells[0])
        assert names, f"a row names no input (in `code`): {row}"
        named.setdefault(cells[1], set()).update(names)
    return named


@pytest.fixture(scope="module")
def table() -> dict[str, set[str]]:
    return parse_table(DOC.read_text(encoding="utf-8"))


# --- the inputs, from their owners ---------------------------------------------------------


def _models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _models_in(arg)


def config_keys(model: type[BaseModel] = ProjectConfig, prefix: str = "") -> Iterator[str]:
    """Every key of a model, nested keys as dotted paths (a list of models: its items')."""
    for name, field in model.model_fields.items():
        path = prefix + name
        yield path
        nested = list(_models_in(field.annotation))
        if path in VALIDATED_ELSEWHERE:
            nested.append(VALIDATED_ELSEWHERE[path])
        for sub in nested:
            yield from config_keys(sub, path + ".")


def inputs() -> dict[str, set[str]]:
    """Every input by kind, as the table names them."""
    action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    events: set[str] = set()
    for event_class in typing.get_args(neutral.Event):
        own = {f.name for f in dataclasses.fields(event_class)}
        base = {f.name for f in dataclasses.fields(neutral._Base)}
        events |= {f"event.{name}" for name in base}
        events |= {f"{event_class.kind}.{name}" for name in own - base}
    return {
        "config key": set(config_keys()) | set(SQLMESH_ONLY_KEYS),
        "service setting": {f"SLUICE_{name.upper()}" for name in ServiceSettings.model_fields}
        | {sandbox.SETTING, sandbox.PROCESSES_SETTING},
        "action input": set(action["inputs"]),
        "model property": set(MODEL_PROPERTIES)
        | {f"kind.{p}" for params in KIND_PROPERTIES.values() for p in params},
        "file kind": set(loader.PROJECT_FILES),
        "command": set(USAGE),
        "event field": events,
    }


def unclassified(found: dict[str, set[str]], table: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{kind} `{name}`"
        for kind, names in found.items()
        for name in names - table.get(kind, set())
    )


# --- the checks -----------------------------------------------------------------------------


def test_every_input_is_classified(table: dict[str, set[str]]) -> None:
    missing = unclassified(inputs(), table)
    assert not missing, (
        f"{len(missing)} input(s) Sluice reads have no row in docs/security.md's "
        f"'{SECTION}': {', '.join(missing)}. Add each to a row of its kind (the input "
        "column), saying who decides it, what it may reach and which test holds that"
    )


def test_the_table_names_nothing_sluice_does_not_read(table: dict[str, set[str]]) -> None:
    found = inputs()
    stale = sorted(
        f"{kind} `{name}`"
        for kind, names in table.items()
        for name in names - found.get(kind, set())
    )
    assert set(table) <= set(found), f"unknown kinds in the table: {set(table) - set(found)}"
    assert not stale, f"docs/security.md classifies inputs Sluice no longer reads: {stale}"


def test_a_new_input_without_a_row_fails(table: dict[str, set[str]]) -> None:
    # The check above, given a property, key, file kind and command nobody classified.
    found = inputs()
    for kind, name in [
        ("model property", "synthetic_unclassified_property"),
        ("config key", "sluice.synthetic_unclassified_key"),
        ("file kind", "synthetic_unclassified_files"),
        ("command", "synthetic-unclassified-command"),
        ("event field", "pull_request.synthetic_unclassified_field"),
    ]:
        grown = {k: set(v) for k, v in found.items()}
        grown[kind].add(name)
        assert unclassified(grown, table) == [f"{kind} `{name}`"]
    # And the table's parser refuses what would let a row pass unread.
    with pytest.raises(AssertionError, match="no '## Every input"):
        parse_table("# Security\n")
    with pytest.raises(AssertionError, match="without every column"):
        parse_table(f"{SECTION}\n\n| {' | '.join(COLUMNS)} |\n| --- |\n| `x` | config key |\n")


def test_the_tests_named_exist(table: dict[str, set[str]]) -> None:
    body = DOC.read_text(encoding="utf-8").split(SECTION, 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`((?:tests/)?[\w/]*test_\w+\.py)`", body))
    missing = [
        name
        for name in sorted(named)
        if not (ROOT / name).is_file() and not list((ROOT / "tests").rglob(Path(name).name))
    ]
    assert not missing, f"docs/security.md's '{SECTION}' names tests that do not exist: {missing}"


def test_the_loader_finds_files_through_its_table(tmp_path: Path) -> None:
    """PROJECT_FILES is the owner: the loader globs nothing on its own, and the Python
    macros' finder (pycode) finds what the table's python_macros kind says."""
    source = Path(loader.__file__).read_text(encoding="utf-8")
    globs = re.findall(r"\.r?glob\(", source)
    assert len(globs) == 1, (
        "sluice/core/model/loader.py globs outside project_files(): add the files' kind to "
        "PROJECT_FILES and read them with project_files(root, kind)"
    )
    for rel in ["macros/a.py", "macros/deep/b.py", "macros/c.sql", "models/m.py"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x = 1\n")
    assert macro_files(tmp_path) == loader.project_files(tmp_path, "python_macros")
    assert loader.PROJECT_FILES["config"][1] == ("config.yaml", "config.yml")
