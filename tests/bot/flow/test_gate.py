"""The approval gate: settings from the prod branch's config, and each approval rule."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from itertools import count
from pathlib import Path

import pytest

from sluice.bot.flow import trust
from sluice.bot.flow.gate_rules import (
    ActionApproval,
    GateInput,
    GateResult,
    bot_account,
    budget_to_approve,
    evaluate,
    owners_to_approve,
    same_moment,
    shown_at,
    word_key,
)
from sluice.bot.forge.base import Review
from sluice.core.errors import ConfigError
from sluice.core.gate_settings import DeploySettings, GateSettings, RequiredApprovers


def gate_config(text: str | None, path: str = "config.yaml") -> tuple[GateSettings, DeploySettings]:
    """The gate and deploy settings of a config.yaml's text, as the service reads them
    (one parse of the whole file: :func:`sluice.bot.flow.trust.parse`)."""
    parsed = trust.parse(trust.Source.of_config(text, path))
    return parsed.gate, parsed.deploy


# Two pushes: c1 and c2 carry plan P1 (c2 changed only a comment), c3 carries plan P2.
PLANS = {"c1" * 20: "P1", "c2" * 20: "P1", "c3" * 20: "P2"}
C1, C2, C3 = "c1" * 20, "c2" * 20, "c3" * 20
_ids = count(1)


def review(user: str, state: str = "APPROVED", sha: str | None = C3) -> Review:
    return Review(next(_ids), user, state, sha, None)


def settings(
    users: Sequence[str] = ("alice", "bob"),
    teams: Sequence[str] = (),
    count: int | None = None,
    owners: str = "never",
) -> GateSettings:
    approvers: dict[str, object] = {"users": list(users), "teams": list(teams)}
    if count is not None:
        approvers["count"] = count
    return GateSettings.model_validate(
        {"required_approvers": approvers, "owners_must_approve": owners}
    )


def run(
    gate_settings: GateSettings,
    reviews: Sequence[Review],
    *,
    author: str = "carol",
    current: str = "P2",
    teams: Mapping[str, frozenset[str]] | None = None,
    owners: Mapping[str, str] | None = None,
    actions: Sequence[tuple[str, ...]] = (),
    planned_at: Mapping[str, int] | None = None,
    pushers: frozenset[str] = frozenset(),
    bots: frozenset[str] = frozenset(),
    prod_owners: frozenset[str] | None = None,
    shown: Sequence[tuple[int, str]] = (),
    planned_here: Mapping[str, int] | None = None,
    shown_here: Sequence[tuple[int, str]] | None = None,
    learnt: Mapping[str, int] | None = None,
) -> GateResult:
    """The gate on the test's facts; by the service's clock (a click's) as by the forge's
    (a review's) unless the test gives the service's apart."""
    return evaluate(
        gate_settings,
        GateInput(
            author=author,
            reviews=list(reviews),
            plans=PLANS,
            current_plan=current,
            team_members=teams or {},
            owners=owners or {},
            action_approvals=[ActionApproval(*action) for action in actions],  # type: ignore[arg-type]
            planned_at=planned_at or {},
            shown=shown,
            planned_here=planned_at or {} if planned_here is None else planned_here,
            shown_here=shown if shown_here is None else shown_here,
            pushers=pushers,
            bot_pushers=bots,
            # Prod records every owner named (unless the test says): a new model's owner
            # is its header's alone.
            prod_owners=frozenset((owners or {}).values()) if prod_owners is None else prod_owners,
            learnt=learnt or {},
        ),
    )


# --- settings ---------------------------------------------------------------------------


def test_defaults_without_file_or_sections() -> None:
    for text in (
        None,
        "",
        "model_defaults:\n  dialect: spark\n",
        "sluice:\n",
        "sluice:\n  gate:\n",
    ):
        gate, deploy = gate_config(text)
        assert gate == GateSettings()
        assert deploy == DeploySettings()
    assert GateSettings().required_approvers.count == 0
    assert GateSettings().owners_must_approve == "never"
    assert DeploySettings() == DeploySettings(
        prod_branch="main", on="merge", tag_pattern="v*", merge_method=None
    )


def test_count_defaults_to_one_when_approvers_are_listed() -> None:
    assert RequiredApprovers(users=("alice",)).count == 1
    assert RequiredApprovers(teams=("acme/data",)).count == 1
    assert RequiredApprovers().count == 0


def test_full_config_is_read() -> None:
    text = """\
model_defaults:
  dialect: duckdb
sluice:
  spark:
    master: local[2]
  gate:
    required_approvers:
      users: ["@Alice", bob]
      teams: [acme/data-eng]
      count: 2
    owners_must_approve: breaking
  deploy:
    prod_branch: production
    on: tag
    tag_pattern: "release-[0-9]*"
    merge_method: squash
"""
    gate, deploy = gate_config(text)
    assert gate.required_approvers == RequiredApprovers(
        users=("Alice", "bob"), teams=("acme/data-eng",), count=2
    )
    assert gate.owners_must_approve == "breaking"
    assert deploy == DeploySettings(
        prod_branch="production", on="tag", tag_pattern="release-[0-9]*", merge_method="squash"
    )
    assert deploy.tag_matches("release-42")
    assert deploy.tag_matches("refs/tags/release-7")
    assert not deploy.tag_matches("release-x")
    assert not deploy.tag_matches("Release-42")  # fnmatch, case-sensitive


def test_the_whole_sluice_section_is_read_once_with_one_translator() -> None:
    # A typo beside the gate is an error of the same file, found by the same parse.
    with pytest.raises(ConfigError) as info:
        gate_config("sluice:\n  sparkk: {}\n  gate:\n    owners_must_approve: direct\n")
    assert info.value.line == 2 and "'sluice.sparkk'" in str(info.value)
    assert info.value.hint is not None and "did you mean 'spark'" in info.value.hint


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        (
            "sluice:\n  deploy:\n    prod_branch: main\n    on: push\n",
            4,
            "'sluice.deploy.on'",
        ),
        (
            "sluice:\n  gate:\n    owners_must_approve: always\n",
            3,
            "'sluice.gate.owners_must_approve'",
        ),
        (
            "sluice:\n  gate:\n    required_approvers:\n      users: [a]\n      count: -1\n",
            5,
            "'sluice.gate.required_approvers.count'",
        ),
        (
            "sluice:\n  gate:\n    required_approvers:\n      users: [a]\n      count: '2'\n",
            5,
            "expected a whole number, got '2'",
        ),
        (
            "sluice:\n  gate:\n    required_approvers:\n      users: [a, b]\n      count: 3\n",
            5,
            "only 2 user(s) listed",
        ),
        (
            "sluice:\n  gate:\n    required_approvers:\n      count: 1\n",
            4,
            "no users or teams",
        ),
        (
            "sluice:\n  gate:\n    required_approvers:\n      users: alice\n",
            4,
            "'sluice.gate.required_approvers.users'",
        ),
        (
            "sluice:\n  gate:\n    required_approvers:\n      users: [acme/data]\n",
            4,
            "teams go under 'teams'",
        ),
        (
            "sluice:\n  gate:\n    required_approvers:\n      teams: [data]\n",
            4,
            "org/team",
        ),
        (
            "sluice:\n  gate:\n    required_aprovers:\n      users: [a]\n",
            3,
            "unknown setting 'sluice.gate.required_aprovers'",
        ),
        (
            "sluice:\n  deploy:\n    merge_method: fast-forward\n",
            3,
            "'sluice.deploy.merge_method'",
        ),
        ("sluice:\n  gate: [alice]\n", 2, "'sluice.gate': expected a mapping"),
        ("sluice: yes\n", 1, "'sluice': expected a mapping"),
        ("- a\n- b\n", 1, "must be a mapping of sections"),
        ("sluice:\n  gate:\n    x: [\n", 4, "invalid YAML"),
        ("sluice:\n  gate: {}\n  gate: {}\n", 3, "duplicate key 'gate'"),
    ],
)
def test_bad_settings_name_file_and_line(text: str, line: int, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        gate_config(text, path="project/config.yaml")
    error = info.value
    assert error.path == "project/config.yaml"
    assert error.line == line
    assert words in str(error)
    assert error.hint
    assert f"project/config.yaml:{line}" in str(error)


def test_unknown_setting_hint_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError) as info:
        gate_config("sluice:\n  deploy:\n    brunch: main\n")
    assert info.value.hint is not None
    assert "prod_branch" in info.value.hint
    assert "tag_pattern" in info.value.hint


# --- no requirements ----------------------------------------------------------------


def test_nothing_required_passes_and_says_so() -> None:
    result = run(GateSettings(), [])
    assert result.ok
    assert result.conclusion == "success"
    assert result.missing == 0
    assert result.approved_by == ()
    assert "No approval is required" in result.summary


def test_owner_rule_with_no_owned_model_passes() -> None:
    result = run(settings(users=(), owners="direct"), [], owners={})
    assert result.ok
    assert "No approval is required" in result.summary


# --- required approvers ---------------------------------------------------------------


def test_no_approval_yet_fails_and_lists_who_may_approve() -> None:
    result = run(settings(), [])
    assert result.conclusion == "failure"
    assert result.missing == 1
    assert result.eligible == ("alice", "bob")
    assert "@alice and @bob" in result.summary
    assert "1 more approval needed" in result.summary


def test_eligible_approval_of_current_plan_passes() -> None:
    result = run(settings(), [review("alice")])
    assert result.ok
    assert result.approved_by == ("alice",)
    assert result.missing == 0
    assert result.eligible == ("bob",)
    assert "Approved by @alice (1 of 1 required)" in result.summary


def test_approval_by_someone_not_listed_does_not_count() -> None:
    result = run(settings(), [review("mallory")])
    assert not result.ok
    assert result.approved_by == ()
    assert "@mallory" in result.summary
    assert "not a required approver" in result.summary


def test_self_approval_is_ignored() -> None:
    result = run(settings(users=("carol", "alice")), [review("carol")], author="carol")
    assert not result.ok
    assert result.approved_by == ()
    assert result.eligible == ("alice",)  # the author may never approve
    assert "own approval does not count" in result.summary


def test_self_approval_ignored_case_insensitively_and_via_action() -> None:
    result = run(
        settings(users=("Carol", "alice")),
        [review("CAROL")],
        author="carol",
        actions=[("Carol", C3)],
    )
    assert not result.ok
    assert result.approved_by == ()


def test_author_as_only_listed_approver_leaves_nobody() -> None:
    result = run(settings(users=("carol",)), [], author="carol")
    assert not result.ok
    assert result.eligible == ()
    assert "nobody else may approve" in result.summary


def test_count_greater_than_one() -> None:
    gate_settings = settings(users=("alice", "bob", "dave"), count=2)
    one = run(gate_settings, [review("alice")])
    assert not one.ok
    assert one.missing == 1
    assert one.eligible == ("bob", "dave")
    assert "1 of 2 required" in one.summary
    two = run(gate_settings, [review("alice"), review("dave")])
    assert two.ok
    assert two.approved_by == ("alice", "dave")
    # The same person approving twice is one approval.
    twice = run(gate_settings, [review("alice"), review("alice")])
    assert not twice.ok
    assert twice.approved_by == ("alice",)


def test_names_compare_case_insensitively() -> None:
    result = run(settings(users=("Alice",)), [review("aLiCe")])
    assert result.ok
    assert result.approved_by == ("aLiCe",)
    team = run(
        settings(users=(), teams=("Acme/Data",)),
        [review("DAVE")],
        teams={"acme/data": frozenset({"dave"})},
    )
    assert team.ok


def test_team_membership() -> None:
    gate_settings = settings(users=(), teams=("acme/data",))
    members = {"acme/data": frozenset({"dave", "erin", "carol"})}
    waiting = run(gate_settings, [], teams=members)
    assert not waiting.ok
    assert waiting.eligible == ("dave", "erin")  # carol is the author
    assert run(gate_settings, [review("erin")], teams=members).ok
    assert not run(gate_settings, [review("frank")], teams=members).ok
    assert not run(gate_settings, [review("carol")], teams=members).ok


def test_team_with_unknown_members_is_named_in_the_summary() -> None:
    result = run(settings(users=(), teams=("acme/data",)), [review("dave")])
    assert not result.ok
    assert "any member of @acme/data" in result.summary


# --- latest review decides ---------------------------------------------------------------


def test_changes_requested_after_approval_cancels() -> None:
    result = run(settings(), [review("alice"), review("alice", "CHANGES_REQUESTED")])
    assert not result.ok
    assert result.approved_by == ()
    assert "alice" in result.eligible


def test_approval_after_changes_requested_counts() -> None:
    result = run(settings(), [review("alice", "CHANGES_REQUESTED"), review("alice")])
    assert result.ok


def test_dismissed_cancels() -> None:
    # GitHub turns the dismissed review's own state into DISMISSED.
    result = run(settings(), [review("alice", "DISMISSED")])
    assert not result.ok
    later = run(settings(), [review("alice"), review("alice", "DISMISSED")])
    assert not later.ok


def test_commented_does_not_cancel() -> None:
    result = run(
        settings(), [review("alice"), review("alice", "COMMENTED"), review("alice", "PENDING")]
    )
    assert result.ok
    assert result.approved_by == ("alice",)


def test_other_users_reviews_do_not_cancel() -> None:
    result = run(settings(), [review("alice"), review("bob", "CHANGES_REQUESTED")])
    assert result.ok
    assert result.approved_by == ("alice",)


def test_review_states_compare_case_insensitively() -> None:
    assert run(settings(), [review("alice", "approved")]).ok


# --- the plan an approval was given on ------------------------------------------------------


def test_stale_approval_after_a_plan_changing_push() -> None:
    # alice approved c1 (plan P1); c3 changed the plan to P2.
    result = run(settings(), [review("alice", sha=C1)])
    assert not result.ok
    assert result.stale == ("alice",)
    assert result.approved_by == ()
    assert "alice" in result.eligible
    assert f"@alice approved `{C1[:7]}`, whose plan differs from the current plan" in result.summary
    assert "approve the current one again" in result.summary


def test_approval_kept_after_a_plan_preserving_push() -> None:
    # alice approved c1; c2 changed nothing in the plan, so the head's plan is still P1.
    result = run(settings(), [review("alice", sha=C1)], current="P1")
    assert result.ok
    assert result.stale == ()


def test_approval_on_a_commit_without_a_recorded_plan_is_stale() -> None:
    result = run(settings(), [review("alice", sha="f" * 40)])
    assert not result.ok
    assert result.stale == ("alice",)
    assert "no plan was recorded" in result.summary
    unnamed = run(settings(), [review("bob", sha=None)])
    assert unnamed.stale == ("bob",)
    assert not unnamed.ok


def test_sha_compared_case_insensitively() -> None:
    assert run(settings(), [review("alice", sha=C3.upper())]).ok


def test_latest_approval_on_current_plan_replaces_a_stale_one() -> None:
    result = run(settings(), [review("alice", sha=C1), review("alice", sha=C3)])
    assert result.ok
    assert result.stale == ()


def test_stale_is_only_reported_for_people_who_could_count() -> None:
    result = run(settings(), [review("mallory", sha=C1)])
    assert result.stale == ()


# --- approvals from the check run's action ------------------------------------------------


def test_action_approval_counts_like_a_review() -> None:
    assert run(settings(), [], actions=[("bob", C3)]).ok
    assert run(settings(), [], actions=[("BOB", C3)]).approved_by == ("BOB",)


def test_action_approval_follows_the_same_rules() -> None:
    assert not run(settings(), [], actions=[("mallory", C3)]).ok  # not eligible
    assert not run(settings(), [], actions=[("carol", C3)], author="carol").ok  # author
    stale = run(settings(), [], actions=[("bob", C1)])  # plan changed since
    assert not stale.ok
    assert stale.stale == ("bob",)
    assert run(settings(), [], actions=[("bob", C1)], current="P1").ok  # plan preserved


def test_action_approval_does_not_lift_a_standing_changes_request() -> None:
    result = run(settings(), [review("bob", "CHANGES_REQUESTED", C1)], actions=[("bob", C3)])
    assert not result.ok
    # A dismissed review is no objection: a fresh click approves.
    assert run(settings(), [review("bob", "DISMISSED", C1)], actions=[("bob", C3)]).ok


def test_action_approval_and_review_together_reach_the_count() -> None:
    result = run(settings(count=2), [review("alice")], actions=[("bob", C3)])
    assert result.ok
    assert result.approved_by == ("alice", "bob")


# --- a commit planned again (prod or its settings moved) --------------------------------


def reviewed(user: str, at_ms: int, sha: str = C3) -> Review:
    """An approval on ``sha`` the forge says was submitted at ``at_ms``."""
    return Review(
        next(_ids), user, "APPROVED", sha, datetime.fromtimestamp(at_ms / 1000, UTC).isoformat()
    )


def test_a_review_from_before_the_commit_was_planned_again_is_stale() -> None:
    # c3's plan was made again at t=2s with another fingerprint (now P2): bob's approval at
    # t=1s approved the plan it replaced.
    result = run(settings(), [reviewed("bob", 1_000)], planned_at={C3: 2_000})
    assert not result.ok
    assert result.stale == ("bob",)
    assert "before it had the plan it has now" in result.summary
    assert run(settings(), [reviewed("bob", 3_000)], planned_at={C3: 2_000}).ok
    # In the second the plan was published, by a forge's time of whole seconds (GitHub's):
    # it may have been given before, for the plan before; it does not count.
    same = run(settings(), [reviewed("bob", 2_000)], planned_at={C3: 2_400})
    assert not same.ok
    assert same.stale == ("bob",)
    assert "in the second its plan was published" in same.summary
    # A time with milliseconds (the local forge's) compares as it is.
    assert run(settings(), [reviewed("bob", 2_500)], planned_at={C3: 2_400}).ok
    assert not run(settings(), [reviewed("bob", 2_300)], planned_at={C3: 2_400}).ok
    # Another commit's replan is not this one's.
    assert run(settings(), [reviewed("bob", 1_000)], planned_at={C1: 2_000}).ok
    # No time from the forge: counted where the caller gave no plan time, else stale.
    assert run(settings(), [review("bob")]).ok
    assert not run(settings(), [review("bob")], planned_at={C3: 2_000}).ok


def test_each_persons_words_count_in_the_order_given() -> None:
    # bob clicks (t=1s), then requests changes (t=2s): his last word is the objection,
    # and a dismissal of it (t=3s) takes it back without approving.
    changes = Review(next(_ids), "bob", "CHANGES_REQUESTED", C3, "1970-01-01T00:00:02+00:00")
    assert not run(settings(), [changes], actions=[("bob", C3, "P2", 1_000)]).ok
    dismissed = Review(changes.id, "bob", "DISMISSED", C3, "1970-01-01T00:00:02+00:00")
    assert not run(settings(), [dismissed], actions=[("bob", C3, "P2", 1_000)]).ok
    # A click after the dismissal approves.
    assert run(settings(), [dismissed], actions=[("bob", C3, "P2", 3_000)]).ok


def test_a_click_counts_only_for_the_plan_its_button_showed() -> None:
    # The button named P2, the current plan: it counts whenever it was handled.
    assert run(settings(), [], actions=[("bob", C3, "P2", 1_000)], planned_at={C3: 2_000}).ok
    # It named "P", a prefix of P2 but not what Sluice's button names (its first 12
    # characters, here all of it): a crafted id matching many plans counts for none.
    assert not run(settings(), [], actions=[("bob", C3, "P", 1_000)]).ok
    # It named P1 (the plan c3 had before): stale although c3 is the head.
    stale = run(settings(), [], actions=[("bob", C3, "P1", 3_000)])
    assert not stale.ok
    assert stale.stale == ("bob",)
    # A button that named no plan (made before buttons did): by when it was handled.
    assert not run(settings(), [], actions=[("bob", C3, None, 1_000)], planned_at={C3: 2_000}).ok
    assert not run(settings(), [], actions=[("bob", C3, None, 2_000)], planned_at={C3: 2_000}).ok
    assert run(settings(), [], actions=[("bob", C3, None, 3_000)], planned_at={C3: 2_000}).ok


def test_each_approval_is_compared_by_its_own_clock() -> None:
    # The forge's clock runs a minute ahead of the service's. c3 got its plan at 2 s by the
    # service's clock, at 62 s by the forge's (the time it gave the comment's edit).
    forge, here = {C3: 62_000}, {C3: 2_000}
    # bob's review stamped 30 s by the forge: 28 s after the service's time of the plan,
    # but before the forge's: given before the plan was shown, it does not count.
    early = Review(next(_ids), "bob", "APPROVED", C3, "1970-01-01T00:00:30+00:00")
    gate = run(settings(), [early], planned_at=forge, planned_here=here)
    assert not gate.ok and gate.stale == ("bob",)
    late = Review(next(_ids), "bob", "APPROVED", C3, "1970-01-01T00:01:03+00:00")
    assert run(settings(), [late], planned_at=forge, planned_here=here).ok
    # A click naming no plan is stamped by the service's clock: 3 s is after the plan.
    click = [("bob", C3, None, 3_000)]
    assert run(settings(), [], actions=click, planned_at=forge, planned_here=here).ok
    # And the publications: the forge's for a review, the service's for a click.
    shown_forge, shown_here = [(62_000, C3), (70_000, C2)], [(2_000, C3), (10_000, C2)]
    between = Review(next(_ids), "bob", "APPROVED", C3, "1970-01-01T00:01:05+00:00")
    kept = {"planned_at": forge, "planned_here": here, "shown_here": shown_here}
    assert run(settings(), [between], shown=shown_forge, **kept).ok  # type: ignore[arg-type]
    after = Review(next(_ids), "bob", "APPROVED", C3, "1970-01-01T00:01:15+00:00")
    assert not run(settings(), [after], shown=shown_forge, **kept).ok  # type: ignore[arg-type]
    assert not run(settings(), [], actions=[("bob", C3, None, 11_000)], shown=shown_forge,
                   **kept).ok  # type: ignore[arg-type]  # fmt: skip


def test_reviews_and_clicks_are_taken_in_the_order_the_service_learnt_of_them() -> None:
    # bob clicked (handled at 40 s by the service's clock, queued behind a build), and had
    # requested changes at 10 s by GitHub's: read first by the click's own evaluation.
    objection = Review(next(_ids), "bob", "CHANGES_REQUESTED", C3, "1970-01-01T00:00:10+00:00")
    click = [("bob", C3, None, 40_000)]
    # By the forge's time the objection came first and the click lifts nothing: no
    # approval. Dismissed (a new word: its state), by its own time the click came after it
    # and counted again; learnt after the click, it takes the click back.
    dismissed = Review(objection.id, "bob", "DISMISSED", C3, objection.submitted_at)
    assert run(settings(), [dismissed], actions=click).ok  # no word of when it was learnt
    learnt = {word_key(objection): 40_000, word_key(dismissed): 100_000}
    assert not run(settings(), [dismissed], actions=click, learnt=learnt).ok
    # Learnt in the very evaluation that handled the click: the click first, then it.
    assert not run(settings(), [objection], actions=click, learnt=learnt).ok
    learnt_before = {word_key(objection): 30_000, word_key(dismissed): 35_000}
    assert run(settings(), [dismissed], actions=click, learnt=learnt_before).ok
    # A review's own time still decides which plan it saw: only the order moved.
    late = Review(next(_ids), "bob", "APPROVED", C3, "1970-01-01T00:00:01+00:00")
    assert not run(settings(), [late], planned_at={C3: 2_000}, learnt={word_key(late): 9_000}).ok


def test_an_approval_while_the_comment_showed_no_plan_says_so() -> None:
    # Sluice's comment was changed by someone else (or a post of it failed) at 5 s: an
    # approval then is stale, and says why in the author's terms.
    shown = [(2_000, C3.lower()), (5_000, ":edited")]
    late = reviewed("bob", 9_000)
    result = run(settings(), [late], planned_at={C3: 2_000}, shown=shown)
    assert not result.ok and result.stale == ("bob",)
    assert "showed no plan (someone else changed it" in result.summary
    other = [(2_000, C3.lower()), (5_000, C2.lower())]
    result = run(settings(), [late], planned_at={C3: 2_000}, shown=other)
    assert "another commit's plan was shown" in result.summary


# --- owners ------------------------------------------------------------------------------


def test_owners_to_approve_by_rule() -> None:
    direct = {"sales.orders": "alice", "sales.raw": None}
    reached = {"sales.orders": "alice", "mart.revenue": "@acme/finance", "mart.x": ""}
    assert owners_to_approve(settings(owners="never"), direct, reached) == {}
    assert owners_to_approve(settings(owners="direct"), direct, reached) == {
        "sales.orders": "alice"
    }
    assert owners_to_approve(settings(owners="breaking"), direct, reached) == {
        "mart.revenue": "acme/finance",
        "sales.orders": "alice",
    }
    # Under `breaking`, a directly modified model's owner approves even for a
    # non-breaking change.
    assert owners_to_approve(settings(owners="breaking"), {"a.b": "dave"}, {}) == {"a.b": "dave"}


def test_owner_as_login_must_approve() -> None:
    gate_settings = settings(owners="direct")
    owners = {"sales.orders": "Dave"}
    waiting = run(gate_settings, [review("alice")], owners=owners)
    assert not waiting.ok
    assert waiting.missing == 0
    assert waiting.owners_missing == {"sales.orders": "Dave"}
    assert "`sales.orders` (@Dave)" in waiting.summary
    done = run(gate_settings, [review("alice"), review("dave")], owners=owners)
    assert done.ok
    assert done.owners_missing == {}
    assert done.approved_by == ("alice",)  # dave is not a required approver
    assert "Not counted" not in done.summary
    mention = run(gate_settings, [review("alice"), review("dave")], owners={"s.o": "@dave"})
    assert mention.ok


@pytest.mark.parametrize("owner", ["x](https://evil.example)", "<img src=x>", "a b", "x/../../y"])
def test_an_owner_that_is_no_login_or_team_is_quoted_never_mentioned(owner: str) -> None:
    waiting = run(settings(owners="direct"), [review("alice")], owners={"sales.orders": owner})
    assert owner in waiting.owners_missing.values()
    assert f"@{owner}" not in waiting.summary
    assert f"(`{owner}`)" in waiting.summary  # a code span: shown as typed, never a link or tag


def test_owner_as_team_any_member_approves() -> None:
    gate_settings = settings(owners="breaking")
    owners = {"mart.revenue": "acme/finance", "sales.orders": "alice"}
    teams = {"acme/finance": frozenset({"erin", "frank"})}
    waiting = run(gate_settings, [review("alice")], owners=owners, teams=teams)
    assert waiting.owners_missing == {"mart.revenue": "acme/finance"}
    assert not waiting.ok
    done = run(gate_settings, [review("alice"), review("Frank")], owners=owners, teams=teams)
    assert done.ok


def test_owner_approval_follows_the_same_rules() -> None:
    gate_settings = settings(owners="direct")
    owners = {"sales.orders": "dave"}
    stale = run(gate_settings, [review("alice"), review("dave", sha=C1)], owners=owners)
    assert stale.owners_missing == {"sales.orders": "dave"}
    assert stale.stale == ("dave",)
    cancelled = run(
        gate_settings,
        [review("alice"), review("dave"), review("dave", "CHANGES_REQUESTED")],
        owners=owners,
    )
    assert not cancelled.ok
    by_action = run(gate_settings, [review("alice")], owners=owners, actions=[("dave", C3)])
    assert by_action.ok


def test_owner_who_is_the_author_cannot_approve_their_own_change() -> None:
    owners = {"sales.orders": "carol"}
    result = run(settings(owners="direct"), [review("alice"), review("carol")], owners=owners)
    assert not result.ok
    assert result.owners_missing == {"sales.orders": "carol"}
    assert "is the author" in result.summary
    team = run(
        settings(owners="direct"),
        [review("alice"), review("carol")],
        owners={"sales.orders": "acme/data"},
        teams={"acme/data": frozenset({"carol", "dave"})},
    )
    assert not team.ok
    assert run(
        settings(owners="direct"),
        [review("alice"), review("dave")],
        owners={"sales.orders": "acme/data"},
        teams={"acme/data": frozenset({"carol", "dave"})},
    ).ok


def test_owners_only_without_required_approvers() -> None:
    gate_settings = settings(users=(), owners="direct")
    owners = {"sales.orders": "dave"}
    assert not run(gate_settings, [], owners=owners).ok
    result = run(gate_settings, [review("dave")], owners=owners)
    assert result.ok
    assert "Every changed model's owner has approved" in result.summary


# --- the backfill budget ----------------------------------------------------------------


def test_a_backfill_budget_is_read_and_checked() -> None:
    gate, _ = gate_config(
        "sluice:\n  gate:\n    backfill:\n      max_intervals: 365\n      approver: '@org/data-leads'\n"
    )
    assert gate.backfill is not None
    assert (gate.backfill.max_intervals, gate.backfill.approver) == (365, "org/data-leads")
    for bad, words in [
        ("max_intervals: -1\n      approver: bob", "max_intervals"),
        ("max_intervals: 10\n      approver: 'not a login'", "not a user login"),
        ("max_intervals: 10", "approver"),
        ("max_bytes: lots\n      approver: bob", "is not a size"),
        ("max_bytes: -3\n      approver: bob", "negative"),
        ("approver: bob", "a budget needs a limit"),
        ("max_intervals: 10\n      approver: bob\n      max_rows: 5", "max_rows"),
    ]:
        with pytest.raises(ConfigError, match=words):
            gate_config(f"sluice:\n  gate:\n    backfill:\n      {bad}\n")


def test_six_years_of_daily_backfill_waits_for_the_budget_s_approver(tmp_path: Path) -> None:
    from sluice.core.timeutil import to_ms
    from tests.core.helpers import load, plan_of

    project = load(tmp_path, {
        "config.yaml": "model_defaults:\n  dialect: spark\n  start: '2018-01-01'\n  cron: '@daily'\n",
        "models/events.sql": "MODEL (name s.events, kind INCREMENTAL_BY_TIME_RANGE (time_column ds));\n"
                             "SELECT 1 AS id, ds FROM s.raw WHERE ds BETWEEN @start_ds AND @end_ds\n",
        "models/raw.sql": "MODEL (name s.raw, kind VIEW);\nSELECT DATE '2018-01-01' AS ds\n",
    })  # fmt: skip
    plan = plan_of(project, end=to_ms("2024-01-01"))
    intervals = sum(len(b.intervals) for b in plan.backfill)
    assert intervals == 2191  # 2018-01-01 .. 2023-12-31, one a day
    gate = GateSettings.model_validate(
        {"required_approvers": {"users": ["alice"]},
         "backfill": {"max_intervals": 365, "approver": "dana"}}
    )  # fmt: skip
    owners = budget_to_approve(gate, intervals)
    assert owners == {"backfill of 2,191 intervals (budget 365)": "dana"}
    assert budget_to_approve(gate, 365) == {} and budget_to_approve(settings(), 10**6) == {}
    waiting = run(gate, [review("alice")], owners=owners)
    assert not waiting.ok and waiting.owners_missing == owners
    assert "`backfill of 2,191 intervals (budget 365)` (@dana)" in waiting.summary
    assert run(gate, [review("alice"), review("dana")], owners=owners).ok
    # A stale approval (given on another plan) does not lift the budget.
    assert not run(gate, [review("alice"), review("dana", sha=C1)], owners=owners).ok


def test_a_byte_budget_counts_the_estimate_and_reads_sizes_as_people_write_them() -> None:
    gate, _ = gate_config(
        "sluice:\n  gate:\n    backfill:\n      max_bytes: 50 GB\n      approver: dana\n"
    )
    assert gate.backfill is not None and gate.backfill.max_bytes == 50 * 1024**3
    assert gate.backfill.max_intervals is None
    assert budget_to_approve(gate, 10**6, 50 * 1024**3) == {}  # intervals have no limit here
    assert budget_to_approve(gate, 0, None) == {}  # no backfill: nothing to read
    # A backfill whose reads were never estimated is over a byte budget (fail closed).
    assert budget_to_approve(gate, 3, None) == {
        "backfill of 3 intervals whose reads were not estimated (budget 50.0 GB to read)": "dana"
    }
    assert budget_to_approve(gate, 1, 60 * 1024**3) == {
        "backfill of about 60.0 GB to read (budget 50.0 GB)": "dana"
    }
    both = GateSettings.model_validate(
        {"backfill": {"max_intervals": 10, "max_bytes": 1024, "approver": "dana"}}
    )
    assert budget_to_approve(both, 11, 2048) == {
        "backfill of 11 intervals (budget 10) and about 2.0 KB to read (budget 1.0 KB)": "dana"
    }


def test_a_recorded_review_from_before_the_budget_reads_as_no_backfill() -> None:
    from sluice.bot.flow.reviewed_plan import PlanReview

    review_ = PlanReview(
        "f", (("s.a", "k"),), {"s.a": None}, {}, merge_intervals=12, merge_bytes=4096
    )
    assert PlanReview.from_json(review_.to_json()) == review_
    old = {
        k: v for k, v in review_.to_json().items() if k not in ("merge_intervals", "merge_bytes")
    }
    assert PlanReview.from_json(old).merge_intervals == 0
    assert PlanReview.from_json(old).merge_bytes is None


# --- promotion tiers ----------------------------------------------------------------------


def test_promotion_tiers_are_read_in_order_and_checked() -> None:
    _, deploy = gate_config(
        "sluice:\n  deploy:\n    environments:\n"
        "      - {name: staging, on: merge}\n"
        "      - {name: prod, on: tag, tag_pattern: 'release-*', released_by: ['@rita', octo/rel]}\n"
    )
    assert [t.name for t in deploy.tiers()] == ["staging", "prod"]
    assert [t.name for t in deploy.merge_tiers()] == ["staging"]
    assert [t.name for t in deploy.tag_tiers("release-3")] == ["prod"]
    assert deploy.tag_tiers("v1") == () and not deploy.tag_matches("v1")
    assert deploy.prod_tier().released_by == ("rita", "octo/rel")
    # Without tiers: prod alone, promoted as `on` says.
    _, plain = gate_config("sluice:\n  deploy:\n    on: tag\n")
    assert [(t.name, t.on, t.tag_pattern) for t in plain.tiers()] == [("prod", "tag", "v*")]
    assert plain.merge_tiers() == ()
    for bad, words in [
        ("environments: [{name: staging, on: merge}]", "one of the environments must be prod"),
        ("on: tag\n    environments: [{name: prod, on: merge}]", "either on/tag_pattern or"),
        ("environments: [{name: prod, on: merge, released_by: [a]}]", "on: tag"),
        ("environments: [{name: 'Bad Name', on: merge}, {name: prod, on: tag}]", "Bad Name"),
        ("environments: [{name: prod, on: merge}, {name: prod, on: tag}]", "listed twice"),
        ("environments: [{name: prod, on: merge, bogus: 1}]", "known settings here: name, on"),
        ("environments: [{name: prod, on: push}]", "environments.0.on"),
        ("environments: [{name: prod, on: tag, released_by: ['x y']}]", "not a user login"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(words)):
            gate_config(f"sluice:\n  deploy:\n    {bad}\n")


# --- pushes through a bot account --------------------------------------------------------


@pytest.mark.parametrize(
    ("login", "bot"),
    [
        ("github-actions[bot]", True),
        ("pre-commit-ci[bot]", True),
        ("Dependabot[BOT]", True),
        ("project_42_bot_0a1b2c3d4e5f6a7b", True),  # a GitLab project access token's user
        ("group_7_bot", True),
        ("project_42_bot2", True),
        ("alice", False),
        ("web-flow", False),
        ("bot", False),
        ("project_bot", False),
        ("robot[bot]x", False),
    ],
)
def test_bot_accounts_are_told_from_people(login: str, bot: bool) -> None:
    assert bot_account(login) is bot


def test_a_push_through_a_bot_needs_one_approval_more() -> None:
    bots = frozenset({"github-actions[bot]"})
    # bob alone: he may have driven the bot (his own workflow); one more is needed.
    alone = run(settings(), [review("bob")], pushers=bots, bots=bots)
    assert not alone.ok and alone.missing == 1
    assert "`github-actions[bot]` pushed to this pull request" in alone.summary
    assert "(1 of 2 required)" in alone.summary
    both = run(settings(), [review("bob"), review("alice")], pushers=bots, bots=bots)
    assert both.ok and both.approved_by == ("alice", "bob")
    # Without the bot's push, bob alone is enough (the test can fail).
    assert run(settings(), [review("bob")]).ok


def test_a_push_through_a_bot_under_an_owners_only_gate_needs_another_owner() -> None:
    bots = frozenset({"github-actions[bot]"})
    owners_only = settings(users=(), owners="direct")
    owners = {"s.a": "dave", "s.b": "erin"}
    one = run(owners_only, [review("dave"), review("erin")], owners=owners, bots=bots)
    assert one.ok, one.summary  # two owners: one of them is someone else
    lone = run(owners_only, [review("dave")], owners={"s.a": "dave"}, bots=bots)
    assert not lone.ok and lone.missing == 1
    assert run(owners_only, [review("dave")], owners={"s.a": "dave"}).ok
    # erin owns s.b only by its header (a model the PR adds): not the approval more.
    named = run(owners_only, [review("dave"), review("erin")], owners=owners, bots=bots,
                prod_owners=frozenset({"dave"}))  # fmt: skip
    assert not named.ok and named.missing == 1, named.summary
    # frank owns a prod model the PR leaves alone: an owner prod records, so his counts.
    frank = run(owners_only, [review("dave"), review("erin"), review("frank")], owners=owners,
                bots=bots, prod_owners=frozenset({"dave", "frank"}))  # fmt: skip
    assert frank.ok, frank.summary


def test_a_bot_push_asks_nothing_where_the_gate_asks_nobody() -> None:
    nobody = settings(users=(), count=0)
    assert run(nobody, [], bots=frozenset({"github-actions[bot]"})).ok


# --- people by their forge account id --------------------------------------------------


def _by_id(
    reviews: Sequence[Review],
    *,
    clicks: Sequence[ActionApproval] = (),
    pushers: frozenset[str] = frozenset(),
    accounts: frozenset[tuple[str, int]] = frozenset(),
    author_id: int | None = None,
    count: int = 1,
) -> GateResult:
    """The gate of users alice, bob, bobx and carolx (``count`` of them) on carol's PR."""
    return evaluate(
        settings(("alice", "bob", "bobx", "carolx"), count=count),
        GateInput(author="carol", author_id=author_id, reviews=list(reviews), plans=PLANS,
                  current_plan="P2", action_approvals=list(clicks), pushers=pushers,
                  pusher_accounts=accounts),
    )  # fmt: skip


def _review_by(user: str, uid: int | None) -> Review:
    return Review(next(_ids), user, "APPROVED", C3, None, user_id=uid)


def test_a_pusher_is_known_by_account_id_under_any_login() -> None:
    # bob (account 5) pushed as `bob`, then renamed himself `bobx`: his review and his
    # click are his, whatever the login.
    pushed = frozenset({("bob", 5)})
    result = _by_id([_review_by("bobx", 5)], accounts=pushed)
    assert not result.ok and "Not counted: @bobx pushed" in result.summary
    assert not _by_id([], clicks=[ActionApproval("bobx", C3, user_id=5)], accounts=pushed).ok
    # The account holding the login `bob` now (GitHub freed it) did not push.
    assert _by_id([_review_by("bob", 6)], accounts=pushed).ok


def test_a_side_without_an_id_is_compared_by_login_case_folded() -> None:
    # A push recorded before ids were kept names whoever holds its login; a click without
    # an id (the web UI's) is compared by login with every pusher, by id or not.
    assert not _by_id([_review_by("Bob", 6)], pushers=frozenset({"bob"})).ok
    clicked = [ActionApproval("BOB", C3)]
    assert not _by_id([], clicks=clicked, accounts=frozenset({("bob", 5)})).ok


def test_the_author_is_known_by_account_id() -> None:
    # carol (account 9) opened the PR, renamed herself `carolx` and approves it.
    result = _by_id([], clicks=[ActionApproval("carolx", C3, user_id=9)], author_id=9)
    assert not result.ok and "@carol's own approval does not count" in result.summary
    assert _by_id([], clicks=[ActionApproval("carolx", C3, user_id=10)], author_id=9).ok


def test_one_person_under_two_logins_is_one_approval() -> None:
    # bob (account 5) reviews as `bob` and clicks as `bobx`: one approval of the two needed.
    review = _review_by("bob", 5)
    result = _by_id([review], clicks=[ActionApproval("bobx", C3, user_id=5)], count=2)
    assert (result.ok, result.missing, result.approved_by) == (False, 1, ("bob",))
    # A click recorded without an id, under the login whose id the review names: his too.
    result = _by_id([review], clicks=[ActionApproval("bob", C3)], count=2)
    assert (result.ok, result.missing) == (False, 1)
    # Two accounts are two approvals.
    result = _by_id([review], clicks=[ActionApproval("bobx", C3, user_id=7)], count=2)
    assert result.ok, result.summary


def test_times_of_one_moment_cannot_be_told_apart() -> None:
    # To the millisecond where both times have one, else to the second.
    assert same_moment(5_250, 5_250) and not same_moment(5_250, 5_600)
    assert same_moment(5_000, 5_600) and same_moment(5_600, 5_000)
    assert not same_moment(4_999, 5_000)
    shown = [(1_250, C3), (5_250, C1)]
    assert shown_at(shown, C1, 5_600)  # after c1's publication, both to the millisecond
    assert shown_at(shown, C3, 5_100)  # before it
    assert not shown_at(shown, C1, 5_250)  # in its very millisecond: maybe before it
    assert not shown_at(shown, C3, 5_250)  # or after it
    assert not shown_at(shown, C3, 5_000)  # a whole second: c1's may be before it


def test_a_review_given_while_another_commit_s_plan_was_shown_is_stale() -> None:
    # c3 shown from t=1s, c1 from t=5s (pushed away), c3 again from t=9s (pushed back):
    # bob's approval of c3 counts while c3's plan was shown, never while c1's was.
    shown = [(1_000, C3), (5_000, C1), (9_000, C3)]
    assert run(settings(), [reviewed("bob", 3_000)], shown=shown).ok
    away = run(settings(), [reviewed("bob", 6_500)], shown=shown)
    assert not away.ok and away.stale == ("bob",)
    assert "while another commit's plan was shown" in away.summary
    assert run(settings(), [reviewed("bob", 10_500)], shown=shown).ok
    # c3's publication at 9 s has whole seconds: one at 9.5 s may have come before it.
    assert not run(settings(), [reviewed("bob", 9_500)], shown=shown).ok
    # In the very second another plan was published (whole seconds): maybe after it.
    assert not run(settings(), [reviewed("bob", 5_000)], shown=shown).ok
    # Before any publication: shown nothing of it.
    assert not run(settings(), [reviewed("bob", 500)], shown=shown).ok
    # None kept (a PR planned before they were): not asked.
    assert run(settings(), [reviewed("bob", 6_500)]).ok
