"""Forge.repository_of: the name the repository of a forge id has now, asked of each forge
at the wire (issue 46). A delivery naming a name new to the service with an id another name
is bound to is taken for a rename only when this says the id's repository has that name
(``sluice.bot.flow.dispatch._renamed``). GitHub and GitLab are mocked at the wire with
``responses`` in a strict mock; the in-memory forge answers from its table; the local forge
has no ids."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import responses

from sluice.bot.forge.base import ForgeError
from sluice.bot.forge.local import LocalForge
from sluice.bot.forge.memory import MemoryForge
from tests.helpers.forge_clients import GITHUB_API, GITLAB, github_forge, gitlab_forge, rs

__all__ = ["rs"]  # fixtures


def _github_repo(full_name: str, rid: object) -> dict[str, object]:
    owner, _, name = full_name.partition("/")
    return {"id": rid, "name": name, "full_name": full_name, "owner": {"login": owner, "id": 1},
            "private": True, "url": f"https://api.github.com/repos/{full_name}"}  # fmt: skip


def test_github_names_a_repository_by_its_id(rs: responses.RequestsMock) -> None:
    rs.get(f"{GITHUB_API}/repositories/424242", json=_github_repo("octo/renamed", 424242))
    rs.get(f"{GITHUB_API}/repositories/7", status=404, json={"message": "Not Found"})
    rs.get(f"{GITHUB_API}/repositories/8", json=_github_repo("octo/other", 9))  # another's
    rs.get(f"{GITHUB_API}/repositories/10", json=_github_repo("octo/x", True))
    rs.get(f"{GITHUB_API}/repositories/11", status=502, json={"message": "Bad Gateway"})
    forge = github_forge()
    assert forge.repository_of(424242) == "octo/renamed"
    assert forge.repository_of(7) is None  # none the credentials read
    assert forge.repository_of(8) is None
    assert forge.repository_of(10) is None
    with pytest.raises(ForgeError, match=r"name of repository 11"):
        forge.repository_of(11)


def test_gitlab_names_a_project_by_its_id(rs: responses.RequestsMock) -> None:
    api = f"{GITLAB}/api/v4/projects"
    rs.get(f"{api}/77", json={"id": 77, "path_with_namespace": "data/renamed"})
    rs.get(f"{api}/78", status=404, json={"message": "404 Project Not Found"})
    rs.get(f"{api}/79", json={"id": 80, "path_with_namespace": "data/other"})
    rs.get(f"{api}/81", status=500, json={"message": "500 Internal Server Error"})
    forge = gitlab_forge()
    assert forge.repository_of(77) == "data/renamed"
    assert forge.repository_of(78) is None
    assert forge.repository_of(79) is None
    with pytest.raises(ForgeError, match=r"path of project 81"):
        forge.repository_of(81)


def test_the_memory_and_local_forges(tmp_path: Path) -> None:
    memory = MemoryForge("octo/a", name="github")
    memory.repositories[5] = "octo/b"
    assert memory.repository_of(5) == "octo/b" and memory.repository_of(6) is None
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert LocalForge(tmp_path).repository_of(5) is None
