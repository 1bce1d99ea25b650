"""Text from the forge (tag names, logins, branch names, patterns and keys from config.yaml)
reaches check runs, comments and replies only escaped by ``sluice/core/markdown.py``
(docs/security.md, "text in replies and the PR comment"): a code span or a mention, never
raw Markdown or HTML. Each case feeds a hostile value through one surface.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.bot.forge.base import Check
from sluice.bot.forge.memory import MemoryForge
from sluice.bot.present import comment
from sluice.core import markdown as md
from tests.security.github_bot import OWNER, PREAMBLE, Bot, C, tag

HOSTILE_TAG = "v1<img src=x>](javascript:alert(1))`"
TAG_DEPLOY = PREAMBLE + "sluice:\n  project: jaffle\n  deploy:\n    on: tag\n"


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    github = MemoryForge(OWNER, name="github")
    made = Bot(tmp_path, github)
    made.prod(C, TAG_DEPLOY)
    yield made
    made.close()


def _checks_set(bot: Bot) -> list[Check]:
    return [args[1] for name, args in bot.github.calls if name == "set_check"]  # type: ignore[misc]


def test_a_hostile_tag_name_is_a_code_span_in_every_check_of_its_promotion(bot: Bot) -> None:
    bot.deliver("push", tag(HOSTILE_TAG, C))  # matches v*; the runner fails the job
    checks = _checks_set(bot)
    assert [c.status for c in checks] == ["in_progress", "completed"]
    shown = md.code(HOSTILE_TAG)
    for check in checks:
        assert f"tag {shown}" in check.summary, check.summary
        assert f"tag {HOSTILE_TAG}" not in check.summary
        assert HOSTILE_TAG not in check.title


def test_a_hostile_actor_is_never_a_mention(bot: Bot) -> None:
    released = "    environments:\n      - {name: prod, on: tag, released_by: [rita]}\n"
    bot.github.write_file("main", "config.yaml", TAG_DEPLOY.replace("    on: tag\n", released))
    pushed = tag("v2", C)
    pushed["sender"]["login"] = "@org/team](javascript:x)"
    bot.deliver("push", pushed)
    refused = bot.checks_on(C)["sluice/deploy"]
    assert "`@org/team](javascript:x)`" in refused.summary
    assert "pushed by @org" not in refused.summary


def test_the_waiting_for_tag_section_quotes_pattern_and_branch_as_code() -> None:
    pattern, branch = "v*`](javascript:x)", "ma`in<b>"
    _, text = comment.waiting_for_tag_section(pattern, branch, "pr_7")
    assert md.code(pattern) in text and md.code(branch) in text
    assert f"`{pattern}`" not in text and f"`{branch}`" not in text


def test_the_settings_section_quotes_paths_and_keys_as_code() -> None:
    key = "spark.x`<img src=x>"
    _, text = comment.settings_section("conf`ig.yaml", True, "`main`", None, "main", [key])
    assert text is not None
    assert md.code(key) in text and f"`{key}`" not in text
    assert md.code("conf`ig.yaml") in text
