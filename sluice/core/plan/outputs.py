"""A model's output columns as its children see them, every ``*`` expanded (pure).

A query's ``*`` takes the columns of what it reads when it runs: ``SELECT *``, ``t.*``,
``* EXCEPT (...)`` and ``* REPLACE (...)`` in a projection, and a star inside an
expression (``STRUCT(*)``, ``HASH(*)``, ``TO_JSON(STRUCT(t.*))``), whose one value then
depends on every column. ``COUNT(*)`` reads rows, not columns. Through a CTE or a
subquery a star takes that query's columns, which are the table's again where the CTE
itself selects ``*``. (``@STAR`` is expanded when the model is loaded: its columns are in
the query.)

:func:`star_reads` says which tables a query's stars read whole; :class:`OutputColumns`
resolves each model's output column names from its query and its parents' resolved
columns (a Python model's, a seed's or an external table's declared columns), ``None``
where they cannot be known (a star over a table whose columns nobody declares).
How the plan uses them is :mod:`sluice.core.plan.narrowing`'s.

>>> from sluice.core.model.definition import Kind, KindName, Model
>>> parent = Model("s.p", Kind(KindName.FULL), query_sql="SELECT 1 AS id, 'x' AS name")
>>> child = Model("s.c", Kind(KindName.FULL), query_sql="WITH c AS (SELECT * FROM s.p) "
...               "SELECT *, HASH(*) AS h FROM c", depends_on=("s.p",))
>>> sorted(star_reads(child.query))
['s.p']
>>> OutputColumns({"s.p": parent, "s.c": child})("s.c")
('id', 'name', 'h')
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Generic, TypeVar

from sqlglot import exp
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, build_scope, walk_in_scope

from sluice.core.model.definition import Model
from sluice.core.model.macro.lexer import PREFIX
from sluice.core.plan import memo
from sluice.core.plan.alias_expansion import within

Columns = tuple[str, ...]
Schema = Mapping[str, Sequence[str] | None]
"""Table ("schema.name") -> its column names (None: not known)."""


def is_star(select: exp.Expr) -> bool:
    """Whether a projection is ``*`` or ``t.*`` (``COUNT(*)`` is not)."""
    return isinstance(select, exp.Star) or (
        isinstance(select, exp.Column) and isinstance(select.this, exp.Star)
    )


def table_name(table: exp.Table) -> str:
    """A table's name as the project names models: ``schema.table`` (or with its catalog)."""
    parts = [p.name.lower() for p in table.parts]
    return ".".join(parts[-3:] if len(parts) == 3 and parts[0] else parts[-2:])


def without_macros(query: exp.Expr) -> exp.Expr:
    """Macro placeholder columns (``@start_ds``...) become opaque values, not columns."""

    def swap(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and not node.table and node.name.startswith(PREFIX):
            return exp.Var(this=node.name)
        return node

    return query.transform(swap)  # a copy: the model's parsed query stays as it is


def schema_dict(schema: Schema) -> dict[str, object]:
    """sqlglot's nested schema. A table of a configured catalog (``catalog.schema.table``)
    nests every table three deep: the two-part ones under a catalog named "" (sqlglot
    finds a table by its last parts, and Spark's current catalog has no name here)."""
    deep = any(t.count(".") == 2 for t, c in schema.items() if c is not None)
    result: dict[str, Any] = {}
    for table, columns in schema.items():
        if columns is None or "." not in table:
            continue
        parts = table.lower().split(".")
        if deep and len(parts) == 2:
            parts.insert(0, "")
        level = result
        for part in parts[:-1]:
            level = level.setdefault(part, {})
        level[parts[-1]] = {c.lower(): "STRING" for c in columns if c}
    return result


def star_nodes(scope: Scope) -> list[tuple[exp.Star, str]]:
    """The stars of one scope that take columns: ``(star, qualifier)``, the qualifier the
    ``t`` of ``t.*`` ("" for a plain ``*``); ``COUNT(*)`` is left out."""
    found: list[tuple[exp.Star, str]] = []
    for node in walk_in_scope(scope.expression):
        if not isinstance(node, exp.Star):
            continue
        parent = node.parent
        if isinstance(parent, exp.Column):
            found.append((node, parent.table))
        elif not isinstance(parent, exp.Count):
            found.append((node, ""))
    return found


def star_sources(scope: Scope, qualifier: str) -> list[object]:
    """What a star of ``scope`` with ``qualifier`` expands: tables and scopes."""
    if qualifier:
        return [scope.sources.get(qualifier)]
    return [source for _, source in scope.selected_sources.values()]


def has_star(query_sql: str | None) -> bool:
    """Cheap first test: a query without a ``*`` character has no star at all."""
    return query_sql is not None and "*" in query_sql


_READS: memo.QueryCache[str, frozenset[str] | None] = memo.QueryCache()


def star_reads(query: exp.Expr) -> frozenset[str] | None:
    """The tables whose every column some star of ``query`` takes, in the query itself or
    any CTE or subquery (a star over a CTE or subquery takes that query's own columns,
    whose stars are counted where they are). None: the query's scopes cannot be read, so
    any table it reads may be."""
    if not any(True for _ in _stars_anywhere(query)):
        return frozenset()
    try:
        root = build_scope(query)
        if root is None:
            return None
        tables: set[str] = set()
        for scope in root.traverse():
            for _, qualifier in star_nodes(scope):
                for source in star_sources(scope, qualifier):
                    if isinstance(source, exp.Table):
                        tables.add(table_name(source))
                    elif source is None:
                        return None  # t.* of a name the scope does not know
        return frozenset(tables)
    except Exception:
        return None


def _stars_anywhere(query: exp.Expr) -> list[exp.Star]:
    return [s for s in query.find_all(exp.Star) if not isinstance(s.parent, exp.Count)]


def model_star_reads(model: Model) -> frozenset[str] | None:
    """:func:`star_reads` of a model's query, cached on its text (empty for a model
    without a query, or whose query has no ``*``; None when it cannot be parsed)."""
    if not has_star(model.query_sql):
        return frozenset()
    assert model.query_sql is not None
    cached = _READS.get(model.query_sql)
    if cached is not memo.MISSING:
        return cached
    try:
        query = model.query
    except Exception:
        query = None
    reads = star_reads(query) if query is not None else None
    _READS.put(model.query_sql, model.query_sql, reads)
    return reads


def unqualified_names(model: Model, among: Collection[str] | None = None) -> frozenset[str]:
    """The column names a model's query uses without saying which table they are of (an
    added column of that name upstream may be the one Spark resolves them to); with
    ``among``, only those of these names (a query whose text has none is not parsed)."""
    text = (model.query_sql or "").lower()
    if among is not None and not any(
        re.search(rf"(?<!\w){re.escape(n)}(?!\w)", text) for n in among
    ):
        return frozenset()
    try:
        query = model.query
    except Exception:
        return frozenset()
    if query is None:
        return frozenset()
    names = frozenset(
        c.name.lower()
        for c in query.find_all(exp.Column)
        if not c.table and not isinstance(c.this, exp.Star) and not c.name.startswith(PREFIX)
    )
    return names if among is None else names & frozenset(among)


def query_columns(query: exp.Expr, schema: Schema) -> Columns | None:
    """The output column names of ``query`` reading the tables of ``schema``, stars
    expanded (None: a star over a table whose columns are unknown, or an unnamed one)."""
    if not isinstance(query, exp.Query):
        return None
    names = [n.lower() for n in query.named_selects]
    if "*" in names:
        if not within(query):
            return None  # a hostile alias chain (alias_expansion): not known
        try:
            qualified = qualify(
                without_macros(query),
                dialect="spark",
                schema=schema_dict(schema),
                validate_qualify_columns=False,
                quote_identifiers=False,
                identify=False,
            )
        except Exception:
            return None
        if not isinstance(qualified, exp.Query):
            return None
        names = [n.lower() for n in qualified.named_selects]
    if not names or any(not n or n == "*" for n in names):
        return None
    return tuple(names)


_RESOLVED: memo.QueryCache[tuple[str, tuple[tuple[str, Columns | None], ...]], Columns | None] = (
    memo.QueryCache()
)


_T = TypeVar("_T")


class OnDemand(Generic[_T]):
    """A value per model, resolved when first asked for, its parents' first (without
    recursion: a chain of thousands of models is a loop); a parent still being resolved
    (a cycle) is not known to its child. Subclasses say what a model needs
    (:meth:`_needs`) and how its value follows from theirs (:meth:`_resolve`)."""

    known: dict[str, _T | None]

    def __call__(self, name: str) -> _T | None:
        if name in self.known:
            return self.known[name]
        stack = [name]
        open_: set[str] = set()
        while stack:
            top = stack[-1]
            if top in self.known:
                stack.pop()
                continue
            waiting = [p for p in self._needs(top) if p not in self.known and p not in open_]
            if waiting and top not in open_:
                open_.add(top)
                stack.extend(waiting)
                continue
            stack.pop()
            self.known[top] = self._resolve(top)  # a parent still open (a cycle): unknown
        return self.known[name]

    def _needs(self, name: str) -> list[str]:
        raise NotImplementedError

    def _resolve(self, name: str) -> _T | None:
        raise NotImplementedError


class OutputColumns(OnDemand[Columns]):
    """Each model's output column names (None: not known), resolved on demand over one
    set of models (the project's, or an environment's), parents before children.

    A Python model, a seed and an external table have their declared columns; a SQL
    model the names its query gives, with every star expanded from its parents' resolved
    columns (its declared columns where that is not possible).
    """

    def __init__(self, models: Mapping[str, Model]) -> None:
        self.models = models
        self.known: dict[str, Columns | None] = {}

    def _needs(self, name: str) -> list[str]:
        model = self.models.get(name)
        if model is None:
            return []
        reads = model_star_reads(model)
        wanted = model.depends_on if reads is None else sorted(reads)
        return [p for p in wanted if p in self.models and p != name]

    def _resolve(self, name: str) -> Columns | None:
        model = self.models.get(name)
        if model is None:
            return None
        declared = tuple(c.lower() for c, _ in model.columns) or None
        if model.query_sql is None:
            return declared
        reads = model_star_reads(model)
        wanted = model.depends_on if reads is None else sorted(reads)
        schema = tuple((p, self.known.get(p)) for p in wanted)
        key = (model.query_sql, schema)
        cached = _RESOLVED.get(key)
        if cached is not memo.MISSING:
            return cached if cached is not None else declared
        try:
            query = model.query
        except Exception:
            query = None
        found = query_columns(query, dict(schema)) if query is not None else None
        _RESOLVED.put(key, model.query_sql, found)
        return found if found is not None else declared
