"""Who may roll prod back follows the gate's intent (docs/security.md, "who may roll prod
back"): a rollback changes prod without a review of its own, so it is run by someone the
gate would accept for that change: a required approver, or under an owners' gate the owner
of every model it changes; any writer only when the gate requires nobody.

Prod has two plans (``jaffle.customers`` changed in the second; its owner is
``marketing``); the rollback goes back to the first. No Spark: the scripted runner runs the job.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sluice.bot.events.neutral import CommentEvent
from sluice.bot.flow import dispatch
from sluice.bot.forge.memory import MemoryForge, as_forge
from sluice.core.spark.scripted import Warehouse
from tests.helpers.prod_twice import prod_recorded_twice

REPO = Path(__file__).resolve().parents[2]
MAIN = "e" * 40
NOW = 1_525_046_400_000

World = Callable[[str], tuple[Callable[[str], str], Warehouse]]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    """``world(gate)``: prod at two plans under ``gate`` (the text under ``sluice:``), and
    ``say(author)``, which comments ``/sluice rollback`` on the merged PR 7 and returns the
    bot's reply."""
    from sluice.bot.flow.deps import make_deps

    made = []

    def make(gate: str) -> tuple[Callable[[str], str], Warehouse]:
        url = f"sqlite:///{tmp_path / 'state.db'}"
        second = prod_recorded_twice(tmp_path, url, NOW, gate=gate)
        forge = MemoryForge()
        forge.commit_folder(MAIN, second, branch="main")
        forge.open_pull(7, head_sha=MAIN, base="main", author="alice")
        forge.close_pull(7, merged=True)
        forge.roles.update({"alice": "write", "bob": "write", "marketing": "write",
                            "mia": "write"})  # fmt: skip
        forge.teams["octo/marketing"] = frozenset({"mia"})
        runner = Warehouse()
        deps = make_deps(project_python="on", forge_for=lambda _event: as_forge(forge),
                         workdir=tmp_path / "work", state_url=url, runner_for=runner.runner,
                         clock=lambda: NOW + 120_000)  # fmt: skip
        deps.ledger.seen(f"memory:{forge.repo}", None, NOW, sha=MAIN)
        made.append(deps)

        def say(author: str) -> str:
            comment_id = forge.add_comment(7, author, "/sluice rollback")
            event = CommentEvent(
                forge="memory", repo=forge.repo, installation_id=None, action="created",
                number=7, comment_id=comment_id, author=author, body="/sluice rollback",
                author_id=forge.account_id(author),  # as GitHub's comment events carry it
            )  # fmt: skip
            dispatch.handle(deps, event)
            return forge.bot_comments(7)[-1]

        return say, runner

    yield make
    for deps in made:
        deps.close()


OWNERS_ONLY = "\n  gate:\n    owners_must_approve: direct\n"
OWNERS_AND_APPROVERS = (
    "\n  gate:\n    owners_must_approve: direct\n    required_approvers:\n      users: [bob]\n"
)


def test_under_an_owners_gate_a_plain_writer_may_not_roll_back(world: World) -> None:
    say, runner = world(OWNERS_ONLY)
    reply = say("alice")
    assert reply.startswith("@alice not rolled back: a rollback changes prod"), reply
    assert "the owner of every model it changes (`jaffle.customers` (`marketing`)" in reply
    assert "`sluice.gate.owners_must_approve: direct`" in reply
    assert runner.jobs == []
    # The owner may.
    assert say("marketing").startswith("@marketing rolled prod back"), runner.jobs


def test_the_owner_or_a_required_approver_may_and_nobody_else(world: World) -> None:
    say, runner = world(OWNERS_AND_APPROVERS)
    refused = say("alice")
    assert "only a required approver of the gate (`bob`" in refused
    assert "or the owner of every model it changes (`jaffle.customers` (`marketing`)" in refused
    assert runner.jobs == []
    assert say("marketing").startswith("@marketing rolled prod back")


def test_a_required_approver_may_under_an_owners_gate(world: World) -> None:
    say, _ = world(OWNERS_AND_APPROVERS)
    assert say("bob").startswith("@bob rolled prod back")


def test_under_a_breaking_gate_a_namesake_team_s_member_is_not_the_owner(world: World) -> None:
    say, _ = world(OWNERS_ONLY.replace("direct", "breaking"))
    # customers' owner is the login `marketing`; mia is only in a team of that name.
    assert "not rolled back" in say("mia")


def test_without_any_gate_any_writer_may(world: World) -> None:
    say, _ = world("")
    assert say("alice").startswith("@alice rolled prod back")
