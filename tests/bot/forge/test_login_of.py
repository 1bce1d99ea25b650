"""Forge.account_of: the login an account id has now, and whether it is a bot, asked of
each forge at the wire.

The gate judges a click (recorded with the login of its moment and its account id) by the
login its account has now: a login is renamed at will and freed for anyone to take; and a
pusher's account is a bot as the forge says, not as its login looks (GitLab lets a service
account's maker choose its username). GitHub
and GitLab are mocked at the wire with ``responses`` (PyGithub and python-gitlab run for
real, in a strict mock: an unregistered request is a ConnectionError); the in-memory
forge follows its renames; the local forge has no account ids.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import responses

from sluice.bot.forge.base import Account, ForgeError
from sluice.bot.forge.local import LocalForge
from sluice.bot.forge.memory import MemoryForge
from tests.helpers.forge_clients import (
    GITHUB_API,
    GITLAB,
    github_forge,
    github_user,
    gitlab_forge,
    gitlab_user,
    rs,
)

__all__ = ["rs"]  # fixtures


def test_github_names_an_account_by_its_login_of_now_once_per_forge(
    rs: responses.RequestsMock,
) -> None:
    asked = rs.get(f"{GITHUB_API}/user/5", json=github_user("bobx", 5))
    forge = github_forge()
    assert forge.account_of(5) == Account("bobx", bot=False)
    assert forge.account_of(5) == Account("bobx", bot=False)
    assert asked.call_count == 1


def test_github_says_which_accounts_are_bots_by_their_type(rs: responses.RequestsMock) -> None:
    # An App's bot user is type Bot, whatever its login; a person's (a login of a bot's
    # form is no App's) and an organization's are not; a type GitHub may add: not said.
    rs.get(f"{GITHUB_API}/user/41898282",
           json=github_user("github-actions[bot]", 41898282, "Bot"))  # fmt: skip
    rs.get(f"{GITHUB_API}/user/198982749", json=github_user("Copilot", 198982749, "Bot"))
    rs.get(f"{GITHUB_API}/user/11", json=github_user("release-bot", 11))
    rs.get(f"{GITHUB_API}/user/12", json=github_user("octo", 12, "Organization"))
    rs.get(f"{GITHUB_API}/user/13", json=github_user("ghost-ish", 13, "Mannequin"))
    forge = github_forge()
    assert forge.account_of(41898282) == Account("github-actions[bot]", bot=True)
    assert forge.account_of(198982749) == Account("Copilot", bot=True)
    assert forge.account_of(11) == Account("release-bot", bot=False)
    assert forge.account_of(12) == Account("octo", bot=False)
    assert forge.account_of(13) == Account("ghost-ish", bot=None)


def test_github_knows_no_deleted_account_and_fails_loudly_otherwise(
    rs: responses.RequestsMock,
) -> None:
    rs.get(f"{GITHUB_API}/user/6", status=404, json={"message": "Not Found"})
    rs.get(f"{GITHUB_API}/user/7", json=github_user("eve", 8))  # another account's answer
    rs.get(f"{GITHUB_API}/user/9", status=502, json={"message": "Bad Gateway"})
    forge = github_forge()
    assert forge.account_of(6) is None
    assert forge.account_of(7) is None
    with pytest.raises(ForgeError, match=r"login of account 9 failed: 502"):
        forge.account_of(9)


def test_gitlab_names_a_user_by_their_username_of_now_once_per_forge(
    rs: responses.RequestsMock,
) -> None:
    asked = rs.get(f"{GITLAB}/api/v4/users/5", json=gitlab_user("bobx", 5))
    forge = gitlab_forge()
    assert forge.account_of(5) == Account("bobx", bot=False)
    assert forge.account_of(5) == Account("bobx", bot=False)
    assert asked.call_count == 1


def test_gitlab_says_which_users_are_bots_whatever_their_username(
    rs: responses.RequestsMock,
) -> None:
    # A service account whose maker chose its username is a bot; a person who took a
    # username of a token user's form is not; an answer without ``bot``: not said.
    rs.get(f"{GITLAB}/api/v4/users/11", json=gitlab_user("release-bot", 11, bot=True))
    rs.get(f"{GITLAB}/api/v4/users/12", json=gitlab_user("project_1_bot_abc", 12))
    rs.get(f"{GITLAB}/api/v4/users/13", json=gitlab_user("carol", 13, bot=None))
    forge = gitlab_forge()
    assert forge.account_of(11) == Account("release-bot", bot=True)
    assert forge.account_of(12) == Account("project_1_bot_abc", bot=False)
    assert forge.account_of(13) == Account("carol", bot=None)


def test_gitlab_knows_no_deleted_user_and_fails_loudly_otherwise(
    rs: responses.RequestsMock,
) -> None:
    rs.get(f"{GITLAB}/api/v4/users/6", status=404, json={"message": "404 User Not Found"})
    rs.get(f"{GITLAB}/api/v4/users/7", json=gitlab_user("eve", 8))
    rs.get(f"{GITLAB}/api/v4/users/9", status=500, json={"message": "500 Internal Error"})
    forge = gitlab_forge()
    assert forge.account_of(6) is None
    assert forge.account_of(7) is None
    with pytest.raises(ForgeError, match=r"username of user 9 failed: 500"):
        forge.account_of(9)


def test_the_memory_forge_follows_renames_and_a_freed_login() -> None:
    forge = MemoryForge("octo/warehouse")
    forge.roles.update({"bob": "write", "dave": "write"})
    bob = forge.account_id("bob")
    assert forge.account_of(bob) == Account("bob")
    forge.rename("bob", "bobx")
    dave = forge.rename("dave", "bob")  # dave takes the freed login
    assert forge.account_of(bob) == Account("bobx")
    assert forge.account_of(dave) == Account("bob")
    assert forge.account_of(123) is None


def test_the_memory_forge_says_what_its_bots_list_says_and_follows_renames() -> None:
    forge = MemoryForge("octo/warehouse", name="gitlab")
    forge.bots.update({"release-bot": True, "project_1_bot_abc": False})
    bot, person = forge.account_id("release-bot"), forge.account_id("project_1_bot_abc")
    assert forge.account_of(bot) == Account("release-bot", bot=True)
    assert forge.account_of(person) == Account("project_1_bot_abc", bot=False)
    assert forge.account_of(forge.account_id("alice")) == Account("alice", bot=None)
    forge.rename("release-bot", "deploy")
    assert forge.account_of(bot) == Account("deploy", bot=True)


def test_the_local_forge_has_no_account_ids(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    forge = LocalForge(tmp_path)
    (forge.store / "teams.json").parent.mkdir(parents=True, exist_ok=True)
    (forge.store / "teams.json").write_text('{"octo/approvers": ["bob"]}')
    assert forge.team_members("octo/approvers") == {"bob"}  # people are logins only
    assert forge.account_of(5) is None
