"""The service's GitHub and GitLab forges built as a job builds them, for tests that answer
their requests at the HTTP wire with ``responses`` (PyGithub and python-gitlab really run;
no internet).

``rs`` is a strict mock (every route registered must be asked, and a request no route
answers is a ConnectionError); a test module imports it and names it in its ``__all__``.
:func:`github_forge` and :func:`gitlab_forge` are the forges of ``octo/widgets`` on
``api.github.com`` and of ``data/warehouse`` on ``gitlab.example.com``, with a token of
each forge's form and no pause between requests; :func:`github_user` and
:func:`gitlab_user` are the bodies each forge answers for an account.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import responses

from sluice.bot.forge.github import GitHubForge, github_client
from sluice.bot.forge.gitlab import GitLabForge, gitlab_client

GITHUB_API = "https://api.github.com:443"
"""Where PyGithub's requests go (the port written out, as ``responses`` sees them)."""
GITHUB_REPO = "octo/widgets"
GITLAB = "https://gitlab.example.com"
GITLAB_PROJECT = "data/warehouse"
GITHUB_TOKEN = "ghp_" + "T0kenT0kenT0kenT0kenT0kenT0kenT0ken12"
GITLAB_TOKEN = "glpat-" + "T0kenT0kenT0kenT0ken12"


@pytest.fixture
def rs() -> Iterator[responses.RequestsMock]:
    """A strict mock at the wire: each registered route must be asked, nothing else is."""
    with responses.RequestsMock(assert_all_requests_are_fired=True) as mock:
        yield mock


def github_forge(
    repo: str = GITHUB_REPO, token: str = GITHUB_TOKEN, repo_id: int | None = None
) -> GitHubForge:
    """The forge of ``repo`` on GitHub.com with a personal access token, no pauses; by
    the repository's id ``repo_id`` when given, as the service's jobs build it."""
    client = github_client(
        repo=repo,
        api_url="https://api.github.com",
        token=token,
        seconds_between_requests=None,
        seconds_between_writes=None,
    )
    return GitHubForge(client, repo, repo_id=repo_id)


def gitlab_forge(
    project: str = GITLAB_PROJECT, url: str = GITLAB, token: str = GITLAB_TOKEN
) -> GitLabForge:
    """The forge of ``project`` on the GitLab at ``url``, with the service's token."""
    return GitLabForge(gitlab_client(url, token), project)


def github_user(login: str, uid: Any, kind: str = "User") -> dict[str, Any]:
    """GitHub's answer for the account ``uid`` holding ``login`` (``GET /users/{login}``,
    ``GET /user/{id}``); ``kind`` is its ``type`` (``Bot`` for an App's bot user)."""
    return {
        "login": login, "id": uid, "node_id": f"MDQ6VXNlcj{uid}", "type": kind,
        "url": f"https://api.github.com/users/{login}", "html_url": f"https://github.com/{login}",
        "site_admin": False,
    }  # fmt: skip


def gitlab_user(username: str, uid: Any, bot: bool | None = False) -> dict[str, Any]:
    """GitLab's answer for the user ``uid`` holding ``username`` (``GET /users/:id``, an
    entry of ``GET /users?username=``); ``bot`` None: an answer without the field."""
    said = {} if bot is None else {"bot": bot}
    return {"id": uid, "username": username, "name": username.title(), "state": "active",
            "web_url": f"{GITLAB}/{username}", **said}  # fmt: skip
