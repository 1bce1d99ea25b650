"""The review flow of ``tests/security/test_python_review.py`` and
``test_statements_review.py``: a bot on an in-memory GitHub whose prod runs the example
project at ``C``, the PR's build and the promotion's apply as stand-ins (no Spark), and
the steps of a PR (a commit, a push, a merge) and what its plan's review recorded.

The fixtures ``applied`` and ``bot`` are imported by the test modules that use them (and
named in their ``__all__``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.bot.flow import pr_build, promotion
from sluice.bot.forge.memory import MemoryForge
from sluice.core.preview import PreviewResult
from sluice.core.workflow import ApplyResult
from tests.helpers.cases import record_prod
from tests.security.github_bot import GATED, KEY, NOW, OWNER, Bot, C, merged, opened

ORDERS = (
    "  ON o.order_id = p.order_id",
    "  ON o.order_id = p.order_id\nWHERE o.status <> 'returned'",
)
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
    """The bot with main (and prod) at ``C``: the example project, with its Python;
    alice and bob may write."""
    github = MemoryForge(OWNER, name="github")
    github.roles.update({"alice": "write", "bob": "write"})
    made = Bot(tmp_path, github)
    made.prod(C, GATED)  # main at C: the example project, with its Python
    record_prod(made.root / f"tree-{C[:6]}", made.url, NOW)  # prod runs C
    yield made
    made.close()


def commit_change(
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


def push_head(bot: Bot, number: int, head: str) -> None:
    """``head`` pushed to PR ``number``, the webhook after."""
    bot.github.push(number, head)
    bot.deliver("pull_request", {**opened(number, head), "action": "synchronize"})


def review_items(bot: Bot, number: int, sha: str) -> list[str]:
    """The items of the review recorded for PR ``number``'s plan of ``sha``."""
    recorded = bot.ledger.review(KEY, number, sha)
    assert recorded is not None, f"no plan recorded for {sha[:7]}"
    return [name for name, _ in recorded.items]


def merge_pr(bot: Bot, number: int, head: str) -> str:
    """``head`` merged into main (as a merge commit holding its files), the webhook after."""
    bot.github.commit(MERGE, dict(bot.github.files[head]), parents=(C, head), branch="main")
    bot.github.close_pull(number, merged=True)
    bot.deliver("pull_request", merged(number, head, MERGE))
    return MERGE
