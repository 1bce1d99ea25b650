"""A project's own statements (config.yaml's ``before_all`` / ``after_all``, and a model's
pre- and post-statements): what they may be, the schemas they may not name, and their
digest (pure).

They run in every job of the project, a pull request's too (its own build, before any
approval), outside any model (a model's: in its build, before its query and after it). Spark SQL's ``CREATE`` reaches far past the catalog: ``USING
jdbc OPTIONS (url ..., sessionInitStatement ...)`` runs SQL on any database the driver can
reach (the Hive metastore's own, say), ``USING csv OPTIONS (path ...)`` or ``LOCATION``
reads any file, a class name is a provider. So the whole statement is allow-listed on
sqlglot's tree (:func:`shape`), and anything not listed is refused:

- ``CREATE SCHEMA|DATABASE IF NOT EXISTS name``;
- ``CREATE TABLE IF NOT EXISTS name (column type [NOT NULL] [COMMENT '...'], ...)``, or
  ``... AS <query>``, with optional ``USING`` one of :data:`PROVIDERS`, ``PARTITIONED BY
  (columns)``, ``COMMENT '...'`` and ``TBLPROPERTIES`` whose keys are no path, location,
  provider, class or Sluice's own (:func:`property_problem`);
- ``CREATE VIEW IF NOT EXISTS name [(columns)] [COMMENT '...'] [TBLPROPERTIES (...)] AS
  <query>``.

A model's statements may also be a query (it changes nothing).

What is refused is an error of the load, except a statement of that shape but for
changing what may exist already (:func:`changes_existing`: ``DROP TABLE|VIEW``, a
``CREATE`` without ``IF NOT EXISTS`` or with ``OR REPLACE``, as SQLMesh projects write):
run by a pull request's build it would change objects outside the PR's environment
before anyone approved it, so it is never run, but the project loads and plans with it
(in the model's version, the plan's id and its review), named in the plan's notes with
its file:line, and the build that would run it is refused before the job starts (the
model's; for ``before_all`` / ``after_all``, every job of the project).

Names are plain (``[catalog.]schema.table``, letters, digits and ``_``), the query reads
tables by plain names, and the text rules and tree rules of
:mod:`sluice.core.model.fileaccess` hold for the whole statement (:func:`check`). The
loader checks each statement as written and as the Spark SQL it becomes; the driver's sql
step checks the project's statements once more before it runs them
(:func:`sluice.core.spark.steps.sql.run_sql`), with the same :func:`check`.

And none may name

- a physical schema (``sluice__<schema>``), nor any schema with ``__`` in its name: that
  is the form of an environment's view schemas (``<schema>__<environment>``);
- a schema of prod's environment as in force (its models' views and tables, from state:
  a pull request may have turned prod's model into an external one), of a model of the
  plan of any kind but external, or of a model it removes.

And every table or view a statement creates or reads is named with its schema
(:func:`unqualified`): Spark puts a name without one in its current database
(``default``), which may be prod's.

>>> sorted(named_schemas("CREATE TABLE IF NOT EXISTS raw.x AS SELECT * FROM sluice__shop.t"))
['raw', 'sluice__shop']
>>> managed("shop__pr_7", set()), managed("raw", {"shop"}), managed("shop", {"shop"})
("an environment's view schema (its name has '__')", None, "the schema of prod's views of its models")
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from sluice.core.model import fileaccess
from sluice.core.model.macros import PREFIX as MACRO_PREFIX
from sluice.core.snapshot.naming import MARK_PREFIX, PHYSICAL_PREFIX

STEP_IDS = frozenset({"before_all", "after_all"})
"""The ids of the job steps that run a project's statements (``jobs.ALL_STEPS``): the
driver checks those steps' statements with :func:`check` before it runs them."""
MODEL_STEP_PREFIXES = ("pre_statements ", "post_statements ")
"""How the ids of the steps running a model's pre- and post-statements begin (the model's
name follows): the driver checks them as :data:`STEP_IDS`' (queries taken too)."""


def checked_step(step_id: str | None) -> bool | None:
    """Whether a ``sql`` step of this id runs a project's statements (None: it does not;
    True: a model's, which may hold queries too; False: ``before_all`` / ``after_all``)."""
    if step_id in STEP_IDS:
        return False
    if step_id is not None and step_id.startswith(MODEL_STEP_PREFIXES):
        return True
    return None


PROVIDERS = ("parquet", "orc", "delta", "iceberg")
"""The ``USING`` a project statement's table may have (or none: Spark's default)."""

SHAPE_HINT = (
    "config.yaml's statements run in every job, a pull request's too, so Sluice takes only "
    "CREATE SCHEMA IF NOT EXISTS s; CREATE TABLE IF NOT EXISTS s.t (columns) or ... AS "
    "SELECT, with optional USING parquet|orc|delta|iceberg, PARTITIONED BY (columns), "
    "COMMENT and TBLPROPERTIES; and CREATE VIEW IF NOT EXISTS s.v AS SELECT. Do the rest "
    "outside Sluice (or as a model)"
)
_PROPERTY_HINT = (
    "remove the property: a project statement's table properties may not name a path, a "
    "location, a provider, a class, options or Sluice's own sluice.* marks"
)
_NAME_HINT = "name it [catalog.]schema.name with letters, digits and '_' only, unquoted"
_SCHEMA_HINT = (
    "write schema.name (e.g. raw.revenue): a name without its schema is a table of Spark's "
    "current database (default), which may be where prod's views are"
)
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_]+")
_PLACEHOLDER = re.compile(re.escape(MACRO_PREFIX) + r"([A-Za-z0-9_]+)", re.IGNORECASE)
_PROPERTY_KEY = re.compile(r"[a-z0-9_][a-z0-9_.\-]*")
# What a table property's key may not name: where its files are, what reads them, what
# Spark (or Hive, or a table format) loads as a class, and Spark's reserved keys. Long
# words anywhere in the key (``write.data.path``, ``dataPath``); short ones as a word of
# it (``owner``, ``data_owner``, but not ``classification`` or ``security``).
_PROPERTY_PARTS = (
    "path",
    "location",
    "provider",
    "handler",
    "serde",
    "inputformat",
    "outputformat",
    "jdbc",
    "dbtable",
    "creatable",
)
_PROPERTY_WORDS = frozenset(
    {
        "url",
        "urls",
        "uri",
        "uris",
        "dir",
        "dirs",
        "class",
        "classes",
        "classname",
        "impl",
        "driver",
        "external",
        "owner",
        "option",
        "options",
        "managed",
    }
)
_KEY_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_PROPERTY_PREFIXES = (MARK_PREFIX, "spark.", "hive.")
# sqlglot's arguments of a CREATE that the allow-list takes (any other one set is refused:
# OR REPLACE, CLONE, a WITH before CREATE, ...).
_CREATE_ARGS = frozenset({"this", "kind", "exists", "expression", "properties"})
_WORDS = {
    "replace": "OR REPLACE",
    "clone": "CLONE",
    "with_": "a WITH clause before CREATE",
    "unique": "UNIQUE",
    "refresh": "REFRESH",
    "indexes": "indexes",
    "no_schema_binding": "WITH NO SCHEMA BINDING",
    "concurrently": "CONCURRENTLY",
    "clustered": "CLUSTERED",
    "begin": "BEGIN",
}


@dataclass(frozen=True)
class Refusal:
    """Why a project statement is refused.

    Attributes:
        what: What it does, to follow "before_all statement 2: ".
        hint: How to fix it.
    """

    what: str
    hint: str


def check(sql: str, dialect: str = "spark", *, queries: bool = False) -> Refusal | None:
    """The whole check of one project statement's text (None: it may run).

    It is one statement of the allow-listed shape (:func:`shape`), and neither its text
    nor its tree reaches past the catalog (:func:`sluice.core.model.fileaccess.find_in_text`
    and :func:`~sluice.core.model.fileaccess.find_in_tree`, comments and literals
    included): OPTIONS, LOCATION, SET, ADD JAR, CACHE TABLE, ``${``, Java calls, ... A file
    read by a literal path (``parquet.`/data/x```) is left to the loader, which checks it
    against ``sluice.allowed_paths`` (the driver does not know them).
    """
    try:
        parsed = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except (ParseError, TokenError) as exc:
        return Refusal(f"cannot parse it ({dialect}): {str(exc).splitlines()[0]}", SHAPE_HINT)
    if len(parsed) != 1:
        return Refusal(
            f"expected one statement, found {len(parsed)}", "give each statement its own `- ` line"
        )
    refusal = _runtime_macros(sql) or shape(parsed[0], queries=queries)
    if refusal is not None:
        return refusal
    found = [
        *fileaccess.find_in_text(sql),
        *fileaccess.find_in_tree(parsed[0], references_checked=False),
    ]
    for access in found:
        if access.path is None:  # a literal path: sluice.allowed_paths may allow it
            return Refusal(access.what, access.hint)
    return unqualified(parsed[0])


def _runtime_macros(sql: str) -> Refusal | None:
    """A macro Sluice renders in a model's query at run time (``@start_ds``,
    ``@this_model``, ...), left in a statement as its placeholder: Sluice does not render
    them in statements (Spark would read the placeholder as a name)."""
    found = sorted(set(_PLACEHOLDER.findall(sql)))
    if not found:
        return None
    named = ", ".join(f"@{name}" for name in found)
    return Refusal(
        f"uses the macro {named}, which Sluice renders in a model's query only, not in "
        "its statements",
        "write the value itself (a statement runs once per build, not per interval), or "
        "do it in the model's query",
    )


def unqualified(statement: exp.Expr) -> Refusal | None:
    """The table or view ``statement`` (of the allow-list's shape) creates or reads
    without its schema (None: it names every one with its schema, or reads a CTE). Spark
    puts such a name in its current database (``default``), which may be where prod's
    views are: the schemas a statement may not name (:func:`managed`) are known only
    from the names it spells."""
    target = statement.this if isinstance(statement, exp.Create) else None
    target = target.this if isinstance(target, exp.Schema) else target
    kind = str(statement.args.get("kind") or "table").lower()
    if kind in ("schema", "database"):
        pass  # a schema's name is the schema (sqlglot reads it as a table's name or schema)
    elif isinstance(target, exp.Table) and not target.db:
        return Refusal(_unqualified(f"names its {kind}", target.name), _SCHEMA_HINT)
    ctes = {cte.alias_or_name.lower() for cte in statement.find_all(exp.CTE)}
    for table in statement.find_all(exp.Table):
        if table is target or fileaccess.is_file_table(table):
            continue
        named = isinstance(table.this, exp.Identifier)
        if named and not table.db and table.name.lower() not in ctes:
            return Refusal(_unqualified("reads", table.name), _SCHEMA_HINT)
    return None


def shape(statement: exp.Expr, *, queries: bool = False) -> Refusal | None:
    """What of ``statement`` (one parsed statement) the allow-list of project statements
    does not take (see the module's docstring); None: all of it is taken. ``queries``: a
    query reading tables by plain names is taken too (a model's pre- or post-statement
    may be one: it changes nothing)."""
    if queries and isinstance(statement, exp.Query):
        return _reads(statement)
    if not isinstance(statement, exp.Create):
        words = " ".join(statement.sql("spark", comments=False).split()[:3])
        return Refusal(
            "Sluice runs only CREATE SCHEMA, TABLE or VIEW ... IF NOT EXISTS here, got "
            f"'{_short(words)}'",
            SHAPE_HINT,
        )
    kind = str(statement.args.get("kind") or "").upper()
    if kind not in ("SCHEMA", "DATABASE", "TABLE", "VIEW"):
        return Refusal(
            f"Sluice runs only CREATE SCHEMA, TABLE or VIEW ... IF NOT EXISTS here, got "
            f"CREATE {kind or '?'}",
            SHAPE_HINT,
        )
    for key, value in statement.args.items():
        if key not in _CREATE_ARGS and value not in (None, False, [], ""):
            return Refusal(
                f"uses {_WORDS.get(key, key.upper())}: Sluice runs only CREATE SCHEMA, TABLE "
                "or VIEW ... IF NOT EXISTS here",
                SHAPE_HINT,
            )
    if not statement.args.get("exists"):
        return Refusal(
            f"Sluice runs only CREATE {kind} ... IF NOT EXISTS here (it may only create what "
            "does not exist yet)",
            SHAPE_HINT,
        )
    if kind in ("SCHEMA", "DATABASE"):
        return _schema(statement)
    return _table_or_view(statement, kind)


def changes_existing(statement: exp.Expr) -> bool:
    """Whether ``statement``, refused by :func:`shape`, is of the allow-list's shape but
    for changing what may exist already: ``DROP TABLE|VIEW`` of a plain name, or a
    ``CREATE`` that would be taken with ``IF NOT EXISTS`` and without ``OR REPLACE``.
    SQLMesh projects write these (``DROP VIEW IF EXISTS raw.x; CREATE VIEW raw.x AS
    ...``); run by a pull request's build they would change objects outside its
    environment before anyone approved it, so Sluice never runs them, but the project
    still loads: the plan names them, and the build that would run them is refused.
    Anything else :func:`shape` refuses stays an error."""
    if isinstance(statement, exp.Drop):
        kind = str(statement.args.get("kind") or "").upper()
        targets = statement.args.get("tables") or [statement.this]
        return (
            kind in ("TABLE", "VIEW")
            and not statement.args.get("temporary")
            and all(isinstance(t, exp.Table) and _plain(t) for t in targets)
        )
    if isinstance(statement, exp.Create):
        taken = statement.copy()
        taken.set("exists", True)
        taken.set("replace", False)
        return (
            shape(taken) is None
            and unqualified(taken) is None
            and _runtime_macros(statement.sql("spark")) is None
        )
    return False


def _schema(statement: exp.Create) -> Refusal | None:
    name = statement.this
    if not isinstance(name, exp.Table) or not _plain(name) or statement.expression is not None:
        return Refusal("names its schema other than by a plain name", _NAME_HINT)
    return _properties(statement, (exp.SchemaCommentProperty,), "SCHEMA")


def _table_or_view(statement: exp.Create, kind: str) -> Refusal | None:
    target = statement.this
    columns: list[exp.Expr] = []
    if isinstance(target, exp.Schema):
        columns = list(target.expressions)
        target = target.this
    if not isinstance(target, exp.Table) or not _plain(target):
        return Refusal(f"names its {kind.lower()} other than by a plain name", _NAME_HINT)
    allowed: tuple[type[exp.Expr], ...] = (exp.SchemaCommentProperty, exp.Property)
    if kind == "TABLE":
        allowed += (exp.FileFormatProperty, exp.PartitionedByProperty)
    refusal = _properties(statement, allowed, kind)
    if refusal is not None:
        return refusal
    for column in columns:
        refusal = _column(column, kind)
        if refusal is not None:
            return refusal
    body = statement.expression
    if body is not None and not isinstance(body, exp.Query):
        return Refusal(f"creates its {kind.lower()} from something other than a query", SHAPE_HINT)
    if kind == "VIEW" and body is None:
        return Refusal("creates a view without AS SELECT", SHAPE_HINT)
    if kind == "TABLE" and body is None and not columns:
        return Refusal("creates a table with neither columns nor AS SELECT", SHAPE_HINT)
    return _reads(body) if body is not None else None


def _column(column: exp.Expr, kind: str) -> Refusal | None:
    """A column definition: a name, a type (a table's), NOT NULL, COMMENT."""
    if kind == "VIEW" and isinstance(column, exp.Identifier):
        return None  # a view's column by name only
    if not isinstance(column, exp.ColumnDef) or not isinstance(column.this, exp.Identifier):
        return Refusal(
            f"defines '{_short(column.sql('spark', comments=False))}' among its columns",
            "list columns as `name type [NOT NULL] [COMMENT '...']` only",
        )
    name = column.name
    if kind == "TABLE" and not isinstance(column.args.get("kind"), exp.DataType):
        return Refusal(f"gives column '{name}' no type", "write `name type`")
    if kind == "VIEW" and column.args.get("kind") is not None:
        return Refusal(f"gives view column '{name}' a type", "list a view's columns by name")
    for constraint in column.args.get("constraints") or []:
        inner = (
            constraint.args.get("kind") if isinstance(constraint, exp.ColumnConstraint) else None
        )
        taken = isinstance(inner, exp.CommentColumnConstraint) or (
            kind == "TABLE"
            and isinstance(inner, exp.NotNullColumnConstraint)
            and not inner.args.get("allow_null")
        )
        if not taken:
            return Refusal(
                f"gives column '{name}' '{_short(constraint.sql('spark', comments=False))}'",
                "a project statement's columns take only NOT NULL and COMMENT '...'",
            )
    return None


def _reads(body: exp.Expr) -> Refusal | None:
    """The query of a CTAS or view reads tables by plain names (a computed name or a
    quoted one with dots, a class name as a format, is no table of the catalog), or files
    as ``format.`path``` of a file format, which the file rules check."""
    for table in body.find_all(exp.Table):
        if fileaccess.is_file_table(table) and table.db.lower() in fileaccess.FILE_FORMATS:
            continue  # format.`path`: a path sluice.allowed_paths may allow (find_in_tree)
        if isinstance(table.this, exp.Identifier):
            if not _plain(table, (*_TABLE_READ_ARGS, *_TABLE_NAME_ARGS)):
                return Refusal(
                    f"reads '{_short(table.sql('spark', comments=False))}', which is not a "
                    "plain table name",
                    _NAME_HINT,
                )
        elif fileaccess.is_identifier_clause(table.this):
            return Refusal("reads a table named by IDENTIFIER()", _NAME_HINT)
    return None


def _unqualified(does: str, name: str) -> str:
    return (
        f"{does} '{name}' without its schema, which is Spark's current database (default): "
        f"write schema.{name} (e.g. raw.{name})"
    )


_TABLE_NAME_ARGS = ("this", "db", "catalog")
# What a table read by a query may have besides its name.
_TABLE_READ_ARGS = ("alias", "joins", "laterals", "pivots", "hints", "sample", "version")


def _plain(table: exp.Table, args: Sequence[str] = _TABLE_NAME_ARGS) -> bool:
    """``[catalog.]schema.name`` of plain parts (the created schema's name may be in
    ``this`` or, as sqlglot reads CREATE SCHEMA, in ``db``), and nothing else set."""
    for key, value in table.args.items():
        if value in (None, False, [], ""):
            continue
        if key not in args:
            return False
    parts = [table.args.get(k) for k in _TABLE_NAME_ARGS]
    named = [p for p in parts if p is not None]
    return bool(named) and all(
        isinstance(p, exp.Identifier) and _PLAIN_NAME.fullmatch(p.name) for p in named
    )


def _properties(
    statement: exp.Create, allowed: tuple[type[exp.Expr], ...], kind: str
) -> Refusal | None:
    given = statement.args.get("properties")
    for prop in given.expressions if isinstance(given, exp.Properties) else []:
        if type(prop) not in allowed:
            return Refusal(
                f"uses {_short(prop.sql('spark', comments=False))}, which Sluice does not take "
                f"in a project's CREATE {kind}",
                SHAPE_HINT,
            )
        refusal = _property(prop)
        if refusal is not None:
            return refusal
    return None


def _property(prop: exp.Expr) -> Refusal | None:
    if isinstance(prop, exp.FileFormatProperty):
        name = prop.this.name if isinstance(prop.this, exp.Identifier | exp.Var) else None
        if prop.args.get("hive_format") or name is None or name.lower() not in PROVIDERS:
            shown = _short(prop.sql("spark", comments=False))
            return Refusal(
                f"uses {shown}: a project statement's table is created USING "
                f"{', '.join(PROVIDERS)} or Spark's default only",
                f"write USING one of {', '.join(PROVIDERS)}, or leave USING out",
            )
    elif isinstance(prop, exp.PartitionedByProperty):
        schema = prop.this
        entries = schema.expressions if isinstance(schema, exp.Schema) else [schema]
        for entry in entries:
            if not _partition_column(entry):
                return Refusal(
                    f"partitions by '{_short(entry.sql('spark', comments=False))}'",
                    "write PARTITIONED BY (column, ...)",
                )
    elif isinstance(prop, exp.SchemaCommentProperty):
        if not (isinstance(prop.this, exp.Literal) and prop.this.is_string):
            return Refusal("gives a COMMENT that is not a string", "write COMMENT '...'")
    elif isinstance(prop, exp.Property):
        key = (
            prop.this.name if isinstance(prop.this, exp.Literal | exp.Var | exp.Identifier) else ""
        )
        value = prop.args.get("value")
        literal = isinstance(value, exp.Boolean | exp.Literal)
        problem = property_problem(key)
        if problem is None and not literal:
            problem = f"table property '{key}' is not set to a literal"
        if problem is None and "jdbc:" in str(value.this if value else "").lower():
            problem = f"table property '{key}' holds a JDBC URL"
        if problem is not None:
            return Refusal(problem, _PROPERTY_HINT)
    return None


def _partition_column(entry: exp.Expr) -> bool:
    """A partition column: a name (``b``), or Hive's ``b INT`` (a column of its own)."""
    if isinstance(entry, exp.Identifier):
        return True
    if isinstance(entry, exp.Column):
        return isinstance(entry.this, exp.Identifier) and not entry.table
    return (
        isinstance(entry, exp.ColumnDef)
        and isinstance(entry.this, exp.Identifier)
        and isinstance(entry.args.get("kind"), exp.DataType)
        and not entry.args.get("constraints")
    )


def property_problem(key: str) -> str | None:
    """Why a project statement's table or view may not have the property ``key`` (None:
    it may). Keys are plain (letters, digits, ``_ . -``) and name no path, location,
    provider, class, options, Spark's or Hive's settings, nor Sluice's mark."""
    lower = key.lower()
    if not _PROPERTY_KEY.fullmatch(lower):
        return f"table property '{_short(key)}' is not a plain key"
    if lower.startswith(_PROPERTY_PREFIXES):
        return f"table property '{key}' is Spark's, Hive's or Sluice's own"
    words = [w.lower() for w in _KEY_WORD.findall(key)]
    named = next((w for w in _PROPERTY_PARTS if w in lower), None) or next(
        (w for w in words if w in _PROPERTY_WORDS), None
    )
    if named is not None:
        return f"table property '{key}' may point at files, a data source or a class ('{named}')"
    return None


def _short(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


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
