"""A drift-repair world for the red team on check runs known by id and the repair's gate
(tests/security/test_red_team_checks_repair.py).

Prod built from the example project at ``C`` on the scripted warehouse (no Spark), the
in-memory GitHub (``octo/warehouse``), real webhook bodies through ``parse_github`` and the
ledger on SQLite, a clock the test moves, and prod's branch holding whatever ``files``
(``policies/*.yaml``) the test gives it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sluice.bot.events.github import parse_github
from sluice.bot.events.neutral import DriftCheckEvent, ScheduledRunEvent
from sluice.bot.flow import audit, dispatch
from sluice.bot.flow.deps import make_deps
from sluice.bot.flow.ledger import Ledger
from sluice.bot.forge.base import Check
from sluice.bot.forge.memory import MemoryForge
from sluice.bot.intake.pin import pin_event
from sluice.bot.present import checks
from sluice.core import drift, workflow
from sluice.core.config import SETTINGS_FILES, SparkSettings
from sluice.core.drift.repair import Repair
from sluice.core.model.loader import load_project
from sluice.core.snapshot.naming import PROD
from sluice.core.spark.scripted import Warehouse
from sluice.core.state import open_state
from tests.helpers import accounts
from tests.helpers.cases import CASE_REPOSITORY_ID, realcase
from tests.helpers.kept_world import Kept, keep, restore

REPO_ROOT = Path(__file__).resolve().parents[2]
OWNER = "octo/warehouse"
KEY = f"github:{OWNER}"
NOW = 1_800_000_000_000
DAY = 86_400_000
C = "c" * 40
SERVICE_SPARK = SparkSettings(master="local[2]", conf={"spark.executor.memory": "1g"})
PREAMBLE = (
    "model_defaults:\n  dialect: spark\n  start: '2018-01-01'\n  cron: '@daily'\n"
    "variables:\n  revenue_statuses: completed\n"
)
NOBODY = PREAMBLE + "sluice:\n  project: jaffle\n"
GATE = PREAMBLE + "sluice:\n  project: jaffle\n  gate:\n    required_approvers:\n"
ONE = GATE + "      users: [bob, carol]\n"
HOSTILE = "SELECT 'by hand' AS id"


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class RepairWorld:
    """alice, bob, carol, erin, frank, grace write, dave reads; the gate is ``config``'s;
    prod's branch holds ``files`` besides the example project."""

    def __init__(
        self,
        root: Path,
        config: str,
        files: dict[str, str] | None = None,
        *,
        built: Kept | None = None,
    ) -> None:
        """With ``built`` (:func:`keep_world` of the same ``config`` and ``files``), the
        world is a copy of its own of the one kept there, put back at ``root`` (the kept
        folder, as the state database names paths under it): prod is not built again."""
        self.root, self.clock = root, Clock(NOW)
        if built is not None:
            assert root == built.folder, "a kept world is put back where it was built"
            _, self.github, self.warehouse = restore(built)
            self.github.clock = self.clock
        else:
            self.warehouse = Warehouse()
            self.github = MemoryForge(OWNER, name="github", clock=self.clock)
            self.github.repositories[CASE_REPOSITORY_ID] = OWNER  # the id the bodies carry
            roles = {u: "write" for u in ("alice", "bob", "carol", "erin", "frank", "grace")}
            self.github.roles.update({**roles, "dave": "read"})
        self.forges: dict[str, MemoryForge] = {OWNER: self.github}
        self.url = f"sqlite:///{root / 'state.db'}"
        self.deps = make_deps(project_python="on", forge_for=lambda event: self.forges[event.repo],
                              workdir=root / "work", state_url=self.url, clock=self.clock,
                              spark=SERVICE_SPARK, runner_for=self.warehouse.runner)  # fmt: skip
        self.ledger = Ledger(self.url)
        if built is None:
            self._build(config, files)
        self.sluices = dict(self.warehouse.views)

    def _build(self, config: str, files: dict[str, str] | None) -> None:
        """Prod built from the example at ``C`` with ``config`` and ``files``."""
        tree = self.commit(C, config, files)
        self.github.refs["main"] = C
        project = load_project(tree, use_cache=False)
        store = open_state(self.url)
        try:
            plan = workflow.plan_environment(project, store, PROD, end=NOW, execution_time=NOW)
            workflow.apply_plan(project, store, plan, self.warehouse.runner(), now=NOW, commit=C)
        finally:
            store.close()
        # The deliveries that built prod bound the name to the id they carried; prod was
        # promoted from C (its plan says so).
        self.ledger.bind_repository(KEY, CASE_REPOSITORY_ID, NOW)
        self.ledger.seen(KEY, None, NOW, sha=C)

    def close(self) -> None:
        self.deps.close()
        self.ledger.close()

    def commit(
        self,
        sha: str,
        config: str,
        files: dict[str, str] | None = None,
        forge: MemoryForge | None = None,
        parents: tuple[str, ...] = (),
    ) -> Path:
        src = self.root / f"tree-{sha[:6]}-{(forge or self.github).repo.replace('/', '_')}"
        shutil.rmtree(src, ignore_errors=True)
        shutil.copytree(REPO_ROOT / "examples" / "jaffle_shop", src,
                        ignore=shutil.ignore_patterns(".sluice", *SETTINGS_FILES))  # fmt: skip
        (src / "config.yaml").write_text(config)
        for name, text in (files or {}).items():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            (src / name).write_text(text)
        (forge or self.github).commit_folder(sha, src, parents=parents)
        return src

    def deliver(self, event: str, body: dict[str, Any]) -> None:
        parsed = parse_github(event, accounts.github(body, self.github.account_id))
        assert parsed is not None
        parsed = pin_event(parsed, self.deps.forge_for)
        assert parsed is not None
        dispatch.handle(self.deps, parsed)

    def check(self) -> None:
        """The scheduled drift check."""
        dispatch.handle(self.deps, DriftCheckEvent("github", OWNER, None))

    def run(self) -> None:
        """The scheduled run of prod (its failure raised, as the worker gets it)."""
        dispatch.handle(self.deps, ScheduledRunEvent("github", OWNER, None))

    def drift(self, sha: str = C) -> Check:
        return self.github.checks[sha][checks.DRIFT]

    def labels(self) -> list[str]:
        return [a.label for a in self.drift().actions]

    def button(self, label: str, sha: str = C) -> str:
        [identifier] = [a.identifier for a in self.drift(sha).actions if a.label == label]
        return identifier

    def click(
        self,
        user: str,
        identifier: str,
        *,
        head: str = C,
        run_id: int | None = None,
        name: str = checks.DRIFT,
        app: int | None = None,
        repo: str = OWNER,
    ) -> None:
        """``user`` clicks ``identifier`` of check ``name`` on the run Sluice made for it on
        ``head`` unless ``run_id`` names another (GitHub's webhook)."""
        if run_id is None:
            run_id = self.github.run_id(head, name) or 4
        body = realcase("github/check_run/requested_action.payload.json", repo, **{
            "check_run.name": name, "check_run.head_sha": head, "check_run.id": run_id,
            "requested_action.identifier": identifier, "sender.login": user,
        })  # fmt: skip
        body["check_run"]["pull_requests"] = []
        if app is not None:
            body["check_run"]["app"]["id"] = app
        self.deliver("check_run", body)

    def rows(self, kind: str = audit.REPAIR) -> list[tuple[str, str, str]]:
        return [
            (e.actor, e.outcome, e.detail) for e in self.ledger.entries(repo=KEY) if e.kind == kind
        ]

    def applied(self) -> int:
        """Apply jobs the warehouse ran (prod's build and each repair)."""
        return sum(1 for job in self.warehouse.jobs if job["kind"] == "apply")

    def redefine(self) -> None:
        """Prod's view redefined by hand, then checked."""
        self.warehouse.views["jaffle.customers"] = HOSTILE
        self.check()

    def drop_orders(self) -> None:
        """Prod's orders table dropped by hand, then checked."""
        orders = next(t for t, v in self.warehouse.tables.items() if v.model == "jaffle.orders")
        del self.warehouse.tables[orders]
        self.check()

    def mend(self) -> None:
        """Prod put back by hand as Sluice left it (views), then checked."""
        self.warehouse.views.update(self.sluices)
        self.check()

    def repair(self) -> Repair:
        """The repair plan of prod's drift now, made from state as a click makes it."""
        store = open_state(self.url)
        try:
            report = drift.check(store, PROD, self.warehouse.runner(), now=self.clock.now)
            return drift.plan_repair(store, report, now=self.clock.now)
        finally:
            store.close()


def keep_world(root: Path, config: str, files: dict[str, str] | None = None) -> Kept:
    """Prod built in ``root`` with ``config`` and ``files`` (:class:`RepairWorld`), kept
    (tests/helpers/kept_world.py) for each test to start from a copy of its own
    (``RepairWorld(kept.folder, config, files, built=kept)``)."""
    world = RepairWorld(root, config, files)
    world.close()
    return keep(root, world.github, world.warehouse)


Built = dict[tuple[str, str], Kept]
"""Each world a module kept, by its ``config`` and ``files`` (:func:`copy_of`)."""


def copy_of(
    built: Built, mktemp: Callable[[str], Path], config: str, files: dict[str, str] | None = None
) -> RepairWorld:
    """A copy of its own of prod built with ``config`` and ``files``: built (in a folder of
    ``mktemp``'s) and kept in ``built`` the first time a module asks for it. One copy of a
    world at a time: the next is put back in the same folder (a test closes the last)."""
    key = (config, json.dumps(files, sort_keys=True))
    if key not in built:
        built[key] = keep_world(mktemp("repair-world"), config, files)
    return RepairWorld(built[key].folder, config, files, built=built[key])


def record_run(ledger: Ledger, repo: str, sha: str, name: str, run_id: int, now: int) -> None:
    """The ledger records ``run_id`` as Sluice's run ``name`` on ``sha``, written now (a
    ledger that defers these rows to its next write is made to write them)."""
    ledger.record_check_run(repo, sha, name, run_id, now)
    flush = getattr(ledger, "write_deferred", None)
    if flush is not None:
        flush()
