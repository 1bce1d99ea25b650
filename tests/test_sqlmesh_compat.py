"""The SQLMesh oracle's comparison (``bench/sqlmesh_compat.py``, issue 41), from facts given
here: no SQLMesh, no network. A difference must show in the table and the details, never
pass as a match."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from bench.sqlmesh_compat import Comparison, compare, details, normalise_query, table

SQLMESH: dict[str, Any] = {
    "default_catalog": "db",
    "error": None,
    "models": {
        "raw.orders": {
            "kind": "EXTERNAL",
            "depends_on": [],
            "columns": [["id", "INT"], ["ds", "STRING"], ["amount", "DOUBLE"]],
            "dialect": "duckdb",
            "query": None,
        },
        "shop.daily": {
            "kind": "INCREMENTAL_BY_TIME_RANGE",
            "depends_on": ["raw.orders"],
            "columns": [["ds", "STRING"], ["total", "DOUBLE"]],
            "dialect": "duckdb",
            "query": 'SELECT "o"."ds" AS "ds", SUM("o"."amount") AS "total" /* sum */ '
            'FROM "db"."raw"."orders" AS "o" WHERE "o"."ds" BETWEEN \'2024-01-01\' AND '
            '\'2024-01-01\' GROUP BY "o"."ds"',
        },
        "shop.history": {
            "kind": "SCD_TYPE_2",
            "depends_on": ["raw.orders"],
            "columns": [["id", "INT"]],
            "dialect": "duckdb",
            "query": 'SELECT "orders"."id" AS "id" FROM "db"."raw"."orders" AS "orders"',
        },
    },
}
SLUICE: dict[str, Any] = {
    "error": None,
    "models": {
        "raw.orders": {
            "kind": "EXTERNAL",
            "depends_on": [],
            "columns": [["id", "INT"], ["ds", "TEXT"], ["amount", "DOUBLE"]],
            "dialect": "duckdb",
            "query": None,
        },
        "shop.daily": {
            "kind": "INCREMENTAL_BY_TIME_RANGE",
            "depends_on": ["raw.orders"],
            "columns": [["ds", "STRING"], ["total", "DOUBLE"]],
            "dialect": "spark",
            "query": "SELECT ds, SUM(amount) AS total FROM raw.orders AS o "
            "WHERE o.ds >= '2024-01-01' AND '2024-01-01' >= o.ds GROUP BY ds",
        },
        "shop.history": {
            "kind": "SCD_TYPE_2_BY_TIME",
            "depends_on": ["raw.orders"],
            "columns": [["id", "INT"]],
            "dialect": "spark",
            "query": "SELECT id FROM raw.orders",
        },
    },
}


def _row(result: Comparison) -> str:
    return table([("p", result)])[2]


def test_the_same_facts_spelt_differently_match() -> None:
    result = compare(SQLMESH, SLUICE)
    assert [d.problems() for d in result.diffs] == [[], [], []]
    assert result.matches
    assert _row(result) == "| p | 3 | 3 | 3/3 | 3/3 | 3/3 | 3/3 | 3/3 | 2/2 |  |"
    assert details("p", result) == []


def _changed(side: dict[str, Any], model: str, key: str, value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(side)
    changed["models"][model][key] = value
    return changed


@pytest.mark.parametrize(
    ("model", "key", "value", "column", "said"),
    [
        ("shop.daily", "kind", "FULL", 5, "kind: SQLMesh INCREMENTAL_BY_TIME_RANGE, Sluice FULL"),
        ("shop.daily", "depends_on", [], 6, "dependencies: Sluice lacks raw.orders"),
        ("shop.daily", "columns", [["total", "DOUBLE"], ["ds", "STRING"]], 7, "columns: SQLMesh"),
        ("shop.daily", "columns", None, (7, 8), "columns: Sluice does not know them"),
        (
            "raw.orders",
            "columns",
            [["id", "BIGINT"], ["ds", "STRING"], ["amount", "DOUBLE"]],
            8,
            "types: SQLMesh / Sluice: id INT / BIGINT",
        ),
        ("shop.daily", "columns", [["ds", ""], ["total", ""]], 8, "ds STRING / unknown"),
        (
            "shop.daily",
            "query",
            "SELECT ds, SUM(amount) AS total FROM raw.orders AS o "
            "WHERE o.ds >= '2024-01-02' AND '2024-01-01' >= o.ds GROUP BY ds",
            9,
            "query: SQLMesh",
        ),
        ("shop.history", "query", None, 9, "query: Sluice has no SQL query"),
    ],
)
def test_every_difference_is_reported(
    model: str, key: str, value: Any, column: int | tuple[int, ...], said: str
) -> None:
    result = compare(SQLMESH, _changed(SLUICE, model, key, value))
    assert not result.matches
    cells = [c.strip() for c in _row(result).split("|")]
    assert cells[1] == "p ✗"
    bold = [i for i, c in enumerate(cells[4:10], 4) if c.startswith("**")]
    assert bold == (list(column) if isinstance(column, tuple) else [column]), cells
    assert any(said in line and model in line for line in details("p", result))


def test_a_model_one_side_lacks_is_reported() -> None:
    fewer = copy.deepcopy(SLUICE)
    del fewer["models"]["shop.history"]
    fewer["models"]["shop.extra"] = fewer["models"]["shop.daily"]
    result = compare(SQLMESH, fewer)
    assert not result.matches
    assert "| p ✗ | 3 | 3 | **2/3** |" in _row(result)
    lines = details("p", result)
    assert "- loaded by SQLMesh only: shop.history" in lines
    assert "- loaded by Sluice only: shop.extra" in lines


def test_a_load_error_is_the_row_and_the_details() -> None:
    failed = {"models": {}, "error": "models/a.sql:3: unknown kind CUSTOM\n  hint: use FULL"}
    result = compare(SQLMESH, failed)
    assert not result.matches
    assert _row(result).startswith("| p ✗ | 3 | error |")
    assert _row(result).endswith("| models/a.sql:3: unknown kind CUSTOM |")
    assert "  - `models/a.sql:3: unknown kind CUSTOM (hint: use FULL)`" in details("p", result)


def test_sqlmesh_loading_fewer_models_than_the_manifest_says_is_a_difference() -> None:
    result = compare(SQLMESH, SLUICE)
    result.expected = 4
    assert not result.matches
    assert "| p ✗ | **3** (MANIFEST: 4) |" in _row(result)


def test_normalisation_keeps_what_a_query_means() -> None:
    schema = {"raw.orders": [["id", "INT"], ["ds", "STRING"]]}
    one = normalise_query(
        'SELECT * FROM "db"."raw"."orders" AS "o" JOIN "db"."raw"."orders" AS "p" '
        'ON "o"."id" = "p"."id" AND "p"."ds" = "o"."ds"',
        "duckdb",
        schema,
        "db",
    )
    other = normalise_query(
        "SELECT * FROM raw.orders AS o JOIN raw.orders AS p ON p.ds = o.ds AND o.id = p.id",
        "spark",
        schema,
    )
    assert one == other
    assert "o.id AS id" in one  # the star expanded against the schema
    changed = normalise_query(
        "SELECT * FROM raw.orders AS o JOIN raw.orders AS p ON p.ds = o.ds AND o.id > p.id",
        "spark",
        schema,
    )
    assert changed != one
    assert normalise_query("SELECT 'A' AS x", "spark") != normalise_query(
        "SELECT 'a' AS x", "spark"
    )


def test_sluice_s_types_are_read_as_spark_spells_them_whatever_the_model_s_dialect() -> None:
    # Sluice keeps a DuckDB model's declared TIME as Spark's TIMESTAMP: read as DuckDB,
    # TIMESTAMP would be a TIMESTAMP_NTZ, a difference that is not there.
    columns = [*SQLMESH["models"]["raw.orders"]["columns"], ["at", "TIMESTAMP"]]
    theirs = _changed(SQLMESH, "raw.orders", "columns", columns)
    ours = _changed(SLUICE, "raw.orders", "columns", columns)
    result = compare(theirs, ours)
    assert result.matches, [d.problems() for d in result.diffs]
    ours = _changed(SLUICE, "raw.orders", "columns", [*columns[:-1], ["at", "TIMESTAMP_NTZ"]])
    assert "at TIMESTAMP / TIMESTAMP_NTZ" in (compare(theirs, ours).diffs[0].types or "")


def test_what_sluice_loads_but_will_not_run_is_listed(tmp_path: Any) -> None:
    # sqlmesh_sushi's custom materializations and DROP statements load and plan; the
    # report names each with its file:line, under the supported and unsupported parts.
    from pathlib import Path

    from bench.sqlmesh_compat import _not_run, report
    from sluice.core.model.loader import load_project
    from tests.core.helpers import write_project

    root = write_project(
        Path(tmp_path),
        {
            "config.yaml": "model_defaults: {dialect: duckdb, start: '2024-01-01'}\n"
            "before_all:\n  - DROP VIEW IF EXISTS raw.x\n",
            "models/c.sql": "MODEL (name s.c, kind CUSTOM (materialization 'custom_full'));\n"
            "SELECT 1 AS id\n",
        },
    )
    found = _not_run(load_project(root, use_cache=False), root)
    assert found[0].startswith("models/c.sql:1: s.c: kind CUSTOM (materialization 'custom_full')")
    assert found[1].startswith("before_all statement 1 (DROP VIEW IF EXISTS raw.x)")
    result = compare(SQLMESH, SLUICE)
    result.not_run = found
    text = report([("p", result)], {}, {"p": root})
    assert "Loaded and planned, not run" in text
    assert f"- (p) `{found[0]}`" in text
