"""SLUICE_PROJECT_PYTHON=prod compares a PR's Python with the commit prod was last
promoted with (pinned in the ledger), never the prod branch's head, which an admin can
push past the gate (issue 40 §2)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from sluice.bot.flow import trust
from sluice.bot.flow.job import Job
from sluice.bot.flow.ledger import PinnedSettings

GATED = "sluice:\n  gate:\n    required_approvers:\n      users: [bob]\n"
PINNED, HEAD = "p" * 40, "h" * 40


class Forge:
    """The prod branch `main`: at PINNED (promoted) a reviewed helper; its head HEAD
    holds the helper an admin pushed past the gate."""

    repo = "o/r"
    name = "github"

    def __init__(self) -> None:
        self.refs = {"main": HEAD}
        self.trees = {
            PINNED: {"config.yaml": GATED, "helpers.py": "SAFE = 1\n"},
            HEAD: {"config.yaml": GATED, "helpers.py": "import os; os.system('x')\n"},
        }

    def read_file(self, ref: str, path: str) -> str | None:
        return self.trees[self.refs.get(ref, ref)].get(path)

    def list_dir(self, ref: str, path: str) -> None:
        return None  # no policies/ on either commit

    def commit_of(self, ref: str) -> str | None:
        return self.refs.get(ref)

    def id_of(self, login: str) -> int | None:
        return {"bob": 7}.get(login.casefold())


class Ledger:
    def __init__(self) -> None:
        self.pin: PinnedSettings | None = PinnedSettings(
            PINNED,
            trust.parse(trust.Source.of_config(GATED, "config.yaml")).digest,
            GATED,
            "config.yaml",
            0,
        )

    def settings_in_force(self, repo: str) -> PinnedSettings | None:
        return self.pin

    def pin_settings(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("not moved by a read")

    def record_people(
        self, repo: str, digest: str, people: dict[str, int | None]
    ) -> dict[str, int | None] | None:
        assert self.pin is not None and digest == self.pin.digest
        known = {**people, **(self.pin.people or {})}  # as the ledger: only logins it lacks
        self.pin = self.pin._replace(people=known)
        return known

    def unapproved(self, repo: str, items: Any) -> list[Any]:
        return list(items)


def test_a_pr_with_the_python_pushed_past_the_gate_is_refused(tmp_path: Path) -> None:
    forge, ledger = Forge(), Ledger()
    settings = trust.settings_for(
        forge,
        ledger,
        "github:o/r",
        branch="main",
        path="config.yaml",
        now=0,  # type: ignore[arg-type]
    )
    assert settings.python_ref == PINNED
    (tmp_path / "models").mkdir()
    (tmp_path / "helpers.py").write_text(forge.trees[HEAD]["helpers.py"])  # as on the head
    deps: Any = SimpleNamespace(project_python="prod", project_path=".")
    refusal = trust.python_refusal(
        Job(deps, forge, 0), tmp_path, settings.branch, settings.python_ref
    )  # type: ignore[arg-type]
    assert refusal is not None and refusal.files == ("helpers.py",)
    assert PINNED[:7] in refusal.reason and "last promoted" in refusal.reason
    (tmp_path / "helpers.py").write_text(forge.trees[PINNED]["helpers.py"])  # as promoted
    assert trust.python_refusal(Job(deps, forge, 0), tmp_path, "main", settings.python_ref) is None  # type: ignore[arg-type]


def test_without_a_gate_the_head_is_as_good(tmp_path: Path) -> None:
    forge, ledger = Forge(), Ledger()
    for tree in forge.trees.values():
        tree["config.yaml"] = "sluice: {}\n"
    ungated = trust.Source.of_config("sluice: {}\n", "config.yaml")
    ledger.pin = PinnedSettings(PINNED, trust.parse(ungated).digest, "sluice: {}\n", None, 0)
    settings = trust.settings_for(
        forge,
        ledger,
        "github:o/r",
        branch="main",
        path="config.yaml",
        now=0,  # type: ignore[arg-type]
    )
    assert settings.python_ref is None
