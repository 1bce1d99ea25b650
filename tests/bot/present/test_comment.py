"""The PR comment's Markdown: what it says, and that it fits GitHub's limit whole."""

from __future__ import annotations

import json
import re
from pathlib import Path

from sluice.bot.present.comment import (
    CommentState,
    comment,
    facts_section,
    marker,
    with_sections,
)
from sluice.core.model.loader import load_project
from sluice.core.plan.build import PlanRequest, build_plan
from sluice.core.preview import PreviewResult
from sluice.core.snapshot.fingerprint import fingerprint_models
from sluice.core.tablediff.result import ColumnStats, Samples, SchemaDiff, Sides, TableDiffResult
from sluice.core.timeutil import to_ms

LIMIT = 65_536


def _big_project(root: Path, models: int) -> Path:
    (root / "models").mkdir(parents=True)
    (root / "config.yaml").write_text("model_defaults:\n  start: '2024-01-01'\n")
    for i in range(models):
        columns = ",\n".join(f"  {i} * {j} AS column_with_a_long_name_{j}" for j in range(40))
        (root / "models" / f"m{i}.sql").write_text(
            f"MODEL (name s.m{i}, kind FULL, grain column_with_a_long_name_0);\nSELECT\n{columns}\n"
        )
    return root


def _plan(root: Path) -> object:
    project = load_project(root, use_cache=False)
    now = to_ms("2024-02-01")
    return build_plan(PlanRequest(
        environment="pr_7", models=project.models,
        fingerprints=fingerprint_models(project.models, project.audits), base={}, base_plan_id=None,
        start=None, end=now, execution_time=now, forward_only=False, intervals={},
    ))  # fmt: skip


def _diff(name: str, rows: int) -> TableDiffResult:
    sample = tuple({"k": i, "v": {"source": "x" * 50, "target": "y" * 50}} for i in range(rows))
    return TableDiffResult(
        name=name, source="prod", target="pr_7", source_table="a", target_table="b", keys=("k",),
        decimals=3, tolerance=None, where=None, source_rows=1000, target_rows=1000, joined=1000,
        source_only=0, target_only=0, differing_rows=rows, null_keys=Sides(0, 0),
        duplicate_keys=Sides(0, 0), duplicate_rows=Sides(0, 0), schema=SchemaDiff(),
        columns={"v": ColumnStats(1000 - rows, rows)}, samples=Samples(differing=sample),
    )  # fmt: skip


def _fences_balanced(text: str) -> bool:
    return len(re.findall(r"^```", text, flags=re.M)) % 2 == 0


def _details_balanced(text: str) -> bool:
    return text.count("<details>") == text.count("</details>")


def test_a_small_comment_has_everything(tmp_path: Path) -> None:
    plan = _plan(_big_project(tmp_path / "p", 2))
    preview = PreviewResult(plan=plan, tests=(), built=2, views=2, diffs={"s.m0": _diff("s.m0", 3)},  # type: ignore[arg-type]
                            diff_errors={}, skipped_diffs={"s.m1": "new"}, job=None)  # fmt: skip
    state = CommentState(
        "demo", "pr_7", "abcdef1234", "success", "`pr_7` is ready", preview=preview
    )
    body = comment(state, limit=LIMIT, marker=marker("."))
    text = with_sections(body, dict([facts_section(state)]))
    assert text.startswith("<!-- sluice:pr-comment -->\n### ℹ️ Sluice · `demo`: 2 new models")  # noqa: RUF001
    assert "Query the PR's data: `sluice query pr_7 'SELECT * FROM s__pr_7.m0 LIMIT 10'`" in text
    assert "Views of `pr_7`: `s__pr_7.m0`, `s__pr_7.m1`" in text
    assert (
        "| `s.m0` | added | new model | 1,000 → 1,000, 3 differ | values of `v` | built |" in text
    )
    assert "<details><summary>Samples: 3 differing rows</summary>" in text
    assert "`s.m1`: not compared: new" in text
    assert "sluice:verdict" not in text and "sluice:next" not in text
    assert "left out" not in text


def test_a_huge_plan_is_folded_to_fit_and_never_cut_mid_block(tmp_path: Path) -> None:
    plan = _plan(_big_project(tmp_path / "p", 400))
    diffs = {f"s.m{i}": _diff(f"s.m{i}", 20) for i in range(60)}
    preview = PreviewResult(plan=plan, tests=(), built=400, views=400, diffs=diffs,  # type: ignore[arg-type]
                            diff_errors={}, skipped_diffs={}, job=None)  # fmt: skip
    state = CommentState(None, "pr_7", "abcdef1234", "success", "ready", preview=preview)
    text = comment(state, limit=LIMIT, marker=marker("."))
    assert len(text) <= LIMIT
    assert _fences_balanced(text) and _details_balanced(text)
    assert "the `sluice/pr-environment` check has" in text
    assert text.rstrip().endswith("</sub>"), "the comment ends as rendered, not cut"


def test_markers_are_per_project_path() -> None:
    assert marker(".") == "<!-- sluice:pr-comment -->"
    assert marker("analytics/") == "<!-- sluice:pr-comment:analytics -->"


def test_the_check_body_holds_everything_and_is_fitted_whole(tmp_path: Path) -> None:
    from sluice.bot.forge.github import fit
    from sluice.bot.present.comment import details_markdown

    plan = _plan(_big_project(tmp_path / "p", 400))
    diffs = {f"s.m{i}": _diff(f"s.m{i}", 20) for i in range(60)}
    preview = PreviewResult(plan=plan, tests=(), built=400, views=400, diffs=diffs,  # type: ignore[arg-type]
                            diff_errors={}, skipped_diffs={}, job=None)  # fmt: skip
    full = details_markdown(preview)
    assert "```diff" not in full or full.count("```diff") == 0  # added models have no SQL diff
    assert full.count("<details><summary>Samples") == 60
    fitted = fit(full)
    assert len(fitted) < len(full) and _fences_balanced(fitted) and _details_balanced(fitted)
    assert "truncated" in fitted


def test_the_recent_range_is_mentioned_only_when_the_pr_is_limited(tmp_path: Path) -> None:
    full_only = _plan(_big_project(tmp_path / "full", 1))
    state = CommentState("demo", "pr_7", "abcdef1234", "running", "building", plan=full_only,  # type: ignore[arg-type]
                         recent_days=7)  # fmt: skip
    assert "most recent" not in comment(state, limit=LIMIT, marker=marker("."))  # none to limit
    root = _big_project(tmp_path / "p", 1)
    (root / "models" / "events.sql").write_text(
        "MODEL (name s.events, kind INCREMENTAL_BY_TIME_RANGE (time_column ds));\n"
        "SELECT DATE '2024-01-01' AS ds WHERE ds BETWEEN @start_ds AND @end_ds\n"
    )
    plan = _plan(root)
    limited = CommentState("demo", "pr_7", "abcdef1234", "running", "building", plan=plan,  # type: ignore[arg-type]
                           recent_days=7)  # fmt: skip
    text = comment(limited, limit=LIMIT, marker=marker("."))
    assert "Incremental models are built for their most recent 7 days only" in text
    everything = CommentState("demo", "pr_7", "abcdef1234", "running", "building", plan=plan)  # type: ignore[arg-type]
    assert "most recent" not in comment(everything, limit=LIMIT, marker=marker("."))


def test_sections_go_under_the_headline_in_a_fixed_order() -> None:
    body = "<!-- m -->\n### ✅ Sluice: ready\n\nthe plan\n"
    text = with_sections(body, {"approval": "**Approval:** ok", "promotion": "**Promotion:** done"})
    assert text == (
        "<!-- m -->\n### ✅ Sluice: ready\n\n**Promotion:** done\n\n**Approval:** ok\n\nthe plan\n"
    )
    assert with_sections(body, {}) == body


def test_plan_warnings_have_their_own_section_with_the_project_s_text_escaped(
    tmp_path: Path,
) -> None:
    import dataclasses

    import cmarkgfm
    from cmarkgfm.cmark import Options

    plan = _plan(_big_project(tmp_path / "p", 1))
    quiet = CommentState("demo", "pr_7", "abcdef1234", "running", "building", plan=plan)  # type: ignore[arg-type]
    assert "Plan warnings" not in comment(quiet, limit=LIMIT, marker=marker("."))
    hostile = "models/x.sql:1: forward-only change to s.x drops column <img src=x onerror=alert(1)> | *b*\n  hint: keep it"
    warned = dataclasses.replace(plan, warnings=(hostile,))  # type: ignore[type-var]
    text = comment(
        CommentState("demo", "pr_7", "abcdef1234", "running", "building", plan=warned),  # type: ignore[arg-type]
        limit=LIMIT,
        marker=marker("."),
    )
    assert "#### ⚠️ Plan warnings" in text
    html = cmarkgfm.github_flavored_markdown_to_html(text, options=Options.CMARK_OPT_UNSAFE)
    assert "<img" not in html and "<em>b</em>" not in html
    assert "drops column &lt;img src=x onerror=alert(1)&gt; | *b* hint: keep it" in html


def test_the_merge_line_says_what_the_backfill_reads_and_writes() -> None:
    from sluice.bot.present.verdict import Backfill, BuildFacts, merge_line

    base = BuildFacts(environment="pr_3", project=None, failure=None, changes_models=True)
    full = (Backfill("jaffle.orders", 1, True),)
    both = BuildFacts(
        **{**base.__dict__, "merge": full, "merge_bytes": 2 * 1024**3}
        | {"merge_rows": 1200, "merge_written": 3 * 1024**2}
    )
    assert str(merge_line(both)) == (
        "**Merging** computes a full refresh of `jaffle.orders` in prod, reading about "
        "2.0 GB and writing about 1,200 rows (3.0 MB)."
    )
    no_rows = BuildFacts(**{**base.__dict__, "merge": full, "merge_written": 10})
    assert str(merge_line(no_rows)).endswith("in prod, writing about 10 B.")
    unknown = BuildFacts(**{**base.__dict__, "merge": full})
    assert str(merge_line(unknown)).endswith("`jaffle.orders` in prod.")
    virtual = BuildFacts(**{**base.__dict__, "merge": ()})
    assert "virtual update: 0 rows written" in str(merge_line(virtual))
    # Facts recorded before the estimate existed still read.
    recorded = json.loads(both.to_json())
    old = {k: v for k, v in recorded.items() if k not in ("merge_rows", "merge_written")}
    read = BuildFacts.from_json(json.dumps(old))
    assert (read.merge_rows, read.merge_written, read.merge_bytes) == (None, None, 2 * 1024**3)


def test_a_long_hostile_model_name_is_cut_with_its_whole_name_inert_in_the_title() -> None:
    import html as html_module

    import cmarkgfm
    from cmarkgfm.cmark import Options

    from sluice.bot.present.impact import NAME_WIDTH, name_cell

    name = 's.very_long_model_name_"><img src=x onerror=alert(1)> @org/team #12 ' + "x" * 40
    cell = name_cell(name)
    html = cmarkgfm.github_flavored_markdown_to_html(
        f"| Model |\n| --- |\n| {cell} |\n", options=Options.CMARK_OPT_UNSAFE
    )
    assert "<img" not in html and "onerror=alert(1)>" not in html
    [title] = re.findall(r'<code title="([^"]*)">([^<]*)</code>', html)
    assert title[0].count("&quot;") == 1 and "&lt;img" in title[0]  # the whole name, escaped
    assert len(html_module.unescape(title[1])) == NAME_WIDTH
    # A name with a | (it would end the cell inside the attribute) is cut without a title.
    assert "title=" not in name_cell("s." + "a|b" * 30)


def test_a_body_from_before_the_next_steps_moved_gets_them_under_the_verdict() -> None:
    from sluice.bot.present.verdict import BUILD, NEXT, VERDICT, BuildFacts

    facts = BuildFacts(environment="pr_3", project=None, failure=None, changes_models=True,
                       query_views=("s__pr_3.t",))  # fmt: skip
    old = f"<!-- m -->\n### x\n\n{VERDICT}\n\n#### Impact\n\nthe table\n\n{NEXT}\n\n#### Checks\n"
    text = with_sections(old, {BUILD: facts.to_json(), "approval": "**Approval:** ok"})
    assert NEXT not in text and VERDICT not in text
    order = [
        text.index(w) for w in ("**Approval:**", "#### Next steps", "#### Impact", "#### Checks")
    ]
    assert order == sorted(order)
