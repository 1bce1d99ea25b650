"""The project's Python is an item of a plan's review only when it differs from prod's
(the Python of the commit prod was last promoted with): a PR that leaves Python alone is
approved for its models alone, one that changes any Python file after an approval loses
it, and a promotion with nothing to change needs no approval for Python it already runs.

The flow runs on an in-memory GitHub; the PR's build and the promotion's apply are
stand-ins (no Spark), so what is checked is what the gate records and requires.
"""

from __future__ import annotations

from typing import Any

from sluice.bot.flow.reviewed_plan import PYTHON_ITEM
from sluice.core.model.pycode import files
from tests.helpers.review_flow import (
    applied,
    bot,
    commit_change,
    merge_pr,
    push_head,
    review_items,
)
from tests.security.github_bot import KEY, A, B, Bot, C, D, opened, review

__all__ = ["applied", "bot"]  # fixtures


def test_unchanged_python_promotes_with_an_approval_of_the_sql_change_only(
    bot: Bot, applied: list[Any]
) -> None:
    commit_change(bot, A, C)
    bot.pull(7, A)
    bot.deliver("pull_request", opened(7, A))
    assert review_items(bot, 7, A) == ["jaffle.orders"]  # prod's Python: nothing to approve
    bot.github.add_review(7, "bob", "APPROVED", A)
    bot.deliver("pull_request_review", review(7, "bob", A, 6001))
    assert bot.approval(A).conclusion == "success"
    # A push that touches no Python (nor a model) keeps the approval.
    commit_change(bot, B, A, append={"NOTES.md": "notes\n"})
    push_head(bot, 7, B)
    assert review_items(bot, 7, B) == ["jaffle.orders"]
    assert bot.approval(B).conclusion == "success", bot.approval(B).summary
    merge = merge_pr(bot, 7, B)
    deploy = bot.checks_on(merge)["sluice/deploy"]
    assert deploy.conclusion == "success", deploy.summary
    assert [p.environment for p in applied] == ["prod"]


def test_a_python_helper_changed_after_approval_loses_it(bot: Bot, applied: list[Any]) -> None:
    commit_change(bot, A, C)
    bot.pull(7, A)
    bot.deliver("pull_request", opened(7, A))
    bot.github.add_review(7, "bob", "APPROVED", A)
    bot.deliver("pull_request_review", review(7, "bob", A, 6002))
    assert bot.approval(A).conclusion == "success"
    # Module-level code in a helper: in no model's code, so the plan's models are as before.
    src = commit_change(
        bot, B, A, append={"macros/money.py": "\nRATE = __import__('os').getpid()\n"}
    )
    push_head(bot, 7, B)
    assert review_items(bot, 7, B) == ["jaffle.orders", PYTHON_ITEM]
    recorded = bot.ledger.review(KEY, 7, B)
    assert recorded is not None
    assert (PYTHON_ITEM, files.digest(files.sources(src))) in recorded.items
    assert bot.approval(B).conclusion != "success"
    # Merged past the gate anyway: the promotion finds the Python change unapproved.
    merge = merge_pr(bot, 7, B)
    deploy = bot.checks_on(merge)["sluice/deploy"]
    assert deploy.conclusion == "failure" and "Python" in deploy.summary, deploy.summary
    assert applied == []


def test_a_new_module_after_approval_loses_it(bot: Bot) -> None:
    commit_change(bot, A, C)
    bot.pull(7, A)
    bot.deliver("pull_request", opened(7, A))
    bot.github.add_review(7, "bob", "APPROVED", A)
    bot.deliver("pull_request_review", review(7, "bob", A, 6003))
    commit_change(bot, B, A, append={"pandas.py": "x = 1\n"})  # a new module (shadows a package)
    push_head(bot, 7, B)
    assert PYTHON_ITEM in review_items(bot, 7, B)
    assert bot.approval(B).conclusion != "success"


def test_an_empty_plan_with_python_promotes_without_approvals(bot: Bot, applied: list[Any]) -> None:
    commit_change(bot, D, C, orders=False)  # the same project: prod already has this state
    bot.pull(9, D)
    merge = merge_pr(bot, 9, D)
    deploy = bot.checks_on(merge)["sluice/deploy"]
    assert deploy.conclusion == "success", deploy.summary
    assert deploy.title == "Prod already has this state"
    assert applied == []
