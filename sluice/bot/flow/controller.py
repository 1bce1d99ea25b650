"""What to do for each forge event: the PR flow, independent of the forge.

The controller is handed neutral events (:mod:`sluice.bot.events.neutral`) by the queue's worker
and talks to the forge only through :class:`sluice.bot.forge.base.Forge`. Spark work goes
through core (one spark-submit per event); the service process never starts a JVM.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sluice.bot.events.neutral import (
    CheckRunEvent,
    CommentEvent,
    Event,
    JanitorEvent,
    PullRequestEvent,
    ReviewEvent,
    TagEvent,
)
from sluice.bot.flow import approval, promotion, run_command, trust
from sluice.bot.flow.ledger import Ledger
from sluice.bot.flow.reviewed_plan import review_of
from sluice.bot.forge.base import Check, Forge, PullRequest, UnusableTree
from sluice.bot.present import comment
from sluice.bot.present.comment import CommentState
from sluice.bot.present.redact import Redactor
from sluice.core import markdown as md
from sluice.core.config import SparkSettings
from sluice.core.errors import ConfigError, DriverLost, SluiceError
from sluice.core.model.definition import Project
from sluice.core.model.loader import load_project
from sluice.core.preview import PreviewResult, preview_environment
from sluice.core.snapshot.naming import PROD, pr_environment
from sluice.core.spark.session import SparkPaths
from sluice.core.spark.submit import JOB_TIMEOUT_S, OnEvent, Runner, SubmitRunner
from sluice.core.state import StateStore, open_state
from sluice.core.tablediff.result import DiffOptions
from sluice.core.timeutil import DAY_MS
from sluice.core.workflow import plan_environment

log = logging.getLogger(__name__)

TESTS, ENVIRONMENT, PROD_PLAN = "sluice/tests", "sluice/pr-environment", "sluice/prod-plan"
PR_CHECKS = (TESTS, ENVIRONMENT, PROD_PLAN)
_PREVIEW_ACTIONS = {"opened", "synchronize", "reopened", "ready_for_review"}
PROGRESS_EVERY_S = 10.0


@dataclass(frozen=True)
class Context:
    """What the controller works with, injected by the service, the Action or a test."""

    forge_for: Callable[[Event], Forge]
    workdir: Path
    state_url: str
    project_path: str = "."
    clock: Callable[[], int] = lambda: int(time.time() * 1000)
    runner_for: Callable[[Project, Path, OnEvent], Runner] | None = None
    secrets: tuple[str, ...] = ()
    prod_branch: str = "main"
    """The branch whose config.yaml holds the trusted settings (``SLUICE_PROD_BRANCH``)."""
    spark: SparkSettings = field(default_factory=SparkSettings)
    """Where and how Spark runs (``SLUICE_SPARK_*``): never taken from a repository."""
    job_timeout: float | None = JOB_TIMEOUT_S
    """Seconds one Spark job may run (``SLUICE_JOB_TIMEOUT_SECONDS``); None: no limit."""


class Controller:
    """Turns events into engine calls and engine results into comments and checks."""

    def __init__(self, context: Context) -> None:
        self.ctx = context
        self._ledger: Ledger | None = None
        self._redact = Redactor(context.secrets, paths=[context.workdir])

    @property
    def ledger(self) -> Ledger:
        """The bot's records (opened on first use, so building a controller is free)."""
        if self._ledger is None:
            self._ledger = Ledger(self.ctx.state_url)
        return self._ledger

    def close(self) -> None:
        if self._ledger is not None:
            self._ledger.close()
            self._ledger = None

    def handle(self, event: Event) -> None:
        """Do what ``event`` asks. Forge and engine errors are reported on the PR, not raised,
        unless reporting itself fails (then the worker retries the job).

        An event that changes state runs once by its content (``event.content_key()``, see
        :mod:`sluice.bot.events.neutral`): one whose key the ledger has recorded for the repository
        (a signed delivery replayed under a new delivery id) is skipped with an INFO line,
        and nothing is posted. The key is recorded here once the event was handled, not
        before: a job cut short by a crash and run again still runs. A PR event records
        the PR's head (what a writer's ``/sluice plan`` on a fork PR builds); one older
        than the head recorded (a late or replayed delivery) builds nothing.
        """
        forge = self.ctx.forge_for(event)
        repo = self.repo_key(forge)
        owner = self.ledger.belongs_to(f"{repo}#{self.ctx.project_path}", self.ctx.clock())
        if owner != f"{repo}#{self.ctx.project_path}":
            self._refuse_repository(forge, event, owner)
            return
        self.ledger.seen(repo, event.installation_id, self.ctx.clock())
        key = event.content_key()
        if key is not None:
            before = self.ledger.handled(repo, key)
            if before is not None:
                outcome, at = before
                when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at / 1000))
                log.info(
                    "%s: %s event skipped: the same event (%s) was handled at %s (%s); "
                    "a delivery sent again under a new delivery id does not run again",
                    repo,
                    event.kind,
                    key,
                    when,
                    outcome,
                )
                return
        if (
            isinstance(event, PullRequestEvent)
            and event.action in _PREVIEW_ACTIONS
            and not self.ledger.record_pr_head(
                repo, event.number, event.head_sha, event.updated_ms, self.ctx.clock()
            )
        ):
            log.info(
                "%s#%s: %s of %s skipped: a newer event of the PR was handled (a late "
                "or replayed delivery)",
                repo,
                event.number,
                event.action,
                event.head_sha[:12],
            )
            return
        if isinstance(event, PullRequestEvent):
            if event.action == "closed":
                if event.merged:
                    promotion.on_merge(self, forge, event)
                else:
                    promotion.cleanup(self, forge, event.number, "the PR was closed")
            elif event.action in _PREVIEW_ACTIONS:
                pr = _pull(event)
                if not pr.author:  # the payload did not say (GitLab: someone else pushed)
                    pr = dataclasses.replace(pr, author=forge.pull_request(pr.number).author)
                self.plan_and_gate(forge, pr)
        elif isinstance(event, ReviewEvent):
            if event.state == "APPROVED" and event.commit_sha:
                self.ledger.review_head(
                    repo, event.number, event.reviewer, event.commit_sha, self.ctx.clock()
                )
            approval.refresh(self, forge, forge.pull_request(event.number))
        elif isinstance(event, CheckRunEvent):
            self._check_run(forge, event)
        elif isinstance(event, CommentEvent):
            run_command.on_comment(self, forge, event)
        elif isinstance(event, TagEvent):
            promotion.on_tag(self, forge, event)
        elif isinstance(event, JanitorEvent):
            promotion.janitor(self, forge)
        if key is not None:
            self.ledger.record_handled(repo, key, event.kind, "done", self.ctx.clock())

    def _refuse_repository(self, forge: Forge, event: Event, owner: str) -> None:
        """One state database holds one repository's prod: refuse a second one (a shared
        prod would let either repository's merges replace the other's)."""
        log.error(
            "%s: %s event refused: this service's state database and warehouse "
            "belong to %s; run a separate service (SLUICE_DATABASE_URL, SLUICE_WORKDIR) "
            "for each repository",
            self.repo_key(forge),
            event.kind,
            owner,
        )
        number = event.number if isinstance(event, PullRequestEvent | CommentEvent) else None
        if number is None or (isinstance(event, PullRequestEvent) and event.action == "closed"):
            return
        self.publish(
            forge,
            number,
            body=(
                f"{comment.marker(self.ctx.project_path)}\n### ❌ Sluice refused this repository\n\n"
                "This Sluice service already keeps another repository's prod and environments "
                "in its state database and Spark warehouse, and one service keeps one "
                "repository's apart from nothing else: serving this one too would let the "
                "merges of either replace the other's prod. Nothing was built or changed. Ask "
                "the people who run Sluice for a service of this repository's own (its own "
                "`SLUICE_DATABASE_URL` and `SLUICE_WORKDIR`; `SLUICE_REPOSITORIES` naming it)."
            ),
        )

    def plan_and_gate(self, forge: Forge, pr: PullRequest) -> None:
        """Build ``pr``'s environment, then evaluate its gate on the new plan."""
        result = self.preview(forge, pr)
        if result is not None:
            try:
                approval.refresh(self, forge, pr)
            except SluiceError as exc:  # the build is done: do not redo it for the gate
                log.warning("%s#%s: gate not evaluated: %s", forge.repo, pr.number, exc)
                forge.set_check(
                    pr.head_sha,
                    Check(
                        approval.APPROVAL,
                        "completed",
                        "The gate could not be evaluated",
                        f"{self.scrub(str(exc))}\n\nRe-run this check to try again.",
                        conclusion="failure",
                    ),
                )
        elif not pr.draft and not pr.fork:
            forge.set_check(
                pr.head_sha,
                Check(
                    approval.APPROVAL,
                    "completed",
                    "No plan to approve",
                    "This commit could not be planned (see `sluice/pr-environment`), so there is "
                    "nothing to approve yet.",
                    conclusion="failure",
                ),
            )

    def _check_run(self, forge: Forge, event: CheckRunEvent) -> None:
        for number in event.numbers:
            pr = forge.pull_request(number)
            if not pr.open or pr.head_sha != event.head_sha:
                continue  # an older commit's check: its plan is not the one to act on
            if event.action == "rerequested" and event.check_name in (*PR_CHECKS, ""):
                self.plan_and_gate(forge, pr)
            elif event.action == "rerequested" and event.check_name == approval.APPROVAL:
                approval.refresh(self, forge, pr)
            elif event.action == "requested_action" and event.identifier == "approve":
                self.ledger.click(
                    self.repo_key(forge), number, event.requester, event.head_sha, self.ctx.clock()
                )
                approval.refresh(self, forge, pr)

    def give_up(self, event: Event, error: str) -> None:
        """The job failed for good: say so where the people it concerns will look."""
        forge = self.ctx.forge_for(event)
        text = self.scrub(error)
        if isinstance(event, CommentEvent):
            forge.reply(
                event.number,
                f"{md.mention(event.author)} Sluice could not run your command: "
                f"it failed on every attempt.\n\n{md.fence(text, 'text')}",
            )
            return
        promoted = event.merge_sha if isinstance(event, PullRequestEvent) else None
        if isinstance(event, TagEvent):
            promoted = event.sha
        if promoted:
            forge.set_check(
                promoted,
                Check(
                    promotion.DEPLOY,
                    "completed",
                    "The promotion job failed on every attempt",
                    f"{md.fence(text, 'text')}",
                    conclusion="failure",
                ),
            )
            promotion.abandon(self, forge, promoted, "The promotion job failed on every attempt")
        if not isinstance(event, PullRequestEvent) or event.action == "closed":
            return
        for name in PR_CHECKS:
            forge.set_check(
                event.head_sha,
                Check(
                    name, "completed", "Sluice gave up on this commit", text, conclusion="failure"
                ),
            )
        state = CommentState(
            None,
            pr_environment(event.number),
            event.head_sha,
            "failure",
            "the job failed after every retry",
            error=("Error", text),
            footer=self._footer(event.head_sha),
        )
        mark = comment.marker(self.ctx.project_path)
        self.publish(
            forge, event.number, body=comment.comment(state, limit=forge.comment_limit, marker=mark)
        )

    # --- the PR environment --------------------------------------------------------

    def preview(self, forge: Forge, pr: PullRequest) -> PreviewResult | None:
        """Build ``pr``'s environment, diff it, and report; None when nothing was built."""
        environment = pr_environment(pr.number)
        post = _Poster(self, forge, pr, self._footer(pr.head_sha))
        if pr.draft:
            post.comment(
                CommentState(
                    None,
                    environment,
                    pr.head_sha,
                    "neutral",
                    "draft",
                    progress="This PR is a draft: Sluice builds its environment once it is ready for review.",
                )
            )
            return None
        if pr.fork:
            post.comment(
                CommentState(
                    None,
                    environment,
                    pr.head_sha,
                    "neutral",
                    "fork PR not built",
                    progress="This PR comes from a fork, so Sluice does not run its code "
                    "until a user with write permission comments `/sluice plan`.",
                )
            )
            return None
        for name in PR_CHECKS:
            post.check(Check(name, "queued", "Queued", "Waiting for the Sluice worker."))
        post.comment(
            CommentState(
                None, environment, pr.head_sha, "queued", "queued", progress="Fetching the project"
            )
        )
        try:
            tree = self.tree(forge, pr.head_sha)
        except UnusableTree as exc:  # permanent: tell the PR now rather than retry
            self._failed(post, environment, "The repository's files were refused", str(exc))
            return None
        self.ledger.seen(self.repo_key(forge), None, self.ctx.clock(), sha=pr.head_sha)
        try:
            settings = self.settings(forge)
        except ConfigError as exc:
            self._failed(
                post, environment, "The prod branch's settings are invalid", self.scrub(str(exc))
            )
            return None
        try:
            project = self.load(tree, settings)
            own = trust.parse(_read(tree / self.config_path()), self.config_path())
        except SluiceError as exc:
            self._failed(post, environment, "The project does not load", self.scrub(str(exc), tree))
            return None
        self._settings_notice(forge, pr.number, settings, own)
        post.project = project.config.sluice.project  # one project per repository: pr_<n>
        post.recent_days = project.config.sluice.pr.backfill_days
        store = open_state(self.ctx.state_url)
        try:
            return self._build(post, project, store, environment, tree, settings, own)
        finally:
            store.close()

    def _build(
        self,
        post: _Poster,
        project: Project,
        store: StateStore,
        environment: str,
        tree: Path,
        trusted: trust.Settings,
        own: trust.Parsed,
    ) -> PreviewResult | None:
        settings = project.config.sluice.pr
        now = self.ctx.clock()
        start = (
            now - settings.backfill_days * DAY_MS if settings.backfill_days is not None else None
        )
        try:
            # Against prod: the plan says what the PR changes, also when its environment
            # already holds this commit (a re-run, a push that only edits other files).
            plan = plan_environment(
                project, store, environment, start=start, end=now, execution_time=now, against=PROD
            )
        except SluiceError as exc:
            self._failed(
                post, environment, "Sluice could not plan this PR", self.scrub(str(exc), tree)
            )
            return None
        for name in PR_CHECKS:
            post.check(Check(name, "in_progress", "Running", "Building the environment."))
        progress = _Progress(post, environment, plan)
        post.comment(progress.state("Starting Spark"))
        runner = self.runner(project, tree, progress.on_event)
        try:
            result = preview_environment(
                project,
                store,
                plan,
                runner,
                url=self.ctx.state_url,
                now=now,
                diff_cap=settings.diff_limit,
                diff_options=DiffOptions(decimals=settings.decimals, sample=settings.diff_sample),
            )
        except DriverLost:
            # Not this commit's fault: the worker runs the job again (and reports on the PR
            # only after its last attempt). The checks stay in progress meanwhile.
            raise
        except SluiceError as exc:
            self._failed(
                post,
                environment,
                "Building the environment failed",
                self.scrub(str(exc), tree),
                plan,
            )
            return None
        prod = plan_environment(project, store, PROD, end=now, execution_time=now)
        # Owners as prod has them (a PR cannot name its own owner), the settings change if any.
        extra = (trust.SETTINGS_ITEM, own.digest) if own.digest != trusted.digest else None
        review = review_of(result.plan, project, owners=prod_owners(store), extra=extra)
        self.ledger.record_plan(
            self.repo_key(post.forge), post.pr.number, post.pr.head_sha, review, now
        )
        self._report(post, environment, result, prod)
        return result

    def _report(self, post: _Poster, environment: str, result: PreviewResult, prod: Any) -> None:
        title, body = comment.tests_summary(result.tests)
        post.check(
            Check(
                TESTS,
                "completed",
                title,
                body,
                conclusion="success" if result.tests_passed else "failure",
            )
        )
        plan = result.plan
        if not plan.changes_models:
            env_title = "This PR changes no model"
        else:
            env_title = f"{environment}: {result.built} tables built, {result.views} views"
        post.check(
            Check(
                ENVIRONMENT,
                "completed",
                env_title,
                comment.details_markdown(result),
                conclusion="success",
            )
        )
        if prod.backfill:
            ranges = ", ".join(f"{b.name} ({len(b.intervals)} intervals)" for b in prod.backfill)
            count = len(prod.backfill)
            prod_title = f"Merging backfills {count} table{'s' if count > 1 else ''} in prod"
            prod_summary = f"Not every interval was built in this PR: merging computes {ranges}."
        elif prod.has_changes:
            prod_title = "Merging is a virtual update"
            prod_summary = (
                "Every version prod needs is built: merging swaps views, no data is written."
            )
        else:
            prod_title, prod_summary = (
                "Merging changes nothing in prod",
                "Prod already has this state.",
            )
        post.check(Check(PROD_PLAN, "completed", prod_title, prod_summary, conclusion="success"))
        failed = not result.tests_passed or bool(result.diff_errors)
        headline = "no model changed" if not plan.changes_models else f"`{environment}` is ready"
        if not result.tests_passed:
            headline += "; unit tests failed"
        post.comment(
            CommentState(
                post.project,
                environment,
                post.pr.head_sha,
                "failure" if failed else "success",
                headline,
                preview=result,
                checks=tuple((n, c) for n, c in post.conclusions.items()),
            )
        )

    def _failed(
        self, post: _Poster, environment: str, title: str, text: str, plan: Any = None
    ) -> None:
        for name in PR_CHECKS:
            post.check(
                Check(name, "completed", title, f"{md.fence(text, 'text')}", conclusion="failure")
            )
        post.comment(
            CommentState(
                post.project,
                environment,
                post.pr.head_sha,
                "failure",
                title,
                error=(title, text),
                plan=plan,
                checks=tuple(post.conclusions.items()),
            )
        )

    # --- helpers ---------------------------------------------------------------------

    def repo_key(self, forge: Forge) -> str:
        """The ledger's name for ``forge``'s repository."""
        return f"{forge.name}:{forge.repo}"

    def settings(self, forge: Forge) -> trust.Settings:
        """The trusted settings of ``forge``'s repository (see :mod:`sluice.bot.flow.trust`).

        Raises:
            ConfigError: the prod branch's settings are invalid.
        """
        return trust.settings_for(
            forge,
            self.ledger,
            self.repo_key(forge),
            branch=self.ctx.prod_branch,
            path=self.config_path(),
            now=self.ctx.clock(),
        )

    def load(self, tree: Path, settings: trust.Settings) -> Project:
        """The project in ``tree`` with the trusted ``sluice:`` settings, not its own.

        Never through the parse cache: a tree comes from a commit, and a commit can hold a
        forged ``.sluice/cache/models.json`` whose entries would skip every check.
        """
        return load_project(
            tree / self.ctx.project_path,
            use_cache=False,
            sluice=settings.for_project(self.ctx.spark),
        )

    def _settings_notice(
        self, forge: Forge, number: int, settings: trust.Settings, own: trust.Parsed
    ) -> None:
        """Tell the PR when its own ``sluice:`` settings, or newer ones on the prod branch,
        are not the ones its build used."""
        lines = []
        if own.digest != settings.digest:
            lines.append(
                f"This PR changes the `sluice:` settings in `{self.config_path()}`. Sluice "
                f"builds and gates it with the prod branch's settings ({settings.source}); "
                "the PR's settings take effect once it is approved and promoted."
            )
        if settings.note:
            lines.append(settings.note)
        ignored = settings.ignored_spark()
        if ignored:
            keys = ", ".join(f"`{k}`" for k in ignored)
            lines.append(
                f"Ignored in `sluice.spark` on {md.code(settings.branch)}: {keys}. Spark's master, "
                "deploy mode and any setting that could load code are the service's "
                "(`SLUICE_SPARK_MASTER`, `SLUICE_SPARK_CONF`); the prod branch may set "
                "tuning only."
            )
        text = "**Settings:** " + " ".join(lines) if lines else None
        self.publish(forge, number, section=("settings", text))

    def config_path(self) -> str:
        """The project's config.yaml, relative to the repository root."""
        path = self.ctx.project_path.strip("/")
        return "config.yaml" if path in ("", ".") else f"{path}/config.yaml"

    def target(self, pr: PullRequest, *, admit: bool = False) -> PullRequest:
        """``pr`` as work to do; ``admit``: a fork PR a writer asked to build."""
        return dataclasses.replace(pr, fork=False) if admit else pr

    def publish(
        self,
        forge: Forge,
        number: int,
        *,
        body: str | None = None,
        section: tuple[str, str | None] | None = None,
    ) -> None:
        """Update the PR's sticky comment: its main ``body`` and/or one extra section
        (None removes it); the other part is kept as it was."""
        repo = self.repo_key(forge)
        old, sections = self.ledger.comment(repo, number)
        body = body if body is not None else old
        if section is not None:
            name, text = section
            if text:
                sections[name] = text
            else:
                sections.pop(name, None)
        mark = comment.marker(self.ctx.project_path)
        if body is None:
            body = f"{mark}\n### Sluice\n"
        forge.upsert_comment(number, mark, comment.with_sections(body, sections))
        self.ledger.save_comment(repo, number, body, sections)

    def tree(self, forge: Forge, sha: str) -> Path:
        """The repository at ``sha``, fetched once and kept (commits do not change)."""
        if not re.fullmatch(r"[0-9a-fA-F]{7,64}", sha):
            raise SluiceError(f"'{sha}' is not a commit sha")
        tree = (self.ctx.workdir / "trees" / _safe(forge.repo) / sha).resolve()
        if tree.is_dir():
            return tree
        partial = tree.with_name(f"{sha}.partial-{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        forge.fetch_tree(sha, partial)
        partial.rename(tree)
        return tree

    def runner(self, project: Project, tree: Path, on_event: OnEvent) -> Runner:
        if self.ctx.runner_for is not None:
            return self.ctx.runner_for(project, tree, on_event)
        root = self.ctx.workdir.resolve()
        paths = SparkPaths(root=root / "spark", logs=root / "logs")
        # The project was loaded with the trusted settings: its Spark settings are the
        # service's plus the prod branch's tuning (see trust.Settings.spark).
        return SubmitRunner(
            project.config.sluice.spark, paths, on_event=on_event, timeout=self.ctx.job_timeout
        )

    def scrub(self, text: str, tree: Path | None = None) -> str:
        """``text`` fit to leave the service: paths in ``tree`` relative, secrets (in any
        printed encoding) and host paths replaced (:mod:`sluice.bot.present.redact`)."""
        if tree is not None:
            text = text.replace(f"{tree}/", "").replace(str(tree), ".")
        return self._redact(text)

    def _footer(self, sha: str) -> str:
        stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(self.ctx.clock() / 1000))
        return f"Sluice · commit {sha[:7]} · updated {stamp}{self._limits()}"

    def _limits(self) -> str:
        """The limits a PR's Spark job runs under, as the footer says them."""
        parts = []
        if self.ctx.job_timeout is not None:
            parts.append(f"{_duration(self.ctx.job_timeout)} per Spark job")
        memory = self.ctx.spark.conf.get("spark.driver.memory", "1g")
        parts.append(f"driver memory {memory}")
        return " · limits: " + ", ".join(parts)


def _duration(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{int(seconds // 3600)} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{int(seconds // 60)} min"
    return f"{seconds:g} s"


def _read(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.is_file() else None


def prod_owners(store: StateStore) -> dict[str, str | None]:
    """Model -> owner as prod has it: the owners a PR's own headers cannot change."""
    record = store.get_environment(PROD)
    if record is None:
        return {}
    stored = store.get_snapshots(ref.id for ref in record.snapshots).values()
    return {s.name: (s.payload.get("model") or {}).get("owner") for s in stored}


def _safe(repo: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", repo)


def _pull(event: PullRequestEvent) -> PullRequest:
    return PullRequest(
        number=event.number,
        head_sha=event.head_sha,
        head_ref=event.head_ref,
        base_ref=event.base_ref,
        base_sha=event.base_sha,
        author=event.author,
        draft=event.draft,
        fork=event.fork,
        open=True,
        merged=False,
        title=event.title,
    )


class _Poster:
    """Posts to one PR, remembering each check's last state for the comment's table."""

    def __init__(self, ctl: Controller, forge: Forge, pr: PullRequest, footer: str) -> None:
        self.ctl, self.forge, self.pr, self.footer = ctl, forge, pr, footer
        self.marker = comment.marker(ctl.ctx.project_path)
        self.project: str | None = None
        self.recent_days: int | None = None
        self.conclusions: dict[str, str] = {}

    def check(self, check: Check) -> None:
        self.forge.set_check(self.pr.head_sha, check)
        label = check.conclusion or check.status.replace("_", " ")
        self.conclusions[check.name] = f"{label}: {check.title}"

    def comment(self, state: CommentState) -> None:
        state = _with(state, project=self.project, footer=self.footer, recent_days=self.recent_days)
        body = comment.comment(state, limit=self.forge.comment_limit, marker=self.marker)
        self.ctl.publish(self.forge, self.pr.number, body=body)


def _with(state: CommentState, **changes: Any) -> CommentState:
    return dataclasses.replace(state, **changes)


class _Progress:
    """Turns the Spark job's events into "building 3 of 7 models" on the comment."""

    def __init__(self, post: _Poster, environment: str, plan: Any) -> None:
        self.post, self.environment, self.plan = post, environment, plan
        self.builds = 0
        self.total = len(plan.backfill) + len(plan.create_views)
        self.last = 0.0

    def state(self, text: str) -> CommentState:
        return CommentState(
            self.post.project,
            self.environment,
            self.post.pr.head_sha,
            "running",
            "building",
            progress=text,
            plan=self.plan,
        )

    def on_event(self, event: dict[str, Any]) -> None:
        if event.get("event") != "step_start":
            return
        kind = event.get("type")
        if kind == "build":
            self.builds += 1
            text = f"Building {self.builds} of {max(self.total, self.builds)} models ({event.get('label')})"
        elif kind == "table_diff":
            text = f"Comparing with prod ({event.get('label')})"
        elif kind == "unit_test":
            text = "Running unit tests"
        else:
            return
        now = time.monotonic()
        if now - self.last < PROGRESS_EVERY_S:
            return
        self.last = now
        try:
            self.post.comment(self.state(text))
        except SluiceError as exc:  # progress is best effort; the result is posted anyway
            log.warning("could not post progress: %s", exc)
