"""JSON documents in the state database's TEXT columns: written canonical, read back
checked. No SQLAlchemy here: a process that only reads state (``sluice plan`` on SQLite,
:mod:`sluice.core.state.readonly`) decodes documents without importing it; the column type
is :class:`sluice.core.db.jsontext.JsonText`.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from sluice.core.errors import StateError

_J = TypeVar("_J", dict[str, Any], list[Any])


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
