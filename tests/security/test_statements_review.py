"""config.yaml's ``before_all`` / ``after_all`` are an item of a plan's review when they
differ from prod's (the commit prod was last promoted with): a job runs them, so a push
that adds or changes one after an approval loses the approval, and a merge past the gate
is refused at promotion (red team: the statements' digest was in the plan's id only, and
approvals bind to the review).

The flow runs on an in-memory GitHub; the PR's build and the promotion's apply are
stand-ins (no Spark), as in ``test_python_review.py``.
"""

from __future__ import annotations

from typing import Any

from sluice.bot.flow.reviewed_plan import STATEMENTS_ITEM
from tests.helpers.review_flow import (
    applied,
    bot,
    commit_change,
    merge_pr,
    push_head,
    review_items,
)
from tests.security.github_bot import KEY, A, B, Bot, C, opened, review

__all__ = ["applied", "bot"]  # fixtures

HOSTILE = "\nafter_all:\n  - CREATE SCHEMA IF NOT EXISTS audit_trail\n"


def test_statements_added_after_approval_lose_it_and_block_the_promotion(
    bot: Bot, applied: list[Any]
) -> None:
    commit_change(bot, A, C)
    bot.pull(7, A)
    bot.deliver("pull_request", opened(7, A))
    assert STATEMENTS_ITEM not in review_items(bot, 7, A)  # as prod has them (none)
    bot.github.add_review(7, "bob", "APPROVED", A)
    bot.deliver("pull_request_review", review(7, "bob", A, 7001))
    assert bot.approval(A).conclusion == "success"
    commit_change(bot, B, A, append={"config.yaml": HOSTILE})
    push_head(bot, 7, B)
    assert STATEMENTS_ITEM in review_items(bot, 7, B)
    recorded = bot.ledger.review(KEY, 7, B)
    assert recorded is not None
    assert bot.approval(B).conclusion != "success"
    merge = merge_pr(bot, 7, B)
    deploy = bot.checks_on(merge)["sluice/deploy"]
    assert deploy.conclusion == "failure" and "before_all" in deploy.summary, deploy.summary
    assert applied == []


def test_approved_statements_promote(bot: Bot, applied: list[Any]) -> None:
    commit_change(bot, A, C, append={"config.yaml": HOSTILE})
    bot.pull(7, A)
    bot.deliver("pull_request", opened(7, A))
    assert STATEMENTS_ITEM in review_items(bot, 7, A)
    bot.github.add_review(7, "bob", "APPROVED", A)
    bot.deliver("pull_request_review", review(7, "bob", A, 7002))
    assert bot.approval(A).conclusion == "success"
    merge = merge_pr(bot, 7, A)
    deploy = bot.checks_on(merge)["sluice/deploy"]
    assert deploy.conclusion == "success", deploy.summary
    assert [p.environment for p in applied] == ["prod"]
