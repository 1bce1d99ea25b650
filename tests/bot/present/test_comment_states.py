"""The PR comment in each state of a PR's life (tests/helpers/comment_states.py), as the forge
gets it: compared with golden files, rendered by GitHub's own Markdown engine (cmark-gfm
with GitHub's extensions) and checked for its HTML structure, its Mermaid graph checked by
Mermaid itself.

Golden files: ``tests/fixtures/comments/<state>.md``. After a deliberate change of the
comment, regenerate them and read the diff as a reviewer would::

    SLUICE_UPDATE_GOLDEN=1 .venv/bin/pytest tests/bot/present/test_comment_states.py
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options

from sluice.bot.present import graph, impact
from sluice.bot.present.comment import CommentState, comment, facts_section, marker, with_sections
from sluice.core.plan.plan import Plan
from sluice.core.preview import PreviewResult
from tests.helpers.comment_states import ENV, FOOTER, SHA, STATES, Story, demo_plans, demo_preview

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "comments"
UPDATE = os.environ.get("SLUICE_UPDATE_GOLDEN") == "1"
LIMIT = 65_536


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Plan, Plan, PreviewResult]:
    plan, prod_plan = demo_plans(tmp_path_factory.mktemp("demo"))
    return plan, prod_plan, demo_preview(plan)


@pytest.fixture(scope="module")
def texts(
    demo: tuple[Plan, Plan, PreviewResult], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    plan, prod_plan, preview = demo
    out = {}
    for name, events in STATES.items():
        story = Story(tmp_path_factory.mktemp(name), plan, prod_plan)
        try:
            events(story, preview)
            out[name] = story.text()
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


@pytest.mark.parametrize("name", sorted(STATES))
def test_each_state_matches_its_golden_file(name: str, texts: dict[str, str]) -> None:
    path = GOLDEN / f"{name}.md"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(texts[name])
    assert path.exists(), f"{path} is missing: run with SLUICE_UPDATE_GOLDEN=1"
    assert texts[name] == path.read_text(), (
        f"the {name} comment changed: if on purpose, run SLUICE_UPDATE_GOLDEN=1 .venv/bin/pytest "
        f"{Path(__file__).name} and review the diff of {path}"
    )


@pytest.mark.parametrize("name", sorted(STATES))
def test_every_state_renders_as_github_shows_it(name: str, texts: dict[str, str]) -> None:
    structure(texts[name])
    assert len(texts[name]) < LIMIT


def test_opened_says_the_risk_and_what_merging_does(texts: dict[str, str]) -> None:
    tree = structure(texts["opened"])
    assert headline(tree).endswith("1 breaking change reaches 2 models; checking approvals")
    first = tree.root.children[[n.tag for n in tree.root.children].index("h3") + 1 :]
    merging, built = [n.content() for n in first if n.tag == "p"][:2]
    assert merging.startswith("Merging is a virtual update: 0 rows written")
    assert (
        built
        == "This PR built 4 tables (12,480 rows, 2.2 MB) and 10 views in pr_1 in 42 s of Spark."
    )


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


# -- size ----------------------------------------------------------------------------------


def test_fifty_changed_models_fit_github_and_say_what_they_left_out(
    demo: tuple[Plan, Plan, PreviewResult],
) -> None:
    import dataclasses

    plan, prod_plan, preview = demo
    change = plan.directly_modified[0]
    many = tuple(dataclasses.replace(change, name=f"jaffle.model_{i:02}", diff=change.diff * 20)
                 for i in range(50))  # fmt: skip
    big_plan = dataclasses.replace(plan, directly_modified=many)
    diffs = {c.name: dataclasses.replace(preview.diffs["jaffle.customers"], name=c.name)
             for c in many}  # fmt: skip
    big = dataclasses.replace(preview, plan=big_plan, diffs=diffs)
    state = CommentState("jaffle", ENV, SHA, "success", "built", preview=big, footer=FOOTER,
                         prod_plan=prod_plan)  # fmt: skip
    text = with_sections(comment(state, limit=LIMIT, marker=marker(".")),
                         dict([facts_section(state)]))  # fmt: skip
    assert len(text) < LIMIT
    tree = structure(text)
    assert "left out to fit the comment size" in tree.root.content()
    names = [row[0] for row in impact_table(tree)[1:]]
    assert len(names) == 52 and names[-2:] == ["jaffle.customer_segments", "jaffle.daily_revenue"]


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


def test_a_wide_graph_is_capped_with_a_more_node(demo: tuple[Plan, Plan, PreviewResult]) -> None:
    import dataclasses

    plan = demo[0]
    change = plan.directly_modified[0]
    many = tuple(dataclasses.replace(change, name=f"s.m{i}") for i in range(40))
    rows = impact.rows(dataclasses.replace(plan, directly_modified=many), {})
    block = graph.mermaid(plan, rows)
    assert block.count(":::breaking") == graph.MAX_NODES
    hidden = len(rows) - graph.MAX_NODES
    assert f'more["and {hidden} more"]:::more' in block


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
    for i, block in enumerate(blocks):
        source, out = tmp_path / f"g{i}.mmd", tmp_path / f"g{i}.svg"
        source.write_text(block)
        done = subprocess.run([MMDC, "-p", str(config), "-i", str(source), "-o", str(out)],
                              capture_output=True, check=False, text=True, timeout=180)  # fmt: skip
        assert done.returncode == 0, (block, done.stderr[-2000:])
        svg = out.read_text()
        assert "<img" not in svg and "onclick" not in svg.lower()
        assert "Syntax error" not in svg
