"""The whole PR lifecycle on real Spark, through the service and GitHub at the wire.

open -> comment and checks -> approvals that must not count (the PR's own approver list,
the author) -> an approval by an eligible reviewer from the check's button -> the merge
queue's checks on the group's head (every table the PR's, nothing written) -> merge ->
prod promoted by virtual update (prod's views read the PR's tables, no table written) ->
the PR environment invalidated, then gone after the janitor. Then an admin-merged,
unapproved change that must not reach prod. (Two PRs merged back to back, a backfill
budget and promotion tiers are ``test_release_lifecycle.py``'s, on the scripted runner.)

Every job, the service's too, runs on one warm Spark Connect server (the default; the PR
flow and the crash trials run spark-submit); PyGithub really runs against ``FakeGitHub``.
Slow by nature (about a dozen Spark jobs), so one module-scoped prod.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import responses
from fastapi.testclient import TestClient

from sluice.bot.entry.app import create_app
from sluice.core import workflow
from sluice.core.errors import SluiceError
from sluice.core.model.loader import load_project
from sluice.core.snapshot.naming import merge_group_environment
from sluice.core.state import open_state
from sluice.core.timeutil import to_ms
from tests.helpers import github_lifecycle as gl
from tests.helpers.fold_settings import fold_settings
from tests.helpers.github_service import SECRET, Service
from tests.helpers.github_wire import FakeGitHub
from tests.helpers.merge_queue import merge_group
from tests.helpers.world import GATE, World, edit, sha_of

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[3]
END = to_ms("2018-04-30")
OWNER = gl.OWNER
POLICIES = REPO / "examples" / "policies" / "policies"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("lifecycle")
    github = FakeGitHub(repo=OWNER)
    # A warm Spark for the whole module: every job, the service's too, on one Spark
    # Connect server (the crash trials run the service's jobs through spark-submit).
    env = World(root, root / "work", f"sqlite:///{root / 'state.db'}", github, {}, "connect")
    main = root / "main"
    shutil.copytree(REPO / "examples" / "jaffle_shop", main,
                    ignore=shutil.ignore_patterns(".sluice"))  # fmt: skip
    fold_settings(main)  # the example's sluice.yaml into config.yaml
    text = (main / "config.yaml").read_text()
    head, _, _ = text.partition("  pr:\n")
    (main / "config.yaml").write_text(head + GATE.lstrip("\n"))
    # Prod's branch carries a soft policy of examples/policies (a breaking change to a
    # model tagged finance needs a member of octo/finance), and orders is tagged finance.
    (main / "policies").mkdir()
    shutil.copy(POLICIES / "finance-breaking.yaml", main / "policies")
    edit(
        main / "models" / "orders.sql",
        "  owner finance,\n",
        "  owner finance,\n  tags (finance),\n",
    )
    project = load_project(main, use_cache=False)
    store = open_state(env.url)
    try:
        plan = workflow.plan_environment(project, store, "prod", end=END, execution_time=END)
        workflow.apply_plan(project, store, plan, env.runner(project), url=env.url, now=END)
    finally:
        store.close()
    env.commit(sha_of(1), main, branch="main")
    yield env
    env.close()


@pytest.fixture
def service(world: World) -> Iterator[Service]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        world.github.install(mock)
        with TestClient(create_app(world.settings())) as client:
            yield Service(client, world.github, world.settings())


def test_prod_is_built_on_the_warm_server_as_with_spark_submit(world: World) -> None:
    """What the module's prod build (Spark Connect, the default) recorded and wrote: every
    model, the incremental one's whole range, its audits; the tables read as the
    spark-submit and in-process builds' do (test_lifecycle_submit.py, test_apply.py)."""
    store = open_state(world.url)
    try:
        record = store.get_environment("prod")
        assert record is not None and len(record.snapshots) == 10
        daily = next(r for r in record.snapshots if r.name == "jaffle.daily_revenue")
        key = (daily.name, daily.version)
        assert store.get_intervals([key])[key] == [(to_ms("2018-01-01"), END)]
        audits = {r.name: r.passed for r in store.get_results(plan_id=record.plan_id)}
        assert audits["jaffle.orders:unique_values"]
        assert audits["jaffle.stg_orders:accepted_values"]
    finally:
        store.close()
    counts = world.query("prod", "SELECT (SELECT COUNT(*) FROM jaffle.orders), "
                         "(SELECT SUM(number_of_orders) FROM jaffle.customers), "
                         "(SELECT COUNT(*) - COUNT(DISTINCT order_date) FROM jaffle.daily_revenue), "
                         "(SELECT SUM(orders) FROM jaffle.daily_revenue)")  # fmt: skip
    assert counts == [[99, 99, 0, 99]]


def test_open_approve_merge_promote_by_virtual_update_and_clean_up(
    world: World, service: Service, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    github = world.github
    head = sha_of(2)
    pr = gl.tree(world, "pr2", sha_of(1))
    edit(pr / "models" / "orders.sql", "  ON o.order_id = p.order_id",
         "  ON o.order_id = p.order_id\nWHERE o.status <> 'returned'")  # fmt: skip
    edit(pr / "models" / "customers.sql", "  c.last_name,\n",
         "  c.last_name,\n  UPPER(c.last_name) AS last_name_upper,\n")  # fmt: skip
    # The PR also tries to make carol an approver: only the base branch's list counts.
    edit(pr / "config.yaml", "users: [bob]", "users: [carol]")
    world.commit(head, pr)
    github.add_pull(2, head, author="alice", head_ref="feature-2")
    github.permissions.update({"alice": "write", "bob": "write", "carol": "write", "dave": "read"})

    gl.deliver(service, "pull_request", gl.pull(2, head, "alice", "opened"))
    checks = github.checks_on(head)
    assert {n: c["conclusion"] for n, c in checks.items()} == {
        "sluice/tests": "success", "sluice/pr-environment": "success",
        "sluice/prod-plan": "success", "sluice/approval": "failure", "sluice/policy": "failure",
    }, checks["sluice/approval"]["output"]  # fmt: skip
    # The soft policy in force on main breaks on the PR's breaking change to orders.
    policy = checks["sluice/policy"]["output"]
    assert policy["title"] == "1 of 1 policies block", policy
    assert "failed (blocks until overridden)" in policy["text"]
    assert "`policies/finance-breaking.yaml:1`" in policy["text"], policy["text"]
    assert (
        checks["sluice/prod-plan"]["output"]["title"]
        == "Merging is a virtual update: 0 rows written"
    )
    gate = checks["sluice/approval"]
    assert gate["output"]["title"] == "1 more approval needed"
    assert "1 more approval needed from @bob." in gate["output"]["summary"]
    # Its button names the plan it approves: "approve:" and 12 hex digits of its fingerprint.
    assert [re.fullmatch(r"approve:[0-9a-f]{12}", a["identifier"]) is not None
            for a in gate["actions"]] == [True]  # fmt: skip
    [comment] = github.comments_on(2)
    text = comment["body"]
    (world.root / "comment.md").write_text(text)  # to read when an assertion fails
    assert "**Approval:** ⏳ Waiting for approval." in text
    assert "**Policies:** ❌" in text and "`finance-breaking`" in text
    # The plan and the table diffs, as the data says: the PR drops prod's 4 returned orders.
    for line in ("| `jaffle.orders` | **breaking** | its SQL changed | 99 → 95 (-4) |",
                 "| `jaffle.customers` | non-breaking | its SQL changed, and it reads `jaffle.orders`",
                 "| `jaffle.daily_revenue` | breaking, downstream | reads `jaffle.orders`",
                 "| `jaffle.customer_segments` | breaking, downstream | reads `jaffle.orders` | 62 → 60 (-2), 2 differ |",
                 "#### Table diffs against prod, biggest change first",
                 "#### `jaffle.orders`: prod → pr_2: 4 rows only in prod",
                 "| only in this side | 4 | 0 |  |", "```diff", "+  o.status <> 'returned'",
                 "```mermaid", "- added last_name_upper string",
                 "| `jaffle.orders` | full refresh | \\- |",  # a FULL model has no date range
                 "`sluice query pr_2 'SELECT * FROM jaffle__pr_2.orders LIMIT 10'`",
                 "| `sluice/tests` | success: 1 unit test passed |"):  # fmt: skip
        assert line in text, line
    headline = text.split("\n")[1]
    assert headline.startswith("### ") and "`jaffle`: " in headline
    assert "1 breaking change reaches 2 models" in headline  # daily_revenue, customer_segments
    assert checks["sluice/tests"]["output"]["title"] == "1 unit test passed"
    assert checks["sluice/pr-environment"]["history"] == ["queued", "in_progress", "completed"]
    assert world.query("pr_2", "SELECT last_name, last_name_upper FROM jaffle.customers "
                       "WHERE customer_id = 1") == [["P.", "P."]]  # fmt: skip

    # carol is an approver only in the PR's own config; alice is the author.
    github.add_review(2, "carol", "APPROVED", head)
    gl.deliver(service, "pull_request_review", gl.review(2, head, "carol", "approved", head))
    github.add_review(2, "alice", "APPROVED", head)
    gl.deliver(service, "pull_request_review", gl.review(2, head, "alice", "approved", head))
    summary = github.checks_on(head)["sluice/approval"]["output"]["summary"]
    assert github.checks_on(head)["sluice/approval"]["conclusion"] == "failure"
    assert "Not counted: @carol (not a required approver or owner)." in summary
    assert "@alice's own approval does not count (PR author)." in summary

    # dave may read but not write: his command is refused with a reason.
    gl.deliver(service, "issue_comment", gl.comment(2, "dave", "/sluice deploy", 501))
    assert "only users with write permission" in github.comments_on(2)[-1]["body"]
    assert github.merges == [] and github.deployments == []

    # A writer asks for a table diff restricted by a condition: answered in a new comment.
    where = "/sluice diff jaffle.orders --where \"status IN ('returned', 'completed')\""
    gl.deliver(service, "issue_comment", gl.comment(2, "carol", where, 502))
    answer = github.comments_on(2)[-1]["body"]
    assert answer.startswith(
        "@carol `jaffle.orders` in `pr_2` against prod where `status IN ('returned', 'completed')`:"
    ), answer
    assert "4 rows only in prod" in answer
    assert {"comment": 502, "content": "+1"} in github.reactions

    # bob approves from the check run's button.
    run = github.checks_on(head)["sluice/approval"]["id"]
    gl.deliver(service, "check_run", gl.click(2, head, "bob", run))
    gate = github.checks_on(head)["sluice/approval"]
    assert gate["conclusion"] == "success" and gate["output"]["title"] == "Approved"
    assert "Approved by @bob (1 of 1 required)." in gate["output"]["summary"]

    # Approved, but held by the soft policy: bob's /sluice deploy promotes nothing (the
    # promotion evaluates the policies again on the plan it would apply; no Spark job).
    before = world.versions("prod")
    github.branch_commits[head] = {sha_of(1)}  # the PR's head is on main's head
    gl.deliver(service, "issue_comment", gl.comment(2, "bob", "/sluice deploy", 503))
    reply = github.comments_on(2)[-1]["body"]
    assert "Not promoted to prod: blocked by policies" in reply, reply
    assert github.checks_on(head)["sluice/deploy"]["conclusion"] == "failure"
    assert world.versions("prod") == before and github.merges == []

    # carol is not named by the policy's override_by; frank, of octo/finance, lifts it for
    # this plan only, with a reason (recorded in the audit log).
    github.teams["octo/finance"] = ["frank"]
    github.permissions["frank"] = "write"
    override = "/sluice override finance-breaking quarter-end restatement, agreed with finance"
    gl.deliver(service, "issue_comment", gl.comment(2, "carol", override, 504))
    assert "you may not override `finance-breaking`" in github.comments_on(2)[-1]["body"]
    assert github.checks_on(head)["sluice/policy"]["conclusion"] == "failure"
    gl.deliver(service, "issue_comment", gl.comment(2, "frank", override, 505))
    assert "No policy blocks this plan now." in github.comments_on(2)[-1]["body"]
    policy = github.checks_on(head)["sluice/policy"]
    assert policy["conclusion"] == "success", policy["output"]
    assert "Overridden for this plan by @frank: quarter-end" in policy["output"]["text"]
    body = github.comments_on(2)[0]["body"]
    assert "**Policies:** ✅" in body and "failed, overridden by @frank" in body, body

    # Through the merge queue: GitHub asks for the checks on the group's head (main with the
    # PR merged), the commit it then merges. Every table is the PR's: nothing is written.
    pr_versions = world.versions("pr_2")
    files = world.table_files()
    merge = sha_of(3)
    world.commit(merge, pr)
    gl.deliver(service, "merge_group", merge_group(OWNER, merge, sha_of(1), 2))
    queued = github.checks_on(merge)
    assert {n: c["conclusion"] for n, c in queued.items()} == dict.fromkeys(
        ("sluice/tests", "sluice/pr-environment", "sluice/prod-plan", "sluice/approval"),
        "success",
    ), queued
    title = queued["sluice/approval"]["output"]["title"]
    assert title == "Approved: every change of the combined plan", title
    assert world.versions(merge_group_environment(merge)) == pr_versions
    assert world.table_files() == files, "the merge group's build wrote table files"

    # Merge: prod is promoted by swapping views to the tables the PR built.
    world.commit(merge, pr, branch="main")
    github.pulls[2]["state"], github.pulls[2]["merged"] = "closed", True
    gl.deliver(service, "pull_request", gl.pull(2, head, "alice", "closed", merged=True,
                                            merge_commit_sha=merge))  # fmt: skip
    deploy = github.checks_on(merge)["sluice/deploy"]
    assert deploy["conclusion"] == "success", deploy["output"]
    assert deploy["output"]["title"] == "Promoted by virtual update"
    assert "no data was written" in deploy["output"]["summary"]
    assert world.table_files() == files, "promotion wrote table files"
    prod_versions = world.versions("prod")
    for model in (
        "jaffle.orders",
        "jaffle.customers",
        "jaffle.daily_revenue",
        "jaffle.customer_segments",
    ):
        assert prod_versions[model] == pr_versions[model], model
    assert world.query("prod", "SELECT COUNT(*) FROM jaffle.orders WHERE status = 'returned'") == [
        [0]
    ]
    held, deployment = github.deployments  # bob's /sluice deploy held by the policy, the merge
    assert held["ref"] == head and held["statuses"][-1]["state"] == "failure"
    assert deployment["ref"] == merge and deployment["environment"] == "prod"
    assert [s["state"] for s in deployment["statuses"]] == ["in_progress", "success"]
    body = github.comments_on(2)[0]["body"]
    assert "**Promotion** of `" + merge[:7] + "`: 🚀 Promoted by virtual update." in body
    assert "`pr_2` is removed (promoted to prod)" in body

    # The environment was invalidated at once; the janitor drops it, and the merge group's,
    # which the queue's "destroyed" let go.
    gl.deliver(service, "merge_group", merge_group(OWNER, merge, sha_of(1), 2,
                                                   action="destroyed", reason="merged"))  # fmt: skip
    world.janitor_drops("pr_2", world.settings(), "github", OWNER)
    with pytest.raises(SluiceError):
        world.query("pr_2", "SELECT COUNT(*) FROM jaffle.orders")
    store = open_state(world.url)
    try:
        assert store.get_environment(merge_group_environment(merge)) is None
    finally:
        store.close()

    # Neither the token nor the webhook secret is in anything the service produced.
    produced = json.dumps([github.comments, github.check_runs, github.statuses,
                           github.deployments, github.reactions]) + caplog.text  # fmt: skip
    world.assert_secrets_absent(produced, "ghp_lifecycleToken", SECRET)


def test_an_admin_merge_of_unapproved_changes_does_not_reach_prod(
    world: World, service: Service
) -> None:
    github = world.github
    before = world.versions("prod")
    head, merge = sha_of(4), sha_of(5)
    change = gl.tree(world, "pr4", world.github.refs["main"])
    edit(change / "models" / "customers.sql", "  c.last_name,\n", "  c.last_name,\n  1 AS one,\n")
    world.commit(head, change)
    world.commit(merge, change, branch="main")
    github.add_pull(4, head, author="alice", head_ref="feature-4")
    # Merged by an admin past the gate: Sluice never built or approved it.
    gl.deliver(service, "pull_request", gl.pull(4, head, "alice", "closed", merged=True,
                                            merge_commit_sha=merge))  # fmt: skip
    deploy = github.checks_on(merge)["sluice/deploy"]
    assert deploy["conclusion"] == "failure"
    assert deploy["output"]["title"] == "1 unapproved change: prod is unchanged"
    assert "- `jaffle.customers` (change)" in deploy["output"]["summary"]
    assert world.versions("prod") == before
    assert github.deployments[-1]["statuses"][-1]["state"] == "failure"
    # Put main back where prod is, for the next test.
    world.commit(sha_of(6), world.trees[sha_of(3)], branch="main")
