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
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from sluice.bot.present import checks, impact, verdict
from sluice.bot.present import graph as _graph
from sluice.core import markdown as md
from sluice.core.intervals import Interval, cron_intervals
from sluice.core.model.definition import KindName
from sluice.core.plan.plan import Plan
from sluice.core.preview import PreviewResult
from sluice.core.snapshot.naming import view_name
from sluice.core.spark.results import UnitTestResult
from sluice.core.tablediff import render as diff_render
from sluice.core.tablediff.result import Samples, TableDiffResult
from sluice.core.timeutil import format_range
from sluice.core.words import plural

MARKER = "<!-- sluice:pr-comment{project} -->"
_ICONS = {"queued": "⏳", "running": "⏳", "success": "✅", "failure": "❌", "neutral": "ℹ️"}  # noqa: RUF001
MAX_DIFF_LINES = impact.MAX_DIFF_LINES
RESERVE = 6_000
"""Characters kept free for what is added to a body later: the verdict lines, the
sections (approval, promotion...) and the next steps (:func:`with_sections`)."""
SUMMARY_ROWS = 30
"""Impact-table rows of a comment folded to its summary."""
BACKFILL_ROWS = 15
"""Rows of the backfill (or "built in") table before "and N more"."""


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
    prod_plan: Plan | None = None  # prod planned at the PR's head: what merging does
    checks_url: str | None = None  # the forge's page of the head's checks, when it has one


def comment(state: CommentState, *, limit: int, marker: str) -> str:
    """The comment's main body, as detailed as ``limit`` characters (less what
    :func:`with_sections` adds later) allow.

    A finished build's body holds placeholders for its verdict and next steps, which
    :func:`with_sections` fills from the facts :func:`facts_section` gives the flow to keep.
    """
    budget = max(limit - RESERVE, limit // 2)
    for level in range(4):
        text = _render(state, level, marker)
        if len(text) <= budget:
            return text
    # Even the summary is too long (thousands of models): keep the headline and say so.
    short = dataclasses.replace(state, preview=None, plan=None, error=None, checks=())
    return _render(short, 4, marker)


def _render(state: CommentState, level: int, marker: str) -> str:
    return _env().get_template("pr_comment.md.j2").render(**_view(state, level), marker=marker)


def facts_section(state: CommentState) -> tuple[str, str | None]:
    """The build's facts, kept with the comment (none while it is queued or running)."""
    facts = build_facts(state)
    return verdict.BUILD, facts.to_json() if facts is not None else None


def build_facts(state: CommentState) -> verdict.BuildFacts | None:
    """What a finished build found, for the verdict; None before it has finished."""
    if state.state not in ("success", "failure"):
        return None
    preview = state.preview
    plan = preview.plan if preview is not None else state.plan
    failure = failure_words(state)
    if preview is not None and failure is None:
        if not preview.tests_passed:
            failed = sum(1 for t in preview.tests if not t["passed"])
            failure = f"{plural(failed, 'unit test')} failed"
        elif preview.diff_errors:
            failure = f"{plural(len(preview.diff_errors), 'table diff')} failed"
    if plan is None:
        return verdict.BuildFacts(state.environment, state.project, failure, False)
    rows = impact.rows(plan, preview.diffs if preview else {})
    kinds = {r.name: r.kind for r in rows}
    merge = None
    if state.prod_plan is not None:
        merge = tuple(
            verdict.Backfill(b.name, len(b.intervals), _full(state.prod_plan, b.name))
            for b in sorted(state.prod_plan.backfill, key=lambda b: impact.natural(b.name))
        )
    views = (
        [view_name(r.name, state.environment) for r in rows if r.kind not in ("removed",)]
        if preview is not None
        else []
    )
    output = state.prod_plan.output if state.prod_plan is not None else None
    return verdict.BuildFacts(
        environment=state.environment,
        project=state.project,
        failure=failure,
        changes_models=plan.changes_models,
        breaking=tuple(n for n, k in kinds.items() if k in ("breaking", "removed")),
        reached=tuple(n for n, k in kinds.items() if k == "breaking-indirect"),
        non_breaking=tuple(n for n, k in kinds.items() if k.startswith(("non-", "forward"))),
        added=tuple(n for n, k in kinds.items() if k == "added"),
        metadata=tuple(n for n, k in kinds.items() if k == "metadata"),
        tables_built=preview.built if preview is not None else 0,
        views=preview.views if preview is not None else 0,
        seconds=preview.seconds if preview is not None else 0.0,
        rows_written=preview.rows_built if preview is not None else None,
        bytes_written=preview.bytes_built if preview is not None else None,
        merge=merge,
        merge_bytes=state.prod_plan.scan_bytes if state.prod_plan is not None else None,
        merge_rows=_total(output.rows) if output is not None else None,
        merge_written=_total(output.bytes) if output is not None else None,
        merge_into=state.prod_plan.environment if state.prod_plan is not None else "prod",
        merge_changes=state.prod_plan.has_changes if state.prod_plan is not None else True,
        query_views=tuple(views),
        # Only a built environment has tables to compare again.
        diff_models=tuple(r.name for r in rows if r.kind not in ("added", "removed"))
        if preview is not None
        else (),
        checks_url=state.checks_url,
    )


def _total(counts: Mapping[str, int]) -> int | None:
    return sum(counts.values()) if counts else None


def _full(plan: Plan, name: str) -> bool:
    """Whether ``name``'s table is computed whole (not by time intervals: an SCD type 2
    model merges its due intervals into its history, so it counts by interval too)."""
    try:
        kind = plan.snapshot(name).model.kind
    except StopIteration:
        return False
    return kind.name != KindName.INCREMENTAL_BY_TIME_RANGE and not kind.is_scd_type_2


_FOLDED = (
    None,
    "Sample rows were left out to fit the comment size; {at} has them.",
    "The impact graph, SQL diffs and sample rows were left out to fit the comment size; "
    "{at} has them.",
    "Only a summary fits in a comment; {at} has the full plan and table diffs.",
    "Only the headline fits in a comment; {at} has the full plan and table diffs.",
)


def _view(state: CommentState, level: int, *, full: bool = False) -> dict[str, Any]:
    """What the template shows at ``level``; ``full``: every row of the impact table (the
    check's body), not the riskiest and a count of the rest."""
    preview = state.preview
    plan = preview.plan if preview is not None else state.plan
    facts = build_facts(state)
    diffs = ""
    diff_notes: list[str] = []
    rows = (
        impact.rows(
            plan, preview.diffs if preview else {}, preview.skipped_diffs if preview else None
        )
        if plan is not None
        else []
    )
    if preview is not None:
        order = {r.name: i for i, r in enumerate(rows)}
        # Riskiest first, the biggest change first: the decisive diff is the first one.
        names = sorted(preview.diffs, key=lambda n: (order.get(n, len(order)), impact.natural(n)))
        results = [preview.diffs[name] for name in names]
        if level >= 1:
            results = [dataclasses.replace(r, samples=Samples()) for r in results]
        if level >= 3:
            diff_notes += [_one_line(r) for r in results]
        elif results:
            diffs = diff_render.markdown(results)
        diff_notes += [
            md.Markdown(f"{md.code(n)}: not compared: {md.text(why)}")
            for n, why in sorted(preview.skipped_diffs.items(), key=_by_name)
        ]
        diff_notes += [
            md.Markdown(f"{md.code(n)}: the diff failed: {md.text(e)}")
            for n, e in sorted(preview.diff_errors.items(), key=_by_name)
        ]
    if facts is not None:
        icon, headline = verdict.headline(verdict.Facts(build=facts))
    else:
        icon, headline = _ICONS.get(state.state, ""), md.trusted(state.headline)
    graph = verdict_graph = ""
    if plan is not None and level < 2 and state.state not in ("queued",):
        graph = _graph.mermaid(plan, rows)
        verdict_graph = _graph.legend(plan, rows) if graph else ""
    return {
        "icon": icon,
        "project": state.project,
        "headline": headline,
        "placeholders": facts is not None,
        "verdict_at": verdict.VERDICT,
        "next_at": verdict.NEXT,
        "checks_from": verdict.CHECKS_FROM,
        "checks_to": verdict.CHECKS_TO,
        "progress": state.progress,
        "error": failure(*state.error) if state.error else None,
        "environment": state.environment,
        "short_sha": state.head_sha[:7],
        "impact": md.Markdown(
            impact.table(
                rows,
                state.environment,
                cap=SUMMARY_ROWS if level >= 3 else None,
                built=preview is not None,
                short=not full,
                elsewhere=state.details_at,
            )
        ),
        "graph": md.Markdown(graph),
        "legend": verdict_graph,
        "sql_diffs": md.Markdown(
            impact.sql_diffs(plan, [r.name for r in rows]) if plan is not None and level < 2 else ""
        ),
        "plan": plan_view(
            plan,
            level=level,
            recent_days=state.recent_days,
            held=preview.held if preview is not None else None,
            short=not full,
            details_at=state.details_at,
        )
        if plan is not None
        else None,
        "diffs": diffs.strip(),
        "diff_notes": [*diff_notes, *(md.trusted(n) for n in state.notes)],
        # The plan's own warnings (a long backfill, a destructive change allowed with a
        # warning): the project's text, escaped as any value is.
        "warnings": [" ".join(w.split()) for w in plan.warnings] if plan is not None else [],
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
    short: bool = True,
    details_at: str = "the `sluice/pr-environment` check",
) -> dict[str, Any]:
    """The plan's ranges as the templates show them (none from ``level`` 3; ``short``:
    at most :data:`BACKFILL_ROWS` of them, then a count), models in natural order;
    ``recent_days``: the PR builds incremental models for that many recent days only;
    ``held``: once built, what the environment's own tables hold (also when an earlier run
    built them), shown instead of what is left to backfill. A model computed whole (FULL,
    VIEW, SEED) shows "full refresh", not a date range."""
    limited = None
    incremental = any(not _full(plan, b.name) for b in plan.backfill)
    if recent_days is not None and plan.environment != "prod" and incremental:
        limited = (
            f"Incremental models are built for their most recent {recent_days} days only "
            "(`sluice.pr.backfill_days`; ranges above), and the table diff compares those days."
        )
    rows = (
        _built(plan, held)
        if held is not None
        else [_range(plan, b.name, [(b.start, b.end)], len(b.intervals)) for b in plan.backfill]
    )
    rows.sort(key=lambda r: impact.natural(r["model"]))
    more = None
    if short and len(rows) > BACKFILL_ROWS:
        rest = len(rows) - BACKFILL_ROWS
        more = f"And {plural(rest, 'more model')}; {details_at} lists every range."
        rows = rows[:BACKFILL_ROWS]
    for row in rows:
        row["cell"] = md.Markdown(impact.name_cell(row["model"]))
    return {
        "empty": not plan.changes_models,
        "added": impact.naturally(plan.added),
        "removed": impact.naturally(plan.removed),
        "direct": [
            {"name": c.name, "category": c.category.value}
            for c in sorted(plan.directly_modified, key=lambda c: impact.natural(c.name))
        ],
        "indirect": [
            {"name": c.name, "category": c.category.value}
            for c in sorted(plan.indirectly_modified, key=lambda c: impact.natural(c.name))
        ],
        "metadata": impact.naturally(plan.metadata_only),
        "backfill": rows if level < 3 else [],
        "backfill_more": more if level < 3 else None,
        "backfill_title": f"Built in {plan.environment}" if held is not None else "Backfill",
        "limited": limited,
    }


def _range(plan: Plan, name: str, ranges: Sequence[Interval], count: int) -> dict[str, Any]:
    if _full(plan, name):
        return {"model": name, "range": "full refresh", "intervals": "-"}
    span = ", ".join(format_range(a, b) for a, b in ranges)
    return {"model": name, "range": span, "intervals": count}


def _built(plan: Plan, held: dict[str, tuple[Interval, ...]]) -> list[dict[str, Any]]:
    rows = []
    for name, ranges in held.items():
        model = plan.snapshot(name).model
        count = (
            sum(len(cron_intervals(model.cron, a, b)) for a, b in ranges)
            if model.kind.name == KindName.INCREMENTAL_BY_TIME_RANGE
            else len(ranges)
        )
        rows.append(_range(plan, name, ranges, count))
    return rows


def _one_line(result: TableDiffResult) -> md.Markdown:
    if result.identical:
        return md.Markdown(f"{md.code(result.name)}: identical")
    changed = md.text(", ".join(result.changed_columns) or "none", diff_render.MAX_CELL)
    differ = "differs" if result.differing_rows == 1 else "differ"
    return md.Markdown(
        f"{md.code(result.name)}: {diff_render.count(result.source_only, 'row')} only in "
        f"{md.text(result.source)}, {diff_render.count(result.target_only, 'row')} only in "
        f"{md.text(result.target)}, {diff_render.count(result.differing_rows, 'row')} {differ} "
        f"(columns: {changed})"
    )


def _by_name(item: tuple[str, Any]) -> Any:
    return impact.natural(item[0])


# -- a failure in the author's terms ------------------------------------------------------

FAILURE_LINE = 600
"""Characters of Spark's one-line error shown in the comment."""
DETAIL_LINES = 15
_WHERE = re.compile(r"^(?P<where>[^\s:]\S*?:\d+(?::\d+)?): (?P<rest>.*)$")
_STEP = re.compile(r"^Spark job failed at step '(?P<label>[^']*)': ?(?P<error>.*)$")
_STEP_MODEL = re.compile(r"^(?:build|audit) (?P<model>[^:\s]+)")
_HINT = re.compile(r"^\s+hint: (?P<hint>.*)$")
_ALSO = re.compile(r"^\s+also failed: (?P<also>.*)$")
# A step failure's hint says nothing the comment does not (fix it and push); its log is
# on the service's disk, which the author cannot read.
_GENERIC_HINT = re.compile(r"^fix the step's cause and run again\s*(\([^)]*\))?$")
# Each match starts where a run of blanks starts ((?<!\s)): tried at every blank of a long
# run, a leading \s* makes a failure's text of n blanks cost n² (red team).
_LOG_NOTE = re.compile(
    r"(?<!\s)\s*\((?:exit code -?\d+; )?full log: [^)]*\)|(?<!\s)\s*\(exit code -?\d+\)"
)
_JVM = "JVM stacktrace:"
_STACK = re.compile(r"^\s*(?:at [\w$./<>-]+\(|\.\.\. \d+ more|Caused by: |Suppressed: )")
_PLAN_NODE = re.compile(
    r"^\s*(?:[:|!+]\s*)*(?:[+:]- |'?(?:Project|Filter|Aggregate|Join|SubqueryAlias|Relation|"
    r"LocalRelation|LogicalRDD|Unresolved\w+|Sort|Window|Union|Generate|Expand|Deduplicate|"
    r"Distinct|GlobalLimit|LocalLimit|View|WithCTE|CTERelation\w+|\w+Command|HiveTableRelation|"
    r"Range|OneRowRelation|InsertInto\w+|CreateTable\w*|Repartition\w*|Sample|Except|"
    r"Intersect|Window\w*|MapPartitions\w*|SerializeFromObject|DeserializeToObject)\b|"
    r"== .* ==\s*$|\*\(\d+\) )"
)
_ATTRIBUTE = re.compile(r"\b\w+#\d+L?\b")
"""A plan's attribute reference (``amount#13L``): a line holding one is a plan's."""
_SPARK_TAIL = re.compile(
    r"(?<!\s)(?:\s*SQLSTATE: [0-9A-Z]{5})?;?\s*line \d+,? pos \d+;?.*$"
    r"|(?<!\s)\s*SQLSTATE: [0-9A-Z]{5};?|;\s*$"
)
MAX_FAILURE_CHARS = 20_000
"""A failure's text is read this far (the comment shows its first line and folds the rest)."""
_HOST_PATH = re.compile(
    r"(?:\b(?:file|hdfs|s3a?|abfss?|gs|dbfs|jar):/+|(?<![\w.~<>/:\\-])/)"
    r"(?:[\w.@%+=,-]+/)+(?P<last>[\w.@%+=,-]*)"
)


def _short_path(found: re.Match[str]) -> str:
    return "…/" + found["last"]


def condense(text: str) -> str:
    """``text`` without what only Spark's developers read: a JVM stack, a logical plan,
    the SQL state and the position in the generated SQL; and without host paths (each
    becomes ``…/`` and its last part). What is left keeps its order.

    >>> condense("Path does not exist: file:/tmp/w/sluice__s.db/t__1a. SQLSTATE: 42K03")
    'Path does not exist: …/t__1a.'
    >>> condense("bad [x]; line 1 pos 9;\\n'Project ['x]\\n+- Relation s.t[a#1L] parquet")
    'bad [x]'
    """
    text = text[:MAX_FAILURE_CHARS]
    if (jvm := text.find(_JVM)) >= 0:  # the JVM's stack, and the blanks before it, go
        text = text[:jvm].rstrip()
    kept = []
    for raw in text.splitlines():
        if _STACK.match(raw) or _PLAN_NODE.match(raw) or _ATTRIBUTE.search(raw):
            continue
        line = _HOST_PATH.sub(_short_path, _SPARK_TAIL.sub("", raw))
        if line.strip():
            kept.append(line.rstrip())
    return "\n".join(kept)


@dataclass(frozen=True)
class Failure:
    """A failure's message, read in the author's terms (see :func:`read_failure`)."""

    where: str | None  # the model's file:line
    model: str | None
    message: str  # one line: Spark's error, or Sluice's
    details: tuple[str, ...] = ()  # more lines of it (a Python traceback), condensed
    also: tuple[str, ...] = ()  # other steps that failed at the same time
    hint: str | None = None


def read_failure(text: str) -> Failure:
    """The parts of a failure's text (``file:line: message``, a failed step's label,
    ``also failed:`` and ``hint:`` lines), condensed (:func:`condense`)."""
    lines = condense(_LOG_NOTE.sub("", text[:MAX_FAILURE_CHARS])).splitlines() or [""]
    hint = None
    also: list[str] = []
    body: list[str] = []
    for line in lines:
        if (h := _HINT.match(line)) is not None:
            hint = h["hint"].strip()
        elif (a := _ALSO.match(line)) is not None:
            also.append(a["also"].strip())
        else:
            body.append(line)
    first = body[0].strip() if body else ""
    where = model = None
    if (w := _WHERE.match(first)) is not None:
        where, first = w["where"], w["rest"]
        # The location said twice (a step's source, then the model's file again): once.
        first = first.removeprefix(f"{where}: ")
    if (step := _STEP.match(first)) is not None:
        first = step["error"]
        found = _STEP_MODEL.match(step["label"])
        model = found["model"] if found is not None else None
    if hint is not None and _GENERIC_HINT.match(hint):
        hint = None
    details = tuple(line for line in body[1:] if line.strip())
    if len(details) > DETAIL_LINES:
        left = len(details) - DETAIL_LINES
        details = (*details[:DETAIL_LINES], f"... ({left} more lines)")
    return Failure(where, model, first.strip(), details, tuple(also), hint)


def failure_words(state: CommentState) -> str | None:
    """What failed, for the headline: the state's headline (the caller's Markdown, as
    before a build finished), and the model when a step of it failed."""
    if state.error is None:
        return None
    model = read_failure(state.error[1]).model
    return f"{state.headline} at {md.code(model)}" if model else state.headline


def failure(title: str, text: str) -> md.Markdown:
    """The failure block of the comment: what failed, at which model and file:line, and
    Spark's one-line error as wrapping text (never a plan, a stack or a host path); a
    longer error's other lines folded."""
    found = read_failure(text)
    at = []
    if found.model:
        at.append(f"at {md.code(found.model)}")
    if found.where:
        at.append(f"({md.code(found.where)})" if found.model else f"at {md.code(found.where)}")
    parts = [f"**{md.text(title)}**" + (" " + " ".join(at) if at else "") + ":"]
    if found.message:
        parts.append(f"> {md.text(found.message, FAILURE_LINE)}")
    if found.details:
        parts.append(
            "<details><summary>The rest of the error</summary>\n\n"
            f"{md.fence(chr(10).join(found.details), 'text')}\n\n</details>"
        )
    if found.also:
        parts.append(
            "Also failed:\n\n" + "\n".join(f"- {md.text(a, FAILURE_LINE)}" for a in found.also)
        )
    if found.hint:
        parts.append(f"Hint: {md.text(found.hint, FAILURE_LINE)}")
    return md.Markdown("\n\n".join(parts))


def tests_summary(results: Sequence[UnitTestResult]) -> tuple[str, str]:
    """(title, Markdown body) for the ``sluice/tests`` check: each test's name and outcome,
    a failed one's diff."""
    failed = [r for r in results if not r["passed"]]
    if not results:
        return "No unit tests", "The project has no unit tests (`tests/*.yaml`)."
    title = (
        f"{len(failed)} of {plural(len(results), 'unit test')} failed"
        if failed
        else f"{plural(len(results), 'unit test')} passed"
    )
    lines = [f"| Test | Result |", "| --- | --- |"]  # noqa: F541
    lines += [
        f"| {md.code(r['name'], table=True)} | {'passed' if r['passed'] else 'failed'} |"
        for r in results
    ]
    for r in failed:
        lines += ["", f"**{md.text(r['name'])}**", "", md.fence(r["diff"], "text")]
    return title, "\n".join(lines)


def details_markdown(result: PreviewResult, prod_plan: Plan | None = None) -> str:
    """Everything, unfolded (the verdict, the impact table, every SQL diff and sample), for
    the environment check's body; the forge fits it to the check's limit without breaking a
    block."""
    state = CommentState(
        None, result.plan.environment, "", "success", "details", preview=result, prod_plan=prod_plan
    )
    view = _view(state, 0, full=True)
    view.update(marker="", checks=[], footer="", progress=None, graph="", legend="")
    body = _env().get_template("pr_comment.md.j2").render(**view)
    facts = build_facts(state)
    sections = {verdict.BUILD: facts.to_json()} if facts is not None else {}
    body = verdict.compose(body, sections, ())
    # The check has its own title: its body starts with the verdict's words, no heading.
    lines = body.strip().split("\n")
    if lines and lines[0].startswith("### ") and facts is not None:
        lines[0] = f"**{verdict.summary(facts)}** (approval: the `{checks.APPROVAL}` check)"
    return "\n".join(lines).replace(verdict.NEXT, "").strip()


EDITED = "edited"
"""The section saying someone else edited Sluice's comment (:func:`edited_section`)."""

SECTION_ORDER = (EDITED, "promotion", "cleanup", "approval", "policy", "settings")


def with_sections(body: str, sections: dict[str, str]) -> str:
    """``body`` made true to the PR's state: its headline, verdict lines and next steps
    from the facts in ``sections`` (:mod:`sluice.bot.present.verdict`), and the extra
    sections (approval, promotion...) under its verdict.

    The main body is rendered by whoever last built or planned the PR; the sections and
    facts are written by later events (a review, a merge) that know nothing of it, so they
    are kept apart and joined here.
    """
    life = verdict.Facts.of(sections).life
    hidden = {"approval"} if life is not None and life.event == "closed" else set()
    shown = [
        sections[name].strip()
        for name in SECTION_ORDER
        if sections.get(name) and name not in hidden
    ]
    return verdict.compose(body, sections, shown)


def reset_sections() -> list[tuple[str, str | None]]:
    """What a new build of the PR clears: what became of it (a reopened PR is open), the
    gate of the last head (evaluated again once this one is planned) and the word of an
    edit by someone else (the plan is shown again)."""
    return [
        (verdict.LIFE, None),
        ("cleanup", None),
        (verdict.GATE, None),
        ("approval", None),
        (EDITED, None),
    ]


def copy_stub(marker: str) -> str:
    """What an older copy of Sluice's comment (two posts that raced, each making one) is
    rewritten to, so only one comment of Sluice's shows a plan; it keeps the marker, so a
    comment of Sluice's is still found if the other is deleted."""
    return (
        f"{marker}\n### Sluice\n_An older copy of Sluice's comment, no longer kept up to "
        "date: read Sluice's other comment on this pull request for its plan and approvals._\n"
    )


def edited_section(*, deleted: bool = False) -> tuple[str, str]:
    """Sluice's comment was rewritten by someone else and put back (``deleted``: deleted
    and posted again): approvals given since count for no plan until Sluice shows it
    again."""
    what = (
        "**Deleted by someone else:** ⚠️ this comment was deleted by another account and "
        "Sluice posted it again."
        if deleted
        else "**Edited by someone else:** ⚠️ this comment was changed by another account "
        "and Sluice put its own text back."
    )
    return EDITED, (
        f"{what} An approval given since the plan was shown counts for no plan: comment "
        "`/sluice plan` to show the plan again, then approve it."
    )


# -- the sections: (name, Markdown) pairs for StickyComment.publish --------------------


def approval_section(ok: bool, text: str) -> tuple[str, str]:
    return "approval", f"**Approval:** {'✅' if ok else '⏳'} {text}"


def approval_sections(
    ok: bool,
    text: str,
    *,
    requires_approval: bool,
    missing: int,
    eligible: Sequence[str],
    owners_missing: dict[str, str],
    approved_by: Sequence[str],
    stale: bool,
    into_prod: bool,
) -> list[tuple[str, str | None]]:
    """The approval section and the gate's facts for the verdict (whom it waits for)."""
    gate = verdict.GateFacts(
        ok=ok,
        requires_approval=requires_approval,
        missing=missing,
        eligible=tuple(eligible),
        owners_missing=tuple(sorted(owners_missing.items())),
        approved_by=tuple(approved_by),
        stale=stale,
        into_prod=into_prod,
    )
    return [approval_section(ok, text), (verdict.GATE, gate.to_json())]


def approval_error_section(text: str) -> tuple[str, str]:
    return "approval", f"**Approval:** ❌ {text}"


def promotion_section(sha: str, ok: bool, title: str, summary: str) -> tuple[str, str]:
    return "promotion", f"**Promotion** of `{sha[:7]}`: {'🚀' if ok else '❌'} {title}. {summary}"


def promotion_sections(
    sha: str, ok: bool, title: str, summary: str
) -> list[tuple[str, str | None]]:
    """The promotion section and what became of the PR (promoted, or not)."""
    life = verdict.LifeFacts("promoted" if ok else "promotion_failed", title)
    return [promotion_section(sha, ok, title, summary), (verdict.LIFE, life.to_json())]


def promotion_error_section(text: str) -> tuple[str, str]:
    return "promotion", f"**Promotion:** ❌ {text}"


def waiting_for_tag_section(
    tag_pattern: str, prod_branch: str, environment: str
) -> tuple[str, str]:
    return "promotion", (
        f"**Promotion:** merged; prod is promoted by the next tag matching "
        f"{md.code(tag_pattern)} on {md.code(prod_branch)}. {md.code(environment)} stays "
        "until then."
    )


def waiting_for_tag_sections(
    tag_pattern: str, prod_branch: str, environment: str
) -> list[tuple[str, str | None]]:
    life = verdict.LifeFacts("waiting_for_tag", tag_pattern)
    return [
        waiting_for_tag_section(tag_pattern, prod_branch, environment),
        (verdict.LIFE, life.to_json()),
    ]


def cleanup_section(environment: str, why: str) -> tuple[str, str]:
    return (
        "cleanup",
        f"**Environment:** `{environment}` is removed ({why}); the janitor drops its views.",
    )


def closed_sections(
    environment: str, why: str, *, merged: bool, removed: bool, promoted: bool
) -> list[tuple[str, str | None]]:
    """What a PR closed (``merged`` or not) says: its environment ``removed`` or not.
    ``promoted``: the merge promoted it (the promotion's facts stand)."""
    out: list[tuple[str, str | None]] = []
    if removed:
        out.append(cleanup_section(environment, why))
    if not promoted:
        event = "merged_elsewhere" if merged else "closed"
        out.append((verdict.LIFE, verdict.LifeFacts(event, removed=removed).to_json()))
    return out


def settings_section(
    settings_file: str,
    changed: bool,
    source: str,
    note: str | None,
    branch: str,
    ignored_spark: Sequence[str],
    drops_gate: bool = False,
    policies_changed: bool = False,
) -> tuple[str, str | None]:
    """What the PR should know of the settings its build used: its own changes of Sluice's
    settings (``changed``, in ``settings_file``: its sluice.yaml or config.yaml) wait for
    approval, said louder when they leave prod unguarded
    (``drops_gate``: the prod branch's gate asks for approvals, the PR's for none); a
    newer prod branch's wait (``note``); Spark settings the prod branch may not set.
    None: nothing to say (the section goes away)."""
    lines = []
    if changed:
        lines.append(
            f"This PR changes Sluice's settings in {md.code(settings_file)}. Sluice "
            f"builds and gates it with the prod branch's settings ({source}); "
            "the PR's settings take effect once it is approved and promoted."
        )
    if changed and drops_gate:
        lines.append(
            "⚠️ **Its settings ask for no approval** (no `sluice.gate` approvers or owners): "
            "once it is promoted, merges reach prod with nobody's approval."
        )
    if policies_changed:
        lines.append(
            "This PR changes the policies in `policies/`: its plan is judged by the "
            f"policies in force ({source}), never its own, and the change is approved as a "
            "change of Sluice's settings; it takes effect once approved and promoted."
        )
    if note:
        lines.append(note)
    if ignored_spark:
        keys = ", ".join(md.code(k) for k in ignored_spark)
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


PROGRESS_LABEL_CHARS = 120
"""A step's label in the progress line is cut to this many characters."""


def progress(kind: object, builds: int, total: int, label: object) -> str | None:
    """The comment's progress line for a Spark step starting; None: not worth a line.

    The step's label comes from the driver's event, which a PR's code in the driver can
    print: it is shown as code, cut, never as Markdown.

    >>> progress("build", 1, 3, "build s.a ![x](http://x/i.png)")
    'Building 1 of 3 models (`build s.a ![x](http://x/i.png)`)'
    """
    shown = md.code(label, PROGRESS_LABEL_CHARS)
    if kind == "build":
        return f"Building {builds} of {max(total, builds)} models ({shown})"
    if kind == "table_diff":
        return f"Comparing with prod ({shown})"
    if kind == "unit_test":
        return "Running unit tests"
    return None
