"""One state database and warehouse keep one repository's prod (docs/security.md, "which
repositories are served"): a second repository's events are refused, never mixed in, so
neither repository's merges can replace the other's prod."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import responses

from sluice.bot.flow import trust
from sluice.bot.present import comment
from tests.helpers.github_wire import FakeGitHub
from tests.security.github_bot import GATED, KEY, OWNER, A, B, Bot, C, merged, opened


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    github = FakeGitHub(repo=OWNER)
    github.permissions.update({"alice": "write", "bob": "write"})
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        github.install(mock)
        made = Bot(tmp_path, github)
        made.prod(C, GATED)
        yield made
        made.close()


def _elsewhere(payload: dict[str, object]) -> dict[str, object]:
    repository = dict(payload["repository"])  # type: ignore[arg-type]
    repository["full_name"] = "mallory/other"
    repository["id"] = 424242
    return {**payload, "repository": repository}


def test_a_second_repository_is_refused_and_told_without_naming_the_first(bot: Bot) -> None:
    bot.commit(A, GATED)
    bot.github.add_pull(7, A)
    bot.deliver("pull_request", opened(7, A))
    assert len(bot.runner.projects) == 1  # the first repository is served
    bot.commit(B, GATED)
    bot.github.add_pull(9, B)
    bot.deliver("pull_request", _elsewhere(opened(9, B)))
    assert len(bot.runner.projects) == 1  # nothing of the other repository ran
    [note] = [c for c in bot.github.comments_on(9) if comment.marker(".") in c["body"]]
    assert "Sluice refused this repository" in note["body"]
    assert OWNER not in note["body"]  # another repository's name is not disclosed
    assert bot.ledger.settings_in_force("github:mallory/other") is None
    assert bot.ledger.settings_in_force(KEY) is not None


def test_a_merge_in_a_second_repository_never_promotes(bot: Bot) -> None:
    trust.for_repository(bot.deps, bot.forge())
    bot.ledger.belongs_to(f"{KEY}#.", 1)
    bot.deliver("pull_request", _elsewhere(merged(9, B, C)))
    assert bot.github.deployments == []
    assert "sluice/deploy" not in bot.github.checks_on(C)
