"""on_destructive_change: a forward-only change that drops or retypes a column of a table
that keeps its rows is an error, a warning or allowed, as the model says."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.core.errors import PlanError
from sluice.core.plan.plan import Plan
from sluice.core.snapshot.snapshot import Category
from sluice.core.timeutil import to_ms
from tests.core.helpers import load, plan_of

END = to_ms("2024-01-05")
CONFIG = "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n  cron: '@daily'\n"
HEADER = "MODEL (name s.orders, kind INCREMENTAL_BY_TIME_RANGE (time_column ds{more}){props});\n"
QUERY = "SELECT id, ds, amount, discount FROM VALUES (1, DATE '2024-01-01', 2.0, 0.5) AS t(id, ds, amount, discount)\n"


def _files(query: str, more: str = ", forward_only true", props: str = "") -> dict[str, str]:
    return {
        "config.yaml": CONFIG,
        "models/orders.sql": HEADER.format(more=more, props=props) + query,
    }


def _plans(tmp_path: Path, query: str, **kwargs: str) -> tuple[Plan, Plan]:
    prod = plan_of(load(tmp_path / "1", _files(QUERY, **kwargs)), end=END)
    return prod, plan_of(load(tmp_path / "2", _files(query, **kwargs)), prod, end=END)


def test_dropping_a_column_forward_only_is_an_error_naming_it(tmp_path: Path) -> None:
    dropped = QUERY.replace("SELECT id, ds, amount, discount", "SELECT id, ds, amount")
    with pytest.raises(
        PlanError, match=r"forward-only change to s\.orders drops column discount"
    ) as err:
        _plans(tmp_path, dropped)
    assert err.value.path and err.value.path.endswith("orders.sql") and err.value.line == 1
    assert "remove forward_only" in (err.value.hint or "")


def test_warn_plans_it_with_a_warning_and_allow_silently(tmp_path: Path) -> None:
    dropped = QUERY.replace("SELECT id, ds, amount, discount", "SELECT id, ds, amount")
    _, warned = _plans(
        tmp_path / "w", dropped, more=", forward_only true, on_destructive_change warn"
    )
    assert warned.directly_modified[0].category == Category.FORWARD_ONLY
    assert any("drops column discount" in w for w in warned.warnings)
    _, allowed = _plans(
        tmp_path / "a", dropped, more=", forward_only true, on_destructive_change allow"
    )
    assert not any("discount" in w for w in allowed.warnings)


def test_a_retyped_declared_column_is_destructive(tmp_path: Path) -> None:
    typed = ", columns (id INT, ds DATE, amount DOUBLE, discount DOUBLE)"
    prod = plan_of(load(tmp_path / "1", _files(QUERY, props=typed)), end=END)
    retyped = _files(
        QUERY.replace("0.5)", "'half')"), props=typed.replace("discount DOUBLE", "discount STRING")
    )
    with pytest.raises(PlanError, match="changes column discount from DOUBLE to STRING"):
        plan_of(load(tmp_path / "2", retyped), prod, end=END)


def test_adding_a_column_or_a_breaking_change_is_not_destructive(tmp_path: Path) -> None:
    added = QUERY.replace("amount, discount FROM", "amount, discount, 1 AS extra FROM")
    _, plan = _plans(tmp_path / "add", added)
    assert plan.directly_modified[0].category == Category.FORWARD_ONLY
    assert not plan.warnings
    # Not forward-only: the table is rebuilt, nothing already there is lost.
    dropped = QUERY.replace("SELECT id, ds, amount, discount", "SELECT id, ds, amount")
    _, plan = _plans(tmp_path / "breaking", dropped, more="")
    assert plan.directly_modified[0].category == Category.BREAKING


# -- inferred types (issue 41): SQLMesh compares the types it infers; Sluice does too --------

SOURCES = "- name: raw.o\n  columns:\n    id: INT\n    ds: DATE\n    amount: DOUBLE\n"
FROM_SOURCE = "SELECT id, ds, {amount} FROM raw.o\n"


def _sourced(amount: str, sources: str = SOURCES) -> dict[str, str]:
    files = _files(FROM_SOURCE.format(amount=amount))
    return {**files, "external_models.yaml": sources} if sources else files


def test_a_column_its_query_retypes_is_destructive_without_declared_columns(
    tmp_path: Path,
) -> None:
    # amount is a DOUBLE (raw.o declares it), then an INT: nothing declares the model's
    # columns, so only the inferred types tell.
    prod = plan_of(load(tmp_path / "1", _sourced("amount")), end=END)
    retyped = load(tmp_path / "2", _sourced("CAST(amount AS INT) AS amount"))
    with pytest.raises(PlanError, match=r"changes column amount from DOUBLE to INT \(inferred\)"):
        plan_of(retyped, prod, end=END)
    # The same change with a parent whose columns nobody declares: no type is known,
    # nothing is claimed (and nothing is dropped).
    prod = plan_of(load(tmp_path / "3", _sourced("amount", sources="")), end=END)
    unknown = load(tmp_path / "4", _sourced("amount + 0 AS amount", sources=""))
    plan = plan_of(unknown, prod, end=END)
    assert plan.directly_modified[0].category == Category.FORWARD_ONLY
    assert not plan.warnings


def test_an_inferred_widening_of_a_number_is_not_destructive(tmp_path: Path) -> None:
    # sqlglot promotes COALESCE of an INT to a BIGINT (Spark keeps an INT): a false refusal
    # the oracle found (scd_type_2). A wider number of its kind loses nothing.
    prod = plan_of(load(tmp_path / "1", _sourced("amount")), end=END)
    widened = load(tmp_path / "2", _sourced("amount, COALESCE(id, id) AS id2"))
    plan_of(widened, prod, end=END)  # an added column: planned
    coalesced = _sourced("amount").copy()
    coalesced["models/orders.sql"] = coalesced["models/orders.sql"].replace(
        "SELECT id,", "SELECT COALESCE(id, id) AS id,"
    )
    plan = plan_of(load(tmp_path / "3", coalesced), prod, end=END)
    assert plan.directly_modified[0].category == Category.FORWARD_ONLY
    # Narrowed, it is refused as before.
    narrowed = _sourced("amount").copy()
    narrowed["models/orders.sql"] = narrowed["models/orders.sql"].replace(
        "SELECT id,", "SELECT CAST(id AS SMALLINT) AS id,"
    )
    with pytest.raises(PlanError, match=r"changes column id from INT to SMALLINT \(inferred\)"):
        plan_of(load(tmp_path / "4", narrowed), prod, end=END)


def test_an_inferred_type_never_hides_a_declared_retype_or_a_drop() -> None:
    from sluice.core.model.definition import Kind, KindName, Model
    from sluice.core.plan.destructive import destructive_columns

    kind = Kind(KindName.FULL)
    old = Model("s.t", kind, columns=(("id", "INT"), ("v", "DOUBLE"), ("gone", "INT")))
    new = Model("s.t", kind, columns=(("id", "INT"), ("v", "STRING")))
    # Inferred types that agree (or are unknown) change nothing of what the declared
    # columns and the names say.
    same = (("id", "INT"), ("v", "DOUBLE"), ("gone", "INT"))
    for old_types, new_types in ((same, same), (same, (("id", ""), ("v", ""))), (None, None)):
        found = destructive_columns(old, new, None, None, old_types, new_types)
        assert found == ["drops column gone", "changes column v from DOUBLE to STRING"]
    # An inferred change of a column the declared types do not cover is added, once.
    found = destructive_columns(
        Model("s.t", kind, query_sql="SELECT 1 AS id"),
        Model("s.t", kind, query_sql="SELECT 'x' AS id"),
        None,
        None,
        (("id", "INT"),),
        (("id", "STRING"),),
    )
    assert found == ["changes column id from INT to STRING (inferred)"]


def test_types_are_inferred_only_where_they_may_differ() -> None:
    from sluice.core.model.definition import Kind, KindName, Model
    from sluice.core.plan.destructive import types_may_differ

    def model(sql: str) -> Model:
        return Model("s.t", Kind(KindName.FULL), query_sql=sql, depends_on=("s.p",))

    base = model("SELECT a, b + 1 AS b FROM s.p WHERE a > 0")
    same_types = [
        "SELECT a, b + 1 AS b, 'x' AS c FROM s.p WHERE a > 0",  # a column added
        "SELECT a FROM s.p WHERE a > 0",  # one dropped (the names say so)
        "SELECT b + 1 AS b, a FROM s.p WHERE a > 1 ORDER BY a LIMIT 5",  # other rows
        "SELECT a, b + 1 AS b FROM s.p WHERE a > 0 GROUP BY a, b",
    ]
    for sql in same_types:
        assert not types_may_differ(base, model(sql), parents_may=False), sql
        assert types_may_differ(base, model(sql), parents_may=True), sql
    may_differ = [
        "SELECT a, b + 1.5 AS b FROM s.p WHERE a > 0",  # a column's expression
        "SELECT a, b + 1 AS b FROM s.q AS p WHERE a > 0",  # another table
        "SELECT a, b + 1 AS b FROM s.p JOIN s.r USING (a) WHERE a > 0",
        "SELECT *, b + 1 AS b2 FROM s.p WHERE a > 0",  # a star
        "WITH p AS (SELECT 1 AS a, 2 AS b) SELECT a, b + 1 AS b FROM p WHERE a > 0",
    ]
    for sql in may_differ:
        assert types_may_differ(base, model(sql), parents_may=False), sql
    # The shared parsed queries are left as they were.
    assert base.query is not None and base.query.sql("spark") == base.query_sql
