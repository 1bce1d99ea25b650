"""Walking a webhook payload (parsed JSON) with errors that name the field (pure).

Shared by the GitHub and GitLab payload parsers: :func:`required` and :func:`optional`
read a dotted path and check its JSON type; a missing, null or mistyped field, or a value
no database can store (a string with a NUL or an unpaired surrogate, an integer beyond 64
bits), raises :class:`PayloadError` saying which field and what it held. :func:`moment`
reads a forge's timestamp as epoch milliseconds; :func:`commit_id` a commit id.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

from sluice.core.errors import SluiceError

__all__ = [
    "ABSENT",
    "PayloadError",
    "account_id",
    "check",
    "commit_id",
    "json_name",
    "lookup",
    "moment",
    "optional",
    "present",
    "pushed_commits",
    "required",
]

T = TypeVar("T")


class PayloadError(SluiceError):
    """A webhook payload lacks a field the event needs, or holds it in the wrong shape."""


ABSENT: Final = object()
_INT64: Final = 2**63
_SHA: Final = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # SHA-1, or a SHA-256 repository's
_JSON_NAMES: Final[dict[type, str]] = {
    str: "a string",
    int: "an integer",
    bool: "true or false",
    dict: "an object",
    list: "an array",
}


def json_name(value: object) -> str:
    if value is None:
        return "null"
    for python_type, name in _JSON_NAMES.items():
        if type(value) is python_type:
            return name
    return "an object" if isinstance(value, Mapping) else type(value).__name__


def lookup(payload: Mapping[str, Any], path: str) -> Any:
    """The value at dotted ``path``; ``ABSENT`` when a key on the way is absent or null."""
    node: Any = payload
    keys = path.split(".")
    for depth, key in enumerate(keys):
        if node is None:
            return ABSENT
        if not isinstance(node, Mapping):
            where = ".".join(keys[:depth])
            raise PayloadError(f"{where} should be an object, not {json_name(node)}")
        node = node.get(key, ABSENT)
        if node is ABSENT:
            return ABSENT
    return node


def check(path: str, value: object, expected: type[T]) -> T:
    # bool is an int in Python, never in JSON.
    if isinstance(value, expected) and not (expected is int and isinstance(value, bool)):
        if isinstance(value, str):
            _check_text(path, value)
        elif isinstance(value, int) and not -_INT64 <= value < _INT64:
            # Numbers and ids are stored in BIGINT columns; JSON's integers are unbounded.
            raise PayloadError(f"{path} is out of range (more than 64 bits)")
        return value
    wanted = _JSON_NAMES.get(expected, expected.__name__)
    raise PayloadError(f"{path} should be {wanted}, not {json_name(value)}")


def _check_text(path: str, text: str) -> None:
    """Refuse text that JSON can carry but a state database cannot store: ``\\u0000``
    (PostgreSQL's text refuses NUL) or a lone surrogate such as ``\\ud800`` (not Unicode,
    so not UTF-8). Neither is ordinary text, and a repository name or commit id holding one
    made storing the delivery fail (a 500 on SQLite; on PostgreSQL a 503 that the forge
    retries for ever), so the field is refused like a mistyped one (the service says 400)."""
    if "\x00" in text:
        raise PayloadError(f"{path} holds a NUL character (\\u0000)")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise PayloadError(
            f"{path} is not valid Unicode: it holds an unpaired surrogate at offset {exc.start}"
        ) from None


def present(value: object, path: str, expected: type[T]) -> T:
    if value is ABSENT:
        raise PayloadError(f"{path} is missing")
    if value is None:
        raise PayloadError(f"{path} is null")
    return check(path, value, expected)


def required(payload: Mapping[str, Any], path: str, expected: type[T]) -> T:
    """The value at ``path``, which must be there, non-null and of type ``expected``."""
    return present(lookup(payload, path), path, expected)


def optional(payload: Mapping[str, Any], path: str, expected: type[T]) -> T | None:
    """The value at ``path``, or None when it (or an object on the way) is absent or null."""
    value = lookup(payload, path)
    if value is ABSENT or value is None:
        return None
    return check(path, value, expected)


def account_id(payload: Mapping[str, Any], path: str) -> int | None:
    """The forge account id at ``path`` (GitHub's ``sender.id``, GitLab's ``user.id``): a
    positive integer that a rename of the account's login does not change; None when the
    payload does not say (the flow then tells people apart by their logins)."""
    value = optional(payload, path, int)
    if value is not None and value <= 0:
        raise PayloadError(f"{path} is not an account id (a positive integer): {value}")
    return value


def repository_id(payload: Mapping[str, Any], path: str) -> int | None:
    """The forge's id of the repository at ``path`` (GitHub's ``repository.id``, GitLab's
    ``project.id``): a positive integer that a rename or transfer of the repository does
    not change; None when the payload does not say."""
    value = optional(payload, path, int)
    if value is not None and value <= 0:
        raise PayloadError(f"{path} is not a repository id (a positive integer): {value}")
    return value


def commit_id(payload: Mapping[str, Any], path: str) -> str:
    """The commit id at ``path``: hexadecimal, 40 digits (64 in a SHA-256 repository),
    lower-cased (it names an environment and the checks set on it)."""
    sha = required(payload, path, str).lower()
    if not _SHA.fullmatch(sha):
        raise PayloadError(f"{path} is not a commit id (40 or 64 hexadecimal digits)")
    return sha


PUSHED_COMMITS_LIMIT = 2048
"""Most commits a push payload lists (GitHub's cap; GitLab lists 20)."""


def pushed_commits(payload: Mapping[str, Any]) -> tuple[str, ...]:
    """The ids of the commits a push hook lists (``commits[].id``), lower-cased; an entry
    that is no commit id is an error, a list past :data:`PUSHED_COMMITS_LIMIT` is cut."""
    listed = payload.get("commits")
    if listed is None:
        return ()
    if not isinstance(listed, list):
        raise PayloadError(f"commits should be an array, not {json_name(listed)}")
    return tuple(
        commit_id(entry if isinstance(entry, Mapping) else {}, "id").lower()
        for entry in listed[:PUSHED_COMMITS_LIMIT]
    )


def moment(payload: Mapping[str, Any], path: str) -> int | None:
    """The time at ``path`` in epoch milliseconds; None when it is absent, null or in no
    form known here.

    Forms: ISO 8601 with ``Z`` or an offset (GitHub's ``2019-05-15T15:20:33Z``, newer
    GitLab), and GitLab's ``2022-01-17 15:47:39 UTC``; a time without a zone is UTC. A
    forge's time only sharpens a check (which head a command saw, whether an event is
    older than one handled), so an unknown form leaves it out rather than refusing the
    delivery.
    """
    value = lookup(payload, path)
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text.endswith(" UTC"):
        text = text[:-4] + "+00:00"
    elif text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return round(parsed.timestamp() * 1000)
    except (ValueError, OverflowError):
        return None
