"""Drift's comparison, without Spark (sluice.core.drift.compare): each kind of difference
from a recorded model and what a catalog answered, and what is not drift."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from sluice.core.drift.catalog import Catalog, inspect_step
from sluice.core.drift.compare import WRITE_SLACK_MS, compare
from sluice.core.drift.recorded import RecordedEnvironment, RecordedModel
from sluice.core.spark.results import BadResult, check, parse_result
from sluice.core.state.records import TableSize
from sluice.core.timeutil import DAY_MS, to_ms

TABLE = "sluice__s.s__a__v1"
DAY = to_ms("2024-01-01")
MODEL = RecordedModel(
    name="s.a", kind="INCREMENTAL_BY_TIME_RANGE", version="v1", view="s.a",
    view_sql=f"SELECT `id`, `ds` FROM {TABLE}", table=TABLE, table_is_view=False,
    mark="s.a@v1", query="SELECT 1", declared=(), extra=(), time_column="ds",
    intervals=((DAY, DAY + 2 * DAY_MS),), size=TableSize(100, 50_000, 4), restatable=True,
)  # fmt: skip


def _view(**over: Any) -> dict[str, Any]:
    return {"name": "s.a", "exists": True, "type": "VIEW",
            "text": f"SELECT id, ds FROM {TABLE}", "ddl_ms": 40_000, "error": None, **over}  # fmt: skip


def _table(**over: Any) -> dict[str, Any]:
    return {"name": TABLE, "exists": True, "type": "MANAGED", "provider": "parquet",
            "mark": "s.a@v1", "columns": [["id", "int"], ["ds", "date"]],
            "expected": [["id", "int"], ["ds", "date"]], "rows": 4, "bytes": 100, "files": 2,
            "newest_ms": 49_000, "ddl_ms": 30_000, "source": "files",
            "partitions": ["2024-01-01", "2024-01-02"], "error": None, **over}  # fmt: skip


def _diff(model: RecordedModel = MODEL, **catalog: Any) -> list[tuple[str, str, int | None, str]]:
    views = {"s.a": catalog.get("view", _view())}
    tables = {TABLE: catalog.get("table", _table())}
    recorded = RecordedEnvironment("prod", "p1", 45_000, None, (model,))
    report = compare(recorded, Catalog(views, tables), now=60_000)  # type: ignore[arg-type]
    return [(d.kind, d.detail, d.since, d.repair) for d in report.differences]


def test_prod_as_sluice_left_it_has_no_drift() -> None:
    assert _diff() == []
    # Quoting, case and spacing of the view's text are no drift; nor NULL-filled columns
    # over the same table (another environment's view of a table a forward-only change kept).
    assert _diff(view=_view(text=f"select `ID`,\n  DS from {TABLE.upper()}")) == []
    filled = _view(text=f"SELECT id, ds, CAST(NULL AS INT) AS n FROM {TABLE}")
    model = replace(MODEL, view_sql=f"SELECT `id`, `ds`, `n` FROM {TABLE}")
    expected = [["id", "int"], ["ds", "date"], ["n", "int"]]
    assert _diff(model, view=filled, table=_table(expected=expected)) == []
    # An SCD type 2 table's validity columns are its build's, not drift.
    scd = replace(MODEL, extra=("valid_from", "valid_to"), time_column=None)
    columns = [
        ["id", "int"],
        ["ds", "date"],
        ["valid_from", "timestamp"],
        ["valid_to", "timestamp"],
    ]
    assert _diff(scd, table=_table(columns=columns)) == []


def test_views_that_differ() -> None:
    [(kind, detail, since, repair)] = _diff(view=_view(text="SELECT 1 AS id", ddl_ms=50_000))
    assert (kind, since, repair) == ("view_changed", 50_000, "repoint")  # dated after the apply
    assert "its query differs" in detail and "SELECT 1 AS id" in detail
    [(kind, detail, since, _)] = _diff(view=_view(text="SELECT * FROM other.t", ddl_ms=1))
    assert kind == "view_changed" and "it reads other.t" in detail and since is None
    assert _diff(view=_view(exists=False, type=None))[0][0] == "view_missing"
    assert _diff(view=_view(type="MANAGED"))[0][:1] == ("view_replaced",)
    assert _diff(view=_view(error="boom", exists=False))[0][0] == "unreadable"


def test_tables_that_differ() -> None:
    assert _diff(table=_table(exists=False))[0][0] == "table_missing"
    [(kind, detail, _, repair)] = _diff(table=_table(mark=None))
    assert kind == "table_not_sluices" and "not set" in detail and repair == "rebuild"
    [(kind, detail, since, _)] = _diff(
        table=_table(columns=[["id", "bigint"], ["ds", "date"], ["x", "string"]])
    )
    assert kind == "columns" and since == 30_000
    assert "1 column added (x string)" in detail and "id is bigint" in detail
    [(kind, detail, _, _)] = _diff(table=_table(columns=[["id", "int"]]))
    assert "1 column missing (ds)" in detail
    # A table that cannot be rebuilt (an SCD history) is named all the same, by hand.
    assert _diff(replace(MODEL, restatable=False), table=_table(exists=False))[0][3] == "none"


def test_data_written_outside_sluice() -> None:
    [(kind, detail, since, _)] = _diff(table=_table(rows=2))
    assert kind == "data" and "it holds 2 rows, Sluice's last write left 4 rows" in detail
    assert since is None
    late = 50_000 + WRITE_SLACK_MS + 1
    [(kind, detail, since, _)] = _diff(table=_table(newest_ms=late))
    assert kind == "data" and since == late and "after Sluice's last write" in detail
    assert _diff(table=_table(newest_ms=50_000 + WRITE_SLACK_MS)) == []  # within the slack
    [(kind, detail, _, _)] = _diff(table=_table(bytes=999))  # same rows, other files
    assert "999 bytes" in detail
    # Nothing measured by Sluice, or nothing read: not compared.
    assert _diff(replace(MODEL, size=None), table=_table(rows=0)) == []
    assert _diff(table=_table(source="none", rows=None)) == []


def test_intervals_against_the_partitions_present() -> None:
    [(kind, detail, _, _)] = _diff(table=_table(partitions=["2024-01-01", "2024-01-02", "2024-03-01"]))  # fmt: skip
    assert kind == "intervals" and "outside the intervals Sluice recorded (2024-03-01)" in detail
    [(kind, detail, _, _)] = _diff(table=_table(partitions=[]))
    assert (
        "no rows in recorded 2024-01-01 .. 2024-01-02" in detail or "no rows in recorded" in detail
    )
    assert _diff(table=_table(partitions=["not a time"])) == []  # not read as time: skipped


def test_an_inspect_result_must_name_its_steps_objects() -> None:
    step = inspect_step(RecordedEnvironment("prod", "p1", 0, None, (MODEL,)))
    assert step["views"] == ["s.a"] and step["tables"][0]["table"] == TABLE
    good = parse_result({"step": "inspect", "views": [_view()], "tables": [_table()]})
    check(good, 0, [step])
    other = parse_result({"step": "inspect", "views": [_view()], "tables": [_table(name="x.y")]})
    with pytest.raises(BadResult, match="names tables"):
        check(other, 0, [step])
    with pytest.raises(BadResult, match="unknown key"):
        parse_result({"step": "inspect", "views": [{**_view(), "sql": "x"}], "tables": []})
