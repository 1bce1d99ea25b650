"""Model names and the catalogs they may name (pure).

A model or external table is named ``schema.table`` or ``catalog.schema.table``. Every
name is kept in one canonical form, so that ``sch.tbl`` and ``local.sch.tbl`` are one
model (one node of the graph, one fingerprint):

- a name in a **default catalog** is kept as ``schema.table``. The default catalogs are
  the project's own (SQLMesh's default catalog, read from the default gateway's
  connection in config.yaml: a DuckDB file ``local.db`` is ``local``, a Databricks
  ``catalog``, a BigQuery ``project``, ...) and Spark's current catalog
  (``spark.sql.defaultCatalog``, else ``spark_catalog``, the session catalog). Spark
  resolves a two-part name in its current catalog, so that is where these live;
- a name in another **configured catalog** (``spark.sql.catalog.<name>`` in the Spark
  settings Sluice runs with: the service's, never a pull request's) is kept as
  ``catalog.schema.table``, and its physical tables and views are made in that catalog;
- any other catalog is an error naming the catalogs Sluice knows and how to add one.

Names are case-insensitive (kept in lower case); a configured catalog whose name has
upper-case letters cannot be named (Spark looks catalogs up by their exact name).

>>> cats = Catalogs(project_default="local", configured=("lake",))
>>> canonical(["LOCAL", "Sales", "orders"], cats), canonical(["lake", "raw", "e"], cats)
('sales.orders', 'lake.raw.e')
>>> sql_name("lake.1x.orders")
'lake.`1x`.orders'
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, TypeVar

from sqlglot import exp

SESSION_CATALOG = "spark_catalog"
"""Spark's built-in session catalog (the Hive metastore or Spark's in-memory one)."""
CATALOG_CONF = "spark.sql.catalog."
DEFAULT_CATALOG_CONF = "spark.sql.defaultCatalog"
_PART = re.compile(r"^[a-z0-9_]+$")
_PLAIN = re.compile(r"^[a-z_][a-z0-9_]*$")
_Expr = TypeVar("_Expr", bound=exp.Expr)


class NameProblem(ValueError):
    """A name Sluice cannot place: what is wrong, and how to fix it (the caller knows where)."""

    def __init__(self, message: str, hint: str, catalog: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.catalog = catalog
        """The catalog Sluice does not know, when that is the problem."""


@dataclass(frozen=True)
class Catalogs:
    """The catalogs a project's names may carry."""

    project_default: str | None = None
    """SQLMesh's default catalog of the project (config.yaml's default gateway), if any."""
    spark_default: str = SESSION_CATALOG
    """Spark's current catalog: ``spark.sql.defaultCatalog``, else the session catalog."""
    configured: tuple[str, ...] = ()
    """``spark.sql.catalog.<name>`` of the Spark settings, lower-case names only."""
    unusable: tuple[str, ...] = ()
    """Configured catalogs whose names cannot be written in a model name (upper case)."""

    @property
    def defaults(self) -> frozenset[str]:
        """The catalog names that mean Spark's current catalog."""
        return frozenset(c for c in (self.project_default, self.spark_default) if c)

    @property
    def others(self) -> tuple[str, ...]:
        """The catalogs a name may carry that are not a default one."""
        found = {*self.configured, SESSION_CATALOG} - self.defaults
        return tuple(sorted(found))

    def key(self) -> list[Any]:
        """What a parsed model depends on (for the parse cache)."""
        return [self.project_default, self.spark_default, list(self.configured)]

    def known(self) -> str:
        """The catalogs a name may carry, in words."""
        said = [f"{self.spark_default} (Spark's current catalog)"]
        if self.project_default and self.project_default != self.spark_default:
            said.append(
                f"{self.project_default} (the project's default catalog, the same as "
                f"{self.spark_default})"
            )
        said += [f"{c} (spark.sql.catalog.{c})" for c in self.others]
        return ", ".join(said)


NO_CATALOGS = Catalogs()


def catalogs_of(spark_conf: Mapping[str, str], project_default: str | None) -> Catalogs:
    """The catalogs of a project whose Spark settings are ``spark_conf``.

    Only a key ``spark.sql.catalog.<name>`` names a catalog (``spark.sql.catalog.<name>.x``
    is one of its options).

    >>> catalogs_of({"spark.sql.catalog.lake": "x.Y", "spark.sql.catalog.lake.uri": "u",
    ...              "spark.sql.catalog.Big": "x.Z"}, "local")
    Catalogs(project_default='local', spark_default='spark_catalog', configured=('lake',), \
unusable=('Big',))
    """
    configured: list[str] = []
    unusable: list[str] = []
    for key in spark_conf:
        if not key.startswith(CATALOG_CONF):
            continue
        name = key[len(CATALOG_CONF) :]
        if not name or "." in name:
            continue
        (configured if _PLAIN.match(name) else unusable).append(name)
    spark_default = str(spark_conf.get(DEFAULT_CATALOG_CONF) or SESSION_CATALOG)
    return Catalogs(
        project_default=project_default.lower() if project_default else None,
        spark_default=spark_default,
        configured=tuple(sorted(configured)),
        unusable=tuple(sorted(unusable)),
    )


def gateway_catalog(data: Mapping[Any, Any]) -> str | None:
    """SQLMesh's default catalog of a config.yaml (parsed, as a mapping): the catalog its
    default gateway's connection opens, as SQLMesh derives it, or None when it names none.

    >>> gateway_catalog({"gateways": {"local": {"connection": {"type": "duckdb",
    ...     "database": "db/Local.db"}}}})
    'local'
    >>> gateway_catalog({"default_gateway": "b", "gateways": {"a": {}, "b": {"connection":
    ...     {"type": "bigquery", "project": "my-proj"}}}})
    'my-proj'
    """
    gateways = data.get("gateways")
    if not isinstance(gateways, Mapping) or not gateways:
        return None
    name = data.get("default_gateway") or next(iter(gateways))
    gateway = gateways.get(name)
    connection = gateway.get("connection") if isinstance(gateway, Mapping) else None
    if not isinstance(connection, Mapping):
        return None
    kind = str(connection.get("type") or "").lower()
    found: object = None
    if kind in ("duckdb", ""):
        catalogs = connection.get("catalogs")
        database = connection.get("database")
        if isinstance(catalogs, Mapping) and catalogs:
            found = next(iter(catalogs))
        elif isinstance(database, str) and database and database != ":memory:":
            found = PurePosixPath(database.replace("\\", "/")).stem
        elif kind == "duckdb":
            found = "memory"  # DuckDB's in-memory database
    elif kind == "bigquery":
        found = connection.get("project")
    else:
        found = connection.get("catalog") or connection.get("database")
    return str(found).strip().lower() if isinstance(found, str) and found.strip() else None


def split_text(text: str) -> list[str]:
    """A dotted name as written (quotes around the whole or any part), in lower case."""
    return [p.strip().strip('"`').lower() for p in text.strip().strip('"`').split(".")]


def canonical(parts: Sequence[str], catalogs: Catalogs) -> str:
    """The canonical name of ``schema.table`` or ``catalog.schema.table`` (parts unquoted).

    Raises:
        NameProblem: the name has another number of parts, a part that is not letters,
            digits and underscores, or a catalog Sluice does not know.
    """
    parts = [p.lower() for p in parts]
    written = ".".join(parts)
    if len(parts) not in (2, 3) or not all(_PART.match(p) for p in parts[-2:]):
        raise NameProblem(
            f"'{written}' must be schema.table or catalog.schema.table (letters, digits, "
            "underscores)",
            "for example `name jaffle.orders`",
        )
    if len(parts) == 2:
        return written
    catalog, schema, table = parts
    if catalog in catalogs.defaults:  # may be any text, e.g. a BigQuery `my-project`
        return f"{schema}.{table}"
    if catalog in catalogs.others:
        return written
    raise NameProblem(
        f"'{written}' names the catalog '{catalog}', which Sluice does not know",
        _hint(catalogs, catalog),
        catalog,
    )


def _hint(catalogs: Catalogs, catalog: str) -> str:
    unusable = [c for c in catalogs.unusable if c.lower() == catalog]
    if unusable:
        return (
            f"the Spark catalog is configured as '{unusable[0]}': Spark names catalogs "
            "exactly and Sluice names are lower case; configure it as "
            f"spark.sql.catalog.{catalog}"
        )
    return (
        f"known catalogs: {catalogs.known()}. A catalog is configured in the Spark settings "
        f"Sluice runs with (spark.sql.catalog.{catalog} and its options: SLUICE_SPARK_CONF "
        "for the service, sluice.spark.conf in config.yaml for a local run); the "
        "project's default catalog is the one its default gateway connects to"
    )


def lookup_name(written: str, catalogs: Catalogs) -> str:
    """A name a person gave (a test's model, ``--restate-model``) in its canonical form, to
    look a model up by; as written (lower case) when it is no name Sluice can place, so
    that the lookup fails and says so.

    >>> lookup_name("LOCAL.s.t", Catalogs("local")), lookup_name("x.y.s.t", Catalogs())
    ('s.t', 'x.y.s.t')
    """
    try:
        return canonical(split_text(written), catalogs) if written else ""
    except NameProblem:
        return written.lower()


def split(name: str) -> tuple[str | None, str, str]:
    """(catalog or None, schema, table) of a canonical name."""
    parts = name.split(".")
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    schema, table = name.split(".", 1)
    return None, schema, table


def schema_of(name: str) -> str:
    """``[catalog.]schema`` of a canonical name."""
    return name.rsplit(".", 1)[0]


def table_of(name: str) -> str:
    """The table part of a canonical name."""
    return name.rsplit(".", 1)[1]


def quote_column(name: str) -> str:
    """A column name for Spark SQL, always in backticks (a plain name may be a keyword).

    >>> quote_column("order"), quote_column("a`b")
    ('`order`', '`a``b`')
    """
    return "`" + name.replace("`", "``") + "`"


def quote_part(part: str) -> str:
    """One part of a name for Spark SQL: as it is when plain, else in backticks."""
    return part if _PLAIN.match(part) else "`" + part.replace("`", "``") + "`"


def sql_name(*parts_or_names: str) -> str:
    """A dotted name for Spark SQL, each part quoted when it is not plain."""
    parts = [p for item in parts_or_names for p in item.split(".")]
    return ".".join(quote_part(p) for p in parts)


def drop_default_catalogs(query: _Expr, catalogs: Catalogs) -> _Expr:
    """``query`` with the default catalogs dropped from its three-part tables (in place):
    ``local.sch.tbl`` reads as ``sch.tbl``. Other catalogs are left as written.

    >>> import sqlglot
    >>> q = sqlglot.parse_one("SELECT * FROM LOCAL.s.a JOIN lake.s.b USING (id)")
    >>> drop_default_catalogs(q, Catalogs("local", configured=("lake",))).sql()
    'SELECT * FROM s.a JOIN lake.s.b USING (id)'
    """
    for table in query.find_all(exp.Table):
        catalog = table.args.get("catalog")
        if isinstance(catalog, exp.Identifier) and catalog.name.lower() in catalogs.defaults:
            table.set("catalog", None)
    return query
