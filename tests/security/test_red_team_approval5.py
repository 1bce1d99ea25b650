"""Red team on GitLab approvals bound by the merge request's versions, round 5: the head a
GitLab approval counts for (``approval._bound``, ``_version_at``: the head of the latest
version ``GET .../versions`` lists made before the approval's ``approved_at``), and what
the gate then asks of it (``gate_rules._approves``: the head's plan is the current one,
and the approval came once the head had it, ``Ledger.plan_times``), as the code stood
after commits f0deacb, b8b83d9 and 0a5d1c0 (hooks no longer choose a head).

The attacker is the merge request's author, a Developer or a Maintainer of the project
(a maintainer holds its webhook token, and can turn its webhook off and on): they push,
force-push, approve and unapprove their own approval, resend or forge hook bodies. The
required approver (carol) is honest and approves what she saw: the plan Sluice's comment
showed her then.

Each test asserts what a sound service does. An attack that works against the code as it
is is a ``xfail(strict=True)`` naming the code path and the fix proposed; the others are
attacks tried and defended, each saying which defence holds. Driven through the whole
service: the real app, real Merge Request Hook bodies signed with the project's own token,
GitLab at the wire (python-gitlab against ``FakeGitLab``), the queue and the scripted
warehouse. The fake's clock is set per test (``clock``): GitLab's clock agreeing with the
service's to the millisecond (as NTP keeps them), or running ahead of it; the fake's own
clock runs a second and more ahead of the real time (a second more at each stamp it
gives faster than one a second), which would hide the order of an approval and a plan
published close to it.

Findings (each closed since, its test passing): 1. a head pushed back keeps its first
plan's time, so an approval given while the comment showed another head's plan counts for
it; 2. the gate compares GitLab's approved_at with the service's clock (closed: each
publication is kept by GitLab's clock too, the note's updated_at); 3. an approval or unapproval hook runs once by a
content key made of the merge request's updated_at, which an approval does not move: an
approver's taking back is skipped as a replay (of a forged hook, or of their own earlier
one), the content stays approved and a merge promotes it; 4. the backfill budget's
approval counts for a head whose hold was never shown.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from sluice.bot.flow.reviewed_plan import PlanReview
from sluice.bot.forge.base import PULL_VERSIONS_LIMIT
from tests.helpers import gate_world as gw
from tests.helpers.gitlab_gate import (
    APPROVAL,
    PATH,
    PID,
    S8,
    S9,
    approval_hook,
    approval_state,
    clock,
    commit_heads,
    deliver_update,
    iso_ms,
    move_head,
    mr_world,
    open_mr8,
    serving,
)
from tests.helpers.gitlab_hooks import mr_open_hook
from tests.helpers.gitlab_service import GitLabService, moment, mr_hook, send
from tests.helpers.gitlab_wire import FakeGitLab, fake_sha
from tests.helpers.lifecycle_prod import GitLabWorld

BUDGET = "    backfill:\n      max_intervals: 0\n      approver: carol\n"
"""``sluice.gate.backfill``: a build backfilling anything waits for carol."""


@pytest.fixture
def world(tmp_path: Path) -> Iterator[GitLabWorld]:
    env = mr_world(tmp_path)
    yield env
    env.close()


@pytest.fixture
def service(world: GitLabWorld) -> Iterator[GitLabService]:
    with serving(world) as running:
        yield running


# == the merge request =================================================================


def _push(world: GitLabWorld, service: GitLabService, sha: str, old: str) -> None:
    """alice pushes ``sha``; GitLab's update hook; built."""
    move_head(world.gitlab, sha)
    deliver_update(world, service, sha, old)


def _mr_updated(gitlab: FakeGitLab) -> str:
    """MR !8's ``updated_at`` as a hook writes it (``2026-11-30 21:00:00 UTC``): what
    GitLab's approval and unapproval hooks carry, an approval not moving it (GitLab writes
    the time of the merge request's last update there, from before the approval)."""
    made = datetime.fromisoformat(str(gitlab.merge_requests[8]["updated_at"]))
    return made.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _shown(gitlab: FakeGitLab) -> str:
    """The plan comment carol reads on MR !8 now."""
    notes = gitlab.bot_notes(8)
    assert notes, "Sluice posted no comment"
    return str(notes[-1]["body"])


# == versions and heads: a head pushed again ===========================================


def test_an_approval_given_while_another_plan_is_shown_does_not_count_for_a_head_pushed_back(
    world: GitLabWorld, service: GitLabService
) -> None:
    """alice opens MR !8 at S9 (orders and customers), then pushes S8 (orders alone):
    Sluice's comment shows S8's plan, which carol reads. alice turns the project's
    webhook off and force-pushes S9 back: GitLab makes a version of S9; Sluice hears
    nothing, its comment still shows S8's plan. carol approves what she read. alice
    turns the webhook on; GitLab's hooks come. carol approved S8's plan and never saw
    S9's, yet GitLab says she approved after S9's version, and S9 has had its
    plan since long before: the gate passes, and what it records approved goes to prod on
    the merge."""
    gitlab = world.gitlab
    clock(gitlab)  # GitLab's clock agrees with the service's
    commit_heads(world)
    open_mr8(world, service, S9)
    _push(world, service, S8, S9)
    assert approval_state(gitlab, S8)["state"] == "failed"  # nobody approved yet
    shown = _shown(gitlab)
    assert S8[:7] in shown and S9[:7] not in shown, shown

    move_head(gitlab, S9)  # the webhook is off: no hook
    assert _shown(gitlab) == shown  # what carol reads: S8's plan
    gitlab.approve(8, "carol")

    deliver_update(world, service, S9, S8)  # the webhook on again
    approval_hook(world, service, S9)
    after = approval_state(gitlab, S9)
    assert after["state"] != "success", (
        f"carol approved while the comment showed {S8[:7]}'s plan; her approval "
        f"counts for {S9[:7]}'s: {after['description']}"
    )


def test_an_approval_given_while_another_plan_is_shown_does_not_count_for_a_new_head(
    world: GitLabWorld, service: GitLabService
) -> None:
    """The same, where the head pushed with the webhook off is new (never planned): GitLab
    binds carol's approval to it, but it got its plan after she approved. Defended:
    ``gate_rules._approves`` counts no approval given before its head had the plan it has
    (``Ledger.plan_times``, set when the plan is published)."""
    gitlab = world.gitlab
    clock(gitlab)
    commit_heads(world)
    open_mr8(world, service, S8)
    move_head(gitlab, S9)  # the webhook is off
    gitlab.approve(8, "carol")  # carol read S8's plan
    deliver_update(world, service, S9, S8)
    approval_hook(world, service, S9)
    after = approval_state(gitlab, S9)
    assert after["state"] == "failed", after
    # carol takes it back and approves again, once she has seen S9's plan: it counts.
    gitlab.unapprove(8, "carol")
    gitlab.approve(8, "carol")
    approval_hook(world, service, S9, updated_at=moment(5))  # not the hook before's
    assert approval_state(gitlab, S9)["state"] == "success"


def test_an_approval_of_a_head_does_not_count_for_an_older_head_pushed_back(
    world: GitLabWorld, service: GitLabService
) -> None:
    """alice opens MR !8 at S8, pushes S9; carol approves S9's plan. alice
    force-pushes S8 back (GitLab makes a new version whose head is S8, after carol's
    approval) and resends GitLab's approval hook of carol's naming S8. Defended:
    ``_version_at`` binds carol's approval to the latest version made *before* it (sha
    9's), never to a later one, nor to a head a hook names; S8's plan is not S9's."""
    gitlab = world.gitlab
    clock(gitlab)
    commit_heads(world)
    open_mr8(world, service, S8)
    _push(world, service, S9, S8)
    gitlab.approve(8, "carol")
    approval_hook(world, service, S9)
    assert approval_state(gitlab, S9)["state"] == "success"

    _push(world, service, S8, S9)
    approval_hook(world, service, S8)
    after = approval_state(gitlab, S8)
    assert after["state"] == "failed", (
        f"carol's approval of {S9[:7]} counts for {S8[:7]}: {after['description']}"
    )


def test_a_new_version_at_the_same_head_keeps_an_approval_on_it(
    world: GitLabWorld, service: GitLabService
) -> None:
    """GitLab makes a version when the base moves (a retarget, a rebase of the target) with
    the head unchanged. carol approves S8; GitLab then lists a newer version of S8,
    then alice pushes S9 and back to S8. Whatever the versions, carol's approval is of
    S8 (its plan unchanged: it counts), and never of S9 (stale there). Defended: the
    binding takes the head of the version before the approval, and a head's plan is its
    own."""
    gitlab = world.gitlab
    now = clock(gitlab)
    commit_heads(world)
    open_mr8(world, service, S8)
    gitlab.approve(8, "carol")
    approval_hook(world, service, S8)
    assert approval_state(gitlab, S8)["state"] == "success"
    with gitlab.lock:  # a version at the same head, as a retarget makes
        again = dict(gitlab.versions[8][-1], id=gitlab._next(), created_at=iso_ms(now()))
        gitlab.versions[8].append(again)
    _push(world, service, S9, S8)
    assert approval_state(gitlab, S9)["state"] == "failed"
    _push(world, service, S8, S9)
    assert approval_state(gitlab, S8)["state"] == "success"


# == GitLab's clock and the service's ==================================================


def test_an_approval_before_the_plan_does_not_count_when_gitlabs_clock_runs_ahead(
    world: GitLabWorld, service: GitLabService
) -> None:
    """GitLab's clock runs two minutes ahead of the service's (an instance whose hosts
    drift, or the service's). alice opens MR !8 at S8; carol reads its plan. alice
    pushes S9 and carol approves at once, before Sluice has even seen the push: what she
    saw is S8's plan. GitLab binds her approval to S9's version, rightly; S9 then
    gets its plan, stamped by the service's clock two minutes before her approved_at."""
    gitlab = world.gitlab
    clock(gitlab, ahead_ms=120_000)
    commit_heads(world)
    open_mr8(world, service, S8)
    move_head(gitlab, S9)
    gitlab.approve(8, "carol")
    deliver_update(world, service, S9, S8)
    approval_hook(world, service, S9)
    after = approval_state(gitlab, S9)
    assert after["state"] != "success", (
        f"carol approved before {S9[:7]} had a plan; her approval counts for it: "
        f"{after['description']}"
    )


def _approved_s8_then_pushed_s9_back(world: GitLabWorld, service: GitLabService) -> None:
    """alice opens MR !8 at S9, pushes S8 (each planned); carol approves S8's plan; alice
    force-pushes S9 back, with no hook yet. S9 has had its plan since before carol's
    approval: were her approval bound to S9, it would count there."""
    gitlab = world.gitlab
    commit_heads(world)
    open_mr8(world, service, S9)
    _push(world, service, S8, S9)
    gitlab.approve(8, "carol")
    approval_hook(world, service, S8)
    assert approval_state(gitlab, S8)["state"] == "success"
    move_head(gitlab, S9)


def test_versions_and_approvals_in_another_time_zone_compare_as_instants(
    world: GitLabWorld, service: GitLabService
) -> None:
    """A GitLab whose time zone is +09:00 writes its times with that offset: carol's
    approval of S8 is listed as ``...T19:..+09:00`` while the version of S9 pushed back
    after it reads ``...T10:..Z`` (two formats of one instance at once). Compared as text,
    or with the offset dropped, her approval would come after S9's version and count for
    S9. Defended: ``created_ms`` reads each as an instant; her approval is of S8."""
    gitlab = world.gitlab
    clock(gitlab)
    _approved_s8_then_pushed_s9_back(world, service)
    with gitlab.lock:
        given = gitlab.approvals[8][-1]
        ms = int(datetime.fromisoformat(given["approved_at"]).timestamp() * 1000)
        given["approved_at"] = iso_ms(ms, timezone(timedelta(hours=9)))
    assert given["approved_at"].endswith("+09:00")
    assert given["approved_at"] > gitlab.versions[8][-1]["created_at"]  # as text: after S9's
    deliver_update(world, service, S9, S8)
    approval_hook(world, service, S9)
    after = approval_state(gitlab, S9)
    assert after["state"] == "failed", (
        f"carol's approval of {S8[:7]}, given before {S9[:7]} was pushed back, counts for "
        f"it: {after['description']}"
    )


def test_an_approval_in_the_second_of_a_push_counts_for_neither_head(
    world: GitLabWorld, service: GitLabService
) -> None:
    """GitLab writes the version of S9 (pushed back) to the second (an older GitLab, or a
    time that fell on a whole second) and carol's approval in that very second, 900 ms
    on: she may have approved before the push or after. Defended: ``_version_at`` binds no
    head then (the approval is stale), neither S9 (pushed after it, maybe) nor S8 (the
    version before)."""
    gitlab = world.gitlab
    now = clock(gitlab)
    commit_heads(world)
    open_mr8(world, service, S9)
    _push(world, service, S8, S9)
    move_head(gitlab, S9)
    gitlab.approve(8, "carol")
    with gitlab.lock:
        second = (now() // 1000 + 1) * 1000  # a whole second after every version so far
        assert gitlab.versions[8][-2]["created_at"] < iso_ms(second)  # S8's, before
        gitlab.versions[8][-1]["created_at"] = iso_ms(second)  # "...:SS.000Z"
        gitlab.approvals[8][-1]["approved_at"] = iso_ms(second + 900)
    deliver_update(world, service, S9, S8)
    approval_hook(world, service, S9)
    after = approval_state(gitlab, S9)
    assert after["state"] == "failed", after
    _push(world, service, S8, S9)  # nor for S8, whose plan she may have seen
    after = approval_state(gitlab, S8)
    assert after["state"] == "failed", after


# == GitLab's word, not a hook's =======================================================


def test_a_forged_approval_hook_of_an_approver_who_never_approved_counts_for_nothing(
    world: GitLabWorld, service: GitLabService
) -> None:
    """alice (a maintainer: she signs any hook body for the project) posts an approval hook
    of carol's naming the head, and an unapproval of her own. Defended: the gate reads the
    approvals from GitLab's API with the service's token (``GitLabForge.reviews``); a hook
    only makes it ask again (``dispatch._on_review`` records nothing of it)."""
    gitlab = world.gitlab
    clock(gitlab)
    commit_heads(world)
    open_mr8(world, service, S8)
    send(service, mr_hook(gitlab, 8, "approval", S8, "carol", updated_at=moment()))
    send(service, mr_hook(gitlab, 8, "approved", S8, "carol", updated_at=moment()))
    after = approval_state(gitlab, S8)
    assert after["state"] == "failed", after
    assert gitlab.approvals.get(8, []) == []


def test_an_approval_older_than_the_versions_read_counts_for_no_plan(
    world: GitLabWorld, service: GitLabService
) -> None:
    """carol approves S8's plan; alice then pushes S9 back and has GitLab make a thousand
    versions of it (a thousand retargets or pushes): the service reads the newest 1,000
    versions only (``PULL_VERSIONS_LIMIT``), every one S9's, and carol's approval is older
    than all of them. Taken as of the oldest version read, it would count for S9, planned
    before she approved. Defended: ``_version_at`` binds it to no head (stale); the versions
    are paged newest first, all ten pages read."""
    gitlab = world.gitlab
    now = clock(gitlab)
    _approved_s8_then_pushed_s9_back(world, service)
    with gitlab.lock:
        template = gitlab.versions[8][-1]
        assert template["head_commit_sha"] == S9
        for n in range(PULL_VERSIONS_LIMIT - 1):
            gitlab.versions[8].append(dict(template, id=gitlab._next(),
                                           created_at=iso_ms(now()),
                                           patch_id_sha=fake_sha(f"patch {n}")))  # fmt: skip
    asked = gitlab.asked("GET", "/versions")
    deliver_update(world, service, S9, S8)
    after = approval_state(gitlab, S9)
    assert after["state"] == "failed", after
    assert gitlab.asked("GET", "/versions") - asked >= PULL_VERSIONS_LIMIT // 100


# == taking an approval back ===========================================================


def test_a_forged_unapproval_does_not_swallow_the_approvers_own(
    world: GitLabWorld, service: GitLabService
) -> None:
    """carol approves S8's plan: passed. alice, a maintainer, posts GitLab's unapproval hook
    of carol's at S8 with the merge request's updated_at (GitLab shows it to anyone who can
    read the MR): the gate asks GitLab, carol's approval is there, nothing changes. carol
    then takes her approval back in GitLab, whose hook is alice's to the byte."""
    gitlab = world.gitlab
    clock(gitlab)
    commit_heads(world)
    open_mr8(world, service, S8)
    gitlab.approve(8, "carol")
    approval_hook(world, service, S8, updated_at=_mr_updated(gitlab))
    assert approval_state(gitlab, S8)["state"] == "success"

    at = _mr_updated(gitlab)
    approval_hook(world, service, S8, action="unapproval", updated_at=at)  # forged
    assert approval_state(gitlab, S8)["state"] == "success"  # carol still approves
    gitlab.unapprove(8, "carol")
    approval_hook(world, service, S8, action="unapproval", updated_at=at)  # GitLab's own
    after = approval_state(gitlab, S8)
    assert after["state"] != "success", (
        f"carol took her approval back; the gate still passes: {after['description']}"
    )


def test_an_approval_taken_back_twice_is_taken_back(
    world: GitLabWorld, service: GitLabService
) -> None:
    """carol approves S8 (passed), takes it back (withdrawn), approves again, and alice, a
    Developer, approves her own merge request (which counts for nothing, but GitLab sends
    its hook): the gate asks GitLab again and passes on carol's second approval. carol
    takes it back again."""
    gitlab = world.gitlab
    clock(gitlab)
    commit_heads(world)
    open_mr8(world, service, S8)
    at = _mr_updated(gitlab)
    gitlab.approve(8, "carol")
    approval_hook(world, service, S8, updated_at=at)
    assert approval_state(gitlab, S8)["state"] == "success"
    gitlab.unapprove(8, "carol")
    approval_hook(world, service, S8, action="unapproval", updated_at=at)
    assert approval_state(gitlab, S8)["state"] == "failed"

    gitlab.approve(8, "carol")
    approval_hook(world, service, S8, updated_at=at)
    gitlab.approve(8, "alice")
    approval_hook(world, service, S8, user="alice", updated_at=at)
    assert approval_state(gitlab, S8)["state"] == "success"
    gitlab.unapprove(8, "carol")
    approval_hook(world, service, S8, action="unapproval", updated_at=at)
    after = approval_state(gitlab, S8)
    assert after["state"] != "success", (
        f"carol took her approval back; the gate still passes: {after['description']}"
    )


def test_a_taken_back_approval_does_not_promote_on_merge(
    world: GitLabWorld, service: GitLabService
) -> None:
    """As the forged unapproval above; then alice merges MR !8 (the check is green)."""
    gitlab = world.gitlab
    clock(gitlab)
    commit_heads(world)
    open_mr8(world, service, S8)
    gitlab.approve(8, "carol")
    at = _mr_updated(gitlab)
    approval_hook(world, service, S8, updated_at=at)
    approval_hook(world, service, S8, action="unapproval", updated_at=at)  # forged
    gitlab.unapprove(8, "carol")
    approval_hook(world, service, S8, action="unapproval", updated_at=at)  # GitLab's own

    merge = fake_sha("red team approval 5: the merge of S8")
    world.commit(merge, world.trees[S8], branch="main")
    gitlab.merge_requests[8].update(state="merged", merge_commit_sha=merge)
    send(service, mr_hook(gitlab, 8, "merge", S8, "alice", state="merged",
                          merge_commit_sha=merge, updated_at=moment()))  # fmt: skip
    deploy = gitlab.statuses_on(merge).get("sluice/deploy")
    assert deploy is not None, gitlab.statuses_on(merge)
    assert deploy["state"] != "success", (
        f"prod promoted a change whose approval carol took back: {deploy['description']}"
    )


# == the backfill budget ===============================================================


def test_a_budget_approval_does_not_release_a_head_whose_hold_was_never_shown(
    tmp_path: Path,
) -> None:
    """The gate holds a build backfilling more than one interval until carol approves it.
    alice opens MR !8 at S8: held, carol reads what it backfills. alice pushes S9 with the
    webhook off and carol approves what she read; the webhook on, Sluice sees S9, which
    it never held, and builds it: carol's approval counts for it (bound to S9's version)."""
    world = mr_world(tmp_path, BUDGET)
    try:
        with serving(world) as service:
            gitlab = world.gitlab
            clock(gitlab)
            commit_heads(world)
            gitlab.add_mr(8, sha=S8, source_branch="feature-8", author="alice")
            send(service, mr_open_hook(gitlab, 8, S8, PATH, PID))
            held = gitlab.statuses_on(S8)[APPROVAL]
            assert held["description"] == "Waiting for the build", held  # held
            assert "sluice/pr-environment" not in gitlab.statuses_on(S8) or (
                gitlab.statuses_on(S8)["sluice/pr-environment"]["state"] != "success"
            )

            move_head(gitlab, S9)  # the webhook is off
            gitlab.approve(8, "carol")  # she read S8's hold
            update = mr_hook(gitlab, 8, "update", S9, "alice", oldrev=S8, updated_at=moment())
            send(service, update)
            built = gitlab.statuses_on(S9).get("sluice/pr-environment")
            assert built is None or built["state"] != "success", (
                f"carol's approval of S8's hold released {S9[:7]}'s build, never held: {built}"
            )
    finally:
        world.close()


# == GitHub: its reviews name their commit =============================================


def test_on_github_a_review_given_while_another_plan_is_shown_does_not_count_for_a_head_pushed_back(
    tmp_path: Path,
) -> None:
    """PR 7 at A (planned), then B (planned: the comment shows B's plan); alice force-pushes
    A back and bob, reading B's plan, approves: GitHub names A, whose plan bob never saw
    shown. The GitLab binding is not asked (every review names its commit)."""
    bot = gw.make_bot(tmp_path, gw.GATED, {"alice": "write", "bob": "write", "carol": "admin"})
    try:
        bot.forge.open_pull(7, head_sha=gw.A, base="main", author="alice")
        gw.plan(bot, gw.A, PlanReview("fp-a", (("s.a", "k-a"),), {}, {}))
        bot.forge.push(7, gw.B)
        gw.plan(bot, gw.B, PlanReview("fp-b", (("s.b", "k-b"),), {}, {}))
        bot.forge.push(7, gw.A)  # back: Sluice has not shown A's plan again
        gw.approve(bot, "bob", gw.A, 41)
        assert not any(name == "pull_versions" for name, _args in bot.forge.calls)
        after = bot.approval(gw.A)
        assert after.conclusion != "success", after.summary
    finally:
        bot.close()
