"""A command runs as the forge holds its comment, never on a webhook's word alone.

A webhook secret typed into several repositories' hooks (GitHub repository webhooks; the
one GitLab token) is known to each one's maintainers, who could sign a delivery naming
another repository's real comment with another author or another command. The flow reads
the comment back by id on its pull request (``Forge.comment``) and runs the command only
when the author (by account id) and the command line are the forge's
(``run_command._as_written``). Driven through ``dispatch.handle`` with real webhook bodies
on the in-memory forge, and at the wire with the fake GitHub for the forge's own check
(a comment of another pull request is none of this one's).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import responses

from sluice.bot.forge.memory import MemoryForge
from tests.helpers.forge_clients import github_forge
from tests.helpers.github_wire import FakeGitHub
from tests.security.github_bot import OWNER, Bot, comment

HEAD = "c" * 40


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    github = MemoryForge(OWNER, name="github")
    github.commit("b" * 40, {"config.yaml": "sluice:\n  project: jaffle\n"}, branch="main")
    github.roles.update({"bob": "write", "mallory": "read"})
    github.open_pull(7, head_sha=HEAD, base="main", author="alice")
    github.open_pull(8, head_sha=HEAD, base="main", author="alice")
    made = Bot(tmp_path, github)
    yield made
    made.close()


def _forged(bot: Bot, number: int, author: str, body: str, comment_id: int) -> None:
    """A signed delivery saying ``author`` wrote ``body`` as comment ``comment_id``."""
    bot.deliver("issue_comment", comment(number, author, body, comment_id))


def test_a_real_comment_delivered_under_a_writer_s_name_runs_nothing(
    bot: Bot, caplog: pytest.LogCaptureFixture
) -> None:
    # mallory (read) writes a harmless comment; the delivery says bob (write) wrote it.
    made = bot.github.add_comment(7, "mallory", "/sluice help", comment_id=501)
    before = len(bot.github.calls)
    with caplog.at_level(logging.ERROR):
        _forged(bot, 7, "bob", "/sluice help", made)
    assert "command refused" in caplog.text and "'mallory''s" in caplog.text
    assert bot.github.writes(before) == [], "nothing posted, reacted or run"
    assert bot.github.bot_comments(7) == []


def test_a_writer_s_comment_delivered_with_another_command_runs_nothing(
    bot: Bot, caplog: pytest.LogCaptureFixture
) -> None:
    # bob wrote /sluice help; the delivery says he wrote /sluice rollback.
    made = bot.github.add_comment(7, "bob", "/sluice help", comment_id=502)
    before = len(bot.github.calls)
    with caplog.at_level(logging.ERROR):
        _forged(bot, 7, "bob", "/sluice rollback", made)
    assert "command refused" in caplog.text and "/sluice rollback" in caplog.text
    assert bot.github.writes(before) == []


def test_a_comment_of_another_pull_request_runs_nothing_on_this_one(bot: Bot) -> None:
    made = bot.github.add_comment(8, "bob", "/sluice help", comment_id=503)
    before = len(bot.github.calls)
    _forged(bot, 7, "bob", "/sluice help", made)
    assert bot.github.writes(before) == [], "a comment of PR 8 is none of PR 7's"


def test_the_comment_as_written_runs(bot: Bot) -> None:
    """Control: the same delivery, true to the comment, runs (help answers)."""
    made = bot.github.add_comment(7, "bob", "/sluice help", comment_id=504)
    _forged(bot, 7, "bob", "/sluice help", made)
    assert bot.github.reactions(7) == [(made, "+1")]
    assert len(bot.github.bot_comments(7)) == 1


@pytest.fixture
def wire() -> Iterator[FakeGitHub]:
    fake = FakeGitHub(repo="octo/widgets")
    fake.add_pull(7, HEAD, author="alice")
    fake.add_pull(8, HEAD, author="alice")
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        fake.install(mock)
        yield fake


def test_github_reads_a_comment_back_only_on_its_own_pull_request(wire: FakeGitHub) -> None:
    on_8 = wire.add_comment(8, "/sluice deploy", user="bob")
    on_7 = wire.add_comment(7, "/sluice help", user="mallory")
    forge = github_forge(repo_id=wire.repo_id)
    assert forge.comment(7, on_8) is None  # GitHub's comment ids are the repository's
    assert forge.comment(7, 999_999) is None  # gone
    found = forge.comment(7, on_7)
    assert found is not None and found.author == "mallory" and found.body == "/sluice help"
    assert found.author_id == wire.comments[on_7]["user"]["id"]
