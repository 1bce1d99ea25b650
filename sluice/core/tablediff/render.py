"""A table diff for people: a rich view for the terminal, Markdown for a pull request.

Both read one view model (:func:`view`), plain strings already formatted, so the terminal
and the PR comment say the same thing; the Jinja2 template holds no logic beyond loops
and ifs. Long values are cut to :data:`MAX_CELL` characters; every name and value is
escaped by :mod:`sluice.core.markdown` (the template's filters, and its ``finalize`` for
anything unfiltered), so a column named ``</details><img ...>`` or a value holding ``|``
or a line break shows as written and cannot break the table.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from sluice.core import markdown as md
from sluice.core.tablediff.result import TableDiffResult

MAX_CELL = 60
_TEMPLATE = "table_diff.md.j2"


def markdown(results: Sequence[TableDiffResult]) -> str:
    """The Markdown a PR comment embeds: per model one table, samples folded."""
    env = Environment(
        loader=PackageLoader("sluice", "templates"),
        undefined=StrictUndefined,
        autoescape=False,  # Markdown, not HTML: sluice.core.markdown escapes every value
        finalize=md.finalize,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(md.FILTERS)
    views = [view(r, markdown=True) for r in results]
    return env.get_template(_TEMPLATE).render(diffs=views)


def terminal(result: TableDiffResult) -> RenderableType:
    """The result as rich renderables: summary, row counts, column match rates, samples."""
    v = view(result, markdown=False)
    parts: list[RenderableType] = [
        Text.from_markup(f"[bold]{v['name']}[/]: {v['source']} → {v['target']}  ")
        + Text(v["status"], style="green" if result.identical else "bold red")
    ]
    if v["note"]:
        parts.append(Text(v["note"], style="dim"))
    if result.same_table:
        return Group(*parts)
    rows = Table("", v["source"], v["target"], "change", title="rows", title_justify="left")
    for line in v["rows"]:
        rows.add_row(line["label"], line["source"], line["target"], line["change"])
    parts += [rows, Text(v["summary"])]
    for change in v["schema"]:
        parts.append(Text(f"schema: {change}", style="yellow"))
    if v["columns"]:
        columns = Table("column", "matched", "differed", "match rate", title="columns")
        for col in v["columns"]:
            style = "bold red" if col["changed"] else None
            columns.add_row(col["name"], col["matched"], col["differed"], col["rate"], style=style)
        parts.append(columns)
    for sample in v["samples"]:
        table = Table(*sample["header"], title=sample["title"], title_justify="left")
        for line in sample["rows"]:
            table.add_row(*line)
        parts.append(table)
    return Group(*parts)


def view(result: TableDiffResult, *, markdown: bool) -> dict[str, Any]:
    """Everything shown, as strings; with ``markdown``, names and values are cut to
    :data:`MAX_CELL` and the parts made of several values (``summary``, ``others``) are
    :class:`~sluice.core.markdown.Markdown`. The rest is escaped by the template."""

    def cell(value: Any) -> str:
        return _cell(value, markdown)

    def name(value: str) -> str:
        """A column name: cut in Markdown, whole in a terminal."""
        return _cell(value, True) if markdown else value

    source, target = result.source, result.target
    if result.same_table:
        status = "identical (same table)"
    elif result.identical:
        status = "identical"
    else:
        status = _status(result)
    out: dict[str, Any] = {
        "name": result.name,
        "source": source,
        "target": target,
        "status": status,
        "note": result.note or "",
        "keys": ", ".join(result.keys),
        "rows": [],
        "summary": "",
        "schema": [],
        "columns": [],
        "others": "",
        "samples": [],
        "sample_summary": "",
    }
    if result.same_table:
        return out
    change = result.row_change_pct
    counts = [
        ("only in this side", result.source_only, result.target_only),
        ("null keys (rows)", result.null_keys.source, result.null_keys.target),
        ("duplicate keys", result.duplicate_keys.source, result.duplicate_keys.target),
        (
            "rows not compared (duplicates)",
            result.duplicate_rows.source,
            result.duplicate_rows.target,
        ),
    ]
    out["rows"] = [
        _side_row(
            "rows",
            result.source_rows,
            result.target_rows,
            f"{change:+.2f}%" if change else "",
        ),
        # Only the counts that say something: an all-zero line is noise.
        *(_side_row(label, a, b) for label, a, b in counts if a or b),
    ]
    how = (
        f"within ±{result.tolerance:g}"
        if result.tolerance is not None
        else f"rounded to {result.decimals} decimals"
    )
    keys, skipped = out["keys"], ", ".join(result.skipped)
    where = result.where or ""
    if markdown:
        keys, skipped, where = md.text(name(keys)), md.text(name(skipped)), md.code(where)
    differ = "differs" if result.differing_rows == 1 else "differ"
    summary = (
        f"{count(result.joined, 'row')} joined on {keys}; {_n(result.differing_rows)} {differ} "
        f"(numbers {how})"
    )
    if result.where:
        summary += f"; where {where}"
    if result.skipped:
        summary += f"; skipped {skipped}"
    out["summary"] = md.Markdown(summary) if markdown else summary
    schema = result.schema
    out["schema"] = (
        [f"added {name(n)} {name(kind)}" for n, kind in schema.added]
        + [f"removed {name(n)} {name(kind)}" for n, kind in schema.removed]
        + [f"{name(c.name)} {name(c.source_type)} → {name(c.target_type)}" for c in schema.changed]
    )
    same = [name for name, s in result.columns.items() if not s.differed]
    # Differing columns first, the most differing on top; in Markdown only those.
    ordered = sorted(result.columns.items(), key=lambda item: -item[1].differed)
    shown = ordered if not markdown else [(n, s) for n, s in ordered if s.differed]
    out["columns"] = [
        {
            "name": cell(column),
            "matched": _n(s.matched),
            "differed": _n(s.differed),
            "rate": _rate(s.match_rate),
            "changed": bool(s.differed),
        }
        for column, s in shown
    ]
    if markdown and same:
        names = md.text(cell(", ".join(same)))
        verb = "matches" if len(same) == 1 else "match"
        out["others"] = md.Markdown(f"{count(len(same), 'other column')} ({names}) {verb} fully.")
    out["samples"] = _samples(result, cell)
    if markdown:
        for sample in out["samples"]:
            sample["header"] = [name(h) for h in sample["header"]]
    out["sample_summary"] = ", ".join(s["title"] for s in out["samples"])
    return out


def _status(result: TableDiffResult) -> str:
    parts = []
    if result.differing_rows:
        differ = "differs" if result.differing_rows == 1 else "differ"
        parts.append(f"{count(result.differing_rows, 'row')} {differ}")
    if result.source_only:
        parts.append(f"{count(result.source_only, 'row')} only in {result.source}")
    if result.target_only:
        parts.append(f"{count(result.target_only, 'row')} only in {result.target}")
    if result.duplicate_rows.source or result.duplicate_rows.target:
        parts.append("duplicate keys")
    if result.schema.has_changes:
        parts.append("schema changed")
    return ", ".join(parts) or "different"


def _side_row(
    label: str, source: int | None, target: int | None, change: str = ""
) -> dict[str, str]:
    return {"label": label, "source": _n(source), "target": _n(target), "change": change}


def _samples(result: TableDiffResult, cell: Any) -> list[dict[str, Any]]:
    keys = list(result.keys)
    out = []
    if result.samples.differing:
        rows = []
        for row in result.samples.differing:
            for name, value in row.items():
                if name not in result.keys and isinstance(value, Mapping):
                    rows.append(
                        [
                            *(cell(row.get(k)) for k in keys),
                            cell(name),
                            cell(value.get("source")),
                            cell(value.get("target")),
                        ]
                    )
        out.append(
            {
                "title": count(len(result.samples.differing), "differing row"),
                "header": [*keys, "column", result.source, result.target],
                "rows": rows,
            }
        )
    for label, sample in (
        (result.source, result.samples.source_only),
        (result.target, result.samples.target_only),
    ):
        if sample:
            header = list(dict.fromkeys(name for row in sample for name in row))
            rows = [[cell(row.get(name)) for name in header] for row in sample]
            out.append(
                {
                    "title": f"{count(len(sample), 'row')} only in {label}",
                    "header": header,
                    "rows": rows,
                }
            )
    return out


def count(n: int | None, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1: "1 row", "3 rows", "? rows".

    >>> count(1, "row"), count(1200, "unit test"), count(None, "row")
    ('1 row', '1,200 unit tests', '? rows')
    """
    return f"{_n(n)} {noun}{'' if n == 1 else 's'}"


def _n(value: int | None) -> str:
    return "?" if value is None else f"{value:,}"


def _rate(rate: float | None) -> str:
    if rate is None:
        return "-"
    # Never show 100.00% for a column that differs somewhere, nor 0.00% for one that matches.
    text = f"{rate * 100:.2f}%"
    if text == "100.00%" and rate < 1:
        return ">99.99%"
    if text == "0.00%" and rate > 0:
        return "<0.01%"
    return text


def _cell(value: Any, markdown: bool) -> str:
    if value is None:
        text = "NULL"
    elif isinstance(value, str):
        text = value
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, int | float):
        text = str(value)
    else:
        text = json.dumps(value, default=str, sort_keys=True)
    if text == "":
        text = "''"
    # On one line in Markdown (a line break would end the table row); the template
    # escapes it (sluice.core.markdown).
    text = " ".join(text.split()) if markdown else text
    if len(text) > MAX_CELL:
        text = text[: MAX_CELL - 1] + "…"
    return text
