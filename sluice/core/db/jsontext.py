"""JSON documents in the state database: stored as canonical TEXT, read back checked.

Documents are TEXT rather than a native JSON type so SQLite and PostgreSQL store
byte-identical documents; no owner queries inside them. Declare such a column with
:class:`JsonText`, write it with :func:`dump_json` and read it with :func:`load_json`.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from sqlalchemy import Text
from sqlalchemy.types import TypeDecorator

from sluice.core.errors import StateError

_J = TypeVar("_J", dict[str, Any], list[Any])


class JsonText(TypeDecorator[str]):
    """A column holding one JSON document as text (TEXT in the database).

    The value is the text itself: :func:`dump_json` makes it, :func:`load_json` reads it,
    so a corrupt document is reported with what it is and where, not as a driver error.
    """

    impl = Text
    cache_ok = True


def dump_json(document: Any) -> str:
    """Canonical JSON text for a TEXT column: the same document always gives the same text."""
    return json.dumps(document, separators=(",", ":"), sort_keys=True)


def load_json(text: str, kind: type[_J], what: str, where: str) -> _J:
    """Decode a JSON column holding a ``kind`` (dict or list).

    Raises:
        StateError: The text is not JSON of that kind; ``what`` names the stored object and
            ``where`` the database (password masked) in the message.
    """
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise corrupt(what, f"invalid JSON ({exc})", where) from exc
    if not isinstance(value, kind):
        raise corrupt(what, f"expected a JSON {'object' if kind is dict else 'array'}", where)
    return value


def corrupt(what: str, problem: str, where: str) -> StateError:
    """The error for a stored object that cannot be decoded."""
    return StateError(
        f"state database {where}: stored {what} is corrupt: {problem}",
        hint="restore the state database from a backup",
    )
