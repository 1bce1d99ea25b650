"""A pull request that changes Python, end to end on real Spark (issue 23).

examples/python_shop's prod is built, then a PR edits its two kinds of Python: the
PySpark model ``customer_segments`` (a customer is loyal from 5 orders, not 3) and the
helper that its Python macro ``@cents_to_dollars`` uses (amounts rounded to whole
dollars), which changes the SQL ``payments`` renders to. With ``SLUICE_PROJECT_PYTHON=on``
the flow builds the PR's environment through spark-submit, as in production, and reports
on an in-memory GitHub (:class:`~sluice.bot.forge.memory.MemoryForge`); the sticky
comment's plan and table diffs are asserted with the figures the data gives. With the
default ``prod`` the same PR is refused, naming the changed file, and nothing is built
(the refusal itself is tested in test_python_policy.py; here, what the PR is told).

The data (models/payments.sql): customer 1 pays $10, $25.50, $3 and $12 (4 orders,
$50.50), customer 2 pays $7 once, customer 3 pays $99 once: prod segments them loyal,
occasional and big spender. In the PR payment 2 rounds to $26 (the others are whole
dollars), so customer 1 has $51, and its 4 orders are no longer loyal at 5: customer 1
becomes a big spender (>= $50). segment_counts loses its `loyal` row and counts 2 big
spenders. Categories: ``payments`` and ``customer_segments`` are changed directly (both
breaking); ``customers`` (reads payments) and ``segment_counts`` are reached downstream.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from sluice.bot.events.github import parse_github
from sluice.bot.flow import dispatch
from sluice.bot.flow.deps import make_deps
from sluice.bot.forge.memory import MemoryForge
from sluice.core import workflow
from sluice.core.model.loader import load_project
from sluice.core.spark.session import SparkPaths
from sluice.core.spark.submit import SubmitRunner
from sluice.core.state import open_state
from sluice.core.timeutil import to_ms
from tests.helpers.cases import CASE_REPOSITORY_ID, realcase

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[3]
OWNER = "Codertocat/Hello-World"  # the payload's own repository: its head is no fork
NOW = to_ms("2024-02-01")
MAIN_SHA = "0" * 40
PR_SHA = "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678"
REFUSED_SHA = "d4e5f60718293a4b5c6d7e8f901234567890abcd"  # the same tree, another PR
DIVIDE = "    return exp.Div(this=column, expression=exp.Literal.number(100))\n"


@dataclass
class Shop:
    """The prod branch's and the PR's trees on the in-memory GitHub, the state and the
    warehouse the flow uses."""

    root: Path
    work: Path
    url: str
    forge: MemoryForge


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} not once in {path}"
    path.write_text(text.replace(old, new))


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> Shop:
    """The two commits, no Spark: ``main`` (the example) and the PR's head."""
    root = tmp_path_factory.mktemp("python-flow")
    base = root / "base"
    # The example's tests/ (unit tests) are left out: this PR is about the plan and diffs.
    shutil.copytree(REPO / "examples" / "python_shop", base,
                    ignore=shutil.ignore_patterns(".sluice", "tests"))  # fmt: skip
    # On main, the macro hands the division to a helper of its file (a PR edits that).
    money = base / "macros" / "money.py"
    _edit(money, DIVIDE, "    return dollars(column)\n")
    _edit(money, "\n\n@macro()", f'\n\ndef dollars(column):\n    """Cents as dollars."""\n{DIVIDE}\n\n@macro()')  # fmt: skip
    pr = root / "pr"
    shutil.copytree(base, pr)
    _edit(pr / "models" / "customer_segments.py", "LOYAL_ORDERS = 3", "LOYAL_ORDERS = 5")
    _edit(pr / "macros" / "money.py", DIVIDE,
          "    cents = exp.Div(this=column, expression=exp.Literal.number(100))\n"
          "    return exp.Round(this=cents, decimals=exp.Literal.number(0))\n")  # fmt: skip
    forge = MemoryForge(OWNER, name="github")
    forge.repositories[CASE_REPOSITORY_ID] = OWNER  # the id the bodies carry
    forge.commit_folder(MAIN_SHA, base, branch="main")
    for sha in (PR_SHA, REFUSED_SHA):
        forge.commit_folder(sha, pr, parents=(MAIN_SHA,))
    return Shop(root, root / "work", f"sqlite:///{root / 'state.db'}", forge)


@pytest.fixture(scope="module")
def shop(trees: Shop) -> Shop:
    """``trees`` with prod built on Spark from ``main``."""
    project = load_project(trees.root / "base", use_cache=False)
    paths = SparkPaths(root=(trees.work / "spark").resolve(), logs=(trees.work / "logs").resolve())
    store = open_state(trees.url)
    try:
        plan = workflow.plan_environment(project, store, "prod", end=NOW, execution_time=NOW)
        runner = SubmitRunner(project.config.sluice.spark, paths)
        workflow.apply_plan(project, store, plan, runner, url=trees.url, now=NOW)
    finally:
        store.close()
    return trees


def _open(shop: Shop, number: int, sha: str, project_python: str) -> str:
    """Open PR ``number`` at ``sha`` and hand its webhook to the flow, whose
    ``SLUICE_PROJECT_PYTHON`` is ``project_python``; the sticky comment it leaves."""
    shop.forge.open_pull(number, head_sha=sha, base="main", author="Codertocat")
    payload = realcase("github/pull_request/opened.payload.json", OWNER, **{
        "number": number, "pull_request.number": number, "pull_request.head.sha": sha,
        "pull_request.base.ref": "main", "pull_request.base.sha": MAIN_SHA,
    })  # fmt: skip
    event = parse_github("pull_request", payload)
    assert event is not None
    deps = make_deps(project_python=project_python, forge_for=lambda _event: shop.forge,
                     workdir=shop.work, state_url=shop.url, clock=lambda: NOW)  # fmt: skip
    try:
        dispatch.handle(deps, event)
    finally:
        deps.close()
    [comment] = shop.forge.bot_comments(number)
    (shop.root / f"comment-{number}.md").write_text(comment)  # to read when an assertion fails
    return comment


def _section(text: str, heading: str) -> str:
    """The comment's part from ``heading`` to the next ``####`` heading."""
    assert heading in text, heading
    return text.split(heading, 1)[1].split("\n#### ", 1)[0]


def test_a_pr_changing_a_pyspark_model_and_a_macro_helper_shows_its_plan_and_diffs(
    shop: Shop,
) -> None:
    text = _open(shop, 2, PR_SHA, "on")
    checks = {n: (c.conclusion, c.title) for n, c in shop.forge.checks[PR_SHA].items()}
    assert checks == {
        "sluice/tests": ("success", "No unit tests"),
        "sluice/pr-environment": ("success", "pr_2: 4 tables built, 4 views"),
        "sluice/prod-plan": ("success", "Merging is a virtual update: 0 rows written"),
        "sluice/approval": ("success", "No approval required"),
    }
    headline = text.split("\n")[1]
    assert headline.startswith("### ") and "`pyshop`: " in headline, headline
    assert "2 breaking changes reach 2 models" in headline, headline

    # The plan: the two Python edits are direct changes, both breaking (the macro's
    # helper as the SQL payments renders to); what reads them is reached downstream.
    table = _section(text, "#### Impact: `pr_2` against prod").strip().split("\n\n")[0]
    rows = [row.strip("| ").split(" | ") for row in table.splitlines()[2:]]
    # Model, change, why (its start: the column-lineage note after it is not asserted),
    # rows, columns, table; the riskiest first, the biggest data change first in a kind.
    # "reads" names a downstream model's own parents that change (segment_counts reads
    # customer_segments, not payments, which reaches it through customers).
    assert [(n, change, why.split(";")[0], *rest) for n, change, why, *rest in rows] == [
        ("`pyshop.customer_segments`", "**breaking**",
         "its Python changed, and it reads `pyshop.customers`, changed here too",
         "3 → 3, 1 differs", "its rows change", "built"),
        ("`pyshop.payments`", "**breaking**", "its SQL changed", "6 → 6, 1 differs",
         "values of `amount`", "built"),
        ("`pyshop.segment_counts`", "breaking, downstream",
         "reads `pyshop.customer_segments`", "3 → 2 (-1), 1 differs",
         "values of `customers`", "built"),
        ("`pyshop.customers`", "breaking, downstream", "reads `pyshop.payments`",
         "3 → 3, 1 differs", "values of `customer_lifetime_value`", "built"),
    ], table  # fmt: skip
    # The diffs: the macro's output in payments' SQL, the model's constant in its code.
    payments_diff = _section(text, "SQL diff of pyshop.payments")
    assert "\n-  amount_cents / 100 AS amount\n" in payments_diff
    assert "\n+  ROUND(amount_cents / 100, 0) AS amount\n" in payments_diff
    segments_diff = _section(text, "Python diff of pyshop.customer_segments")
    assert "\n-LOYAL_ORDERS = 3\n+LOYAL_ORDERS = 5\n" in segments_diff
    for name in ("payments", "customers", "customer_segments", "segment_counts"):
        assert f"| `pyshop.{name}` | full refresh | \\- |" in text, name

    # The table diffs: customer 1, and only it, changes segment and value.
    assert "#### Table diffs against prod, biggest change first" in text
    segments = _section(text, "#### `pyshop.customer_segments`: prod → pr_2: 1 row differs")
    for line in ("| rows | 3 | 3 |  |", "| `lifetime_value` | 66.67% | 1 |",
                 "| `segment` | 66.67% | 1 |",
                 "1 other column (number_of_orders) matches fully.",
                 "3 rows joined on customer_id; 1 differs",
                 "| 1 | lifetime_value | 50.5 | 51.0 |", "| 1 | segment | loyal | big spender |"):  # fmt: skip
        assert line in segments, line
    payments = _section(text, "#### `pyshop.payments`: prod → pr_2: 1 row differs")
    for line in ("| rows | 6 | 6 |  |", "| `amount` | 83.33% | 1 |",
                 "6 rows joined on payment_id; 1 differs", "| 2 | amount | 25.5 | 26.0 |"):  # fmt: skip
        assert line in payments, line
    customers = _section(text, "#### `pyshop.customers`: prod → pr_2: 1 row differs")
    for line in ("| rows | 3 | 3 |  |", "| `customer_lifetime_value` | 66.67% | 1 |",
                 "| 1 | customer_lifetime_value | 50.5 | 51.0 |"):  # fmt: skip
        assert line in customers, line
    counts = _section(
        text, "#### `pyshop.segment_counts`: prod → pr_2: 1 row differs, 1 row only in prod"
    )
    for line in ("| rows | 3 | 2 | -33.33% |", "| only in this side | 1 | 0 |  |",
                 "| `customers` | 50.00% | 1 |", "2 rows joined on segment; 1 differs",
                 "| big spender | customers | 1 | 2 |", "| segment | customers |\n| --- | --- |\n"
                 "| loyal | 1 |"):  # fmt: skip
        assert line in counts, line
    assert "| `sluice/pr-environment` | success: pr_2: 4 tables built, 4 views |" in text


def test_with_python_run_as_on_the_prod_branch_the_pr_is_told_which_file_changed(
    trees: Shop,
) -> None:
    text = _open(trees, 3, REFUSED_SHA, "prod")
    assert "The project does not load" in text.split("\n")[1]
    # Both changed files are named, and the error points at the first of them.
    # (The comment gives the location, then the error as quoted text, its backticks
    # escaped: the author's words, never markup.)
    assert "at `macros/money.py:1`" in text, text
    assert (
        "> this project's Python (macros/money.py, models/customer_segments.py) is not run" in text
    )
    assert (
        "this pull request changes Python (macros/money.py, models/customer_segments.py), and "
        "this service runs a project's Python only as it is on the prod branch \\`main\\` (" in text
    )
    # ... which commit of it: the one prod was last promoted with while a gate guards prod
    # (its pin), else its head (what the earlier tests of this module left decides)
    assert re.search(
        r"\\`main\\` \((\\`0{7}\\`, the commit prod was last promoted with|its head)\) "
        r"\(SLUICE_PROJECT_PYTHON=prod",
        text,
    ), text
    assert "SLUICE_PROJECT_PYTHON=on" in text
    checks = trees.forge.checks[REFUSED_SHA]
    assert {n: c.conclusion for n, c in checks.items()} == {
        "sluice/tests": "failure", "sluice/pr-environment": "failure",
        "sluice/prod-plan": "failure", "sluice/approval": "failure",
    }, checks  # fmt: skip
    # Refused before Spark: no environment was recorded for it.
    store = open_state(trees.url)
    try:
        assert store.get_environment("pr_3") is None
    finally:
        store.close()
