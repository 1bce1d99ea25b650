"""A repository's namespace follows the forge's id of it, not its name (issue 46): renamed,
it keeps its namespace (state, Spark schemas and root, trees) and its records (plans,
pushers, heads, approvals) under the new name, once the forge confirms the id's name; its
old name stays bound to it until the forge says another repository has it (then that
one is served under it in a namespace of its own, inheriting nothing); a delivery naming another repository's id never reaches that repository's
namespace on its own word; names are compared case-folded."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

import pytest

from sluice.bot.flow import tenancy
from sluice.bot.flow.ledger import Ledger
from sluice.bot.forge.base import ForgeError
from sluice.bot.forge.memory import MemoryForge
from sluice.bot.queue.store import JobQueue, NewJob
from sluice.bot.web.reader import Reader
from sluice.bot.web.site import StateOwner
from sluice.core.spark.scripted import Warehouse
from tests.security.github_bot import GATED, KEY, NOW, OWNER, Bot, C, opened

CONFIG = GATED + "  pr:\n    backfill_days: null\n"
HEADS = {n: f"{n:02d}" * 20 for n in range(9, 30)}
ID, OTHER_ID = 424242, 990001
RENAMED = "octo/renamed"


def _as(payload: dict[str, Any], full_name: str, repository_id: int) -> dict[str, Any]:
    """``payload`` from repository ``full_name`` of forge id ``repository_id``."""
    repository = {**payload["repository"], "full_name": full_name, "id": repository_id}
    pull = payload.get("pull_request")
    if pull is not None:  # its head on the same repository (no fork)
        same = {"full_name": full_name, "id": repository_id}
        head = {**pull["head"], "repo": {**pull["head"]["repo"], **same}}
        pull = {**pull, "head": head, "base": {**pull["base"], "repo": repository}}
        return {**payload, "repository": repository, "pull_request": pull}
    return {**payload, "repository": repository}


class World:
    """An isolating service and its GitHub in memory; each build's tree is recorded."""

    def __init__(self, root: Path) -> None:
        self.trees: list[Path] = []
        warehouse = Warehouse()

        def runner_for(project: Any, tree: Path, on_event: Any) -> Any:
            self.trees.append(tree)
            return warehouse.runner(project, tree, on_event)

        self.github = MemoryForge(OWNER, name="github")
        self.github.repositories[ID] = OWNER
        self.bot = Bot(root, self.github, runner_for=runner_for, isolate=True)
        self.bot.prod(C, CONFIG)
        ticks = iter(range(NOW, NOW + 10**9, 1000))  # a second a job: names' latest told
        self.bot.deps = dataclasses.replace(self.bot.deps, clock=lambda: next(ticks))

    def pull(self, forge: MemoryForge, number: int) -> str:
        head = HEADS[number]
        src = self.bot.commit(head, CONFIG, parents=(C,), forge=forge)
        orders = src / "models" / "orders.sql"
        orders.write_text(orders.read_text() + f"\n-- {head[:4]}\n")
        forge.commit_folder(head, src, parents=(C,))
        if C not in forge.files:
            forge.files[C] = self.github.files[C]
            forge.refs["main"] = C
        forge.open_pull(number, head_sha=head, base="main", author="alice")
        return head

    def built(self, head: str) -> Path | None:
        return next((tree for tree in self.trees if tree.name.startswith(head[:12])), None)

    def rename(self, forge: MemoryForge, new: str, repository_id: int) -> None:
        """GitHub renames ``forge``'s repository ``new`` (its id kept)."""
        self.bot.forges.pop(forge.repo, None)
        forge.repo = new
        self.bot.forges[new] = forge
        self.github.repositories[repository_id] = new
        for other in self.bot.forges.values():
            other.repositories[repository_id] = new


def _namespace_folder(repo: str) -> str:
    return tenancy.repository_name(repo)


@pytest.fixture
def world(tmp_path: Path) -> Any:
    made = World(tmp_path)
    yield made
    made.bot.close()


def test_a_renamed_repository_keeps_its_namespace_and_its_old_name(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    bot, github = world.bot, world.github
    first = world.pull(github, 9)
    bot.deliver("pull_request", _as(opened(9, first), OWNER, ID))
    tree = world.built(first)
    assert tree is not None and _namespace_folder(KEY) in str(tree)
    assert bot.ledger.pushers(KEY, 9) == {"codertocat"}

    world.rename(github, RENAMED, ID)
    second = world.pull(github, 11)
    bot.deliver("pull_request", _as(opened(11, second), RENAMED, ID))
    tree = world.built(second)
    # The same namespace: its trees' folder, and its records under its first name.
    assert tree is not None and _namespace_folder(KEY) in str(tree)
    assert _namespace_folder(f"github:{RENAMED}") not in str(tree)
    assert set(bot.ledger.plans(KEY, 11)) == {second}
    assert bot.ledger.plans(f"github:{RENAMED}", 11) == {}
    assert bot.ledger.canonical(f"github:{RENAMED.upper()}") == KEY
    assert not (bot.root / f"state.{_namespace_folder(f'github:{RENAMED}')}.db").exists()
    assert bot.ledger.repositories() == [(f"github:{RENAMED}", None)]  # its name now
    assert second in github.checks  # asked under its name now
    # The web UI lists it under its name now and reads its records and namespace there.
    owner = StateOwner(bot.url, isolate=True)
    try:
        assert owner() == [f"github:{RENAMED}"]
        url = owner.state_url(f"github:{RENAMED}")
        assert url == owner.state_url(KEY) and _namespace_folder(KEY) in url
        assert owner.spark_root(f"github:{RENAMED}") == tenancy.spark_root(KEY)
        reader = Reader(f"github:{RENAMED}", bot.url, queue=False, state=url)
        try:
            assert reader.key == KEY
            view = reader.pull(11)
            assert view is not None and view.head_sha == second
        finally:
            reader.close()
    finally:
        owner.close()

    # A new repository made under the old name (another id; GitHub names the renamed one
    # otherwise): served, in a namespace of its own, inheriting nothing.
    newcomer = bot.repository(OWNER)
    newcomer.repositories.update({OTHER_ID: OWNER, ID: RENAMED})
    third = world.pull(newcomer, 13)
    with caplog.at_level(logging.WARNING):
        bot.deliver("pull_request", _as(opened(13, third), OWNER, OTHER_ID))
    tree = world.built(third)
    assert tree is not None and _namespace_folder(KEY) not in str(tree)
    assert _namespace_folder(f"{KEY}~{OTHER_ID}") in str(tree)
    assert bot.ledger.plans(KEY, 13) == {} and set(bot.ledger.plans(f"{KEY}~{OTHER_ID}", 13))
    assert f"bound to the repository whose github id is {ID}" in caplog.text
    assert bot.ledger.name_binding(KEY) == (f"{KEY}~{OTHER_ID}", OTHER_ID)
    # The renamed one keeps its namespace and records under its name now.
    assert bot.ledger.canonical(f"github:{RENAMED}") == KEY
    fourth = world.pull(github, 15)
    bot.deliver("pull_request", _as(opened(15, fourth), RENAMED, ID))
    tree = world.built(fourth)
    assert tree is not None and _namespace_folder(KEY) in str(tree)
    assert _namespace_folder(f"{KEY}~{OTHER_ID}") not in str(tree)
    assert set(bot.ledger.plans(KEY, 15)) == {fourth}


def test_a_delivery_naming_another_repository_s_id_is_refused(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    bot, github = world.bot, world.github
    first = world.pull(github, 9)
    bot.deliver("pull_request", _as(opened(9, first), OWNER, ID))  # the victim, bound
    other = bot.repository("octo/other")
    other.repositories.update({ID: OWNER, OTHER_ID: "octo/other"})
    head = world.pull(other, 11)
    bot.deliver("pull_request", _as(opened(11, head), "octo/other", OTHER_ID))
    assert world.built(head) is not None

    # Its own name with the victim's id: its name is bound to its own id (a successor).
    forged = world.pull(other, 13)
    with caplog.at_level(logging.ERROR):
        bot.deliver("pull_request", _as(opened(13, forged), "octo/other", ID))
    assert world.built(forged) is None
    # The forge says that id is the victim's name, not this one: refused before binding.
    assert f"github id is {ID}, and github says that repository is {OWNER} now" in caplog.text
    assert bot.ledger.name_binding("github:octo/other") == ("github:octo/other", OTHER_ID)
    # Under a new name with the victim's id: the forge says that id is the victim's name,
    # so it is no rename: refused, nothing bound.
    world.rename(other, "octo/evil", OTHER_ID)
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        bot.deliver("pull_request", _as(opened(13, forged), "octo/evil", ID))
    assert world.built(forged) is None and forged not in other.checks
    assert "not this name" in caplog.text and "octo/warehouse" in caplog.text
    assert bot.ledger.name_binding("github:octo/evil") is None
    assert bot.ledger.plans(KEY, 13) == {}
    # The victim renamed, the attacker renames theirs to the victim's old name: served
    # under it in its own namespace (its first name's), never the victim's.
    world.rename(github, RENAMED, ID)
    world.rename(other, OWNER, OTHER_ID)
    bot.deliver("pull_request", _as(opened(13, forged), OWNER, OTHER_ID))
    tree = world.built(forged)
    assert tree is not None and _namespace_folder(KEY) not in str(tree)
    assert _namespace_folder("github:octo/other") in str(tree)
    assert bot.ledger.plans(KEY, 13) == {}
    assert bot.ledger.name_binding(KEY) == ("github:octo/other", OTHER_ID)


def test_names_are_followed_case_folded(world: World, caplog: pytest.LogCaptureFixture) -> None:
    bot, github = world.bot, world.github
    first = world.pull(github, 9)
    bot.deliver("pull_request", _as(opened(9, first), OWNER, ID))
    # GitHub renames it only in case: the same name, its records found under either case.
    world.rename(github, OWNER.upper(), ID)
    second = world.pull(github, 11)
    bot.deliver("pull_request", _as(opened(11, second), OWNER.upper(), ID))
    assert set(bot.ledger.plans(KEY, 11)) == {second}
    assert bot.ledger.pushers(KEY, 11) == {"codertocat"}
    # Another repository under the name in another case, while GitHub says the bound one
    # has it still (a rename under way): not run yet, tried again by the queue.
    newcomer = bot.repository("Octo/WareHouse")
    newcomer.repositories.update({OTHER_ID: "Octo/WareHouse", ID: OWNER.upper()})
    third = world.pull(newcomer, 13)
    with caplog.at_level(logging.WARNING), pytest.raises(ForgeError, match="a rename under"):
        bot.deliver("pull_request", _as(opened(13, third), "Octo/WareHouse", OTHER_ID))
    assert world.built(third) is None and third not in newcomer.checks
    assert bot.ledger.name_binding(KEY) == (KEY, ID)
    # Once GitHub names the bound one otherwise: the newcomer's, in a namespace of its own.
    newcomer.repositories[ID] = RENAMED
    bot.deliver("pull_request", _as(opened(13, third), "Octo/WareHouse", OTHER_ID))
    tree = world.built(third)
    assert tree is not None and _namespace_folder(f"{KEY}~{OTHER_ID}".lower()) in str(tree)
    assert set(bot.ledger.pushers(KEY, 11)) == {"codertocat"}  # the first one's, kept


def test_deliveries_without_an_id_follow_a_bound_name(world: World) -> None:
    bot, github = world.bot, world.github
    first = world.pull(github, 9)
    bot.deliver("pull_request", _as(opened(9, first), OWNER, ID))
    world.rename(github, RENAMED, ID)
    second = world.pull(github, 11)
    bot.deliver("pull_request", _as(opened(11, second), RENAMED, ID))
    third = world.pull(github, 13)
    payload = _as(opened(13, third), RENAMED, ID)
    payload["repository"].pop("id")  # as the Action's, the local forge's: no id
    bot.deliver("pull_request", payload)
    tree = world.built(third)
    assert tree is not None and _namespace_folder(KEY) in str(tree)
    assert set(bot.ledger.plans(KEY, 13)) == {third}
    assert NOW  # the flow's clock


def test_the_jobs_page_of_a_renamed_repository_lists_its_jobs_under_each_name(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    ledger = Ledger(url)
    queue = JobQueue(url)
    try:
        ledger.bind_repository(KEY, ID, NOW)
        ledger.add_name(f"github:{RENAMED}", ID, KEY, NOW + 1)
        for delivery, key in (
            ("d1", f"{KEY}#9"),  # before the rename
            ("d2", f"github:{RENAMED}#11"),  # after
            ("d3", f"{KEY}x#1"),  # a repository whose name merely starts the same
            ("d4", "github:octo/other#2"),
        ):
            assert queue.accept(delivery, "github", "pr", NewJob(key, "pull_request", {}), 1.0)
    finally:
        queue.close()
        ledger.close()
    reader = Reader(f"github:{RENAMED}", url)
    try:
        listed = reader.jobs(offset=0, limit=10).queue
        assert sorted(job.key for job in listed.items) == [f"github:{RENAMED}#11", f"{KEY}#9"]
        assert listed.total == 2
        ids = {job.key: job.id for job in listed.items}
        assert reader.queue_job(ids[f"{KEY}#9"]) is not None
    finally:
        reader.close()
