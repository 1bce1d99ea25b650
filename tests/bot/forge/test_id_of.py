"""Forge.id_of: the account a login names now, asked of each forge at the wire.

Settings name people by login (``users: [bob]``, a budget's approver, an owner); when they
come into force Sluice asks which account holds each login and keeps that account id, so a
login renamed away and taken by another account names nobody new (red team on identity).
GitHub and GitLab are mocked at the wire with ``responses`` (PyGithub and python-gitlab run
for real, in a strict mock: an unregistered request is a ConnectionError); the in-memory
forge follows its renames; the local forge has no account ids.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import responses
from responses import matchers

from sluice.bot.flow import trust
from sluice.bot.flow.ledger import Ledger
from sluice.bot.forge.base import Forge, ForgeError
from sluice.bot.forge.local import LocalForge
from sluice.bot.forge.memory import MemoryForge, account_id_of
from tests.helpers.forge_clients import (
    GITHUB_API,
    GITLAB,
    github_forge,
    github_user,
    gitlab_forge,
    gitlab_user,
    rs,
)
from tests.helpers.github_wire import FakeGitHub
from tests.helpers.gitlab_wire import FakeGitLab

__all__ = ["rs"]  # fixtures


def test_github_names_the_account_holding_a_login_once_per_forge(
    rs: responses.RequestsMock,
) -> None:
    asked = rs.get(f"{GITHUB_API}/users/bob", json=github_user("Bob", 5))
    forge = github_forge()
    assert forge.id_of("bob") == 5
    assert forge.id_of("BOB") == 5  # logins ignore case: one account, asked once
    assert asked.call_count == 1


def test_github_a_login_no_account_has_names_nobody(rs: responses.RequestsMock) -> None:
    rs.get(f"{GITHUB_API}/users/ghost", status=404, json={"message": "Not Found"})
    forge = github_forge()
    assert forge.id_of("ghost") is None
    assert forge.id_of("ghost") is None  # remembered: asked once


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (github_user("mallory", 66), "an answer for another login"),
        (github_user("bob", 0), "no id a person has"),
        (github_user("bob", True), "a boolean is no id"),
        ({"login": "bob"}, "no id at all"),
    ],
)
def test_github_an_answer_for_another_account_names_nobody(
    rs: responses.RequestsMock, answer: dict[str, Any], why: str
) -> None:
    rs.get(f"{GITHUB_API}/users/bob", json=answer)
    assert github_forge().id_of("bob") is None, why


@pytest.mark.parametrize("text", ["x/../orgs/o", "bob?x=1", "bob#x", "", "@bob", "b ob"])
def test_github_text_no_login_looks_like_is_never_asked(
    rs: responses.RequestsMock, text: str
) -> None:
    # No route but /users/{login}: PyGithub leaves a `/` unquoted, so text no GitHub login
    # looks like names nobody and is not asked (the strict mock refuses any request).
    assert github_forge().id_of(text) is None


def test_github_a_failure_is_a_forge_error_never_nobody(rs: responses.RequestsMock) -> None:
    # Nobody (None) would record the login as no account's for good: a 500 must raise, and
    # the job is retried.
    rs.get(f"{GITHUB_API}/users/bob", status=500, json={"message": "boom"})
    with pytest.raises(ForgeError):
        github_forge().id_of("bob")


def test_gitlab_names_the_user_holding_a_username_once_per_forge(
    rs: responses.RequestsMock,
) -> None:
    asked = rs.get(
        f"{GITLAB}/api/v4/users",
        match=[matchers.query_param_matcher({"username": "bob"}, strict_match=False)],
        json=[gitlab_user("Bob", 7)],
    )
    forge = gitlab_forge()
    assert forge.id_of("bob") == 7
    assert forge.id_of("Bob") == 7
    assert asked.call_count == 1


@pytest.mark.parametrize(
    ("listed", "why"),
    [
        ([], "no user has it"),
        ([gitlab_user("bobby", 8)], "only another username"),
        ([gitlab_user("bob", 7), gitlab_user("BOB", 9)], "two users: whose is unknown"),
        ([gitlab_user("bob", -3)], "no id a person has"),
    ],
)
def test_gitlab_a_username_no_one_user_holds_names_nobody(
    rs: responses.RequestsMock, listed: list[dict[str, Any]], why: str
) -> None:
    rs.get(f"{GITLAB}/api/v4/users", json=listed)
    assert gitlab_forge().id_of("bob") is None, why


def test_gitlab_a_failure_is_a_forge_error_never_nobody(rs: responses.RequestsMock) -> None:
    rs.get(f"{GITLAB}/api/v4/users", status=502, json={"message": "bad gateway"})
    with pytest.raises(ForgeError):
        gitlab_forge().id_of("bob")


def test_memory_a_login_renamed_away_and_taken_is_another_account() -> None:
    forge = MemoryForge("octo/widgets")
    bob = forge.id_of("bob")
    assert bob is not None
    assert forge.rename("bob", "bobx") == bob
    assert forge.id_of("bobx") == bob
    assert forge.id_of("bob") not in (None, bob)  # whoever takes `bob` next
    forge.gone.add("ghost")
    assert forge.id_of("Ghost") is None


def test_local_has_no_ids(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert LocalForge(tmp_path).id_of("bob") is None


# -- the settings in force, pinned through a forge at the wire -----------------------------

GATE = "sluice:\n  gate:\n    required_approvers:\n      users: [bob, '@Carol', ghost]\n"
SHA = "c" * 40


def test_github_settings_pinned_at_the_wire_name_accounts_resolved_once(tmp_path: Path) -> None:
    # trust pins the prod branch's settings through a GitHubForge on the fake GitHub
    # (PyGithub runs): each login they name is asked once, GET /users/{login}; a later job
    # (a new forge, as each job has) reads the pin and asks nothing.
    github = FakeGitHub(repo="octo/widgets")
    github.files[("main", "config.yaml")] = GATE
    github.refs["main"] = SHA
    ledger = Ledger(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
            github.install(mock)
            people = _in_force(github_forge(), ledger).people
            assert people == {
                "bob": account_id_of("bob"),
                "carol": account_id_of("Carol"),
                "ghost": account_id_of("ghost"),
            }
            users = [url for method, url in github.requests if "/users/" in url]
            assert sorted(u.rsplit("/", 1)[1] for u in users) == ["bob", "carol", "ghost"]
            before = len(github.requests)
            assert _in_force(github_forge(), ledger).people == people
            assert not [url for _m, url in github.requests[before:] if "/users/" in url]
    finally:
        ledger.close()


def test_gitlab_settings_pinned_at_the_wire_keep_a_username_no_user_has_as_nobody(
    tmp_path: Path,
) -> None:
    gitlab = FakeGitLab()
    gitlab.users.update({"bob": 41, "carol": 42})  # nobody is `ghost`
    gitlab.files[("main", "config.yaml")] = GATE
    gitlab.branches["main"] = SHA
    ledger = Ledger(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
            gitlab.install(mock)
            forge = gitlab_forge(gitlab.project, gitlab.url)
            assert _in_force(forge, ledger).people == {"bob": 41, "carol": 42, "ghost": None}
    finally:
        ledger.close()


def _in_force(forge: Forge, ledger: Ledger) -> trust.Settings:
    key = f"{forge.name}:{forge.repo}"
    return trust.settings_for(forge, ledger, key, branch="main", path="config.yaml", now=1)
