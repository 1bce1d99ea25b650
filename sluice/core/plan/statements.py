"""A project's own statements (config.yaml's ``before_all`` / ``after_all``): the schemas
they may not name, and their digest (pure).

They run in every job of the project, a pull request's too, outside any model: one that
named a schema Sluice manages could make a table ahead under a physical table's name, or
put a table where a prod or pull request view belongs. So none may name

- a physical schema (``sluice__<schema>``), nor any schema with ``__`` in its name: that
  is the form of an environment's view schemas (``<schema>__<environment>``);
- the schema of a model of the plan (where prod's views are), or of a model it removes.

>>> sorted(named_schemas("CREATE TABLE IF NOT EXISTS raw.x AS SELECT * FROM sluice__shop.t"))
['raw', 'sluice__shop']
>>> managed("shop__pr_7", set()), managed("raw", {"shop"}), managed("shop", {"shop"})
("an environment's view schema (its name has '__')", None, "the schema of prod's views of its models")
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from sluice.core.snapshot.naming import PHYSICAL_PREFIX

HINT = (
    "Sluice creates and drops its physical schemas (sluice__*), the environments' view "
    "schemas (<schema>__<environment>) and the schemas of its models' views itself; a "
    "project's statement may create other schemas and tables only (e.g. a raw schema)"
)


def named_schemas(sql: str, dialect: str = "spark") -> set[str]:
    """The schemas (lower case, without a catalog) one statement names: of every table
    it creates or reads, and the schema a ``CREATE SCHEMA`` makes. Nothing for text that
    does not parse (the loader refuses it)."""
    try:
        parsed = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except (ParseError, TokenError):
        return set()
    found: set[str] = set()
    for statement in parsed:
        kind = str(statement.args.get("kind") or "").upper()
        creates_schema = isinstance(statement, exp.Create) and kind in ("SCHEMA", "DATABASE")
        for table in statement.find_all(exp.Table):
            if table.db:
                found.add(table.db.lower())
            elif creates_schema and table is statement.this and table.name:
                found.add(table.name.lower())  # sqlglot's older reading of the name
    return found


def managed(schema: str, model_schemas: set[str]) -> str | None:
    """Why Sluice manages ``schema`` (None: it does not)."""
    if schema.startswith(PHYSICAL_PREFIX):
        return "a physical schema, where Sluice keeps its models' tables"
    if "__" in schema:
        return "an environment's view schema (its name has '__')"
    if schema in model_schemas:
        return "the schema of prod's views of its models"
    return None


def refusal(sql: str, model_schemas: set[str], dialect: str = "spark") -> str | None:
    """What is wrong with ``sql`` (None: nothing), in words that follow its subject."""
    for schema in sorted(named_schemas(sql, dialect)):
        why = managed(schema, model_schemas)
        if why is not None:
            return f"names the schema '{schema}', {why}"
    return None


def model_schemas(names: Iterable[str]) -> set[str]:
    """The view schemas of models named ``[catalog.]schema.table`` (lower case)."""
    return {name.rsplit(".", 2)[-2].lower() for name in names}


def digest(before_all: Sequence[str], after_all: Sequence[str]) -> str | None:
    """The digest of a project's statements (None: it has none), for what a plan's id
    and an approval cover."""
    if not before_all and not after_all:
        return None
    text = json.dumps([list(before_all), list(after_all)], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()
