"""``sluice action``: the GitHub Action's entry point (``action.yml`` runs it).

One workflow job handles one event, in this process, with the same flow as the
service: the event comes from ``GITHUB_EVENT_NAME`` / ``GITHUB_EVENT_PATH``, the head
commit's files from the checked-out workspace (``GITHUB_WORKSPACE``; any other commit
from the API's tarball), and everything else (the base branch's gate configuration,
comments, checks, merges) from GitHub's API with the job's token.

Inputs arrive as ``INPUT_*`` environment variables (the composite action sets them):

- ``INPUT_TOKEN`` (else ``GITHUB_TOKEN``): the API token.
- ``INPUT_PROJECT_PATH``: where the Sluice project is in the repository (default ``.``).
- ``INPUT_SPARK_MASTER`` / ``INPUT_SPARK_CONF``: override ``sluice.spark.master`` and add
  to ``sluice.spark.conf``. The conf is ``key=value`` items, one a line; on a single line
  they may be separated by commas instead.
- ``INPUT_DATABASE_URL``: the state database. Runners are ephemeral: without a shared
  database (PostgreSQL) every run starts from an empty prod; the default is SQLite in the
  workspace's ``.sluice/``.
- ``INPUT_CONFIG_OVERRIDE``: YAML merged over Sluice's settings of the project (its
  sluice.yaml, else the ``sluice:`` section of its config.yaml), wherever Sluice reads
  them (the head commit's and the base branch's):
  mappings are merged key by key, anything else replaces. Either the section's content
  (``gate: ...``) or a document with one top-level ``sluice:`` key.
- ``INPUT_PROJECT_PYTHON``: ``prod`` (default), ``on`` or ``off``: which Python of the
  project runs, as the service's ``SLUICE_PROJECT_PYTHON``.

Outputs (to ``$GITHUB_OUTPUT``): ``environment`` (``pr_<n>``, or ``prod`` for a tag or
release), and one line per check Sluice set, named without ``sluice/`` and with ``-`` as
``_`` (``approval=success``); a check not completed gives its status (``in_progress``).

The job page gets a summary (``$GITHUB_STEP_SUMMARY``: each check's outcome, then the
verdict and plan) and an ``::error file=...,line=...`` annotation for each project file and
line a failed check names (a model that does not parse, a failing unit test or audit).

Events: those the service handles (``pull_request``, ``pull_request_review``,
``issue_comment``, ``check_run``, a tag ``push``, ``release``), and ``pull_request_target``,
read as ``pull_request``: the mode for repositories whose PR authors are not trusted with
CI, since GitHub then runs the base branch's workflow file, which a PR cannot change. A
pull request from a fork is never built on its own event (a writer's ``/sluice plan``
builds it). A ``pull_request`` or ``pull_request_review`` job of a fork PR on a public
repository gets a read-only token from GitHub, with which Sluice can report nothing: it is
refused (exit 1) with a message naming ``pull_request_target``.

Exit codes: 0 when the event was handled or needs nothing (a pending or failing gate is
reported on the PR, not as a failed job); 1 when the job itself failed (no token, an
unreadable or invalid event file, an error the flow could not report), or when a check
Sluice owns (tests, pr-environment, prod-plan, deploy) failed, unless
``INPUT_FAIL_ON_FAILED_CHECK`` is ``false``.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import os
import posixpath
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import click

from sluice.bot.events.github import PayloadError, parse_github
from sluice.bot.events.github import _is_fork as is_fork
from sluice.bot.events.neutral import (
    CheckRunEvent,
    CommentEvent,
    Event,
    PullRequestEvent,
    ReviewEvent,
    TagEvent,
)
from sluice.bot.flow import dispatch
from sluice.bot.flow.deps import make_deps
from sluice.bot.forge.archive import TREE_LIMITS, TreeLimits, check_folder
from sluice.bot.forge.base import (
    Account,
    Check,
    DirEntry,
    Forge,
    ForgeError,
    Posted,
    PostedComment,
    PullCommit,
    PullRequest,
    PullVersion,
    PushRecord,
    RepositoryIdentity,
    Review,
)
from sluice.bot.present.job_page import error_annotations, failed_checks, step_summary
from sluice.core import logs
from sluice.core.config import SETTINGS_FILES, SparkSettings
from sluice.core.errors import ConfigError, SluiceError
from sluice.core.model import jinja
from sluice.core.model.definition import Project
from sluice.core.spark.connect import make_runner
from sluice.core.spark.session import SparkPaths, uses_embedded_metastore
from sluice.core.spark.submit import OnEvent, Runner
from sluice.core.yamlio import dump_yaml, parse_yaml

log = logging.getLogger(__name__)

DEFAULT_API_URL = "https://api.github.com"
STATE_DIR = ".sluice"
"""The Action's work directory inside the workspace (trees, Spark, logs, SQLite state)."""
_NOT_COPIED = (".git", ".sluice*")


class ActionError(Exception):
    """The job itself failed: one line for the log, exit code 1."""


@dataclass(frozen=True)
class Inputs:
    """What the workflow gave the Action."""

    event_name: str
    event_path: Path
    workspace: Path
    repository: str | None
    token: str
    api_url: str
    project_path: str
    spark_master: str | None
    spark_conf: dict[str, str]
    database_url: str | None
    config_override: dict[str, Any]
    prod_branch: str | None  # None: the repository's default branch
    sha: str | None  # GITHUB_SHA
    output: Path | None  # GITHUB_OUTPUT
    summary: Path | None = None  # GITHUB_STEP_SUMMARY
    fail_on_failed_check: bool = True  # INPUT_FAIL_ON_FAILED_CHECK
    project_python: str = "prod"  # INPUT_PROJECT_PYTHON: off, prod or on

    def state_url(self, workdir: Path) -> str:
        return self.database_url or f"sqlite:///{(workdir / 'state.db').resolve()}"


def _get(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    return value or None


def parse_spark_conf(text: str | None) -> dict[str, str]:
    """``key=value`` items, one a line (or comma-separated on a single line)."""
    if not text or not text.strip():
        return {}
    items = text.splitlines() if "\n" in text.strip() else text.split(",")
    conf: dict[str, str] = {}
    for item in (i.strip() for i in items):
        if not item or item.startswith("#"):
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ActionError(f"spark-conf: '{item}' is not key=value")
        conf[key.strip()] = value.strip()
    return conf


def parse_override(text: str | None) -> dict[str, Any]:
    """The config override as a mapping for the ``sluice:`` section."""
    if not text or not text.strip():
        return {}
    try:
        data = parse_yaml(text, "config-override").data
    except SluiceError as exc:
        raise ActionError(f"config-override is not valid YAML: {_one_line(exc)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ActionError("config-override must be a YAML mapping (the sluice: section)")
    if set(data) == {"sluice"}:
        data = data["sluice"] or {}
        if not isinstance(data, dict):
            raise ActionError("config-override: 'sluice:' must be a mapping")
    return data


def read_inputs(env: Mapping[str, str]) -> Inputs:
    """The Action's inputs from the environment (no check of the token here)."""
    event_name = _get(env, "GITHUB_EVENT_NAME")
    if event_name is None:
        raise ActionError("GITHUB_EVENT_NAME is not set: run this inside a GitHub Actions job")
    event_path = _get(env, "GITHUB_EVENT_PATH")
    if event_path is None:
        raise ActionError("GITHUB_EVENT_PATH is not set: run this inside a GitHub Actions job")
    workspace = Path(_get(env, "GITHUB_WORKSPACE") or os.getcwd()).resolve()
    output = _get(env, "GITHUB_OUTPUT")
    return Inputs(
        event_name=event_name,
        event_path=Path(event_path),
        workspace=workspace,
        repository=_get(env, "GITHUB_REPOSITORY"),
        token=_get(env, "INPUT_TOKEN") or _get(env, "GITHUB_TOKEN") or "",
        api_url=_get(env, "GITHUB_API_URL") or DEFAULT_API_URL,
        project_path=_get(env, "INPUT_PROJECT_PATH") or ".",
        spark_master=_get(env, "INPUT_SPARK_MASTER"),
        spark_conf=parse_spark_conf(env.get("INPUT_SPARK_CONF")),
        database_url=_get(env, "INPUT_DATABASE_URL"),
        config_override=parse_override(env.get("INPUT_CONFIG_OVERRIDE")),
        prod_branch=_get(env, "INPUT_PROD_BRANCH"),
        sha=_get(env, "GITHUB_SHA"),
        output=Path(output) if output else None,
        summary=Path(summary) if (summary := _get(env, "GITHUB_STEP_SUMMARY")) else None,
        fail_on_failed_check=_flag(env, "INPUT_FAIL_ON_FAILED_CHECK", default=True),
        project_python=_choice(env, "INPUT_PROJECT_PYTHON", ("prod", "on", "off")),
    )


def _choice(env: Mapping[str, str], name: str, allowed: tuple[str, ...]) -> str:
    """The input's value, one of ``allowed`` (the first when it is empty)."""
    value = (_get(env, name) or allowed[0]).lower()
    if value not in allowed:
        raise ActionError(f"{name} is {value!r}: give one of {', '.join(allowed)}")
    return value


def _flag(env: Mapping[str, str], name: str, *, default: bool) -> bool:
    value = (_get(env, name) or "").lower()
    if not value:
        return default
    if value not in ("true", "false"):
        raise ActionError(f"{name} is {value!r}: give true or false")
    return value == "true"


def read_event(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ActionError(f"cannot read the event file {path}: {_one_line(exc)}") from None
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ActionError(f"the event file {path} is not JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise ActionError(f"the event file {path} does not hold a JSON object")
    return payload


# --- config override -------------------------------------------------------------------


def merge(base: dict[Any, Any], over: Mapping[Any, Any]) -> dict[Any, Any]:
    """``over`` merged into a copy of ``base``: mappings key by key, the rest replaced."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def override_config(
    text: str | None, override: Mapping[str, Any], *, section: bool = True
) -> str | None:
    """config.yaml's ``text`` (None: no file) with ``override`` merged into ``sluice:``;
    ``section=False``: a sluice.yaml's, which holds the settings at its top level."""
    if not override:
        return text
    try:
        if text and section:  # config.yaml's Jinja first, as the loader reads it
            text = jinja.render_config(text, "config.yaml")
        # The bounded parser: this text may be a pull request's (an alias bomb, say).
        data = parse_yaml(text, "config.yaml").data if text else None
    except SluiceError as exc:  # the override would be lost: refuse, never run without it
        raise ActionError(f"config-override cannot be merged: {_one_line(exc)}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ActionError("config-override cannot be merged: the file is not a YAML mapping")
    if section:
        current = data.get("sluice")
        settings: dict[Any, Any] = current if isinstance(current, dict) else {}
        data["sluice"] = merge(settings, override)
        merged = dump_yaml(data)
    else:
        merged = dump_yaml(merge(data, override))
    if section and jinja.has_markers(merged):
        # Rendered once here, the text would be rendered again where it is read: values
        # that render to `{#` ... `#}` would comment the override out (red team).
        raise ActionError(
            "config-override cannot be merged: config.yaml's values hold Jinja markers "
            "({{, {% or {#) once rendered; move Sluice's settings to sluice.yaml"
        )
    return merged


# --- the forge -------------------------------------------------------------------------


def copy_workspace(
    workspace: Path, dest: Path, *, sha: str = "the workspace", limits: TreeLimits = TREE_LIMITS
) -> None:
    """The checked-out files into ``dest``, without ``.git`` and Sluice's own state; a
    symbolic link that leads outside the workspace is refused (as in a tarball), and the
    files are held to the limits an archive of ``sha`` would be (``UnusableTree``)."""
    root = workspace.resolve()
    check_folder(
        root,
        forge="the workspace",
        sha=sha,
        limits=limits,
        skip=lambda name: any(fnmatch.fnmatch(name, p) for p in _NOT_COPIED),
    )
    for link in (p for p in root.rglob("*") if p.is_symlink()):
        if ".git" in link.relative_to(root).parts:
            continue
        target = link.resolve()
        if target != root and root not in target.parents:
            raise ForgeError(
                f"{link.relative_to(root)} links outside the repository; Sluice does not follow it"
            )
    shutil.copytree(
        root, dest, symlinks=True, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*_NOT_COPIED)
    )


@dataclass
class WorkspaceForge:
    """A forge (usually :class:`~sluice.bot.forge.github.GitHubForge`) whose head commit's
    files come from the workspace, whose config.yaml carries the override, and which
    remembers the checks set (the Action's outputs)."""

    inner: Forge
    workspace: Path
    head_sha: str | None
    config_path: str
    override: Mapping[str, Any] = field(default_factory=dict)
    checks: dict[str, Check] = field(default_factory=dict)

    name: str = field(init=False)
    repo: str = field(init=False)
    comment_limit: int = field(init=False)

    def __post_init__(self) -> None:
        self.name, self.repo = self.inner.name, self.inner.repo
        self.comment_limit = self.inner.comment_limit

    def fetch_tree(self, sha: str, dest: Path) -> None:
        if self.head_sha is not None and sha.lower() == self.head_sha.lower():
            log.info("using the workspace for %s", sha)
            copy_workspace(self.workspace, dest, sha=sha, limits=TREE_LIMITS)
        else:
            self.inner.fetch_tree(sha, dest)
        if self.override:
            config = dest / self.config_path
            found = (config.parent / name for name in SETTINGS_FILES)
            settings = next((f for f in found if f.is_file()), None)
            if settings is not None:  # the settings are there, not in config.yaml
                text = settings.read_text(encoding="utf-8")
                merged = override_config(text, self.override, section=False)
                settings.write_text(merged or "", encoding="utf-8")
            elif config.parent.is_dir():
                old = config.read_text(encoding="utf-8") if config.is_file() else None
                new = override_config(old, self.override)
                if new is not None:
                    config.write_text(new, encoding="utf-8")

    def read_file(self, ref: str, path: str) -> str | None:
        text = self.inner.read_file(ref, path)
        if not self.override:
            return text
        # One spelling of each path (`./warehouse/sluice.yaml` is `warehouse/sluice.yaml`),
        # or the override would miss a file it is meant for (red team).
        name = posixpath.normpath(path.strip("/"))
        folder = posixpath.dirname(posixpath.normpath(self.config_path))
        settings = [posixpath.join(folder, file) for file in SETTINGS_FILES]
        if name in settings:
            return None if text is None else override_config(text, self.override, section=False)
        if name == posixpath.normpath(self.config_path):
            if any(self.inner.read_file(ref, other) is not None for other in settings):
                return text  # the settings are in sluice.yaml: the override goes there
            return override_config(text, self.override)
        return text

    def list_dir(self, ref: str, path: str) -> list[DirEntry] | None:
        return self.inner.list_dir(ref, path)

    def changed_files(self, number: int) -> list[str] | None:
        return self.inner.changed_files(number)

    def pull_request(self, number: int) -> PullRequest:
        return self.inner.pull_request(number)

    def pull_commits(self, number: int) -> list[PullCommit] | None:
        return self.inner.pull_commits(number)

    def upsert_comment(
        self, number: int, marker: str, body: str, comment_id: int | None = None
    ) -> Posted:
        return self.inner.upsert_comment(number, marker, body, comment_id)

    def edit_comment(self, number: int, comment_id: int, body: str) -> bool:
        return self.inner.edit_comment(number, comment_id, body)

    def own_comments(self, number: int) -> list[PostedComment]:
        return self.inner.own_comments(number)

    def set_check(self, sha: str, check: Check, run_id: int | None = None) -> int | None:
        made = self.inner.set_check(sha, check, run_id)
        self.checks[check.name] = check
        return made

    def reviews(self, number: int) -> list[Review]:
        return self.inner.reviews(number)

    def pull_versions(self, number: int) -> list[PullVersion] | None:
        return self.inner.pull_versions(number)

    def permission(self, user: str) -> str:
        return self.inner.permission(user)

    def comment(self, number: int, comment_id: int) -> PostedComment | None:
        return self.inner.comment(number, comment_id)

    def react(self, number: int, comment_id: int, reaction: str) -> bool:
        return self.inner.react(number, comment_id, reaction)

    def reply(self, number: int, body: str) -> None:
        self.inner.reply(number, body)

    def team_members(self, team: str) -> frozenset[str]:
        return self.inner.team_members(team)

    def pushers_of(self, branch: str, sha: str) -> list[tuple[str, int | None]] | None:
        return self.inner.pushers_of(branch, sha)

    def push_records(self, shas: Collection[str]) -> list[PushRecord] | None:
        return self.inner.push_records(shas)

    def account_of(self, user_id: int) -> Account | None:
        return self.inner.account_of(user_id)

    def commit_of(self, ref: str) -> str | None:
        return self.inner.commit_of(ref)

    def repository_of(self, repo_id: int) -> str | None:
        return self.inner.repository_of(repo_id)

    def identity(self, repo_id: int | None = None) -> RepositoryIdentity | None:
        return self.inner.identity(repo_id)

    def made_check_run(self, repo_id: int, run_id: int, sha: str) -> bool | None:
        return self.inner.made_check_run(repo_id, run_id, sha)

    def id_of(self, login: str) -> int | None:
        return self.inner.id_of(login)

    def on_branch(self, sha: str, branch: str) -> bool:
        return self.inner.on_branch(sha, branch)

    def merge(self, number: int, method: str, sha: str) -> str:
        return self.inner.merge(number, method, sha)

    def start_deployment(
        self, sha: str, environment: str, description: str, ref: str = ""
    ) -> int | None:
        return self.inner.start_deployment(sha, environment, description, ref)

    def deployment_status(self, deployment: int, state: str, description: str) -> None:
        self.inner.deployment_status(deployment, state, description)


def workspace_head(
    workspace: Path, payload: Mapping[str, Any], github_sha: str | None
) -> str | None:
    """The commit checked out in the workspace: git's answer, else the PR's head (the
    example workflow checks it out), else ``GITHUB_SHA``."""
    if (workspace / ".git").exists():
        try:
            done = subprocess.run(
                ["git", "-C", str(workspace), "rev-parse", "HEAD"],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            done = None
        if done is not None and done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip()
    pull = payload.get("pull_request")
    if isinstance(pull, Mapping):
        head = pull.get("head")
        if isinstance(head, Mapping) and isinstance(head.get("sha"), str):
            return str(head["sha"])
    return github_sha


def pinned(event: Event, github_sha: str | None) -> Event:
    """A release (which names its tag only) with its commit: ``GITHUB_SHA``, which GitHub
    settled when the release was published. The flow never resolves a tag's name later,
    so a tag moved since changes nothing (:mod:`sluice.bot.intake.pin`)."""
    if isinstance(event, TagEvent) and event.sha is None and github_sha:
        return replace(event, sha=github_sha)
    return event


def config_path(project_path: str) -> str:
    path = project_path.strip().strip("/")
    return "config.yaml" if path in ("", ".") else f"{path}/config.yaml"


def environment_of(event: Event) -> str | None:
    if isinstance(event, TagEvent):
        return "prod"
    if isinstance(event, PullRequestEvent | ReviewEvent | CommentEvent):
        return f"pr_{event.number}"
    if isinstance(event, CheckRunEvent) and event.numbers:
        return f"pr_{event.numbers[0]}"
    return None


def output_lines(environment: str | None, checks: Mapping[str, Check]) -> list[str]:
    lines = [f"environment={environment}"] if environment else []
    for name, check in checks.items():
        key = name.removeprefix("sluice/").replace("-", "_")
        lines.append(f"{key}={check.conclusion or check.status}")
    return lines


# --- the run ---------------------------------------------------------------------------


def _runner_for(workdir: Path) -> Callable[[Project, Path, OnEvent], Runner]:
    paths = SparkPaths(root=workdir / "spark", logs=workdir / "logs")

    def make(project: Project, _tree: Path, on_event: OnEvent) -> Runner:
        # The project was loaded with the trusted settings: the Action's inputs (the
        # service's Spark) plus the prod branch's tuning, never the PR's.
        return make_runner(project.config.sluice.spark, paths, on_event=on_event)

    return make


def default_branch(payload: Mapping[str, Any]) -> str:
    """The repository's default branch as the event says (``main`` when it does not)."""
    repository = payload.get("repository")
    branch = repository.get("default_branch") if isinstance(repository, dict) else None
    return branch if isinstance(branch, str) and branch else "main"


def spark_of(inputs: Inputs) -> SparkSettings:
    """The Action's own Spark settings (its ``spark-master`` and ``spark-conf`` inputs)."""
    return SparkSettings(
        master=inputs.spark_master or SparkSettings().master, conf=dict(inputs.spark_conf)
    )


_SECRET_KEY = re.compile(r"password|secret|token|credential", re.IGNORECASE)


def check_shared_catalog(database_url: str | None, spark: SparkSettings) -> None:
    """Refuse a state database that other runners share beside this runner's own catalog.

    State says which tables exist; the metastore and the warehouse hold them. With a
    shared (non-SQLite) state and a runner-local metastore or warehouse, a table one
    runner built is missing on the next, which would report environments nobody can
    query. A SQLite file is taken as the runner's own (or the user's deliberate choice).

    Raises:
        ActionError: naming what is runner-local and how to share it.
    """
    if not database_url or database_url.lower().startswith("sqlite"):
        return
    local = []
    if uses_embedded_metastore(spark):
        local.append("the metastore is this runner's embedded Derby database")
    if not spark.conf.get("spark.sql.warehouse.dir"):
        local.append("the warehouse is a folder of this runner's workspace")
    if local:
        raise ActionError(
            f"database-url is a state database other runners share, but {' and '.join(local)}: "
            "a table one runner builds would be missing on the others. Give spark-conf a "
            "shared metastore and warehouse (the README's 'A shared metastore on "
            "PostgreSQL'), or leave database-url empty (each run then starts from an empty "
            "prod on its own runner)"
        )


def _secrets(inputs: Inputs) -> tuple[str, ...]:
    out = [inputs.token] if inputs.token else []
    # A password in spark-conf (the shared metastore's) never reaches a comment or a log.
    out += [v for k, v in inputs.spark_conf.items() if _SECRET_KEY.search(k) and v]
    url = inputs.database_url or ""
    userinfo = url.split("@", 1)[0].split("//", 1)[-1] if "@" in url else ""
    if ":" in userinfo and userinfo.split(":", 1)[1]:
        out.append(userinfo.split(":", 1)[1])
    return tuple(out)


EVENT_ALIASES = {"pull_request_target": "pull_request"}
"""Workflow events read as another: ``pull_request_target`` has ``pull_request``'s payload,
run with the base branch's workflow file and a token that can write."""

_READ_ONLY_ON_FORKS = ("pull_request", "pull_request_review")
"""Events whose job GitHub gives a read-only token (and no secrets) for a fork's PR."""


def refuse_read_only_fork(event_name: str, payload: Mapping[str, Any]) -> None:
    """Refuse a job that cannot report: a ``pull_request`` or ``pull_request_review`` of a
    pull request from a fork of a public repository, whose token GitHub makes read-only.
    (A private repository may send write tokens to fork PRs' workflows: its job runs.)

    Raises:
        ActionError: naming the event, the reason and the workflow trigger to use.
    """
    if event_name not in _READ_ONLY_ON_FORKS or not isinstance(payload.get("pull_request"), dict):
        return
    try:
        fork = is_fork(payload)
    except PayloadError:
        return  # the flow reports what the payload lacks
    repository = payload.get("repository")
    private = isinstance(repository, dict) and repository.get("private") is True
    if fork and not private:
        number = payload["pull_request"].get("number")
        raise ActionError(
            f"pull request #{number} comes from a fork, and GitHub gives a {event_name} job "
            "of a fork's pull request a read-only token and no secrets: Sluice could post "
            "no check or comment. Run this workflow on pull_request_target instead of "
            "pull_request (GitHub then runs the base branch's workflow file, with a token "
            "that can write; Sluice builds a fork's pull request only when a writer "
            "comments /sluice plan), and let reviews of fork PRs reach the gate through "
            "that comment or the sluice/approval check's re-run"
        )


def run(env: Mapping[str, str], *, echo: Callable[[str], None] = print) -> int:
    """Handle the workflow's event once; the exit code (see the module's docstring)."""
    inputs = read_inputs(env)
    payload = read_event(inputs.event_path)
    try:
        event = parse_github(EVENT_ALIASES.get(inputs.event_name, inputs.event_name), payload)
    except PayloadError as exc:
        raise ActionError(f"the {inputs.event_name} event file is not usable: {exc}") from None
    if event is None:
        action = payload.get("action")
        what = f"{inputs.event_name} ({action})" if isinstance(action, str) else inputs.event_name
        echo(f"sluice action: nothing to do for event {what}")
        return 0
    refuse_read_only_fork(inputs.event_name, payload)
    event = pinned(event, inputs.sha)
    if not inputs.token:
        raise ActionError(
            "no GitHub token: give the action's token input, or set GITHUB_TOKEN "
            "(the workflow's permissions: must allow checks, pull-requests and contents)"
        )
    workdir = (inputs.workspace / STATE_DIR / "action").resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    if inputs.database_url is None:
        echo(
            "::warning title=Sluice state is not kept::no database-url: the state is SQLite "
            f"in {workdir}, which this runner discards after the job, so every run starts "
            "from an empty prod. Give database-url a shared PostgreSQL to keep it."
        )
    check_shared_catalog(inputs.database_url, spark_of(inputs))
    repo = inputs.repository or event.repo
    head = workspace_head(inputs.workspace, payload, inputs.sha)
    forges: list[WorkspaceForge] = []

    def forge_for(_event: Event) -> Forge:
        if forges:
            return forges[0]
        from sluice.bot.forge.github import GitHubForge, github_client

        client = github_client(
            repo=repo,
            api_url=inputs.api_url,
            token=inputs.token,
            seconds_between_requests=_interval(env, "SLUICE_GITHUB_REQUEST_INTERVAL", 0.0),
            seconds_between_writes=_interval(env, "SLUICE_GITHUB_WRITE_INTERVAL", 0.5),
        )
        forges.append(
            WorkspaceForge(
                GitHubForge(client, repo),
                inputs.workspace,
                head,
                config_path(inputs.project_path),
                inputs.config_override,
            )
        )
        return forges[0]

    secrets = _secrets(inputs)
    deps = make_deps(
        forge_for=forge_for,
        workdir=workdir,
        state_url=inputs.state_url(workdir),
        project_path=inputs.project_path,
        runner_for=_runner_for(workdir),
        secrets=secrets,
        spark=spark_of(inputs),
        prod_branch=inputs.prod_branch or default_branch(payload),
        project_python=inputs.project_python,
    )
    echo(f"sluice action: {inputs.event_name} on {repo} ({type(event).__name__})")
    try:
        dispatch.handle(deps, event)
    except Exception as exc:
        message = deps.scrub(_one_line(exc))
        try:
            dispatch.give_up(deps, event, message)
        except Exception as also:
            log.warning("could not report the failure on the PR: %s", _one_line(also))
        raise ActionError(f"handling the {inputs.event_name} event failed: {message}") from exc
    finally:
        deps.close()
    checks = forges[0].checks if forges else {}
    lines = output_lines(environment_of(event), checks)
    for line in lines:
        echo(f"sluice action: {line}")
    if inputs.output is not None and lines:
        with inputs.output.open("a", encoding="utf-8") as out:
            out.write("".join(f"{line}\n" for line in lines))
    for annotation in error_annotations(checks, inputs.workspace, inputs.project_path):
        echo(annotation)
    if inputs.summary is not None and checks:
        with inputs.summary.open("a", encoding="utf-8") as out:
            out.write(step_summary(environment_of(event), checks))
    failed = failed_checks(checks)
    if failed and inputs.fail_on_failed_check:
        echo(
            f"::error title=Sluice::{', '.join(failed)} failed (fail-on-failed-check: false "
            "keeps the job green)"
        )
        return 1
    return 0


def _interval(env: Mapping[str, str], name: str, default: float) -> float:
    try:
        return max(0.0, float(env.get(name, default)))
    except ValueError:
        return default


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def main(env: Mapping[str, str] | None = None) -> int:
    """Run the Action; print a failure as one line and return its exit code."""
    environment = os.environ if env is None else env
    try:
        logs.setup("INFO", env=environment)
        return run(environment)
    except (ActionError, ConfigError) as exc:
        print(f"::error title=Sluice::sluice action: {exc}", file=sys.stderr)
        return 1


def register(cli: click.Group) -> None:
    """Add ``sluice action`` to the ``sluice`` command."""

    @cli.command("action")
    def action_command() -> None:
        """Run as a GitHub Action: handle this job's event (settings from GITHUB_* and
        INPUT_* environment variables; see action.yml)."""
        sys.exit(main())
