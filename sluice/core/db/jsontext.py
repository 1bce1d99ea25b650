"""JSON documents in the state database: stored as canonical TEXT, read back checked.

Documents are TEXT rather than a native JSON type so SQLite and PostgreSQL store
byte-identical documents; no owner queries inside them. Declare such a column with
:class:`JsonText`, write it with :func:`~sluice.core.db.documents.dump_json` and read it
with :func:`~sluice.core.db.documents.load_json`.
"""

from __future__ import annotations

from sqlalchemy import Text
from sqlalchemy.types import TypeDecorator


class JsonText(TypeDecorator[str]):
    """A column holding one JSON document as text (TEXT in the database).

    The value is the text itself: :func:`~sluice.core.db.documents.dump_json` makes it,
    :func:`~sluice.core.db.documents.load_json` reads it, so a corrupt document is reported
    with what it is and where, not as a driver error.
    """

    impl = Text
    cache_ok = True
