"""SLUICE_PROJECT_PYTHON: which project Python the service runs (trust.python_refusal)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from sluice.bot.flow import trust
from sluice.bot.flow.job import Job

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "python_shop"


class Prod:
    """The prod branch's files, as the forge answers them."""

    def __init__(self, root: Path) -> None:
        self.files = {p.relative_to(root).as_posix(): p.read_text() for p in root.rglob("*.py")}
        self.asked: list[tuple[str, str]] = []

    def read_file(self, ref: str, path: str) -> str | None:
        self.asked.append((ref, path))
        return self.files.get(path)


def _refusal(mode: str, tree: Path, prod: Prod) -> str | None:
    deps: Any = SimpleNamespace(project_python=mode, project_path=".")
    refusal = trust.python_refusal(Job(deps, prod, 0), tree, "main")  # type: ignore[arg-type]
    return refusal.reason if refusal is not None else None


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return Path(shutil.copytree(EXAMPLE, tmp_path / "tree"))


def test_prod_runs_python_that_is_the_prod_branch_s(tree: Path) -> None:
    prod = Prod(EXAMPLE)
    assert _refusal("prod", tree, prod) is None
    assert ("main", "models/customer_segments.py") in prod.asked


@pytest.mark.parametrize("change", ["edit", "add"])
def test_prod_refuses_a_pr_that_changes_python_and_says_why(tree: Path, change: str) -> None:
    if change == "edit":
        path = tree / "macros" / "money.py"
        path.write_text(path.read_text() + "\nimport os\n")
        expected = "macros/money.py"
    else:
        (tree / "models" / "new.py").write_text("x = 1\n")
        expected = "models/new.py"
    message = _refusal("prod", tree, Prod(EXAMPLE))
    assert message is not None
    assert expected in message and "SLUICE_PROJECT_PYTHON=prod" in message and "`main`" in message


def test_off_refuses_and_on_allows(tree: Path) -> None:
    path = tree / "macros" / "money.py"
    path.write_text(path.read_text() + "\n# changed\n")
    assert "SLUICE_PROJECT_PYTHON=off" in (_refusal("off", tree, Prod(EXAMPLE)) or "")
    assert _refusal("on", tree, Prod(EXAMPLE)) is None


def test_prod_names_every_changed_file(tree: Path) -> None:
    deps: Any = SimpleNamespace(project_python="prod", project_path=".")
    for rel in ("macros/money.py", "models/customer_segments.py"):
        path = tree / rel
        path.write_text(path.read_text() + "\n# changed\n")
    refusal = trust.python_refusal(Job(deps, Prod(EXAMPLE), 0), tree, "main")  # type: ignore[arg-type]
    assert refusal is not None
    assert refusal.files == ("macros/money.py", "models/customer_segments.py")
    assert "(macros/money.py, models/customer_segments.py)" in refusal.reason


def test_on_without_a_sandbox_refuses_a_prs_own_python(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fail closed: with no sandbox (SLUICE_SANDBOX=off here), ``on`` runs no PR's Python;
    prod's own Python (``prod``, unchanged) still runs."""
    monkeypatch.setenv("SLUICE_SANDBOX", "off")
    message = _refusal("on", tree, Prod(EXAMPLE))
    assert message is not None and "SLUICE_SANDBOX" in message and "bubblewrap" in message
    assert _refusal("prod", tree, Prod(EXAMPLE)) is None


def test_on_under_a_uid_drop_refuses_a_prs_own_python(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """setpriv (auto's fallback for a root service without user namespaces) drops the uid
    but keeps the host's network and processes in reach: a PR's own Python is refused
    there too, its operator told what to install; prod's own Python still runs."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("setpriv isolation needs a root service with setpriv installed")
    monkeypatch.setenv("SLUICE_SANDBOX", "setpriv")
    message = _refusal("on", tree, Prod(EXAMPLE))
    assert message is not None and "sandbox is setpriv" in message, message
    assert "network" in message and "bubblewrap" in message
    assert _refusal("prod", tree, Prod(EXAMPLE)) is None
    monkeypatch.setenv("SLUICE_SANDBOX", "bwrap")  # the control: bubblewrap runs it
    assert _refusal("on", tree, Prod(EXAMPLE)) is None
