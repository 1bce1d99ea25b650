"""Forge.login_of: the login an account id has now, asked of each forge at the wire.

The gate judges a click (recorded with the login of its moment and its account id) by the
login its account has now: a login is renamed at will and freed for anyone to take. GitHub
and GitLab are mocked at the wire with ``responses`` (PyGithub and python-gitlab run for
real, in a strict mock: an unregistered request is a ConnectionError); the in-memory
forge follows its renames; the local forge has no account ids.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import responses

from sluice.bot.forge.base import ForgeError
from sluice.bot.forge.github import GitHubForge, github_client
from sluice.bot.forge.gitlab import GitLabForge, gitlab_client
from sluice.bot.forge.local import LocalForge
from sluice.bot.forge.memory import MemoryForge

GITHUB_API = "https://api.github.com:443"
GITLAB = "https://gitlab.example.com"
GITHUB_TOKEN = "ghp_" + "T0kenT0kenT0kenT0kenT0kenT0kenT0ken12"
GITLAB_TOKEN = "glpat-" + "T0kenT0kenT0kenT0ken12"


@pytest.fixture
def rs() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=True) as mock:
        yield mock


def _github() -> GitHubForge:
    client = github_client(
        repo="octo/widgets",
        api_url="https://api.github.com",
        token=GITHUB_TOKEN,
        seconds_between_requests=None,
        seconds_between_writes=None,
    )
    return GitHubForge(client, "octo/widgets")


def _github_user(login: str, uid: int) -> dict[str, Any]:
    return {
        "login": login, "id": uid, "node_id": f"MDQ6VXNlcj{uid}", "type": "User",
        "url": f"https://api.github.com/users/{login}", "html_url": f"https://github.com/{login}",
        "site_admin": False,
    }  # fmt: skip


def test_github_names_an_account_by_its_login_of_now_once_per_forge(
    rs: responses.RequestsMock,
) -> None:
    asked = rs.get(f"{GITHUB_API}/user/5", json=_github_user("bobx", 5))
    forge = _github()
    assert forge.login_of(5) == "bobx"
    assert forge.login_of(5) == "bobx"
    assert asked.call_count == 1


def test_github_knows_no_deleted_account_and_fails_loudly_otherwise(
    rs: responses.RequestsMock,
) -> None:
    rs.get(f"{GITHUB_API}/user/6", status=404, json={"message": "Not Found"})
    rs.get(f"{GITHUB_API}/user/7", json=_github_user("eve", 8))  # another account's answer
    rs.get(f"{GITHUB_API}/user/9", status=502, json={"message": "Bad Gateway"})
    forge = _github()
    assert forge.login_of(6) is None
    assert forge.login_of(7) is None
    with pytest.raises(ForgeError, match=r"login of account 9 failed: 502"):
        forge.login_of(9)


def _gitlab() -> GitLabForge:
    return GitLabForge(gitlab_client(GITLAB, GITLAB_TOKEN), "data/warehouse")


def _gitlab_user(username: str, uid: int) -> dict[str, Any]:
    return {"id": uid, "username": username, "name": username.title(), "state": "active",
            "web_url": f"{GITLAB}/{username}"}  # fmt: skip


def test_gitlab_names_a_user_by_their_username_of_now_once_per_forge(
    rs: responses.RequestsMock,
) -> None:
    asked = rs.get(f"{GITLAB}/api/v4/users/5", json=_gitlab_user("bobx", 5))
    forge = _gitlab()
    assert forge.login_of(5) == "bobx"
    assert forge.login_of(5) == "bobx"
    assert asked.call_count == 1


def test_gitlab_knows_no_deleted_user_and_fails_loudly_otherwise(
    rs: responses.RequestsMock,
) -> None:
    rs.get(f"{GITLAB}/api/v4/users/6", status=404, json={"message": "404 User Not Found"})
    rs.get(f"{GITLAB}/api/v4/users/7", json=_gitlab_user("eve", 8))
    rs.get(f"{GITLAB}/api/v4/users/9", status=500, json={"message": "500 Internal Error"})
    forge = _gitlab()
    assert forge.login_of(6) is None
    assert forge.login_of(7) is None
    with pytest.raises(ForgeError, match=r"username of user 9 failed: 500"):
        forge.login_of(9)


def test_the_memory_forge_follows_renames_and_a_freed_login() -> None:
    forge = MemoryForge("octo/warehouse")
    forge.roles.update({"bob": "write", "dave": "write"})
    bob = forge.account_id("bob")
    assert forge.login_of(bob) == "bob"
    forge.rename("bob", "bobx")
    dave = forge.rename("dave", "bob")  # dave takes the freed login
    assert forge.login_of(bob) == "bobx"
    assert forge.login_of(dave) == "bob"
    assert forge.login_of(123) is None


def test_the_local_forge_has_no_account_ids(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    forge = LocalForge(tmp_path)
    (forge.store / "teams.json").parent.mkdir(parents=True, exist_ok=True)
    (forge.store / "teams.json").write_text('{"octo/approvers": ["bob"]}')
    assert forge.team_members("octo/approvers") == {"bob"}  # people are logins only
    assert forge.login_of(5) is None
