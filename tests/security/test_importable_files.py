"""Every file Python could load from a project is reviewed source (issue 40 §2).

A pull request controls every file of its tree: bytecode, ``.pth`` and extension modules
are refused on load, links out of the project (or into ``.sluice/``) too, the review an
approval binds to covers every ``*.py``, and the macro process imports the project's
Python from the digested sources only, never from the project's folder.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from sluice.bot.flow.reviewed_plan import PYTHON_ITEM, review_of
from sluice.core.errors import SluiceError
from sluice.core.model.loader import load_project
from sluice.core.model.pycode import files, run
from sluice.core.state import open_state
from sluice.core.workflow import plan_environment

NOW = 1_700_000_000_000
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "python_shop"


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    return Path(
        shutil.copytree(EXAMPLE, tmp_path / "shop", ignore=shutil.ignore_patterns(".sluice"))
    )


def _refused(root: Path) -> str:
    with pytest.raises(SluiceError) as caught:
        load_project(root, use_cache=False)
    return str(caught.value)


@pytest.mark.parametrize(
    "rel",
    [
        "macros/__pycache__/money.cpython-312.pyc",
        "helpers.pyc",
        "models/extra.pth",
        "macros/money.so",
        "lib/fast.cpython-312-x86_64-linux-gnu.so",
        "helpers.pyd",
    ],
)
def test_importable_files_that_are_not_source_are_refused_with_their_path(
    shop: Path, rel: str
) -> None:
    path = shop / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\0not source")
    message = _refused(shop)
    shown = str(path.parent) if "__pycache__" in rel else str(path)
    assert shown in message and "delete it" in message


def test_files_python_cannot_import_are_not_refused(shop: Path) -> None:
    (shop / ".venv" / "lib").mkdir(parents=True)
    (shop / ".venv" / "lib" / "x.so").write_bytes(b"\0")
    (shop / "docs-site").mkdir()
    (shop / "docs-site" / "x.pyc").write_bytes(b"\0")
    assert load_project(shop, use_cache=False).models


@pytest.mark.parametrize("where", ["outside", "state"])
@pytest.mark.parametrize("rel", ["models/linked.sql", "seeds/linked.csv", "macros/linked.py"])
def test_links_out_of_the_project_or_into_sluice_are_refused(
    shop: Path, tmp_path: Path, where: str, rel: str
) -> None:
    if where == "outside":
        target = tmp_path / "secret.txt"
    else:
        target = shop / ".sluice" / "cache" / "models.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("SELECT 1 AS secret\n")
    link = shop / rel
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, link)
    message = _refused(shop)
    assert str(link) in message and "symbolic link" in message
    assert "replace the link with the file itself" in message


def test_a_linked_models_folder_is_refused(shop: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    shutil.move(shop / "models", elsewhere)
    os.symlink(elsewhere, shop / "models")
    assert "symbolic link models points outside the project" in _refused(shop)


def test_a_link_inside_the_project_is_read(shop: Path) -> None:
    os.symlink(shop / "models" / "payments.sql", shop / "payments_link.sql")
    assert load_project(shop, use_cache=False).models


def _review(root: Path, tmp_path: Path) -> Any:
    project = load_project(root, use_cache=False)
    store = open_state(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        plan = plan_environment(project, store, "pr_1", end=NOW, execution_time=NOW)
    finally:
        store.close()
    return review_of(plan, project, prod_python=None)  # nothing promoted: prod has no Python


def test_the_review_covers_python_no_model_shows(shop: Path, tmp_path: Path) -> None:
    """A module's top-level code is in no model's code: a push that changes it (or adds a
    module) after an approval changes the review, so the approval no longer holds."""
    before = _review(shop, tmp_path)
    assert any(name == PYTHON_ITEM for name, _ in before.items)
    helper = shop / "macros" / "money.py"
    helper.write_text(helper.read_text() + "\nimport os  # runs on import\n")
    after = _review(shop, tmp_path)
    assert after.fingerprint != before.fingerprint
    (shop / "pandas.py").write_text("x = 1\n")  # would shadow a package in the driver
    assert _review(shop, tmp_path).fingerprint != after.fingerprint


def test_macros_import_the_digested_sources_not_the_project_folder(shop: Path) -> None:
    """A macro importing a project module gets the copy the loader digested: what the
    project's folder holds besides (here a module only the child could see) is not on
    the import path."""
    money = shop / "macros" / "money.py"
    money.write_text(
        money.read_text()
        + "\nimport sys\nassert not any(p.rstrip('/').endswith('/shop') for p in sys.path), "
        "sys.path\nassert sys.dont_write_bytecode\n"
    )
    assert load_project(shop, use_cache=False).models["pyshop.payments"]
    assert not list(shop.rglob("__pycache__"))


def test_the_driver_loads_a_model_from_the_sources_read_not_bytecode(
    shop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run.py's import: no project folder on sys.path, the model and its helpers run
    from the sources, no bytecode written into the project."""
    (shop / "helper_mod.py").write_text("VALUE = 'from source'\n")
    model = shop / "models" / "probe.py"
    model.write_text(
        "import helper_mod\n\ndef execute(context, **kw):\n    return helper_mod.VALUE\n"
    )
    monkeypatch.setattr("sys.path", list(__import__("sys").path))
    monkeypatch.setattr("sys.meta_path", list(__import__("sys").meta_path))
    monkeypatch.setattr("sys.dont_write_bytecode", False)
    function = run._function(str(model), "execute", str(shop), "/nonexistent-shim")
    assert function(SimpleNamespace()) == "from source"
    assert str(shop) not in __import__("sys").path
    assert not list(shop.rglob("__pycache__"))
    __import__("sys").modules.pop("helper_mod", None)


def test_sources_digest_every_importable_py_and_nothing_else(shop: Path) -> None:
    (shop / "lib").mkdir()
    (shop / "lib" / "util.py").write_text("x = 1\n")
    (shop / "not-a-package").mkdir()
    (shop / "not-a-package" / "x.py").write_text("x = 2\n")
    found = files.sources(shop)
    assert "lib/util.py" in found and "macros/money.py" in found
    assert "not-a-package/x.py" not in found
