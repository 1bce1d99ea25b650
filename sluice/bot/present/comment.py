"""Markdown for the forge: the sticky PR comment and check-run bodies.

Values are formatted here; the Jinja2 templates under ``sluice/templates`` only loop.
The comment must fit the forge's limit: it is rendered in full, then with less detail
(samples, then SQL diffs, then per-model tables) until it fits, and says what it left
to the check run. Nothing is cut in the middle of a Markdown block.

User text (names, values, error texts) is escaped by :mod:`sluice.core.markdown` only:
the templates' filters and ``finalize`` escape every value that is not
:class:`~sluice.core.markdown.Markdown`; what is built here from several parts is built
with its functions. ``headline``, ``progress``, ``notes`` and ``footer`` are the
caller's Markdown, shown as written: any user text in them must be escaped by the caller.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from sluice.core import markdown as md
from sluice.core.intervals import Interval, cron_intervals
from sluice.core.model.definition import KindName
from sluice.core.plan.plan import Plan
from sluice.core.preview import PreviewResult
from sluice.core.snapshot.naming import view_name
from sluice.core.tablediff import render as diff_render
from sluice.core.tablediff.result import Samples, TableDiffResult
from sluice.core.timeutil import format_range

MARKER = "<!-- sluice:pr-comment{project} -->"
_ICONS = {"queued": "⏳", "running": "⏳", "success": "✅", "failure": "❌", "neutral": "ℹ️"}  # noqa: RUF001
MAX_DIFF_LINES = 120


@cache
def _env() -> Environment:
    env = Environment(
        loader=PackageLoader("sluice", "templates"),
        undefined=StrictUndefined,
        autoescape=False,  # Markdown, not HTML: sluice.core.markdown escapes every value
        finalize=md.finalize,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(md.FILTERS)
    return env


def marker(project_path: str) -> str:
    """The hidden line that finds the comment of the project at ``project_path`` on a PR
    (known before the project is loaded, so the first "queued" comment has it too)."""
    path = project_path.strip("/")
    return MARKER.format(project="" if path in ("", ".") else f":{path}")


@dataclass(frozen=True)
class CommentState:
    """Everything the PR comment shows; the flow fills in what it knows so far."""

    project: str | None
    environment: str
    head_sha: str
    state: str  # queued, running, success, failure, neutral
    headline: str
    progress: str | None = None
    error: tuple[str, str] | None = None  # (title, text)
    preview: PreviewResult | None = None
    plan: Plan | None = None
    checks: tuple[tuple[str, str], ...] = ()  # (name, status text)
    notes: tuple[str, ...] = ()
    footer: str = ""
    details_at: str = "the `sluice/pr-environment` check"
    recent_days: int | None = None  # sluice.pr.backfill_days; None: PRs build everything
    extra: dict[str, Any] = field(default_factory=dict)


def comment(state: CommentState, *, limit: int, marker: str) -> str:
    """The comment's Markdown, as detailed as ``limit`` characters allow."""
    for level in range(4):
        text = _env().get_template("pr_comment.md.j2").render(**_view(state, level), marker=marker)
        if len(text) <= limit:
            return text
    # Even the summary is too long (thousands of models): keep the headline and say so.
    short = dataclasses.replace(state, preview=None, plan=None, error=None, checks=())
    return _env().get_template("pr_comment.md.j2").render(**_view(short, 3), marker=marker)


_FOLDED = (
    None,
    "Sample rows were left out to fit the comment size; {at} has them.",
    "SQL diffs and sample rows were left out to fit the comment size; {at} has them.",
    "Only a summary fits in a comment; {at} has the full plan and table diffs.",
)


def _view(state: CommentState, level: int) -> dict[str, Any]:
    preview = state.preview
    plan = preview.plan if preview is not None else state.plan
    where: list[str] = []
    if plan is not None and state.state not in ("queued",) and preview is not None:
        changed = [
            *plan.added,
            *(c.name for c in plan.directly_modified),
            *(c.name for c in plan.indirectly_modified),
        ]
        where = [view_name(name, state.environment) for name in changed]
    diffs = ""
    diff_notes: list[str] = []
    if preview is not None:
        results = [preview.diffs[name] for name in sorted(preview.diffs)]
        if level >= 1:
            results = [dataclasses.replace(r, samples=Samples()) for r in results]
        if level >= 3:
            diff_notes += [_one_line(r) for r in results]
        elif results:
            diffs = diff_render.markdown(results)
        diff_notes += [
            md.Markdown(f"{md.code(n)}: not compared: {md.text(why)}")
            for n, why in sorted(preview.skipped_diffs.items())
        ]
        diff_notes += [
            md.Markdown(f"{md.code(n)}: the diff failed: {md.text(e)}")
            for n, e in sorted(preview.diff_errors.items())
        ]
    return {
        "icon": _ICONS.get(state.state, ""),
        "project": state.project,
        "headline": state.headline,
        "progress": state.progress,
        "error": {"title": state.error[0], "text": state.error[1]} if state.error else None,
        "environment": state.environment,
        "short_sha": state.head_sha[:7],
        "where": where,
        "plan": plan_view(
            plan,
            level=level,
            recent_days=state.recent_days,
            held=preview.held if preview is not None else None,
        )
        if plan is not None
        else None,
        "diffs": diffs.strip(),
        "diff_notes": [*diff_notes, *(md.trusted(n) for n in state.notes)],
        "checks": [{"name": n, "status": s} for n, s in state.checks],
        "folded": (_FOLDED[level] or "").format(at=state.details_at) or None,
        "footer": state.footer,
    }


def plan_view(
    plan: Plan,
    *,
    level: int = 0,
    recent_days: int | None = None,
    held: dict[str, tuple[Interval, ...]] | None = None,
) -> dict[str, Any]:
    """The plan as the templates show it (SQL diffs dropped from ``level`` 2);
    ``recent_days``: the PR builds incremental models for that many recent days only;
    ``held``: once built, what the environment's own tables hold (also when an earlier run
    built them), shown instead of what is left to backfill."""
    direct = [
        {
            "name": c.name,
            "category": c.category.value,
            "diff": _cap_lines(c.diff) if level < 2 else "",
        }
        for c in plan.directly_modified
    ]
    limited = None
    if recent_days is not None and plan.environment != "prod":
        limited = (
            f"Incremental models are built for their most recent {recent_days} days only "
            "(`sluice.pr.backfill_days`; ranges above), and the table diff compares those days."
        )
    return {
        "empty": not plan.changes_models,
        "added": list(plan.added),
        "removed": list(plan.removed),
        "direct": direct,
        "indirect": [
            {"name": c.name, "category": c.category.value} for c in plan.indirectly_modified
        ],
        "metadata": list(plan.metadata_only),
        "backfill": _built(plan, held)
        if held is not None
        else [
            {"model": b.name, "range": format_range(b.start, b.end), "intervals": len(b.intervals)}
            for b in plan.backfill
        ],
        "backfill_title": "Built" if held is not None else "Backfill",
        "limited": limited,
    }


def _built(plan: Plan, held: dict[str, tuple[Interval, ...]]) -> list[dict[str, Any]]:
    rows = []
    for name, ranges in held.items():
        model = plan.snapshot(name).model
        count = (
            sum(len(cron_intervals(model.cron, a, b)) for a, b in ranges)
            if model.kind.name == KindName.INCREMENTAL_BY_TIME_RANGE
            else len(ranges)
        )
        span = ", ".join(format_range(a, b) for a, b in ranges)
        rows.append({"model": name, "range": span, "intervals": count})
    return rows


def _one_line(result: TableDiffResult) -> md.Markdown:
    if result.identical:
        return md.Markdown(f"{md.code(result.name)}: identical")
    changed = md.text(", ".join(result.changed_columns) or "none", diff_render.MAX_CELL)
    return md.Markdown(
        f"{md.code(result.name)}: {result.source_only} rows only in {md.text(result.source)}, "
        f"{result.target_only} only in {md.text(result.target)}, {result.differing_rows} "
        f"differ (columns: {changed})"
    )


def _cap_lines(text: str) -> str:
    lines = text.splitlines()
    if len(lines) <= MAX_DIFF_LINES:
        return text
    return "\n".join([*lines[:MAX_DIFF_LINES], f"... ({len(lines) - MAX_DIFF_LINES} more lines)"])


def tests_summary(results: Sequence[dict[str, Any]]) -> tuple[str, str]:
    """(title, Markdown body) for the ``sluice/tests`` check."""
    failed = [r for r in results if not r.get("passed")]
    if not results:
        return "No unit tests", "The project has no unit tests (`tests/*.yaml`)."
    title = (
        f"{len(failed)} of {len(results)} unit tests failed"
        if failed
        else f"{len(results)} unit tests passed"
    )
    lines = [f"| Test | Result |", "| --- | --- |"]  # noqa: F541
    lines += [
        f"| {md.code(r.get('name'), table=True)} | {'passed' if r.get('passed') else 'failed'} |"
        for r in results
    ]
    for r in failed:
        diff = "\n".join(str(line) for line in r.get("diff", []))
        lines += ["", f"**{md.text(r.get('name'))}**", "", md.fence(diff, "text")]
    return title, "\n".join(lines)


def details_markdown(result: PreviewResult) -> str:
    """Everything, unfolded (every SQL diff and sample), for the environment check's body;
    the forge fits it to the check's limit without breaking a block."""
    state = CommentState(None, result.plan.environment, "", "neutral", "details", preview=result)
    view = _view(state, 0)
    view.update(marker="", where=[], checks=[], footer="", progress=None, headline="details")
    body = _env().get_template("pr_comment.md.j2").render(**view)
    return body.split("\n", 2)[-1].strip()


SECTION_ORDER = ("promotion", "cleanup", "approval", "settings")


def with_sections(body: str, sections: dict[str, str]) -> str:
    """``body`` with the extra sections (approval, promotion) under its headline.

    The main body is rendered by whoever last built or planned the PR; the sections are
    written by later events (a review, a merge) that know nothing of it, so they are kept
    apart and joined here.
    """
    extra = [sections[name].strip() for name in SECTION_ORDER if sections.get(name)]
    if not extra:
        return body
    lines = body.split("\n")
    at = next((i + 1 for i, line in enumerate(lines) if line.startswith("### ")), len(lines))
    block = "\n\n".join(extra)
    return "\n".join([*lines[:at], "", block, *lines[at:]])


# -- the sections: (name, Markdown) pairs for StickyComment.publish --------------------


def approval_section(ok: bool, text: str) -> tuple[str, str]:
    return "approval", f"**Approval:** {'✅' if ok else '⏳'} {text}"


def approval_error_section(text: str) -> tuple[str, str]:
    return "approval", f"**Approval:** ❌ {text}"


def promotion_section(sha: str, ok: bool, title: str, summary: str) -> tuple[str, str]:
    return "promotion", f"**Promotion** of `{sha[:7]}`: {'🚀' if ok else '❌'} {title}. {summary}"


def promotion_error_section(text: str) -> tuple[str, str]:
    return "promotion", f"**Promotion:** ❌ {text}"


def waiting_for_tag_section(
    tag_pattern: str, prod_branch: str, environment: str
) -> tuple[str, str]:
    return "promotion", (
        f"**Promotion:** merged; prod is promoted by the next tag matching "
        f"`{tag_pattern}` on `{prod_branch}`. `{environment}` stays until then."
    )


def cleanup_section(environment: str, why: str) -> tuple[str, str]:
    return (
        "cleanup",
        f"**Environment:** `{environment}` is removed ({why}); the janitor drops its views.",
    )


def settings_section(
    config_path: str,
    changed: bool,
    source: str,
    note: str | None,
    branch: str,
    ignored_spark: Sequence[str],
) -> tuple[str, str | None]:
    """What the PR should know of the settings its build used: its own ``sluice:`` changes
    (``changed``) wait for approval; a newer prod branch's wait (``note``); Spark settings
    the prod branch may not set. None: nothing to say (the section goes away)."""
    lines = []
    if changed:
        lines.append(
            f"This PR changes the `sluice:` settings in `{config_path}`. Sluice "
            f"builds and gates it with the prod branch's settings ({source}); "
            "the PR's settings take effect once it is approved and promoted."
        )
    if note:
        lines.append(note)
    if ignored_spark:
        keys = ", ".join(f"`{k}`" for k in ignored_spark)
        lines.append(
            f"Ignored in `sluice.spark` on {md.code(branch)}: {keys}. Spark's master, "
            "deploy mode and any setting that could load code are the service's "
            "(`SLUICE_SPARK_MASTER`, `SLUICE_SPARK_CONF`); the prod branch may set "
            "tuning only."
        )
    return "settings", "**Settings:** " + " ".join(lines) if lines else None


def footer(sha: str, now_ms: int, job_timeout: float | None, driver_memory: str) -> str:
    """The comment's last line: the commit, when it was written, and the limits a PR's
    Spark job runs under.

    >>> footer("a" * 40, 0, 1800.0, "2g")
    'Sluice · commit aaaaaaa · updated 1970-01-01 00:00 UTC · limits: 30 min per Spark job, driver memory 2g'
    """
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(now_ms / 1000))
    parts = [] if job_timeout is None else [f"{_duration(job_timeout)} per Spark job"]
    parts.append(f"driver memory {driver_memory}")
    return f"Sluice · commit {sha[:7]} · updated {stamp} · limits: " + ", ".join(parts)


def _duration(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{int(seconds // 3600)} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{int(seconds // 60)} min"
    return f"{seconds:g} s"


def progress(kind: object, builds: int, total: int, label: object) -> str | None:
    """The comment's progress line for a Spark step starting; None: not worth a line."""
    if kind == "build":
        return f"Building {builds} of {max(total, builds)} models ({label})"
    if kind == "table_diff":
        return f"Comparing with prod ({label})"
    if kind == "unit_test":
        return "Running unit tests"
    return None
