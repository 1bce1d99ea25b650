"""The project's Python is an item of a plan's review only when it differs from prod's
(the Python of the commit prod was last promoted with): a PR that leaves Python alone is
approved for its models alone, one that changes any Python file after an approval loses
it, and a promotion with nothing to change needs no approval for Python it already runs.

The flow runs on an in-memory GitHub; the PR's build and the promotion's apply are
stand-ins (no Spark), so what is checked is what the gate records and requires.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.bot.flow import pr_build, promotion
from sluice.bot.flow.reviewed_plan import PYTHON_ITEM
from sluice.bot.forge.memory import MemoryForge
from sluice.core.model.pycode import files
from sluice.core.preview import PreviewResult
from sluice.core.workflow import ApplyResult
from tests.helpers.cases import record_prod
from tests.security.github_bot import (
    GATED,
    KEY,
    NOW,
    OWNER,
    A,
    B,
    Bot,
    C,
    D,
    merged,
    opened,
    review,
)

ORDERS = ("  ON o.order_id = p.order_id", "  ON o.order_id = p.order_id\nWHERE o.amount > 0")
MERGE = "e" * 40


@pytest.fixture
def applied(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The plans promotions applied (a stand-in: no Spark); PR builds are stand-ins too."""
    plans: list[Any] = []

    def preview(_project: Any, _store: Any, plan: Any, *_args: Any, **_kw: Any) -> PreviewResult:
        return PreviewResult(plan, (), 0, 0, {}, {}, {}, None)  # built, no Spark

    def apply(_project: Any, _store: Any, plan: Any, *_args: Any, **_kw: Any) -> ApplyResult:
        plans.append(plan)
        return ApplyResult(plan, 0, 1, None)

    monkeypatch.setattr(pr_build, "preview_environment", preview)
    monkeypatch.setattr(promotion, "apply_plan", apply)
    return plans


@pytest.fixture
def bot(tmp_path: Path, applied: list[Any]) -> Iterator[Bot]:
    github = MemoryForge(OWNER, name="github")
    github.roles.update({"alice": "write", "bob": "write"})
    made = Bot(tmp_path, github)
    made.prod(C, GATED)  # main at C: the example project, with its Python
    record_prod(made.root / f"tree-{C[:6]}", made.url, NOW)  # prod runs C
    yield made
    made.close()


def _commit(
    bot: Bot, sha: str, parent: str, *, orders: bool = True, append: dict[str, str] | None = None
) -> Path:
    """The example project with orders.sql's SQL change (``orders``) and ``append``
    (path -> text appended to that file, or its content when it is new)."""
    src = bot.commit(sha, GATED, parents=(parent,))
    if orders:
        path = src / "models" / "orders.sql"
        path.write_text(path.read_text().replace(*ORDERS))
    for rel, text in (append or {}).items():
        path = src / rel
        path.write_text((path.read_text() if path.exists() else "") + text)
    bot.github.commit_folder(sha, src, parents=(parent,))
    return src


def _push(bot: Bot, number: int, head: str) -> None:
    bot.github.push(number, head)
    bot.deliver("pull_request", {**opened(number, head), "action": "synchronize"})


def _items(bot: Bot, number: int, sha: str) -> list[str]:
    recorded = bot.ledger.review(KEY, number, sha)
    assert recorded is not None, f"no plan recorded for {sha[:7]}"
    return [name for name, _ in recorded.items]


def _merge(bot: Bot, number: int, head: str) -> str:
    """``head`` merged into main (as a merge commit holding its files), the webhook after."""
    bot.github.commit(MERGE, dict(bot.github.files[head]), parents=(C, head), branch="main")
    bot.github.close_pull(number, merged=True)
    bot.deliver("pull_request", merged(number, head, MERGE))
    return MERGE


def test_unchanged_python_promotes_with_an_approval_of_the_sql_change_only(
    bot: Bot, applied: list[Any]
) -> None:
    _commit(bot, A, C)
    bot.pull(7, A)
    bot.deliver("pull_request", opened(7, A))
    assert _items(bot, 7, A) == ["jaffle.orders"]  # prod's Python: nothing to approve
    bot.github.add_review(7, "bob", "APPROVED", A)
    bot.deliver("pull_request_review", review(7, "bob", A, 6001))
    assert bot.approval(A).conclusion == "success"
    # A push that touches no Python (nor a model) keeps the approval.
    _commit(bot, B, A, append={"NOTES.md": "notes\n"})
    _push(bot, 7, B)
    assert _items(bot, 7, B) == ["jaffle.orders"]
    assert bot.approval(B).conclusion == "success", bot.approval(B).summary
    merge = _merge(bot, 7, B)
    deploy = bot.checks_on(merge)["sluice/deploy"]
    assert deploy.conclusion == "success", deploy.summary
    assert [p.environment for p in applied] == ["prod"]


def test_a_python_helper_changed_after_approval_loses_it(bot: Bot, applied: list[Any]) -> None:
    _commit(bot, A, C)
    bot.pull(7, A)
    bot.deliver("pull_request", opened(7, A))
    bot.github.add_review(7, "bob", "APPROVED", A)
    bot.deliver("pull_request_review", review(7, "bob", A, 6002))
    assert bot.approval(A).conclusion == "success"
    # Module-level code in a helper: in no model's code, so the plan's models are as before.
    src = _commit(bot, B, A, append={"macros/money.py": "\nRATE = __import__('os').getpid()\n"})
    _push(bot, 7, B)
    assert _items(bot, 7, B) == ["jaffle.orders", PYTHON_ITEM]
    recorded = bot.ledger.review(KEY, 7, B)
    assert recorded is not None
    assert (PYTHON_ITEM, files.digest(files.sources(src))) in recorded.items
    assert bot.approval(B).conclusion != "success"
    # Merged past the gate anyway: the promotion finds the Python change unapproved.
    merge = _merge(bot, 7, B)
    deploy = bot.checks_on(merge)["sluice/deploy"]
    assert deploy.conclusion == "failure" and "Python" in deploy.summary, deploy.summary
    assert applied == []


def test_a_new_module_after_approval_loses_it(bot: Bot) -> None:
    _commit(bot, A, C)
    bot.pull(7, A)
    bot.deliver("pull_request", opened(7, A))
    bot.github.add_review(7, "bob", "APPROVED", A)
    bot.deliver("pull_request_review", review(7, "bob", A, 6003))
    _commit(bot, B, A, append={"pandas.py": "x = 1\n"})  # a new module (shadows a package)
    _push(bot, 7, B)
    assert PYTHON_ITEM in _items(bot, 7, B)
    assert bot.approval(B).conclusion != "success"


def test_an_empty_plan_with_python_promotes_without_approvals(bot: Bot, applied: list[Any]) -> None:
    _commit(bot, D, C, orders=False)  # the same project: prod already has this state
    bot.pull(9, D)
    merge = _merge(bot, 9, D)
    deploy = bot.checks_on(merge)["sluice/deploy"]
    assert deploy.conclusion == "success", deploy.summary
    assert deploy.title == "Prod already has this state"
    assert applied == []
