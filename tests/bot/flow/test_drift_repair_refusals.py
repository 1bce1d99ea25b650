"""A refused "Approve the repair" click: its audit row says why it was refused (a bot
account, a login held by another account than the one the settings named, no role the
gate in force lets approve), never one reason for all (sluice.bot.flow.repair_gate
approver_refusal). Through the drift-repair world of tests/helpers/repair_red_team.py:
real webhook bodies, the in-memory GitHub, the ledger on SQLite, the scripted warehouse.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.bot.flow import audit
from tests.helpers.repair_red_team import KEY, ONE, RepairWorld

OWNERS = ONE + "    owners_must_approve: direct\n"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[RepairWorld]:
    """users [bob, carol] approve (one of them); prod's view redefined by hand."""
    made = RepairWorld(tmp_path, ONE)
    try:
        yield made
    finally:
        made.close()


def _asked(world: RepairWorld) -> int:
    """alice asks for the repair of prod's drift; the apply jobs run so far."""
    world.redefine()
    world.click("alice", world.button("Plan the repair"))
    return world.applied()


def _refused(world: RepairWorld, who: str) -> tuple[str, int | None]:
    [row] = [
        (e.detail, e.actor_id)
        for e in world.ledger.entries(repo=KEY)
        if e.kind == audit.REFUSAL and e.actor == who
    ]
    return row


def test_a_required_approver_s_bot_account_is_refused_as_a_bot(world: RepairWorld) -> None:
    world.github.bots["carol"] = True  # what GitHub says of carol's account
    built = _asked(world)
    world.click("carol", world.button("Approve the repair"))
    assert world.applied() == built
    detail, uid = _refused(world, "carol")
    assert detail.startswith("a bot account: the forge says its account is a bot"), detail
    assert "not a required approver" not in detail
    assert uid == world.github.account_id("carol")


def test_an_account_holding_a_named_login_it_took_later_is_told_so(world: RepairWorld) -> None:
    built = _asked(world)  # the settings came into force: bob is bob's account
    bob = world.github.rename("bob", "bobx")
    world.github.roles["bob"] = "write"  # another account takes the freed login
    taker = world.github.account_id("bob")
    world.click("bob", world.button("Approve the repair"))
    assert world.applied() == built
    detail, uid = _refused(world, "bob")
    assert uid == taker
    assert "the login bob is named for the account that held it" in detail, detail
    assert f"(account {bob})" in detail and f"(account {taker})" in detail
    assert "not a required approver" not in detail
    world.click("bobx", world.button("Approve the repair"))  # bob himself, renamed
    assert world.applied() == built + 1


def test_a_login_no_account_held_when_the_settings_came_into_force_names_nobody(
    world: RepairWorld,
) -> None:
    world.github.gone.add("carol")  # no account has the login when the settings are read
    built = _asked(world)
    world.github.gone.discard("carol")  # an account has it now
    world.click("carol", world.button("Approve the repair"))
    assert world.applied() == built
    detail, _uid = _refused(world, "carol")
    assert "the login carol is named, but no account held it" in detail, detail


def test_a_writer_the_gate_does_not_name_is_told_which_roles_approve(
    world: RepairWorld,
) -> None:
    built = _asked(world)
    world.click("erin", world.button("Approve the repair"))
    assert world.applied() == built
    assert _refused(world, "erin")[0] == "not a required approver"


def test_under_an_owners_gate_the_owners_are_named_among_who_approves(tmp_path: Path) -> None:
    world = RepairWorld(tmp_path, OWNERS)
    try:
        built = _asked(world)
        world.click("erin", world.button("Approve the repair"))
        assert world.applied() == built
        detail = _refused(world, "erin")[0]
        assert detail == "not a required approver or an owner of a model prod records"
    finally:
        world.close()
