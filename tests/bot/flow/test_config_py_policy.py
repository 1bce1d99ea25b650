"""A pull request's config.py under SLUICE_PROJECT_PYTHON (trust.python_refusal): it is the
project's Python, so under ``prod`` it runs only as the prod branch has it, and under
``off`` never; a refused one is not run, and the load says why at config.py."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from sluice.bot.flow import trust
from sluice.bot.flow.job import Job
from sluice.core.errors import ConfigError
from sluice.core.model.loader import load_project
from sluice.core.plan import statements

CONFIG = (
    "from sqlmesh.core.config import Config, ModelDefaultsConfig\n"
    "config = Config(model_defaults=ModelDefaultsConfig(dialect='spark'))\n"
)
CHANGED = "raise RuntimeError('CONFIG-PY-EXECUTED')\n"


class Prod:
    """The prod branch's files, as the forge answers them."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files

    def read_file(self, ref: str, path: str) -> str | None:
        return self.files.get(path)

    def commit_of(self, branch: str) -> str:
        return "a" * 40


def _tree(tmp_path: Path, config: str) -> Path:
    root = tmp_path / "tree"
    (root / "models").mkdir(parents=True)
    (root / "models" / "a.sql").write_text("MODEL (name s.a, kind FULL);\nSELECT 1 AS id\n")
    (root / "config.py").write_text(config)
    return root


def _load(mode: str, tree: Path) -> Any:
    deps: Any = SimpleNamespace(project_python=mode, project_path=".")
    job = Job(deps, Prod({"config.py": CONFIG}), 0)  # type: ignore[arg-type]
    return load_project(tree, use_cache=False, python=trust.python_refusal(job, tree, "main"))


def test_prods_config_py_runs(tmp_path: Path) -> None:
    project = _load("prod", _tree(tmp_path, CONFIG))
    assert project.config.model_defaults.dialect == "spark"


@pytest.mark.parametrize("mode", ["prod", "off"])
def test_a_changed_or_refused_config_py_is_not_run(tmp_path: Path, mode: str) -> None:
    tree = _tree(tmp_path, CHANGED)
    with pytest.raises(ConfigError) as caught:
        _load(mode, tree)
    assert caught.value.path == str(tree / "config.py")
    assert f"SLUICE_PROJECT_PYTHON={mode}" in (caught.value.hint or "")
    assert "CONFIG-PY-EXECUTED" not in str(caught.value)
    if mode == "prod":
        assert "config.py" in (caught.value.hint or "")  # the changed file, named


def test_prods_settings_are_never_read_from_config_py() -> None:
    # The trusted settings come from the prod branch's config.yaml (or config.yml) only.
    found, text = trust.read_config({"config.py": CONFIG}.get, "config.yaml")
    assert (found, text) == ("config.yaml", None)
    assert (
        trust.parse(trust.Source.of_config(text, found)).digest
        == trust.parse(trust.Source.of_config(None, "config.yaml")).digest
    )


STATEMENTS = (
    "from sqlmesh.core.config import Config\n"
    "config = Config(before_all=['CREATE SCHEMA IF NOT EXISTS raw'])\n"
)


class Checkout:
    """Prod's tree at a commit, as the service's checkout gives it."""

    def __init__(self, tree: Path) -> None:
        self.tree_path = tree
        self.asked: list[str] = []

    def tree(self, forge: Any, sha: str) -> Path:
        self.asked.append(sha)
        return self.tree_path


def _prod_statements(tmp_path: Path, mode: str, config: str) -> tuple[str | None, list[str]]:
    tree = _tree(tmp_path, config)
    checkout = Checkout(tree)
    deps: Any = SimpleNamespace(
        project_python=mode,
        project_path=".",
        config_path="config.yaml",
        checkout=checkout,
        isolate=False,
    )
    job = Job(deps, Prod({"config.py": config}), 0)  # type: ignore[arg-type]
    settings: Any = SimpleNamespace(python_ref=None, branch="main")
    return trust.prod_statements_digest(job, settings), checkout.asked


def test_prods_statements_are_read_from_its_config_py(tmp_path: Path) -> None:
    # So a pull request whose config.py gives the same statements has no item for them.
    digest, asked = _prod_statements(tmp_path, "prod", STATEMENTS)
    project = load_project(tmp_path / "tree", use_cache=False)
    assert digest is not None
    assert digest == statements.digest(("CREATE SCHEMA IF NOT EXISTS raw",), ())
    assert digest == statements.digest(project.before_all, project.after_all)
    assert asked == ["a" * 40]  # prod's head, as a commit


@pytest.mark.parametrize(("mode", "config"), [("off", STATEMENTS), ("prod", CHANGED)])
def test_prods_config_py_unrun_or_failing_is_unreadable(
    tmp_path: Path, mode: str, config: str
) -> None:
    # A digest no project has: the project's statements are an item to approve.
    assert _prod_statements(tmp_path, mode, config)[0] == "unreadable"
