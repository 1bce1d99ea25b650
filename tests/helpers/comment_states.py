"""The demo's pull request, without Spark, in each state of its life: the comment as the
forge gets it after each event, computed by the product as the flow computes it.

What the product computes here: the plans (core's planner on the example project, prod
recorded in a SQLite state), the build (core's ``preview_environment``: the job spec,
what is diffed and what is not, the counts of tables and views, the sizes it recorded),
the checks' titles (:mod:`sluice.bot.present.checks`, as ``pr_build._report`` calls
them), a failed build's message (core's ``spark_error``, ``job_failure`` and
``locate_failure``, then the service's redaction), and the comment with its facts and
sections (:class:`StickyComment` on the in-memory forge and a SQLite ledger). Only
Spark's answers are made up (:class:`FakeSpark`): each table diff's counts, to match what
Spark finds on the example data, and the sizes of the tables built.

The demo's change: ``jaffle.orders`` drops returned orders (breaking; ``jaffle.daily_revenue``
and the Python model ``jaffle.customer_segments`` read it), ``jaffle.customers`` gets
``last_name_upper`` (non-breaking).

A second, generated project (:func:`large_project`: 56 models in layers) gives the
comment of a PR that changes 40 of them.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sluice.bot.flow.ledger import Ledger
from sluice.bot.flow.sticky import StickyComment
from sluice.bot.forge.memory import MemoryForge
from sluice.bot.present import checks
from sluice.bot.present import comment as bot_comment
from sluice.bot.present.comment import CommentState
from sluice.bot.present.redact import Redactor
from sluice.core import workflow
from sluice.core.errors import ExecutionError
from sluice.core.model.definition import Project
from sluice.core.model.loader import load_project
from sluice.core.plan.plan import Plan
from sluice.core.preview import PreviewResult, preview_environment
from sluice.core.spark.failures import job_failure
from sluice.core.spark.results import check, parse_result, result_key, table_diff_result
from sluice.core.spark.steps.context import spark_error
from sluice.core.spark.submit import JobResult
from sluice.core.state import open_state
from sluice.core.state.rows import table_size
from sluice.core.tablediff.result import (
    ColumnStats,
    Samples,
    SchemaDiff,
    Sides,
    TableDiffResult,
)
from sluice.core.timeutil import DAY_MS, to_ms
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


# -- Spark, made up ------------------------------------------------------------------------


class AnalysisException(Exception):
    """Stands for PySpark's: the driver's ``spark_error`` reads its class name and text."""


class FakeSpark:
    """Spark's answers, made up; the rest of the build is the product's own code.

    A job's build steps record their intervals and a size for each table (what the
    driver's ``write`` events do), its unit tests pass unless named in ``failing``, its
    table diffs are ``diffs(name)``. With ``fail`` (a model and what Spark raised building
    it), the job fails instead, with the error core makes of that: the driver's
    ``spark_error`` and ``step_failed`` event, then ``job_failure``."""

    def __init__(
        self,
        url: str,
        diffs: Callable[[str], TableDiffResult],
        *,
        failing: tuple[str, ...] = (),
        fail: tuple[str, BaseException] | None = None,
        log_dir: Path | None = None,
    ) -> None:
        self.url, self.diffs, self.failing, self.fail = url, diffs, failing, fail
        self.log_dir = log_dir

    def run(self, spec: Mapping[str, Any]) -> JobResult:
        steps = list(spec["steps"])
        if self.fail is not None:
            model, exc = self.fail
            [step] = [s for s in steps if s.get("label") == f"build {model}"]
            event = {"event": "step_failed", "index": steps.index(step), "type": "build",
                     "label": step["label"], "model": model, "error": spark_error(exc),
                     "error_class": type(exc).__name__}  # fmt: skip
            if "source" in step:
                event["source"] = step["source"]
            logs = None if self.log_dir is None else self.log_dir / "logs" / "job.log"
            raise job_failure(str(spec["job_id"]), [event], exit_code=1, log_path=logs)
        results: dict[str, Any] = {}
        store = open_state(self.url)
        try:
            for step in steps:
                if step["type"] == "build":
                    intervals = [tuple(i) for i in step.get("intervals") or ()]
                    if intervals:
                        store.add_intervals(step["model"], step["version"], intervals)
                    rows = 1_000 + 37 * len(step["model"])
                    store.set_table_size(step["model"], step["version"],
                                         table_size(rows * 185, NOW, rows))  # fmt: skip
                elif step["type"] == "unit_test":
                    passed = step["name"] not in self.failing
                    results[step["id"]] = parse_result(
                        {"step": "unit_test", "name": step["name"], "passed": passed,
                         "diff": "" if passed else "- 3\n+ 2", "notes": step["notes"]}
                    )  # fmt: skip
                elif step["type"] == "table_diff":
                    results[step["id"]] = table_diff_result(self.diffs(step["name"]).to_json())
            _check(results, steps)
        finally:
            store.close()
        return JobResult(str(spec["job_id"]), results, 41.6, None)


def _check(results: dict[str, Any], steps: list[Any]) -> None:
    """Each result is its step's, as a runner checks (this double reports no build's, so
    not every step has one). The demo's diffs are canned, their tables and keys as the
    golden comments show them: they are checked as of their step's tables and keys."""
    index = {result_key(i, step): i for i, step in enumerate(steps)}
    for key, result in results.items():
        step, checked = steps[index[key]], result
        if result["step"] == "table_diff" and "name" in result:
            checked = {**result, "source_table": step["source"], "target_table": step["target"],
                       "keys": step["keys"]}  # fmt: skip
        check(checked, index[key], steps)


# -- the product's steps -------------------------------------------------------------------


def recent_days(project: Project) -> int | None:
    """``sluice.pr.backfill_days``: the recent days a PR builds (``pr_build`` reads it)."""
    return project.config.sluice.pr.backfill_days


def plan_pr(project: Project, url: str) -> Plan:
    """The PR's plan against prod, as the flow plans it (its incremental models limited
    to their most recent ``sluice.pr.backfill_days``)."""
    days = recent_days(project)
    start = NOW - days * DAY_MS if days is not None else None
    store = open_state(url)
    try:
        return workflow.plan_environment(
            project, store, ENV, start=start, end=NOW, execution_time=NOW, against="prod"
        )
    finally:
        store.close()


def build(project: Project, url: str, plan: Plan, spark: FakeSpark) -> PreviewResult:
    """The PR's build as the flow runs it (core's ``preview_environment``)."""
    store = open_state(url)
    try:
        return preview_environment(project, store, plan, spark, now=NOW)
    finally:
        store.close()


def plan_prod(project: Project, url: str) -> Plan:
    """What merging does: prod planned at the PR's head once the PR is built."""
    store = open_state(url)
    try:
        return workflow.plan_environment(project, store, "prod", end=NOW, execution_time=NOW)
    finally:
        store.close()


def failed_build(project: Project, url: str, plan: Plan, spark: FakeSpark, work: Path) -> str:
    """A failing build's message as the flow posts it: what ``preview_environment``
    raises, scrubbed as ``Deps.scrub`` does (the tree's paths relative, host paths and
    secrets replaced; ``work``: the service's work directory)."""
    try:
        build(project, url, plan, spark)
    except ExecutionError as exc:
        text = str(exc)
    else:  # pragma: no cover - the fake job always fails
        raise AssertionError("the build did not fail")
    tree = project.path
    text = text.replace(f"{tree}/", "").replace(str(tree), ".")
    return Redactor([], paths=[work])(text)


def conclusions(preview: PreviewResult, prod_plan: Plan) -> tuple[tuple[str, str], ...]:
    """The checks' lines of a finished build, as ``pr_build._report`` sets them."""
    title, body = bot_comment.tests_summary(preview.tests)
    details = bot_comment.details_markdown(preview, prod_plan)
    plan = preview.plan
    reads = prod_plan.scan.reads() if prod_plan.scan is not None and prod_plan.scan.bytes else ""
    writes = prod_plan.output.writes() if prod_plan.output is not None else ""
    reads = " and ".join(w for w in (reads, writes) if w)
    made = (
        checks.tests_result(title, body, preview.tests_passed),
        checks.environment_result(ENV, plan.changes_models, preview.built, preview.views, details),
        checks.merge_result(checks.backfills_of(prod_plan), prod_plan.has_changes, reads,
                            prod_plan.environment),
    )  # fmt: skip
    return tuple((c.name, f"{c.conclusion or c.status.replace('_', ' ')}: {c.title}") for c in made)


def failed_conclusions(text: str) -> tuple[tuple[str, str], ...]:
    """The checks' lines of a build that failed, as ``pr_build._failed`` sets them."""
    made = [checks.build_failed(name, checks.BUILD_FAILED, text) for name in checks.PR_CHECKS]
    return tuple((c.name, f"{c.conclusion or c.status.replace('_', ' ')}: {c.title}") for c in made)


# -- the demo ------------------------------------------------------------------------------


def demo_project(root: Path, *, where: str = "o.status <> 'returned'") -> tuple[Project, str]:
    """The demo PR's project (``where``: its new filter of ``jaffle.orders``) and its
    state's URL, with prod recorded as the example project."""
    prod = root / "prod"
    shutil.copytree(REPO / "examples" / "jaffle_shop", prod,
                    ignore=shutil.ignore_patterns(".sluice"))  # fmt: skip
    url = f"sqlite:///{root / 'state.db'}"
    record_prod(prod, url, NOW)
    pr = root / "pr"
    shutil.copytree(prod, pr)
    _edit(pr / "models" / "orders.sql", r"(\n\s*ON o\.order_id = p\.order_id)\n?",
          f"\\1\nWHERE {where}\n")  # fmt: skip
    _edit(pr / "models" / "customers.sql", r"(\n(\s*)c\.last_name,\n)",
          "\\1\\2UPPER(c.last_name) AS last_name_upper,\n")  # fmt: skip
    return load_project(pr, use_cache=False), url


def _diff(name: str, key: str, rows: tuple[int, int], differing: int, columns: dict[str, int],
          *, schema: SchemaDiff | None = None, samples: Samples | None = None,
          target_only: int = 0) -> TableDiffResult:  # fmt: skip
    source, target = rows
    lost = max(source - target + target_only, 0)
    joined = source - lost
    schema_name = name.split(".", maxsplit=1)[0]
    return TableDiffResult(
        name=name, source="prod", target=ENV, source_table=f"sluice__{schema_name}.{name}__a",
        target_table=f"sluice__{schema_name}.{name}__b", keys=(key,), decimals=3, tolerance=None,
        where=None, source_rows=source, target_rows=target, joined=joined, source_only=lost,
        target_only=target_only, differing_rows=differing, null_keys=Sides(0, 0),
        duplicate_keys=Sides(0, 0), duplicate_rows=Sides(0, 0), schema=schema or SchemaDiff(),
        columns={c: ColumnStats(joined - n, n) for c, n in columns.items()},
        samples=samples or Samples(), identical=False,
    )  # fmt: skip


def demo_diff(name: str) -> TableDiffResult:
    """What Spark finds comparing the demo's ``name`` with prod on the example data."""
    if name == "jaffle.orders":
        return _diff(
            "jaffle.orders", "order_id", (99, 95), 0, {"amount": 0, "status": 0},
            samples=Samples(source_only=tuple(
                {"order_id": i, "status": "returned", "amount": 23.0} for i in (2, 19, 54, 77)
            )),
        )  # fmt: skip
    if name == "jaffle.customers":
        return _diff(
            "jaffle.customers", "customer_id", (100, 100), 4,
            {"customer_lifetime_value": 4, "number_of_orders": 3},
            schema=SchemaDiff(added=(("last_name_upper", "string"),)),
            samples=Samples(differing=(
                {"customer_id": 3, "number_of_orders": {"source": 3, "target": 2}},)),
        )  # fmt: skip
    if name == "jaffle.daily_revenue":
        return _diff("jaffle.daily_revenue", "ds", (119, 118), 3, {"revenue": 3})
    assert name == "jaffle.customer_segments", name
    return _diff("jaffle.customer_segments", "customer_id", (62, 60), 2,
                 {"number_of_orders": 2, "lifetime_value": 2, "segment": 0})  # fmt: skip


# Spark's error when a row's value does not cast (found only when the query runs): Spark
# 4's text, with the SQL state, the part of Sluice's generated SQL it was running and the
# JVM stack that follow Spark's message.
SPARK_CAST_ERROR = (
    "[CAST_INVALID_INPUT] The value 'returned' of the type \"STRING\" cannot be cast to "
    '"INT" because it is malformed. Correct the value as per the syntax, or change its '
    "target type. Use `try_cast` to tolerate malformed input and return NULL instead. "
    "SQLSTATE: 22018\n"
    "== SQL (line 1, position 913) ==\n"
    "CAST(o.status AS INT)\n"
    "^^^^^^^^^^^^^^^^^^^^^\n"
    "\nJVM stacktrace:\norg.apache.spark.SparkNumberFormatException: [CAST_INVALID_INPUT]\n"
    "\tat org.apache.spark.sql.errors.QueryExecutionErrors$.invalidInputInCastToNumberError("
    "QueryExecutionErrors.scala:147)\n"
    "\tat org.apache.spark.sql.catalyst.expressions.Cast.castToInt(Cast.scala:880)\n"
)


class NumberFormatException(Exception):
    """Stands for PySpark's (the driver's ``spark_error`` reads its class name and text)."""


class Demo:
    """The demo PR built three ways, each on a state of its own: as it is (``plan``,
    ``preview``, ``prod_plan``), with a unit test failing (``failing``), and with a filter
    that fails its build on Spark (``failed``: the text the flow posts, and
    ``failed_plan``)."""

    def __init__(self, root: Path) -> None:
        project, url = demo_project(root / "ok")
        self.recent_days = recent_days(project)
        self.plan = plan_pr(project, url)
        self.preview = build(project, url, self.plan, FakeSpark(url, demo_diff))
        self.prod_plan = plan_prod(project, url)
        project, url = demo_project(root / "tests")
        spark = FakeSpark(url, demo_diff, failing=("test_customers_aggregates_orders",))
        self.failing = build(project, url, plan_pr(project, url), spark)
        project, url = demo_project(root / "cast", where="CAST(o.status AS INT) > 0")
        self.failed_plan = plan_pr(project, url)
        work = root / "cast" / "service"
        spark = FakeSpark(url, demo_diff, log_dir=work,
                          fail=("jaffle.orders", NumberFormatException(SPARK_CAST_ERROR)))  # fmt: skip
        self.failed = failed_build(project, url, self.failed_plan, spark, work)


def demo_plans(root: Path) -> tuple[Plan, Plan]:
    """(the PR's plan against prod, prod planned at the PR's head once it is built)."""
    demo = Demo(root)
    return demo.plan, demo.prod_plan


# -- a PR of many models ---------------------------------------------------------------------

LONG_NAME = "shop.customer_lifetime_value_by_region_and_marketing_channel_daily"


def _model(root: Path, name: str, query: str) -> None:
    (root / "models" / f"{name.split('.')[1]}.sql").write_text(
        f"MODEL (name {name}, kind FULL, grain id);\n{query}\n"
    )


def large_project(root: Path) -> tuple[Project, str]:
    """A generated project of 58 models in layers (``raw_1..8`` <- ``stg_1..16`` <-
    ``mart_1..24`` <- ``report_1..8`` <- ``dash_1..2``, and one model with a long name
    reading ``mart_3``), prod recorded, then a PR that changes 40 of them: ``stg_1..4``
    filter rows (breaking), ``stg_5..16``, ``mart_5..16``, ``mart_21..24`` and ``raw_1..3``
    gain a column (non-breaking), ``report_3`` drops one (breaking, destructive),
    ``report_8`` is deleted and ``mart_25`` added. The marts, reports, dashboards and the
    long-named model that read ``stg_1..4`` are reached downstream, up to three deep."""

    def write(at: Path, pr: bool) -> None:
        (at / "models").mkdir(parents=True)
        (at / "config.yaml").write_text(
            "model_defaults:\n  dialect: spark\n  start: '2018-01-01'\n"
        )
        for i in range(1, 9):
            extra = ", 1 AS batch" if pr and i <= 3 else ""
            _model(at, f"shop.raw_{i}", f"SELECT {i} AS id, {i * 10} AS amount{extra}")
        for i in range(1, 17):
            where = " WHERE amount > 0" if pr and i <= 4 else ""
            extra = ", amount * 2 AS doubled" if pr and i > 4 else ""
            _model(at, f"shop.stg_{i}",
                   f"SELECT id, amount{extra} FROM shop.raw_{(i - 1) % 8 + 1}{where}")  # fmt: skip
        for i in range(1, 25):
            extra = ", COUNT(*) AS n" if pr and (5 <= i <= 16 or i >= 21) else ""
            _model(at, f"shop.mart_{i}", f"SELECT id, SUM(amount) AS total{extra} "
                   f"FROM shop.stg_{(i - 1) % 16 + 1} GROUP BY id")  # fmt: skip
        if pr:
            _model(
                at, "shop.mart_25", "SELECT id, SUM(amount) AS total FROM shop.stg_5 GROUP BY id"
            )
        for i in range(1, 9):
            if pr and i == 8:
                continue
            both = "" if pr and i == 3 else ", b.total AS total_b"
            _model(at, f"shop.report_{i}", f"SELECT a.id, a.total{both} FROM shop.mart_{i} AS a "
                   f"JOIN shop.mart_{i + 16} AS b ON a.id = b.id")  # fmt: skip
        for i in (1, 2):
            _model(at, f"shop.dash_{i}", f"SELECT id, total FROM shop.report_{i}")
        _model(at, LONG_NAME, "SELECT id, total FROM shop.mart_3")

    prod = root / "prod"
    write(prod, pr=False)
    url = f"sqlite:///{root / 'state.db'}"
    record_prod(prod, url, NOW)
    pr = root / "pr"
    write(pr, pr=True)
    return load_project(pr, use_cache=False), url


def large_diff(name: str) -> TableDiffResult:
    """Spark's answer for a model of :func:`large_project`: tables of billions of rows
    (long numbers), a different change for each model."""
    number = int(re.sub(r"\D", "", name) or 0)
    source = 12_345_678_901 - number * 1_234_567
    target = source - number * 97_531
    schema = SchemaDiff(removed=(("total_b", "bigint"),)) if name == "shop.report_3" else None
    return _diff(name, "id", (source, target), number * 1_003, {"total": number * 1_003},
                 schema=schema)  # fmt: skip


class Large:
    """The PR of :func:`large_project`, planned and built (Spark's answers
    :func:`large_diff`)."""

    def __init__(self, root: Path) -> None:
        project, url = large_project(root)
        self.recent_days = recent_days(project)
        self.plan = plan_pr(project, url)
        self.preview = build(project, url, self.plan, FakeSpark(url, large_diff))
        self.prod_plan = plan_prod(project, url)


# -- the comment on the forge ----------------------------------------------------------------


class Story:
    """One PR's comment on the in-memory forge, moved through its events."""

    def __init__(
        self,
        root: Path,
        plan: Plan,
        prod_plan: Plan,
        project: str = "jaffle",
        recent_days: int | None = None,
    ) -> None:
        self.project, self.recent_days = project, recent_days
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
        state = dataclasses.replace(state, recent_days=self.recent_days)
        body = bot_comment.comment(state, limit=self.forge.comment_limit,
                                   marker=self.sticky.marker)  # fmt: skip
        sections = [bot_comment.facts_section(state),
                    *(bot_comment.reset_sections() if reset else [])]  # fmt: skip
        self.sticky.publish(self.forge, 1, body=body, sections=sections)

    def built(self, preview: PreviewResult, prod_plan: Plan | None = None) -> None:
        """What ``pr_build._report`` posts."""
        prod = prod_plan or self.prod_plan
        failed = not preview.tests_passed or bool(preview.diff_errors)
        self.body(CommentState(
            self.project, ENV, SHA, "failure" if failed else "success", "built", preview=preview,
            checks=conclusions(preview, prod), footer=FOOTER, prod_plan=prod,
        ))  # fmt: skip

    def failed(self, text: str, plan: Plan) -> None:
        """What ``pr_build._failed`` posts when the build raised."""
        title = checks.BUILD_FAILED
        self.body(CommentState(self.project, ENV, SHA, "failure", title, error=(title, text),
                               plan=plan, checks=failed_conclusions(text), footer=FOOTER))  # fmt: skip

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


def _queued(story: Story) -> None:
    story.body(CommentState(story.project, ENV, SHA, "queued", "queued",
                            progress="Fetching the project", footer=FOOTER), reset=True)  # fmt: skip


def _opened(story: Story, demo: Demo) -> None:
    _queued(story)
    story.built(demo.preview)


def _waiting(story: Story, demo: Demo) -> None:
    _opened(story, demo)
    story.gate(False, WAITING, missing=1)


def _approved(story: Story, demo: Demo) -> None:
    _waiting(story, demo)
    story.gate(True, APPROVED, approved=("bob",))


def _promoted(story: Story, demo: Demo) -> None:
    _approved(story, demo)
    story.promoted()


def _closed(story: Story, demo: Demo) -> None:
    _waiting(story, demo)
    story.closed()


def _failure(story: Story, demo: Demo) -> None:
    story.built(demo.failing)
    story.gate(False, WAITING, missing=1)


def _build_failed(story: Story, demo: Demo) -> None:
    _queued(story)
    story.failed(demo.failed, demo.failed_plan)


def _building(story: Story, demo: Demo) -> None:
    _waiting(story, demo)  # a push after the first build: the new build is running
    progress = bot_comment.progress("build", 2, 3, "build jaffle.orders")
    story.body(CommentState(story.project, ENV, SHA, "running", "building", plan=story.plan,
                            progress=progress, footer=FOOTER), reset=True)  # fmt: skip


STATES: dict[str, Callable[[Story, Demo], None]] = {
    "opened": _opened,
    "waiting": _waiting,
    "approved": _approved,
    "promoted": _promoted,
    "closed": _closed,
    "failure": _failure,
    "build_failed": _build_failed,
    "building": _building,
}
"""State name -> the events that lead there (tests/fixtures/comments/<name>.md)."""


def large_story(story: Story, large: Large) -> None:
    """The large PR's comment once built, waiting for approval
    (tests/fixtures/comments/large.md)."""
    _queued(story)
    story.built(large.preview, large.prod_plan)
    story.gate(False, WAITING, missing=1)
