"""The table diff result: its JSON round trip, its invariants and how it renders (pure)."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from sluice.core.tablediff import render
from sluice.core.tablediff.result import (
    ColumnStats,
    DiffOptions,
    Samples,
    SchemaDiff,
    Sides,
    TableDiffError,
    TableDiffResult,
    TypeChange,
    same_table_result,
)


def _result(**changes: object) -> TableDiffResult:
    base = TableDiffResult(
        name="jaffle.orders",
        source="prod",
        target="pr_7",
        source_table="sluice__jaffle.jaffle__orders__aaa",
        target_table="sluice__jaffle.jaffle__orders__bbb",
        keys=("order_id", "line"),
        decimals=3,
        tolerance=None,
        where="status <> 'x'",
        skipped=("updated_at",),
        identical=False,
        source_rows=8,
        target_rows=10,
        joined=6,
        source_only=1,
        target_only=2,
        differing_rows=2,
        null_keys=Sides(1, 0),
        duplicate_keys=Sides(0, 1),
        duplicate_rows=Sides(1, 2),
        schema=SchemaDiff(
            added=(("is_new", "boolean"),),
            removed=(("old", "string"),),
            changed=(TypeChange("amount", "int", "bigint"),),
        ),
        columns={"amount": ColumnStats(4, 2), "status": ColumnStats(6, 0)},
        samples=Samples(
            source_only=({"order_id": 9, "line": "a|b", "amount": 1, "status": "x"},),
            target_only=({"order_id": 10, "line": None, "amount": 2, "status": "<b>"},),
            differing=({"order_id": 1, "line": "a", "amount": {"source": 1, "target": 2}},),
        ),
        note="1 prod and 2 pr_7 rows have keys that are not unique",
    )
    return TableDiffResult(**{**base.__dict__, **changes})  # type: ignore[arg-type]


def test_the_json_form_has_the_documented_keys_and_round_trips() -> None:
    result = _result()
    data = json.loads(json.dumps(result.to_json()))
    for key in ("source_rows", "target_rows", "row_change_pct", "joined", "source_only",
                "target_only", "null_keys", "duplicate_keys", "schema", "columns", "samples",
                "identical", "source", "target", "keys", "decimals", "tolerance", "where"):  # fmt: skip
        assert key in data, key
    assert data["row_change_pct"] == 25.0
    assert data["null_keys"] == {"source": 1, "target": 0}
    assert data["duplicate_keys"] == {"source": 0, "target": 1}
    assert data["schema"] == {
        "added": [{"name": "is_new", "type": "boolean"}],
        "removed": [{"name": "old", "type": "string"}],
        "changed": [{"name": "amount", "source_type": "int", "target_type": "bigint"}],
    }
    assert data["columns"] == {
        "amount": {"matched": 4, "differed": 2, "match_rate": 4 / 6},
        "status": {"matched": 6, "differed": 0, "match_rate": 1.0},
    }
    assert data["samples"]["differing"] == [
        {"order_id": 1, "line": "a", "amount": {"source": 1, "target": 2}}
    ]
    assert TableDiffResult.from_json(data) == result
    assert result.changed_columns == ("amount",)


def test_rates_and_changes_that_cannot_be_computed_are_none() -> None:
    assert ColumnStats(0, 0).match_rate is None
    assert _result(source_rows=0, target_rows=3).row_change_pct is None
    assert _result(source_rows=3, target_rows=2).row_change_pct == -33.3333
    same = same_table_result("m.t", "prod", "pr_1", "sluice__m.m__t__v1", ("id",), DiffOptions())
    assert same.identical and same.same_table
    assert (same.source_rows, same.target_rows, same.joined, same.row_change_pct) == (None,) * 4
    assert same.to_json()["null_keys"] == {"source": None, "target": None}
    assert TableDiffResult.from_json(json.loads(json.dumps(same.to_json()))) == same


def test_options_are_normalised_and_checked() -> None:
    options = DiffOptions(on=("ID", "id", "Day"), skip=("Note",), tolerance=0.5)
    assert options.on == ("id", "day")
    assert options.skip == ("note",)
    assert DiffOptions.from_json(json.loads(json.dumps(options.to_json()))) == options
    for bad in ({"decimals": -1}, {"tolerance": -0.1}, {"tolerance": float("nan")}, {"sample": -2}):
        with pytest.raises(TableDiffError) as info:
            DiffOptions(**bad)  # type: ignore[arg-type]
        assert info.value.hint


def test_markdown_is_one_table_per_model_with_folded_samples() -> None:
    text = render.markdown([_result(), _result(name="jaffle.customers", identical=True)])
    assert text.count("#### `jaffle.") == 2
    assert (
        "#### `jaffle.orders`: prod → pr_7: 2 rows differ, 1 row only in prod, "
        "2 rows only in pr_7" in text
    )
    assert "| | prod | pr_7 | Change |" in text  # both sides labelled by environment
    assert "| rows | 8 | 10 | +25.00% |" in text
    assert "| only in this side | 1 | 2 |  |" in text
    assert "| duplicate keys | 0 | 1 |  |" in text
    assert "| `amount` | 66.67% | 2 |" in text  # the match rate in a column of its own
    assert "1 other column (status) matches fully." in text
    assert "- added is_new boolean" in text and "- amount int → bigint" in text
    assert text.count("<details>") == 2 and text.count("</details>") == 2
    # Values cannot break the table or open HTML.
    assert "| 9 | a\\|b | 1 | x |" in text
    assert "&lt;b&gt;" in text and "<b>" not in text
    assert "| 1 | a | amount | 1 | 2 |" in text
    assert "; where `status <> 'x'`;" in text
    assert "Samples: 1 differing row, 1 row only in prod, 1 row only in pr_7</summary>" in text
    quoted = render.markdown([_result(where="`a b` = 1")])
    assert "where `` `a b` = 1 ``" in quoted
    assert "| 10 | NULL | 2 | &lt;b&gt; |" in text


def test_counts_that_are_zero_are_left_out_and_plurals_are_right() -> None:
    one = _result(differing_rows=1, source_only=0, target_only=0)
    text = render.markdown([one])
    assert ": 1 row differs" in text and "1 rows" not in text
    assert "| only in this side |" not in text


def test_an_identical_same_table_diff_renders_one_line() -> None:
    same = same_table_result("m.t", "prod", "pr_1", "sluice__m.m__t__v1", ("id",), DiffOptions())
    text = render.markdown([same])
    assert "#### `m.t`: prod → pr_1: identical (same table)" in text
    assert "|" not in text and "<details>" not in text


def test_the_terminal_view_shows_counts_rates_and_samples() -> None:
    console = Console(record=True, width=140)
    console.print(render.terminal(_result()))
    text = console.export_text()
    assert "jaffle.orders: prod → pr_7" in text
    assert "+25.00%" in text
    assert "6 rows joined on order_id, line; 2 differ (numbers rounded to 3 decimals)" in text
    assert "66.67%" in text and "100.00%" in text
    assert "schema: amount int → bigint" in text
    assert "a|b" in text  # no Markdown escaping in a terminal
    assert "1 differing row" in text and "1 row only in pr_7" in text
