"""Red team on the logins the settings name as people, fixed to accounts when they come
into force (trust pins them with the settings, ledger migration 10).

The promise attacked: who may approve is whom the prod branch's settings (and prod's
models) named, never whoever holds their login later. GitHub frees a login at once on a
rename; GitLab lets a freed username be taken. Each attack renames the named person and has
a second account take the freed login, then approves with it: a required approver, a
model's owner, the backfill budget's approver; and a login no account had when the settings
came into force, taken afterwards. The flows are driven as
tests/security/test_red_team_identity.py drives them (tests/helpers/gate_world.py): real
webhook bodies, the in-memory forge (whose accounts keep their id through a rename), the
ledger on SQLite, plans recorded as a PR build records them (no Spark). The forges'
``id_of`` at the wire is tests/bot/forge/test_id_of.py.
"""

from __future__ import annotations

from pathlib import Path

from sluice.bot.events.github import parse_github
from sluice.bot.events.gitlab import parse_gitlab
from sluice.bot.events.neutral import TagEvent
from sluice.bot.flow import approval, audit, dispatch, promotion, trust
from sluice.bot.flow.job import Job
from sluice.bot.flow.reviewed_plan import PlanReview
from sluice.bot.forge.memory import account_id_of
from sluice.core import markdown as md
from sluice.core.model.loader import load_project
from tests.helpers import accounts
from tests.helpers import gate_world as gw
from tests.helpers.cases import load_case, realcase
from tests.helpers.gate_world import CHANGE, GATED, KEY, OWNERS_ONLY, B, Bot
from tests.helpers.policy_world import SOFT, World, edit_orders
from tests.helpers.repair_red_team import ONE as REPAIR_ONE
from tests.helpers.repair_red_team import RepairWorld

ROLES = {"alice": "write", "bob": "write", "carol": "admin", "dana": "write", "mallory": "write"}
OWNED = PlanReview(
    "fpowned0001", (("s.change", "k-change"),), {"s.change": "dana"}, {}, prod_owners=("dana",)
)
BUDGET = (
    "sluice:\n  project: jaffle\n  gate:\n    required_approvers:\n      users: [bob, carol]\n"
    "    backfill:\n      max_intervals: 10\n      approver: dana\n"
)
OVER_BUDGET = PlanReview("fpbudget0001", (("s.change", "k-change"),), {}, {}, merge_intervals=40)
GHOST = "sluice:\n  project: jaffle\n  gate:\n    required_approvers:\n      users: [bob, ghost]\n"


def _mallory_pushes(bot: Bot, made: PlanReview) -> None:
    """alice opens PR 7; mallory (a writer, named nowhere) pushes her change onto it."""
    bot.forge.open_pull(7, head_sha=gw.A, base="main", author="alice", head_ref="change")
    bot.deliver("pull_request", gw.pr_event("opened", gw.A, "alice"))
    bot.forge.push(7, B)
    bot.deliver("pull_request", gw.pr_event("synchronize", B, "mallory"))
    gw.plan(bot, B, made)


def _take(bot: Bot, named: str) -> int:
    """``named`` renames themselves ``<named>x``; a second account of mallory's takes the
    freed login. Returns the taker's id."""
    was = bot.forge.account_id(named)
    bot.forge.rename(named, f"{named}x")
    taker = bot.forge.account_id(named)
    assert taker not in (was, bot.forge.account_id("mallory"))
    return taker


def _promote_owners(bot: Bot, tmp_path: Path, owner: str) -> None:
    """What a promotion does with the project it promotes: its models' owners are fixed to
    accounts (a real project on disk, one model owned by ``owner``)."""
    folder = tmp_path / "project"
    (folder / "models").mkdir(parents=True)
    (folder / "config.yaml").write_text("sluice:\n  project: jaffle\n")
    (folder / "models" / "change.sql").write_text(
        f"MODEL (\n  name s.change,\n  kind FULL,\n  owner {owner}\n);\nSELECT 1 AS a\n"
    )
    project = load_project(folder, use_cache=False)
    job = Job.start(bot.deps, bot.forge)
    try:
        trust.for_repository(job)  # the settings in force, pinned
        trust.pin_owners(job, project)
    finally:
        job.close()


def test_the_settings_pin_holds_the_accounts_their_logins_named(tmp_path: Path) -> None:
    bot = gw.make_bot(tmp_path, BUDGET, ROLES)
    try:
        people = bot.in_force().people
        assert people == {
            "bob": bot.forge.account_id("bob"),
            "carol": bot.forge.account_id("carol"),
            "dana": bot.forge.account_id("dana"),
        }
        pinned = bot.ledger.settings_in_force(KEY)
        assert pinned is not None and pinned.people == people
        # Resolved once, when they came into force: jobs after it ask the forge nothing.
        asked = len([c for c in bot.forge.calls if c[0] == "id_of"])
        assert bot.in_force().people == people
        assert len([c for c in bot.forge.calls if c[0] == "id_of"]) == asked
    finally:
        bot.close()


def test_an_account_that_took_an_owner_s_freed_login_is_no_owner(tmp_path: Path) -> None:
    # Under a gate of owners only, dana owns s.change in prod. She renames herself `danax`;
    # mallory's second account takes `dana` and approves mallory's change to dana's model.
    bot = gw.make_bot(tmp_path, OWNERS_ONLY, ROLES)
    try:
        _promote_owners(bot, tmp_path, "dana")
        dana = bot.forge.account_id("dana")
        _mallory_pushes(bot, OWNED)
        _take(bot, "dana")
        gw.approve(bot, "dana", B, 41)
        check = bot.approval(B)
        assert check.conclusion != "success", check.summary
        assert "Owners still to approve" in check.summary
        assert "Not counted: @dana: the settings name that login" in check.summary
        # dana herself, under her new login, is still the owner.
        assert bot.forge.account_id("danax") == dana
        gw.approve(bot, "danax", B, 42)
        check = bot.approval(B)
        assert check.conclusion == "success", check.summary
    finally:
        bot.close()


def test_an_owner_named_before_keeps_the_account_it_had_through_later_promotions(
    tmp_path: Path,
) -> None:
    # A promotion after the login was taken resolves nothing again: dana stays dana.
    bot = gw.make_bot(tmp_path, OWNERS_ONLY, ROLES)
    try:
        _promote_owners(bot, tmp_path / "first", "dana")
        dana = bot.forge.account_id("dana")
        _take(bot, "dana")
        _promote_owners(bot, tmp_path / "second", "dana")
        pinned = bot.ledger.settings_in_force(KEY)
        assert pinned is not None and pinned.people is not None
        assert pinned.people["dana"] == dana
    finally:
        bot.close()


def test_an_account_that_took_the_budget_approver_s_freed_login_approves_no_budget(
    tmp_path: Path,
) -> None:
    # The merge would backfill 40 intervals, over the budget of 10: dana, its approver,
    # must approve as well as a required approver. dana renames herself; mallory's second
    # account takes `dana` and approves, bob approves.
    bot = gw.make_bot(tmp_path, BUDGET, ROLES)
    try:
        _mallory_pushes(bot, OVER_BUDGET)
        # Its build held for the budget too, the hold shown now (what dana approves).
        bot.ledger.record_shown(gw.KEY, 7, B, bot.clock.now)
        bot.clock.now += gw.MINUTE
        dana = bot.forge.account_id("dana")
        _take(bot, "dana")
        gw.approve(bot, "bob", B, 40)
        gw.approve(bot, "dana", B, 41)
        check = bot.approval(B)
        assert check.conclusion != "success", check.summary
        assert "Not counted: @dana" in check.summary
        # Nor does it release a build held for the budget.
        job = Job.start(bot.deps, bot.forge)
        try:
            people = trust.for_repository(job).people
            assert people is not None and people["dana"] == dana
            assert not approval.budget_approved(job, bot.forge.pulls[7], "dana", people)
        finally:
            job.close()
        gw.approve(bot, "danax", B, 42)
        assert bot.approval(B).conclusion == "success", bot.approval(B).summary
        job = Job.start(bot.deps, bot.forge)
        try:
            people = trust.for_repository(job).people
            assert approval.budget_approved(job, bot.forge.pulls[7], "dana", people)
        finally:
            job.close()
    finally:
        bot.close()


def test_a_listed_login_no_account_had_counts_for_nobody_and_is_reported(
    tmp_path: Path,
) -> None:
    # users: [bob, ghost], and no account has `ghost` when the settings come into force;
    # mallory's second account registers `ghost` afterwards and approves.
    bot = gw.make_bot(tmp_path, GHOST, ROLES)
    bot.forge.gone.add("ghost")
    try:
        assert bot.in_force().people == {"bob": bot.forge.account_id("bob"), "ghost": None}
        bot.forge.gone.discard("ghost")  # registered now
        _mallory_pushes(bot, CHANGE)
        gw.approve(bot, "ghost", B, 41)
        check = bot.approval(B)
        assert check.conclusion != "success", check.summary
        assert "@ghost: named by the settings, but no account had that login" in check.summary
        assert "from @bob" in check.summary  # ghost is not offered as an approver
    finally:
        bot.close()


def test_a_listed_login_taken_is_reported_escaped(tmp_path: Path) -> None:
    # A login with Markdown in it (`_`) is shown as a mention (sluice/core/markdown.py:
    # well-formed logins only, anything else as code), never as emphasis.
    config = GATED.replace("[bob, carol]", "[b_o_b_, carol]")
    bot = gw.make_bot(tmp_path, config, {**ROLES, "b_o_b_": "write"})
    try:
        _mallory_pushes(bot, CHANGE)
        _take(bot, "b_o_b_")
        gw.approve(bot, "b_o_b_", B, 41)
        check = bot.approval(B)
        assert check.conclusion != "success", check.summary
        assert f"Not counted: {md.mention('b_o_b_')}: the settings name" in check.summary
    finally:
        bot.close()


def test_settings_promoted_later_keep_the_accounts_their_logins_had(tmp_path: Path) -> None:
    # bob is listed; his login is taken; a promotion brings settings that still list bob
    # and add erin: bob stays the account he was, erin is resolved as they come into force.
    bot = gw.make_bot(tmp_path, GATED, ROLES)
    try:
        bob = bot.forge.account_id("bob")
        assert bot.in_force().people == {"bob": bob, "carol": bot.forge.account_id("carol")}
        _take(bot, "bob")
        newer = GATED.replace("[bob, carol]", "[bob, carol, erin]")
        parsed = trust.parse(trust.Source.of_config(newer, "config.yaml"))
        trust.pin(bot.ledger, KEY, gw.D, parsed, "main", bot.clock.now)  # what promote() does
        bot.forge.commit(gw.D, {"config.yaml": newer}, parents=(gw.ROOT,), branch="main")
        people = bot.in_force().people
        assert people is not None
        assert people["bob"] == bob
        assert people["erin"] == bot.forge.account_id("erin")
    finally:
        bot.close()


def test_a_team_member_s_freed_login_taken_is_no_member(tmp_path: Path) -> None:
    # Teams are asked of the forge when the gate decides, by login of now on both sides:
    # bob, a member of octo/approvers, renames himself; the account that takes `bob` is no
    # member (the team lists bobx now), so its approval does not count.
    team_gated = (
        "sluice:\n  project: jaffle\n  gate:\n    required_approvers:\n"
        "      teams: [octo/approvers]\n"
    )
    bot = gw.make_bot(tmp_path, team_gated, ROLES)
    bot.forge.teams["octo/approvers"] = frozenset({"bob", "carol"})
    try:
        _mallory_pushes(bot, CHANGE)
        _take(bot, "bob")
        assert bot.forge.teams["octo/approvers"] == {"bobx", "carol"}
        gw.approve(bot, "bob", B, 41)
        check = bot.approval(B)
        assert check.conclusion != "success", check.summary
        gw.approve(bot, "bobx", B, 42)
        assert bot.approval(B).conclusion == "success", bot.approval(B).summary
    finally:
        bot.close()


def _comment(world: World, user: str, body: str) -> list[str]:
    """``user`` (the account holding that login now, its id in the webhook as GitHub
    sends it) comments ``body`` on PR 7; the bot's replies since."""
    before = len(world.forge.bot_comments(7))
    comment_id = world.forge.add_comment(7, user, body)
    payload = realcase("github/issue_comment/drone-go-scm__comment.json", world.forge.repo,
                       action="created", **{
        "issue.number": 7, "comment.user.login": user, "comment.body": body,
        "comment.id": comment_id,
    })  # fmt: skip
    event = parse_github("issue_comment", accounts.github(payload, world.forge.account_id))
    assert event is not None
    dispatch.handle(world.deps, event)
    return world.forge.bot_comments(7)[before:]


def test_an_account_that_took_an_override_by_login_overrides_nothing(tmp_path: Path) -> None:
    # A soft policy names dana (a user) in override_by. dana renames herself; mallory's
    # second account takes `dana` and overrides the policy mallory's change fails.
    named = SOFT.replace("override_by: [octo/finance]", "override_by: [dana]")
    world = World(tmp_path, {"policies/soft.yaml": named})
    world.forge.roles.update({"dana": "write", "mallory": "write"})
    try:
        world.head(gw.A, edit_orders)
        world.open(7, gw.A)
        world.build(7)
        dana = world.forge.account_id("dana")
        world.forge.rename("dana", "danax")
        assert world.forge.account_id("dana") != dana
        world.forge.roles["dana"] = "write"  # the taker may comment commands
        [reply] = _comment(world, "dana", "/sluice override orders-need-finance trust me")
        assert "may not override" in reply, reply
        assert world.check(gw.A).conclusion != "success"  # type: ignore[union-attr]
        [reply] = _comment(world, "danax", "/sluice override orders-need-finance one column")
        assert "may not override" not in reply, reply
        assert world.check(gw.A).conclusion == "success"  # type: ignore[union-attr]
    finally:
        world.close()


TIERS = (
    "sluice:\n  project: jaffle\n  deploy:\n    environments:\n"
    "      - {name: staging, on: merge}\n"
    "      - {name: prod, on: tag, tag_pattern: 'v*', released_by: [dana]}\n"
)


def test_an_account_that_took_a_released_by_login_releases_nothing(tmp_path: Path) -> None:
    # Only dana's tag promotes prod. dana renames herself; mallory's second account takes
    # `dana` and pushes a tag: the tag event carries its account id (sender.id), which is
    # not the one `dana` named when the settings came into force.
    bot = gw.make_bot(tmp_path, TIERS, ROLES)
    try:
        people = bot.in_force().people
        dana = bot.forge.account_id("dana")
        assert people is not None and people["dana"] == dana
        _take(bot, "dana")
        tier = bot.in_force().deploy.prod_tier()

        def tag_by(login: str) -> TagEvent:
            made = realcase("github/push/woodpecker__HookTag.json", gw.OWNER,
                            ref="refs/tags/v1", after=gw.A, deleted=False)  # fmt: skip
            made["sender"]["login"] = login
            event = parse_github("push", accounts.github(made, bot.forge.account_id))
            assert isinstance(event, TagEvent)
            return event

        taker = tag_by("dana")
        assert taker.actor_id == bot.forge.account_id("dana") != dana
        assert not promotion._may_release(bot.forge, tier, taker.actor, taker.actor_id, people)
        herself = tag_by("danax")
        assert herself.actor_id == dana
        assert promotion._may_release(bot.forge, tier, herself.actor, herself.actor_id, people)
    finally:
        bot.close()


def test_a_gitlab_tag_push_names_its_pusher_s_account() -> None:
    payload = load_case("gitlab/tag_push.json")
    payload["after"] = gw.A
    event = parse_gitlab("Tag Push Hook", accounts.gitlab(payload))
    assert isinstance(event, TagEvent)
    assert event.actor and event.actor_id == account_id_of(event.actor)


def test_an_account_that_took_a_listed_login_approves_no_drift_repair(tmp_path: Path) -> None:
    # "Approve the repair" under users [bob, carol]: bob renames himself; mallory's second
    # account takes `bob` and approves the repair alice asked for. The click is refused
    # (repair_gate.may_approve compares by the account `bob` named), nothing is applied;
    # bob under his new login approves, and the repair runs.
    world = RepairWorld(tmp_path, REPAIR_ONE)
    try:
        world.github.roles.update({"mallory": "write"})
        world.redefine()
        world.click("alice", world.button("Plan the repair"))
        built = world.applied()
        world.github.rename("bob", "bobx")
        world.github.roles["bob"] = "write"  # the taker
        world.click("bob", world.button("Approve the repair"))
        assert any(w == "bob" for w, _, _ in world.rows(audit.REFUSAL)), world.rows()
        assert world.applied() == built, "the taker's click approved the repair"
        world.click("bobx", world.button("Approve the repair"))
        assert world.applied() == built + 1, world.rows()
    finally:
        world.close()
