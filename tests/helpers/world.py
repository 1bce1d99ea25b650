"""The Spark lifecycle harness: ``World`` (a Spark warehouse, its state and a fake GitHub the
commits' trees are served from; its Spark jobs run the way ``spark_mode`` says, the
service's as the test's own), the ``GATE`` configuration of the lifecycle projects,
``sha_of`` (the n-th made-up commit sha) and ``edit`` (replace text in a file, which must
be there).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from sluice.bot.entry.app import forge_factory
from sluice.bot.entry.settings import ServiceSettings
from sluice.bot.events.neutral import JanitorEvent
from sluice.bot.flow import dispatch
from sluice.bot.flow.deps import make_deps
from sluice.core import workflow
from sluice.core.model.loader import load_project
from sluice.core.spark import connect
from sluice.core.spark.connect import make_runner
from sluice.core.spark.scripted import Warehouse
from sluice.core.spark.session import SparkPaths
from sluice.core.spark.submit import Runner
from sluice.core.state import open_state
from tests.helpers.github_service import SECRET
from tests.helpers.github_wire import FakeGitHub, tarball

GATE = """
  pr:
    backfill_days: null
  gate:
    required_approvers:
      users: [bob]
  deploy:
    prod_branch: main
    on: merge
"""


def sha_of(n: int) -> str:
    return f"{n:040x}"


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new))


@dataclass
class World:
    root: Path
    work: Path
    url: str
    github: FakeGitHub
    trees: dict[str, Path]
    spark_mode: Literal["submit", "connect"] = "submit"
    """``connect``: every job of the world, the service's included, runs on one warm Spark
    Connect server of the world's warehouse (started on first use; :meth:`close` stops it)."""
    warehouse: Warehouse | None = None
    """Set: no Spark; every job, the service's too, runs on this scripted warehouse."""

    def settings(self) -> ServiceSettings:
        return ServiceSettings(
            webhook_secret=SECRET,
            github_token="ghp_lifecycleToken",
            workdir=self.work,
            database_url=self.url,
            github_request_interval=0,
            github_write_interval=0,
            janitor_interval_seconds=0,
            spark_mode=self.spark_mode,
        )  # type: ignore[arg-type]

    def commit(self, sha: str, src: Path, *, branch: str | None = None) -> None:
        """Make ``src`` the tree of commit ``sha`` on the fake GitHub."""
        self.trees[sha] = src
        self.github.trees[sha] = tarball(src, f"octo-warehouse-{sha[:7]}")
        # The files the service reads by ref: config.yaml, the project's Python
        # (SLUICE_PROJECT_PYTHON=prod runs it only as the prod branch holds it) and the
        # policies in force (policies/*.yaml, listed by the contents API).
        read = [src / "config.yaml", *sorted(src.rglob("*.py")), *sorted(src.glob("policies/*"))]
        for path in read:
            rel = path.relative_to(src).as_posix()
            self.github.files[(sha, rel)] = path.read_text()
            if branch is not None:
                self.github.files[(branch, rel)] = path.read_text()
        if branch is not None:
            self.github.refs[branch] = sha
            self.github.branch_commits.setdefault(branch, set()).add(sha)

    def runner(self, project: Any) -> Runner:
        if self.warehouse is not None:
            return self.warehouse.runner(project)
        paths = SparkPaths(
            root=(self.work / "spark").resolve(), logs=(self.work / "logs").resolve()
        )
        spark = project.config.sluice.spark.model_copy(update={"mode": self.spark_mode})
        return make_runner(spark, paths)

    @property
    def runner_for(self) -> Any:
        """The service's runner factory: the scripted warehouse's, or None (the settings')."""
        return self.warehouse and self.warehouse.runner

    @property
    def scripted(self) -> Warehouse:
        assert self.warehouse is not None, "not a scripted world"
        return self.warehouse

    def close(self) -> None:
        """Stop the world's Spark Connect server, if it started one."""
        connect.stop_all()

    def query(self, environment: str, sql: str) -> list[list[Any]]:
        project = load_project(self.trees[sha_of(1)], use_cache=False)
        store = open_state(self.url)
        try:
            result = workflow.query_environment(
                project, store, environment, sql, self.runner(project), limit=100
            )
        finally:
            store.close()
        return [list(row) for row in result["rows"]]

    def janitor_drops(
        self, environment: str, settings: ServiceSettings, forge: str, repo: str
    ) -> None:
        """``environment`` was invalidated by its promotion, and the janitor drops it."""
        store = open_state(self.url)
        try:
            record = store.get_environment(environment)
            assert record is not None and record.invalidated
        finally:
            store.close()
        deps = make_deps(project_python="on", forge_for=forge_factory(settings), workdir=self.work, state_url=self.url,
                         spark=settings.spark(), runner_for=self.warehouse and self.warehouse.runner)  # fmt: skip
        try:
            dispatch.handle(deps, JanitorEvent(forge=forge, repo=repo, installation_id=None))
        finally:
            deps.close()
        store = open_state(self.url)
        try:
            assert store.get_environment(environment) is None
        finally:
            store.close()

    def assert_secrets_absent(self, produced: str, *secrets: str) -> None:
        """None of ``secrets`` is in ``produced`` (what went to the forge, the log) or in
        any job log (a scripted world's jobs write none)."""
        logs = [p for p in (self.work / "logs").rglob("*") if p.is_file()]
        assert logs or self.warehouse is not None, "no job log to search"
        produced += "".join(p.read_text(errors="replace") for p in logs)
        for secret in secrets:
            assert secret not in produced

    def versions(self, environment: str) -> dict[str, str]:
        store = open_state(self.url)
        try:
            record = store.get_environment(environment)
        finally:
            store.close()
        assert record is not None, environment
        return {ref.name: ref.version for ref in record.snapshots}

    def table_files(self) -> dict[str, float]:
        """Every data file under the warehouse, with its modification time."""
        return {
            str(p): p.stat().st_mtime
            for p in (self.work / "spark").rglob("*")
            if p.is_file() and "metastore" not in str(p) and p.suffix in (".parquet", ".crc", "")
        }
