"""A PR's query is read with sqlglot's qualify in the service process (the lineage of a
change, a star's columns, the columns' types): bounded. Qualify copies what an alias
stands for into each later projection naming it, so ``a1 + a1 AS a2, a2 + a2 AS a3 ...``
doubles with every projection (18 took a plan 36 s of CPU and 550 MB: red team). Past
``MAX_EXPANDED`` no caller qualifies it: what it wanted to learn is unknown."""

from __future__ import annotations

from pathlib import Path

import sqlglot

from sluice.core.model.definition import Kind, KindName, Model
from sluice.core.plan import column_types
from sluice.core.plan.alias_expansion import MAX_EXPANDED, expanded_size
from sluice.core.plan.column_types import ColumnTypes
from sluice.core.plan.lineage import analyse
from sluice.core.plan.outputs import query_columns
from sluice.core.timeutil import to_ms
from tests.core.helpers import load, plan_of

LONG = 60  # projections: 2**60 nodes once expanded, never built


def _chain(n: int, first: str = "x") -> str:
    chain = ", ".join(f"a{i - 1} + a{i - 1} AS a{i}" for i in range(1, n))
    return f"SELECT {first}, 1 AS a0, {chain} FROM raw.src"


def _types(sql: str) -> dict[str, str]:
    raw = Model("raw.src", Kind(KindName.EXTERNAL), columns=(("x", "INT"),))
    child = Model("s.t", Kind(KindName.FULL), depends_on=("raw.src",), query_sql=sql)
    column_types._CACHE.clear()
    return dict(ColumnTypes({"raw.src": raw, "s.t": child})("s.t") or ())


def test_the_estimate_stops_past_the_bound_and_counts_every_clause() -> None:
    assert expanded_size(sqlglot.parse_one(_chain(LONG), read="spark")) > MAX_EXPANDED
    assert expanded_size(sqlglot.parse_one(_chain(4), read="spark")) < 200
    select = sqlglot.parse_one("SELECT 1 AS a, a + a AS b FROM t WHERE b > 0 GROUP BY b")
    projections_only = sqlglot.parse_one("SELECT 1 AS a, a + a AS b FROM t")
    assert expanded_size(select) > expanded_size(projections_only) + 2 * 13


def test_types_past_the_bound_are_annotated_alone() -> None:
    types = _types(_chain(LONG))
    assert types["x"] == "" and types["a0"] == "INT" and types[f"a{LONG - 1}"] == ""
    # The control: a short chain is qualified, its columns typed from the parent's.
    assert _types(_chain(4)) == {"x": "INT", "a0": "INT", "a1": "INT", "a2": "INT", "a3": "INT"}


def test_lineage_and_a_star_s_columns_past_the_bound_are_unknown() -> None:
    schema = {"raw.src": ["x"]}
    shape = analyse(sqlglot.parse_one(_chain(LONG), read="spark"), schema)
    assert shape.unknown and "aliases" in shape.unknown
    assert not analyse(sqlglot.parse_one(_chain(4), read="spark"), schema).unknown
    star = _chain(LONG, first="*")
    assert query_columns(sqlglot.parse_one(star, read="spark"), schema) is None
    assert query_columns(sqlglot.parse_one(_chain(3, first="*"), read="spark"), schema) == (
        "x",
        "a0",
        "a1",
        "a2",
    )


def test_a_pull_request_s_plan_of_such_a_change_is_made_and_rebuilds_it(tmp_path: Path) -> None:
    config = "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n"
    externals = "- name: raw.src\n  columns: {d: date, x: int}\n"
    header = "MODEL (name s.t, kind INCREMENTAL_BY_TIME_RANGE(time_column d{}));\n"

    def files(extra: str, forward_only: str) -> dict[str, str]:
        query = _chain(LONG, first=f"d, {extra} AS e").replace(
            "FROM raw.src", "FROM raw.src WHERE d BETWEEN @start_ds AND @end_ds"
        )
        return {
            "config.yaml": config,
            "external_models.yaml": externals,
            "models/t.sql": header.format(forward_only) + query + "\n",
        }

    end = to_ms("2024-01-03")
    prod = plan_of(load(tmp_path / "prod", files("x", "")), end=end)
    head = load(tmp_path / "pr", files("x + 1", ", forward_only true"))
    plan = plan_of(head, prod, env="pr_1", end=end)
    assert [c.name for c in plan.directly_modified] == ["s.t"]
