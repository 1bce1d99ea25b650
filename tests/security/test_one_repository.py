"""One state database and warehouse keep one repository's prod (docs/security.md, "which
repositories are served"): a second repository's events are refused, never mixed in, so
neither repository's merges can replace the other's prod."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.bot.flow import trust
from sluice.bot.flow.job import Job
from sluice.bot.forge.memory import MemoryForge
from sluice.bot.present import comment
from tests.security.github_bot import GATED, KEY, OWNER, A, B, Bot, C, merged, opened


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    github = MemoryForge(OWNER, name="github")
    github.roles.update({"alice": "write", "bob": "write"})
    made = Bot(tmp_path, github)
    made.prod(C, GATED)
    yield made
    made.close()


def _other(bot: Bot) -> MemoryForge:
    """The second repository on the same GitHub: its prod branch as the first's."""
    other = bot.repository("mallory/other", 424242)
    other.roles.update({"alice": "write", "bob": "write"})
    bot.commit(C, GATED, forge=other)
    other.refs["main"] = C
    return other


def _elsewhere(payload: dict[str, object]) -> dict[str, object]:
    repository = dict(payload["repository"])  # type: ignore[arg-type]
    repository["full_name"] = "mallory/other"
    repository["id"] = 424242
    return {**payload, "repository": repository}


def test_a_second_repository_is_refused_and_told_without_naming_the_first(bot: Bot) -> None:
    bot.commit(A, GATED)
    bot.pull(7, A)
    bot.deliver("pull_request", opened(7, A))
    assert len(bot.runner.projects) == 1  # the first repository is served
    other = _other(bot)
    bot.commit(B, GATED, forge=other)
    other.open_pull(9, head_sha=B, base="main", author="alice")
    bot.deliver("pull_request", _elsewhere(opened(9, B)))
    assert len(bot.runner.projects) == 1  # nothing of the other repository ran
    assert bot.github.comments.get(9) is None  # nothing said in the first repository
    [note] = [body for body in other.bot_comments(9) if comment.marker(".") in body]
    assert "Sluice refused this repository" in note
    assert OWNER not in note  # another repository's name is not disclosed
    assert bot.ledger.settings_in_force("github:mallory/other") is None
    assert bot.ledger.settings_in_force(KEY) is not None


def test_a_merge_in_a_second_repository_never_promotes(bot: Bot) -> None:
    trust.for_repository(Job.start(bot.deps, bot.forge()))
    bot.ledger.belongs_to(f"{KEY}#.", 1)
    other = _other(bot)
    bot.commit(B, GATED, forge=other)
    other.open_pull(9, head_sha=B, base="main", author="alice")
    other.close_pull(9, merged=True)
    bot.deliver("pull_request", _elsewhere(merged(9, B, C)))
    assert bot.github.deployments == [] and other.deployments == []
    assert "sluice/deploy" not in bot.checks_on(C)
    assert other.writes() == []
