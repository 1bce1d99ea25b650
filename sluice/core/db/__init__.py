"""The one database layer: the state database's engine, transactions, JSON columns and
migration runner, shared by every owner of tables in it (core's state, the bot's job queue
and its ledger).

- :mod:`sluice.core.db.engine`: the engine, with the SQLite and PostgreSQL settings;
- :mod:`sluice.core.db.transactions`: read and write transactions with useful errors;
- :mod:`sluice.core.db.jsontext`: the column type of JSON documents in TEXT;
- :mod:`sluice.core.db.documents`: those documents written and read (no SQLAlchemy);
- :mod:`sluice.core.db.migrate`: numbered migrations per owner ("track"), one runner.
"""
