"""The flow on an in-memory GitHub, for the hostile cases.

Real webhook bodies (``tests/fixtures/webhooks``) are parsed by ``parse_github`` and handed to
the flow, whose forge is a :class:`~sluice.bot.forge.memory.MemoryForge` named ``github``
(one per repository an event names); what goes over HTTP to GitHub is tested in
tests/bot/forge/test_github.py and the end-to-end service tests. Spark is replaced by a runner that records the project it was asked to run and fails the
job, so the cases that end at "what would run" need no JVM.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from sluice.bot.events.github import parse_github
from sluice.bot.events.neutral import Event, JanitorEvent
from sluice.bot.flow import dispatch, tenancy
from sluice.bot.flow.deps import RunnerFactory, make_deps
from sluice.bot.flow.ledger import Ledger
from sluice.bot.forge.base import Check, Forge
from sluice.bot.forge.memory import MemoryForge
from sluice.bot.intake.pin import pin_event
from sluice.core import workflow
from sluice.core.config import SETTINGS_FILES, SparkSettings
from sluice.core.errors import ExecutionError
from sluice.core.model.definition import Project
from sluice.core.model.loader import load_project
from sluice.core.snapshot.naming import PROD, schema_prefix
from sluice.core.spark.scripted import Warehouse
from sluice.core.spark.submit import JobResult, OnEvent, Runner
from sluice.core.state import open_state
from tests.helpers import accounts
from tests.helpers.cases import CASE_REPOSITORY_ID, realcase

REPO_ROOT = Path(__file__).resolve().parents[2]
OWNER = "octo/warehouse"
KEY = f"github:{OWNER}"
NOW = 1_800_000_000_000
A, B, C, D = "a" * 40, "b" * 40, "c" * 40, "d" * 40
# The example's model defaults and variables: what a project's config.yaml holds besides
# `sluice:` (each test writes its own `sluice:` section after it).
PREAMBLE = (
    "model_defaults:\n  dialect: spark\n  start: '2018-01-01'\n  cron: '@daily'\n"
    "variables:\n  revenue_statuses: completed\n"
)
GATED = (
    PREAMBLE + "sluice:\n  project: jaffle\n  gate:\n    required_approvers:\n      users: [bob]\n"
)
SERVICE_SPARK = SparkSettings(master="local[2]", conf={"spark.executor.memory": "1g"})


class Refused(ExecutionError):
    """What the recording runner raises: no Spark in these tests."""


class RecordingRunner:
    """Records each project a job was asked for, then fails the job."""

    def __init__(self) -> None:
        self.projects: list[Project] = []

    def make(self, project: Project, _tree: Path, _on_event: OnEvent) -> Runner:
        self.projects.append(project)
        return self

    def run(self, spec: dict[str, Any]) -> JobResult:
        raise Refused("no Spark in this test")


class Bot:
    """A flow on a SQLite state with the service's Spark settings, and its GitHub (in
    memory: ``github`` is repository ``OWNER``; :meth:`repository` adds others)."""

    def __init__(
        self,
        root: Path,
        github: MemoryForge,
        *,
        runner_for: RunnerFactory | None = None,
        isolate: bool = False,
    ) -> None:
        self.root, self.github = root, github
        github.clock = github.clock or (lambda: NOW)  # reviews given at the flow's time
        self.forges = {github.repo: github}
        # The repository the test bodies name, under the id they carry (Forge.repository_of).
        github.repositories.setdefault(CASE_REPOSITORY_ID, github.repo)
        self.url = f"sqlite:///{root / 'state.db'}"
        self.runner = RecordingRunner()
        self.deps = make_deps(project_python="on", forge_for=self._forge_for, workdir=root / "work",
                              state_url=self.url, clock=lambda: NOW, spark=SERVICE_SPARK,
                              runner_for=runner_for or self.runner.make,
                              isolate=isolate)  # fmt: skip
        self.ledger = Ledger(self.url)

    def _forge_for(self, event: Event) -> Forge:
        return self.forges[event.repo]

    def repository(self, repo: str, repo_id: int | None = None) -> MemoryForge:
        """Another repository on the same GitHub (its forge id ``repo_id``), its forge."""
        forge = MemoryForge(repo, name="github", clock=lambda: NOW)
        if repo_id is not None:
            forge.repositories[repo_id] = repo
        self.forges[repo] = forge
        return forge

    def close(self) -> None:
        self.deps.close()
        self.ledger.close()

    def deliver(self, event: str, payload: dict[str, Any]) -> None:
        # Each person the webhook names carries their account's id, as GitHub's do.
        parsed = parse_github(event, accounts.github(payload, self.github.account_id))
        assert parsed is not None, (event, payload.get("action"))
        parsed = pin_event(parsed, self._forge_for)  # as the service's intake does
        assert parsed is not None, (event, "a tag that names no commit")
        dispatch.handle(self.deps, parsed)

    def say(self, number: int, user: str, body: str, comment_id: int) -> None:
        """``user`` comments ``body`` on pull request ``number``, then its webhook."""
        self.github.add_comment(number, user, body, comment_id=comment_id)
        self.deliver("issue_comment", comment(number, user, body, comment_id))

    def commit(
        self,
        sha: str,
        config: str,
        *,
        models: dict[str, str] | None = None,
        parents: tuple[str, ...] = (),
        forge: MemoryForge | None = None,
        files: dict[str, str] | None = None,
    ) -> Path:
        """A commit holding the example project with ``config`` as its config.yaml (and
        ``models``: file name -> text, added or replaced under models/; ``files``: path
        in the project -> text, e.g. a sluice.yaml), its folder. The example's own
        settings file is left out: ``config`` and ``files`` say all the settings."""
        src = self.root / f"tree-{sha[:6]}"
        shutil.rmtree(src, ignore_errors=True)
        shutil.copytree(REPO_ROOT / "examples" / "jaffle_shop", src,
                        ignore=shutil.ignore_patterns(".sluice", *SETTINGS_FILES))  # fmt: skip
        (src / "config.yaml").write_text(config)
        for name, text in (models or {}).items():
            (src / "models" / name).write_text(text)
        for name, text in (files or {}).items():
            (src / name).parent.mkdir(parents=True, exist_ok=True)  # policies/*.yaml
            (src / name).write_text(text)
        (forge or self.github).commit_folder(sha, src, parents=parents)
        return src

    def prod(self, sha: str, config: str) -> None:
        """The prod branch ``main`` at ``sha`` with ``config``."""
        self.commit(sha, config)
        self.github.refs["main"] = sha

    def pull(self, number: int, head: str, *, base: str = "main", author: str = "alice") -> None:
        """Pull request ``number`` from ``head`` into ``base`` (head committed first)."""
        self.github.open_pull(number, head_sha=head, base=base, author=author)

    def forge(self) -> Forge:
        """The forge the flow uses for this repository."""
        return self.deps.forge_for(JanitorEvent(forge="github", repo=OWNER,
                                                          installation_id=None))  # fmt: skip

    def approval(self, sha: str) -> Check:
        return self.github.checks[sha]["sluice/approval"]

    def checks_on(self, sha: str) -> dict[str, Check]:
        """The checks on commit ``sha`` by name (none yet: empty)."""
        return self.github.checks.get(sha, {})


def payload(case: str, **changes: Any) -> dict[str, Any]:
    return realcase(case, OWNER, **changes)


def opened(number: int, head: str, *, base: str = "main", author: str = "alice") -> dict[str, Any]:
    return payload("github/pull_request/opened.payload.json", **{
        "number": number, "pull_request.number": number, "pull_request.head.sha": head,
        "pull_request.base.ref": base, "pull_request.user.login": author,
        "pull_request.draft": False,
        "pull_request.head.repo.full_name": OWNER,
    })  # fmt: skip


def merged(number: int, head: str, merge_sha: str, *, base: str = "main") -> dict[str, Any]:
    return payload("github/pull_request/woodpecker__HookPullRequestMerged.json", **{
        "pull_request.number": number, "number": number, "pull_request.merge_commit_sha": merge_sha,
        "pull_request.head.sha": head, "pull_request.base.ref": base,
        "pull_request.user.login": "alice",
    })  # fmt: skip


def review(number: int, user: str, commit: str, review_id: int) -> dict[str, Any]:
    return payload("github/pull_request_review/submitted.payload.json", action="submitted", **{
        "pull_request.number": number, "pull_request.head.sha": commit,
        "review.user.login": user, "review.state": "approved", "review.commit_id": commit,
        "review.id": review_id,
    })  # fmt: skip


def comment(number: int, user: str, body: str, comment_id: int) -> dict[str, Any]:
    return payload("github/issue_comment/drone-go-scm__comment.json", action="created", **{
        "issue.number": number, "comment.user.login": user, "comment.body": body,
        "comment.id": comment_id,
    })  # fmt: skip


def tag(name: str, sha: str) -> dict[str, Any]:
    return payload("github/push/woodpecker__HookTag.json", ref=f"refs/tags/{name}", after=sha)


def named(payload: dict[str, Any], name: str, repository_id: int) -> dict[str, Any]:
    """A GitHub delivery of repository ``name`` (not a fork) whose forge id is
    ``repository_id``."""
    repository = {**payload["repository"], "full_name": name, "id": repository_id}
    pull = dict(payload["pull_request"])
    pull["head"] = {**pull["head"], "repo": {**pull["head"]["repo"], "full_name": name}}
    pull["base"] = {**pull["base"], "repo": {**pull["base"]["repo"], "full_name": name}}
    return {**payload, "repository": repository, "pull_request": pull}


def drifted_prod(
    bot: Bot, forge: MemoryForge, warehouse: Warehouse, key: str, config: str, secret: str
) -> tenancy.Namespace:
    """``key``'s prod (``config`` its config.yaml), built at C in its own namespace (its
    state, schemas and root) as a promotion leaves it, then one of its views redefined by
    hand to ``secret`` (a drift whose text is that repository's alone); its namespace."""
    tree = bot.commit(C, config, forge=forge)
    forge.refs["main"] = C
    space = tenancy.namespace_of(key, bot.ledger, bot.url, isolate=True)
    tenancy.ensure_schema(space.state_url)
    project = load_project(tree, use_cache=False)
    store = open_state(space.state_url)
    try:
        with schema_prefix(space.schema_prefix):
            plan = workflow.plan_environment(project, store, PROD, end=NOW, execution_time=NOW)
            workflow.apply_plan(project, store, plan, warehouse.runner(), now=NOW, commit=C)
    finally:
        store.close()
    bot.ledger.seen(key, None, NOW, sha=C)
    [view] = [
        v for v in warehouse.views if space.schema_prefix in v and v.endswith("__jaffle.customers")
    ]
    warehouse.views[view] = secret
    return space
