"""The names of the columns a model's query returns are read from the tree its query was
parsed into, not from its Spark SQL parsed a second time: both readings must agree, on
every model of the repository's projects and on queries chosen to tell them apart."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlglot

from sluice.core.config import ModelDefaults
from sluice.core.model import parse
from sluice.core.model.blueprints import parse_models
from sluice.core.model.loader import load_project

REPO = Path(__file__).resolve().parents[3]
PROJECTS = sorted(
    [
        *(REPO / "tests" / "fixtures" / "sqlmesh_projects").iterdir(),
        REPO / "tests" / "fixtures" / "sqlmesh_init_duckdb",
        REPO / "examples" / "jaffle_shop",
    ]
)


def _reread(query_sql: str) -> tuple[str, ...] | None:
    names = parse.output_names(sqlglot.parse_one(query_sql, read="spark"))
    return None if names is None else tuple(names)


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...] | None]:
    """What the parser read for each query, in the order it read them."""
    found: list[tuple[str, ...] | None] = []
    read = parse.output_names

    def recording(query: sqlglot.exp.Expr) -> list[str] | None:
        names = read(query)
        found.append(None if names is None else tuple(names))
        return names

    monkeypatch.setattr(parse, "output_names", recording)
    return found


@pytest.mark.parametrize("root", PROJECTS, ids=lambda p: p.name)
def test_the_projects_models_read_the_same(root: Path, seen: list[tuple[str, ...] | None]) -> None:
    project = load_project(root, use_cache=False)
    queries = [m.query_sql for m in project.models.values() if m.query_sql is not None]
    assert queries
    assert sorted(map(repr, seen)) == sorted(repr(_reread(q)) for q in queries)


QUERIES = {
    "plain": ("spark", "SELECT a, b AS c, t.d FROM s.t AS t", ("a", "c", "d")),
    "quoted and cased": (
        "spark",
        "SELECT `Mixed` AS `Out`, Upper_One FROM s.t",
        ("out", "upper_one"),
    ),
    "star": ("spark", "SELECT * FROM s.t", None),
    "table star": ("spark", "SELECT t.*, 1 AS x FROM s.t AS t", None),
    "unnamed expression": ("spark", "SELECT a + 1 FROM s.t", None),
    "union": ("spark", "SELECT a, b FROM s.t UNION ALL SELECT c, d FROM s.u", ("a", "b")),
    "subquery": ("spark", "SELECT * FROM (SELECT a AS z FROM s.t)", None),
    "cte": (
        "spark",
        "WITH w AS (SELECT a FROM s.t) SELECT a, COUNT(*) AS n FROM w GROUP BY a",
        ("a", "n"),
    ),
    "window": (
        "spark",
        "SELECT a, ROW_NUMBER() OVER (PARTITION BY a ORDER BY b) AS rn FROM s.t",
        ("a", "rn"),
    ),
    "struct field": ("spark", "SELECT s.f.g AS g, s.f FROM s.t AS s", ("g", "f")),
    "duckdb functions": (
        "duckdb",
        "SELECT list_value(a, b) AS l, epoch_ms(c) AS e, a::INT AS i FROM s.t",
        ("l", "e", "i"),
    ),
    "duckdb quoted": ("duckdb", 'SELECT "Name" AS "Label", x FROM s.t', ("label", "x")),
    "bigquery": ("bigquery", "SELECT SAFE_DIVIDE(a, b) AS r, `b` FROM s.t", ("r", "b")),
    "snowflake iff": ("snowflake", "SELECT IFF(a > 0, a, 0) AS pos FROM s.t", ("pos",)),
}


@pytest.mark.parametrize("case", sorted(QUERIES))
def test_chosen_queries_read_the_same(case: str, seen: list[tuple[str, ...] | None]) -> None:
    dialect, query, expected = QUERIES[case]
    text = f"MODEL (name s.m, kind FULL, dialect {dialect});\n{query}\n"
    [model] = parse_models(text, "m.sql", ModelDefaults(dialect="spark"), {})
    assert model.query_sql is not None
    assert seen == [expected]
    assert _reread(model.query_sql) == expected
