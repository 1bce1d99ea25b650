"""Red team on the approval gate: "the merge waits until the right people approved THIS
VERY PLAN, and nobody can walk around it".

Each test is an attack by someone with write access to a pull request (they can push,
comment, click, dismiss reviews, approve as themselves and use the web UI signed in), and
asserts what a sound gate would do. A test whose finding is still open is marked
``xfail(strict=True)`` with the finding it shows; fixing the finding turns it into a pass
(and strict makes that an error until the marker is removed). Three findings were fixed
while this round ran (8d9c18f: an approval given while a re-plan built, or before its
commit had a plan, and a dismissed objection reviving an earlier click): their tests stay,
unmarked, as regressions.

The flows are driven as tests/bot/flow/test_gate_flow.py drives them: real GitHub webhook
bodies, the in-memory forge, the ledger on SQLite, plans recorded as a PR build records
them (no Spark), or computed by core's planner on the example project against a prod
recorded without Spark (tests/helpers/cases.record_prod).
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.bot.events.github import parse_github
from sluice.bot.flow import approval, dispatch
from sluice.bot.flow.deps import make_deps
from sluice.bot.flow.gate_rules import GateInput, evaluate, owners_to_approve
from sluice.bot.flow.job import Job
from sluice.bot.flow.ledger import Ledger
from sluice.bot.flow.reviewed_plan import PlanReview, prod_owners, review_of
from sluice.bot.forge.base import Check
from sluice.bot.forge.memory import MemoryForge
from sluice.bot.intake.pin import pin_event
from sluice.core import workflow
from sluice.core.gate_settings import GateSettings
from sluice.core.model.loader import load_project
from sluice.core.model.pycode import files
from sluice.core.state import open_state
from tests.helpers import accounts
from tests.helpers.cases import CASE_REPOSITORY_ID, realcase, record_prod
from tests.helpers.own_runs import sluices_run

REPO_ROOT = Path(__file__).resolve().parents[2]
OWNER = "octo/warehouse"
KEY = f"github:{OWNER}"
NOW = 1_800_000_000_000
MINUTE = 60_000
A = "a" * 40
ROOT = "0" * 40
GATED = "sluice:\n  project: jaffle\n  gate:\n    required_approvers:\n      users: [bob, carol]\n"


class Clock:
    """The service's clock, moved by the test."""

    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class Bot:
    """The flow on a SQLite state and the in-memory GitHub, with a clock the test moves."""

    def __init__(self, root: Path, forge: MemoryForge) -> None:
        self.root, self.forge, self.clock = root, forge, Clock(NOW)
        self.url = f"sqlite:///{root / 'state.db'}"
        self.deps = make_deps(project_python="on", forge_for=lambda _event: forge,
                              workdir=root / "work", state_url=self.url,
                              clock=self.clock)  # fmt: skip
        self.ledger = Ledger(self.url)

    def deliver(self, event: str, payload: dict[str, Any]) -> None:
        parsed = parse_github(event, accounts.github(payload, self.forge.account_id))
        assert parsed is not None, (event, payload.get("action"))
        parsed = pin_event(parsed, self.deps.forge_for)
        assert parsed is not None
        dispatch.handle(self.deps, parsed)

    def review_of(self, fingerprint: str, model: str = "s.m") -> PlanReview:
        return PlanReview(fingerprint, ((model, f"{fingerprint}-{model}"),), {}, {})

    def approval(self, sha: str) -> Check:
        return self.forge.checks[sha]["sluice/approval"]

    def close(self) -> None:
        self.deps.close()
        self.ledger.close()


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    forge = MemoryForge(OWNER, name="github")
    forge.repositories[CASE_REPOSITORY_ID] = forge.repo  # the id the bodies carry
    forge.commit(ROOT, {"config.yaml": GATED}, branch="main")
    forge.commit(A, {"config.yaml": GATED}, parents=(ROOT,))
    forge.roles.update({"alice": "write", "bob": "write", "carol": "admin"})
    forge.open_pull(7, head_sha=A, base="main", author="alice")
    made = Bot(tmp_path, forge)
    yield made
    made.close()


def _iso(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).isoformat().replace("+00:00", "Z")


def _review(user: str, state: str, *, action: str = "submitted", at: int | None = None,
            review_id: int = 1, sender: str | None = None) -> dict[str, Any]:  # fmt: skip
    case = f"github/pull_request_review/{'dismissed' if action == 'dismissed' else 'submitted'}"
    payload = realcase(f"{case}.payload.json", OWNER, action=action, **{
        "pull_request.number": 7, "pull_request.head.sha": A, "review.user.login": user,
        "review.state": state.lower(), "review.commit_id": A, "review.id": review_id,
    })  # fmt: skip
    if at is not None:
        payload["review"]["submitted_at"] = _iso(at)
    if sender is not None:
        payload["sender"]["login"] = sender
    return payload


def _click(user: str, identifier: str, run_id: int) -> dict[str, Any]:
    payload = realcase("github/check_run/requested_action.payload.json", OWNER, **{
        "check_run.name": "sluice/approval", "check_run.head_sha": A, "check_run.id": run_id,
        "requested_action.identifier": identifier, "sender.login": user,
    })  # fmt: skip
    payload["check_run"]["pull_requests"] = [{"number": 7, "id": 7}]
    return payload


# -- 1. a review given while the re-plan of its commit builds counts for the new plan ------


def test_a_review_given_while_the_replan_builds_does_not_count_for_the_new_plan(
    bot: Bot,
) -> None:
    # A's first plan, fp1, recorded long ago; the approval check shows fp1.
    bot.ledger.record_plan(KEY, 7, A, bot.review_of("fp1"), NOW - 60 * MINUTE)
    # Prod (or the settings in force) moved; alice comments `/sluice plan`. The build job
    # starts at T0 (job.now, read once) and runs for ten minutes of Spark.
    t0 = NOW
    replan = Job.start(bot.deps, bot.forge)
    assert replan.now == t0
    # Five minutes in, bob reviews what the PR shows: fp1 (the check, its summary, the
    # comment, the ledger: fp1 is still A's plan). He approves it on GitHub.
    bot.clock.now = t0 + 5 * MINUTE
    made = bot.forge.add_review(7, "bob", "APPROVED", A)
    bot.forge.review_log[7][-1] = dataclasses.replace(made, submitted_at=_iso(bot.clock.now))
    bot.deliver("pull_request_review", _review("bob", "approved", at=bot.clock.now))
    check = bot.approval(A)
    assert check.conclusion == "success" and bot.ledger.plans(KEY, 7)[A] == "fp1"
    # Ten minutes in, the build ends: as pr_build._build does, it records the new plan as
    # of when it is published (the service's clock then; before 8d9c18f it was job.now,
    # T0, and bob's review, five minutes after T0, counted for fp2), then evaluates the gate.
    bot.clock.now = t0 + 10 * MINUTE
    published = replan.deps.clock()
    replan.ledger.record_plan(KEY, 7, A, bot.review_of("fp2", "s.other"), published)
    approval.refresh(replan, bot.forge.pull_request(7))
    replan.close()
    # bob approved fp1; fp2 (what merging now promotes) was never shown to him.
    check = bot.approval(A)
    assert check.conclusion == "failure", check.summary
    assert bot.ledger.unapproved(KEY, [("s.other", "fp2-s.other")]) != []


# -- 2. a click revives when the clicker's later "changes requested" is dismissed ----------


def test_dismissing_the_approvers_changes_request_does_not_revive_their_earlier_click(
    bot: Bot,
) -> None:
    bot.ledger.record_plan(KEY, 7, A, bot.review_of("fp1"), NOW - 60 * MINUTE)
    # bob clicks "Approve this plan" ...
    run = sluices_run(bot.deliver, bot.forge, A)
    bot.deliver("check_run", _click("bob", "approve:fp1", run))
    assert bot.approval(A).conclusion == "success"
    # ... then reads the diff again and requests changes: his last word.
    bot.clock.now += MINUTE
    objection = bot.forge.add_review(7, "bob", "CHANGES_REQUESTED", A)
    objection_at = bot.clock.now
    objection = dataclasses.replace(objection, submitted_at=_iso(objection_at))
    bot.forge.review_log[7][-1] = objection
    bot.deliver(
        "pull_request_review",
        _review("bob", "changes_requested", review_id=objection.id, at=bot.clock.now),
    )
    assert bot.approval(A).conclusion == "failure"
    assert bot.ledger.approved_by_pr(KEY, 7) == 0
    # alice, the author, has write access: GitHub lets her dismiss bob's review.
    bot.clock.now += MINUTE
    bot.forge.dismiss_review(7, objection.id)
    bot.deliver(
        "pull_request_review",
        _review("bob", "dismissed", action="dismissed", review_id=objection.id,
                sender="alice", at=objection_at),
    )  # fmt: skip
    # bob never approved again: his last word was "changes requested", and a dismissal
    # takes a word back, it does not give one.
    check = bot.approval(A)
    assert check.conclusion == "failure", check.summary
    assert bot.ledger.approved_by_pr(KEY, 7) == 0


# -- 3. under a gate of owners only, some changes of owned prod models need nobody ---------

OWNERS_ONLY = GateSettings(owners_must_approve="direct")
"""``sluice.gate: {owners_must_approve: direct}``: no required approvers; each changed
model's owner (as prod has it) must approve."""


def _project(root: Path, name: str) -> Path:
    src = root / name
    shutil.copytree(REPO_ROOT / "examples" / "jaffle_shop", src,
                    ignore=shutil.ignore_patterns(".sluice"))  # fmt: skip
    return src


def _owners_gate(tmp_path: Path, edit: Any) -> tuple[PlanReview, dict[str, str], bool]:
    """Prod is the example (jaffle.customers and jaffle.customer_segments owned by
    marketing, jaffle.orders by finance); the PR's head is the example edited by ``edit``.
    The review a PR build makes of it (owners as prod has them), the owners the gate asks
    for, and whether the gate passes with no approval at all."""
    url = f"sqlite:///{tmp_path / 'state.db'}"
    prod = _project(tmp_path, "prod")
    record_prod(prod, url, NOW)
    head = _project(tmp_path, "head")
    edit(head)
    project = load_project(head, use_cache=False)
    store = open_state(url)
    try:
        plan = workflow.plan_environment(project, store, "pr_7", end=NOW, execution_time=NOW)
        owners = prod_owners(store)
    finally:
        store.close()
    assert owners["jaffle.customers"] == "marketing"
    prod_project = load_project(prod, use_cache=False)
    from sluice.core.plan import statements

    review = review_of(
        plan,
        project,
        prod_python=files.digest(files.sources(prod)),
        prod_statements=statements.digest(prod_project.before_all, prod_project.after_all),
        owners=owners,
    )
    asked = owners_to_approve(OWNERS_ONLY, review.direct_owners, review.breaking_owners)
    result = evaluate(
        OWNERS_ONLY,
        GateInput(
            author="alice",
            reviews=[],
            plans={A: review.fingerprint},
            current_plan=review.fingerprint,
            owners=asked,
        ),
    )
    assert review.items, "the PR changes something a promotion must find approved"
    return review, asked, result.ok


def test_removing_an_owned_prod_model_needs_its_owners_approval(tmp_path: Path) -> None:
    def drop_segments(head: Path) -> None:
        (head / "models" / "customer_segments.py").unlink()

    review, asked, passed = _owners_gate(tmp_path, drop_segments)
    assert ("jaffle.customer_segments", "removed") in review.items
    assert asked.get("jaffle.customer_segments") == "marketing", asked
    assert not passed


def test_moving_a_prod_models_owner_needs_the_current_owners_approval(tmp_path: Path) -> None:
    def take_over(head: Path) -> None:
        path = head / "models" / "customers.sql"
        text = path.read_text()
        assert "owner marketing," in text
        # The owner moved to the PR's author: a metadata-only change of an owned model.
        path.write_text(text.replace("owner marketing,", "owner alice,"))

    review, asked, passed = _owners_gate(tmp_path, take_over)
    assert [name for name, _ in review.items] == ["jaffle.customers"]
    assert asked.get("jaffle.customers") == "marketing", asked
    assert not passed


def test_project_statements_under_an_owners_only_gate_need_someones_approval(
    tmp_path: Path,
) -> None:
    def add_after_all(head: Path) -> None:
        config = head / "config.yaml"
        config.write_text(
            config.read_text() + "\nafter_all:\n  - DROP TABLE IF EXISTS scratch.anything\n"
        )

    review, asked, passed = _owners_gate(tmp_path, add_after_all)
    assert [name for name, _ in review.items] == ["project statements (before_all, after_all)"]
    assert asked, "nobody is asked to approve statements every prod job runs"
    assert not passed


# -- 4. the web UI's approve form: the page shows one plan, the approval names another ----


def test_a_web_approval_from_an_older_page_names_the_plan_it_showed(tmp_path: Path) -> None:
    import responses

    from sluice.bot.events.neutral import event_from_json
    from sluice.bot.flow import trust
    from sluice.bot.present.checks import approve_identifier
    from tests.helpers.oauth import FakeUser, fake_github, sign_in
    from tests.helpers.web import HEAD, web_world
    from tests.helpers.web_actions import forms, jobs, service

    bob = FakeUser("bob", code="code-bob", token="gho_bobToken0000000000", readable={OWNER})
    world = web_world(tmp_path)
    try:
        with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
            fake_github(rsps, bob, served=[OWNER], ids={CASE_REPOSITORY_ID: OWNER})
            with service(world) as client:
                sign_in(client, bob)
                # bob opens the PR's page: the plan reviewed at HEAD now.
                page = client.get("/ui/pulls/7", params={"repo": KEY})
                assert page.status_code == 200, page.text
                action, fields = forms(page.text)["approve"]
                shown = world.bot.ledger.review(KEY, 7, HEAD)
                assert shown is not None
                # While he reads it, the settings in force move (another PR's change was
                # promoted) and `/sluice plan` makes HEAD's plan again: its review now
                # carries a settings change from the new pin; no model of the PR
                # environment changed, so its plan id (what the form carries) is the same.
                item = trust.change_item("e" * 32, "f" * 16 + "@1")
                again = dataclasses.replace(
                    shown, fingerprint="9" * 64, items=tuple(sorted((*shown.items, item)))
                )
                world.bot.ledger.record_plan(KEY, 7, HEAD, again, NOW + MINUTE)
                before = len(jobs(world))
                answer = client.post(action, data=fields, follow_redirects=False)
                assert answer.status_code == 303, answer.text
                queued = jobs(world)[: len(jobs(world)) - before]
    finally:
        world.close()
    # Sound: the form is refused (its page is older than the plan), or the approval names
    # the plan the page showed, which the gate then finds stale.
    identifiers = [getattr(event_from_json(j.job.payload), "identifier", None) for j in queued]
    assert identifiers in ([], [approve_identifier(shown.fingerprint)]), identifiers


# -- 5. an approver pushes onto someone else's PR, then approves their own commit ----------


def test_an_approver_who_pushed_the_head_cannot_approve_their_own_push(bot: Bot) -> None:
    bot.ledger.record_plan(KEY, 7, A, bot.review_of("fp1"), NOW - 60 * MINUTE)
    # bob (a required approver, write access) pushes his own commit B onto alice's PR:
    # GitHub sends `synchronize` with sender bob; the build records B's plan.
    b = "b" * 40
    bot.forge.commit(b, {"config.yaml": GATED}, parents=(A,))
    bot.forge.push(7, b)
    # The synchronize event's sender is recorded as a pusher (dispatch; delivered whole in
    # tests/security/test_pushers.py).
    bot.ledger.record_pusher(KEY, 7, "bob", NOW)
    bot.ledger.record_plan(KEY, 7, b, bot.review_of("fp2", "s.bobs_change"), NOW)
    # ... and approves it, after its plan was recorded: nobody but its own author looked
    # at fp2.
    bot.clock.now = NOW + MINUTE
    payload = _review("bob", "approved", at=bot.clock.now)
    payload["pull_request"]["head"]["sha"] = b
    payload["review"]["commit_id"] = b
    made = bot.forge.add_review(7, "bob", "APPROVED", b)
    bot.forge.review_log[7][-1] = dataclasses.replace(made, submitted_at=_iso(bot.clock.now))
    bot.deliver("pull_request_review", payload)
    check = bot.approval(b)
    assert check.conclusion == "failure", check.summary
    assert bot.ledger.unapproved(KEY, [("s.bobs_change", "fp2-s.bobs_change")]) != []


# -- 6. an audit file's own `blocking` and `defaults` are in no model's content key -------

POSITIVE = (
    "AUDIT (\n  name assert_positive_amounts,\n{extra});\n\n"
    "SELECT *\nFROM @this_model\nWHERE amount < @floor\n"
)


def _audit_plan(tmp_path: Path, prod_extra: str, head_extra: str) -> tuple[Any, Any]:
    """Prod is the example with its custom audit written ``POSITIVE`` with ``prod_extra``
    in its header; the PR's head the same with ``head_extra``. The PR's review (as a build
    makes it), and the head project."""
    url = f"sqlite:///{tmp_path / 'state.db'}"
    prod = _project(tmp_path, "prod")
    audit = Path("audits") / "assert_positive_amounts.sql"
    (prod / audit).write_text(POSITIVE.format(extra=prod_extra))
    record_prod(prod, url, NOW)
    head = _project(tmp_path, "head")
    (head / audit).write_text(POSITIVE.format(extra=head_extra))
    project = load_project(head, use_cache=False)
    store = open_state(url)
    try:
        plan = workflow.plan_environment(project, store, "pr_7", end=NOW, execution_time=NOW)
        owners = prod_owners(store)
    finally:
        store.close()
    prod_project = load_project(prod, use_cache=False)
    from sluice.core.plan import statements

    review = review_of(
        plan,
        project,
        prod_python=files.digest(files.sources(prod)),
        prod_statements=statements.digest(prod_project.before_all, prod_project.after_all),
        owners=owners,
    )
    return review, project


@pytest.mark.parametrize(
    ("prod_extra", "head_extra"),
    [
        ("  defaults (floor := 0),\n", "  defaults (floor := 0),\n  blocking false,\n"),
        ("  defaults (floor := 0),\n", "  defaults (floor := -1000000000),\n"),
    ],
    ids=["made-non-blocking", "default-moved"],
)
def test_an_audit_files_blocking_and_defaults_are_part_of_the_reviewed_plan(
    tmp_path: Path, prod_extra: str, head_extra: str
) -> None:
    from sluice.core.spark.render import audit_sql

    review, project = _audit_plan(tmp_path, prod_extra, head_extra)
    audit = project.audits["assert_positive_amounts"]
    # What prod's jobs would run changes: the audit no longer holds the batch back, or no
    # longer finds a negative amount.
    sql = audit_sql(audit.name, {}, audit, "t", 0, 1, 1)
    assert (not audit.blocking) or "-1000000000" in sql, (audit, sql)
    # Sound: that is a change of the plan, which an approval covers.
    assert review.items != (), "nothing to approve: an approval given before stands"


# -- 7. an approval given before its commit had any plan counts for the plan made later ----


def test_an_approval_given_before_the_commit_had_a_plan_does_not_approve_it(bot: Bot) -> None:
    # alice pushes A; before Sluice planned it (the build queued, or held for the backfill
    # budget), bob approves the commit on GitHub: there is no plan to have seen.
    bot.clock.now = NOW
    made = bot.forge.add_review(7, "bob", "APPROVED", A)
    bot.forge.review_log[7][-1] = dataclasses.replace(made, submitted_at=_iso(NOW))
    bot.deliver("pull_request_review", _review("bob", "approved", at=NOW))
    assert bot.approval(A).title == "Waiting for the plan"
    # Ten minutes later the build records A's first plan and evaluates the gate.
    bot.clock.now = NOW + 10 * MINUTE
    job = Job.start(bot.deps, bot.forge)
    job.ledger.record_plan(KEY, 7, A, bot.review_of("fp1", "s.unseen"), job.now)
    approval.refresh(job, bot.forge.pull_request(7))
    job.close()
    check = bot.approval(A)
    assert check.conclusion == "failure", check.summary
    assert bot.ledger.unapproved(KEY, [("s.unseen", "fp1-s.unseen")]) != []


# -- 8. a data file a Python model reads at run time is in no digest ----------------------

READS_JSON = (
    "import json\nfrom pathlib import Path\n\n"
    "# Thresholds kept beside the model (reviewed once, with the model).\n"
    "_RULES = json.loads(Path(__file__).with_name('segments.json').read_text())\n"
    "LOYAL_ORDERS = _RULES['loyal_orders']\n"
)


def test_a_data_file_a_python_model_reads_is_part_of_the_reviewed_plan(tmp_path: Path) -> None:
    from sluice.core.spark import confine

    def with_rules(root: Path, loyal: int) -> None:
        path = root / "models" / "customer_segments.py"
        text = path.read_text().replace("LOYAL_ORDERS = 3  # orders that make a customer loyal\n",
                                        READS_JSON)  # fmt: skip
        assert "segments.json" in text
        path.write_text(text)
        (root / "models" / "segments.json").write_text(f'{{"loyal_orders": {loyal}}}\n')

    url = f"sqlite:///{tmp_path / 'state.db'}"
    prod = _project(tmp_path, "prod")
    with_rules(prod, 3)
    record_prod(prod, url, NOW)
    head = _project(tmp_path, "head")
    with_rules(head, 1_000_000)  # pushed after the approval: nobody is "loyal" any more
    project = load_project(head, use_cache=False)
    store = open_state(url)
    try:
        plan = workflow.plan_environment(project, store, "pr_7", end=NOW, execution_time=NOW)
        owners = prod_owners(store)
    finally:
        store.close()
    prod_project = load_project(prod, use_cache=False)
    from sluice.core.plan import statements

    review = review_of(
        plan,
        project,
        prod_python=files.digest(files.sources(prod)),
        prod_statements=statements.digest(prod_project.before_all, prod_project.after_all),
        owners=owners,
    )
    # What the driver of a job running this model is shown: the runner gives it a copy of
    # the project's Python sources alone (confine.python_sources), then its spec's files.
    model = project.models["jaffle.customer_segments"]
    step = {"python": {"model": {"path": str(head / model.path), "root": str(head)}}}
    spec = confine.python_sources({"steps": [step]}, tmp_path / "home" / "python")  # type: ignore[typeddict-item]
    shown = confine.spec_files(spec)
    readable = [f for p in shown for f in ([p] if p.is_file() else p.rglob("*")) if f.is_file()]
    # Sound: the file is not shown to the driver, or what the prod job computes changed the plan.
    assert review.items != () or not any(f.name == "segments.json" for f in readable), shown
    assert sorted(f.name for f in readable if f.suffix != ".py") == []
    assert any(f.name == "customer_segments.py" for f in readable)


# -- 9. approvals recorded under a gate no longer in force still promote ------------------


def test_contents_approved_under_a_gate_no_longer_in_force_do_not_promote(bot: Bot) -> None:
    from sluice.bot.flow import trust

    bot.ledger.record_plan(KEY, 7, A, bot.review_of("fp1"), NOW - 60 * MINUTE)
    made = bot.forge.add_review(7, "bob", "APPROVED", A)
    bot.forge.review_log[7][-1] = dataclasses.replace(made, submitted_at=_iso(NOW))
    bot.deliver("pull_request_review", _review("bob", "approved", at=NOW))
    assert bot.approval(A).conclusion == "success"  # 1 of 1 required, under main's gate
    # Another PR, approved and promoted, makes the gate stricter: two of bob and carol.
    stricter = GATED + "    count: 2\n"
    stricter = stricter.replace("      users: [bob, carol]\n    count: 2\n",
                                "      users: [bob, carol]\n      count: 2\n")  # fmt: skip
    bot.forge.commit("d" * 40, {"config.yaml": stricter}, parents=(ROOT,), branch="main")
    parsed = trust.parse(trust.Source.of_config(stricter, "config.yaml"))
    assert parsed.gate.required_approvers.count == 2
    trust.pin(bot.ledger, KEY, "d" * 40, parsed, "main", NOW + MINUTE)  # what promote() does
    # Nothing re-evaluated PR 7: its head's check still reads success, so GitHub lets a
    # writer merge it, and the promotion after the merge asks the ledger only whether its
    # contents were approved by some gate, once.
    assert bot.approval(A).conclusion == "success"
    job = Job.start(bot.deps, bot.forge)
    in_force = trust.for_repository(job)
    job.close()
    # What a promotion asks: approved under the settings in force.
    assert bot.ledger.unapproved(KEY, [("s.m", "fp1-s.m")], in_force.generation) != [], (
        "approved by one person under the gate before; the gate in force asks two"
    )
