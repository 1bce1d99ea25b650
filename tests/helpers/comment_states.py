"""The demo's pull request, without Spark, in each state of its life: the comment as the
forge gets it after each event, built the way the flow builds it (the body from a
:class:`CommentState`, facts and sections through :class:`StickyComment` on the in-memory
forge and a SQLite ledger).

The demo's change: ``jaffle.orders`` drops returned orders (breaking; ``jaffle.daily_revenue``
and the Python model ``jaffle.customer_segments`` read it), ``jaffle.customers`` gets
``last_name_upper`` (non-breaking). Its table diffs are
made up to match what Spark finds on the example data.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

from sluice.bot.flow.ledger import Ledger
from sluice.bot.flow.sticky import StickyComment
from sluice.bot.forge.memory import MemoryForge
from sluice.bot.present import checks
from sluice.bot.present import comment as bot_comment
from sluice.bot.present.comment import CommentState
from sluice.core import workflow
from sluice.core.model.loader import load_project
from sluice.core.plan.plan import Plan
from sluice.core.preview import PreviewResult
from sluice.core.state import open_state
from sluice.core.tablediff.result import (
    ColumnStats,
    Samples,
    SchemaDiff,
    Sides,
    TableDiffResult,
)
from sluice.core.timeutil import to_ms
from tests.helpers.cases import record_prod

REPO = Path(__file__).resolve().parents[2]
NOW = to_ms("2018-04-30")
SHA = "9f" * 20
FOOTER = "Sluice · commit 9f9f9f9 · updated 2018-04-30 00:00 UTC · limits: 2 h per Spark job"
ENV = "pr_1"


def _edit(path: Path, pattern: str, replacement: str) -> None:
    text, count = re.subn(pattern, replacement, path.read_text(), count=1)
    assert count == 1, path
    path.write_text(text)


def demo_plans(root: Path) -> tuple[Plan, Plan]:
    """(the PR's plan against prod, prod planned at the PR's head once it is built)."""
    prod = root / "prod"
    shutil.copytree(REPO / "examples" / "jaffle_shop", prod,
                    ignore=shutil.ignore_patterns(".sluice"))  # fmt: skip
    url = f"sqlite:///{root / 'state.db'}"
    record_prod(prod, url, NOW)
    pr = root / "pr"
    shutil.copytree(prod, pr)
    _edit(pr / "models" / "orders.sql", r"(\n\s*ON o\.order_id = p\.order_id)\n?",
          "\\1\nWHERE o.status <> 'returned'\n")  # fmt: skip
    _edit(pr / "models" / "customers.sql", r"(\n(\s*)c\.last_name,\n)",
          "\\1\\2UPPER(c.last_name) AS last_name_upper,\n")  # fmt: skip
    project = load_project(pr, use_cache=False)
    store = open_state(url)
    try:
        plan = workflow.plan_environment(
            project, store, ENV, end=NOW, execution_time=NOW, against="prod"
        )
        for backfill in plan.backfill:  # what the PR's build wrote
            store.add_intervals(backfill.name, backfill.version, backfill.intervals)
        prod_plan = workflow.plan_environment(project, store, "prod", end=NOW, execution_time=NOW)
    finally:
        store.close()
    return plan, prod_plan


def _diff(name: str, key: str, rows: tuple[int, int], differing: int, columns: dict[str, int],
          *, schema: SchemaDiff | None = None, samples: Samples | None = None) -> TableDiffResult:  # fmt: skip
    source, target = rows
    lost = max(source - target, 0)
    joined = min(source, target)
    return TableDiffResult(
        name=name, source="prod", target=ENV, source_table=f"sluice__jaffle.{name}__a",
        target_table=f"sluice__jaffle.{name}__b", keys=(key,), decimals=3, tolerance=None,
        where=None, source_rows=source, target_rows=target, joined=joined, source_only=lost,
        target_only=0, differing_rows=differing, null_keys=Sides(0, 0),
        duplicate_keys=Sides(0, 0), duplicate_rows=Sides(0, 0), schema=schema or SchemaDiff(),
        columns={c: ColumnStats(joined - n, n) for c, n in columns.items()},
        samples=samples or Samples(), identical=False,
    )  # fmt: skip


def demo_preview(plan: Plan, *, tests_pass: bool = True) -> PreviewResult:
    orders = _diff(
        "jaffle.orders", "order_id", (99, 95), 0, {"amount": 0, "status": 0},
        samples=Samples(source_only=tuple(
            {"order_id": i, "status": "returned", "amount": 23.0} for i in (2, 19, 54, 77)
        )),
    )  # fmt: skip
    customers = _diff(
        "jaffle.customers", "customer_id", (100, 100), 4, {"customer_lifetime_value": 4, "number_of_orders": 3},
        schema=SchemaDiff(added=(("last_name_upper", "string"),)),
        samples=Samples(differing=({"customer_id": 3, "number_of_orders": {"source": 3, "target": 2}},)),
    )  # fmt: skip
    revenue = _diff("jaffle.daily_revenue", "ds", (119, 118), 3, {"revenue": 3})
    segments = _diff(
        "jaffle.customer_segments", "customer_id", (62, 60), 2,
        {"number_of_orders": 2, "lifetime_value": 2, "segment": 0},
    )  # fmt: skip
    tests: tuple[dict[str, object], ...] = (
        {"name": "test_orders", "passed": True},
        {"name": "test_customers", "passed": tests_pass, "diff": ["- 3", "+ 2"]},
    )
    return PreviewResult(
        plan=plan, tests=tests, built=4, views=10,
        diffs={"jaffle.orders": orders, "jaffle.customers": customers,
               "jaffle.daily_revenue": revenue, "jaffle.customer_segments": segments},
        diff_errors={}, skipped_diffs={}, job=None, seconds=41.6,
        rows_built=12_480, bytes_built=2_310_000,
    )  # fmt: skip


class Story:
    """One PR's comment on the in-memory forge, moved through its events."""

    def __init__(self, root: Path, plan: Plan, prod_plan: Plan) -> None:
        self.forge = MemoryForge("octo/warehouse", name="github")
        self.forge.commit("0" * 40, {"config.yaml": ""}, branch="main")
        self.forge.commit(SHA, {"config.yaml": ""}, parents=("0" * 40,))
        self.forge.open_pull(1, head_sha=SHA, base="main", author="alice")
        self.ledger = Ledger(f"sqlite:///{root / 'ledger.db'}")
        self.sticky = StickyComment(self.ledger)
        self.plan, self.prod_plan = plan, prod_plan

    def close(self) -> None:
        self.ledger.close()

    def text(self) -> str:
        """The comment as the forge has it."""
        [body] = [c for c in self.forge.bot_comments(1) if self.sticky.marker in c]
        return body

    def body(self, state: CommentState, *, reset: bool = False) -> None:
        """What the PR build posts (``pr_build._Poster.comment``)."""
        body = bot_comment.comment(state, limit=self.forge.comment_limit,
                                   marker=self.sticky.marker)  # fmt: skip
        sections = [bot_comment.facts_section(state),
                    *(bot_comment.reset_sections() if reset else [])]  # fmt: skip
        self.sticky.publish(self.forge, 1, body=body, sections=sections)

    def built(self, preview: PreviewResult, failed: bool = False) -> None:
        conclusions = (
            (checks.TESTS, "failure: 1 of 2 unit tests failed" if failed else
             "success: 2 unit tests passed"),
            (checks.ENVIRONMENT, "success: pr_1: 4 tables built, 10 views"),
            (checks.PROD_PLAN, "success: Merging is a virtual update: 0 rows written"),
        )  # fmt: skip
        self.body(CommentState(
            "jaffle", ENV, SHA, "failure" if failed else "success", "built", preview=preview,
            checks=conclusions, footer=FOOTER, prod_plan=self.prod_plan,
        ))  # fmt: skip

    def gate(
        self, ok: bool, summary: str, missing: int = 0, approved: tuple[str, ...] = ()
    ) -> None:
        sections = bot_comment.approval_sections(
            ok, summary, requires_approval=True, missing=missing,
            eligible=() if ok else ("bob", "carol"), owners_missing={},
            approved_by=approved, stale=False, into_prod=True,
        )  # fmt: skip
        self.sticky.publish(self.forge, 1, sections=sections)

    def promoted(self) -> None:
        title, summary = checks.virtual_update(10)
        self.sticky.publish(self.forge, 1, sections=bot_comment.promotion_sections(
            "ab" * 20, True, title, summary))  # fmt: skip
        self.sticky.publish(self.forge, 1, sections=bot_comment.closed_sections(
            ENV, "promoted to prod", merged=True, removed=True, promoted=True))  # fmt: skip

    def closed(self) -> None:
        self.sticky.publish(self.forge, 1, sections=bot_comment.closed_sections(
            ENV, "the PR was closed", merged=False, removed=True, promoted=False))  # fmt: skip


WAITING = "No approval yet: 1 more approval needed from @bob or @carol."
APPROVED = "Approved by @bob for this plan."


def _opened(story: Story, preview: PreviewResult) -> None:
    story.body(CommentState("jaffle", ENV, SHA, "queued", "queued",
                            progress="Fetching the project", footer=FOOTER), reset=True)  # fmt: skip
    story.built(preview)


def _waiting(story: Story, preview: PreviewResult) -> None:
    _opened(story, preview)
    story.gate(False, WAITING, missing=1)


def _approved(story: Story, preview: PreviewResult) -> None:
    _waiting(story, preview)
    story.gate(True, APPROVED, approved=("bob",))


def _promoted(story: Story, preview: PreviewResult) -> None:
    _approved(story, preview)
    story.promoted()


def _closed(story: Story, preview: PreviewResult) -> None:
    _waiting(story, preview)
    story.closed()


def _failure(story: Story, preview: PreviewResult) -> None:
    story.built(demo_preview(story.plan, tests_pass=False), failed=True)
    story.gate(False, WAITING, missing=1)


def _building(story: Story, preview: PreviewResult) -> None:
    _waiting(story, preview)  # a push after the first build: the new build is running
    story.body(CommentState("jaffle", ENV, SHA, "running", "building", plan=story.plan,
                            progress="Building 2 of 3 models (build jaffle.orders)",
                            footer=FOOTER), reset=True)  # fmt: skip


STATES: dict[str, Callable[[Story, PreviewResult], None]] = {
    "opened": _opened,
    "waiting": _waiting,
    "approved": _approved,
    "promoted": _promoted,
    "closed": _closed,
    "failure": _failure,
    "building": _building,
}
"""State name -> the events that lead there (tests/fixtures/comments/<name>.md)."""
