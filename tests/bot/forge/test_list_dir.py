"""``Forge.list_dir`` (issue 47: the prod branch's ``policies/`` folder, read by the
service): GitHub's contents API and GitLab's repository tree faked at the wire with a
strict ``responses`` mock (an unregistered request fails: no internet), a git repository
on disk and the in-memory forge.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import responses
from responses import matchers

from sluice.bot.forge.base import LIST_LIMIT, DirEntry, ForgeError
from sluice.bot.forge.local_git import GitRepo
from sluice.bot.forge.memory import MemoryForge
from tests.helpers.forge_clients import (
    GITHUB_API,
    GITHUB_REPO,
    GITLAB,
    github_forge,
    gitlab_forge,
    rs,
)

__all__ = ["rs"]  # fixtures

SHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
GH = f"{GITHUB_API}/repos/{GITHUB_REPO}"
GL = f"{GITLAB}/api/v4/projects/data%2Fwarehouse"


def gh_entry(name: str, kind: str = "file", size: int = 10) -> dict[str, Any]:
    path = f"policies/{name}"
    return {
        "type": kind, "size": size, "name": name, "path": path,
        "sha": "3d21ec53a331a6f037a91c368710b99387d012c1",
        "url": f"{GH}/contents/{path}?ref=main",
        "git_url": f"{GH}/git/blobs/3d21ec5", "html_url": f"https://github.com/{GITHUB_REPO}/blob/main/{path}",
        "download_url": None, "_links": {},
    }  # fmt: skip


# -- GitHub: the contents API ---------------------------------------------------------------


def test_github_lists_a_folder_with_kinds_and_sizes(rs: responses.RequestsMock) -> None:
    call = rs.get(
        f"{GH}/contents/policies",
        json=[gh_entry("b.yaml", size=120), gh_entry("a.yaml", size=80), gh_entry("sub", "dir", 0),
              gh_entry("l.yaml", "symlink", 9)],
        match=[matchers.query_param_matcher({"ref": SHA})],
    )  # fmt: skip
    assert github_forge().list_dir(SHA, "policies") == [
        DirEntry("a.yaml", "file", 80),
        DirEntry("b.yaml", "file", 120),
        DirEntry("l.yaml", "link", 9),
        DirEntry("sub", "dir", 0),
    ]
    assert len(call.calls) == 1


def test_github_a_missing_folder_is_none_and_a_file_is_an_error(
    rs: responses.RequestsMock,
) -> None:
    rs.get(f"{GH}/contents/policies", status=404, json={"message": "Not Found"})
    assert github_forge().list_dir("main", "policies") is None
    rs.get(f"{GH}/contents/config.yaml", json={**gh_entry("config.yaml"), "encoding": "base64",
                                                  "content": "YQ=="})  # fmt: skip
    with pytest.raises(ForgeError, match=r"config\.yaml is a file, not a folder"):
        github_forge().list_dir("main", "config.yaml")


def test_github_over_the_limit_is_an_error_not_a_wait(rs: responses.RequestsMock) -> None:
    rs.get(f"{GH}/contents/policies", json=[gh_entry(f"p{i}.yaml") for i in range(LIST_LIMIT + 1)])
    with pytest.raises(ForgeError, match=f"over {LIST_LIMIT} entries"):
        github_forge().list_dir("main", "policies")


# -- GitLab: the repository tree ------------------------------------------------------------


def gl_entry(name: str, kind: str = "blob", mode: str = "100644") -> dict[str, Any]:
    return {"id": "a1b2", "name": name, "type": kind, "path": f"policies/{name}", "mode": mode}


def test_gitlab_lists_a_folder_a_page_at_a_time(rs: responses.RequestsMock) -> None:
    first = [gl_entry(f"p{i:03}.yaml") for i in range(100)]
    rs.get(
        f"{GL}/repository/tree",
        json=first,
        match=[matchers.query_param_matcher(
            {"path": "policies", "ref": SHA, "page": "1", "per_page": "100", "recursive": "False"}
        )],
    )  # fmt: skip
    rs.get(
        f"{GL}/repository/tree",
        json=[gl_entry("z.yaml", mode="120000"), gl_entry("sub", "tree", "040000")],
        match=[matchers.query_param_matcher(
            {"path": "policies", "ref": SHA, "page": "2", "per_page": "100", "recursive": "False"}
        )],
    )  # fmt: skip
    found = gitlab_forge().list_dir(SHA, "policies")
    assert found is not None and len(found) == 102
    assert found[0] == DirEntry("p000.yaml", "file")
    assert found[-2:] == [DirEntry("sub", "dir"), DirEntry("z.yaml", "link")]


def test_gitlab_a_missing_folder_is_none(rs: responses.RequestsMock) -> None:
    rs.get(f"{GL}/repository/tree", status=404, json={"message": "404 Tree Not Found"})
    assert gitlab_forge().list_dir("main", "policies") is None


def test_gitlab_an_empty_listing_of_a_file_is_an_error(rs: responses.RequestsMock) -> None:
    rs.get(f"{GL}/repository/tree", json=[])
    rs.get(f"{GL}/repository/files/config.yaml/raw", body="name: demo\n")
    with pytest.raises(ForgeError, match=r"config\.yaml is a file, not a folder"):
        gitlab_forge().list_dir("main", "config.yaml")


def test_gitlab_over_the_limit_is_an_error(rs: responses.RequestsMock) -> None:
    page = [gl_entry(f"p{i:03}.yaml") for i in range(100)]
    for _ in range(LIST_LIMIT // 100 + 1):
        rs.get(f"{GL}/repository/tree", json=page)
    with pytest.raises(ForgeError, match=f"over {LIST_LIMIT} entries"):
        gitlab_forge().list_dir("main", "policies")


# -- a git repository on disk, and the in-memory forge ----------------------------------


def test_local_git_lists_files_links_and_folders(tmp_path: Path) -> None:
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)
        return done.stdout.decode().strip()

    git("init", "-q", "-b", "main")
    (tmp_path / "policies" / "sub").mkdir(parents=True)
    (tmp_path / "policies" / "a.yaml").write_text("name: a\n")
    (tmp_path / "policies" / "sub" / "x").write_text("x")
    (tmp_path / "policies" / "l.yaml").symlink_to("a.yaml")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", "p")
    repo = GitRepo(tmp_path)
    assert repo.list_dir("main", "policies") == [
        DirEntry("a.yaml", "file", 8),
        DirEntry("l.yaml", "link", 6),
        DirEntry("sub", "dir", None),
    ]
    assert repo.list_dir("main", "nope") is None
    assert repo.list_dir("--upload-pack=x", "policies") is None
    with pytest.raises(ForgeError, match="not a folder"):
        repo.list_dir("main", "policies/a.yaml")


def test_memory_lists_a_commits_folder() -> None:
    forge = MemoryForge()
    forge.commit("a" * 40, {"policies/a.yaml": "x", "policies/sub/b": "y", "c.sql": "z"},
                 branch="main")  # fmt: skip
    assert forge.list_dir("main", "policies") == [
        DirEntry("a.yaml", "file", 1),
        DirEntry("sub", "dir"),
    ]
    assert forge.list_dir("main", "nope") is None
    with pytest.raises(ForgeError, match="it is a file"):
        forge.list_dir("main", "c.sql")


# -- Forge.changed_files: the fact `files` of a pull request ------------------------------


def test_github_lists_a_pull_requests_files_renames_by_both_paths(
    rs: responses.RequestsMock,
) -> None:
    rs.get(
        f"{GH}/pulls/7",
        json={
            "number": 7,
            "changed_files": 3,
            "url": f"https://api.github.com/repos/{GITHUB_REPO}/pulls/7",
        },
    )
    rs.get(
        f"{GH}/pulls/7/files",
        json=[
            {"filename": "models/b.sql", "status": "modified"},
            {"filename": "models/new.sql", "status": "renamed", "previous_filename": "models/old.sql"},
            {"filename": "policies/a.yaml", "status": "removed"},
        ],
    )  # fmt: skip
    assert github_forge().changed_files(7) == [
        "models/b.sql",
        "models/new.sql",
        "models/old.sql",
        "policies/a.yaml",
    ]


def test_github_a_pull_request_over_what_it_lists_is_none(rs: responses.RequestsMock) -> None:
    rs.get(
        f"{GH}/pulls/7",
        json={
            "number": 7,
            "changed_files": 3001,
            "url": f"https://api.github.com/repos/{GITHUB_REPO}/pulls/7",
        },
    )
    assert github_forge().changed_files(7) is None


def test_gitlab_lists_a_merge_requests_changes_and_a_cut_list_is_none(
    rs: responses.RequestsMock,
) -> None:
    rs.get(f"{GL}/merge_requests/7", json={"iid": 7, "id": 91, "project_id": 4242})
    rs.get(
        f"{GL}/merge_requests/7/changes",
        json={"iid": 7, "overflow": False, "changes": [
            {"old_path": "models/a.sql", "new_path": "models/a.sql"},
            {"old_path": "models/old.sql", "new_path": "models/new.sql", "renamed_file": True},
        ]},
    )  # fmt: skip
    assert gitlab_forge().changed_files(7) == ["models/a.sql", "models/new.sql", "models/old.sql"]
    rs.get(f"{GL}/merge_requests/8", json={"iid": 8, "id": 92, "project_id": 4242})
    rs.get(f"{GL}/merge_requests/8/changes", json={"iid": 8, "overflow": True, "changes": []})
    assert gitlab_forge().changed_files(8) is None


def test_memory_lists_what_a_pull_request_changes_from_its_base() -> None:
    forge = MemoryForge()
    forge.commit("a" * 40, {"a.sql": "1", "b.sql": "2", "c.sql": "3"}, branch="main")
    forge.commit("b" * 40, {"a.sql": "1", "b.sql": "22", "d.sql": "4"}, parents=("a" * 40,))
    forge.open_pull(7, head_sha="b" * 40, base="main", author="alice")
    assert forge.changed_files(7) == ["b.sql", "c.sql", "d.sql"]


def test_local_lists_what_a_pull_request_changes_since_it_left_its_base(tmp_path: Path) -> None:
    from sluice.bot.forge.local import LocalForge

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)
        return done.stdout.decode().strip()

    def commit(files: dict[str, str | None]) -> None:
        for name, text in files.items():
            if text is None:
                (tmp_path / name).unlink()
            else:
                (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
                (tmp_path / name).write_text(text)
        git("add", "-A")
        git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", "c")

    git("init", "-q", "-b", "main")
    commit({"a.sql": "1", "b.sql": "2"})
    git("checkout", "-q", "-b", "feature")
    commit({"a.sql": "11", "b.sql": None, "c.sql": "3"})
    git("checkout", "-q", "main")
    commit({"d.sql": "on main since"})  # not the pull request's change
    forge = LocalForge(tmp_path)
    pull = forge.open_pull("main", "feature", "alice")
    assert forge.changed_files(pull.number) == ["a.sql", "b.sql", "c.sql"]
