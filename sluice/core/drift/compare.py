"""Drift: what Sluice recorded of an environment held against what the catalog holds
(pure: no Spark, no state; :mod:`sluice.core.drift.recorded` and
:mod:`sluice.core.drift.catalog` give the two sides).

Each difference names the model, the object (view or table), what differs, since when if
the catalog says (a definition's last change, a file's write), and how ``sluice drift
--repair`` would mend it (``repoint``: make the view again; ``rebuild``: drop the table
and build it again from the model's query; ``none``: by hand). The kinds:

- ``view_missing``, ``view_changed`` (its query is not the one Sluice made),
  ``view_replaced`` (something else than a view holds its name);
- ``table_missing``, ``table_not_sluices`` (no mark of this version: made again outside
  Sluice), ``columns`` (added, removed or retyped), ``data`` (rows or files other than
  Sluice's last write left, or files written after it), ``intervals`` (rows outside the
  intervals recorded, or a recorded span without any);
- ``unreadable``: the catalog could not say.

A catalog's text (a view's query, a column's name) was written by whoever changed it,
maybe outside Sluice: it is kept as data here, and each output escapes it (the CLI's
terminal text, the forge's Markdown).

Example (a view redefined by hand, the rest as Sluice left it)::

    >>> from sluice.core.drift.recorded import RecordedEnvironment, RecordedModel
    >>> model = RecordedModel("s.a", "FULL", "v1", "s.a", "SELECT * FROM sluice__s.s__a__v1",
    ...     "sluice__s.s__a__v1", False, "s.a@v1", None, ("id",), (), None, (), None, True)
    >>> recorded = RecordedEnvironment("prod", "p1", 1_000, None, (model,))
    >>> view = {"name": "s.a", "exists": True, "type": "VIEW", "text": "SELECT 1 AS id",
    ...     "ddl_ms": 5_000, "error": None}
    >>> table = {"name": "sluice__s.s__a__v1", "exists": True, "type": "MANAGED",
    ...     "provider": "parquet", "mark": "s.a@v1", "columns": [["id", "int"]],
    ...     "expected": None, "rows": None, "bytes": None, "files": None, "newest_ms": None,
    ...     "ddl_ms": None, "source": "files", "partitions": None, "error": None}
    >>> report = compare(recorded, Catalog({"s.a": view}, {table["name"]: table}), now=9_000)
    >>> [(d.model, d.kind, d.since, d.repair) for d in report.differences]
    [('s.a', 'view_changed', 5000, 'repoint')]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from sluice.core.drift.catalog import Catalog
from sluice.core.drift.recorded import RecordedEnvironment, RecordedModel
from sluice.core.intervals import Interval
from sluice.core.plan.plan import iso
from sluice.core.spark.results import InspectedTable, InspectedView
from sluice.core.timeutil import format_range, to_ms
from sluice.core.words import plural

WRITE_SLACK_MS = 5_000
"""A file written at most this long after Sluice's last recorded write of its table is
still taken as that write's (the storage's clock and the service's may differ by as much;
the measurement that records a write is taken after its files are written)."""

SHOWN = 5
"""Values named in one difference at most (columns, partitions), then "and N more"."""

VIEW_KINDS = ("view_missing", "view_changed", "view_replaced")
TABLE_KINDS = ("table_missing", "table_not_sluices", "columns", "data", "intervals")


@dataclass(frozen=True)
class Difference:
    """One way the catalog differs from what Sluice recorded.

    ``detail`` holds catalog text (escape it for where it goes); ``since``: epoch ms the
    catalog dates it to (None: not known); ``repair``: ``repoint``, ``rebuild`` or
    ``none``."""

    model: str
    object: str
    kind: str
    detail: str
    since: int | None = None
    repair: str = "none"

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "object": self.object,
            "kind": self.kind,
            "detail": self.detail,
            "since": iso(self.since) if self.since is not None else None,
            "since_ms": self.since,
            "repair": self.repair,
        }


@dataclass(frozen=True)
class DriftReport:
    """The differences of one environment, the models checked, and how each table's
    last write was read (``sources``: ``files``, ``delta``, ``catalog``, ``none`` ->
    how many tables)."""

    environment: str
    plan_id: str
    checked_at: int
    models: int
    differences: tuple[Difference, ...]
    sources: dict[str, int] = field(default_factory=dict)

    @property
    def drifted(self) -> bool:
        return bool(self.differences)

    @property
    def drifted_models(self) -> tuple[str, ...]:
        return tuple(sorted({d.model for d in self.differences}))

    def to_json(self) -> dict[str, Any]:
        return {
            "environment": self.environment,
            "plan_id": self.plan_id,
            "checked_at": iso(self.checked_at),
            "drift": self.drifted,
            "models_checked": self.models,
            "drifted_models": list(self.drifted_models),
            "differences": [d.to_json() for d in self.differences],
            "last_write_read_from": dict(sorted(self.sources.items())),
        }


def compare(recorded: RecordedEnvironment, catalog: Catalog, *, now: int) -> DriftReport:
    """Every difference between ``recorded`` and ``catalog``, model by model."""
    found: list[Difference] = []
    sources: dict[str, int] = {}
    checked: set[str] = set()
    for model in recorded.models:
        view = catalog.views.get(model.view)
        found += _view(model, view, recorded.applied_ts)
        if model.table_is_view:
            found += _physical_view(model, catalog.views.get(model.table))
            continue
        table = catalog.tables.get(model.table)
        if table is not None and model.table not in checked:
            sources[table["source"]] = sources.get(table["source"], 0) + 1
        checked.add(model.table)
        found += _table(model, table, view)
    return DriftReport(
        recorded.name, recorded.plan_id, now, len(recorded.models), tuple(found), sources
    )


# --- views ---------------------------------------------------------------------------------

UNPARSED = (SqlglotError, ValueError, RecursionError)
"""What parsing a catalog's view text may raise: a text anyone with the metastore wrote,
nested past the parser's depth too (red team, drift repair), is a view that does not parse,
never an error that stops the check and leaves its last (green) result standing."""


def canonical(sql: str) -> str | None:
    """``sql`` as one comparable text: parsed as Spark SQL, names lower-cased, written
    back with every identifier quoted (None: it does not parse as one statement).

    >>> canonical("select `A`  from Sluice__s.T") == canonical("SELECT a FROM sluice__s.t")
    True
    """

    def lower(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Identifier):
            return exp.Identifier(this=node.name.lower(), quoted=True)
        return node

    try:
        tree = sqlglot.parse_one(sql, read="spark")
        return None if tree is None else tree.transform(lower).sql("spark")
    except UNPARSED:
        return None


def _reads(sql: str) -> list[str]:
    """The tables ``sql`` reads, lower case (empty when it does not parse)."""
    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except UNPARSED:
        return []
    if tree is None:
        return []
    return sorted(
        {".".join(p.name.lower() for p in t.parts) for t in tree.find_all(exp.Table) if t.name}
    )


def null_filled(sql: str) -> set[str]:
    """The columns a view reads as ``CAST(NULL AS type)`` (an environment's view of a
    table a forward-only change kept: the table lacks them until a batch writes them).

    >>> sorted(null_filled("SELECT a, CAST(NULL AS INT) AS b FROM t"))
    ['b']
    """
    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except UNPARSED:
        return set()
    if not isinstance(tree, exp.Select):
        return set()
    names = set()
    for projection in tree.expressions:
        inner = projection.this if isinstance(projection, exp.Alias) else projection
        if isinstance(inner, exp.Cast) and isinstance(inner.this, exp.Null):
            names.add(projection.alias_or_name.lower())
    return names


def _same_view(expected: str, text: str, table: str) -> bool:
    """Whether the view's ``text`` is ``expected``, or the same table's rows with some
    columns read as NULLs (the views step's ``fill``, outside prod)."""
    want, have = canonical(expected), canonical(text)
    if want is not None and want == have:
        return True
    return bool(null_filled(text)) and _reads(text) == [table.lower()]


def _view(model: RecordedModel, view: InspectedView | None, applied: int) -> list[Difference]:
    name = model.view
    if view is None or view["error"]:
        said = view["error"] if view is not None else "the catalog did not answer for it"
        return [Difference(model.name, name, "unreadable", f"view {name}: {said}")]
    if not view["exists"]:
        return [
            Difference(
                model.name,
                name,
                "view_missing",
                f"view {name} does not exist; Sluice made it to read {model.table}",
                repair="repoint",
            )
        ]
    since = view["ddl_ms"] if view["ddl_ms"] is not None and view["ddl_ms"] > applied else None
    if (view["type"] or "").upper() != "VIEW":
        return [
            Difference(
                model.name,
                name,
                "view_replaced",
                f"{name} is a {(view['type'] or 'table').lower()}, not the view Sluice made "
                f"(drop it by hand, then repair)",
                since,
            )
        ]
    text = view["text"] or ""
    if _same_view(model.view_sql, text, model.table):
        return []
    reads = _reads(text)
    what = (
        f"it reads {', '.join(reads)}"
        if reads and reads != [model.table.lower()]
        else "its query differs"
    )
    return [
        Difference(
            model.name,
            name,
            "view_changed",
            f"view {name} is not the one Sluice made: {what} (Sluice's: {model.view_sql}; "
            f"the catalog's: {_short(text)})",
            since,
            "repoint",
        )
    ]


def _physical_view(model: RecordedModel, view: InspectedView | None) -> list[Difference]:
    """A VIEW model's version is a view Sluice made: that it is there is checked."""
    if view is None or view["error"]:
        said = view["error"] if view is not None else "the catalog did not answer for it"
        return [Difference(model.name, model.table, "unreadable", f"{model.table}: {said}")]
    if not view["exists"]:
        return [
            Difference(
                model.name,
                model.table,
                "table_missing",
                f"the view {model.table} of version {model.version} does not exist",
                repair="rebuild",
            )
        ]
    return []


def _short(text: str, most: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= most else flat[: most - 1] + "…"


# --- tables --------------------------------------------------------------------------------


def _table(
    model: RecordedModel, table: InspectedTable | None, view: InspectedView | None
) -> list[Difference]:
    name = model.table
    rebuild = "rebuild" if model.restatable else "none"
    if table is None:
        said = "the catalog did not answer for it"
        return [Difference(model.name, name, "unreadable", f"table {name}: {said}")]
    if not table["exists"]:
        if table["error"]:
            return [Difference(model.name, name, "unreadable", f"table {name}: {table['error']}")]
        last = (
            f"; Sluice last wrote it at {iso(model.size.measured_ts)}"
            if model.size is not None
            else ""
        )
        return [
            Difference(
                model.name,
                name,
                "table_missing",
                f"table {name} of version {model.version} does not exist{last}",
                repair=rebuild,
            )
        ]
    found: list[Difference] = []
    if table["mark"] != model.mark:
        has = f"'{table['mark']}'" if table["mark"] is not None else "not set"
        found.append(
            Difference(
                model.name,
                name,
                "table_not_sluices",
                f"table {name} is not the one Sluice made for version {model.version}: its "
                f"sluice.created_by is {has} (made again outside Sluice)",
                table["ddl_ms"],
                rebuild,
            )
        )
    found += _columns(model, table, view, rebuild)
    found += _data(model, table, rebuild)
    found += _intervals(model, table, rebuild)
    if table["error"]:
        found.append(Difference(model.name, name, "unreadable", f"table {name}: {table['error']}"))
    return found


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:SHOWN])
    return shown + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


def _columns(
    model: RecordedModel, table: InspectedTable, view: InspectedView | None, rebuild: str
) -> list[Difference]:
    have = {name.lower(): kind for name, kind in table["columns"]}
    if not have:
        return []  # not read (its error says why)
    if table["expected"] is not None:
        want: dict[str, str | None] = {n.lower(): k for n, k in table["expected"]}
    elif model.declared:
        want = {n.lower(): None for n in model.declared}
    else:
        return []  # not known: not compared
    extra = {c.lower() for c in model.extra}
    filled = null_filled(view["text"] or "") if view is not None and view["exists"] else set()
    added = [f"{n} {k}" for n, k in have.items() if n not in want and n not in extra]
    removed = [n for n in want if n not in have and n not in filled]
    retyped = [
        f"{n} is {have[n]}, Sluice's query gives {k}"
        for n, k in want.items()
        if k is not None and n in have and have[n] != k
    ]
    parts = []
    if added:
        parts.append(f"{plural(len(added), 'column')} added ({_listed(added)})")
    if removed:
        parts.append(f"{plural(len(removed), 'column')} missing ({_listed(removed)})")
    if retyped:
        parts.append(f"{plural(len(retyped), 'column')} retyped ({_listed(retyped)})")
    if not parts:
        return []
    return [
        Difference(
            model.name,
            model.table,
            "columns",
            f"table {model.table}: " + "; ".join(parts),
            table["ddl_ms"],
            rebuild,
        )
    ]


def _data(model: RecordedModel, table: InspectedTable, rebuild: str) -> list[Difference]:
    size = model.size
    if size is None or table["source"] == "none":
        return []  # no write measured, or nothing read: not compared
    parts = []
    since = None
    if size.rows is not None and table["rows"] is not None and table["rows"] != size.rows:
        parts.append(
            f"it holds {plural(table['rows'], 'row')}, Sluice's last write left "
            f"{plural(size.rows, 'row')}"
        )
    newest = table["newest_ms"]
    if newest is not None and newest > size.measured_ts + WRITE_SLACK_MS:
        parts.append(
            f"it was written at {iso(newest)}, after Sluice's last write "
            f"({iso(size.measured_ts)}), read from its {_source(table['source'])}"
        )
        since = newest
    elif (
        table["source"] == "files"
        and table["bytes"] is not None
        and size.rows is not None
        and table["rows"] == size.rows
        and table["bytes"] != size.bytes
    ):
        parts.append(
            f"its files hold {table['bytes']} bytes, Sluice's last write left {size.bytes}"
        )
    if not parts:
        return []
    return [
        Difference(
            model.name, model.table, "data", f"table {model.table}: " + "; ".join(parts), since,
            rebuild,
        )
    ]  # fmt: skip


def _source(source: str) -> str:
    return {"files": "files", "delta": "Delta log", "catalog": "catalog statistics"}.get(
        source, source
    )


def _intervals(model: RecordedModel, table: InspectedTable, rebuild: str) -> list[Difference]:
    values = table["partitions"]
    if model.time_column is None or values is None:
        return []
    times: list[tuple[str, int]] = []
    for value in values:
        try:
            times.append((value, to_ms(value)))
        except ValueError:
            return []  # a time column Sluice cannot read as time: not compared
    outside = [v for v, ms in times if not _within(ms, model.intervals)]
    parts = []
    if outside:
        parts.append(
            f"rows for {plural(len(outside), 'time')} outside the intervals Sluice recorded "
            f"({_listed(outside)})"
        )
    if model.size is not None and model.size.rows:
        empty = [
            format_range(s, e)
            for s, e in model.intervals
            if not any(s <= ms < e for _, ms in times)
        ]
        if empty:
            parts.append(f"no rows in recorded {_listed(empty)}")
    if not parts:
        return []
    return [
        Difference(
            model.name,
            model.table,
            "intervals",
            f"table {model.table}: " + "; ".join(parts),
            repair=rebuild,
        )
    ]


def _within(ms: int, intervals: tuple[Interval, ...]) -> bool:
    return any(start <= ms < end for start, end in intervals)
