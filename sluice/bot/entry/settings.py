"""The service's settings, from the environment (``SLUICE_*``); read when the app is made.

Secrets are :class:`pydantic.SecretStr`, so printing the settings, logging them, or an
error page never shows them.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from sluice.bot.forge.archive import TREE_LIMITS, TreeLimits
from sluice.bot.forge.chat import KINDS as CHAT_KINDS
from sluice.bot.forge.chat import Channels, Route, Sender, Target
from sluice.bot.present.notify_text import EVENTS as NOTIFY_EVENTS
from sluice.bot.queue.fairness import Caps
from sluice.core import logs, sandbox
from sluice.core.config import SparkSettings
from sluice.core.errors import ConfigError
from sluice.core.spark import confine


class StateSettings(BaseSettings):
    """Where the service keeps its state (``SLUICE_DATABASE_URL``, ``SLUICE_WORKDIR``): what
    ``sluice serve`` and ``sluice jobs`` both read, so they find the same database."""

    model_config = SettingsConfigDict(env_prefix="SLUICE_", extra="ignore", frozen=True)

    database_url: SecretStr | None = None
    workdir: Path = Path(".sluice-service")

    def state_url(self) -> str:
        """The state database: SLUICE_DATABASE_URL, else SQLite in the work directory."""
        if self.database_url is not None and self.database_url.get_secret_value():
            return self.database_url.get_secret_value()
        return f"sqlite:///{(self.workdir / 'state.db').resolve()}"


class ServiceSettings(StateSettings):
    """Everything ``sluice serve`` needs; each field is ``SLUICE_<NAME>``."""

    github_app_id: str | None = None
    github_private_key: SecretStr | None = None
    github_token: SecretStr | None = None
    github_api_url: str = "https://api.github.com"
    github_request_interval: float = Field(default=0.25, ge=0)
    github_write_interval: float = Field(default=1.0, ge=0)
    """Pauses between GitHub API calls and between writes (GitHub's advice for apps)."""
    webhook_secret: SecretStr | None = None
    """GitHub's webhook secret (``X-Hub-Signature-256``)."""
    gitlab_url: str = "https://gitlab.com"
    gitlab_token: SecretStr | None = None
    """A GitLab access token with the ``api`` scope (project, group or personal)."""
    gitlab_webhook_secret: SecretStr | None = None
    """The secret each GitLab project's webhook token (``X-Gitlab-Token``) is derived from
    (``sluice gitlab-webhook-token <project id>`` prints one); never typed into a webhook
    itself, except by a service of one project (:meth:`gitlab_shared_secret`)."""
    no_forge: bool = False
    """Start with no forge credentials (``SLUICE_NO_FORGE=1``): for trying the service out,
    or a forge faked in tests. Without it, ``sluice serve`` refuses to start when a forge it
    takes deliveries from (GitHub: ``SLUICE_WEBHOOK_SECRET``; GitLab:
    ``SLUICE_GITLAB_WEBHOOK_SECRET``) has no credentials, or, under ``--insecure``, when no
    forge has any: deliveries would be queued and every job would fail on its first call
    to the forge."""
    project_path: str = "."
    """Where the Sluice project is inside each repository."""
    prod_branch: str = Field(default="main", min_length=1)
    """The branch whose config.yaml holds each repository's trusted settings (the gate,
    deploy, allowed paths, TTLs, Spark tuning); its ``sluice.deploy.prod_branch`` may name
    another branch, read instead."""
    project_python: Literal["off", "prod", "on"] = "prod"
    """Which Python of a repository's project runs (``SLUICE_PROJECT_PYTHON``): Python
    macros and Python models. ``prod`` (the default): only when every Python file of the
    commit is the prod branch's as it is now (reviewed and merged); a pull request that
    changes Python is not built, and says so. ``on``: a PR's own Python too (it runs with no
    credential in its environment, but it holds the job's Spark session: see
    docs/security.md). ``off``: never."""
    spark_master: str = "local[*]"
    """Where Spark jobs run (``spark-submit --master``); never read from a repository."""
    spark_deploy_mode: Literal["client", "cluster"] | None = None
    spark_mode: Literal["submit", "connect"] | None = None
    """How each Spark job runs (``SLUICE_SPARK_MODE``): ``connect``, a short-lived Python
    child per job on a warm Spark Connect server the service starts on 127.0.0.1 (or
    ``SLUICE_SPARK_REMOTE``'s); ``submit``, one ``spark-submit`` per job. Unset: ``connect``,
    but ``submit`` with the ``cluster`` deploy mode and no endpoint (drivers run on the
    cluster) or with ``SLUICE_PROJECT_PYTHON=on`` (which refuses ``connect``)."""
    spark_concurrent_tasks: int = Field(default=4, ge=1, le=32)
    """The most models of one job that build at once (``SLUICE_SPARK_CONCURRENT_TASKS``): a
    repository's ``sluice.spark.concurrent_tasks`` is used up to this."""
    spark_remote: str | None = None
    """A Spark Connect endpoint of the user's (``sc://host:port``) for ``connect`` mode;
    unset: the service's own local server."""
    spark_conf: dict[str, str] = Field(default_factory=dict)
    """Spark settings for every job, as JSON (``SLUICE_SPARK_CONF='{"spark.executor.memory":
    "4g"}'``): the only place for settings that choose what runs (jars, packages, plugins,
    extensions, JVM options, a metastore); they win over the prod branch's tuning."""
    repositories: Annotated[tuple[str, ...], NoDecode] = ()
    """The repositories this service serves (``SLUICE_REPOSITORIES``), separated by commas
    and/or spaces: ``owner/name`` (GitHub) and ``group/subgroup/name`` (GitLab) entries,
    each optionally prefixed ``github:`` or ``gitlab:`` to serve that forge only, with
    fnmatch globs (``acme/*``; ``*`` also crosses ``/``, so ``gitlab:acme/*`` covers acme's
    subgroups too), matched without regard to case as the forges name repositories.
    Deliveries from any other repository are refused with 403 before anything is stored.
    Empty (the default): any repository that can sign a delivery with the webhook secret
    is accepted (the state belongs to the first repository worked for, the others' jobs are
    refused); the service logs a WARNING at start-up.
    """
    isolate_repositories: bool | None = None
    """Each repository in a namespace of its own (``SLUICE_ISOLATE_REPOSITORIES``, issue
    46): its own state (a SQLite file beside the configured one, or a PostgreSQL schema),
    its own Spark schemas (a prefix derived from its name) and trees' folder; a state
    owner recorded before keeps the configured database and its names. Unset: on exactly
    when ``SLUICE_REPOSITORIES`` can admit more than one repository (:meth:`isolates`).
    Each repository but that owner also gets a Spark root of its own (embedded metastore,
    warehouse, Connect server): refused with Spark all repositories would share anyway
    (:func:`~sluice.core.spark.confine.shared_between_roots`), unless
    ``SLUICE_ISOLATE_ACCEPT_SHARED_SPARK``."""
    isolate_accept_shared_spark: bool = False
    """Keep repositories apart though the Spark settings make every repository's jobs
    share one catalog or storage (``SLUICE_ISOLATE_ACCEPT_SHARED_SPARK``: a remote Spark
    Connect endpoint, a metastore of your own, a cluster master, ...): their state and
    schema prefixes stay apart, but an approved Python model of one can read and write
    another's tables. The same holds where the sandbox in effect is not bubblewrap
    (``SLUICE_SANDBOX=setpriv``, auto's fallback without user namespaces, or ``off``:
    :meth:`unconfined_roots`). Off: such a service refuses to start, saying why; on, its
    start-up summary says repositories' Spark data is not kept apart."""
    spark_connect_servers: int = Field(default=4, ge=1)
    """The most warm Spark Connect servers of the service's own running at once
    (``SLUICE_SPARK_CONNECT_SERVERS``): one per Spark root, so one per repository when
    they are kept apart, each a JVM holding its driver's memory. A job whose root has
    none when all are running stops the least recently used one no job runs on; when
    every one runs a job, it waits for one to finish."""
    spark_connect_idle_minutes: float = Field(default=60.0, ge=0)
    """Minutes without a job after which a warm Spark Connect server of the service's
    own is stopped (``SLUICE_SPARK_CONNECT_IDLE_MINUTES``; 0: never); the next job of its
    root starts it again."""
    tree_total_bytes: int = Field(default=TREE_LIMITS.total_bytes, gt=0)
    """The limits on one commit's files, checked as its archive streams in (a commit over
    one is refused, its build reported as failed): all regular files together
    (``SLUICE_TREE_TOTAL_BYTES``), one file (``SLUICE_TREE_FILE_BYTES``), members
    (``SLUICE_TREE_FILES``), folders deep (``SLUICE_TREE_DEPTH``), characters in a path
    (``SLUICE_TREE_PATH_CHARS``). Never a repository's to set."""
    tree_file_bytes: int = Field(default=TREE_LIMITS.file_bytes, gt=0)
    tree_files: int = Field(default=TREE_LIMITS.files, gt=0)
    tree_depth: int = Field(default=TREE_LIMITS.depth, gt=0)
    tree_path_chars: int = Field(default=TREE_LIMITS.path_chars, gt=0)
    job_timeout_seconds: float = Field(default=7200.0, gt=0)
    """The longest one job's Spark process may run (seconds): the runner stops a job still
    running after this and the job fails, so a runaway query cannot hold its repository's
    queue, and a worker, for ever (``SLUICE_JOB_TIMEOUT_SECONDS``)."""
    max_attempts: int = Field(default=3, ge=1)
    retry_seconds: float = Field(default=10.0, ge=0)
    """How long a failed job waits before its next attempt (``SLUICE_RETRY_SECONDS``):
    doubled after each further failure, at most 10 minutes, with jitter."""
    workers: int = Field(default=1, ge=1)
    queue_max_running: int | None = None
    """The most jobs running at once, counted over every service process sharing the state
    database (``SLUICE_QUEUE_MAX_RUNNING``; unset: no cap but the workers). From 2 up, one
    of them is kept for promotions (merges, tags, ``/sluice deploy``, ``/sluice
    rollback``): builds and scheduled runs hold at most one less, so a promotion starts
    without waiting for a build (:mod:`sluice.bot.queue.fairness`). Set it to the workers
    of all the processes together (``SLUICE_WORKERS`` times the processes)."""
    queue_max_running_per_repository: int | None = None
    """The most jobs of one repository running at once, promotions aside
    (``SLUICE_QUEUE_MAX_RUNNING_PER_REPOSITORY``; unset: no cap of its own); at most
    ``SLUICE_QUEUE_MAX_RUNNING``."""
    job_lease_seconds: float = Field(default=60.0, gt=0)
    """A running job's lease; a worker that stops renewing it loses the job after this."""
    drain_seconds: float = Field(default=25.0, ge=0)
    """On SIGTERM (or Ctrl-C), how long the service waits for its running jobs to finish
    before it stops (``SLUICE_DRAIN_SECONDS``); it takes no new job meanwhile. A job still
    running then is put back in the queue (its attempt not counted) and runs again on the
    next start, or on another service process at once; its Spark work stops with the
    service. Keep it below what the service manager waits before SIGKILL (Kubernetes'
    ``terminationGracePeriodSeconds``, 30 s by default; ``docker stop -t``, 10 s)."""
    scheduler_lease_seconds: float = Field(default=30.0, ge=1)
    """With several replicas of the service on one PostgreSQL state, one at a time runs
    the scheduler (the janitor's and the scheduled runs' jobs, the purge of old jobs): the
    one holding this lease in the database, renewed every third of it
    (``SLUICE_SCHEDULER_LEASE_SECONDS``). A holder that dies is replaced once its lease
    has expired; one that stops lets go at once (:mod:`sluice.bot.queue.lease`)."""
    janitor_interval_seconds: float = Field(default=3600.0, ge=0)
    """How often each repository's janitor runs (drops invalidated and expired
    environments and tables unreferenced for the project's TTL); 0 turns it off."""
    run_interval_seconds: float = Field(default=0.0, ge=0)
    """How often each repository's prod is run (``sluice run prod``: the intervals due by
    each model's cron, in one Spark job, nothing when none is due); 0, the default, turns
    it off (``SLUICE_RUN_INTERVAL_SECONDS``). Runs queue under the repository's prod key:
    never at the same time as its promotions, tags or janitor."""
    drift_interval_seconds: float = Field(default=0.0, ge=0)
    """How often each repository's prod is checked for drift (``sluice drift prod``: its
    views and tables on Spark against what Sluice recorded; reads only), setting the
    ``sluice/drift`` check on the prod branch's head, the ``sluice_drift_models`` metric
    and the chat targets that want ``drift`` (``SLUICE_DRIFT_INTERVAL_SECONDS``); 0, the
    default, turns it off. Checks queue under the repository's prod key: never while a
    promotion changes prod's views."""
    run_report_to: int | None = Field(default=None, ge=1)
    """An issue (GitHub) or a pull/merge request that gets a comment when a scheduled run
    fails for good (``SLUICE_RUN_REPORT_TO``); the log and the job metrics say it always."""
    workdir_keep_days: float = Field(default=7.0, ge=0)
    """Days a commit's checkout or a job's log stays in the workdir after its last use
    (``SLUICE_WORKDIR_KEEP_DAYS``); each repository's janitor prunes the older ones. 0
    keeps them forever."""
    log_max_bytes: int = Field(default=logs.MAX_BYTES, ge=64 * 1024)
    """A log file's size past which the janitor rotates it (``SLUICE_LOG_MAX_BYTES``, 16 MiB):
    the Connect server's and Derby's, which long-lived Spark processes append to; checked
    at every janitor run (``SLUICE_JANITOR_INTERVAL_SECONDS``). The service logs to stderr;
    each job's log is bounded by its runner (64 MiB) and pruned with age
    (``SLUICE_WORKDIR_KEEP_DAYS``)."""
    log_backups: int = Field(default=logs.BACKUPS, ge=0, le=100)
    """Rotated copies of such a log kept (``SLUICE_LOG_BACKUPS``, 4; 0 keeps none)."""
    max_body_bytes: int = Field(default=25 * 1024 * 1024, ge=1024)
    insecure_no_signature: bool = False
    """Development only: accept unsigned deliveries (``sluice serve --insecure``)."""
    ui_public: bool = False
    """Show the web UI's pages and ``/api/v1`` (read-only: environments, plans, SQL, jobs'
    logs) to anyone who can reach the service. Off by default; unused when sign-in is
    configured (``SLUICE_GITHUB_OAUTH_CLIENT_ID`` or ``SLUICE_GITLAB_OAUTH_CLIENT_ID``);
    with neither, the pages answer 403 saying what to set."""
    github_oauth_client_id: str | None = None
    github_oauth_client_secret: SecretStr | None = None
    """The GitHub App's OAuth client id and secret (its settings page): sign-in to the web
    UI with GitHub (``SLUICE_GITHUB_OAUTH_CLIENT_ID``, ``SLUICE_GITHUB_OAUTH_CLIENT_SECRET``).
    The App's callback URL is ``<SLUICE_UI_URL>/ui/auth/github/callback``."""
    gitlab_oauth_client_id: str | None = None
    gitlab_oauth_client_secret: SecretStr | None = None
    """A GitLab application's id and secret (scope ``read_api``): sign-in with GitLab
    (``SLUICE_GITLAB_OAUTH_CLIENT_ID``, ``SLUICE_GITLAB_OAUTH_CLIENT_SECRET``); its redirect
    URI is ``<SLUICE_UI_URL>/ui/auth/gitlab/callback``."""
    ui_url: str | None = Field(default=None, pattern=r"^https?://[^/?#\s]+(/[^?#\s]*)?$")
    """The address people open the service at (``SLUICE_UI_URL``, e.g.
    ``https://sluice.example.com``): the OAuth callbacks are built from it, and an
    ``https`` one marks the session cookie Secure. Unset: the request's own address."""
    ui_session_key: SecretStr | None = None
    """The key that signs the web UI's session and sign-in cookies (HMAC-SHA256;
    ``SLUICE_UI_SESSION_KEY``, at least 32 characters). Unset: a random key made when the
    service starts (a restart signs everyone out, as it does anyway: sessions live in the
    service's memory)."""

    notify: SecretStr | None = None
    """Chat notifications (``SLUICE_NOTIFY``): JSON mapping repository patterns (as
    ``SLUICE_REPOSITORIES``'s: ``acme/*``, ``gitlab:data/*``) to a list of incoming
    webhooks, each ``{"kind": "slack"|"teams", "url": "https://...", "events": [...]}``;
    ``events`` (default: all) among ``run_failed``, ``run_late``, ``promotion``,
    ``rollback``, ``budget_hold``, ``approval_waiting``. A secret (each URL lets its
    holder post to the channel): never printed, logged or put in a message."""
    notify_run_late_hours: float = Field(default=26.0, ge=0)
    """Hours without a successful scheduled run of prod after which ``run_late`` is told
    (``SLUICE_NOTIFY_RUN_LATE_HOURS``, once per late spell; 0: never). A run with nothing
    due is not recorded, so allow for the longest cron: 26 suits daily models."""
    notify_approval_wait_hours: float = Field(default=24.0, ge=0)
    """Hours a PR's plan may wait for approval before ``approval_waiting`` is told
    (``SLUICE_NOTIFY_APPROVAL_WAIT_HOURS``, once per head; 0: never)."""

    @model_validator(mode="after")
    def _notify_valid(self) -> ServiceSettings:
        self.notify_routes()  # raises ConfigError naming the entry (never its URL)
        return self

    def notify_routes(self) -> tuple[Route, ...]:
        """``SLUICE_NOTIFY`` as routes of chat targets (empty when unset).

        Raises:
            ConfigError: it is not such a mapping; the message names the entry, never a URL.
        """
        text = self.notify.get_secret_value().strip() if self.notify is not None else ""
        return _notify_routes(text) if text else ()

    def chat(self) -> Channels | None:
        """The chat targets and a sender of their own (one per worker), or None."""
        routes = self.notify_routes()
        return Channels(routes, Sender()) if routes else None

    @field_validator("repositories", mode="before")
    @classmethod
    def _repository_list(cls, value: Any) -> tuple[str, ...]:
        if isinstance(value, str):
            value = value.replace(",", " ").split()
        if not isinstance(value, list | tuple):
            raise ConfigError(
                "SLUICE_REPOSITORIES should be a list of repositories",
                hint="e.g. SLUICE_REPOSITORIES='acme/warehouse gitlab:data/platform/*'",
            )
        return tuple(_repository_entry(str(entry)) for entry in value if str(entry).strip())

    @field_validator("queue_max_running", "queue_max_running_per_repository", mode="before")
    @classmethod
    def _cap(cls, value: Any, info: ValidationInfo) -> int | None:
        name = f"SLUICE_{str(info.field_name).upper()}"
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        try:
            number = int(str(value).strip()) if not isinstance(value, int) else value
        except ValueError:
            number = None
        if isinstance(value, bool) or number is None or number < 1:
            raise ConfigError(
                f"{name} is {str(value)[:40]!r}: it should be a whole number of jobs, 1 or more",
                hint=f"e.g. {name}=4, or unset it for no cap",
            )
        return number

    @model_validator(mode="after")
    def _caps(self) -> ServiceSettings:
        most, each = self.queue_max_running, self.queue_max_running_per_repository
        if most is not None and each is not None and each > most:
            raise ConfigError(
                f"SLUICE_QUEUE_MAX_RUNNING_PER_REPOSITORY ({each}) is more than "
                f"SLUICE_QUEUE_MAX_RUNNING ({most}): a repository can never run more jobs "
                "than all of them together",
                hint=f"lower SLUICE_QUEUE_MAX_RUNNING_PER_REPOSITORY to {most} or less, or "
                "raise SLUICE_QUEUE_MAX_RUNNING",
            )
        return self

    def _caps_summary(self) -> str:
        most, each = self.queue_max_running, self.queue_max_running_per_repository
        if most is None and each is None:
            return ""
        parts = [f"at most {most} running" if most is not None else "no overall cap"]
        if each is not None:
            parts.append(f"{each} per repository")
        return f" (queue: {', '.join(parts)})"

    def queue_caps(self) -> Caps:
        """The queue's caps (:class:`~sluice.bot.queue.fairness.Caps`)."""
        return Caps(
            max_running=self.queue_max_running,
            per_repository=self.queue_max_running_per_repository,
        )

    @model_validator(mode="after")
    def _secured(self) -> ServiceSettings:
        secrets = (self.webhook_secret, self.gitlab_webhook_secret)
        if not any(s is not None and s.get_secret_value() for s in secrets) and (
            not self.insecure_no_signature
        ):
            raise ConfigError(
                "neither SLUICE_WEBHOOK_SECRET nor SLUICE_GITLAB_WEBHOOK_SECRET is set: "
                "webhook deliveries cannot be verified",
                hint="set SLUICE_WEBHOOK_SECRET to the secret of the GitHub webhook or App, "
                "and/or SLUICE_GITLAB_WEBHOOK_SECRET to the GitLab webhook's secret token "
                "(a forge without its secret gets 401 on every delivery); for local "
                "development only, start with `sluice serve --insecure`",
            )
        cluster = self.spark_deploy_mode == "cluster" and self.spark_remote is None
        if self.spark_mode == "connect" and cluster:
            raise ConfigError(
                "SLUICE_SPARK_MODE is connect but SLUICE_SPARK_DEPLOY_MODE is cluster: a "
                "cluster deploy mode runs each job's driver on the cluster, through "
                "spark-submit, and the service's Spark Connect server runs beside it",
                hint="set SLUICE_SPARK_MODE=submit, unset SLUICE_SPARK_DEPLOY_MODE, or give "
                "your cluster's Spark Connect endpoint in SLUICE_SPARK_REMOTE",
            )
        if self.spark_mode == "connect" and self.project_python == "on":
            raise ConfigError(
                "SLUICE_SPARK_MODE is connect and SLUICE_PROJECT_PYTHON is on: a pull "
                "request's own Python (its UDFs) would run in the Spark Connect server every "
                "job shares, prod's included, with that server's network and lifetime",
                hint="set SLUICE_SPARK_MODE=submit (each job in a sandboxed driver of its "
                "own, which ends with the job), or SLUICE_PROJECT_PYTHON=prod (only Python "
                "the prod branch holds runs)",
            )
        for forge in _FORGES:
            client_id = getattr(self, f"{forge}_oauth_client_id")
            secret = getattr(self, f"{forge}_oauth_client_secret")
            if bool(client_id) != _given(secret):
                name = f"SLUICE_{forge.upper()}_OAUTH_CLIENT"
                raise ConfigError(
                    f"only one of {name}_ID and {name}_SECRET is set: sign-in with "
                    f"{forge} needs both",
                    hint=f"set both to the {forge} OAuth application's client id and secret, "
                    "or neither",
                )
        key = self.ui_session_key.get_secret_value() if self.ui_session_key else ""
        if key and len(key) < 32:
            raise ConfigError(
                f"SLUICE_UI_SESSION_KEY is {len(key)} characters long: a session key needs "
                "at least 32",
                hint="set it to a random string, e.g. `python -c 'import secrets; "
                "print(secrets.token_urlsafe(48))'`, or unset it for a key made at start",
            )
        shared = confine.shared_between_roots(self.spark()) if self.isolates() else None
        if shared is not None and not self.isolate_accept_shared_spark:
            raise ConfigError(
                f"repositories are kept apart, but {shared}: a Spark root of each "
                "repository's own cannot keep them apart there, so an approved Python "
                "model of one repository could read, overwrite or drop another's tables",
                hint="use the service's own local Spark (unset SLUICE_SPARK_REMOTE, the "
                "metastore or the setting named), run a service per repository, or set "
                "SLUICE_ISOLATE_ACCEPT_SHARED_SPARK=true to accept that their Spark data "
                "is not kept apart",
            )
        unconfined = self.unconfined_roots()
        if unconfined is not None and not self.isolate_accept_shared_spark:
            raise ConfigError(
                f"repositories are kept apart, but {unconfined}: each repository's Spark "
                "driver runs as the service's own user with every file in sight, so an "
                "approved Python model of one repository could read, overwrite or drop "
                "another's tables in that repository's Spark root",
                hint="install bubblewrap and allow user namespaces (scripts/ensure-bwrap.sh; "
                "docs/security.md, 'The sandbox') and set SLUICE_SANDBOX=auto or bwrap, run "
                "a service per repository, or set SLUICE_ISOLATE_ACCEPT_SHARED_SPARK=true to "
                "accept that their Spark data is not kept apart",
            )
        if self.github_app_id and self.github_private_key is None:
            raise ConfigError(
                "SLUICE_GITHUB_APP_ID is set but SLUICE_GITHUB_PRIVATE_KEY is not",
                hint="give the App's private key (PEM text), or use SLUICE_GITHUB_TOKEN",
            )
        return self

    def github_app_number(self) -> int | None:
        """The GitHub App's id when the service runs as that App (no token set): a button
        is taken only on a check run that App made. None with a token, and when
        ``SLUICE_GITHUB_APP_ID`` is the App's client id (``Iv...``): then a run is told
        Sluice's by the id recorded when it was made, alone."""
        app = (self.github_app_id or "").strip()
        if _given(self.github_token) or not app.isdecimal() or len(app) > 18:
            return None
        return int(app)

    def tree_limits(self) -> TreeLimits:
        """The service's limits on a commit's files (``SLUICE_TREE_*``)."""
        return TreeLimits(
            total_bytes=self.tree_total_bytes,
            file_bytes=self.tree_file_bytes,
            files=self.tree_files,
            depth=self.tree_depth,
            path_chars=self.tree_path_chars,
        )

    def spark(self) -> SparkSettings:
        """The service's Spark settings (see :mod:`sluice.bot.flow.trust`)."""
        return SparkSettings(
            master=self.spark_master,
            deploy_mode=self.spark_deploy_mode,
            mode=self.spark_mode or self._default_spark_mode(),
            remote=self.spark_remote,
            conf=dict(self.spark_conf),
            concurrent_tasks=self.spark_concurrent_tasks,
        )

    def _default_spark_mode(self) -> Literal["submit", "connect"]:
        """A warm Spark, unless jobs' drivers run on the cluster and no endpoint is given,
        or a pull request's own Python runs (``SLUICE_PROJECT_PYTHON=on``: each job in a
        sandbox of its own, never in a server all jobs share)."""
        if self.spark_deploy_mode == "cluster" and self.spark_remote is None:
            return "submit"
        if self.project_python == "on":
            return "submit"
        return "connect"

    def unconfined_roots(self) -> str | None:
        """Why per-repository Spark roots cannot keep repositories apart on this host when
        they are kept apart: the sandbox in effect (:func:`sluice.core.sandbox.isolation`)
        is not bubblewrap, the only one that shows a driver its own root alone (setpriv
        keeps a driver the service's uid and applies no read/write lists; off, none).
        None when bubblewrap runs, or repositories are not kept apart; decided at start.

        Raises:
            ConfigError: ``SLUICE_SANDBOX`` names no sandbox, or one that cannot run here.
        """
        if not self.isolates():
            return None
        found = sandbox.isolation()
        if found == "bwrap":
            return None
        how = "a uid drop with setpriv" if found == "setpriv" else "none"
        return f"the sandbox in effect is {how}, not bubblewrap"

    def isolates(self) -> bool:
        """Whether repositories are kept apart (``isolate_repositories``; unset: when
        ``repositories`` has two entries or more, or a glob)."""
        if self.isolate_repositories is not None:
            return self.isolate_repositories
        many = len(self.repositories) > 1
        return many or any(c in entry for entry in self.repositories for c in "*?[")

    def serves(self, forge: str, repo: str) -> bool:
        """Whether deliveries of ``repo`` (``owner/name``) on ``forge`` (github, gitlab) are
        served: always when ``repositories`` is empty, else when an entry matches."""
        if not self.repositories:
            return True
        name = repo.casefold()
        for entry in self.repositories:
            only, _, pattern = entry.rpartition(":")
            if (not only or only == forge) and fnmatch.fnmatchcase(name, pattern.casefold()):
                return True
        return False

    def gitlab_shared_secret(self) -> bool:
        """Whether a GitLab hook may carry the bare ``SLUICE_GITLAB_WEBHOOK_SECRET`` instead of
        its project's own token (:func:`~sluice.bot.intake.verify.gitlab_project_token`): only
        when ``repositories`` can admit exactly one GitLab project, named without a pattern
        (one entry prefixed ``gitlab:`` or not prefixed, no ``*?[``), so the secret's holders
        are that project's maintainers and the service refuses every other project with 403
        anyway. A service of one project set up before per-project tokens keeps working; one
        that serves more must give each project its own token (and change the secret, which
        every project's maintainers saw)."""
        gitlab = [e for e in self.repositories if e.rpartition(":")[0] in ("", "gitlab")]
        return len(gitlab) == 1 and not any(c in gitlab[0] for c in "*?[")

    def forges(self) -> tuple[str, ...]:
        """The forges this service acts for: each whose webhook secret is set (its deliveries
        are verified), and under ``--insecure`` (none is), each with credentials."""
        secret = {"github": self.webhook_secret, "gitlab": self.gitlab_webhook_secret}
        credentials = self._credentials()
        return tuple(
            forge
            for forge in _FORGES
            if _given(secret[forge]) or (self.insecure_no_signature and credentials[forge])
        )

    def _credentials(self) -> dict[str, str | None]:
        """How the service authenticates to each forge (None: it has no credentials)."""
        github = None
        if _given(self.github_token):
            github = "token"
        elif self.github_app_id and _given(self.github_private_key):
            github = f"App {self.github_app_id}"
        return {"github": github, "gitlab": "token" if _given(self.gitlab_token) else None}

    def forge_problem(self) -> ConfigError | None:
        """Why ``sluice serve`` should not start for want of forge credentials, or None
        (``SLUICE_NO_FORGE`` says to start without them)."""
        if self.no_forge:
            return None
        credentials = self._credentials()
        without = (
            "; to start without a forge anyway (trying the service out: jobs then fail on "
            "their first call to it), set SLUICE_NO_FORGE=1"
        )
        github_fix = (
            "set SLUICE_GITHUB_TOKEN to a token, or SLUICE_GITHUB_APP_ID and "
            "SLUICE_GITHUB_PRIVATE_KEY (PEM text) to a GitHub App's"
        )
        gitlab_fix = "set SLUICE_GITLAB_TOKEN to an access token with the api scope"
        forges = self.forges()
        if not forges:
            return ConfigError(
                "no forge credentials: neither SLUICE_GITHUB_TOKEN, SLUICE_GITHUB_APP_ID with "
                "SLUICE_GITHUB_PRIVATE_KEY, nor SLUICE_GITLAB_TOKEN is set, so no job could "
                "read a repository or report on a pull request",
                hint=f"for GitHub, {github_fix}; for GitLab, {gitlab_fix}{without}",
            )
        missing = [forge for forge in forges if credentials[forge] is None]
        if not missing:
            return None
        if missing == ["github"]:
            message = (
                "SLUICE_WEBHOOK_SECRET is set, so this service takes GitHub deliveries, but "
                "it has no GitHub credentials to act on them: neither SLUICE_GITHUB_TOKEN "
                "nor SLUICE_GITHUB_APP_ID with SLUICE_GITHUB_PRIVATE_KEY is set"
            )
            hint = github_fix
        elif missing == ["gitlab"]:
            message = (
                "SLUICE_GITLAB_WEBHOOK_SECRET is set, so this service takes GitLab "
                "deliveries, but it has no GitLab credentials to act on them: "
                "SLUICE_GITLAB_TOKEN is not set"
            )
            hint = gitlab_fix
        else:
            message = (
                "this service takes GitHub and GitLab deliveries but has no credentials for "
                "either: neither SLUICE_GITHUB_TOKEN (or SLUICE_GITHUB_APP_ID with "
                "SLUICE_GITHUB_PRIVATE_KEY) nor SLUICE_GITLAB_TOKEN is set"
            )
            hint = f"for GitHub, {github_fix}; for GitLab, {gitlab_fix}"
        return ConfigError(message, hint=hint + without)

    def summary(self, sandbox: str = "") -> str:
        """What ``sluice serve`` starts as, for its first log line: version, forges,
        repositories, Spark, workers, state (its password hidden), sandbox. No secret."""
        from sluice import __version__

        credentials = self._credentials()
        forges = [
            f"{forge} ({credentials[forge] or 'no credentials'}, "
            f"{_without_userinfo(self.github_api_url if forge == 'github' else self.gitlab_url)})"
            for forge in self.forges()
        ]
        if self.no_forge and not all(credentials[f] for f in self.forges()):
            forges = ["none (SLUICE_NO_FORGE: jobs fail on their first call to a forge)"]
        if self.insecure_no_signature:
            forges.append("webhook signatures NOT checked (--insecure)")
        spark = self.spark()
        if spark.mode == "connect":
            where = (
                f"the Spark Connect server at {redacted_spark_remote(spark.remote)}"
                if spark.remote
                else f"the service's own Spark Connect server on 127.0.0.1 (started by the "
                f"first job), master {spark.master}"
            )
            if not spark.remote and self.isolates():
                where += f"; one per repository, at most {self.spark_connect_servers} at once"
        else:
            where = f"one spark-submit per job, master {spark.master}"
            if spark.deploy_mode:
                where += f", deploy mode {spark.deploy_mode}"
        if self.isolates() and confine.shared_between_roots(spark) is not None:
            where += "; repositories share it (SLUICE_ISOLATE_ACCEPT_SHARED_SPARK)"
        elif self.unconfined_roots() is not None:
            where += (
                "; repositories' Spark data is NOT kept apart: no bubblewrap sandbox "
                "(SLUICE_ISOLATE_ACCEPT_SHARED_SPARK)"
            )
        lines = [
            f"Sluice {__version__} starting",
            f"  forge:        {', '.join(forges) or 'none'}",
            "  repositories: "
            + (
                ", ".join(self.repositories)
                if self.repositories
                else "any (SLUICE_REPOSITORIES is not set)"
            ),
            f"  spark:        {spark.mode}: {where}",
            f"  workers:      {self.workers}{self._caps_summary()}",
            f"  state:        {redacted_url(self.state_url())}",
            f"  workdir:      {self.workdir.resolve()}",
            f"  web UI:       {self._ui_summary()}",
            f"  notify:       {self._notify_summary()}",
        ]
        if sandbox:
            lines.append(f"  sandbox:      {sandbox.removeprefix('sandbox: ')}")
        return "\n".join(lines)

    def _notify_summary(self) -> str:
        """Which chat targets the repositories have, by kind and pattern (no URL)."""
        routes = self.notify_routes()
        if not routes:
            return "off (SLUICE_NOTIFY is not set)"
        return "; ".join(
            f"{route.pattern}: {', '.join(t.kind for t in route.targets)}" for route in routes
        )

    def _ui_summary(self) -> str:
        """Who sees the web UI: sign-in (which forges, where), everyone, or no one."""
        sign_ins = [forge for forge in _FORGES if getattr(self, f"{forge}_oauth_client_id")]
        if sign_ins:
            where = f" at {_without_userinfo(self.ui_url)}" if self.ui_url else ""
            return f"sign-in with {', '.join(sign_ins)}{where}"
        if self.ui_public:
            return "public (SLUICE_UI_PUBLIC: anyone who can reach the service, no sign-in)"
        return (
            "off (no sign-in: set SLUICE_GITHUB_OAUTH_CLIENT_ID and _SECRET, or GitLab's, "
            "or SLUICE_UI_PUBLIC=true)"
        )

    def secrets(self) -> list[str]:
        """Every secret value, for scrubbing text that leaves the service."""
        values = [
            self.github_private_key,
            self.github_token,
            self.webhook_secret,
            self.gitlab_token,
            self.gitlab_webhook_secret,
            self.github_oauth_client_secret,
            self.gitlab_oauth_client_secret,
            self.ui_session_key,
        ]
        out = [v.get_secret_value() for v in values if v is not None and v.get_secret_value()]
        out.extend(t.url for route in self.notify_routes() for t in route.targets)
        url = self.database_url.get_secret_value() if self.database_url else ""
        if "@" in url and ":" in url.split("@", 1)[0].split("//", 1)[-1]:
            out.append(url.split("@", 1)[0].split("//", 1)[-1].split(":", 1)[1])
        return out


_FORGES = ("github", "gitlab")


def _given(secret: SecretStr | None) -> bool:
    return secret is not None and bool(secret.get_secret_value())


_SECRET_KEYS = ("password", "secret", "token", "key")


def redacted_url(url: str) -> str:
    """``url`` (a database URL) fit for a log line: its password, and any query parameter
    whose name says it is a secret (``password``, ``sslkey``, ...), shown as ``***``; a URL
    that does not parse is shown as its scheme only."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        return url.split(":", 1)[0] + ":***" if ":" in url else "***"
    hidden = {
        name: "***" for name in parsed.query if any(word in name.lower() for word in _SECRET_KEYS)
    }
    if hidden:
        parsed = parsed.update_query_dict(hidden)
    return parsed.render_as_string(hide_password=True)


def redacted_spark_remote(remote: str) -> str:
    """A Spark Connect URL (``sc://host:port/;token=...``) fit for a log line: its
    parameters' values that may be secrets (``token``) shown as ``***``."""
    head, _, params = remote.partition(";")
    if not params:
        return remote
    kept = []
    for param in params.split(";"):
        name, eq, _ = param.partition("=")
        secret = eq and any(word in name.lower() for word in _SECRET_KEYS)
        kept.append(f"{name}=***" if secret else param)
    return head + ";" + ";".join(kept)


_NOTIFY_HINT = (
    'e.g. SLUICE_NOTIFY=\'{"acme/*": [{"kind": "slack", "url": "https://hooks.slack.com/'
    'services/...", "events": ["run_failed", "promotion"]}]}\''
)


def _notify_routes(text: str) -> tuple[Route, ...]:
    """``SLUICE_NOTIFY``'s JSON as routes; errors name the pattern and the target's place,
    never a URL (the value is a secret)."""
    import json

    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(
            f"SLUICE_NOTIFY is not JSON (line {getattr(exc, 'lineno', '?')}, column "
            f"{getattr(exc, 'colno', '?')})",
            hint=_NOTIFY_HINT,
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(
            "SLUICE_NOTIFY should map repository patterns to lists of targets", hint=_NOTIFY_HINT
        )
    routes = []
    for pattern, targets in data.items():
        where = f"SLUICE_NOTIFY[{pattern[:80]!r}]"
        try:
            _repository_entry(pattern)  # a pattern as SLUICE_REPOSITORIES takes
        except ConfigError:
            raise ConfigError(
                f"{where} does not name repositories",
                hint="owner/name or group/name, optionally prefixed github: or gitlab:, "
                "globs allowed (acme/*)",
            ) from None
        if not isinstance(targets, list) or not targets:
            raise ConfigError(f"{where} should be a list of targets", hint=_NOTIFY_HINT)
        made = []
        for place, target in enumerate(targets, 1):
            made.append(_notify_target(f"{where} target {place}", target, pattern, place))
        routes.append(Route(pattern, tuple(made)))
    return tuple(routes)


def _notify_target(where: str, target: Any, pattern: str, place: int) -> Target:
    if not isinstance(target, dict):
        raise ConfigError(f"{where} should be an object", hint=_NOTIFY_HINT)
    unknown = sorted(set(target) - {"kind", "url", "events"})
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(repr(k[:40]) for k in unknown)}",
            hint="a target has kind, url and events",
        )
    kind = target.get("kind")
    if kind not in CHAT_KINDS:
        raise ConfigError(
            f"{where}: kind should be one of {', '.join(CHAT_KINDS)}", hint=_NOTIFY_HINT
        )
    url = target.get("url")
    if not isinstance(url, str) or not url.startswith("https://") or not _usable(url):
        raise ConfigError(
            f"{where}: url should be the webhook's https:// address (not shown here: it is "
            "a secret)",
            hint="copy the incoming webhook's URL from Slack's app settings or Teams' Workflows",
        )
    events = target.get("events", list(NOTIFY_EVENTS))
    if not isinstance(events, list) or not all(isinstance(e, str) for e in events):
        raise ConfigError(f"{where}: events should be a list of names", hint=_NOTIFY_HINT)
    wrong = [e for e in events if e not in NOTIFY_EVENTS]
    if wrong:
        raise ConfigError(
            f"{where}: unknown event(s) {', '.join(repr(e[:40]) for e in wrong)}",
            hint=f"events are {', '.join(NOTIFY_EVENTS)}",
        )
    return Target(kind, url, frozenset(events), name=f"{kind} #{place} of {pattern[:80]}")


def _usable(url: str) -> bool:
    """Whether ``url`` has a host, a port if any, and no spaces.

    >>> _usable("https://hooks.slack.com/services/x"), _usable("https://h:x/"), _usable("https:///")
    (True, False, False)
    """
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  raises on a port that is not a number
    except ValueError:
        return False
    return bool(parts.hostname) and not any(c.isspace() for c in url)


def _repository_entry(entry: str) -> str:
    """One ``SLUICE_REPOSITORIES`` entry, checked: ``[github:|gitlab:]owner/name``."""
    text = entry.strip()
    forge, colon, path = text.partition(":")
    if not colon:
        forge, path = "", text
    elif forge.lower() not in _FORGES:
        raise ConfigError(
            f"SLUICE_REPOSITORIES: {text!r} does not name a repository",
            hint="write owner/name (GitHub) or group/subgroup/name (GitLab), optionally "
            "prefixed github: or gitlab:, e.g. SLUICE_REPOSITORIES='acme/warehouse "
            "gitlab:data/platform/*' (not a URL)",
        )
    parts = path.split("/")
    if len(parts) < 2 or not all(parts) or any(c.isspace() for c in path):
        raise ConfigError(
            f"SLUICE_REPOSITORIES: {text!r} is not owner/name",
            hint="name each repository with its owner (acme/warehouse) or its group path "
            "(data/platform/warehouse); a glob serves several (acme/*, */* for every one)",
        )
    forge = forge.lower()
    if forge == "github" and len(parts) != 2:
        raise ConfigError(
            f"SLUICE_REPOSITORIES: {text!r}: a GitHub repository is owner/name",
            hint="group/subgroup/name paths are GitLab's: prefix them gitlab:",
        )
    return f"{forge}:{path}" if forge else path


def _without_userinfo(url: str) -> str:
    """``url`` without a user and password in it (``https://u:p@host`` -> ``https://***@host``).

    >>> _without_userinfo("https://bot:s3cret@gitlab.example.com/api")
    'https://***@gitlab.example.com/api'
    """
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest.split("/", 1)[0]:
        return url
    return f"{scheme}://***@{rest.split('@', 1)[1]}"
