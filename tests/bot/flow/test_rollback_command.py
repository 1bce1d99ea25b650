"""``/sluice rollback [plan id]`` on a merged pull request: prod's views back at the tables
of an earlier plan, by a required approver of the gate only, nothing computed. No Spark:
prod's two plans are recorded as built, and the scripted runner runs the job it is given (no Spark)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sluice.bot.events.commands import CommandError, parse_line
from sluice.bot.events.neutral import CommentEvent, pr_key
from sluice.bot.flow import dispatch
from sluice.bot.flow.deps import Deps, make_deps
from sluice.bot.forge.memory import MemoryForge, as_forge
from sluice.core.rollback import history
from sluice.core.spark.scripted import Warehouse
from sluice.core.state import open_state
from tests.helpers.kept_world import Kept, keep, restore
from tests.helpers.prod_twice import prod_recorded_twice

REPO = Path(__file__).resolve().parents[3]
MAIN = "e" * 40
FIRST = "1" * 40
NOW = 1_525_046_400_000
GATE = "\n  gate:\n    required_approvers:\n      users: [bob]\n      teams: [octo/data]\n"


@dataclass
class World:
    forge: MemoryForge
    deps: Deps
    runner: Warehouse
    url: str
    plans: list[str]  # prod's plans, oldest first
    comments: int = 0

    def say(self, author: str, body: str, number: int = 7) -> str:
        comment_id = self.forge.add_comment(number, author, body)
        event = CommentEvent(
            forge="memory", repo=self.forge.repo, installation_id=None, action="created",
            number=number, comment_id=comment_id, author=author, body=body,
            author_id=self.forge.account_id(author),  # as GitHub's comment events carry it
        )  # fmt: skip
        assert pr_key(event) == f"memory:{self.forge.repo}:prod"  # beside promotions, never at once
        dispatch.handle(self.deps, event)
        return self.forge.bot_comments(number)[-1]

    def prod_plan(self) -> str:
        store = open_state(self.url)
        try:
            record = store.get_environment("prod")
            assert record is not None
            return record.plan_id
        finally:
            store.close()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Kept:
    """Prod recorded twice (the example, then with a column more), the forge's main at
    the second, PR 7 merged and PR 8 open. Built once for the module
    (tests/helpers/kept_world.py): each test gets a copy of its own (``world``)."""
    folder = tmp_path_factory.mktemp("rollback-world")
    url = f"sqlite:///{folder / 'state.db'}"
    # promoted from FIRST, then from MAIN
    second = prod_recorded_twice(folder, url, NOW, gate=GATE, commits=(FIRST, MAIN))
    forge = MemoryForge()
    forge.commit_folder(MAIN, second, branch="main")
    forge.open_pull(7, head_sha=MAIN, base="main", author="alice")
    forge.close_pull(7, merged=True)
    forge.open_pull(8, head_sha=MAIN, base="main", author="alice")
    forge.roles.update({"alice": "write", "bob": "write", "dana": "write", "carol": "read"})
    forge.teams["octo/data"] = frozenset({"dana"})
    runner = Warehouse()
    deps = _deps(folder, forge, runner)
    deps.ledger.seen(f"memory:{forge.repo}", None, NOW, sha=MAIN)
    deps.close()
    return keep(folder, forge, runner)


def _deps(folder: Path, forge: MemoryForge, runner: Warehouse) -> Deps:
    return make_deps(project_python="on", forge_for=lambda _event: as_forge(forge),
                     workdir=folder / "work", state_url=f"sqlite:///{folder / 'state.db'}",
                     runner_for=runner.runner, clock=lambda: NOW + 120_000)  # fmt: skip


@pytest.fixture
def world(built: Kept) -> Iterator[World]:
    """The world :func:`built` made, a copy of its own for this test."""
    folder, forge, runner = restore(built)
    url = f"sqlite:///{folder / 'state.db'}"
    deps = _deps(folder, forge, runner)
    store = open_state(url)
    plans = [p.plan_id for p in reversed(history(store, "prod"))]
    store.close()
    assert len(plans) == 2
    yield World(forge, deps, runner, url, plans)
    deps.close()


def test_an_approver_rolls_prod_back_by_virtual_update(world: World) -> None:
    reply = world.say("bob", "/sluice rollback")
    assert reply.startswith(f"@bob rolled prod back to plan `{world.plans[0][:7]}`"), reply
    assert "no data computed" in reply and "`jaffle.customers`" in reply
    [job] = world.runner.jobs
    kinds = {step["type"] for step in job["steps"]}
    assert "build" not in kinds and "views" in kinds  # views re-pointed, nothing built
    # Prod's new plan points at exactly the first plan's tables.
    store = open_state(world.url)
    try:
        now, first = store.get_plan(world.prod_plan()), store.get_plan(world.plans[0])
        assert now is not None and first is not None
        versions = lambda plan: sorted(tuple(s[:2]) for s in plan.payload["snapshots"])  # noqa: E731
        assert versions(now) == versions(first)
        # ... and records the commit they came from: prod's runs and repairs load it
        assert (now.project_commit, first.project_commit) == (FIRST, FIRST)
    finally:
        store.close()


def test_a_team_member_of_the_gate_may_and_a_named_plan_is_found_by_its_prefix(
    world: World,
) -> None:
    reply = world.say("dana", f"/sluice rollback {world.plans[0][:9].upper()}")
    assert reply.startswith("@dana rolled prod back"), reply


def test_who_may_not_roll_back_and_where_it_does_not_apply(world: World) -> None:
    before = world.prod_plan()
    assert "only users with write permission" in world.say("carol", "/sluice rollback")
    reply = world.say("alice", "/sluice rollback")
    assert "only a required approver of the gate" in reply
    assert "`bob`" in reply and "`octo/data`" in reply
    assert "works on a merged pull request" in world.say("bob", "/sluice rollback", number=8)
    reply = world.say("bob", "/sluice rollback deadbeef")
    assert "not rolled back; prod is unchanged" in reply
    assert "plan deadbeef is not in prod's history" in reply
    assert world.prod_plan() == before and world.runner.jobs == []


def test_a_bot_in_the_gate_s_team_may_not_and_is_told_why(world: World) -> None:
    # A service account in octo/data (the forge says it is a bot, by its id): whoever holds
    # its token is not named, so it rolls nothing back; dana, a person of the team, may.
    world.forge.teams["octo/data"] = frozenset({"dana", "deploy-helper"})
    world.forge.roles["deploy-helper"] = "write"
    world.forge.bots["deploy-helper"] = True
    reply = world.say("deploy-helper", "/sluice rollback")
    assert reply.startswith("@deploy-helper not rolled back"), reply
    assert "This is a bot account (the forge says its account is a bot" in reply, reply
    assert world.runner.jobs == []
    [refusal] = [r for r in world.deps.ledger.entries() if r.kind == "refusal"]
    assert refusal.detail.startswith("a bot account: the forge says"), refusal.detail
    assert world.say("dana", "/sluice rollback").startswith("@dana rolled prod back")


def test_a_comment_without_its_author_s_account_is_no_approver_s(world: World) -> None:
    # The settings name bob by the account his login had when they came into force: a
    # command whose author's account is not known could be anyone's who holds `bob` now.
    comment_id = world.forge.add_comment(7, "bob", "/sluice rollback")
    event = CommentEvent(
        forge="memory", repo=world.forge.repo, installation_id=None, action="created",
        number=7, comment_id=comment_id, author="bob", body="/sluice rollback",
    )  # fmt: skip
    dispatch.handle(world.deps, event)
    assert "only a required approver of the gate" in world.forge.bot_comments(7)[-1]
    assert world.runner.jobs == []


def test_a_rollback_that_would_compute_data_is_refused_naming_the_models(world: World) -> None:
    store = open_state(world.url)
    try:  # the janitor dropped the first plan's customers table
        first = store.get_plan(world.plans[0])
        assert first is not None
        [version] = [s[1] for s in first.payload["snapshots"] if s[0] == "jaffle.customers"]
        store.delete_snapshots([("jaffle.customers", version)])
    finally:
        store.close()
    reply = world.say("bob", "/sluice rollback")
    assert "not rolled back; prod is unchanged" in reply and "jaffle.customers" in reply
    assert world.runner.jobs == []


@pytest.mark.parametrize("line", ["/sluice rollback abc", "/sluice rollback 1234567 89abcde",
                                  "/sluice rollback <b>x</b>"])  # fmt: skip
def test_a_bad_plan_id_is_a_usage_error_quoting_it_as_code(line: str) -> None:
    with pytest.raises(CommandError) as raised:
        parse_line(line)
    assert raised.value.message == "`/sluice rollback [plan id]`"
    assert "is not a plan id" in (raised.value.hint or "")
    assert "<b>" not in (raised.value.hint or "").replace("`<b>x</b>`", "")
