"""A model's column types, inferred as SQLMesh infers them (issue 41): declared, a seed's,
an external table's, or sqlglot's annotation of the query against its parents' types.
Projects are loaded for real; the shared projects' expected types are what SQLMesh 0.236.4
gives for them (``bench/sqlmesh_compat.py``'s oracle)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sluice.core.errors import PlanError
from sluice.core.model.definition import Kind, KindName, Model
from sluice.core.model.loader import load_project
from sluice.core.plan.column_types import ColumnTypes
from tests.core.helpers import load

REPO = Path(__file__).resolve().parents[3]
SHARED = REPO.parent / "shared" / "compat"
CONFIG = "model_defaults:\n  dialect: {dialect}\n  start: '2024-01-01'\n"
EXTERNALS = """
- name: raw.orders
  columns:
    id: INTEGER
    customer: TEXT
    amount: DOUBLE
    at: TIMESTAMP
"""


def _types(tmp_path: Path, models: dict[str, str], dialect: str = "duckdb") -> ColumnTypes:
    files = {
        "config.yaml": CONFIG.format(dialect=dialect),
        "external_models.yaml": EXTERNALS,
        **{f"models/{name}.sql": text for name, text in models.items()},
    }
    project = load(tmp_path, files)
    return ColumnTypes(project.models, project.config.model_defaults.dialect)


def test_types_flow_from_declared_parents_through_every_layer(tmp_path: Path) -> None:
    types = _types(
        tmp_path,
        {
            "stg": "MODEL (name stg.orders, kind FULL);\n"
            "SELECT id, customer, amount, at, at::DATE AS day FROM raw.orders",
            "mart": "MODEL (name mart.daily, kind FULL);\n"
            "SELECT day, customer, SUM(amount) AS total, COUNT(*) AS n, MAX(id) AS last_id,\n"
            "  CASE WHEN SUM(amount) > 10 THEN 'big' ELSE 'small' END AS size,\n"
            "  COALESCE(MIN(amount), 0) AS least, AVG(id) AS mean\n"
            "FROM stg.orders GROUP BY day, customer",
        },
    )
    # The external table's columns are declared in the project's dialect (DuckDB).
    assert types("raw.orders") == (
        ("id", "INT"),
        ("customer", "STRING"),
        ("amount", "DOUBLE"),
        ("at", "TIMESTAMP_NTZ"),
    )
    assert types("stg.orders") == (*types("raw.orders"), ("day", "DATE"))  # type: ignore[misc]
    assert types("mart.daily") == (
        ("day", "DATE"),
        ("customer", "STRING"),
        ("total", "DOUBLE"),
        ("n", "BIGINT"),
        ("last_id", "INT"),
        ("size", "STRING"),
        ("least", "DOUBLE"),
        ("mean", "DOUBLE"),
    )


def test_a_star_takes_its_parents_types_and_a_declared_model_keeps_its_own(
    tmp_path: Path,
) -> None:
    types = _types(
        tmp_path,
        {
            "all": "MODEL (name stg.all_orders, kind FULL);\nSELECT * FROM raw.orders",
            "declared": "MODEL (name stg.declared, kind FULL, columns (id BIGINT, c TEXT));\n"
            "SELECT id, customer AS c FROM raw.orders",
            "child": "MODEL (name mart.child, kind FULL);\n"
            "SELECT d.id, d.c, a.amount FROM stg.declared AS d JOIN stg.all_orders AS a "
            "ON d.id = a.id",
        },
    )
    assert types("stg.all_orders") == types("raw.orders")
    assert types("stg.declared") == (("id", "BIGINT"), ("c", "STRING"))
    assert types("mart.child") == (("id", "BIGINT"), ("c", "STRING"), ("amount", "DOUBLE"))


def test_a_parent_nobody_describes_leaves_its_columns_unknown_but_not_the_casts(
    tmp_path: Path,
) -> None:
    # As SQLMesh: a parent without known columns means no schema; each projection is
    # annotated alone (a cast or a literal has a type, a plain column none), and a star
    # over it has no columns at all.
    types = _types(
        tmp_path,
        {
            "a": "MODEL (name s.a, kind FULL);\n"
            "SELECT id, CAST(v AS DECIMAL(10, 2)) AS v, 'x' AS tag, 1 AS one FROM ext.unknown",
            "b": "MODEL (name s.b, kind FULL);\nSELECT * FROM ext.unknown",
            "c": "MODEL (name s.c, kind FULL);\nSELECT * FROM s.b",
        },
    )
    assert types("s.a") == (("id", ""), ("v", "DECIMAL(10, 2)"), ("tag", "STRING"), ("one", "INT"))
    assert types("s.b") is None
    assert types("s.c") is None


def test_macros_are_typed_as_the_values_they_render_to(tmp_path: Path) -> None:
    types = _types(
        tmp_path,
        {
            "m": "MODEL (name s.m, kind INCREMENTAL_BY_TIME_RANGE (time_column d));\n"
            "SELECT @start_date AS d, @start_ds AS ds, @start_dt AS ts, id FROM raw.orders\n"
            "WHERE at BETWEEN @start_ts AND @end_ts",
        },
    )
    assert types("s.m") == (("d", "DATE"), ("ds", "STRING"), ("ts", "TIMESTAMP"), ("id", "INT"))


def test_an_scd_type_2_table_has_its_validity_columns(tmp_path: Path) -> None:
    types = _types(
        tmp_path,
        {
            "h": "MODEL (name s.h, kind SCD_TYPE_2_BY_TIME (unique_key id, updated_at_name at));\n"
            "SELECT id, amount, at FROM raw.orders",
        },
    )
    assert types("s.h") == (
        ("id", "INT"),
        ("amount", "DOUBLE"),
        ("at", "TIMESTAMP_NTZ"),
        ("valid_from", "TIMESTAMP"),
        ("valid_to", "TIMESTAMP"),
    )


def test_a_function_only_the_model_s_dialect_types_is_typed_in_it(tmp_path: Path) -> None:
    # sqlglot's Spark reading leaves BigQuery's TIMESTAMP_MICROS a plain call of no type;
    # SQLMesh annotates it in BigQuery, where it is a TIMESTAMP.
    types = _types(
        tmp_path,
        {"e": "MODEL (name web.events, kind FULL);\nSELECT TIMESTAMP_MICROS(0) AS at"},
        dialect="bigquery",
    )
    assert types("web.events") == (("at", "TIMESTAMP"),)


def test_unnamed_or_repeated_columns_are_not_known() -> None:
    def model(name: str, sql: str) -> Model:
        return Model(name, Kind(KindName.FULL), query_sql=sql)

    types = ColumnTypes(
        {
            "s.a": model("s.a", "SELECT 1 + 1"),
            "s.b": model("s.b", "SELECT 1 AS x, 2 AS x"),
            "s.c": model("s.c", "SELECT 1 AS x, 'y' AS y"),
        }
    )
    assert types("s.a") is None
    assert types("s.b") is None
    assert types("s.c") == (("x", "INT"), ("y", "STRING"))


# -- the shared projects -------------------------------------------------------------------


def _shared(name: str, tmp_path: Path) -> ColumnTypes:
    source = SHARED / name
    if not source.is_dir():
        pytest.skip(f"{source} is not here (the shared compatibility projects)")
    root = tmp_path / name
    shutil.copytree(source, root, ignore=shutil.ignore_patterns(".sluice", "*.db"))
    for path in [root, *root.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    project = load_project(root, use_cache=False)
    return ColumnTypes(project.models, project.config.model_defaults.dialect)


def test_wursthall_types_are_sqlmesh_s(tmp_path: Path) -> None:
    types = _shared("sqlmesh_wursthall", tmp_path)
    strings = ("STRING",) * 5
    expected = {
        "db.customer_d": dict(
            zip(("customer_id", "name", "email", "phone", "register_ds"), strings, strict=True)
        ),
        "db.item_d": {
            "item_id": "STRING",
            "item_name": "STRING",
            "item_group": "STRING",
            "item_price": "DOUBLE",
        },
        "db.order_item_f": {
            "order_id": "STRING",
            "customer_id": "STRING",
            "item_id": "STRING",
            "quantity": "SMALLINT",
            "order_amount": "DOUBLE",
            "order_ds": "STRING",
        },
    }
    for name, columns in expected.items():
        assert dict(types(name) or ()) == columns, name


def test_omop_types_are_sqlmesh_s(tmp_path: Path) -> None:
    types = _shared("omop_synthea", tmp_path)
    assert types("stg.map__states") == (
        ("state_name", "STRING"),
        ("state_abbreviation", "STRING"),
    )
    assert dict(types("omop.relationship") or ()) == {
        "relationship_id": "STRING",
        "relationship_name": "STRING",
        "is_hierarchical": "STRING",
        "defines_ancestry": "STRING",
        "reverse_relationship_id": "STRING",
        "relationship_concept_id": "INT",
    }
    visits = dict(types("omop.visit_occurrence") or ())
    assert {c: visits.get(c) for c in ("visit_occurrence_id", "visit_start_datetime")} == {
        "visit_occurrence_id": "BIGINT",
        "visit_start_datetime": "TIMESTAMP_NTZ",
    }
    assert len(visits) == 17 and all(visits.values())
    # Declared TIME: Spark has none, SQLMesh spells it TIMESTAMP for Spark too.
    assert dict(types("int.measurement_observations") or ())["measurement_time"] == "TIMESTAMP"


def test_a_plan_infers_types_only_for_a_forward_only_change_that_may_retype(
    tmp_path: Path,
) -> None:
    from sluice.core.plan import column_types
    from sluice.core.timeutil import to_ms
    from tests.core.helpers import plan_of

    def project(amount: str) -> dict[str, str]:
        header = "MODEL (name s.m, kind INCREMENTAL_BY_TIME_RANGE (time_column at, forward_only true));\n"
        return {
            "config.yaml": CONFIG.format(dialect="spark"),
            "external_models.yaml": EXTERNALS,
            "models/m.sql": header + f"SELECT id, at, {amount} AS amount FROM raw.orders\n",
        }

    end = to_ms("2024-01-03")
    column_types._CACHE.clear()
    prod = plan_of(load(tmp_path / "1", project("amount")), end=end)  # a cold plan
    assert not column_types._CACHE
    # A column added: no type of a column both have can change, none is inferred.
    same = project("amount").copy()
    same["models/m.sql"] = same["models/m.sql"].replace(" FROM", ", 1 AS one FROM")
    plan_of(load(tmp_path / "2", same), prod, end=end)
    assert not column_types._CACHE
    # A column's expression changed: its type is inferred, old and new.
    plan_of(load(tmp_path / "3", project("amount * 2")), prod, end=end)
    assert {key[0] for key in column_types._CACHE} == {"s.m"}


def test_a_parent_s_change_asks_for_types_only_when_it_may_retype(tmp_path: Path) -> None:
    from sluice.core.plan import column_types
    from sluice.core.timeutil import to_ms
    from tests.core.helpers import plan_of

    def project(parent: str) -> dict[str, str]:
        child = "MODEL (name s.m, kind INCREMENTAL_BY_TIME_RANGE (time_column at, forward_only true));\n"
        return {
            "config.yaml": CONFIG.format(dialect="spark"),
            "external_models.yaml": EXTERNALS,
            "models/p.sql": f"MODEL (name s.p, kind FULL);\nSELECT id, at, {parent} FROM raw.orders\n",
            "models/m.sql": child + "SELECT id, at, amount, 1 AS one FROM s.p\n",
        }

    end = to_ms("2024-01-03")
    before = project("amount")
    before["models/m.sql"] = before["models/m.sql"].replace(", 1 AS one", "")
    prod = plan_of(load(tmp_path / "1", before), end=end)
    column_types._CACHE.clear()
    # The parent adds a column, the child too: no column of theirs can change type.
    plan_of(load(tmp_path / "2", project("amount, 2 AS two")), prod, end=end)
    assert not column_types._CACHE
    # The parent's amount is another expression: the child's amount may change type,
    # and does (the child's own query names it as before).
    retyped = load(tmp_path / "3", project("CAST(amount AS INT) AS amount"))
    with pytest.raises(PlanError, match=r"changes column amount from DOUBLE to INT \(inferred\)"):
        plan_of(retyped, prod, end=end)
    assert {key[0] for key in column_types._CACHE} == {"s.m", "s.p"}
