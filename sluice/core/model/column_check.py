"""Columns checked at plan time (issue 42): every column a model's query names must be a
column of what it reads, as far as the project knows those columns (pure).

The check runs in two steps, so that a re-plan never parses a query again:

1. When a model file is parsed, :func:`extract` reads its query's scopes with sqlglot's
   scope machinery (CTEs, subqueries, derived tables, set operations, lateral views; a
   plain SELECT, one scope, is read by this module's own walk of the tree, as sqlglot
   reads it, at about half the cost: :func:`_walk`) into
   a small JSON text kept with the model (``Model.column_uses``, in the parse cache too):
   each scope's sources (a table by name, another scope, a list of columns, or unknown),
   its output columns (a star kept as a star), the names its SELECT gives, and every
   column it references, with its ``line:col`` in the model's file.
2. When the project is loaded, :func:`check` resolves them, parents before children:
   a table's columns are a model's (its query's output columns, stars expanded, an SCD
   type 2 kind's validity columns, and its declared ones), a seed's, an external
   table's declared ones, a Python model's declared ones. A column no source has is an
   error, with the closest names; a column two sources have is ambiguous, as Spark says.
   A model that may keep its table through a forward-only change (``forward_only``, or
   ``on_destructive_change`` other than ``error``: a plan may be forward-only as a
   whole) may keep there a column its query dropped: a column it lacks is left to the
   destructive-change check and to Spark.

What cannot be known is never an error: a source whose columns nobody declares (an
undeclared external table, a star over one, a table-valued function, a Python model
without columns, an expression without a name) turns off the check of the columns that
could be its. So do constructs this module does not model (PIVOT, UNPIVOT) and anything
it fails on. A qualifier that is no source (``s.field``) is read as a struct column and
checked only when it is clearly one. A query's names are compared case-insensitively, as
Spark does. Macro placeholders (``@start_ds``) are values, not columns. The work is
bounded (scopes, references, lookups and columns per query, errors per model), so a
hostile query costs little beside its parse; past a bound the model is not checked.

>>> import sqlglot
>>> from sluice.core.model.definition import Kind, KindName, Model
>>> sql = "SELECT o.id, o.amout FROM s.orders AS o"
>>> uses = extract(sqlglot.parse_one(sql, read="spark"), position=lambda line, col: (line, col))
>>> orders = Model("s.orders", Kind(KindName.EXTERNAL), columns=(("id", "INT"), ("amount", "INT")))
>>> child = Model("s.c", Kind(KindName.FULL), query_sql=sql, column_uses=uses, path="c.sql")
>>> report = check({"s.orders": orders, "s.c": child})
>>> print(report.errors[0])
c.sql:1:14: model s.c reads o.amout, which s.orders (o) does not have; did you mean 'amount'?
  hint: s.orders (o) has: id, amount
>>> report.checked, report.partial
(('s.c',), ())
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from sqlglot import exp
from sqlglot.optimizer.scope import Scope, build_scope

from sluice.core.errors import ModelError, did_you_mean
from sluice.core.model.definition import KindName, Model
from sluice.core.model.macro.lexer import PREFIX
from sluice.core.model.scan import LineIndex, find_code

ENABLED = True
"""Off only to measure what the check costs (``bench/plan_bench.py --column-check``)."""

FORMAT = 1
"""The version of :func:`extract`'s JSON: part of the parse cache's key."""

MAX_SCOPES = 500
"""Scopes (queries, CTEs, subqueries) of one query that are checked at most."""
MAX_REFERENCES = 20_000
"""Column references of one query that are checked at most."""
MAX_WORK = 200_000
"""References times the scopes each may be looked up in, of one query, at most."""
MAX_COLUMNS = 5_000
"""Columns one scope may return (a star over a star... doubles them): past it, unknown."""
MAX_ERRORS = 10
"""Errors reported per model (the rest are the same mistake, most of the time)."""
MAX_TEXT = 1_000
"""Characters of an error's message, and of its hint, at most (names are cut to 80)."""
MAX_NODES = 50_000
"""Nodes of one query's tree that are checked at most (counted before scoping it)."""
MAX_ANCESTRY = 1_000_000
"""The depths of one query's columns, summed, at most: sqlglot's scoping walks each
column's ancestors, so a deep tree (``a + a + ... + a``) costs its depth times its
columns (a 100 KB hostile model took minutes: red team); past it, the query is left to
Spark (a model 360 levels deep sums about 65,000)."""

# Columns a table format adds beside a table's own (Spark's file metadata, Iceberg's and
# Delta's change data): never declared, so never refused.
HIDDEN = frozenset(
    {"_metadata", "_file", "_pos", "_spec_id", "_partition", "_deleted", "_change_type",
     "_commit_version", "_commit_timestamp", "_row_id", "_commit_snapshot_id"}
)  # fmt: skip

Position = Callable[[int, int], tuple[int, int]]
"""A (line, col) of the parsed text -> (line, col) in the model's file."""

_encode = json.JSONEncoder(separators=(",", ":")).encode  # one encoder, not one a query


# -- step 1: what a query references (at parse time) -------------------------------------


def extract(
    tree: exp.Expr, located: exp.Expr | None = None, position: Position | None = None
) -> str | None:
    """What ``tree`` (a query as Spark runs it) references, as JSON text for
    :func:`check` (None: the query is not checked).

    ``position`` maps a (line, col) of the text ``located`` was parsed from to the model
    file's; ``located`` is ``tree`` itself (a Spark model) or the
    tree of the model's own dialect (the Spark tree was generated from it, so its nodes
    have no place in the file: a column is placed where that tree has the same name)."""
    if not ENABLED or not isinstance(tree, exp.Query):
        return None
    try:
        return _extract(tree, located, position)
    except Exception:  # RecursionError too: a query sqlglot cannot scope is not checked
        return None


# The kinds of node :func:`_walk` tells apart, found once per class (a dialect may define
# its own classes, so the table is filled as classes are met, with isinstance).
_PLAIN, _COLUMN, _COLUMN_LIKE, _PRIMITIVE, _TABLE, _LAMBDA, _SCOPING = range(7)
_SCOPING_TYPES = (
    exp.Query, exp.CTE, exp.With, exp.UDTF, exp.Pivot, exp.JoinHint, exp.TableColumn,
    exp.Comprehension, exp.Final, exp.DDL, exp.DML,
)  # fmt: skip
"""Nodes that open a scope of their own (a subquery, a CTE, a derived table, a set
operation, a table function, LATERAL VIEW), or that sqlglot's scoping reads in a way of
its own (PIVOT, join hints...): a query holding any, besides itself, is scoped by sqlglot."""
_KINDS: dict[type, int] = {}


def _kind(cls: type) -> int:
    if getattr(cls, "is_primitive", False):
        kind = _PRIMITIVE
    elif cls is exp.Column:
        kind = _COLUMN
    elif issubclass(cls, exp.Column):
        kind = _COLUMN_LIKE  # Pseudocolumn: a column for the bound, not for the scope
    elif issubclass(cls, exp.Table):
        kind = _TABLE
    elif issubclass(cls, exp.Lambda):
        kind = _LAMBDA
    elif issubclass(cls, _SCOPING_TYPES):
        kind = _SCOPING
    else:
        kind = _PLAIN
    _KINDS[cls] = kind
    return kind


_FROM_OR_JOIN = (exp.From, exp.Join)


@dataclass
class _Walked:
    """What :func:`_walk` read of a query within the bounds."""

    lambdas: bool  # whether it has a lambda (x -> x + 1)
    single: bool  # a SELECT with no other scope: sqlglot would scope it as one
    columns: list[exp.Column]  # its Column nodes, in sqlglot's walk order (when single)
    tables: list[exp.Table]  # the tables of its FROM and JOINs, in that order (when single)


def _walk(tree: exp.Expr) -> _Walked | None:
    """``tree`` read in one pass, depth first, in the order of sqlglot's own walk of a
    scope (a node, then its arguments in order): None if it has more than
    :data:`MAX_NODES` nodes or its columns' depths sum to more than :data:`MAX_ANCESTRY`
    (stopped at the first node past a bound). A primitive node (a name, a literal:
    sqlglot's ``is_primitive``, whose arguments are plain values) is counted and not
    looked into: nearly half the nodes of a query, and no children. The stack holds an
    iterator over each open node's arguments, so its length is the depth.

    It also says whether the query is one plain SELECT (``single``): no subquery, CTE,
    set operation, table function, LATERAL VIEW, PIVOT, join hint..., and every table a
    plain name in the FROM or a JOIN of the query itself. Then sqlglot's scoping makes
    exactly one scope of it, whose walk is this walk (nothing stops it), whose sources
    are those tables and whose columns are these Column nodes (:func:`_single_record`
    reads them as sqlglot's ``Scope`` would; the equivalence is held by a test over every
    model of the repository's projects)."""
    kinds = _KINDS
    nodes = ancestry = 0
    lambdas = False
    single = type(tree) is exp.Select
    columns: list[exp.Column] = []
    tables: list[exp.Table] = []
    stack: list[Iterator[exp.Expr]] = [iter((tree,))]
    push, pop = stack.append, stack.pop
    while stack:
        for node in stack[-1]:
            nodes += 1
            cls = type(node)
            try:
                kind = kinds[cls]
            except KeyError:
                kind = _kind(cls)
            if kind:
                if kind == _PRIMITIVE:
                    continue
                if kind <= _COLUMN_LIKE:  # a Column, or a Pseudocolumn
                    ancestry += len(stack) - 1
                    if ancestry > MAX_ANCESTRY:
                        return None
                    if kind == _COLUMN:
                        columns.append(node)  # type: ignore[arg-type]
                elif kind == _TABLE:
                    tables.append(node)  # type: ignore[arg-type]
                    if single:
                        single = _plain_table(node, tree)  # type: ignore[arg-type]
                elif kind == _LAMBDA:
                    lambdas = True
                elif node is not tree:
                    single = False
            if nodes > MAX_NODES:
                return None
            push(node.iter_expressions())
            break
        else:
            pop()
    if nodes > MAX_NODES:
        return None
    return _Walked(lambdas, single, columns, tables)


def _plain_table(table: exp.Table, select: exp.Expr) -> bool:
    """Whether ``table`` is a table by name in the FROM or a JOIN of ``select`` (no
    table function, no joins, laterals or pivots of its own)."""
    parent = table.parent
    args = table.args
    return (
        table.arg_key == "this"
        and isinstance(parent, _FROM_OR_JOIN)
        and parent.parent is select
        and isinstance(args.get("this"), exp.Identifier)
        and not (args.get("joins") or args.get("laterals") or args.get("pivots"))
    )


def _extract(
    tree: exp.Expr,
    located: exp.Expr | None,
    position: Position | None,
    scoped: bool = False,
) -> str | None:
    """``scoped``: read a plain SELECT with sqlglot's scoping too (what its own reading
    is held equal to, by a test)."""
    walked = _walk(tree)
    if walked is None:
        return None
    lambdas = walked.lambdas
    own = located is None or located is tree
    places = _places(located, position) if position and located is not None and not own else {}
    if walked.single and not scoped:
        assert isinstance(tree, exp.Select)
        record = _single_record(tree, walked, places if not own else None, position)
        if record is not None:
            if len(record["r"]) > MAX_REFERENCES:  # (one scope: its work is its references)
                return None
            return _encode({"f": FORMAT, "root": 0, "s": [record]})
    root = build_scope(tree)
    if root is None:
        return None
    scopes = list(root.traverse())
    if len(scopes) > MAX_SCOPES:
        return None
    index = {id(s): i for i, s in enumerate(scopes)}
    records: list[dict[str, Any]] = []
    total = work = 0
    for scope in scopes:
        record = _scope_record(scope, index, places if not own else None, position, lambdas)
        total += len(record["r"])
        # Each reference may be looked up in every enclosing scope.
        work += len(record["r"]) * (1 + sum(1 for _ in _enclosing(scope)))
        if total > MAX_REFERENCES or work > MAX_WORK:
            return None
        records.append(record)
    return _encode({"f": FORMAT, "root": index[id(root)], "s": records})


def _places(located: exp.Expr, position: Position) -> dict[Any, tuple[int, int]]:
    """Where each (qualifier, name) of ``located``'s columns is first written."""
    places: dict[Any, tuple[int, int]] = {}
    for column in located.find_all(exp.Column):
        where = _place(column, position)
        if where is not None:
            places.setdefault((column.table.lower(), column.name.lower()), where)
            places.setdefault(("", column.name.lower()), where)
    return places


def _place(
    column: exp.Column, position: Position, parts: list[exp.Expr] | None = None
) -> tuple[int, int] | None:
    """Where ``column`` starts in the file: its first part's token (sqlglot keeps the
    line and the column of a token's last character, and its offsets); ``parts``: its
    parts, when the caller has them."""
    for part in column.parts if parts is None else parts:
        meta = part.meta
        line, col = meta.get("line"), meta.get("col")
        if line is not None and col is not None:
            start = meta.get("start")
            width = meta["end"] - start if start is not None else 0
            return position(line, max(col - width, 1))
    return None


def _in_lambda(column: exp.Column) -> bool:
    """Whether ``column`` names a variable of a lambda around it (``x -> x + 1``)."""
    name = column.name.lower()
    node = column.find_ancestor(exp.Lambda)
    while node is not None:
        if any(p.name.lower() == name for p in node.expressions):
            return True
        node = node.find_ancestor(exp.Lambda)
    return False


def _scope_record(
    scope: Scope,
    index: Mapping[int, int],
    places: Mapping[Any, tuple[int, int]] | None,
    position: Position | None,
    lambdas: bool = True,
) -> dict[str, Any]:
    """One scope as :func:`check` reads it (``lambdas``: whether the query has any, so
    whether a column may be a lambda's variable)."""
    expression = scope.expression
    joined = isinstance(expression, exp.Select) and expression.args.get("joins")
    left: int | None = None
    if isinstance(expression, exp.SetOperation):
        first = expression.left
        found = next((s for s in scope.set_operation_scopes if s.expression is first), None)
        left = index[id(found)] if found is not None else -1
    return _record(
        expression,
        index.get(id(scope.parent), -1) if scope.parent is not None else -1,
        # What FROM, JOIN and LATERAL VIEW name (a CTE the query does not select from is
        # among sqlglot's sources too, but no column is resolved in it).
        {name: source for name, (_, source) in scope.selected_sources.items()},
        scope.semi_or_anti_join_tables if joined else (),
        index,
        lambda: (
            bool(scope.pivots)
            or any(
                isinstance(node, exp.Expr) and node.args.get("pivots")
                for node, _ in scope.selected_sources.values()
            )
        ),
        left,
        lambda: _own_columns(scope),
        lambda: _visible(scope),
        places,
        position,
        lambdas,
    )


def _single_record(
    select: exp.Select,
    walked: _Walked,
    places: Mapping[Any, tuple[int, int]] | None,
    position: Position | None,
) -> dict[str, Any] | None:
    """The one scope of a plain SELECT (:func:`_walk`'s ``single``) as :func:`_scope_record`
    makes it from sqlglot's scope, read without building that scope: its sources are its
    tables by name (or alias) but a LEFT SEMI / ANTI JOIN's, and its columns those of
    ``Scope.columns`` (:func:`_scope_column`). None: two tables of one name (sqlglot
    renames one, then refuses the query), left to sqlglot."""
    tables = walked.tables
    names = [table.alias_or_name for table in tables]
    if len(set(names)) != len(names):
        return None
    semi = {name for table, name in zip(tables, names, strict=True) if _semi_or_anti(table)}
    sources = {name: table for table, name in zip(tables, names, strict=True) if name not in semi}
    star = exp.Star
    named: list[set[str]] = []  # the SELECT's output names, read for the first that needs them
    columns = [
        column
        for column in walked.columns
        if not isinstance(column.args.get("this"), star) and _scope_column(column, select, named)
    ]
    return _record(
        select,
        -1,
        sources,
        semi if select.args.get("joins") else (),
        {},
        lambda: False,  # a PIVOT is no plain SELECT
        None,
        lambda: columns,
        lambda: {name.lower() for name in sources},
        places,
        position,
        walked.lambdas,
    )


def _semi_or_anti(table: exp.Table) -> bool:
    parent = table.parent
    return isinstance(parent, exp.Join) and parent.is_semi_or_anti_join


_CLAUSES = (
    exp.Select, exp.Qualify, exp.Order, exp.Cluster, exp.Having, exp.Hint, exp.Table,
    exp.Star, exp.Distinct,
)  # fmt: skip


def _scope_column(column: exp.Column, select: exp.Select, named: list[set[str]]) -> bool:
    """Whether sqlglot's ``Scope.columns`` of ``select`` (its only scope) lists ``column``:
    a qualified column always; an unqualified one unless the nearest clause around it is
    a HAVING, QUALIFY or hint (where it may be an alias of the SELECT), an ORDER BY,
    CLUSTER BY or DISTINCT ON of the SELECT itself naming one of its outputs, a table
    function, or a star's EXCEPT list. ``named``: the SELECT's output names, once read."""
    if column.text("table"):
        return True
    clause = column.find_ancestor(*_CLAUSES)
    if clause is None or isinstance(clause, exp.Select):
        return True
    if isinstance(clause, exp.Table):
        return not isinstance(clause.this, exp.Func)
    if isinstance(clause, exp.Order | exp.Cluster | exp.Distinct):
        parent = clause.parent
        if isinstance(parent, exp.Window | exp.WithinGroup) or not isinstance(parent, exp.Select):
            return True
        if not named:
            named.append(set(select.named_selects))
        return column.name not in named[0]
    if isinstance(clause, exp.Star):
        return column.arg_key != "except_"
    return False


def _record(
    expression: exp.Expr,
    parent: int,
    selected: Mapping[str, object],
    semi_names: Iterable[str],
    index: Mapping[int, int],
    pivoted: Callable[[], bool],
    left: int | None,
    own_columns: Callable[[], list[exp.Column]],
    visible_names: Callable[[], set[str]],
    places: Mapping[Any, tuple[int, int]] | None,
    position: Position | None,
    lambdas: bool,
) -> dict[str, Any]:
    """A scope's record: ``selected``, its sources by name; ``semi_names``, those of its
    LEFT SEMI / ANTI JOINs; ``left``, a set operation's left side's scope; the scope's own
    columns and the names of the sources it and the scopes around it select from, read
    when needed."""
    semi = {n.lower() for n in semi_names}
    sources: dict[str, list[Any]] = {}
    for name, source in selected.items():
        sources[name.lower()] = _source(source, index, name.lower() in semi)
    record: dict[str, Any] = {"p": parent, "s": sources, "o": None, "n": [], "r": []}
    if left is not None:
        record["u"] = left
    elif isinstance(expression, exp.Select):
        record["o"] = _outputs(expression)
        record["n"] = sorted(
            {p.alias.lower() for p in expression.expressions if isinstance(p, exp.Alias)}
        )
        joins = expression.args.get("joins") or []
        if any(j.args.get("using") or j.method.upper() == "NATURAL" for j in joins):
            record["j"] = 1
    if pivoted():
        record["x"] = 1  # PIVOT / UNPIVOT reshape their source: not modelled
        record["o"] = None
        return record
    visible: set[str] | None = None  # computed for the first qualified column
    seen: set[int] = set()
    references = record["r"]
    star = exp.Star
    for column in own_columns():
        key = id(column)
        args = column.args
        this = args.get("this")
        if key in seen or isinstance(this, star):
            continue
        seen.add(key)
        table = args.get("table")
        if table:
            if visible is None:
                visible = visible_names()
            if this and not (args.get("db") or args.get("catalog")):
                parts = [table, this]  # table.column (its parts): _qualified's reading, inline
                first = table.name.lower()
                ref = (first, this.name.lower(), 1) if first in visible else ("", first, 0)
            else:
                parts = column.parts
                ref = _qualified(parts, visible)
        else:
            parts = None
            ref = ("", column.name.lower(), 1)
        if ref[1].startswith(PREFIX):
            continue
        if lambdas and not ref[0] and _in_lambda(column):
            continue  # a lambda's variable: transform(xs, x -> x + 1)
        if places is not None:
            line, col = places.get((column.table.lower(), column.name.lower()), (0, 0))
        elif position is None:
            line = col = 0
        else:
            where = _place(column, position, parts)
            line, col = where if where is not None else (0, 0)
        references.append([ref[0], ref[1], ref[2], line, col])
    return record


def _own_columns(scope: Scope) -> list[exp.Column]:
    """The columns written in this scope itself, as sqlglot's ``Scope.columns`` keeps
    them (not a SELECT alias named in ORDER BY, nor an unqualified name in HAVING or
    QUALIFY, which may be one), without those of its subqueries that it also lists (a
    subquery's columns are resolved in the subquery, then outwards)."""
    scope.columns  # noqa: B018 (collects the scope's columns)
    raw = getattr(scope, "_raw_columns", None)
    if raw is None:
        raise LookupError("sqlglot's Scope has no _raw_columns")
    own = {id(c) for c in raw}
    return [c for c in scope.columns if id(c) in own]


def _source(source: object, index: Mapping[int, int], semi: bool) -> list[Any]:
    """A source as ``["t", table, semi]``, ``["q", scope]``, ``["c", columns]`` or ``["?"]``."""
    if isinstance(source, exp.Table):
        if not isinstance(source.this, exp.Identifier) or source.name.startswith(PREFIX):
            return ["?"]  # a table-valued function, @this_model...
        parts = [p.name.lower() for p in source.parts]
        name = ".".join(parts[-3:] if len(parts) == 3 and parts[0] else parts[-2:])
        return ["t", name, 1 if semi else 0]
    if isinstance(source, Scope):
        aliased = _alias_columns(source.expression)
        if aliased:
            return ["c", aliased]
        if isinstance(source.expression, exp.Query) and id(source) in index:
            return ["q", index[id(source)]]
    return ["?"]


def _alias_columns(expression: exp.Expr) -> list[str]:
    """The column names an alias gives a source: ``AS t(a, b)``, ``c(a, b) AS (...)``,
    ``LATERAL VIEW explode(x) t AS a``."""
    holder: exp.Expr = expression
    if not isinstance(expression, exp.Lateral | exp.Values) and isinstance(
        expression.parent, exp.Subquery | exp.CTE
    ):
        holder = expression.parent
    alias = holder.args.get("alias")
    if isinstance(alias, exp.TableAlias):
        return [c.name.lower() for c in alias.columns]
    return []


_NAMED = (exp.Alias, exp.Column, exp.Dot)
"""The projections whose name is the output's (any other is named by Spark)."""


def _outputs(select: exp.Select) -> list[Any] | None:
    """A SELECT's output columns: names, and ``["*", qualifier, excepted]`` for a star
    (None: a column whose name Spark makes up, e.g. ``a + 1``)."""
    found: list[Any] = []
    for projection in select.expressions:
        column = isinstance(projection, exp.Column)
        star = projection.this if column else projection
        if isinstance(star, exp.Star):
            qualifier = projection.table.lower() if column else ""
            excepted = [c.name.lower() for c in star.args.get("except_") or []]
            found.append(["*", qualifier, excepted])
            continue
        name = projection.output_name if column or isinstance(projection, _NAMED) else ""
        if not name:
            return None
        found.append(name.lower())
    return found


def _qualified(column_parts: list[exp.Expr], names: set[str]) -> tuple[str, str, int]:
    """(qualifier, column, strict) of a qualified column reference (its parts: an
    unqualified one is ``("", name, 1)``); strict 0: the qualifier is no source, so the
    first part is read as a struct column (``s.field``) and only checked when the sources
    clearly have or lack it."""
    parts = [p.name.lower() for p in column_parts]
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] in names:
            return (parts[i], parts[i + 1], 1)
    return ("", parts[0], 0)


def _enclosing(scope: Scope) -> Iterator[Scope]:
    """The scopes around ``scope``, innermost first."""
    current = scope.parent
    while current is not None:
        yield current
        current = current.parent


def _visible(scope: Scope) -> set[str]:
    """The names of the sources ``scope`` and the scopes around it select from."""
    names = {n.lower() for n in scope.selected_sources}
    for outer in _enclosing(scope):
        names.update(n.lower() for n in outer.selected_sources)
    return names


# -- step 2: resolving them (at load time) ------------------------------------------------


@dataclass(frozen=True)
class Report:
    """What :func:`check` found: its errors, the models whose every column it resolved
    (``checked``), those where some columns could not be (``partial``: a source of
    unknown columns), and those it did not check (``skipped``: no query, a Python model,
    a query it cannot read or past a bound)."""

    errors: tuple[ModelError, ...] = ()
    checked: tuple[str, ...] = ()
    partial: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Columns:
    names: tuple[str, ...]
    exact: bool  # exactly these (an ambiguity is reported only between exact ones)
    open: bool = False  # its table may hold more (a column it lacks is no error)


def check(models: Mapping[str, Model], texts: Mapping[str, str] | None = None) -> Report:
    """Resolve every model's column references against its sources' known columns.

    ``models`` in dependency order (parents first; a parent later is unknown);
    ``texts``: a file's text by path, to place a column the parse could not place (a
    model in a dialect other than Spark's)."""
    if not ENABLED:
        return Report()
    known: dict[str, _Columns | None] = {}
    errors: list[ModelError] = []
    checked: list[str] = []
    partial: list[str] = []
    skipped: list[str] = []
    for name, model in models.items():
        uses = decode(model.column_uses) if model.query_sql else None
        outputs: tuple[str, ...] | None = None
        resolver = None
        if uses is None:
            if model.query_sql is not None or model.kind.name not in (
                KindName.EXTERNAL,
                KindName.SEED,
            ):
                skipped.append(name)
        else:
            resolver = _Resolver(uses, known)
            try:
                outputs = resolver.outputs(uses["root"])
                problems = resolver.problems()
            except Exception:  # a bug here must never block a plan: not checked
                skipped.append(name)
                problems = []
                outputs = None
            else:
                (partial if resolver.unresolved else checked).append(name)
            errors += [_error(model, p, texts) for p in problems[:MAX_ERRORS]]
        exact = resolver is None or not resolver.inexact
        # A forward-only change keeps the table and a column the query dropped with it
        # (on_destructive_change decides, and a plan may be forward-only as a whole):
        # such a model's table may have columns its query no longer has.
        widened = model.forward_only or model.on_destructive_change != "error"
        widened = widened or (resolver is not None and resolver.widened)
        scd = model.kind.scd
        if outputs is not None and scd is not None:  # the history's validity columns
            outputs += tuple(
                c.lower() for c in (scd.valid_from_name, scd.valid_to_name) if c not in outputs
            )
        merged = _merge(outputs, tuple(c.lower() for c, _ in model.columns), exact)
        known[name] = replace(merged, open=True) if merged is not None and widened else merged
    return Report(tuple(errors), tuple(checked), tuple(partial), tuple(skipped))


def decode(text: str | None) -> dict[str, Any] | None:
    """:func:`extract`'s JSON read back (None: none, or of another format)."""
    if not text:
        return None
    try:
        found = json.loads(text)
    except ValueError:
        return None
    return found if isinstance(found, dict) and found.get("f") == FORMAT else None


def _merge(
    outputs: tuple[str, ...] | None, declared: tuple[str, ...], exact: bool
) -> _Columns | None:
    """A model's columns: its query's, and any it declares (either alone is exact)."""
    if outputs is None:
        return _Columns(declared, True) if declared else None
    if not declared or set(declared) == set(outputs):
        return _Columns(outputs, exact)
    return _Columns(outputs + tuple(c for c in declared if c not in outputs), False)


@dataclass(frozen=True)
class _Problem:
    what: str  # "unknown" | "ambiguous"
    qualifier: str
    column: str
    line: int
    col: int
    sources: tuple[tuple[str, str, tuple[str, ...]], ...]  # (alias, described, columns)


class _Resolver:
    """One model's references resolved against the known columns of the tables."""

    def __init__(self, uses: Mapping[str, Any], known: Mapping[str, _Columns | None]) -> None:
        self.scopes: list[dict[str, Any]] = uses["s"]
        self.known = known
        self.memo: dict[int, tuple[str, ...] | None] = {}
        self.open: set[int] = set()
        self.unresolved = False
        self.inexact = False  # a star took columns not exactly known
        self.widened = False  # a star took the columns of a table that may have more

    def outputs(self, index: int) -> tuple[str, ...] | None:
        """The output columns of scope ``index`` (None: not known)."""
        if index in self.memo:
            return self.memo[index]
        if index in self.open or not 0 <= index < len(self.scopes):
            return None
        self.open.add(index)
        scope = self.scopes[index]
        found: tuple[str, ...] | None
        if "u" in scope:
            found = self.outputs(scope["u"])
        elif scope["o"] is None:
            found = None
        else:
            found = self._expand(scope)
        self.open.discard(index)
        self.memo[index] = found
        return found

    def _expand(self, scope: Mapping[str, Any]) -> tuple[str, ...] | None:
        """A SELECT's output names, each star expanded from its sources."""
        names: list[str] = []
        for item in scope["o"]:
            if isinstance(item, str):
                names.append(item)
                continue
            _, qualifier, excepted = item
            if qualifier:
                aliases = [qualifier]
            else:  # a LEFT SEMI / ANTI JOIN's table adds no columns to a plain star
                aliases = [a for a, s in scope["s"].items() if not (s[0] == "t" and s[2])]
            for alias in aliases:
                spec = scope["s"].get(alias)
                columns = self.source_columns(spec) if spec is not None else None
                if columns is None:
                    return None
                if not columns.exact:
                    self.inexact = True
                if columns.open:
                    self.widened = True
                names += [c for c in columns.names if c not in excepted]
            if len(names) > MAX_COLUMNS:
                return None
        return tuple(names) or None

    def source_columns(self, spec: list[Any]) -> _Columns | None:
        kind = spec[0]
        if kind == "t":
            return self.known.get(spec[1])
        if kind == "c":
            return _Columns(tuple(spec[1]), True)
        if kind == "q":
            found = self.outputs(spec[1])
            return None if found is None else _Columns(found, not self.inexact, self.widened)
        return None

    def problems(self) -> list[_Problem]:
        found: list[_Problem] = []
        for index, scope in enumerate(self.scopes):
            if scope.get("x"):
                if scope["r"]:
                    self.unresolved = True
                continue
            for qualifier, column, strict, line, col in scope["r"]:
                if column in HIDDEN:
                    continue
                problem = self._resolve(index, qualifier, column, bool(strict), line, col)
                if problem is not None:
                    found.append(problem)
        return found

    def _chain(self, index: int) -> Iterable[dict[str, Any]]:
        seen = 0
        while 0 <= index < len(self.scopes) and seen <= len(self.scopes):
            yield self.scopes[index]
            index = self.scopes[index]["p"]
            seen += 1

    def _resolve(
        self, index: int, qualifier: str, column: str, strict: bool, line: int, col: int
    ) -> _Problem | None:
        if qualifier:  # the innermost scope around that names it (as _chain, inline)
            scopes, seen = self.scopes, 0
            while 0 <= index < len(scopes) and seen <= len(scopes):
                spec = scopes[index]["s"].get(qualifier)
                if spec is None:
                    index = scopes[index]["p"]
                    seen += 1
                    continue
                columns = self.source_columns(spec)
                if columns is None:
                    self.unresolved = True
                    return None
                if column in columns.names:
                    return None
                if columns.open:
                    self.unresolved = True
                    return None
                return _Problem(
                    "unknown", qualifier, column, line, col,
                    ((qualifier, self._describe(qualifier, spec), columns.names),),
                )  # fmt: skip
            self.unresolved = True  # sqlglot saw a source the scopes do not hold
            return None
        first = True
        for scope in self._chain(index):
            if first and column in scope["n"]:
                return None  # an alias of the same SELECT (Spark's lateral column alias)
            having: list[str] = []
            unknown = False
            for alias, spec in scope["s"].items():
                columns = self.source_columns(spec)
                if columns is None:
                    unknown = True
                elif column in columns.names:
                    having.append(alias)
                elif columns.open:
                    unknown = True
            if having:
                exact = [
                    a for a in having
                    if (c := self.source_columns(scope["s"][a])) is not None and c.exact
                    and not (scope["s"][a][0] == "t" and scope["s"][a][2])
                ]  # fmt: skip
                if first and len(exact) > 1 and not scope.get("j") and not unknown:
                    return _Problem(
                        "ambiguous", "", column, line, col,
                        tuple((a, self._describe(a, scope["s"][a]), ()) for a in exact),
                    )  # fmt: skip
                return None
            if unknown:
                self.unresolved = True
                return None
            first = False
        if not strict:
            self.unresolved = True  # a qualifier that is no source and no column
            return None
        # Named: the tables of the innermost query that reads any (a correlated name's
        # outer tables are looked in too, but are seldom what was meant).
        nearest: dict[str, list[Any]] = next(
            (scope["s"] for scope in self._chain(index) if scope["s"]), {}
        )
        sources = [
            (alias, self._describe(alias, spec), columns.names)
            for alias, spec in nearest.items()
            if (columns := self.source_columns(spec)) is not None
        ]
        if not sources:
            self.unresolved = True  # no FROM at all: not a column this check can place
            return None
        return _Problem("unknown", "", column, line, col, tuple(sources))

    def _describe(self, alias: str, spec: list[Any]) -> str:
        if spec[0] == "t":
            return spec[1] if spec[1].split(".")[-1] == alias else f"{spec[1]} ({alias})"
        if spec[0] == "q":
            return f"the CTE or subquery {alias}" if alias else "the subquery"
        return alias or "the lateral view"


def _error(model: Model, problem: _Problem, texts: Mapping[str, str] | None) -> ModelError:
    line, col = _where(model, problem, texts)
    shown = _short(f"{problem.qualifier}.{problem.column}" if problem.qualifier else problem.column)
    if problem.what == "ambiguous":
        names = " and ".join(_short(d) for _, d, _ in problem.sources[:4])
        more = f" (and {len(problem.sources) - 4} more)" if len(problem.sources) > 4 else ""
        return ModelError(
            _short(
                f"model {model.name} reads column '{shown}', which is ambiguous: {names}{more} "
                "both have it",
                MAX_TEXT,
            ),
            path=model.path,
            line=line or model.line,
            col=col or None,
            hint=_short(
                "qualify it: "
                + " or ".join(f"{a}.{problem.column}" for a, _, _ in problem.sources if a),
                MAX_TEXT,
            ),
        )
    choices = [c for _, _, cols in problem.sources for c in cols]
    close = did_you_mean(problem.column, choices, n=3)
    if problem.qualifier:
        what = f"model {model.name} reads {shown}, which {problem.sources[0][1]} does not have"
    else:
        named = ", ".join(d for _, d, _ in problem.sources[:4])
        what = f"model {model.name} reads column '{shown}', which none of {named} has"
        if len(problem.sources) == 1:
            what = f"model {model.name} reads column '{shown}', which {named} does not have"
    hint = "; ".join(f"{d} has: {_listed(cols)}" for _, d, cols in problem.sources[:3] if cols)
    return ModelError(
        _short(what + (f"; {close}" if close else ""), MAX_TEXT),
        path=model.path,
        line=line or model.line,
        col=col or None,
        hint=_short(hint, MAX_TEXT) or None,
    )


def _short(text: str, most: int = 80) -> str:
    """``text`` cut to ``most`` characters (a name a query spells may be of any length)."""
    return text if len(text) <= most else text[: most - 3] + "..."


def _listed(columns: tuple[str, ...], most: int = 12) -> str:
    shown = ", ".join(_short(c) for c in columns[:most])
    return shown + (f" and {len(columns) - most} more" if len(columns) > most else "")


def _where(model: Model, problem: _Problem, texts: Mapping[str, str] | None) -> tuple[int, int]:
    """Where the column is written in the model's file. The parse kept the line and column
    of the text it read, the file's but for macros (``@start_ds`` is read as a longer
    name): the column's spelling in the file on that line (the nearest), else the first
    after the MODEL header; else what the parse kept; (0, 0): nowhere known."""
    text = (texts or {}).get(model.path)
    if not text:
        return problem.line, problem.col
    lines = LineIndex(text)
    start = sum(len(t) + 1 for t in text.split("\n")[: max(model.line - 1, 0)])
    parts = [problem.qualifier, problem.column] if problem.qualifier else [problem.column]
    spelled = r"\s*\.\s*".join(re.escape(p) for p in parts)
    found = [
        lines.position(m.start("hit"))
        for m in find_code(text, rf"(?<![\w.])(?i:{spelled})(?!\w)", start)
        if not re.search(r"(?i)\bAS\s*$", text[max(0, m.start("hit") - 8) : m.start("hit")])
    ]
    if not found:
        return problem.line, problem.col
    same = [f for f in found if f[0] == problem.line]
    if same:
        return min(same, key=lambda f: abs(f[1] - problem.col))
    return found[0]
