"""The gate asks the forge's own records of pushes (GitHub's repository activity, GitLab's
push events) once per head, whatever the push hooks recorded, for every commit of the
pull request in one listing (approval._with_head); a record names its pusher for the
commits it brought (after its ``before``, up to its ``after``). A commit no hook and no
record covers asks one approval more.

Driven as the red team drives the gate (tests/helpers/gate_world.py): real webhook
bodies, the in-memory forge (its ``push_log`` is the forge's record, kept whether or not
a hook was sent), the ledger on SQLite.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.bot.forge.base import PUSH_RECORDS_LIMIT
from tests.helpers import gate_world as gw
from tests.helpers.gate_world import CHANGE, TEAM_GATED, A, B, Bot, C

Y = "9" * 40
ROLES = {"alice": "write", "bob": "write", "carol": "admin", "mallory": "write"}


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    made = gw.make_bot(tmp_path, TEAM_GATED, ROLES, members={"bob", "carol", "mallory"})
    made.forge.commit(
        C, {"config.yaml": TEAM_GATED}, parents=(B,), author="alice", committer="alice"
    )
    yield made
    made.close()


def _asked(bot: Bot) -> int:
    return [call[0] for call in bot.forge.calls].count("push_records")


def test_a_push_of_many_commits_no_hook_told_of_is_one_listing_and_no_approval_more(
    bot: Bot,
) -> None:
    # As on the Action (no push hooks at all): alice's one push of A, B and C names C
    # alone (GitLab's push event of over 20 commits names its last alone too): it brought
    # them all. One listing for the head, in the first job; none in the later ones.
    bot.forge.open_pull(7, head_sha=C, base="main", author="alice", head_ref="change")
    bot.deliver("pull_request", gw.pr_event("opened", C, "alice", head_ref="change"))
    gw.plan(bot, C, CHANGE)
    gw.approve(bot, "bob", C, 41)
    check = bot.approval(C)
    assert check.conclusion == "success", check.summary
    assert _asked(bot) == 1
    assert {push.sha for push in bot.ledger.pushes_of(gw.KEY, [A, B, C])} == {A, B, C}


def test_a_hooked_push_listing_part_of_its_commits_asks_no_approval_more(bot: Bot) -> None:
    # GitLab's push hook lists 20 commits of a push of more: the forge's record of the
    # push (its head, and the head before it) covers those the hook left out.
    bot.forge.open_pull(7, head_sha=C, base="main", author="alice", head_ref="change")
    bot.deliver("push", gw.push("change", C, "alice", (B, C)))  # A left out
    bot.deliver("pull_request", gw.pr_event("opened", C, "alice", head_ref="change"))
    gw.plan(bot, C, CHANGE)
    gw.approve(bot, "bob", C, 41)
    check = bot.approval(C)
    assert check.conclusion == "success", check.summary
    assert _asked(bot) == 1  # asked once per head, though the hook recorded the head


def test_a_later_push_on_top_does_not_cover_a_buried_push_below_it(bot: Bot) -> None:
    # mallory pushes B (no hook), then buries that record under PUSH_RECORDS_LIMIT pushes
    # of other branches; alice pushes C on top (hook): her record's `before` is B, so it
    # brought C alone, and nobody covers B: one approval more, from someone else.
    bot.forge.push_log.append(("change", B, "mallory"))
    bot.forge.push_log += [(f"junk-{n}", Y, "mallory") for n in range(PUSH_RECORDS_LIMIT)]
    bot.forge.open_pull(7, head_sha=C, base="main", author="alice", head_ref="change")
    bot.deliver("push", gw.push("change", C, "alice", (C,)))
    bot.deliver("pull_request", gw.pr_event("opened", C, "alice", head_ref="change"))
    gw.plan(bot, C, CHANGE)
    gw.approve(bot, "mallory", C, 41)
    check = bot.approval(C)
    assert check.conclusion != "success", check.summary
    assert "names nobody who pushed it" in check.summary, check.summary
    gw.approve(bot, "carol", C, 42)
    check = bot.approval(C)
    assert check.conclusion == "success", check.summary
    assert _asked(bot) == 1  # the answer is kept: later jobs read it from the ledger


def test_the_same_push_not_buried_names_its_pusher_below_the_head(bot: Bot) -> None:
    bot.forge.push_log.append(("change", B, "mallory"))
    bot.forge.open_pull(7, head_sha=C, base="main", author="alice", head_ref="change")
    bot.deliver("push", gw.push("change", C, "alice", (C,)))
    bot.deliver("pull_request", gw.pr_event("opened", C, "alice", head_ref="change"))
    gw.plan(bot, C, CHANGE)
    gw.approve(bot, "mallory", C, 41)
    check = bot.approval(C)
    assert check.conclusion != "success", check.summary
    assert "Not counted: @mallory pushed to this pull request" in check.summary
    assert {(p.sha, p.user) for p in bot.ledger.pushes_of(gw.KEY, [A, B])} == {
        (A, "mallory"),
        (B, "mallory"),
    }


def test_a_new_head_is_asked_again(bot: Bot) -> None:
    bot.forge.open_pull(7, head_sha=B, base="main", author="alice", head_ref="change")
    bot.deliver("pull_request", gw.pr_event("opened", B, "alice", head_ref="change"))
    gw.plan(bot, B, CHANGE)
    gw.approve(bot, "bob", B, 41)
    assert _asked(bot) == 1
    bot.forge.push(7, C, by="alice")
    bot.deliver("pull_request", gw.pr_event("synchronize", C, "alice", head_ref="change"))
    gw.plan(bot, C, CHANGE)
    gw.approve(bot, "bob", C, 42)
    assert bot.approval(C).conclusion == "success", bot.approval(C).summary
    assert _asked(bot) == 2


# -- the records of every branch (red team round 5) -------------------------------------------


def test_a_hookless_push_to_another_branch_names_its_pusher_for_the_commits_it_brought(
    bot: Bot,
) -> None:
    # mallory pushes A and B to `side` with no hook (the forge records it); alice makes
    # `change` from `side` and pushes C on it (her record names her for them all): the
    # listing of every branch names mallory for A and B, so her approval is not enough.
    bot.forge.push_log.append(("side", B, "mallory"))
    bot.forge.open_pull(7, head_sha=C, base="main", author="alice", head_ref="change")
    bot.deliver("push", gw.push("change", C, "alice", (A, B, C)))
    bot.deliver("pull_request", gw.pr_event("opened", C, "alice", head_ref="change"))
    gw.plan(bot, C, CHANGE)
    gw.approve(bot, "mallory", C, 41)
    check = bot.approval(C)
    assert check.conclusion != "success", check.summary
    assert "Not counted: @mallory pushed to this pull request" in check.summary
    assert {(p.sha, p.user) for p in bot.ledger.pushes_of(gw.KEY, [A, B, C])} >= {
        (A, "mallory"),
        (B, "mallory"),
    }
    gw.approve(bot, "carol", C, 42)  # an approver who pushed nothing: one more
    check = bot.approval(C)
    assert check.conclusion == "success", check.summary
    assert _asked(bot) == 1  # one listing, of every branch, for the head


def test_other_branches_pushes_count_toward_the_bound_and_past_it_ask_one_approval_more(
    bot: Bot,
) -> None:
    # alice's push of `change` to C had no hook; carol's 300 pushes of other branches
    # since fill the one listing of every branch: nobody is named for C, one more asked.
    bot.forge.open_pull(7, head_sha=C, base="main", author="alice", head_ref="change")
    bot.forge.push_log += [(f"junk-{n}", Y, "carol") for n in range(PUSH_RECORDS_LIMIT)]
    bot.deliver("pull_request", gw.pr_event("opened", C, "alice", head_ref="change"))
    gw.plan(bot, C, CHANGE)
    gw.approve(bot, "bob", C, 41)
    check = bot.approval(C)
    assert check.conclusion != "success", check.summary
    assert "names nobody who pushed it" in check.summary, check.summary
    assert _asked(bot) == 1
