"""Column-level impact: direct changes column by column, what reaches downstream, narrowing."""

from pathlib import Path

import pytest

from sluice.core.model.definition import Project
from sluice.core.plan.lineage import ColumnImpact, compare_queries, downstream_impact
from sluice.core.plan.plan import ModelChange, Plan
from sluice.core.snapshot.snapshot import Category
from sluice.core.timeutil import to_ms
from tests.core.helpers import load, plan_of

SCHEMA = {
    "s.orders": ["id", "customer_id", "amount", "status", "ds"],
    "s.customers": ["id", "name", "country"],
}


# -- direct changes ---------------------------------------------------------------------


def test_a_renamed_column_is_removed_under_its_old_name_and_added_under_the_new() -> None:
    impact = compare_queries(
        "SELECT id, amount FROM s.orders",
        "SELECT id, amount AS total FROM s.orders",
        SCHEMA,
    )
    assert (impact.added, impact.removed, impact.changed) == (("total",), ("amount",), ())
    assert impact.affected == ("total",) and not impact.rows_changed and not impact.unknown


def test_an_expression_change_changes_that_column_only() -> None:
    impact = compare_queries(
        "SELECT id, amount, status FROM s.orders",
        "SELECT id, amount * 100 AS amount, status FROM s.orders",
        SCHEMA,
    )
    assert (impact.added, impact.removed, impact.changed) == ((), (), ("amount",))
    assert impact.affected == ("amount",) and not impact.rows_changed


def test_an_added_and_a_removed_column() -> None:
    impact = compare_queries(
        "SELECT id, amount, status FROM s.orders",
        "SELECT id, amount, ds FROM s.orders",
        SCHEMA,
    )
    assert (impact.added, impact.removed, impact.changed) == (("ds",), ("status",), ())
    assert impact.affected == ("ds",)


def test_select_star_over_a_table_of_unknown_columns_is_unknown_never_unaffected() -> None:
    impact = compare_queries("SELECT * FROM s.events", "SELECT *, 1 AS one FROM s.events", SCHEMA)
    assert impact.unknown and "SELECT *" in impact.reason
    child = downstream_impact("SELECT * FROM s.events", {"s.events": ["amount"]}, SCHEMA)
    assert child.unknown and not child.touches_nothing
    inside = downstream_impact("SELECT HASH(*) AS h FROM s.events", {"s.events": ["a"]}, SCHEMA)
    assert inside.unknown and not inside.touches_nothing


def test_select_star_over_a_table_of_known_columns_takes_them() -> None:
    impact = compare_queries("SELECT * FROM s.orders", "SELECT *, 1 AS one FROM s.orders", SCHEMA)
    assert impact.added == ("one",) and not impact.unknown and not impact.rows_changed
    child = downstream_impact("SELECT * FROM s.orders", {"s.orders": ["amount"]}, SCHEMA)
    assert child.reads == ("s.orders.amount",) and child.affected == ("amount",)


@pytest.mark.parametrize(
    "query",
    [
        "SELECT id, STRUCT(*) AS h FROM s.orders",
        "SELECT id, HASH(*) AS h FROM s.orders",
        "SELECT o.id, MD5(TO_JSON(STRUCT(o.*))) AS h FROM s.orders AS o",
        "WITH c AS (SELECT id, amount FROM s.orders) SELECT id, HASH(*) AS h FROM c",
    ],
)
def test_a_star_inside_an_expression_reads_every_column(query: str) -> None:
    # Its value changes with any column of what it reads; COUNT(*) reads rows only.
    child = downstream_impact(query, {"s.orders": ["amount"]}, SCHEMA)
    assert child.reads == ("s.orders.amount",) and child.affected == ("h",), child
    count = downstream_impact(
        "SELECT COUNT(*) AS n FROM s.orders", {"s.orders": ["amount"]}, SCHEMA
    )
    assert count.touches_nothing


def test_select_star_over_a_cte_is_followed() -> None:
    impact = compare_queries(
        "WITH t AS (SELECT id, amount FROM s.orders) SELECT * FROM t",
        "WITH t AS (SELECT id, amount + 1 AS amount FROM s.orders) SELECT * FROM t",
        SCHEMA,
    )
    assert impact.changed == ("amount",) and not impact.unknown


def test_a_change_inside_a_cte_changes_the_column_it_feeds() -> None:
    old = """
        WITH paid AS (SELECT id, amount, status FROM s.orders),
             totals AS (SELECT id, amount AS total, status FROM paid)
        SELECT id, total, status FROM totals
    """
    new = old.replace(
        "SELECT id, amount, status FROM s.orders",
        "SELECT id, amount * 2 AS amount, status FROM s.orders",
    )
    impact = compare_queries(old, new, SCHEMA)
    assert impact.changed == ("total",) and not impact.rows_changed
    # A filter inside the CTE changes the rows of the whole query.
    filtered = old.replace("FROM s.orders)", "FROM s.orders WHERE status = 'paid')")
    rows = compare_queries(old, filtered, SCHEMA)
    assert rows.rows_changed and rows.changed == () and rows.affected == ()


def test_a_column_from_the_other_side_of_a_join() -> None:
    old = """
        SELECT o.id, o.amount, c.name
        FROM s.orders AS o JOIN s.customers AS c ON o.customer_id = c.id
    """
    new = old.replace("c.name", "UPPER(c.name) AS name")
    impact = compare_queries(old, new, SCHEMA)
    assert impact.changed == ("name",) and not impact.rows_changed
    # Unqualified columns are resolved with the parents' columns.
    unqualified = (
        "SELECT o.id, amount, name FROM s.orders AS o JOIN s.customers AS c ON customer_id = c.id"
    )
    child = downstream_impact(unqualified, {"s.customers": ["name"]}, SCHEMA)
    assert child.reads == ("s.customers.name",) and child.affected == ("name",)
    # A changed join key changes the rows.
    on_key = downstream_impact(old, {"s.orders": ["customer_id"]}, SCHEMA)
    assert on_key.rows_changed and on_key.reads == ("s.orders.customer_id",)


def test_an_unresolvable_column_is_unknown() -> None:
    # Without the parents' columns, `name` could come from either side of the join.
    child = downstream_impact(
        "SELECT o.id, name FROM s.orders AS o JOIN s.customers AS c ON o.customer_id = c.id",
        {"s.customers": ["name"]},
    )
    assert child.unknown and "name" in child.reason


def test_window_functions_depend_on_their_partition_and_order() -> None:
    old = """
        SELECT id, amount,
               ROW_NUMBER() OVER (PARTITION BY customer_id ORDER BY ds) AS nth,
               SUM(amount) OVER (PARTITION BY customer_id) AS customer_total
        FROM s.orders
    """
    new = old.replace("ORDER BY ds)", "ORDER BY ds DESC)")
    impact = compare_queries(old, new, SCHEMA)
    assert impact.changed == ("nth",) and not impact.rows_changed
    child = downstream_impact(old, {"s.orders": ["customer_id"]}, SCHEMA)
    assert child.affected == ("nth", "customer_total") and not child.rows_changed


def test_a_changed_where_changes_every_row() -> None:
    impact = compare_queries(
        "SELECT id, amount FROM s.orders WHERE status = 'paid'",
        "SELECT id, amount FROM s.orders WHERE status IN ('paid', 'refunded')",
        SCHEMA,
    )
    assert impact.rows_changed and (impact.added, impact.removed, impact.changed) == ((), (), ())
    # Downstream: filtering on a changed column changes the rows too.
    child = downstream_impact(
        "SELECT id, amount FROM s.orders WHERE status = 'paid'", {"s.orders": ["status"]}, SCHEMA
    )
    assert child.rows_changed and child.reads == ("s.orders.status",)


@pytest.mark.parametrize(
    "new",
    [
        "SELECT DISTINCT o.id, amount FROM s.orders AS o",
        "SELECT o.id, amount FROM s.orders AS o LIMIT 10",
        "SELECT o.id, amount FROM s.orders AS o JOIN s.customers AS c ON c.id = customer_id",
    ],
)
def test_distinct_limit_and_joins_are_row_changes(new: str) -> None:
    impact = compare_queries("SELECT o.id, amount FROM s.orders AS o", new, SCHEMA)
    assert impact.rows_changed and not impact.unknown and impact.changed == ()


def test_aggregates() -> None:
    old = (
        "SELECT customer_id, SUM(amount) AS total, COUNT(*) AS n FROM s.orders GROUP BY customer_id"
    )
    changed = compare_queries(old, old.replace("SUM(amount)", "SUM(amount * 2)"), SCHEMA)
    assert changed.changed == ("total",) and not changed.rows_changed
    # A new aggregate in an already grouped query keeps the rows.
    more = compare_queries(old, old.replace(" FROM", ", MAX(ds) AS last FROM"), SCHEMA)
    assert more.added == ("last",) and not more.rows_changed
    # Other grouping keys: other rows.
    regrouped = old.replace("GROUP BY customer_id", "GROUP BY customer_id, status")
    assert compare_queries(old, regrouped, SCHEMA).rows_changed
    # Downstream, a changed grouping column changes the rows; a summed one only the sum.
    assert downstream_impact(old, {"s.orders": ["customer_id"]}, SCHEMA).rows_changed
    summed = downstream_impact(old, {"s.orders": ["amount"]}, SCHEMA)
    assert summed.affected == ("total",) and not summed.rows_changed


def test_union_branches_align_by_position() -> None:
    old = "SELECT id, amount FROM s.orders UNION ALL SELECT id, 0 AS amount FROM s.customers"
    impact = compare_queries(old, old.replace("0 AS amount", "1 AS amount"), SCHEMA)
    assert impact.changed == ("amount",) and not impact.rows_changed


def test_subqueries_in_expressions_and_filters() -> None:
    scalar = downstream_impact(
        "SELECT id, (SELECT MAX(amount) FROM s.orders) AS top FROM s.customers",
        {"s.orders": ["amount"]},
        SCHEMA,
    )
    assert scalar.affected == ("top",) and not scalar.rows_changed
    filtered = downstream_impact(
        "SELECT id, name FROM s.customers WHERE id IN (SELECT customer_id FROM s.orders)",
        {"s.orders": ["customer_id"]},
        SCHEMA,
    )
    assert filtered.rows_changed


def test_macros_are_values_not_columns() -> None:
    query = (
        "SELECT o.id, c.name FROM s.orders AS o JOIN s.customers AS c ON o.customer_id = c.id "
        "WHERE o.ds BETWEEN __sluice_macro__start_ds AND __sluice_macro__end_ds"
    )
    child = downstream_impact(query, {"s.customers": ["name"]}, SCHEMA)
    assert child.affected == ("name",) and not child.unknown


def test_a_child_reading_none_of_the_changed_columns_is_untouched() -> None:
    child = downstream_impact(
        "SELECT id, status FROM s.orders WHERE ds > '2024-01-01'", {"s.orders": ["amount"]}, SCHEMA
    )
    assert child == ColumnImpact() and child.touches_nothing
    # Upstream rows that changed reach every column.
    rows = downstream_impact("SELECT id FROM s.orders", {"s.orders": ["*"]}, SCHEMA)
    assert rows.rows_changed and rows.reads == ("s.orders.*",)


# -- through the plan builder -----------------------------------------------------------

END = to_ms("2024-01-11")

PROJECT = {
    "config.yaml": """
        model_defaults:
          dialect: spark
          start: '2024-01-01'
          cron: '@daily'
    """,
    "models/orders.sql": """
        MODEL (name s.orders, kind FULL);
        SELECT 1 AS id, 10 AS customer_id, 5.0 AS amount, 'paid' AS status
    """,
    "models/paid.sql": """
        MODEL (name s.paid, kind FULL);
        SELECT id, customer_id, amount AS paid_amount FROM s.orders WHERE status = 'paid'
    """,
    "models/by_customer.sql": """
        MODEL (name s.by_customer, kind FULL);
        SELECT customer_id, SUM(paid_amount) AS total FROM s.paid GROUP BY customer_id
    """,
    "models/ids.sql": """
        MODEL (name s.ids, kind FULL);
        SELECT id FROM s.orders
    """,
    "models/ids_view.sql": """
        MODEL (name s.ids_view, kind VIEW);
        SELECT id FROM s.orders
    """,
    "models/everything.sql": """
        MODEL (name s.everything, kind FULL);
        SELECT * FROM s.orders
    """,
}


def plan(project: Project, base: Plan | None = None, env: str = "prod") -> Plan:
    return plan_of(project, base, env, end=END)


def edited(tmp_path: Path, old: str, new: str) -> Project:
    text = PROJECT["models/orders.sql"]
    assert old in text
    return load(tmp_path / "2", {**PROJECT, "models/orders.sql": text.replace(old, new)})


def changes(result: Plan) -> dict[str, ModelChange]:
    return {c.name: c for c in (*result.directly_modified, *result.indirectly_modified)}


def test_a_non_breaking_change_reaches_only_the_children_that_read_it(tmp_path: Path) -> None:
    prod = plan(load(tmp_path / "1", PROJECT))
    result = plan(
        edited(tmp_path, "'paid' AS status", "'paid' AS status, 'EUR' AS currency"), prod, "pr_1"
    )
    direct = result.directly_modified[0]
    assert (direct.name, direct.category) == ("s.orders", Category.NON_BREAKING)
    assert direct.columns is not None and direct.columns.added == ("currency",)
    # SELECT * takes the new column: its query renders to one more column, so it is
    # directly modified (as SQLMesh plans it), non-breaking, and rebuilt.
    assert result.indirectly_modified == ()
    everything = changes(result)["s.everything"]
    assert (everything.category, everything.reshaped_by) == (Category.NON_BREAKING, ("s.orders",))
    assert (
        everything.rebuilds
        and "+-- columns of s.orders: id, customer_id, amount, status, currency" in everything.diff
    )
    assert everything.columns is not None and everything.columns.added == ("currency",)
    # The others read none of it (a chain of three included): narrowed out.
    assert set(result.unaffected) == {"s.paid", "s.by_customer", "s.ids", "s.ids_view"}
    # Narrowing changes no version: tables keep prod's, the view is re-pointed at the new
    # parent table exactly as before, and only the changed model is built.
    for name in ("s.paid", "s.by_customer", "s.ids"):
        assert result.snapshot(name).version == prod.snapshot(name).version
    assert result.snapshot("s.ids_view").version != prod.snapshot("s.ids_view").version
    assert result.create_views == ("s.ids_view",)
    assert [b.name for b in result.backfill] == ["s.orders", "s.everything"]
    assert result.to_json()["unaffected"] == list(result.unaffected)


def test_a_breaking_change_keeps_every_child_but_says_which_columns(tmp_path: Path) -> None:
    prod = plan(load(tmp_path / "1", PROJECT))
    result = plan(edited(tmp_path, "5.0 AS amount", "5.0 * 100 AS amount"), prod, "pr_2")
    found = changes(result)
    assert found["s.orders"].category == Category.BREAKING
    orders = found["s.orders"].columns
    assert orders is not None and orders.changed == ("amount",) and orders.affected == ("amount",)
    # Every descendant stays indirectly modified (breaking: conservative) ...
    assert result.unaffected == ()
    assert {c.name for c in result.indirectly_modified} == {
        "s.paid", "s.by_customer", "s.ids", "s.ids_view", "s.everything",
    }  # fmt: skip
    assert all(c.reached_by == ("s.orders",) for c in result.indirectly_modified)
    # ... and the chain of three says which columns moved.
    paid = found["s.paid"].columns
    assert paid is not None
    assert (paid.reads, paid.affected, paid.rows_changed) == (
        ("s.orders.amount",),
        ("paid_amount",),
        False,
    )
    by_customer = found["s.by_customer"].columns
    assert by_customer is not None
    assert (by_customer.reads, by_customer.affected) == (("s.paid.paid_amount",), ("total",))
    ids = found["s.ids"].columns
    assert ids is not None and ids.touches_nothing  # reads only `id`, kept all the same
    assert found["s.ids"].category == Category.BREAKING and found["s.ids"].rebuilds


def test_a_changed_filter_changes_every_row_downstream(tmp_path: Path) -> None:
    files = {
        **PROJECT,
        "models/paid.sql": PROJECT["models/paid.sql"].replace("= 'paid'", "IN ('paid', 'due')"),
    }
    prod = plan(load(tmp_path / "1", PROJECT))
    result = plan(load(tmp_path / "2", files), prod, "pr_3")
    found = changes(result)
    paid = found["s.paid"].columns
    assert paid is not None and paid.rows_changed and paid.changed == ()
    by_customer = found["s.by_customer"].columns
    assert by_customer is not None and by_customer.rows_changed
    assert by_customer.reads == ("s.paid.*",) and found["s.by_customer"].reached_by == ("s.paid",)
    json = result.to_json()
    assert json["directly_modified"][0]["columns"]["rows_changed"] is True
    assert json["indirectly_modified"][0]["reached_by"] == ["s.paid"]
    assert json["indirectly_modified"][0]["columns"]["reads"] == ["s.paid.*"]


# -- categories: what lineage proves additive is non-breaking (SQLMesh's rule) -----------

CATEGORY_PROJECT = {
    "config.yaml": PROJECT["config.yaml"],
    "models/orders.sql": PROJECT["models/orders.sql"],
    "models/wide.sql": """
        MODEL (name s.wide, kind FULL);
        WITH o AS (SELECT id, amount FROM s.orders) SELECT * FROM o
    """,
}


def _category_of(tmp_path: Path, old: str, new: str) -> tuple[Category, ColumnImpact | None]:
    prod = plan(load(tmp_path / "1", CATEGORY_PROJECT))
    text = CATEGORY_PROJECT["models/wide.sql"]
    assert old in text
    project = load(tmp_path / "2", {**CATEGORY_PROJECT, "models/wide.sql": text.replace(old, new)})
    [change] = plan(project, prod, "pr_1").directly_modified
    return change.category, change.columns


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        # A column added inside a CTE that a SELECT * passes on: rows cannot change.
        ("SELECT id, amount FROM s.orders", "SELECT id, amount, status FROM s.orders",
         Category.NON_BREAKING),
        # The same under DISTINCT: the new column takes part in the de-duplication.
        ("SELECT id, amount FROM s.orders", "SELECT DISTINCT id, amount, status FROM s.orders",
         Category.BREAKING),
        # An aggregate where there was none folds the rows into one.
        ("SELECT id, amount FROM s.orders", "SELECT id, amount, COUNT(*) AS n FROM s.orders",
         Category.BREAKING),
        # A new column plus a filter: the rows change.
        ("SELECT id, amount FROM s.orders",
         "SELECT id, amount, status FROM s.orders WHERE status = 'paid'", Category.BREAKING),
        # A column changed alongside one added.
        ("SELECT id, amount FROM s.orders", "SELECT id, amount * 2 AS amount, status FROM s.orders",
         Category.BREAKING),
    ],
)  # fmt: skip
def test_a_column_added_where_lineage_proves_the_rows_stay_is_non_breaking(
    tmp_path: Path, old: str, new: str, expected: Category
) -> None:
    category, columns = _category_of(tmp_path, old, new)
    assert category == expected
    assert columns is not None
    if expected == Category.NON_BREAKING:
        assert columns.added == ("status",) and not columns.rows_changed
    else:
        assert columns.rows_changed or columns.changed or columns.unknown


def test_distinct_and_group_by_all_make_every_projection_decide_the_rows() -> None:
    schema = {"s.t": ["a", "b", "x"]}
    for old, new in [
        ("SELECT DISTINCT a FROM s.t", "SELECT DISTINCT a, b FROM s.t"),
        ("WITH c AS (SELECT DISTINCT a FROM s.t) SELECT a FROM c",
         "WITH c AS (SELECT DISTINCT a, b FROM s.t) SELECT a, b FROM c"),
        ("SELECT a, SUM(x) AS s FROM s.t GROUP BY ALL",
         "SELECT a, b, SUM(x) AS s FROM s.t GROUP BY ALL"),
    ]:  # fmt: skip
        impact = compare_queries(old, new, schema)
        assert impact.added == ("b",) and impact.rows_changed, new
    grouped = compare_queries(
        "SELECT a, SUM(x) AS s FROM s.t GROUP BY a",
        "SELECT a, SUM(x) AS s, MAX(b) AS m FROM s.t GROUP BY a",
        schema,
    )
    assert grouped.added == ("m",) and not grouped.rows_changed
