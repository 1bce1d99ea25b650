"""A repository with policies on its prod branch, served by the flow on the in-memory
forge and SQLite, with no Spark (issue 47's tests of policies in the service).

Prod is the jaffle_shop example recorded as built (:func:`tests.helpers.cases.record_prod`);
a pull request's head is the example edited by the test, committed to the forge. A PR's
build is what :func:`sluice.bot.flow.pr_build._build` does once Spark has built: its plan
(core's planner, against prod), its review, the policies' verdicts recorded with it, the
``sluice/policy`` check and the comment's section.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sluice.bot.events.github import parse_github
from sluice.bot.flow import dispatch, policies, promotion, trust
from sluice.bot.flow.deps import make_deps
from sluice.bot.flow.job import Job
from sluice.bot.flow.ledger import Ledger
from sluice.bot.flow.reviewed_plan import PlanReview, prod_owners, review_of
from sluice.bot.forge.base import Check
from sluice.bot.forge.memory import MemoryForge
from sluice.core.snapshot.naming import PROD, pr_environment
from sluice.core.workflow import plan_environment
from tests.helpers import accounts
from tests.helpers.cases import CASE_REPOSITORY_ID, realcase, record_prod
from tests.helpers.kept_world import KeptFolder, keep_folder, restore_folder

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "jaffle_shop"
OWNER = "octo/warehouse"
KEY = f"github:{OWNER}"
NOW = 1_800_000_000_000
ROOT = "0" * 40
GATED = (
    "project: jaffle\npr:\n  backfill_days: 30\n"
    "gate:\n  required_approvers:\n    users: [bob, carol]\n"
)
SOFT = """\
name: orders-need-finance
description: A change to jaffle.orders needs the finance team's word.
level: soft
override_by: [octo/finance]
rule: '!("jaffle.orders" in plan.modified)'
"""
HARD = """\
name: no-new-models
description: No new model without the platform team.
level: hard
rule: plan.added.size() == 0
"""
ADVISORY = """\
name: small-plans
description: Plans stay small.
level: advisory
rule: plan.models.size() < 1
"""
POLICIES = {"policies/soft.yaml": SOFT, "policies/hard.yaml": HARD}


def files_of(folder: Path) -> dict[str, str | bytes]:
    """Every file under ``folder``, by its path there."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and ".sluice" not in p.parts
    }


def edit_orders(head: Path) -> None:
    """A breaking change of jaffle.orders (a column dropped)."""
    path = head / "models" / "orders.sql"
    text = path.read_text()
    path.write_text(text.replace("SELECT", "SELECT 1 AS policy_marker,", 1))


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class World:
    """The flow on a SQLite state and the in-memory GitHub; prod holds ``prod_policies``,
    its tree edited by ``prepare`` (tags, forward-only models... a policy needs) before it
    is recorded as built and committed."""

    def __init__(
        self,
        root: Path,
        prod_policies: dict[str, str] | None = None,
        settings: str = GATED,
        *,
        prepare: Callable[[Path], None] | None = None,
        built: MemoryForge | None = None,
    ) -> None:
        """With ``built``, ``root`` already holds the world this makes (a copy of one built
        with the same arguments, put back at the same path: tests/helpers/kept_world.py)
        and ``built`` is its forge."""
        self.root, self.clock = root, Clock(NOW)
        self.url = f"sqlite:///{root / 'state.db'}"
        self.prod = root / "prod"
        if built is not None:
            self.forge = built
        else:
            self._build(prod_policies, settings, prepare)
        self.deps = make_deps(
            project_python="prod", forge_for=lambda _event: self.forge,
            workdir=root / "work", state_url=self.url, clock=self.clock,
        )  # fmt: skip
        self.ledger = Ledger(self.url)

    def _build(
        self,
        prod_policies: dict[str, str] | None,
        settings: str,
        prepare: Callable[[Path], None] | None,
    ) -> None:
        shutil.copytree(EXAMPLE, self.prod, ignore=shutil.ignore_patterns(".sluice"))
        (self.prod / "sluice.yaml").write_text(settings)
        for path, text in (POLICIES if prod_policies is None else prod_policies).items():
            (self.prod / path).parent.mkdir(parents=True, exist_ok=True)
            (self.prod / path).write_text(text)
        if prepare is not None:
            prepare(self.prod)
        record_prod(self.prod, self.url, NOW)
        self.forge = MemoryForge(OWNER, name="github")
        self.forge.repositories[CASE_REPOSITORY_ID] = OWNER  # the id the bodies carry
        self.forge.commit(ROOT, files_of(self.prod), branch="main")
        self.forge.roles.update(
            {"alice": "write", "bob": "write", "carol": "admin", "fin": "write", "eve": "write"}
        )
        self.forge.teams["octo/finance"] = frozenset({"fin"})

    def close(self) -> None:
        self.deps.close()
        self.ledger.close()

    def job(self) -> Job:
        return Job.start(self.deps, self.forge)

    def head(self, sha: str, edit: Callable[[Path], None], parent: str = ROOT) -> Path:
        """Commit the example edited by ``edit`` as ``sha`` (a child of ``parent``)."""
        folder = self.root / f"head-{sha[:7]}"
        if folder.exists():
            shutil.rmtree(folder)
        shutil.copytree(self.prod, folder)
        edit(folder)
        self.forge.commit(sha, files_of(folder), parents=(parent,))
        return folder

    def open(self, number: int, sha: str, author: str = "alice") -> None:
        if number in self.forge.pulls:
            self.forge.push(number, sha)
        else:
            self.forge.open_pull(number, head_sha=sha, base="main", author=author)

    def build(self, number: int) -> PlanReview:
        """What a PR build records and reports of PR ``number``'s head, Spark aside."""
        pr = self.forge.pull_request(number)
        job = self.job()
        try:
            settings = trust.for_repository(job)
            tree = job.tree(pr.head_sha)
            project = trust.load_trusted(job, tree, settings)
            own = trust.parse(trust.tree_source(tree, job.deps.config_path))
            store = job.state()
            now = job.now
            plan = plan_environment(
                project, store, pr_environment(number), end=now, execution_time=now,
                against=PROD,
            )  # fmt: skip
            review = review_of(
                plan,
                project,
                prod_python=trust.prod_python_digest(job, tree, settings),
                prod_statements=trust.prod_statements_digest(job, settings),
                owners=prod_owners(store),
                extra=settings.change_to(own.digest),
                owners_only=settings.gate.required_approvers.count == 0,
            )
            raw, _error = policies.judge(job, settings, plan, project, store, pr.author, number)
            review = dataclasses.replace(review, generation=settings.generation, policies=raw)
            self.ledger.record_plan(KEY, number, pr.head_sha, review, self.clock())
            judgement = policies.judgement_of(job, settings, review, number)
            if judgement is not None:
                self.forge.set_check(pr.head_sha, policies.check_of(judgement))
            job.publish(number, section=policies.section(judgement))
            return review
        finally:
            job.close()

    def check(self, sha: str) -> Check | None:
        return self.forge.checks.get(sha, {}).get(policies.policy_text.CHECK)

    def comment(self, number: int, user: str, body: str) -> list[str]:
        """``user`` comments ``body`` on PR ``number``; the bot's replies since."""
        before = len(self.forge.bot_comments(number))
        comment_id = self.forge.add_comment(number, user, body)
        payload = realcase("github/issue_comment/drone-go-scm__comment.json", OWNER,
                           action="created", **{
            "issue.number": number, "comment.user.login": user, "comment.body": body,
            "comment.id": comment_id,
        })  # fmt: skip
        # Its author's account id, as GitHub's webhook says it (the forge's own).
        event = parse_github("issue_comment", accounts.github(payload, self.forge.account_id))
        assert event is not None
        dispatch.handle(self.deps, event)
        return self.forge.bot_comments(number)[before:]

    def approve_all(self, number: int, sha: str, review: PlanReview) -> None:
        """Record ``review``'s items approved through the gate (by bob and carol)."""
        job = self.job()
        try:
            generation = trust.for_repository(job).generation
        finally:
            job.close()
        self.ledger.approve(KEY, number, sha, review.items, ["bob", "carol"], NOW, generation)

    def promote(self, sha: str, number: int) -> promotion.Outcome:
        job = self.job()
        try:
            settings = trust.for_repository(job)
            return promotion.promote(job, sha, settings, label=f"#{number}", number=number)
        finally:
            job.close()

    def audit(self, kind: str) -> list[Any]:
        return [e for e in self.ledger.entries(repo=KEY) if e.kind == kind]


Built = dict[tuple[str, str, Callable[[Path], None] | None], KeptFolder]
"""Each world a module kept, by its prod policies, settings and ``prepare`` (:func:`copy_of`)."""


def copy_of(
    built: Built,
    mktemp: Callable[[str], Path],
    prod_policies: dict[str, str] | None = None,
    settings: str = GATED,
    *,
    prepare: Callable[[Path], None] | None = None,
) -> World:
    """A copy of its own of ``World(root, prod_policies, settings, prepare=prepare)``: built
    (in a folder of ``mktemp``'s) and kept in ``built`` the first time a module asks for it
    (tests/helpers/kept_world.py). One copy of a world at a time: the next is put back in
    the same folder (a test closes the last)."""
    key = (json.dumps(prod_policies, sort_keys=True), settings, prepare)
    if key not in built:
        folder = mktemp("policy-world")
        first = World(folder, prod_policies, settings, prepare=prepare)
        first.close()
        built[key] = keep_folder(folder, first.forge)
    folder, forge = restore_folder(built[key])
    return World(folder, built=forge)
