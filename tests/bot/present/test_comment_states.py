"""The PR comment in each state of a PR's life (tests/helpers/comment_states.py), as the forge
gets it, computed by the product (core's planner and build on the demo project and on a
generated one of 58 models, with only Spark's answers made up): compared with golden
files, rendered by GitHub's own Markdown engine (cmark-gfm with GitHub's extensions) and
checked for its HTML structure, laid out by Chromium at 1,280 px (nothing overflows), its
Mermaid graph checked by Mermaid itself.

Golden files: ``tests/fixtures/comments/<state>.md``; a test fails when one differs from
what the product renders now. After a deliberate change of the comment, regenerate them
and read the diff as a reviewer would::

    SLUICE_UPDATE_GOLDEN=1 .venv/bin/pytest -p no:cacheprovider tests/bot/present/test_comment_states.py
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options

from sluice.bot.present import graph, impact
from sluice.core.plan.plan import Plan
from tests.helpers.comment_states import (
    LONG_NAME,
    STATES,
    Demo,
    Large,
    Story,
    large_story,
)
from tests.helpers.web import chromium

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "comments"
UPDATE = os.environ.get("SLUICE_UPDATE_GOLDEN") == "1"
LIMIT = 65_536


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    return Demo(tmp_path_factory.mktemp("demo"))


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> Large:
    return Large(tmp_path_factory.mktemp("large"))


NAMES = sorted([*STATES, "large"])


@pytest.fixture(scope="module")
def texts(demo: Demo, large: Large, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    out = {}
    for name, events in STATES.items():
        story = Story(tmp_path_factory.mktemp(name), demo.plan, demo.prod_plan,
                      recent_days=demo.recent_days)  # fmt: skip
        try:
            events(story, demo)
            out[name] = story.text()
        finally:
            story.close()
    story = Story(tmp_path_factory.mktemp("large"), large.plan, large.prod_plan, "shop",
                  large.recent_days)  # fmt: skip
    try:
        large_story(story, large)
        out["large"] = story.text()
    finally:
        story.close()
    return out


# -- GitHub's Markdown ---------------------------------------------------------------------


def gfm(text: str) -> str:
    """``text`` as GitHub renders it: cmark-gfm with table, strikethrough, autolink and
    tagfilter; raw HTML kept (GitHub keeps <details>, <summary>, <sub>, then sanitizes)."""
    return cmarkgfm.github_flavored_markdown_to_html(text, options=Options.CMARK_OPT_UNSAFE)


@dataclass
class Node:
    tag: str
    attrs: dict[str, str | None] = field(default_factory=dict)
    children: list[Node] = field(default_factory=list)
    text: str = ""
    parent: Node | None = None

    def walk(self) -> Iterator[Node]:
        yield self
        for child in self.children:
            yield from child.walk()

    def all(self, tag: str) -> list[Node]:
        return [n for n in self.walk() if n.tag == tag]

    def ancestors(self) -> Iterator[Node]:
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def content(self) -> str:
        return self.text + "".join(c.content() for c in self.children)


_VOID = {"br", "hr", "img", "input", "meta", "link"}


class Tree(HTMLParser):
    """The element tree of rendered HTML (cmark-gfm's output is well nested)."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("root")
        self.at = self.root
        self.comments: list[str] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, dict(attrs), parent=self.at)
        self.at.children.append(node)
        if tag not in _VOID:
            self.at = node

    def handle_endtag(self, tag: str) -> None:
        node: Node | None = self.at
        while node is not None and node.tag != tag:
            node = node.parent
        assert node is not None and node.parent is not None, f"</{tag}> closes nothing"
        self.at = node.parent

    def handle_data(self, data: str) -> None:
        self.at.children.append(Node("#text", text=data, parent=self.at))

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)


OUR_TAGS = {
    "h3", "h4", "p", "ul", "li", "strong", "em", "code", "pre", "table", "thead", "tbody",
    "tr", "th", "td", "details", "summary", "sub", "blockquote", "br", "a", "#text",
}  # fmt: skip


def structure(text: str) -> Tree:
    """The rendered comment, with what holds for every state checked."""
    tree = Tree(gfm(text))
    tags = {n.tag for n in tree.root.walk()} - {"root"}
    assert tags <= OUR_TAGS, tags - OUR_TAGS
    assert tree.comments == [" sluice:pr-comment "], tree.comments  # no placeholder left
    for details in tree.root.all("details"):
        assert details.children[0].tag == "summary", "a <details> opens with its summary"
        assert not any(a.tag in ("li", "td") for a in details.ancestors()), "no fold in a list"
    for item in tree.root.all("li"):
        assert not item.all("details") and not item.all("h4")
    return tree


def headline(tree: Tree) -> str:
    [h3] = tree.root.all("h3")
    return h3.content()


def impact_table(tree: Tree) -> list[list[str]]:
    [table] = [t for t in tree.root.all("table") if t.all("th")[0].content() == "Model"]
    return [[cell.content() for cell in row.children if cell.tag in ("th", "td")]
            for row in table.all("tr")]  # fmt: skip


def section(tree: Tree, title: str) -> list[Node]:
    """The top-level elements after the <h4> ``title``, up to the next heading."""
    top = [n for n in tree.root.children if n.tag != "#text"]
    starts = [i for i, n in enumerate(top) if n.tag == "h4" and n.content().startswith(title)]
    if not starts:
        return []
    out = []
    for node in top[starts[0] + 1 :]:
        if node.tag in ("h3", "h4"):
            break
        out.append(node)
    return out


# -- the goldens ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_each_state_matches_its_golden_file(name: str, texts: dict[str, str]) -> None:
    path = GOLDEN / f"{name}.md"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(texts[name])
    assert path.exists(), f"{path} is missing: run with SLUICE_UPDATE_GOLDEN=1"
    assert texts[name] == path.read_text(), (
        f"the {name} comment changed: if on purpose, run SLUICE_UPDATE_GOLDEN=1 .venv/bin/pytest "
        f"-p no:cacheprovider {Path(__file__).relative_to(GOLDEN.parents[2])} and review the "
        f"diff of {path}"
    )


def test_every_golden_file_is_a_state_the_product_renders() -> None:
    assert sorted(p.stem for p in GOLDEN.glob("*.md")) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_every_state_renders_as_github_shows_it(name: str, texts: dict[str, str]) -> None:
    structure(texts[name])
    assert len(texts[name]) < LIMIT


def test_opened_says_the_risk_and_what_merging_does(texts: dict[str, str], demo: Demo) -> None:
    tree = structure(texts["opened"])
    assert headline(tree).endswith("1 breaking change reaches 2 models; checking approvals")
    first = tree.root.children[[n.tag for n in tree.root.children].index("h3") + 1 :]
    merging, built = [n.content() for n in first if n.tag == "p"][:2]
    # The PR built daily_revenue's last 30 days (sluice.pr.backfill_days): prod computes
    # the rest of its history on merge, as prod's plan at the PR's head says.
    [backfill] = demo.prod_plan.backfill
    assert backfill.name == "jaffle.daily_revenue"
    assert merging.startswith(
        f"Merging computes {len(backfill.intervals)} intervals of jaffle.daily_revenue in prod, "
    )
    # The build's counts as core counted them (its job spec), its rows and bytes as the
    # fake Spark recorded them: 1,000 + 37 per character of each model's name, 185 B a row.
    built_rows = sum(1_000 + 37 * len(b.name) for b in demo.plan.backfill)
    assert demo.preview.built == len(demo.plan.backfill) == 4
    assert built.startswith(f"This PR built 4 tables ({built_rows:,} rows, ")
    assert built.endswith(f"and {demo.preview.views} views in pr_1 in 42 s of Spark.")


def test_the_impact_table_is_one_table_riskiest_first(texts: dict[str, str]) -> None:
    rows = impact_table(structure(texts["waiting"]))
    assert rows[0][:2] == ["Model", "Change"]
    assert [r[0] for r in rows[1:]] == [
        "jaffle.orders", "jaffle.customer_segments", "jaffle.daily_revenue", "jaffle.customers",
    ]  # fmt: skip
    orders, segments, revenue, customers = rows[1:]
    assert orders[1:4] == ["breaking", "its SQL changed", "99 → 95 (-4)"]
    assert revenue[1] == "breaking, downstream" and revenue[2].startswith("reads jaffle.orders")
    assert segments[1:4] == [
        "breaking, downstream",
        "reads jaffle.orders",
        "62 → 60 (-2), 2 differ",
    ]
    assert "reads jaffle.orders, changed here too" in customers[2]  # why its data moved
    assert customers[3] == "100 → 100, 4 differ" and "+last_name_upper" in customers[4]
    assert {r[5] for r in rows[1:]} == {"built"}


def test_sql_diffs_fold_outside_any_list(texts: dict[str, str]) -> None:
    tree = structure(texts["opened"])
    folds = [d for d in tree.root.all("details") if "SQL diff" in d.children[0].content()]
    assert [f.parent.tag if f.parent else None for f in folds] == ["root", "root"]
    assert all(f.all("pre") for f in folds)


def test_table_diffs_biggest_change_first_with_environments(texts: dict[str, str]) -> None:
    tree = structure(texts["opened"])
    heads = [h.content() for h in section(tree, "Table diffs") if h.tag == "h4"]
    heads = [h.content() for h in tree.root.all("h4") if ": prod → pr_1" in h.content()]
    assert heads[0].startswith("jaffle.orders: prod → pr_1: 4 rows only in prod")
    assert heads[1].startswith("jaffle.customer_segments")  # breaking before non-breaking
    assert heads[2].startswith("jaffle.daily_revenue")
    counts = [t for t in tree.root.all("table") if t.all("th")[1].content() == "prod"]
    assert [th.content() for th in counts[0].all("th")] == ["", "prod", "pr_1", "Change"]
    labels = [tr.all("td")[0].content() for tr in counts[0].all("tr")[1:]]
    assert labels == ["rows", "only in this side"]  # no all-zero line


def test_waiting_names_who_must_approve_and_the_next_steps(texts: dict[str, str]) -> None:
    tree = structure(texts["waiting"])
    assert headline(tree).endswith("1 breaking change reaches 2 models; waiting for @bob or @carol")
    [steps] = [n for n in section(tree, "Next steps") if n.tag == "ul"]
    items = [li.content() for li in steps.children if li.tag == "li"]
    assert items[0] == (
        "Query the PR's data: sluice query pr_1 'SELECT * FROM jaffle__pr_1.orders LIMIT 10'"
    )
    assert any("Approve this plan" in i for i in items)
    assert not any("/sluice deploy" in i for i in items)


def test_approved_is_ready_to_merge(texts: dict[str, str]) -> None:
    tree = structure(texts["approved"])
    assert "✅ Sluice · jaffle: ready to merge" in headline(tree)
    steps = " ".join(n.content() for n in section(tree, "Next steps"))
    assert "/sluice deploy" in steps and "Approve this plan" not in steps


def test_after_the_merge_nothing_says_ready_or_query(texts: dict[str, str]) -> None:
    for name, words in (("promoted", "promoted to prod"), ("closed", "closed without merging")):
        tree = structure(texts[name])
        assert words in headline(tree)
        plain = tree.root.content()
        assert "pr_1 is removed" in plain
        assert "sluice query" not in plain and "ready" not in plain.lower()
        assert not section(tree, "Next steps")
        assert "Merging is a virtual update" not in plain


def test_a_failure_says_what_failed(texts: dict[str, str]) -> None:
    tree = structure(texts["failure"])
    assert headline(tree).startswith("❌ Sluice · jaffle: 1 unit test failed (1 breaking change")


def test_a_new_build_drops_the_old_verdict(texts: dict[str, str]) -> None:
    tree = structure(texts["building"])
    assert headline(tree).endswith("building")
    assert "ready to merge" not in tree.root.content()
    assert "Approval:" not in tree.root.content()  # the gate of the last head is gone


def test_a_closed_pr_waits_for_no_one(texts: dict[str, str]) -> None:
    assert "Approval:" not in structure(texts["closed"]).root.content()


def test_next_steps_sit_right_under_the_verdict(texts: dict[str, str]) -> None:
    for name in ("opened", "waiting", "approved", "failure", "build_failed", "large"):
        top = [n for n in structure(texts[name]).root.children if n.tag != "#text"]
        heads = [n.content() for n in top if n.tag == "h4"]
        assert heads[0] == "Next steps", (name, heads)
        # Between the headline and them: the verdict (paragraphs) only, or the failure.
        before = top[1 : [n.tag for n in top].index("h4")]
        assert {n.tag for n in before} <= {"p", "blockquote"}, name


# -- a failed build ------------------------------------------------------------------------

_PLAN_LINE = re.compile(
    r"^\s*(?:[:|+]\s*)*[+:]- |^\s*'?(?:Project|Filter|Join|SubqueryAlias|Relation)\b"
)


def assert_in_the_authors_terms(text: str) -> None:
    """Nothing of Spark's internals or of the host in ``text``."""
    for line in text.splitlines():
        assert not _PLAN_LINE.match(line), line
    for word in ("SQLSTATE", "JVM stacktrace", "at org.apache", "QueryCompilationErrors",
                 "#12L", "/tmp/", "<workdir>", "full log", "line 1 pos", "exit code",
                 "== SQL", "^^^"):  # fmt: skip
        assert word not in text, word


def test_a_failed_build_names_the_model_its_file_and_spark_s_one_line_error(
    texts: dict[str, str], demo: Demo
) -> None:
    # What the flow got (the product's text, before the comment condensed it) held a
    # double location and the log's host path; the comment shows neither.
    assert "full log: <workdir>/" in demo.failed
    tree = structure(texts["build_failed"])
    assert headline(tree) == (
        "❌ Sluice · jaffle: Building the environment failed at jaffle.orders "
        "(1 breaking change reaches 2 models)"
    )
    top = [n for n in tree.root.children if n.tag != "#text"]
    said, quote = top[1], top[2]
    assert (
        said.content() == "Building the environment failed at jaffle.orders (models/orders.sql:1):"
    )
    [error] = quote.all("p")
    assert error.content() == (
        "NumberFormatException [CAST_INVALID_INPUT]: The value 'returned' of the type \"STRING\" "
        'cannot be cast to "INT" because it is malformed. Correct the value as per the '
        "syntax, or change its target type. Use `try_cast` to tolerate malformed input and "
        "return NULL instead."
    )
    assert_in_the_authors_terms(tree.root.content())
    assert "/sluice diff" not in tree.root.content()  # nothing was built to compare


# An error Spark gave without an error class (Spark 3's text, or a data source's): its
# plan and paths survive the driver's spark_error, which keeps such errors' lines.
UNCLASSED = (
    "Unable to infer schema for Parquet at "
    "file:/tmp/spark-7f3a9c/warehouse/sluice__shop.db/stg_3__5e1c2b0d. It must be "
    "specified manually.;\n"
    "'InsertIntoStatement Relation spark_catalog.sluice__shop.mart_3__77aa[id#12L,total#13L] "
    "parquet, false, false\n"
    "+- 'Aggregate ['id], ['id, 'SUM('amount) AS total#13L]\n"
    "   +- 'UnresolvedRelation [sluice__shop, stg_3__5e1c2b0d], [], false\n"
    "== Physical Plan ==\n"
    "*(1) Scan parquet [id#12L] Location: InMemoryFileIndex(1 paths)[file:/tmp/spark-7f3a9c/x]\n"
    "Traceback (most recent call last):\n"
    '  File "/tmp/sluice-job-41/driver/steps/build.py", line 88, in build\n'
    '  File "/home/runner/.venv/lib/python3.11/site-packages/pyspark/sql/session.py", line 1,\n'
    "\tat org.apache.spark.sql.execution.datasources.DataSource.inferSchema(DataSource.scala:12)\n"
    "\tat org.apache.spark.sql.execution.QueryExecution.assertAnalyzed(QueryExecution.scala:9)\n"
    "Caused by: java.io.FileNotFoundException: /tmp/spark-7f3a9c/warehouse/x (No such file)\n"
)


def test_an_unclassed_spark_error_loses_its_plan_stack_and_host_paths() -> None:
    from sluice.bot.present.comment import failure, read_failure
    from sluice.core.spark.failures import job_failure
    from sluice.core.spark.steps.context import spark_error
    from tests.helpers.comment_states import AnalysisException

    event = {"event": "step_failed", "index": 3, "type": "build", "label": "build shop.mart_3",
             "model": "shop.mart_3", "error": spark_error(AnalysisException(UNCLASSED)),
             "source": "models/mart_3.sql:1"}  # fmt: skip
    text = str(job_failure("preview-pr_1-1", [event], exit_code=1,
                           log_path=Path("/var/lib/sluice/logs/1.log")))  # fmt: skip
    assert "+- 'Aggregate" in text and "/tmp/spark-7f3a9c" in text  # what the flow has
    found = read_failure(text)
    assert (found.model, found.where) == ("shop.mart_3", "models/mart_3.sql:1")
    assert found.message == (
        "AnalysisException: Unable to infer schema for Parquet at …/stg_3__5e1c2b0d. It must be "
        "specified manually."
    )
    block = failure("Building the environment failed", text)
    html = gfm(block)
    assert_in_the_authors_terms(html)
    assert "/home/" not in html and "/var/lib" not in html
    assert "Building the environment failed</strong> at <code>shop.mart_3</code>" in html
    # What is left of a longer error is folded, its Python frames by file name only.
    [details] = Tree(html).root.all("details")
    assert 'File "…/build.py", line 88, in build' in details.content()


# -- a PR of many models -------------------------------------------------------------------


def _natural(name: str) -> list[object]:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def _labels(block: str) -> dict[str, str]:
    """Node id -> its label's text, entity codes decoded."""
    found = re.findall(r'^  (m\d+|more)\["(.*?)"\]:::(\w+)$', block, flags=re.M)
    return {
        node: re.sub(r"#(\d+);", lambda m: chr(int(m.group(1))), text) for node, text, _ in found
    }


def test_a_large_pr_keeps_its_headline_and_impact_table_short(
    texts: dict[str, str], large: Large
) -> None:
    plan = large.plan
    changed = len(plan.directly_modified) + len(plan.added)
    assert changed >= 35 and len(plan.indirectly_modified) >= 10
    tree = structure(texts["large"])
    words = headline(tree)
    assert len(words) < 100 and "shop." not in words  # counts, no list of models
    total = changed + len(plan.indirectly_modified) + len(plan.removed)
    assert words.endswith(f"{len(plan.removed) + 5} breaking changes reach "
                          f"{len(plan.indirectly_modified)} models; waiting for @bob or @carol")  # fmt: skip
    rows = impact_table(tree)[1:]
    assert len(rows) == impact.TOP_ROWS < total
    # Removed first, then the breaking change that drops a column, the other breaking
    # ones, the most rows changed first (the only one compared), then by name, naturally.
    assert [r[0] for r in rows[:6]] == [
        "shop.report_8", "shop.report_3", "shop.stg_1", "shop.stg_2", "shop.stg_3", "shop.stg_4",
    ]  # fmt: skip
    assert [r[1] for r in rows[:2]] == ["removed", "breaking"] and rows[1][4] == "−total_b"  # noqa: RUF001
    # The rest counted by kind: as many as were left out, of the kinds left out.
    [rest] = [p for p in tree.root.all("p") if p.content().endswith("lists every model.")]
    counts = re.findall(r"(\d+) (breaking, downstream|added|non-breaking)", rest.content())
    assert sum(int(n) for n, _ in counts) == total - impact.TOP_ROWS
    assert rest.content().startswith(f"And {total - impact.TOP_ROWS} more models: ")
    assert dict((k, int(n)) for n, k in counts)["added"] == len(plan.added)


def test_a_large_pr_s_numbers_and_names_fit_their_columns(texts: dict[str, str]) -> None:
    tree = structure(texts["large"])
    rows = {r[0]: r for r in impact_table(tree)[1:]}
    # 12,345,678,901 rows less a little, compactly; the small numbers stay exact.
    assert rows["shop.stg_1"][3] == "12.3B → 12.3B (-97,531), 1,003 differ"
    assert all(len(r[3]) <= 40 for r in rows.values())
    [table] = [t for t in tree.root.all("table") if t.all("th")[0].content() == "Model"]
    [long] = [c for c in table.all("code") if c.attrs.get("title") == LONG_NAME]
    assert len(long.content()) == impact.NAME_WIDTH and "…" in long.content()
    assert long.content().endswith("channel_daily")  # the end tells models apart


def test_a_large_pr_s_graph_never_hides_a_model_the_pr_changes(
    texts: dict[str, str], large: Large
) -> None:
    plan = large.plan
    [(_, block)] = mermaid_blocks(texts["large"])
    labels = _labels(block)
    drawn = {text.split(" · ")[0] for node, text in labels.items() if node != "more"}
    changed = {c.name for c in plan.directly_modified} | set(plan.added)
    reached = {c.name for c in plan.indirectly_modified}
    assert changed <= drawn  # all of them, more than MAX_NODES
    assert len(changed) > graph.MAX_NODES
    hidden = reached - drawn
    assert labels["more"] == f"and {len(hidden)} more downstream"
    assert hidden and not (set(plan.removed) & drawn)
    # The models a hidden one reads link to the "more" node.
    linked = {re.search(r"(m\d+) --> more", line)[1] for line in block.splitlines()  # type: ignore[index]
              if line.endswith("--> more")}  # fmt: skip
    assert {labels[n].split(" · ")[0] for n in linked} == {"shop.stg_1", "shop.stg_2", "shop.stg_3",
                                                             "shop.stg_4"}  # fmt: skip


def _depths(plan: Plan) -> dict[str, int]:
    """Each reached model's distance from the nearest model the PR changes."""
    changed = {c.name for c in plan.directly_modified} | set(plan.added)
    reached = {c.name for c in plan.indirectly_modified}
    depth = dict.fromkeys(changed, 0)
    level = 0
    while reached - set(depth):
        level += 1
        depth |= {
            n: level
            for n in reached - set(depth)
            if any(depth.get(p) == level - 1 for p in plan.snapshot(n).model.depends_on)
        }
    return depth


def test_a_large_graph_collapses_whole_depths_of_the_models_reached(large: Large) -> None:
    plan = large.plan
    rows = impact.rows(plan, large.preview.diffs)
    depth = _depths(plan)
    assert max(depth.values()) == 3
    changed = sum(1 for d in depth.values() if d == 0)
    for room, deepest in ((changed, 0), (changed + 8, 1), (changed + 12, 2), (200, 3)):
        names = {r.name for r in graph.shown(plan, rows, max_nodes=room)}
        assert names == {n for n, d in depth.items() if d <= deepest}, room
    # One short of a whole depth: that depth is collapsed, not cut in the middle.
    names = {r.name for r in graph.shown(plan, rows, max_nodes=changed + 7)}
    assert names == {n for n, d in depth.items() if d == 0}


def test_models_are_listed_in_natural_order(texts: dict[str, str], large: Large) -> None:
    tree = structure(texts["large"])
    [built] = [t for t in tree.root.all("table") if t.all("th")[0].content().startswith("Built in")]
    names = [tr.all("td")[0].content() for tr in built.all("tr")[1:]]
    assert names == sorted(names, key=_natural) and len(names) == 15
    assert names.index("shop.mart_2") < names.index("shop.mart_10")
    assert impact.naturally(["s.mart_10", "s.mart_2", "s.mart_1"]) == ["s.mart_1", "s.mart_2",
                                                                       "s.mart_10"]  # fmt: skip
    # In the graph, models of one kind with the same change follow each other naturally.
    [(_, block)] = mermaid_blocks(texts["large"])
    plain = [t for n, t in _labels(block).items() if n != "more" and " · " not in t]
    marts = [t for t in plain if t.startswith("shop.mart_")]
    assert marts == sorted(marts, key=_natural) and "shop.mart_13" in marts


def test_the_check_lists_every_model_of_a_large_pr(large: Large) -> None:
    from sluice.bot.present.comment import details_markdown

    text = details_markdown(large.preview, large.prod_plan)
    changed = {c.name for c in large.plan.directly_modified} | set(large.plan.added)
    assert all(f"| `{n}` |" in text for n in changed - {LONG_NAME})
    assert "more models:" not in text


# -- Mermaid -------------------------------------------------------------------------------


def mermaid_blocks(text: str) -> list[str]:
    return re.findall(r"^(`{3,})mermaid\n(.*?)\n\1$", text, flags=re.M | re.S)


def test_the_graph_shows_changes_and_what_they_reach(texts: dict[str, str]) -> None:
    [(_, block)] = mermaid_blocks(texts["opened"])
    assert block.startswith("flowchart LR\n")
    assert re.search(r'm\d\["jaffle\.orders #183; -4 rows"\]:::breaking', block)
    assert re.search(r'm\d\["jaffle\.daily_revenue #183; -1 row#44; 3 differ"\]:::reached', block)
    tree = structure(texts["opened"])
    [pre] = [p for p in tree.root.all("pre") if p.attrs.get("lang") == "mermaid"]
    assert "flowchart LR" in pre.content()


# scripts/ensure-mermaid.sh (run by `make unit`) installs it here; else one on PATH.
_LOCAL_MMDC = Path(__file__).resolve().parents[3] / ".cache/mermaid/node_modules/.bin/mmdc"
MMDC = str(_LOCAL_MMDC) if _LOCAL_MMDC.is_file() else shutil.which("mmdc")


@pytest.mark.slow
def test_mermaid_itself_parses_every_graph(texts: dict[str, str], tmp_path: Path) -> None:
    """Mermaid's own CLI (``@mermaid-js/mermaid-cli`` on Chromium) renders each block; a
    block it cannot parse fails. Skipped without ``mmdc`` locally, never under CI."""
    if MMDC is None:
        if os.environ.get("CI") == "true":
            pytest.fail(
                "mmdc (npm @mermaid-js/mermaid-cli) is not installed: run scripts/ensure-mermaid.sh"
            )
        pytest.skip("mmdc is not installed: run scripts/ensure-mermaid.sh")
    config = tmp_path / "puppeteer.json"
    chromium = os.environ.get("PUPPETEER_EXECUTABLE_PATH") or shutil.which("chromium") or ""
    config.write_text(
        json.dumps({"executablePath": chromium, "args": ["--no-sandbox", "--disable-gpu"]})
    )
    hostile = graph.label('x"]; click m0 call alert(1) %%{init: {}}%% <img src=x> `a`')
    blocks = [b for text in texts.values() for _, b in mermaid_blocks(text)]
    blocks.append(
        f"flowchart LR\n  m0[{hostile}]:::breaking\n  classDef breaking {graph.STYLES['breaking']}"
    )
    assert blocks
    # One Markdown file of every block: mmdc renders each to ``graphs-<n>.svg`` in one
    # browser (a browser per block cost most of this test's time).
    source = tmp_path / "graphs.md"
    source.write_text("".join(f"```mermaid\n{block}\n```\n\n" for block in blocks))
    done = subprocess.run([MMDC, "-p", str(config), "-i", str(source), "-o", str(tmp_path / "out.md")],
                          capture_output=True, check=False, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    for i, block in enumerate(blocks, start=1):
        svg = (tmp_path / f"out-{i}.svg").read_text()
        assert "<img" not in svg and "onclick" not in svg.lower(), block
        assert "Syntax error" not in svg, block
    assert not (tmp_path / f"out-{len(blocks) + 1}.svg").exists()


# -- laid out at 1,280 px ------------------------------------------------------------------

WIDTH = 1280
# Every element shown (a closed fold's content is not) must fit the page, and a box that
# scrolls (a table, a code block) must not need to: its content fits it.
_OVERFLOWS = """(limit) => {
  const out = [];
  for (const el of document.querySelectorAll('.markdown-body, .markdown-body *')) {
    if (el.getClientRects().length === 0) continue;
    const box = el.getBoundingClientRect();
    const scrolls = getComputedStyle(el).overflowX !== 'visible';
    if (box.right > limit + 0.5 || el.scrollWidth > limit
        || (scrolls && el.scrollWidth > el.clientWidth + 1)) {
      out.push(`${el.tagName} ${el.scrollWidth}/${el.clientWidth}px: `
               + (el.textContent || '').trim().slice(0, 80));
    }
  }
  return out;
}"""


def _screenshot_module() -> Any:
    """scripts/comment_screenshot.py: the README's picture and this test lay out a
    comment alike (its ``page``)."""
    path = GOLDEN.parents[2] / "scripts" / "comment_screenshot.py"
    spec = importlib.util.spec_from_file_location("comment_screenshot", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


def overflows(browser: Any, markdown: str) -> list[str]:
    """What in ``markdown``, shown as GitHub shows a comment on a pull request's page
    :data:`WIDTH` px wide (in its comment box, ``COLUMN_AT_1280`` px of it), is wider than
    that box or than the box it scrolls in."""
    view = browser.new_page(viewport={"width": WIDTH, "height": 900})
    module = _screenshot_module()
    try:
        view.set_content(module.page(markdown, column=module.COLUMN_AT_1280))
        found = list(view.evaluate(_OVERFLOWS, module.COLUMN_AT_1280))
        page_width = view.evaluate("document.documentElement.scrollWidth")
        return found + ([f"the page: {page_width}px"] if page_width > WIDTH else [])
    finally:
        view.close()


# The layout checks start Chromium: slow, out of the editing loop (`make test` runs them).
@pytest.mark.slow
def test_the_check_finds_what_overflows(browser: Any) -> None:
    wide = "| Model | Rows |\n| --- | ---: |\n| `" + "very_long_model_name_" * 12 + "` | 1 |\n"
    assert any(o.startswith("TABLE ") for o in overflows(browser, wide))
    assert overflows(browser, "| Model | Rows |\n| --- | ---: |\n| `s.mart_2` | 1 |\n") == []


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_no_comment_overflows_at_1280_px(name: str, texts: dict[str, str], browser: Any) -> None:
    assert overflows(browser, texts[name]) == []
