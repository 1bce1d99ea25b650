"""One column's lineage across a set of models: its sources upstream (through CTEs,
joins, stars, to tables nobody models), what it reaches downstream, the rows it decides,
and what cannot be followed said rather than guessed."""

from __future__ import annotations

from sluice.core.model.definition import Kind, KindName, Model
from sluice.core.plan.column_lineage import ColumnGraph

FULL = Kind(KindName.FULL)


def sql(name: str, query: str, *parents: str) -> Model:
    return Model(name, FULL, query_sql=query, depends_on=parents)


def seed(name: str, *columns: str) -> Model:
    return Model(name, Kind(KindName.SEED), columns=tuple((c, "int") for c in columns))


def graph(*models: Model) -> ColumnGraph:
    return ColumnGraph({m.name: m for m in models})


PROJECT = graph(
    seed("s.raw_orders", "id", "user_id", "amount", "status"),
    sql("s.orders", "SELECT id AS order_id, user_id, amount FROM s.raw_orders", "s.raw_orders"),
    sql(
        "s.customers",
        "WITH totals AS (SELECT user_id, SUM(amount) AS total FROM s.orders GROUP BY user_id) "
        "SELECT c.id, c.name, t.total AS lifetime FROM ext.people AS c "
        "JOIN totals AS t ON c.id = t.user_id",
        "s.orders",
        "ext.people",
    ),
    sql("s.report", "SELECT * FROM s.customers WHERE lifetime > 0", "s.customers"),
    sql("s.untouched", "SELECT order_id FROM s.orders", "s.orders"),
)


def test_a_column_comes_from_its_upstream_columns_through_a_cte_and_a_join() -> None:
    found = PROJECT.lineage("s.customers", "lifetime")
    assert found.upstream == (("s.orders", "amount"), ("s.raw_orders", "amount"))
    assert (("s.orders", "amount"), ("s.customers", "lifetime")) in found.links
    assert found.unknown == () and not found.truncated


def test_a_seed_is_where_values_start_and_a_table_nobody_models_is_a_source() -> None:
    assert PROJECT.lineage("s.orders", "order_id").upstream == (("s.raw_orders", "id"),)
    assert PROJECT.lineage("s.customers", "name").upstream == (("ext.people", "name"),)


def test_a_column_reaches_downstream_through_renames_and_stars() -> None:
    found = PROJECT.lineage("s.orders", "amount")
    assert found.downstream == (("s.customers", "lifetime"), ("s.report", "lifetime"))
    assert found.rows == ("s.report",)  # report filters on lifetime: its rows follow it


def test_a_column_read_in_a_join_or_grouping_decides_rows_it_does_not_flow_into() -> None:
    found = PROJECT.lineage("s.orders", "user_id")
    assert found.downstream == ()
    assert found.rows == ("s.customers",)


def test_a_child_that_never_names_the_column_is_not_analysed() -> None:
    found = PROJECT.lineage("s.orders", "order_id")
    assert found.downstream == (("s.untouched", "order_id"),)
    assert PROJECT.lineage("s.raw_orders", "status").downstream == ()


def test_what_cannot_be_followed_is_said() -> None:
    python = Model("s.py", FULL, depends_on=("s.a",), python_code="def f(): ...")
    starred = sql("s.star", "SELECT * FROM ext.unknown", "ext.unknown")
    found = graph(sql("s.a", "SELECT 1 AS x"), python, starred).lineage("s.a", "x")
    assert found.downstream == () and dict(found.unknown) == {
        "s.py": "it has no SQL query (Python or seed model)"
    }
    lost = graph(starred).lineage("s.star", "anything")
    assert "ext.unknown" in dict(lost.unknown)["s.star"]


def test_the_analysis_budget_bounds_a_long_chain() -> None:
    chain = [sql("s.m0", "SELECT 1 AS v")]
    chain += [sql(f"s.m{i}", f"SELECT v FROM s.m{i - 1}", f"s.m{i - 1}") for i in range(1, 40)]
    columns = graph(*chain)
    whole = columns.lineage("s.m0", "v")
    assert len(whole.downstream) == 39 and not whole.truncated
    cut = columns.lineage("s.m0", "v", budget=10)
    assert cut.truncated and len(cut.downstream) == 9  # s.m0 itself was one of the ten
    assert columns.lineage("s.m39", "V").upstream[-1] == ("s.m0", "v")  # any case
