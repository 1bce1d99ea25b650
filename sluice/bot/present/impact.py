"""The impact table of the PR comment: one row per changed model, riskiest first, saying
how it changed, why (for a model changed downstream: which upstream change reaches it),
its rows before and after (from the table diff), the columns that changed, and whether
its table was built or reused; then the folded SQL diffs, as blocks of their own (never
inside a list item, so GitHub's Markdown keeps its structure).

Every name and value is escaped with :mod:`sluice.core.markdown` (cells with
``table=True``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sluice.core import markdown as md
from sluice.core.model.definition import Model
from sluice.core.plan.plan import ModelChange, Plan
from sluice.core.snapshot.snapshot import Category
from sluice.core.tablediff.result import TableDiffResult

MAX_LIST = 4
"""Names listed in one cell before "and N more"."""
MAX_DIFF_LINES = 120
TOP_ROWS = 12
"""Impact-table rows shown when there are more than :data:`SHORT_TABLE`: the riskiest,
then a line counting the rest by kind (the environment check lists them all)."""
SHORT_TABLE = 15
NAME_WIDTH = 40
"""Characters of a model's name shown in a table cell; a longer name is cut in its middle
(its end, often a number, tells models apart) and shown whole on hover."""
COLUMN_WIDTH = 32
"""The same for a column's name."""
COMPACT_FROM = 100_000
"""Row counts from this size on read compactly (``1.2M``): the rows column stays narrow."""

# Risk order: the rank of each kind of row, lowest first in the table.
RANK = {
    "removed": 0,
    "breaking": 1,
    "breaking-indirect": 2,
    "added": 3,
    "non-breaking": 4,
    "non-breaking-indirect": 5,
    "forward-only": 6,
    "forward-only-indirect": 7,
    "metadata": 8,
}
LABELS = {
    "removed": "**removed**",
    "breaking": "**breaking**",
    "breaking-indirect": "breaking, downstream",
    "added": "added",
    "non-breaking": "non-breaking",
    "non-breaking-indirect": "non-breaking, downstream",
    "forward-only": "forward-only",
    "forward-only-indirect": "forward-only, downstream",
    "metadata": "metadata only",
}


_DIGITS = re.compile(r"(\d+)")


def natural(name: str) -> tuple[Any, ...]:
    """The key that sorts names as people count: ``mart_2`` before ``mart_10``.

    >>> sorted(["s.mart_10", "s.mart_2", "s.Mart_1"], key=natural)
    ['s.Mart_1', 's.mart_2', 's.mart_10']
    """
    parts = _DIGITS.split(name)
    # Text at even places, numbers at odd ones: keys of any two names compare part by part.
    counted = tuple(int(p) if i % 2 else p.casefold() for i, p in enumerate(parts))
    return (counted, name)


def naturally(names: Iterable[str]) -> list[str]:
    """``names`` in natural order (:func:`natural`)."""
    return sorted(names, key=natural)


def short_name(name: str, width: int = NAME_WIDTH) -> str:
    """``name`` cut in its middle to ``width`` characters (plain text, not escaped).

    >>> short_name("analytics.customer_lifetime_value_by_region_and_segment_12", 30)
    'analytics.customer_…segment_12'
    """
    if len(name) <= width:
        return name
    tail = max(width // 3, 1)
    return name[: width - tail - 1] + "…" + name[-tail:]


def name_cell(name: str, width: int = NAME_WIDTH) -> str:
    """A model's name in a table cell: a code span, or, when longer than ``width``, cut
    in its middle with the whole name as the span's title (shown on hover)."""
    if len(name) <= width or "|" in name:
        return md.code(name, width, table=True)
    return f'<code title="{md.html(name)}">{md.html(short_name(name, width))}</code>'


def count(value: int | None) -> str:
    """A row count for the table: exact below :data:`COMPACT_FROM`, else compact.

    >>> [count(v) for v in (None, 99, 12_480, 123_456, -4_500_000, 12_345_678_901)]
    ['?', '99', '12,480', '123K', '-4.5M', '12.3B']
    """
    if value is None:
        return "?"
    if abs(value) < COMPACT_FROM:
        return f"{value:,}"
    for unit, scale in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if abs(value) >= scale:
            shown = value / scale
            digits = 0 if abs(shown) >= 100 else 1
            text = f"{shown:.{digits}f}".removesuffix(".0")
            return f"{text}{unit}"
    return f"{value:,}"  # pragma: no cover - below COMPACT_FROM


@dataclass(frozen=True)
class Row:
    """One changed model, as the table, the graph and the verdict see it."""

    name: str
    kind: str  # a key of RANK
    change: ModelChange | None
    diff: TableDiffResult | None
    not_compared: str | None  # why there is no table diff, when known
    upstream: tuple[str, ...] = ()  # its parents that change here (its data moves with them)
    language: str = "SQL"  # of a direct change's code: SQL, or Python (a Python model)

    @property
    def direct(self) -> bool:
        return not self.kind.endswith("-indirect")

    @property
    def destructive(self) -> bool:
        """It drops a column (by its code, or as its table diff finds)."""
        removed = getattr(_columns_of(self.change), "removed", ()) or ()
        return bool(removed) or (self.diff is not None and bool(self.diff.schema.removed))

    @property
    def rows_moved(self) -> int:
        """Rows that changed (only on one side, or differing), for ordering."""
        d = self.diff
        if d is None or d.identical:
            return 0
        return (d.source_only or 0) + (d.target_only or 0) + (d.differing_rows or 0)

    @property
    def size(self) -> int:
        """The table's rows (the larger side), for ordering."""
        d = self.diff
        return 0 if d is None else max(d.source_rows or 0, d.target_rows or 0)

    @property
    def moved(self) -> float:
        """How much of the table changed (0..1+), for ordering: biggest change first."""
        d = self.diff
        if d is None or d.identical:
            return 0.0
        changed = (d.source_only or 0) + (d.target_only or 0) + (d.differing_rows or 0)
        base = max(d.source_rows or 0, d.target_rows or 0, 1)
        return changed / base + (1.0 if d.schema.has_changes else 0.0)


def rows(
    plan: Plan,
    diffs: Mapping[str, TableDiffResult],
    not_compared: Mapping[str, str] | None = None,
) -> list[Row]:
    """Every changed model of ``plan``, riskiest first (:func:`risk`)."""
    why = dict(not_compared or {})
    out = [Row(n, "removed", None, None, None) for n in plan.removed]
    moved = {
        c.name for c in plan.directly_modified if c.category not in (Category.METADATA,)
    } | set(plan.added)
    # A parent rebuilt because a breaking change reached it moves this model's data too.
    moved |= {c.name for c in plan.indirectly_modified if c.category == Category.BREAKING}
    for change in plan.directly_modified:
        kind = change.category.value
        model = _model(plan, change.name)
        parents = model.depends_on if model is not None else ()
        upstream = tuple(p for p in parents if p in moved)
        out.append(
            Row(
                change.name,
                kind,
                change,
                diffs.get(change.name),
                why.get(change.name),
                upstream,
                _language(model),
            )
        )
    changed = moved | {c.name for c in plan.indirectly_modified}
    for change in plan.indirectly_modified:
        kind = f"{change.category.value}-indirect"
        if change.category == Category.METADATA:
            kind = "metadata"
        model = _model(plan, change.name)
        # Its own parents that change here (reached_by also names changes further up).
        parents = tuple(p for p in (model.depends_on if model else ()) if p in changed)
        out.append(
            Row(change.name, kind, change, diffs.get(change.name), why.get(change.name), parents)
        )
    out += [Row(n, "added", None, diffs.get(n), why.get(n)) for n in plan.added]
    out += [Row(n, "metadata", None, None, None) for n in plan.metadata_only]
    return sorted(out, key=risk)


def risk(row: Row) -> tuple[Any, ...]:
    """The order of rows: removed, then breaking and destructive (a dropped column) changes
    first, by kind (:data:`RANK`); within one, the most rows changed first, then the
    biggest share of the table, then the biggest table; then the name, naturally."""
    rank = RANK.get(row.kind, 9)
    if row.destructive:
        rank = min(rank, RANK["breaking"])
    return (rank, not row.destructive, -row.rows_moved, -row.moved, -row.size, natural(row.name))


def _model(plan: Plan, name: str) -> Model | None:
    try:
        return plan.snapshot(name).model
    except StopIteration:
        return None


def _language(model: Model | None) -> str:
    return "Python" if model is not None and model.python_code is not None else "SQL"


def _n(value: int | None) -> str:
    return count(value)


def row_change(row: Row) -> str:
    """The rows before and after, in a few words (plain text, no user input)."""
    d = row.diff
    if d is None:
        if row.kind == "added":
            return "new"
        if row.kind == "removed":
            return "dropped from prod"
        return "not compared" if row.not_compared or row.kind.startswith("breaking") else "-"
    if d.same_table:
        return "same table"
    text = f"{_n(d.source_rows)} → {_n(d.target_rows)}"
    if d.source_rows is not None and d.target_rows is not None:
        delta = d.target_rows - d.source_rows
        if delta:
            text += f" ({'+' if delta > 0 else ''}{count(delta)})"
    if d.identical:
        return text + ", identical"
    if d.differing_rows:
        text += f", {_n(d.differing_rows)} {'differs' if d.differing_rows == 1 else 'differ'}"
    return text


def short_change(row: Row) -> str:
    """The row change in a graph label: "-4 rows", "4 differ", "identical"."""
    d = row.diff
    if d is None:
        return {"added": "new", "removed": "removed"}.get(row.kind, "")
    if d.identical or d.same_table:
        return "identical"
    parts = []
    if d.source_rows is not None and d.target_rows is not None and d.target_rows != d.source_rows:
        delta = d.target_rows - d.source_rows
        sign = "+" if delta > 0 else ""
        parts.append(f"{sign}{count(delta)} row{'' if abs(delta) == 1 else 's'}")
    if d.differing_rows:
        parts.append(f"{_n(d.differing_rows)} {'differs' if d.differing_rows == 1 else 'differ'}")
    return ", ".join(parts) or "changed"


def _names(names: Sequence[str]) -> str:
    names = naturally(names)
    shown = ", ".join(name_cell(n) for n in names[:MAX_LIST])
    return shown + (f" and {len(names) - MAX_LIST} more" if len(names) > MAX_LIST else "")


def _columns_of(change: ModelChange | None) -> Any:
    return getattr(change, "columns", None) if change is not None else None


def _why(row: Row) -> str:
    columns = _columns_of(row.change)
    if row.kind == "removed":
        return "deleted from the project"
    if row.kind == "added":
        return "new model"
    if row.kind == "metadata":
        return "settings only, data unchanged"
    if row.direct:
        text = f"its {row.language} changed"
        if row.upstream:
            text += f", and it reads {_names(row.upstream)}, changed here too"
    else:
        reached = row.upstream or tuple(getattr(row.change, "reached_by", ()) or ())
        text = f"reads {_names(reached)}" if reached else "an upstream change reaches it"
        # "model.*" (its rows changed) says nothing the upstream name does not
        reads = tuple(r for r in getattr(columns, "reads", ()) or () if not r.endswith(".*"))
        if reads:
            text += f" (reads {_names(reads)})"
    if columns is not None and getattr(columns, "unknown", False):
        reason = getattr(columns, "reason", "") or "not known"
        text += f"; column lineage unknown: {md.text(reason, 60)}"
    return text


def _columns(row: Row) -> str:
    columns = _columns_of(row.change)
    parts = []
    if columns is not None:
        for sign, names in (
            ("+", getattr(columns, "added", ())),
            ("−", getattr(columns, "removed", ())),  # noqa: RUF001
            ("~", getattr(columns, "changed", ())),
            ("~", getattr(columns, "affected", ()) if not row.direct else ()),
        ):
            parts += [f"{sign}{name_cell(n, COLUMN_WIDTH)}" for n in names]
    if columns is not None and getattr(columns, "rows_changed", False) and not parts:
        parts.append("its rows change")
    if not parts and row.diff is not None:
        schema = row.diff.schema
        parts += [f"+{name_cell(n, COLUMN_WIDTH)}" for n, _ in schema.added]
        parts += [f"−{name_cell(n, COLUMN_WIDTH)}" for n, _ in schema.removed]  # noqa: RUF001
        parts += [f"~{name_cell(c.name, COLUMN_WIDTH)}" for c in schema.changed]
        if not parts and row.diff.changed_columns:
            parts = ["values of " + _names(list(row.diff.changed_columns))]
    if len(parts) > MAX_LIST + 2:
        parts = [*parts[:MAX_LIST], f"and {len(parts) - MAX_LIST} more"]
    return ", ".join(parts) or "-"


def _table(row: Row, built: bool) -> str:
    new = "built" if built else "to build"
    if row.kind == "removed":
        return "-"
    if row.kind == "added":
        return new
    if row.change is None:
        return "reused"
    return new if row.change.rebuilds else "reused"


def table(
    rows_: Sequence[Row],
    environment: str,
    *,
    cap: int | None = None,
    built: bool = True,
    short: bool = True,
    elsewhere: str = "the `sluice/pr-environment` check",
) -> str:
    """The impact table's Markdown, riskiest first.

    ``short``: more than :data:`SHORT_TABLE` rows show the first :data:`TOP_ROWS` and a
    line counting the rest by kind (``elsewhere`` lists them all); ``cap``: at most that
    many rows whatever ``short`` says; ``built``: the build ran, else its new tables read
    "to build"."""
    if not rows_:
        return ""
    limit = cap
    if short and len(rows_) > SHORT_TABLE:
        limit = TOP_ROWS if limit is None else min(limit, TOP_ROWS)
    shown = list(rows_ if limit is None else rows_[:limit])
    lines = [
        f"| Model | Change | Why | Rows prod → {md.text(environment)} | Columns | Table |",
        "| --- | --- | --- | ---: | --- | --- |",
    ]
    for row in shown:
        lines.append(
            f"| {name_cell(row.name)} | {LABELS.get(row.kind, row.kind)} | "
            f"{_why(row)} | {row_change(row)} | {_columns(row)} | {_table(row, built)} |"
        )
    rest = rows_[len(shown) :]
    if rest:
        lines += ["", f"_And {rest_line(rest)}; {elsewhere} lists every model._"]
    return "\n".join(lines)


def rest_line(rest: Sequence[Row]) -> str:
    """The rows left out of a short table, counted by kind, riskiest first (Markdown).

    Their names are not listed: counts keep the line short whatever the PR's size."""
    kinds = Counter(r.kind for r in rest)
    counted = "; ".join(
        f"{n} {LABELS.get(k, k)}"
        for k, n in sorted(kinds.items(), key=lambda kv: RANK.get(kv[0], 9))
    )
    return f"{len(rest)} more model{'' if len(rest) == 1 else 's'}: {counted}"


def sql_diffs(plan: Plan, order: Sequence[str] = ()) -> str:
    """Each directly modified model's SQL diff, folded, as top-level HTML blocks (a blank
    line before and after each, so Markdown inside renders and nothing nests in a list),
    in ``order`` (the impact table's), any other after them naturally."""
    at = {name: i for i, name in enumerate(order)}
    changes = sorted(
        plan.directly_modified, key=lambda c: (at.get(c.name, len(at)), natural(c.name))
    )
    blocks = []
    for change in changes:
        if not change.diff:
            continue
        language = _language(_model(plan, change.name))
        blocks.append(
            f"<details><summary>{language} diff of {md.html(change.name, 120)}</summary>\n\n"
            f"{md.fence(_cap_lines(change.diff), 'diff')}\n\n</details>"
        )
    return "\n\n".join(blocks)


def _cap_lines(text: str) -> str:
    lines = text.splitlines()
    if len(lines) <= MAX_DIFF_LINES:
        return text
    return "\n".join([*lines[:MAX_DIFF_LINES], f"... ({len(lines) - MAX_DIFF_LINES} more lines)"])
