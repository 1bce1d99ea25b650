"""A bot account counts as no person where the settings name people (docs/security.md,
"Who decides"): whoever holds a bot's token (a GitLab service account or group access
token user, a GitHub App) is not named, though a team or group lists it. One place
decides it (:func:`sluice.bot.flow.trust.not_a_person`, asked by
:func:`~sluice.bot.flow.trust.names_person`): by what the forge says of the account, by
its id; by the form of its login where there is no id or the forge does not say. A bot
refused is told so, in the reply or the check.

The in-memory forge (accounts keep their id through a rename; ``bots`` is what the forge
says of an account), the ledger on SQLite, real webhook bodies.
"""

from __future__ import annotations

from pathlib import Path

from sluice.bot.events.github import parse_github
from sluice.bot.flow import audit, dispatch, trust
from sluice.bot.forge.memory import MemoryForge
from sluice.bot.present import checks, policy_text, replies
from sluice.core import markdown as md
from tests.helpers import accounts
from tests.helpers import gate_world as gw
from tests.helpers.cases import realcase
from tests.helpers.policy_world import SOFT, World, edit_orders

TEAM = "acme/releasers"
HELPER = "deploy-helper"  # a service account's chosen username: no bot's form


def _forge() -> MemoryForge:
    forge = MemoryForge("acme/warehouse", name="gitlab")
    forge.teams[TEAM] = frozenset({"carol", HELPER})
    forge.roles.update({"carol": "write", HELPER: "write"})
    forge.bots[HELPER] = True
    return forge


def test_a_bot_in_a_named_team_or_named_itself_is_no_person() -> None:
    forge = _forge()
    helper, carol = forge.account_id(HELPER), forge.account_id("carol")
    why = trust.not_a_person(forge, HELPER, helper)
    assert why is not None and why.startswith("the forge says its account is a bot"), why
    assert not trust.names_person(forge, None, [TEAM], HELPER, helper)
    assert not trust.names_person(forge, {HELPER: helper}, [HELPER], HELPER, helper)
    # A person of the same team, and of the same pin, is one.
    assert trust.not_a_person(forge, "carol", carol) is None
    assert trust.names_person(forge, None, [TEAM], "carol", carol)
    assert trust.names_person(forge, {"carol": carol}, ["carol"], "carol", carol)


def test_what_the_forge_says_decides_over_the_form_of_a_login() -> None:
    forge = _forge()
    person = "project_1_bot_abc"  # the forge says a person has it: a person
    forge.bots[person] = False
    forge.teams[TEAM] = frozenset({person})
    assert trust.names_person(forge, None, [TEAM], person, forge.account_id(person))
    # No id to ask by (a row from before ids, the local forge): the form of the login.
    why = trust.not_a_person(forge, "ci[bot]", None)
    assert why is not None and why.startswith("its login has a bot account's form"), why
    assert trust.not_a_person(forge, "carol", None) is None


def test_a_bot_s_tag_in_the_releasers_team_is_refused_saying_why(tmp_path: Path) -> None:
    config = (
        "sluice:\n  project: jaffle\n  deploy:\n    environments:\n"
        f"      - {{name: prod, on: tag, tag_pattern: 'v*', released_by: [{TEAM}]}}\n"
    )
    bot = gw.make_bot(tmp_path, config, {"carol": "write", HELPER: "write"})
    try:
        bot.forge.teams[TEAM] = frozenset({"carol", HELPER})
        bot.forge.bots[HELPER] = True
        bot.forge.refs["main"] = gw.A
        tag = realcase("github/push/woodpecker__HookTag.json", gw.OWNER,
                       ref="refs/tags/v1", after=gw.A, deleted=False)  # fmt: skip
        tag["sender"]["login"] = HELPER
        assert bot.deliver("push", tag)
        refused = bot.forge.checks[gw.A]["sluice/deploy"]
        assert refused.conclusion == "failure"
        assert f"@{HELPER}, a bot account (the forge says its account is a bot" in (
            refused.summary
        ), refused.summary
        [row] = bot.ledger.entries(repo=gw.KEY)
        assert (row.kind, row.outcome) == (audit.REFUSAL, "release refused")
        assert row.detail.endswith("a bot account: " + str(trust.not_a_person(
            bot.forge, HELPER, bot.forge.account_id(HELPER))))  # fmt: skip
        assert [d.environment for d in bot.forge.deployments] == []
    finally:
        bot.close()


def test_a_bot_s_override_is_refused_saying_why_and_a_person_s_is_taken(tmp_path: Path) -> None:
    world = World(tmp_path, {"policies/soft.yaml": SOFT})
    world.forge.teams["octo/finance"] = frozenset({"fin", HELPER})
    world.forge.roles.update({"fin": "write", HELPER: "write"})
    world.forge.bots[HELPER] = True
    try:
        world.head(gw.A, edit_orders)
        world.open(7, gw.A)
        world.build(7)

        def say(user: str, body: str) -> str:
            comment_id = world.forge.add_comment(7, user, body)
            payload = realcase("github/issue_comment/drone-go-scm__comment.json", gw.OWNER,
                               action="created", **{
                "issue.number": 7, "comment.user.login": user, "comment.body": body,
                "comment.id": comment_id,
            })  # fmt: skip
            event = parse_github("issue_comment", accounts.github(payload, world.forge.account_id))
            assert event is not None
            dispatch.handle(world.deps, event)
            return world.forge.bot_comments(7)[-1]

        reply = say(HELPER, "/sluice override orders-need-finance ship it")
        assert reply.startswith(f"@{HELPER} you may not override `orders-need-finance`: this is "
                                "a bot account (the forge says its account is a bot"), reply  # fmt: skip
        assert world.check(gw.A).conclusion != "success"  # type: ignore[union-attr]
        [refusal] = world.audit(audit.REFUSAL)
        assert refusal.detail.startswith("orders-need-finance: a bot account: "), refusal.detail
        reply = say("fin", "/sluice override orders-need-finance ship it")
        assert "may not override" not in reply, reply
        assert world.check(gw.A).conclusion == "success"  # type: ignore[union-attr]
    finally:
        world.close()


def test_the_reason_is_escaped_where_it_is_shown() -> None:
    # The reason is the service's own text; escaped all the same, as every text shown is.
    hostile = "<img src=x> [link](http://x) @everyone"
    for shown in (
        replies.rollback_not_approver("bob", ("bob",), (), bot=hostile),
        policy_text.not_allowed("bob", "p", ["octo/t"], hostile),
        checks.release_refused("prod", "v1", "bob", ["octo/t"], bot=hostile).summary,
    ):
        assert md.text(hostile) in shown, shown
        assert "<img" not in shown and "@everyone" not in shown, shown
