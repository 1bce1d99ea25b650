"""Column-level impact of a plan's changes (pure): what a change does to which columns.

For a directly modified model, the old and new rendered queries are compared output column
by output column: a column is *added*, *removed*, or *changed* when its full upstream
expression differs, followed through CTEs and subqueries down to the tables it reads (so
a change in a CTE feeding ``x`` changes ``x``). A change to what decides the rows (WHERE,
JOIN, GROUP BY, HAVING, QUALIFY, DISTINCT, LIMIT, ORDER BY, a set operation, a generator,
the model's kind) is a *row-level* change: ``rows_changed``, and then every column is
affected.

For a model downstream of a change, its query's lineage says which of its output columns
read a changed upstream column (``reads``, ``affected``); reading one in WHERE, a join
condition or GROUP BY changes its rows. Upstream rows that changed change the rows of every
model reading them. The lineage comes from sqlglot's ``qualify`` and ``scope`` (the
machinery ``sqlglot.lineage`` is built on, followed here into WHERE and JOIN clauses too,
which ``sqlglot.lineage`` leaves out), with the parents' columns known from the project.

Whatever cannot be followed is *unknown*, never unaffected: a star over a table whose
columns are not known (a star over a parent whose columns the project knows takes them,
inside an expression too: ``HASH(*)`` reads every column), columns that cannot be
resolved, LATERAL VIEW, queries that do not parse, Python and seed models (no query), or
more models than the plan's lineage budget.

What the plan does with an impact (which models keep their tables, which are reported
unaffected) is written once, in :mod:`sluice.core.plan.narrowing`.

>>> from sluice.core.plan.lineage import compare_queries, downstream_impact
>>> impact = compare_queries(
...     "SELECT id, name FROM s.a",
...     "SELECT id, UPPER(name) AS name, 1 AS n FROM s.a",
... )
>>> impact.added, impact.removed, impact.changed, impact.rows_changed
(('n',), (), ('name',), False)
>>> child = downstream_impact(
...     "SELECT b.id, b.name AS label, c.x FROM s.b AS b JOIN s.c AS c ON b.id = c.id",
...     {"s.b": ["name"]},
...     {"s.b": ["id", "name"], "s.c": ["id", "x"]},
... )
>>> child.reads, child.affected, child.rows_changed, child.unknown
(('s.b.name',), ('label',), False, False)
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, ScopeType, build_scope, walk_in_scope

from sluice.core.model.definition import Model
from sluice.core.plan import memo
from sluice.core.plan.alias_expansion import MAX_EXPANDED, within
from sluice.core.plan.outputs import (
    OutputColumns,
    Schema,
    schema_dict,
    star_nodes,
    star_sources,
    table_name,
    without_macros,
)
from sluice.core.plan.outputs import is_star as _is_star
from sluice.core.snapshot.fingerprint import data_inputs

ROWS = "*"
"""The pseudo-column standing for a table's rows: read by every query selecting FROM it."""

BUDGET = 100
"""Queries one plan analyses at most; models past it are unknown (the plan stays fast)."""

_QUERY_INDEX = 6  # data_inputs()[6] is the query


@dataclass(frozen=True)
class ColumnImpact:
    """What a plan's changes do to one model's columns.

    ``added``, ``removed``, ``changed``: the model's own output columns its direct change
    adds, removes or computes differently. ``reads``: the changed upstream columns it reads,
    as ``"schema.model.column"`` (``"schema.model.*"``: that model's rows changed).
    ``affected``: its output columns whose values may differ. ``rows_changed``: its rows may
    differ, so every column is affected (``affected`` then stays empty). ``unknown``: the
    impact could not be followed (``reason`` says why): every column may be affected.
    """

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()
    affected: tuple[str, ...] = ()
    rows_changed: bool = False
    unknown: bool = False
    reason: str = ""

    def own_changes(self) -> list[tuple[str, tuple[str, ...]]]:
        """``(what, columns)`` for each non-empty kind of change of the model's own columns,
        ``what`` one of ``added``, ``changed``, ``removed`` (in that order); the caller
        words them.

        >>> ColumnImpact(added=("a",), removed=("b", "c")).own_changes()
        [('added', ('a',)), ('removed', ('b', 'c'))]
        """
        kinds = (("added", self.added), ("changed", self.changed), ("removed", self.removed))
        return [(what, names) for what, names in kinds if names]

    @property
    def touches_nothing(self) -> bool:
        """Known to leave every column and row as it was."""
        return not (
            self.added
            or self.removed
            or self.changed
            or self.reads
            or self.affected
            or self.rows_changed
            or self.unknown
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "added": list(self.added),
            "removed": list(self.removed),
            "changed": list(self.changed),
            "reads": list(self.reads),
            "affected": list(self.affected),
            "rows_changed": self.rows_changed,
            "unknown": self.unknown,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Exposure:
    """What a changed model shows its children: the columns whose values changed."""

    columns: frozenset[str] = frozenset()
    rows: bool = False  # every row (so every column) may differ
    unknown: bool = False

    @property
    def empty(self) -> bool:
        return not (self.columns or self.rows or self.unknown)

    @classmethod
    def of(cls, impact: ColumnImpact) -> Exposure:
        columns = {*impact.added, *impact.removed, *impact.changed, *impact.affected}
        return cls(frozenset(columns), impact.rows_changed, impact.unknown)


Dep = tuple[str, str]  # (table, column); column ROWS: the table's rows


@dataclass(frozen=True)
class Shape:
    """One query's lineage: per output column its signature and the table columns it reads.

    A signature is a hash of the column's full upstream expression; ``rows`` is the hash
    of everything deciding the rows, ``row_deps`` the table columns that reads.
    """

    names: tuple[str, ...] = ()
    signatures: Mapping[str, str] = field(default_factory=dict)
    deps: Mapping[str, frozenset[Dep]] = field(default_factory=dict)
    rows: str = ""
    row_deps: frozenset[Dep] = frozenset()
    unknown: str = ""  # why the lineage is unknown; "" when known

    @property
    def all_deps(self) -> frozenset[Dep]:
        return self.row_deps.union(*self.deps.values())


class _Unknown(Exception):
    """The lineage cannot be followed."""


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=10).hexdigest()


_table_name = table_name


class _Walker:
    """Signatures and dependencies of one qualified query's columns and rows."""

    def __init__(self, root: Scope, schema: Mapping[str, Sequence[str]]) -> None:
        self.root = root
        self.schema = schema  # table -> its columns, for stars inside expressions
        self.children: dict[int, Scope] = {}
        for scope in root.traverse():
            if scope.scope_type == ScopeType.UDTF:
                raise _Unknown("it uses LATERAL VIEW or a table function")
            self.children[id(scope.expression)] = scope
            if scope.is_derived_table and isinstance(scope.expression.parent, exp.Subquery):
                # A derived table's scope starts at its Subquery (walk_in_scope stops there).
                self.children[id(scope.expression.parent)] = scope
        self._columns: dict[tuple[int, str], tuple[str, frozenset[Dep]]] = {}
        self._rows: dict[int, tuple[str, frozenset[Dep]]] = {}

    # -- columns -------------------------------------------------------------------------

    def column(self, scope: Scope, name: str) -> tuple[str, frozenset[Dep]]:
        """The signature and dependencies of output column ``name`` of ``scope``."""
        key = (id(scope), name)
        if key not in self._columns:
            query = scope.expression
            if isinstance(query, exp.SetOperation):
                names = query.named_selects
                if name not in names:
                    raise _Unknown(f"column {name} is not in a set operation's output")
                self._columns[key] = self._set_column(scope, names.index(name))
            elif isinstance(query, exp.Select):
                select = next((s for s in query.selects if s.alias_or_name == name), None)
                if select is None:
                    raise _Unknown(f"column {name} is not in a subquery's output")
                self._columns[key] = self._projection(scope, select)
            else:
                raise _Unknown(f"unsupported query shape {type(query).__name__}")
        return self._columns[key]

    def _projection(self, scope: Scope, select: exp.Expr) -> tuple[str, frozenset[Dep]]:
        if _is_star(select):
            raise _Unknown("SELECT * over a table whose columns are not known")
        body = select.this if isinstance(select, exp.Alias) else select
        return self._render(scope, body, aliases=False)

    def _set_column(self, scope: Scope, index: int) -> tuple[str, frozenset[Dep]]:
        query = scope.expression
        parts: list[str] = [type(query).__name__]
        deps: set[Dep] = set()
        for branch in scope.set_operation_scopes:
            if isinstance(branch.expression, exp.SetOperation):
                sig, branch_deps = self._set_column(branch, index)
            elif isinstance(branch.expression, exp.Select):
                selects = branch.expression.selects
                if index >= len(selects):
                    raise _Unknown("set operation branches differ in width")
                sig, branch_deps = self._projection(branch, selects[index])
            else:
                raise _Unknown("unsupported set operation branch")
            parts.append(sig)
            deps |= branch_deps
        return _digest("|".join(parts)), frozenset(deps)

    # -- rows ----------------------------------------------------------------------------

    def rows(self, scope: Scope) -> tuple[str, frozenset[Dep]]:
        """The signature and dependencies of what decides ``scope``'s rows."""
        key = id(scope)
        if key not in self._rows:
            query = scope.expression
            parts: list[str] = [type(query).__name__]
            deps: set[Dep] = set()
            if isinstance(query, exp.SetOperation):
                parts.append(str(query.args.get("distinct")))
                for branch in scope.set_operation_scopes:
                    sig, branch_deps = self.rows(branch)
                    parts.append(sig)
                    deps |= branch_deps
                    if query.args.get("distinct") is not False:
                        # UNION (DISTINCT) drops rows by comparing every column.
                        sig, branch_deps = self.whole(branch)
                        parts.append(sig)
                        deps |= branch_deps
                skip = {"this", "expression", "with", "with_"}
            elif isinstance(query, exp.Select):
                for select in query.selects:
                    if _is_star(select):
                        raise _Unknown("SELECT * over a table whose columns are not known")
                    if _generates(select):
                        sig, select_deps = self._projection(scope, select)
                        parts.append(f"generates:{sig}")
                        deps |= select_deps
                if any(_aggregates(select) for select in query.selects):
                    parts.append("aggregates")  # folds rows into groups, whatever it computes
                group = query.args.get("group")
                if query.args.get("distinct") or (group is not None and group.args.get("all")):
                    # SELECT DISTINCT (and GROUP BY ALL) compare every projection: each one
                    # decides the rows, so adding a column can change how many there are.
                    for select in query.selects:
                        sig, select_deps = self._projection(scope, select)
                        parts.append(f"keyed:{sig}")
                        deps |= select_deps
                skip = {"expressions", "with", "with_"}
            else:
                raise _Unknown(f"unsupported query shape {type(query).__name__}")
            for arg, value in query.args.items():
                if arg in skip or value is None:
                    continue
                for node in value if isinstance(value, list) else [value]:
                    if isinstance(node, exp.Expr):
                        sig, node_deps = self._render(scope, node, aliases=True)
                        parts.append(f"{arg}={sig}")
                        deps |= node_deps
                    else:
                        parts.append(f"{arg}={node!r}")
            self._rows[key] = (_digest("|".join(parts)), frozenset(deps))
        return self._rows[key]

    def whole(self, scope: Scope) -> tuple[str, frozenset[Dep]]:
        """Rows and every column of ``scope`` (a subquery used inside an expression)."""
        sig, deps = self.rows(scope)
        parts = [sig]
        all_deps = set(deps)
        query = scope.expression
        if not isinstance(query, exp.Query):
            raise _Unknown(f"unsupported query shape {type(query).__name__}")
        for name in query.named_selects:
            column_sig, column_deps = self.column(scope, name)
            parts.append(column_sig)
            all_deps |= column_deps
        return _digest("|".join(parts)), frozenset(all_deps)

    # -- expressions ---------------------------------------------------------------------

    def _render(self, scope: Scope, node: exp.Expr, *, aliases: bool) -> tuple[str, frozenset[Dep]]:
        """``node``'s SQL with each column, table and subquery replaced by its signature.

        The replacements are made in place (the qualified tree is this walker's own) and
        undone right after generating the SQL: copying every clause costs more.
        """
        deps: set[Dep] = set()
        swaps: list[tuple[exp.Expr, str]] = []
        for original in walk_in_scope(node):
            text: str | None = None
            if isinstance(original, exp.Column):
                text = self._resolve(scope, original, deps, aliases=aliases)
            elif isinstance(original, exp.Star) and not isinstance(
                original.parent, exp.Count | exp.Column
            ):
                text = self._star(scope, "", deps)  # STRUCT(*), HASH(*): every column
            elif original is not node and id(original) in self.children:
                child = self.children[id(original)]
                if child.is_derived_table or child.is_cte:
                    sig, child_deps = self.rows(child)
                    text = f"rows<{sig}>"
                else:
                    sig, child_deps = self.whole(child)
                    text = f"query<{sig}>"
                deps |= child_deps
            elif isinstance(original, exp.Table) and original.find_ancestor(exp.Column) is None:
                text = self._table(scope, original, deps)
            if text is not None:
                if original is node:
                    return text, frozenset(deps)
                swaps.append((original, text))
        stand_ins = [(original, exp.Var(this=text)) for original, text in swaps]
        for original, stand_in in stand_ins:
            original.replace(stand_in)
        try:
            sql = node.sql("spark")
        finally:
            for original, stand_in in reversed(stand_ins):
                stand_in.replace(original)
        return sql, frozenset(deps)

    def _table(self, scope: Scope, table: exp.Table, deps: set[Dep]) -> str:
        source = scope.sources.get(table.alias_or_name)
        if isinstance(source, Scope):
            sig, source_deps = self.rows(source)
            deps |= source_deps
            return f"rows<{sig}>"
        name = _table_name(table)
        deps.add((name, ROWS))
        return name

    def _star(self, scope: Scope, qualifier: str, deps: set[Dep]) -> str:
        """A star inside an expression (``STRUCT(*)``, ``HASH(t.*)``): every column of
        what it reads, in order, so a column added there changes its value."""
        parts: list[str] = []
        for source in star_sources(scope, qualifier):
            if isinstance(source, Scope) and isinstance(source.expression, exp.Query):
                for name in source.expression.named_selects:
                    sig, column_deps = self.column(source, name)
                    deps |= column_deps
                    parts.append(f"{name}=col<{sig}>")
            elif isinstance(source, exp.Table) and table_name(source) in self.schema:
                table = table_name(source)
                for name in self.schema[table]:
                    deps.add((table, name))
                    parts.append(f"{table}.{name}")
            else:
                raise _Unknown("a * inside an expression reads a table whose columns are not known")
        return f"star<{','.join(parts)}>"

    def _resolve(self, scope: Scope, column: exp.Column, deps: set[Dep], *, aliases: bool) -> str:
        if isinstance(column.this, exp.Star):
            return self._star(scope, column.table, deps)
        name = column.name.lower()
        table = column.table
        current: Scope | None = scope
        while current is not None:
            if table:
                source = current.sources.get(table)
            elif len(current.sources) == 1 and not current.is_subquery:
                # Only one thing to read from, and no outer query to correlate with.
                source = next(iter(current.sources.values()))
            else:
                source = None
            if isinstance(source, Scope):
                sig, column_deps = self.column(source, name)
                deps |= column_deps
                return f"col<{sig}>"
            if isinstance(source, exp.Table):
                dep = (_table_name(source), name)
                deps.add(dep)
                return ".".join(dep)
            if not table:
                break
            current = current.parent
        if not table:
            if _lambda_parameter(column):
                return name
            query = scope.expression
            if aliases and isinstance(query, exp.Query) and name in query.named_selects:
                if not isinstance(query, exp.Select):
                    sig, column_deps = self.column(scope, name)
                else:
                    select = next(s for s in query.selects if s.alias_or_name == name)
                    sig, column_deps = self._projection(scope, select)
                deps |= column_deps
                return f"alias<{sig}>"
        raise _Unknown(f"column {column.sql('spark')} cannot be resolved")


def _generates(select: exp.Expr) -> bool:
    """Whether a projection multiplies rows (EXPLODE...)."""
    return select.find(exp.Explode, exp.Posexplode, exp.Unnest, exp.Inline) is not None


def _aggregates(select: exp.Expr) -> bool:
    """Whether a projection folds rows into groups (an aggregate outside a window)."""
    return any(node.find_ancestor(exp.Window) is None for node in select.find_all(exp.AggFunc))


def _lambda_parameter(column: exp.Column) -> bool:
    node = column.find_ancestor(exp.Lambda)
    while node is not None:
        if any(p.name.lower() == column.name.lower() for p in node.expressions):
            return True
        node = node.find_ancestor(exp.Lambda)
    return False


def _check_stars(query: exp.Expr, schema: Mapping[str, Sequence[str]]) -> None:
    """A star over a table takes the table's columns: raise _Unknown unless ``schema``
    knows them (over a CTE or subquery it takes that query's own columns)."""
    if not any(not isinstance(s.parent, exp.Count) for s in query.find_all(exp.Star)):
        return
    root = build_scope(query)
    for scope in root.traverse() if root is not None else ():
        for _, qualifier in star_nodes(scope):
            for source in star_sources(scope, qualifier):
                if isinstance(source, Scope):
                    continue
                if not isinstance(source, exp.Table) or table_name(source) not in schema:
                    what = table_name(source) if isinstance(source, exp.Table) else "a table"
                    raise _Unknown(
                        f"SELECT * reads {what}, whose columns are not known: its "
                        "columns follow the table's"
                    )


def analyse(query: exp.Expr, schema: Schema) -> Shape:
    """The lineage of ``query`` (a parsed Spark query) reading tables of ``schema``."""
    known = {t.lower(): [c.lower() for c in cols] for t, cols in schema.items() if cols}
    try:
        plain = without_macros(query)
        _check_stars(plain, known)
        if not within(plain):
            raise _Unknown(
                "its columns name other columns' aliases so often that reading them "
                f"would build more than {MAX_EXPANDED:,} nodes"
            )
        qualified = qualify(
            plain,
            dialect="spark",
            schema=schema_dict(schema),
            validate_qualify_columns=False,
            quote_identifiers=False,
            identify=False,
        )
        root = build_scope(qualified)
        if root is None:
            raise _Unknown("not a query")
        walker = _Walker(root, known)
        names = tuple(qualified.named_selects) if isinstance(qualified, exp.Query) else ()
        if not names or any(not n for n in names):
            raise _Unknown("an output column has no name")
        signatures: dict[str, str] = {}
        deps: dict[str, frozenset[Dep]] = {}
        for name in names:
            if name not in signatures:
                signatures[name], deps[name] = walker.column(root, name)
        rows, row_deps = walker.rows(root)
    except _Unknown as exc:
        return Shape(unknown=str(exc))
    except Exception as exc:
        return Shape(unknown=f"lineage failed ({type(exc).__name__})")
    return Shape(tuple(dict.fromkeys(names)), signatures, deps, rows, row_deps)


def output_columns(model: Model) -> tuple[str, ...] | None:
    """The output column names a model's query names itself, or its declared ones (None:
    a star, or an unnamed column; :class:`~sluice.core.plan.outputs.OutputColumns`
    expands stars from the parents)."""
    if model.query_sql is None:
        return tuple(c.lower() for c, _ in model.columns) or None
    try:
        query = model.query
    except Exception:
        return None
    if query is None or any(_is_star(s) for s in query.selects):
        return None
    names = tuple(s.alias_or_name.lower() for s in query.selects)
    return names if all(names) else None


_CACHE: memo.QueryCache[tuple[str, tuple[tuple[str, tuple[str, ...] | None], ...]], Shape] = (
    memo.QueryCache()
)


def model_shape(model: Model, schema: Schema) -> Shape:
    """:func:`analyse` of a model's query, cached on the query and its parents' columns."""
    if model.query_sql is None:
        return Shape(unknown="it has no SQL query (Python or seed model)")
    key = (
        model.query_sql,
        tuple(sorted((t, None if c is None else tuple(c)) for t, c in schema.items())),
    )
    cached = _CACHE.get(key)
    if cached is not memo.MISSING:
        return cached
    try:
        query = model.query
    except Exception:
        query = None
    shape = analyse(query, schema) if query is not None else Shape(unknown="it does not parse")
    _CACHE.put(key, model.query_sql, shape)
    return shape


def compare(old: Shape, new: Shape) -> ColumnImpact:
    """The direct change from query ``old`` to query ``new``, column by column."""
    if old.unknown or new.unknown:
        return ColumnImpact(unknown=True, reason=new.unknown or old.unknown)
    added = tuple(n for n in new.names if n not in old.signatures)
    removed = tuple(n for n in old.names if n not in new.signatures)
    changed = tuple(
        n for n in new.names if n in old.signatures and old.signatures[n] != new.signatures[n]
    )
    rows_changed = old.rows != new.rows
    return ColumnImpact(
        added=added,
        removed=removed,
        changed=changed,
        affected=() if rows_changed else added + changed,
        rows_changed=rows_changed,
    )


def reads(shape: Shape, changed: Mapping[str, Exposure]) -> ColumnImpact:
    """What the changes of ``changed`` (upstream model -> exposure) do to query ``shape``."""
    relevant = {t: e for t, e in changed.items() if not e.empty}
    if not relevant:
        return ColumnImpact()
    unknown = sorted(t for t, e in relevant.items() if e.unknown)
    whole = tuple(f"{t}.{ROWS}" for t, e in sorted(relevant.items()) if e.rows and not e.unknown)
    if unknown:
        return ColumnImpact(
            reads=whole,
            rows_changed=bool(whole),
            unknown=True,
            reason=f"the column impact on {', '.join(unknown)} is unknown",
        )
    if whole:
        return ColumnImpact(reads=whole, rows_changed=True)
    if shape.unknown:
        return ColumnImpact(unknown=True, reason=shape.unknown)
    every = shape.all_deps
    missing = sorted(t for t in relevant if (t, ROWS) not in every)
    if missing:
        return ColumnImpact(
            unknown=True, reason=f"its query does not visibly read {', '.join(missing)}"
        )
    hit = {(t, c) for t, e in relevant.items() for c in e.columns}
    read = tuple(sorted(f"{t}.{c}" for t, c in every & hit))
    if shape.row_deps & hit:
        return ColumnImpact(reads=read, rows_changed=True)
    affected = tuple(n for n in shape.names if shape.deps[n] & hit)
    return ColumnImpact(reads=read, affected=affected)


def merge(own: ColumnImpact, upstream: ColumnImpact) -> ColumnImpact:
    """A directly modified model's own change together with what reaches it from upstream."""
    unknown = own.unknown or upstream.unknown
    rows_changed = own.rows_changed or upstream.rows_changed
    affected = () if rows_changed else tuple(dict.fromkeys(own.affected + upstream.affected))
    return ColumnImpact(
        added=own.added,
        removed=own.removed,
        changed=own.changed,
        reads=upstream.reads,
        affected=affected,
        rows_changed=rows_changed,
        unknown=unknown,
        reason=own.reason or upstream.reason,
    )


class Impacts:
    """The column impact of one plan's changes, model by model in topological order.

    ``new`` are the project's models, ``old`` the environment's; :meth:`direct` and
    :meth:`downstream` are called for changed models only, parents first.
    """

    def __init__(
        self, new: Mapping[str, Model], old: Mapping[str, Model], budget: int = BUDGET
    ) -> None:
        self.new = new
        self.old = old
        self.budget = budget
        self.exposures: dict[str, Exposure] = {}
        # Each side's output columns, stars expanded: what a child's query reads.
        self.outputs = {False: OutputColumns(new), True: OutputColumns(old)}
        self._shapes: dict[tuple[str, bool], Shape] = {}
        self.own: dict[str, ColumnImpact] = {}  # a direct change's own impact, unmerged

    def _schema(self, model: Model, old: bool) -> Schema:
        columns = self.outputs[old]
        return {parent: columns(parent) for parent in model.depends_on}

    def _shape(self, model: Model, old: bool) -> Shape:
        key = (model.name, old)
        if key not in self._shapes:
            if self.budget <= 0:
                return Shape(unknown="not analysed: the plan's lineage budget is spent")
            self.budget -= 1
            schema = self._schema(model, old)
            self._shapes[key] = model_shape(model, schema)
        return self._shapes[key]

    def _upstream(self, model: Model) -> dict[str, Exposure]:
        return {p: self.exposures[p] for p in model.depends_on if p in self.exposures}

    def direct(self, name: str, old: Model, new: Model) -> ColumnImpact:
        """The impact of directly modified model ``name`` (``old`` -> ``new``)."""
        if _other_inputs(old) != _other_inputs(new):
            # Kind, keys, declared columns, seed or stamp changed: its rows may differ.
            impact = ColumnImpact(rows_changed=True)
            new_shape = self._shape(new, old=False)
            old_shape = self._shape(old, old=True)
            if not (old_shape.unknown or new_shape.unknown):
                own = compare(old_shape, new_shape)
                impact = ColumnImpact(own.added, own.removed, own.changed, rows_changed=True)
        else:
            impact = compare(self._shape(old, old=True), self._shape(new, old=False))
        self.own[name] = impact
        upstream = self._upstream(new)
        if any(not e.empty for e in upstream.values()):
            impact = merge(impact, reads(self._shape(new, old=False), upstream))
        self.exposures[name] = Exposure.of(impact)
        return impact

    def only_adds_columns(self, name: str) -> bool:
        """Whether directly modified model ``name``'s own change (:meth:`direct` first)
        provably only adds output columns: none removed or changed, the same rows (no new
        filter, join, grouping, DISTINCT, generator...), everything else equal."""
        own = self.own.get(name)
        return (
            own is not None
            and bool(own.added)
            and not (own.removed or own.changed or own.rows_changed or own.unknown)
        )

    def downstream(self, name: str, model: Model) -> ColumnImpact:
        """The impact of the changes upstream on ``model``, whose own query is unchanged."""
        upstream = self._upstream(model)
        # Upstream rows or unknowns decide alone; only column-level changes need lineage.
        needs_lineage = any(e.columns for e in upstream.values()) and not any(
            e.rows or e.unknown for e in upstream.values()
        )
        shape = self._shape(model, old=False) if needs_lineage else Shape()
        impact = reads(shape, upstream)
        self.exposures[name] = Exposure.of(impact)
        return impact


def _other_inputs(model: Model) -> list[Any]:
    inputs = data_inputs(model)
    return inputs[:_QUERY_INDEX] + inputs[_QUERY_INDEX + 1 :]


def _parse(sql: str) -> exp.Expr:
    return sqlglot.parse_one(sql, read="spark")


def compare_queries(old_sql: str, new_sql: str, schema: Schema | None = None) -> ColumnImpact:
    """:func:`compare` of two Spark queries reading the tables of ``schema``."""
    return compare(analyse(_parse(old_sql), schema or {}), analyse(_parse(new_sql), schema or {}))


def downstream_impact(
    sql: str, changed: Mapping[str, Sequence[str]], schema: Schema | None = None
) -> ColumnImpact:
    """:func:`reads` of a Spark query; ``changed``: table -> changed columns (``"*"``: rows)."""
    exposures = {
        t: Exposure(frozenset(c for c in cols if c != ROWS), ROWS in cols)
        for t, cols in changed.items()
    }
    return reads(analyse(_parse(sql), schema or {}), exposures)
