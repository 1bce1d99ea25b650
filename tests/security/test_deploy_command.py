"""``/sluice deploy`` reaches what a merge reaches, never a tag's tier (docs/security.md,
"promotion tiers"): a writer's comment must not stand in for a release tag and its
``released_by``.

Each case is a writer with an approved, up-to-date pull request asking for more than a
merge would give them. No Spark: prod already holds the PR's state, so a promotion that
does run finds nothing to build.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.bot.flow.reviewed_plan import PlanReview
from sluice.bot.forge.memory import MemoryForge
from tests.helpers.cases import record_prod
from tests.security.github_bot import GATED, KEY, NOW, OWNER, A, Bot, C


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    github = MemoryForge(OWNER, name="github")
    github.roles.update({"alice": "write", "bob": "write", "carol": "admin"})
    github.teams["octo/release"] = frozenset({"rita"})
    made = Bot(tmp_path, github)
    yield made
    made.close()


def _approved_pr(bot: Bot, deploy: str) -> None:
    """Prod branch ``main`` at C with ``deploy`` under ``sluice:``; PR 7 (head A, which
    contains C) planned and approved by the gate's approver; prod already at A's state."""
    config = GATED + deploy
    bot.prod(C, config)
    folder = bot.commit(A, config, parents=(C,))
    record_prod(folder, bot.url, NOW)
    bot.pull(7, A)
    review = PlanReview("fp", (("jaffle.orders", "fp-orders"),), {}, {})
    bot.ledger.record_plan(KEY, 7, A, review, NOW)
    bot.github.add_review(7, "bob", "APPROVED", A)


def test_with_on_tag_deploy_never_promotes_without_a_tag(bot: Bot) -> None:
    _approved_pr(bot, "  deploy:\n    on: tag\n    tag_pattern: 'v*'\n    merge_method: squash\n")
    bot.say(7, "carol", "/sluice deploy", 901)
    reply = bot.github.bot_comments(7)[-1]
    assert reply.startswith("@carol not deployed: `/sluice deploy` promotes only what a merge")
    assert "`prod` by a tag matching `v*`" in reply
    assert "`sluice.deploy.on: tag` of `main` at `ccccccc`" in reply
    assert "push (or publish a release of) a matching tag on `main`" in reply
    # Nothing promoted, nothing merged.
    assert bot.github.deployments == [] and bot.github.merges == []
    assert "sluice/deploy" not in bot.checks_on(A)


def test_deploy_skips_a_tag_tier_and_its_released_by(bot: Bot) -> None:
    # qa comes first but is released by a tag of @octo/release only; a merge reaches prod.
    _approved_pr(bot, (
        "  deploy:\n    environments:\n"
        "      - {name: qa, on: tag, tag_pattern: 'qa-*', released_by: [octo/release]}\n"
        "      - {name: prod, on: merge}\n"
    ))  # fmt: skip
    bot.say(7, "alice", "/sluice deploy", 902)
    assert [d.environment for d in bot.github.deployments] == ["prod"]
    assert "sluice/deploy-qa" not in bot.checks_on(A)
    assert bot.checks_on(A)["sluice/deploy"].conclusion == "success"
    assert bot.github.bot_comments(7)[-1].startswith("@alice deployed to prod")


def test_with_tag_tiers_only_deploy_is_refused_naming_each_tier(bot: Bot) -> None:
    _approved_pr(bot, (
        "  deploy:\n    environments:\n"
        "      - {name: staging, on: tag, tag_pattern: 'rc-*<img src=x>'}\n"
        "      - {name: prod, on: tag, tag_pattern: 'v*', released_by: [octo/release, rita]}\n"
    ))  # fmt: skip
    bot.say(7, "bob", "/sluice deploy", 903)
    reply = bot.github.bot_comments(7)[-1]
    assert "`staging` by a tag matching `rc-*<img src=x>`" in reply  # a code span: inert
    assert "`prod` by a tag matching `v*`, pushed by @octo/release, @rita" in reply
    assert "(`sluice.deploy.environments` of `main` at `ccccccc`)" in reply
    assert bot.github.deployments == [] and bot.github.merges == []
