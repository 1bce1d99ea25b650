from pathlib import Path

import pytest

from sluice.core.config import ModelDefaults
from sluice.core.errors import ModelError
from sluice.core.model.definition import KindName
from sluice.core.model.parse import parse_model

DEFAULTS = ModelDefaults(dialect="spark", start="2024-01-01")


def parse(
    text: str, variables: dict[str, object] | None = None, defaults: ModelDefaults = DEFAULTS
):  # type: ignore[no-untyped-def]
    model = parse_model(text, "models/m.sql", defaults, variables or {})
    assert model is not None
    return model


def test_every_header_property() -> None:
    model = parse(
        """MODEL (
  name Sales.Orders,
  kind INCREMENTAL_BY_TIME_RANGE (time_column (ds, '%Y-%m-%d'), batch_size 7, lookback 2),
  dialect duckdb,
  cron '@hourly',
  start '2023-06-01',
  end '2023-12-31',
  grain (id, ds),
  owner alice,
  tags [finance, daily],
  description 'Orders by day',
  column_descriptions (id = 'the id', ds = 'the day'),
  audits (not_null(columns := (id)), unique_values_non_blocking(columns := [id])),
  forward_only true,
  on_destructive_change warn,
);
SELECT id, ds FROM raw.orders WHERE ds BETWEEN @start_ds AND @end_ds"""
    )
    assert model.name == "sales.orders"
    assert model.kind.name == KindName.INCREMENTAL_BY_TIME_RANGE
    assert (model.kind.time_column, model.kind.time_column_format) == ("ds", "%Y-%m-%d")
    assert (model.kind.batch_size, model.kind.lookback) == (7, 2)
    assert model.dialect == "duckdb" and model.cron == "@hourly"
    assert model.grain == ("id", "ds")
    assert model.owner == "alice" and model.tags == ("finance", "daily")
    assert model.description == "Orders by day"
    assert model.column_descriptions == (("id", "the id"), ("ds", "the day"))
    assert [(a.name, a.blocking) for a in model.audits] == [
        ("not_null", True),
        ("unique_values", False),
    ]
    assert model.forward_only is True and model.on_destructive_change == "warn"
    assert model.depends_on == ("raw.orders",)
    # end '2023-12-31' is inclusive: the whole last day.
    assert model.start is not None and model.end is not None
    assert (model.end - model.start) // 86_400_000 == 214  # June 1 .. Dec 31 inclusive


def test_seed_and_unique_key_kinds() -> None:
    seed = parse(
        "MODEL (name s.seed, kind SEED (path '../seeds/x.csv', csv_settings (delimiter = ';')), columns (id INTEGER, amount DECIMAL(10, 2)));"
    )
    assert seed.kind.seed_path == "../seeds/x.csv"
    assert seed.kind.csv_settings == (("delimiter", ";"),)
    assert seed.columns == (("id", "INT"), ("amount", "DECIMAL(10, 2)"))
    assert seed.query_sql is None
    upsert = parse(
        "MODEL (name s.u, kind INCREMENTAL_BY_UNIQUE_KEY (unique_key [id, region]));\nSELECT 1 AS id, 'eu' AS region"
    )
    assert upsert.kind.unique_key == ("id", "region")


def test_kind_defaults_to_view_and_query_is_canonical_spark() -> None:
    model = parse("MODEL (name s.v);\n-- comment\nselect   A,\n B from S.T where x=1 /* c */")
    assert model.kind.name == KindName.VIEW
    assert model.query_sql == "SELECT a, b FROM s.t WHERE x = 1"


def test_other_dialects_are_transpiled_to_spark() -> None:
    model = parse(
        "MODEL (name s.d, dialect duckdb);\nSELECT epoch_ms(ts) AS t, list_value(1, 2) AS l FROM s.src"
    )
    assert model.query_sql == "SELECT TIMESTAMP_MILLIS(ts) AS t, ARRAY(1, 2) AS l FROM s.src"
    bq = parse("MODEL (name s.b, dialect bigquery);\nSELECT SAFE_DIVIDE(a, b) AS r FROM `s.src`")
    assert "FROM s.src" in (bq.query_sql or "")


def test_macros_become_placeholders_and_vars_are_inlined() -> None:
    model = parse(
        "MODEL (name s.m, kind INCREMENTAL_BY_TIME_RANGE (time_column ds));\n"
        "SELECT ds, @VAR('region') AS region, @VAR('missing', 3) AS n FROM s.src "
        "WHERE ds BETWEEN @start_ds AND @end_ds AND '@not_a_macro' <> @{execution_ds}",
        variables={"region": "eu's"},
    )
    sql = model.query_sql or ""
    assert "__sluice_macro__start_ds" in sql and "__sluice_macro__execution_ds" in sql
    assert "'eu''s' AS region" in sql.replace("\\'", "''") or "eu" in sql
    assert "3 AS n" in sql and "'@not_a_macro'" in sql


def test_ctes_and_table_functions_are_not_dependencies() -> None:
    model = parse(
        "MODEL (name s.c);\nWITH x AS (SELECT * FROM s.a) SELECT * FROM x JOIN s.b ON TRUE CROSS JOIN RANGE(3)"
    )
    assert model.depends_on == ("s.a", "s.b")


def test_depends_on_adds_parents_the_query_does_not_name() -> None:
    model = parse("MODEL (name s.c, depends_on [s.z, s.a]);\nSELECT * FROM s.b")
    assert model.depends_on == ("s.a", "s.b", "s.z")
    assert parse("MODEL (name s.c, depends_on s.a);\nSELECT 1 AS x").depends_on == ("s.a",)


def test_disabled_model_is_skipped() -> None:
    assert parse_model("MODEL (name s.x, enabled false);\nSELECT 1", "m.sql", DEFAULTS, {}) is None


@pytest.mark.parametrize(
    ("text", "line", "fragment", "hint"),
    [
        ("SELECT 1", 1, "not a model", "MODEL ("),
        ("MODEL (kind FULL);\nSELECT 1", 1, "has no name", "name schema.table"),
        ("MODEL (name onlytable);\nSELECT 1", 1, "must be schema.table", "jaffle.orders"),
        (
            "MODEL (\n  name s.t,\n  kind FULLL\n);\nSELECT 1",
            3,
            "unknown model kind 'FULLL'",
            "FULL",
        ),
        (
            "MODEL (\n  name s.t,\n  owenr bob\n);\nSELECT 1",
            3,
            "unknown model property 'owenr'",
            "did you mean 'owner'",
        ),
        (
            "MODEL (\n  name s.t,\n  dialect klingon\n);\nSELECT 1",
            3,
            "unknown SQL dialect 'klingon'",
            "sqlglot dialect",
        ),
        (
            "MODEL (name s.t);\n\nSELECT a\n  FROM s.x WHERE (a = ",
            4,
            "cannot parse the query",
            "dialect",
        ),
        (
            "MODEL (name s.t);\nSELECT 1;\nSELECT 2",
            2,
            "exactly one SELECT",
            "pre- and post-statements",
        ),
        ("MODEL (name s.t);\n", 2, "has no query", "SELECT"),
        ("MODEL (name s.t);\nSELECT *\nFROM orders", 3, "has no schema", "schema.table"),
        ("MODEL (name s.t);\nSELECT @start_dss", 2, "unknown macro @start_dss", "@start_ds"),
        (
            "MODEL (name s.t);\nSELECT @VAR('nope')",
            2,
            "variable 'nope' is not defined",
            "variables:",
        ),
        (
            "MODEL (name s.t, kind INCREMENTAL_BY_TIME_RANGE);\nSELECT 1",
            1,
            "needs a time_column",
            "time_column",
        ),
        (
            "MODEL (name s.t, kind FULL (time_column x));\nSELECT 1",
            1,
            "has no parameter",
            "takes no parameters",
        ),
        (
            "MODEL (name s.t, kind SEED (path 'x.csv'));\nSELECT 1",
            2,
            "has no query",
            "remove the SQL",
        ),
        ("MODEL (name s.t, batch_size 0);\nSELECT 1", 1, "whole number", None),
        ("MODEL (name s.t, start 'yesterday-ish');\nSELECT 1", 1, "is not a date", None),
        ("MODEL (name s.t, columns (id));\nSELECT 1", 1, "needs a type", "`name TYPE`"),
    ],
)
def test_bad_models_say_what_where_and_how(
    text: str, line: int, fragment: str, hint: str | None
) -> None:
    with pytest.raises(ModelError) as info:
        parse_model(text, "models/t.sql", DEFAULTS, {})
    error = info.value
    assert error.path == "models/t.sql"
    assert error.line == line, str(error)
    assert fragment in str(error)
    if hint:
        assert error.hint and hint in error.hint


def test_incremental_without_any_start_is_a_warning() -> None:
    # SQLMesh 0.236.4 loads it (sqlmesh_sushi's four incremental models have no start);
    # Sluice too, saying where its backfill begins (issue 41, item 11).
    model = parse_model(
        "MODEL (name s.t, kind INCREMENTAL_BY_TIME_RANGE (time_column ds));\nSELECT ds FROM s.x",
        "m.sql",
        ModelDefaults(),
        {},
    )
    assert model is not None and model.start is None
    (note,) = model.warnings
    assert note.startswith("m.sql:1: model s.t is incremental by time but has no start date")
    assert "hint: set `start '2024-01-01'`" in note


def test_parse_is_pure(tmp_path: Path) -> None:
    # Same text, same result; nothing read or written.
    text = "MODEL (name s.t, kind SEED (path 'missing.csv'));"
    assert parse(text) == parse(text)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "query",
    [
        "SELECT " + "(" * 3_000 + "1" + ")" * 3_000 + " AS x",
        "SELECT " + "NOT " * 3_000 + "TRUE AS x",
        "SELECT * FROM " + "(SELECT * FROM " * 1_000 + "s.a" + ") t" * 1_000,
    ],
)
def test_query_nested_too_deeply_is_an_error_not_a_crash(query: str) -> None:
    # Found by tests/fuzz: sqlglot recursed until RecursionError.
    with pytest.raises(ModelError, match=r"nests .* too deeply") as info:
        parse_model(f"MODEL (name s.t, kind FULL);\n{query}", "models/m.sql", DEFAULTS, {})
    assert info.value.path == "models/m.sql"
