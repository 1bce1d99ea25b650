"""A repository's namespace (state, Spark schemas and root, trees, history) is its name's:
the name is bound to the forge's id of the repository the first time a delivery says it
(GitHub ``repository.id``, GitLab ``project.id``), and a repository of another id under
that name (one created or renamed into it after the first was renamed, transferred or
deleted, as the forge says) takes the name, in a namespace of its own, inheriting nothing
(docs/architecture.md). Deliveries
that say no id (the Action, the local forge, the CLI, the web UI) are handled as before."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from sluice.bot.events.github import parse_github
from sluice.bot.events.gitlab import parse_gitlab
from sluice.bot.events.payload import PayloadError
from sluice.bot.forge.base import ForgeError
from sluice.bot.forge.memory import MemoryForge
from sluice.core.spark.scripted import Warehouse
from tests.helpers.cases import load_case, realcase
from tests.security.github_bot import GATED, KEY, NOW, OWNER, Bot, C, opened

CONFIG = GATED + "  pr:\n    backfill_days: null\n"
FIRST, SECOND, THIRD = "e1" * 20, "e2" * 20, "e3" * 20


def _with_id(payload: dict[str, Any], repository_id: int | None) -> dict[str, Any]:
    repository = dict(payload["repository"])
    if repository_id is None:
        repository.pop("id")
    else:
        repository["id"] = repository_id
    return {**payload, "repository": repository}


def test_a_name_bound_to_another_id_is_taken_once_the_forge_names_its_holder_otherwise(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    built: list[str] = []
    warehouse = Warehouse()

    def runner_for(project: Any, tree: Path, on_event: Any) -> Any:
        built.append(tree.name)
        return warehouse.runner(project, tree, on_event)

    github = MemoryForge(OWNER, name="github")
    github.repositories[424242] = OWNER  # what GitHub names the bound id now
    bot = Bot(tmp_path, github, runner_for=runner_for, isolate=True)
    try:
        bot.prod(C, CONFIG)
        for number, head in ((9, FIRST), (11, SECOND), (13, THIRD)):
            src = bot.commit(head, CONFIG, parents=(C,))
            orders = src / "models" / "orders.sql"
            orders.write_text(orders.read_text() + f"\n-- {head[:4]}\n")
            github.commit_folder(head, src, parents=(C,))
            bot.pull(number, head)
        bot.deliver("pull_request", _with_id(opened(9, FIRST), 424242))  # binds the name
        assert FIRST in built
        assert bot.ledger.bind_repository(KEY, 1, NOW).repo_id == 424242
        # A delivery that names no id (as the Action's, the local forge's): as before,
        # while the forge names the bound id so.
        bot.deliver("pull_request", _with_id(opened(13, THIRD), None))
        assert THIRD in built
        # Another repository (id 990001) says the name while GitHub names the bound one so
        # still (a rename under way): not run yet, the queue tries it again.
        github.repositories[990001] = OWNER
        with pytest.raises(ForgeError, match="a rename under way"):
            bot.deliver("pull_request", _with_id(opened(11, SECOND), 990001))
        assert SECOND not in built and SECOND not in github.checks
        assert bot.ledger.name_binding(KEY) == (KEY, 424242)
        # The bound one renamed away: the name is the other's now, in a namespace of its
        # own (``<name>~<id>``, inheriting nothing), said with both ids.
        github.repositories[424242] = "octo/warehouse-renamed"
        with caplog.at_level(logging.WARNING):
            bot.deliver("pull_request", _with_id(opened(11, SECOND), 990001))
        assert SECOND in built
        assert bot.ledger.name_binding(KEY) == (f"{KEY}~990001", 990001)
        said = caplog.text
        assert "bound to the repository whose github id is 424242" in said
        assert "repository id 990001's now" in said and "namespace of its own" in said
        assert bot.ledger.plans(KEY, 11) == {} and set(bot.ledger.plans(f"{KEY}~990001", 11))
        # The renamed one's next delivery under its new name is a rename: its namespace.
        assert bot.ledger.queue_keys([("github:octo/warehouse-renamed", 424242)]) == {
            ("github:octo/warehouse-renamed", 424242): KEY
        }
    finally:
        bot.close()


def test_the_forges_repository_ids_are_read_and_checked() -> None:
    github = realcase("github/pull_request/opened.payload.json", OWNER)
    event = parse_github("pull_request", github)
    assert event is not None and event.repo_id == github["repository"]["id"]
    for bad in (0, -5, "186853002", True):
        with pytest.raises(PayloadError, match=r"repository\.id"):
            parse_github("pull_request", {**github, "repository": {**github["repository"],
                                                                   "id": bad}})  # fmt: skip
    gitlab = load_case("gitlab/merge_request_open.json")
    event = parse_gitlab("Merge Request Hook", gitlab)
    assert event is not None and event.repo_id == gitlab["project"]["id"]
    with pytest.raises(PayloadError, match=r"project\.id"):
        parse_gitlab("Merge Request Hook", {**gitlab, "project": {**gitlab["project"], "id": -1}})
