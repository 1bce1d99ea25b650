"""What each run's rebuild of a table read (state migration 5), mixed into the SQL store:
the record :mod:`sluice.core.skip` compares the next run's inputs with."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sqlalchemy import delete, insert, select, tuple_

from sluice.core.db.documents import dump_json, load_json
from sluice.core.db.transactions import Transactions
from sluice.core.errors import StateError
from sluice.core.state import schema
from sluice.core.state.records import Seen, TableKey, chunks

_CHUNK = 500


class RunInputsMixin(Transactions):
    """The last rebuild's :class:`~sluice.core.skip.Seen` of each physical table."""

    def get_run_inputs(self, tables: Iterable[TableKey]) -> dict[TableKey, Seen]:
        """What the last run that rebuilt each of ``tables`` (``(model, version)``) read;
        a table no run rebuilt (or a record that does not decode) is absent."""
        t = schema.run_inputs
        found: dict[TableKey, Seen] = {}
        with self._reading("read what runs read") as conn:
            for chunk in chunks(sorted(set(tables)), _CHUNK):
                query = select(t).where(tuple_(t.c.name, t.c.version).in_(chunk))
                for row in conn.execute(query):
                    try:
                        pairs = load_json(row.inputs, list, "run inputs", row.name)
                        inputs = {str(p[0]): (None if p[1] is None else str(p[1])) for p in pairs}
                    except (StateError, IndexError, TypeError):
                        continue  # unreadable: as if never recorded, so the model runs
                    found[(row.name, row.version)] = Seen(row.query_key, inputs, int(row.run_ts))
        return found

    def save_run_inputs(self, seen: Mapping[TableKey, Seen]) -> None:
        """Record what each table's rebuild read (replacing the last record of each)."""
        if not seen:
            return
        t = schema.run_inputs
        keys = sorted(seen)
        with self._writing("record what a run read") as conn:
            for chunk in chunks(keys, _CHUNK):
                conn.execute(delete(t).where(tuple_(t.c.name, t.c.version).in_(chunk)))
            conn.execute(
                insert(t),
                [
                    {
                        "name": name,
                        "version": version,
                        "query_key": seen[(name, version)].key,
                        "inputs": dump_json(
                            [[k, v] for k, v in seen[(name, version)].inputs.items()]
                        ),
                        "run_ts": seen[(name, version)].at,
                    }
                    for name, version in keys
                ],
            )
