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
from responses import matchers

from sluice.bot.forge.base import ForgeError, RepositoryIdentity, created_ms
from sluice.bot.forge.local import LocalForge
from sluice.bot.forge.memory import MemoryForge
from tests.helpers.forge_clients import (
    GITHUB_API,
    GITLAB,
    GITLAB_PROJECT,
    github_forge,
    gitlab_forge,
    rs,
)

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


# -- Forge.identity: a repository's id, name and when it was made ------------------------
# A name the service has records of but bound to no id is bound only to a repository the
# forge says was made before them (sluice.bot.flow.dispatch._claim).


def test_github_says_when_a_repository_was_made(rs: responses.RequestsMock) -> None:
    made = {"created_at": "2011-01-26T19:01:12Z"}
    rs.get(f"{GITHUB_API}/repositories/424242", json={**_github_repo("octo/b", 424242), **made})
    rs.get(f"{GITHUB_API}/repositories/8", json={**_github_repo("octo/b", 9), **made})
    rs.get(f"{GITHUB_API}/repositories/12", json=_github_repo("octo/b", 12))  # no time said
    rs.get(f"{GITHUB_API}/repositories/7", status=404, json={"message": "Not Found"})
    rs.get(f"{GITHUB_API}/repositories/11", status=502, json={"message": "Bad Gateway"})
    rs.get(f"{GITHUB_API}/repos/octo/widgets",
           json={**_github_repo("octo/widgets", 31), "created_at": "2019-05-15T15:19:25Z"})  # fmt: skip
    forge = github_forge()
    found = forge.identity(424242)
    assert found is not None and (found.id, found.name) == (424242, "octo/b")
    assert found.created_ms == 1_296_068_472_000
    assert forge.identity(8) is None  # answered for another id
    twelve = forge.identity(12)
    assert twelve is not None and twelve.created_ms is None
    assert forge.identity(7) is None
    with pytest.raises(ForgeError, match=r"repository 11"):
        forge.identity(11)
    own = forge.identity()  # its own repository, by its name
    assert own is not None and (own.id, own.created_ms) == (31, 1_557_933_565_000)


def test_gitlab_says_when_a_project_was_made(rs: responses.RequestsMock) -> None:
    api = f"{GITLAB}/api/v4/projects"
    rs.get(f"{api}/77", json={"id": 77, "path_with_namespace": "data/b",
                              "created_at": "2012-10-12T17:04:47.000Z"})  # fmt: skip
    rs.get(f"{api}/79", json={"id": 80, "path_with_namespace": "data/other"})
    rs.get(f"{api}/78", status=404, json={"message": "404 Project Not Found"})
    rs.get(f"{api}/81", status=500, json={"message": "500 Internal Server Error"})
    own = f"{api}/{GITLAB_PROJECT.replace('/', '%2F')}"
    rs.get(own, json={"id": 5, "path_with_namespace": GITLAB_PROJECT,
                      "created_at": "2013-09-30T13:46:02+02:00"})  # fmt: skip
    forge = gitlab_forge()
    found = forge.identity(77)
    assert found is not None and (found.name, found.created_ms) == ("data/b", 1_350_061_487_000)
    assert forge.identity(79) is None and forge.identity(78) is None
    with pytest.raises(ForgeError, match=r"project 81"):
        forge.identity(81)
    mine = forge.identity()
    assert mine is not None and (mine.id, mine.created_ms) == (5, 1_380_541_562_000)


def test_the_times_forges_write_are_read_and_anything_else_is_none() -> None:
    assert created_ms("2011-01-26T19:01:12Z") == 1_296_068_472_000
    assert created_ms("2022-01-10 15:23:41 UTC") == 1_641_828_221_000  # GitLab's hooks
    for bad in (None, 5, "", "yesterday", "2011-01-26T19:01:12"):  # no zone: not a time
        assert created_ms(bad) is None


def test_the_memory_and_local_forges_identity(tmp_path: Path) -> None:
    memory = MemoryForge("octo/a", name="github")
    memory.repositories.update({5: "octo/b", 6: "octo/a"})
    memory.created[5] = 1_000
    assert memory.identity(5) == RepositoryIdentity(5, "octo/b", 1_000)
    assert memory.identity() == RepositoryIdentity(6, "octo/a", 0)  # made at the epoch
    assert memory.identity(7) is None
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert LocalForge(tmp_path).identity(5) is None and LocalForge(tmp_path).identity() is None


def test_github_says_whether_a_check_run_is_a_repository_s(rs: responses.RequestsMock) -> None:
    # A run id is one repository's: asked by the repository's id, another's run is 404.
    run = {"id": 55, "head_sha": "ab" * 20, "name": "sluice/pr-environment", "status": "completed"}
    rs.get(f"{GITHUB_API}/repositories/424242/check-runs/55", json=run)
    rs.get(f"{GITHUB_API}/repositories/424242/check-runs/56", json={**run, "id": 57})
    rs.get(f"{GITHUB_API}/repositories/9/check-runs/55", status=404, json={"message": "Not Found"})
    rs.get(f"{GITHUB_API}/repositories/424242/check-runs/58", status=502, json={"message": "x"})
    forge = github_forge()
    assert forge.made_check_run(424242, 55, "AB" * 20) is True
    assert forge.made_check_run(424242, 55, "cd" * 20) is False  # another commit's
    assert forge.made_check_run(424242, 56, "ab" * 20) is False  # answered for another run
    assert forge.made_check_run(9, 55, "ab" * 20) is False
    with pytest.raises(ForgeError, match=r"check run 58"):
        forge.made_check_run(424242, 58, "ab" * 20)


def test_gitlab_says_whether_a_status_is_a_project_s(rs: responses.RequestsMock) -> None:
    # A status id is one project's: project 77 lists its own on the commit, project 78 (a
    # fork or a project renamed into the name, holding the same commit) its own, asked
    # by each project's id, every status (all=true, not the latest of each name).
    sha = "ab" * 20
    path = f"{GITLAB}/api/v4/projects/{{}}/repository/commits/{sha}/statuses"
    every = [matchers.query_param_matcher({"all": "true", "per_page": "100"})]

    def listed(project: int, *statuses: dict[str, object], status: int = 200) -> None:
        body: object = list(statuses) if status == 200 else {"message": f"{status} x"}
        rs.get(path.format(project), json=body, status=status, match=every)

    ours, theirs = {"id": 55, "sha": sha, "name": "sluice/tests"}, {"id": 56, "sha": sha}
    listed(77, theirs | {"id": 54}, ours)
    listed(78, theirs)
    listed(77, ours | {"id": True}, ours | {"sha": "cd" * 20}, {"id": "55", "sha": sha})
    listed(79, status=404)
    listed(80, status=502)
    forge = gitlab_forge()
    assert forge.made_check_run(77, 55, sha.upper()) is True
    assert forge.made_check_run(78, 55, sha) is False  # another project's status
    assert forge.made_check_run(77, 1, sha) is False  # listed, not of that id or commit
    assert forge.made_check_run(79, 55, sha) is False  # no such project the token reads
    with pytest.raises(ForgeError, match=r"project 80 holds status 55.*502"):
        forge.made_check_run(80, 55, sha)
