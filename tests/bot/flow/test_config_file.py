"""The trusted settings are read from the prod branch's config.yaml, or its config.yml when
that is the project's config file (as the loader reads a project): a project whose config is
config.yml keeps its gate. Both files at once is refused, as the loader refuses it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.bot.events.neutral import ReviewEvent
from sluice.bot.flow import dispatch, trust
from sluice.bot.flow.deps import Deps, make_deps
from sluice.bot.flow.reviewed_plan import PlanReview
from sluice.bot.forge.memory import MemoryForge, as_forge
from sluice.core.errors import ConfigError

GATE = "sluice:\n  gate:\n    required_approvers:\n      users: [bob]\n"
HEAD = "a" * 40


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"config.yaml": "x: 1"}, ("config.yaml", "x: 1")),
        ({"config.yml": "y: 2"}, ("config.yml", "y: 2")),
        ({}, ("config.yaml", None)),
        ({"sub/config.yml": "z: 3"}, ("sub/config.yml", "z: 3")),
    ],
)
def test_read_config_takes_yaml_else_yml(
    files: dict[str, str], expected: tuple[str, str | None]
) -> None:
    path = "sub/config.yaml" if any(p.startswith("sub/") for p in files) else "config.yaml"
    assert trust.read_config(files.get, path) == expected


def test_read_config_refuses_both() -> None:
    with pytest.raises(ConfigError, match=r"both config\.yaml and config\.yml") as raised:
        trust.read_config({"config.yaml": "", "config.yml": ""}.get, "config.yaml")
    assert "keep one" in (raised.value.hint or "")


def _world(tmp_path: Path, prod_files: dict[str, str]) -> tuple[MemoryForge, Deps]:
    forge = MemoryForge()
    forge.commit("b" * 40, prod_files, branch="main")
    forge.commit(HEAD, {**prod_files, "models/m.sql": "SELECT 1 AS x"})
    forge.open_pull(7, head_sha=HEAD, base="main", author="alice")
    forge.roles.update({"alice": "write", "bob": "write", "carol": "write"})
    deps = make_deps(
        project_python="on",
        forge_for=lambda _event: as_forge(forge),
        workdir=tmp_path / "work",
        state_url=f"sqlite:///{tmp_path / 'state.db'}",
        clock=lambda: 1_800_000_000_000,
    )
    review = PlanReview("fp", (("s.m", "fp-s.m"),), {"s.m": None}, {"s.m": None})
    deps.ledger.record_plan(f"memory:{forge.repo}", 7, HEAD, review, 1)
    return forge, deps


def _review(forge: MemoryForge, user: str) -> ReviewEvent:
    review = forge.add_review(7, user, "APPROVED")
    return ReviewEvent(
        forge="memory", repo=forge.repo, installation_id=None, action="submitted", number=7,
        head_sha=HEAD, reviewer=user, state="APPROVED", commit_sha=HEAD, review_id=review.id,
    )  # fmt: skip


@pytest.fixture
def yml_world(tmp_path: Path) -> Iterator[tuple[MemoryForge, Deps]]:
    forge, deps = _world(tmp_path, {"config.yml": GATE})
    yield forge, deps
    deps.close()


def test_a_gate_in_the_prod_branchs_config_yml_holds(yml_world: tuple[MemoryForge, Deps]) -> None:
    forge, deps = yml_world
    dispatch.handle(deps, _review(forge, "carol"))  # not bob: the gate stays closed
    assert forge.checks[HEAD]["sluice/approval"].conclusion != "success"
    dispatch.handle(deps, _review(forge, "bob"))
    assert forge.checks[HEAD]["sluice/approval"].conclusion == "success"


def test_both_config_files_on_the_prod_branch_are_refused_on_the_pr(tmp_path: Path) -> None:
    forge, deps = _world(tmp_path, {"config.yaml": GATE, "config.yml": "sluice: {}\n"})
    try:
        dispatch.handle(deps, _review(forge, "bob"))
        check = forge.checks[HEAD]["sluice/approval"]
        assert check.conclusion == "failure"
        assert "both config.yaml and config.yml" in "\n".join(forge.bot_comments(7))
    finally:
        deps.close()
