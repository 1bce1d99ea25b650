"""A model's columns with their types, inferred as SQLMesh infers them (pure).

A model that declares ``columns`` has those types (a seed's are inferred from its CSV by
:mod:`sluice.core.model.seeds`, a Python model's and an external table's are declared).
A SQL model's types are what sqlglot's optimizer annotates on its query, as SQLMesh's
``columns_to_types`` does: when every parent's columns are known, the query (its macros
rendered for one day) is qualified against the parents' columns and types, and
``annotate_types`` gives each projection a type; when a parent's columns are not known,
each projection is annotated alone (a cast or a literal has a type, a column has none).
A projection whose type sqlglot cannot tell has "" (unknown), as SQLMesh's ``UNKNOWN``.
Types are spelt as Spark spells them. An SCD type 2 table has its validity columns
after the query's (SQLMesh's managed columns).

Types are resolved on demand, parents before children, and cached on the query and its
parents' types: a plan asks only for the models whose types it uses (a forward-only
change's, :mod:`sluice.core.plan.destructive`). They describe what the table will
hold; the build still lets Spark decide the types of what it writes.

>>> from sluice.core.model.definition import Kind, KindName, Model
>>> raw = Model("raw.o", Kind(KindName.EXTERNAL), columns=(("id", "INT"), ("amount", "DOUBLE")))
>>> daily = Model("mart.d", Kind(KindName.FULL), depends_on=("raw.o",),
...               query_sql="SELECT id, SUM(amount) AS total, COUNT(*) AS n FROM raw.o GROUP BY id")
>>> ColumnTypes({"raw.o": raw, "mart.d": daily})("mart.d")
(('id', 'INT'), ('total', 'DOUBLE'), ('n', 'BIGINT'))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify
from sqlglot.schema import MappingSchema

from sluice.core.model import macros
from sluice.core.model.definition import KindName, Model
from sluice.core.plan import memo
from sluice.core.plan.alias_expansion import within
from sluice.core.plan.outputs import OnDemand, is_star

Typed = tuple[tuple[str, str], ...]
"""(column, Spark type or "" when not known), in the table's order."""

_DAY = 86_400_000
# The macros' values when types are inferred: one day (SQLMesh renders its defaults).
_VALUES = macros.time_values(0, _DAY, _DAY)
_UNKNOWN = (exp.DataType.Type.UNKNOWN, exp.DataType.Type.NULL)


_SIMPLE: dict[Any, str] = {}
"""A type without parameters (INT, STRING...) -> its Spark spelling, written once."""
_BUILT: dict[str, exp.DataType] = {}
"""A parent's type as Spark spells it -> sqlglot's, read once (never modified: schemas
hand it to the annotation as it is)."""
_BUILT_SIZE = 4096


def spark_type(data_type: exp.DataType | None) -> str:
    """A sqlglot type as Spark spells it ("" when not known)."""
    if data_type is None or data_type.is_type(*_UNKNOWN):
        return ""
    if len(data_type.args) == 1 or not any(v for k, v in data_type.args.items() if k != "this"):
        simple = _SIMPLE.get(data_type.this)
        if simple is None:
            simple = _SIMPLE[data_type.this] = str(data_type.sql("spark"))
        return simple
    return str(data_type.sql("spark"))


def _built(type_sql: str) -> exp.DataType:
    found = _BUILT.get(type_sql)
    if found is None:
        found = exp.DataType.build(type_sql or "UNKNOWN", dialect="spark")
        if len(_BUILT) < _BUILT_SIZE:
            _BUILT[type_sql] = found
    return found


def _spelt(type_sql: str, dialect: str) -> str:
    """A declared type as Spark spells it (as written when sqlglot cannot read it)."""
    if not type_sql:
        return ""
    try:
        return spark_type(exp.DataType.build(type_sql, dialect=dialect))
    except (SqlglotError, ValueError):
        return type_sql.upper()


def _schema(parents: Mapping[str, Typed]) -> MappingSchema:
    """sqlglot's schema of the parents (one depth: a three-part name nests every two-part
    one under a catalog named "", as :func:`~sluice.core.plan.outputs.schema_dict`).
    Names are lower case already (Spark's), so sqlglot need not normalise them."""
    deep = any(name.count(".") == 2 for name in parents)
    result: dict[str, Any] = {}
    for name, columns in parents.items():
        parts = name.lower().split(".")
        if deep and len(parts) == 2:
            parts.insert(0, "")
        level = result
        for part in parts[:-1]:
            level = level.setdefault(part, {})
        level[parts[-1]] = {c: _built(t) for c, t in columns}
    return MappingSchema(result, dialect="spark", normalize=False)


def infer(
    query: exp.Query, parents: Mapping[str, Typed] | None, dialect: str = "spark"
) -> Typed | None:
    """The columns and types of ``query`` (Spark SQL, macros rendered) reading tables of
    ``parents``; None for ``parents`` when some parent's columns are not known. None
    when a projection has no name, a name twice, or is a star left unexpanded.
    ``dialect``: the model's, in which a projection Spark's annotation leaves unknown is
    annotated again (sqlglot reads some functions only in their own dialect, such as
    BigQuery's ``TIMESTAMP_MICROS``, and SQLMesh annotates in the model's dialect)."""
    if any(not s.output_name and not is_star(s) for s in query.selects):
        return None  # Spark names it after its text, sqlglot's qualify _col_0: unknown
    annotated: exp.Expr | None = None
    if parents is not None and within(query):  # else a hostile alias chain: see there
        try:
            schema = _schema(parents)
            annotated = annotate_types(
                qualify(
                    query.copy(),  # the one copy: ``query`` is left as it is
                    dialect="spark",
                    schema=schema,
                    quote_identifiers=False,
                    identify=False,
                ),
                schema=schema,
                dialect="spark",
            )
        except SqlglotError:  # an unknown or ambiguous column: as SQLMesh, annotate alone
            annotated = None
    if isinstance(annotated, exp.Query):
        selects = annotated.selects
    else:
        selects = [annotate_types(s.copy(), dialect="spark") for s in query.selects]
    found: dict[str, str] = {}
    for select in selects:
        name = select.output_name.lower()
        if not name or name in found or name == "*":
            return None
        found[name] = spark_type(select.type) or _in_dialect(select, dialect)
    return tuple(found.items())


def _in_dialect(select: exp.Expr, dialect: str) -> str:
    """The type of one projection annotated alone in ``dialect`` ("" when not known)."""
    if dialect == "spark":
        return ""
    try:
        again = sqlglot.parse_one(select.sql(dialect), read=dialect)
        return spark_type(annotate_types(again, dialect=dialect).type)
    except (SqlglotError, ValueError):
        return ""


def _managed(model: Model) -> Typed:
    """An SCD type 2 table's validity columns, after the query's."""
    scd = model.kind.scd
    if scd is None:
        return ()
    kind = spark_type(exp.DataType.build(scd.time_data_type, dialect="spark"))
    return ((scd.valid_from_name, kind), (scd.valid_to_name, kind))


_Key = tuple[str, str, str, tuple[tuple[str, Typed | None], ...]]
_CACHE: memo.QueryCache[_Key, Typed | None] = memo.QueryCache()


class ColumnTypes(OnDemand[Typed]):
    """Each model's columns and types (None: its columns are not known), resolved on
    demand over one set of models (the project's, or an environment's)."""

    def __init__(self, models: Mapping[str, Model], dialect: str = "spark") -> None:
        self.models = models
        self.dialect = dialect
        """The project's dialect: an external table's columns are declared in it."""
        self.known: dict[str, Typed | None] = {}

    def _needs(self, name: str) -> list[str]:
        model = self.models.get(name)
        if model is None or model.columns or model.query_sql is None:
            return []
        return [p for p in model.depends_on if p in self.models and p != name]

    def _resolve(self, name: str) -> Typed | None:
        model = self.models.get(name)
        if model is None:
            return None
        if model.columns:
            # A model's declared types are Spark's already; an external table's as written.
            external = model.kind.name == KindName.EXTERNAL
            dialect = self.dialect if external else "spark"
            return tuple((c.lower(), _spelt(t, dialect)) for c, t in model.columns) + _managed(
                model
            )
        if model.query_sql is None:
            return None
        typed = {p: self.known.get(p) for p in model.depends_on if p != name}
        # A parent whose columns nobody knows (a star, an undeclared table): no schema.
        parents = {p: c for p, c in typed.items() if c} if all(typed.values()) else None
        schema = (("", None),) if parents is None else tuple(sorted(parents.items()))
        key = (name, model.dialect, model.query_sql, schema)
        cached = _CACHE.get(key)
        if cached is not memo.MISSING:
            return None if cached is None else cached + _managed(model)
        found = None
        try:
            query: exp.Expr | None = model.query
            if query is not None and macros.PREFIX in model.query_sql:
                values: dict[str, exp.Expr | str] = {**_VALUES, "this_model": name}
                query = macros.render(query, values)
            if isinstance(query, exp.Query):
                found = infer(query, parents, model.dialect)
        except Exception:  # a query sqlglot cannot read: its types are unknown
            found = None
        _CACHE.put(key, model.query_sql, found)
        return None if found is None else found + _managed(model)
