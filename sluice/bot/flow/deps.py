"""What the flow's handlers work with: one frozen :class:`Deps`, made by an entry point (the
service, the Action, ``sluice pr``) or a test with :func:`make_deps`.

Each handler (:mod:`sluice.bot.flow.dispatch` picks one per event type) takes the ``Deps``
and uses only the parts it needs; nothing in here decides anything.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sluice.bot.events.neutral import Event
from sluice.bot.flow.checkout import OWN_SPARK, Checkout, current_spark
from sluice.bot.flow.ledger import Ledger
from sluice.bot.flow.sticky import StickyComment
from sluice.bot.forge.base import Forge
from sluice.bot.forge.chat import Channels
from sluice.bot.present.metrics import Registry
from sluice.bot.present.redact import Redactor
from sluice.core import logs, sandbox
from sluice.core.config import SparkSettings
from sluice.core.errors import SluiceError
from sluice.core.model.definition import Project
from sluice.core.spark.connect import make_runner
from sluice.core.spark.submit import JOB_TIMEOUT_S, OnEvent, Runner

RunnerFactory = Callable[[Project, Path, OnEvent], Runner]
"""(project, its tree, progress callback) -> the Spark runner of one job."""


def _now_ms() -> int:
    return int(time.time() * 1000)


def _none_running() -> frozenset[str]:
    return frozenset()


@dataclass(frozen=True)
class Deps:
    """The flow's dependencies: forges, records, the sticky comment, checkouts, Spark,
    the state database, the clock and the scrubber of outgoing text."""

    forge_for: Callable[[Event], Forge]
    ledger: Ledger
    sticky: StickyComment
    checkout: Checkout
    spark_runner: RunnerFactory
    state_url: str
    """The shared database: the ledger's and the queue's, and the state owner's engine
    state; a job opens its repository's with :attr:`~sluice.bot.flow.job.Job.state_url`."""
    redactor: Redactor
    clock: Callable[[], int] = _now_ms
    project_path: str = "."
    prod_branch: str = "main"
    """The branch whose config.yaml holds the trusted settings (``SLUICE_PROD_BRANCH``)."""
    spark: SparkSettings = field(default_factory=SparkSettings)
    """Where and how Spark runs (``SLUICE_SPARK_*``): never taken from a repository."""
    job_timeout: float | None = JOB_TIMEOUT_S
    """Seconds one Spark job may run (``SLUICE_JOB_TIMEOUT_SECONDS``); None: no limit."""
    project_python: str = "prod"
    """Which project Python runs: ``off``, ``prod`` or ``on`` (``SLUICE_PROJECT_PYTHON``)."""
    run_report_to: int | None = None
    """The issue or pull request told of a scheduled run that failed (``SLUICE_RUN_REPORT_TO``)."""
    workdir_keep_days: float = 7.0
    """Days a checkout or job log is kept after its last use (``SLUICE_WORKDIR_KEEP_DAYS``;
    0: kept forever); the janitor prunes them."""
    log_max_bytes: int = logs.MAX_BYTES
    """A log file's size past which the janitor rotates it (``SLUICE_LOG_MAX_BYTES``)."""
    log_backups: int = logs.BACKUPS
    """Rotated copies of a log file kept (``SLUICE_LOG_BACKUPS``)."""
    chat: Channels | None = None
    """Where events are told in chat (``SLUICE_NOTIFY``); None: nowhere."""
    notify_run_late_hours: float = 0.0
    """Hours without a successful scheduled run that make it late
    (``SLUICE_NOTIFY_RUN_LATE_HOURS``; 0: never told)."""
    notify_approval_wait_hours: float = 0.0
    """Hours a PR's plan waits for approval before it is told
    (``SLUICE_NOTIFY_APPROVAL_WAIT_HOURS``; 0: never told)."""
    metrics: Registry | None = None
    """The service's metrics (notifications sent and failed), when it has them."""
    isolate: bool = False
    """Each repository in a namespace of its own (``SLUICE_ISOLATE_REPOSITORIES``, issue
    46: :mod:`sluice.bot.flow.tenancy`); False: one repository, the state's owner."""
    running_keys: Callable[[], frozenset[str]] = _none_running
    """The queue keys of the jobs running now, on any replica (the janitor leaves alone the
    environments they may be building)."""
    github_app: int | None = None
    """The GitHub App the service runs as (``SLUICE_GITHUB_APP_ID``, when a number and no
    token is set): a button is taken only on a check run that App made
    (:mod:`sluice.bot.flow.own_checks`); None: a token, or the Action (whose runs are made
    by GitHub Actions' App, as a workflow's are)."""

    @property
    def config_path(self) -> str:
        """The project's config.yaml, relative to the repository root."""
        path = self.project_path.strip("/")
        return "config.yaml" if path in ("", ".") else f"{path}/config.yaml"

    def scrub(self, text: str, tree: Path | None = None) -> str:
        """``text`` fit to leave the service: paths in ``tree`` relative, secrets (in any
        printed encoding) and host paths replaced (:mod:`sluice.bot.present.redact`)."""
        if tree is not None:
            text = text.replace(f"{tree}/", "").replace(str(tree), ".")
        return self.redactor(text)

    def close(self) -> None:
        self.ledger.close()
        if self.chat is not None:
            self.chat.sender.close()


def make_deps(
    *,
    forge_for: Callable[[Event], Forge],
    workdir: Path,
    state_url: str,
    project_path: str = ".",
    clock: Callable[[], int] = _now_ms,
    runner_for: RunnerFactory | None = None,
    secrets: tuple[str, ...] = (),
    prod_branch: str = "main",
    spark: SparkSettings | None = None,
    job_timeout: float | None = JOB_TIMEOUT_S,
    project_python: str = "prod",
    run_report_to: int | None = None,
    workdir_keep_days: float = 7.0,
    log_max_bytes: int = logs.MAX_BYTES,
    log_backups: int = logs.BACKUPS,
    chat: Channels | None = None,
    notify_run_late_hours: float = 0.0,
    notify_approval_wait_hours: float = 0.0,
    metrics: Registry | None = None,
    isolate: bool = False,
    running_keys: Callable[[], frozenset[str]] = _none_running,
    github_app: int | None = None,
    accept_unconfined_roots: bool = False,
) -> Deps:
    """The flow's :class:`Deps` from the service's settings (opens the ledger).

    ``runner_for`` defaults to the runner the trusted Spark settings' ``mode`` names
    (spark-submit, or a warm Spark Connect server), with the embedded metastore and
    warehouse under the job's repository's Spark root (``workdir/spark``, or with
    ``isolate`` its own: :func:`~sluice.bot.flow.checkout.job_spark`) and job logs under
    ``workdir/logs``. With ``isolate``, a job of a root other than the owner's is refused
    unless the sandbox in effect is bubblewrap (the service refuses to start so anyway:
    ServiceSettings.unconfined_roots), or ``accept_unconfined_roots``
    (``SLUICE_ISOLATE_ACCEPT_SHARED_SPARK``).
    """
    ledger = Ledger(state_url)

    def submit(project: Project, tree: Path, on_event: OnEvent) -> Runner:
        root = current_spark()
        if root is None and isolate:  # fail closed: never another repository's root
            raise SluiceError("a Spark job of no repository's Spark root (a Sluice bug)")
        if isolate and root not in (None, OWN_SPARK) and not accept_unconfined_roots:
            found = sandbox.isolation()
            if found != "bwrap":
                raise SluiceError(
                    f"a Spark job of {root} is refused: the sandbox in effect is {found}, "
                    "not bubblewrap, so its driver would see every repository's Spark root",
                    hint="install bubblewrap and allow user namespaces (SLUICE_SANDBOX=auto), "
                    "run a service per repository, or set "
                    "SLUICE_ISOLATE_ACCEPT_SHARED_SPARK=true",
                )
        paths = Checkout(workdir).spark_at(root or OWN_SPARK)
        # The project was loaded with the trusted settings: its Spark settings are the
        # service's plus the prod branch's tuning (see trust.Settings.spark).
        return make_runner(
            project.config.sluice.spark, paths, on_event=on_event, timeout=job_timeout
        )

    return Deps(
        forge_for=forge_for,
        ledger=ledger,
        sticky=StickyComment(ledger, project_path),
        checkout=Checkout(workdir),
        spark_runner=runner_for or submit,
        state_url=state_url,
        redactor=Redactor(secrets, paths=[workdir]),
        clock=clock,
        project_path=project_path,
        prod_branch=prod_branch,
        spark=spark or SparkSettings(),
        job_timeout=job_timeout,
        project_python=project_python,
        run_report_to=run_report_to,
        workdir_keep_days=workdir_keep_days,
        log_max_bytes=log_max_bytes,
        log_backups=log_backups,
        chat=chat,
        notify_run_late_hours=notify_run_late_hours,
        notify_approval_wait_hours=notify_approval_wait_hours,
        metrics=metrics,
        isolate=isolate,
        running_keys=running_keys,
        github_app=github_app,
    )
