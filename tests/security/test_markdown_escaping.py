"""Text from a pull request or from the data is shown on the PR literally.

Column names and values, keys, ``--where`` conditions, error texts, test names and diff
reasons go into Markdown that the forge renders. Each hostile string below must come
out as the same text: one table stays one table with its rows, no HTML element, comment,
link or image is made, no ``@`` pings anyone, and no code block is closed early.

The Markdown is rendered with markdown-it-py (CommonMark with GFM tables and raw HTML
allowed, as GitHub does before sanitising), then read with html.parser.
"""

from __future__ import annotations

import dataclasses
import doctest
import html as html_module
import re
import shlex
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from sluice.bot.present import comment as bot_comment
from sluice.bot.present import graph, impact, verdict
from sluice.bot.present.comment import (
    CommentState,
    comment,
    details_markdown,
    facts_section,
    marker,
    with_sections,
)
from sluice.core import markdown
from sluice.core.model.loader import load_project
from sluice.core.plan.build import PlanRequest, build_plan
from sluice.core.plan.plan import ModelChange, Plan
from sluice.core.preview import PreviewResult
from sluice.core.snapshot.fingerprint import fingerprint_models
from sluice.core.snapshot.snapshot import Category
from sluice.core.tablediff import render
from sluice.core.tablediff.result import (
    ColumnStats,
    Samples,
    SchemaDiff,
    Sides,
    TableDiffResult,
    TypeChange,
)
from sluice.core.timeutil import to_ms

HOSTILE = [
    "</details><img src=x onerror=1>",
    "</summary></details><script>alert(1)</script>",
    "a|b|c",
    "line one\nline two\n\n<b>after a blank line</b>",
    "`code` and ``more``",
    "```\nfenced\n```",
    "<!-- hide the rest",
    "@org/team please look, cc @someone",
    "[link](http://evil.example/x)",
    "![img](http://evil.example/x.png)",
    "http://evil.example/x and www.evil.example",
    "<https://evil.example>",
    "see #1 and owner/repo#2",
    "*bold* _it_ ~~gone~~ $x^2$",
    "# heading",
    "- item",
    "1. first",
    "| --- | --- |",
    "\\| and \\",
    "&lt;b&gt; &amp; &#64;x",
    "[^1]",
    "x" * 5000,
]

_MD = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
# What our own templates create; anything else came from user text.
_OUR_TAGS = {
    "h3", "h4", "p", "ul", "li", "strong", "em", "code", "pre", "table", "thead", "tbody",
    "tr", "th", "td", "details", "summary", "sub", "blockquote", "br",
}  # fmt: skip


class _Page(HTMLParser):
    """The tags, comments and text (outside code) of rendered HTML."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.comments: list[str] = []
        self.text: list[str] = []
        self.code_text: list[str] = []
        self._in_code = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag in ("code", "pre"):
            self._in_code += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("code", "pre"):
            self._in_code -= 1

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)

    def handle_data(self, data: str) -> None:
        (self.code_text if self._in_code else self.text).append(data)


def page(md: str) -> _Page:
    parsed = _Page()
    parsed.feed(_MD.render(md))
    return parsed


def visible(s: str) -> str:
    """What a reader sees of ``s``: no zero-width spaces."""
    return s.replace("\u200b", "")


def assert_inert(md: str, *, our_comments: int = 0) -> _Page:
    """``md`` renders without an element, comment, link or ping from user text."""
    parsed = page(md)
    assert set(parsed.tags) <= _OUR_TAGS, set(parsed.tags) - _OUR_TAGS
    assert len(parsed.comments) == our_comments, parsed.comments
    plain = " ".join(parsed.text)
    assert not re.search(r"@[\w-]", plain), "a mention GitHub would ping"
    assert not re.search(r"#\d", plain), "an issue reference GitHub would link"
    assert not re.search(r"https?://|(?<![\w.])www\.", plain, re.I), "a bare URL GitHub links"
    assert md.count("<details>") == md.count("</details>")
    return parsed


def flat(s: str) -> str:
    return " ".join(s.split())


# --- the module, one context at a time ------------------------------------------------


def test_the_modules_examples_run() -> None:
    result = doctest.testmod(markdown)
    assert result.attempted >= 10 and result.failed == 0


@pytest.mark.parametrize("hostile", HOSTILE)
def test_text_in_a_table_cell_is_one_cell_showing_the_text(hostile: str) -> None:
    md = f"| a | b |\n| --- | --- |\n| {markdown.text(hostile)} | {markdown.code(hostile, table=True)} |\n"
    parsed = assert_inert(md)
    assert parsed.tags.count("tr") == 2 and parsed.tags.count("td") == 2
    cells = re.findall(r"<td>(.*?)</td>", _MD.render(md), re.S)
    shown = [visible(html_module.unescape(re.sub(r"</?code>", "", c))) for c in cells]
    assert shown == [flat(hostile), flat(hostile)]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_text_in_a_list_item_and_a_code_span_shows_the_text(hostile: str) -> None:
    md = f"- {markdown.text(hostile)}\n- {markdown.code(hostile)}\n"
    parsed = assert_inert(md)
    assert parsed.tags.count("li") == 2 and "ul" in parsed.tags
    assert visible("".join(parsed.text)).strip().startswith(flat(hostile)[:40].strip())
    assert visible("".join(parsed.code_text)) == flat(hostile)


@pytest.mark.parametrize("hostile", HOSTILE)
def test_text_in_a_summary_stays_in_the_summary(hostile: str) -> None:
    md = f"<details><summary>Samples: {markdown.html(hostile)}</summary>\n\nbody\n\n</details>\n"
    parsed = assert_inert(md)
    assert parsed.tags == ["details", "summary", "p"]
    assert visible("".join(parsed.text)).startswith(f"Samples: {flat(hostile)}")


@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_fence_holds_any_text(hostile: str) -> None:
    md = f"{markdown.fence(hostile, 'text')}\n\nafter\n"
    parsed = assert_inert(md)
    assert parsed.tags == ["pre", "code", "p"]
    assert visible("".join(parsed.code_text)) == hostile + "\n"
    assert "".join(parsed.text).strip() == "after"


def test_a_long_value_is_cut_before_it_is_escaped() -> None:
    cut = markdown.text("<" * 100, limit=10)
    assert cut == "&lt;" * 9 + "…"


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [*"ab1 _*`|\\[]()!<>&@#:/.~$-+=\n\t'\"{}^é", "www.", "http://", "<!--", "```", "&#64;"]
        ),
        max_size=30,
    ).map("".join)
)
def test_any_text_round_trips_through_a_table_cell(value: str) -> None:
    md = f"| h |\n| --- |\n| {markdown.text(value)} |\n"
    parsed = assert_inert(md)
    assert parsed.tags.count("td") == 1
    [cell] = re.findall(r"<td>(.*?)</td>", _MD.render(md), re.S)
    assert visible(html_module.unescape(cell)) == flat(value)


# --- the table diff -------------------------------------------------------------------

NAME, VALUE = "</details><img src=x onerror=1>", "a|b\n@org/team [l](http://x) ![i](http://x)"


def _hostile_diff(name: str = "s.t") -> TableDiffResult:
    columns = {h: ColumnStats(1, 1) for h in HOSTILE[:6]}
    columns["quiet `x`"] = ColumnStats(2, 0)
    return TableDiffResult(
        name=name, source="prod", target="pr_7", source_table="a", target_table="b",
        keys=(NAME,), decimals=3, tolerance=None, where="`a|b` = '<!--'",
        skipped=("@org/team",), source_rows=2, target_rows=2, joined=2,
        source_only=1, target_only=1, differing_rows=1, null_keys=Sides(0, 0),
        duplicate_keys=Sides(0, 0), duplicate_rows=Sides(0, 0),
        schema=SchemaDiff(
            added=((NAME, "string"),), removed=(("@org/team", "int"),),
            changed=(TypeChange("a|b", "int", "<b>bigint</b>"),),
        ),
        columns=columns,
        samples=Samples(
            differing=({NAME: VALUE, HOSTILE[2]: {"source": VALUE, "target": "```"}},),
            source_only=({NAME: "k1", **{h: h for h in HOSTILE}},),
            target_only=({NAME: "k2", "x" * 300: "y" * 300},),
        ),
        note="note with <b>html</b> and @team",
    )  # fmt: skip


def test_the_table_diff_stays_one_table_per_part_and_shows_every_name() -> None:
    md = render.markdown([_hostile_diff()])
    parsed = assert_inert(md)
    tables = _MD.render(md).count("<table>")
    assert tables == 5  # the counts, the differing columns, and one per sample
    rendered = _MD.render(md)
    counts = rendered.split("<table>")[1]
    # the header, the rows line and the non-zero count (only in this side)
    assert counts.count("<tr>") == 1 + 2
    columns = rendered.split("<table>")[2]
    assert columns.count("<tr>") == 1 + 6  # one per differing column
    samples = rendered.split("<table>")[3:]
    assert [s.count("<tr>") for s in samples] == [2, 2, 2]
    # every row of a sample has as many cells as its header
    for sample in samples:
        header = sample.split("</thead>")[0].count("<th>")
        assert all(
            row.count("<td>") == header for row in sample.split("</thead>")[1].split("<tr>")[1:]
        )
    text = visible(html_module.unescape(" ".join(parsed.text + parsed.code_text)))
    for name in (NAME, flat(HOSTILE[1]), "a|b|c", "@org/team", "`a|b` = '<!--'"):
        assert name in text, name
    assert "note with <b>html</b> and @team" in text


def test_long_names_and_values_are_cut() -> None:
    md = render.markdown([_hostile_diff()])
    assert "x" * 300 not in md and "y" * 300 not in md
    assert "x" * 5000 not in md


# --- the PR comment, the check-run body and the tests summary --------------------------


def _plan(root: Path) -> Plan:
    (root / "models").mkdir(parents=True)
    (root / "config.yaml").write_text("model_defaults:\n  start: '2024-01-01'\n")
    (root / "models" / "t.sql").write_text("MODEL (name s.t, kind FULL);\nSELECT 1 AS id\n")
    project = load_project(root, use_cache=False)
    now = to_ms("2024-02-01")
    return build_plan(PlanRequest(
        environment="pr_7", models=project.models,
        fingerprints=fingerprint_models(project.models, project.audits), base={},
        base_plan_id=None, start=None, end=now, execution_time=now, forward_only=False,
        intervals={},
    ))  # fmt: skip


def _preview(tmp_path: Path) -> PreviewResult:
    return PreviewResult(
        plan=_plan(tmp_path / "p"), tests=(), built=1, views=1,
        diffs={"s.t": _hostile_diff()},
        diff_errors={"s.u": "Spark said: </details><img src=x> @org/team ```"},
        skipped_diffs={"s.v": "no grain; <!-- [x](http://x)"}, job=None,
    )  # fmt: skip


def test_the_pr_comment_shows_hostile_text_literally(tmp_path: Path) -> None:
    state = CommentState(
        "demo", "pr_7", "abcdef1234", "failure", "`pr_7` is ready", preview=_preview(tmp_path),
        error=("Error", "line 1 </details>\n```\n@org/team <img src=x>\n````"),
    )  # fmt: skip
    md = published(state, 65_536)
    parsed = assert_inert(md, our_comments=1)
    assert parsed.comments == [" sluice:pr-comment "]
    # The error's first line as text, the rest of it in one folded block.
    shown = visible(html_module.unescape(" ".join(parsed.code_text)))
    assert "```\n@org/team <img src=x>\n````" in shown
    text = visible(" ".join(parsed.text))
    assert "line 1 </details>" in text
    assert "Spark said: </details><img src=x> @org/team ```" in text
    assert "no grain; <!-- [x](http://x)" in text
    assert "`pr_7` is ready" not in text  # Sluice's own Markdown is rendered, not escaped


def published(state: CommentState, limit: int) -> str:
    """The comment as the forge gets it: the body joined with its facts (the verdict)."""
    body = comment(state, limit=limit, marker=marker("."))
    return with_sections(body, dict([facts_section(state)]))


def test_the_check_body_and_a_folded_comment_show_it_literally_too(tmp_path: Path) -> None:
    preview = _preview(tmp_path)
    assert_inert(details_markdown(preview))
    for limit in (6_000, 3_000, 1_500):
        state = CommentState(None, "pr_7", "abcdef1234", "success", "ready", preview=preview)
        assert_inert(published(state, limit), our_comments=1)


def test_the_tests_summary_shows_names_and_diffs_literally() -> None:
    results: list[Any] = [
        {"step": "unit_test", "name": "t|one @org/team", "passed": True, "diff": "", "notes": []},
        {"step": "unit_test", "name": "</details><img src=x>", "passed": False,
         "diff": "- ```\n+ <b>x</b>", "notes": []},
    ]  # fmt: skip
    title, body = bot_comment.tests_summary(results)
    assert title == "1 of 2 unit tests failed"
    parsed = assert_inert(body)
    rendered = _MD.render(body)
    assert rendered.count("<tr>") == 3
    assert visible(html_module.unescape("".join(parsed.text))).count("</details><img src=x>") == 1
    assert "- ```\n+ <b>x</b>" in "".join(parsed.code_text)


# --- the verdict, the impact table, the Mermaid graph and the query line ------------------
# Model names, column names and logins in the comment's newer parts: none may open HTML,
# ping, link, break a table row, leave Mermaid's quoted label or the shell command's one
# argument.

HOSTILE_NAMES = [
    "s.</details><img src=x onerror=1>",
    "s.a|b|c",
    "s.@org/team",
    "s.`x` ``` y",
    "s.[l](http://e.vil) #12",
    's.x"]; click m0 call alert(1)\n  m9["y',
    "s.%%{init: {'securityLevel': 'loose'}}%%",
]


def _hostile_names_state(tmp_path: Path) -> CommentState:
    preview = _preview(tmp_path)
    plan = preview.plan
    base = plan.snapshots[0]
    changes = tuple(
        ModelChange(name, Category.BREAKING, "v2", "v1", diff=f"--- a\n+++ b\n+{name}")
        for name in HOSTILE_NAMES
    )
    plan = dataclasses.replace(plan, added=(), directly_modified=changes,
                               snapshots=(base,))  # fmt: skip
    diffs = {name: dataclasses.replace(_hostile_diff(name), name=name) for name in HOSTILE_NAMES}
    preview = dataclasses.replace(preview, plan=plan, diffs=diffs)
    return CommentState("demo", "pr_7", "abcdef1234", "success", "built", preview=preview)


def test_the_impact_table_keeps_one_row_per_model_and_six_cells(tmp_path: Path) -> None:
    state = _hostile_names_state(tmp_path)
    text = published(state, 65_536)
    assert_inert(text, our_comments=1)
    html = _MD.render(text)
    table = next(t for t in html.split("<table>")[1:] if "<th>Model</th>" in t)
    rows = table.split("</table>")[0].split("<tr>")[1:]
    assert len(rows) == 1 + len(HOSTILE_NAMES)
    assert all(row.count("<td") == 6 for row in rows[1:])


def test_mermaid_labels_hold_nothing_mermaid_reads() -> None:
    for name in HOSTILE_NAMES:
        label = graph.label(name)
        inner = re.sub(r"#\d+;", "", label[1:-1])  # Mermaid's entity codes: shown as text
        assert label[0] == label[-1] == '"' and '"' not in inner
        assert not re.search(r"[\[\]{}()<>|;:%`'\n\r&]", inner), inner
        assert "\n" not in label


def test_the_graph_block_cannot_be_left(tmp_path: Path) -> None:
    state = _hostile_names_state(tmp_path)
    assert state.preview is not None
    plan = state.preview.plan
    block = graph.mermaid(plan, impact.rows(plan, state.preview.diffs))
    lines = block.split("\n")
    assert lines[0] == "```mermaid" and lines[-1] == "```"
    body = lines[2:-1]  # after "flowchart LR"
    assert all(re.fullmatch(r'  (m\d+\["[^"]*"\]:::\w+|m\d+ --> m\d+|classDef \w+ [\w:#,.-]+)', line)
               for line in body), body  # fmt: skip


def test_the_query_line_is_one_code_span_and_one_shell_argument() -> None:
    for name in HOSTILE_NAMES:
        view = name.replace("\n", " ")
        line = verdict.query_line("pr_7", view)
        assert line.startswith("`") and line.endswith("`")
        command = re.sub(r"^`+ ?| ?`+$", "", line)
        words = shlex.split(command)
        assert words[:3] == ["sluice", "query", "pr_7"] and len(words) == 4
        assert words[3].startswith("SELECT * FROM ") and words[3].endswith(" LIMIT 10")
        assert_inert(f"- {line}")


def test_whom_the_verdict_waits_for_is_a_login_or_code() -> None:
    gate = verdict.GateFacts(ok=False, requires_approval=True, missing=1,
                             eligible=("bob", "x](http://e.vil)", "@everyone"))  # fmt: skip
    build = verdict.BuildFacts("pr_7", "demo", None, True, breaking=("s.a",))
    _icon, words = verdict.headline(verdict.Facts(build, gate))
    assert "@bob" in words and "`x](http://e.vil)`" in words and "`@everyone`" in words
    assert_inert(f"### {words.replace('@bob', 'bob')}")


def test_a_huge_failure_text_is_read_in_linear_time_and_cut() -> None:
    """A failure's text is the PR's to shape (``raise_error(repeat(' ', n))``, a Python
    model's own error): runs of blanks once made the comment's reading of it quadratic
    (a JVM-stack pattern and two leading \\s* patterns tried at every blank; red team).
    Read now in one pass, and only its first MAX_FAILURE_CHARS."""
    from sluice.bot.present.comment import MAX_FAILURE_CHARS, CommentState, comment

    text = ("models/a.sql:1: boom" + " \t" * 60_000 + "SQLSTATE: 42703; line 1 pos 9;"
            + "x" * MAX_FAILURE_CHARS + "TAIL-MARK (exit code 3; full log: /tmp/l)"
            + "\n  JVM stacktrace:\nat x.y(Z.java:1)")  # fmt: skip
    state = CommentState(None, "pr_3", "d" * 40, "failure", "Building the environment failed",
                         error=("Building the environment failed", text))  # fmt: skip
    body = comment(state, limit=65536, marker="<!-- m -->")
    assert "boom" in body and "TAIL-MARK" not in body and "JVM stacktrace" not in body


@pytest.mark.parametrize("hostile", HOSTILE)
@pytest.mark.parametrize("kind", ["build", "table_diff"])
def test_a_step_label_in_the_progress_line_is_code(hostile: str, kind: str) -> None:
    # The label comes from the driver's step_start event, which a PR's code in the driver
    # can print (red team, round 3: headings, images and links in the bot's own comment).
    line = bot_comment.progress(kind, 1, 3, hostile)
    assert line is not None
    parsed = assert_inert(f"> ⏳ {line}\n")
    shown, label = visible("".join(parsed.code_text)), flat(hostile)
    if len(label) <= bot_comment.PROGRESS_LABEL_CHARS:
        assert shown == label
    else:  # cut, saying so
        assert shown.endswith("…") and label.startswith(shown[:-1])
