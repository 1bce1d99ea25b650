"""Account ids in test webhooks: a real payload names one person (GitHub's Codertocat,
GitLab's root) by login and id; a test that changes the login must change the id with it,
or every person it names is one account to the gate (which tells people apart by id).

:func:`github` and :func:`gitlab` set, for each person a payload names, the id the
in-memory forge gives their login (:func:`~sluice.bot.forge.memory.account_id_of`, or a
forge's own after a rename: pass ``forge.account_id``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sluice.bot.forge.memory import account_id_of

Ids = Callable[[str], int]

# The head repository's owner too: a fork PR's owner counts as having pushed, by this id.
_GITHUB_PEOPLE = (
    "sender",
    "pull_request.user",
    "review.user",
    "comment.user",
    "issue.user",
    "pull_request.head.repo.owner",
)


def _node(payload: dict[str, Any], path: str) -> Any:
    node: Any = payload
    for key in path.split("."):
        node = node.get(key) if isinstance(node, dict) else None
    return node


def github(payload: dict[str, Any], ids: Ids = account_id_of) -> dict[str, Any]:
    """``payload`` (a GitHub webhook), each person's ``id`` that of their ``login``."""
    for path in _GITHUB_PEOPLE:
        person = _node(payload, path)
        if isinstance(person, dict) and isinstance(person.get("login"), str):
            person["id"] = ids(person["login"])
    return payload


def gitlab(payload: dict[str, Any], ids: Ids = account_id_of) -> dict[str, Any]:
    """``payload`` (a GitLab webhook), ``user.id`` that of ``user.username`` (and the merge
    request's ``author_id`` with it where it named the same person), and a push's
    ``user_id`` that of its ``user_username``."""
    user = payload.get("user")
    if isinstance(user, dict) and isinstance(user.get("username"), str):
        before = user.get("id")
        user["id"] = ids(user["username"])
        attrs = payload.get("object_attributes")
        if isinstance(attrs, dict) and before is not None and attrs.get("author_id") == before:
            attrs["author_id"] = user["id"]
    if isinstance(payload.get("user_username"), str):
        payload["user_id"] = ids(payload["user_username"])
    return payload
