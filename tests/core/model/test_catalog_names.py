"""Catalog-qualified names (issue 20 item 6): ``catalog.schema.table`` read, normalized and
placed (sluice/core/model/names.py), and the fixture project
tests/fixtures/sqlmesh_projects/catalog_names/ loaded and planned.

SQLMesh 0.236.4 on the same fixture (duckdb gateway with the catalogs ``local`` and
``lake``, the ``sluice:`` section removed) loads the same six models and edges, with
``local`` as its default catalog, and names the physical tables the same way Sluice does:
``lake.sqlmesh__finance.finance__revenue__<v>`` for the model in ``lake``,
``local.sqlmesh__shop.shop__orders__<v>`` for those in its default catalog, and the views
of an environment ``lake.finance__dev.revenue``. One difference, decided here: SQLMesh's
fingerprint of a model changes when its query writes ``local.shop.orders`` instead of
``shop.orders`` (it hashes the query as written); Sluice's does not, since both name the
same table.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from sluice.core.config import SluiceSettings, SparkSettings
from sluice.core.errors import GraphError, ModelError, SluiceError
from sluice.core.model import names
from sluice.core.model.loader import load_project
from sluice.core.model.names import Catalogs, NameProblem, canonical, catalogs_of, split_text
from sluice.core.model.unittests import parse_unit_tests
from sluice.core.plan import lineage
from sluice.core.snapshot.fingerprint import fingerprint_models
from sluice.core.timeutil import to_ms
from tests.core.helpers import load, plan_of, write_project

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "sqlmesh_projects" / "catalog_names"
CATS = Catalogs(project_default="local", configured=("lake",))
END = to_ms("2024-02-01")
DUCKDB_LOCAL = """
    gateways:
      local:
        connection:
          type: duckdb
          database: local.db
    model_defaults:
      dialect: duckdb
      start: '2024-01-01'
"""
LAKE = """
    sluice:
      spark:
        conf:
          spark.sql.catalog.lake: org.example.LakeCatalog
          spark.sql.catalog.lake.uri: http://x
"""


# --- names.py: parsing and normalization ---------------------------------------------


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("sales.orders", "sales.orders"),
        ("Sales.Orders", "sales.orders"),
        ("local.sales.orders", "sales.orders"),
        ("LOCAL.sales.orders", "sales.orders"),
        ('"local"."Sales"."orders"', "sales.orders"),
        ("`local`.`sales`.`orders`", "sales.orders"),
        ("spark_catalog.sales.orders", "sales.orders"),
        ("lake.sales.orders", "lake.sales.orders"),
        ('"Lake".sales."ORDERS"', "lake.sales.orders"),
        ("lake.1x.orders", "lake.1x.orders"),
    ],
)
def test_names_in_every_form_have_one_canonical_form(written: str, expected: str) -> None:
    assert canonical(split_text(written), CATS) == expected


@pytest.mark.parametrize(
    "written", ["orders", "a.b.c.d", "sales.or-ders", "sales.", ".orders", "sales.ord ers"]
)
def test_a_name_of_another_shape_is_refused(written: str) -> None:
    with pytest.raises(NameProblem) as info:
        canonical(split_text(written), CATS)
    assert "must be schema.table or catalog.schema.table" in info.value.message
    assert info.value.catalog is None


def test_an_unknown_catalog_names_the_known_ones_and_how_to_add_one() -> None:
    with pytest.raises(NameProblem) as info:
        canonical(split_text("warehouse.sales.orders"), CATS)
    problem = info.value
    assert problem.catalog == "warehouse"
    assert problem.message == (
        "'warehouse.sales.orders' names the catalog 'warehouse', which Sluice does not know"
    )
    assert problem.hint.startswith(
        "known catalogs: spark_catalog (Spark's current catalog), local (the project's "
        "default catalog, the same as spark_catalog), lake (spark.sql.catalog.lake)."
    )
    assert "spark.sql.catalog.warehouse" in problem.hint and "SLUICE_SPARK_CONF" in problem.hint


def test_spark_s_default_catalog_setting_moves_the_default() -> None:
    cats = catalogs_of(
        {"spark.sql.catalog.lake": "x", "spark.sql.defaultCatalog": "lake"}, project_default=None
    )
    assert cats.defaults == {"lake"}
    # Two-part names now live in `lake` (Spark resolves them there); the session catalog
    # is another catalog a name may still name.
    assert canonical(["lake", "s", "t"], cats) == "s.t"
    assert canonical(["spark_catalog", "s", "t"], cats) == "spark_catalog.s.t"


def test_the_project_default_wins_over_a_configured_catalog_of_the_same_name() -> None:
    cats = catalogs_of({"spark.sql.catalog.main": "x"}, project_default="main")
    assert canonical(["main", "s", "t"], cats) == "s.t"
    assert cats.others == ()  # `main` and spark_catalog both mean Spark's current catalog


def test_a_catalog_configured_in_upper_case_is_named_in_the_hint() -> None:
    cats = catalogs_of({"spark.sql.catalog.Lake": "x"}, project_default=None)
    assert cats.configured == () and cats.unusable == ("Lake",)
    with pytest.raises(NameProblem) as info:
        canonical(["lake", "s", "t"], cats)
    assert "configured as 'Lake'" in info.value.hint
    assert "spark.sql.catalog.lake" in info.value.hint


def test_catalog_options_are_not_catalogs() -> None:
    cats = catalogs_of(
        {
            "spark.sql.catalog.lake": "x",
            "spark.sql.catalog.lake.type": "hadoop",
            "spark.sql.catalog.lake.warehouse": "/w",
            "spark.sql.catalog.": "y",
            "spark.sql.shuffle.partitions": "4",
        },
        project_default=None,
    )
    assert cats.configured == ("lake",)


@pytest.mark.parametrize(
    ("connection", "expected"),
    [
        ({"type": "duckdb", "database": "local.db"}, "local"),
        ({"type": "duckdb", "database": "data/Jaffle.duckdb"}, "jaffle"),
        ({"type": "duckdb", "catalogs": {"main_db": "a.db", "other": "b.db"}}, "main_db"),
        ({"type": "duckdb"}, "memory"),
        ({"type": "duckdb", "database": ":memory:"}, "memory"),
        ({"type": "motherduck", "database": "my_db"}, "my_db"),
        ({"type": "databricks", "catalog": "Main"}, "main"),
        ({"type": "bigquery", "project": "proj"}, "proj"),
        ({"type": "snowflake", "database": "ANALYTICS"}, "analytics"),
        ({"type": "postgres", "database": "wh"}, "wh"),
        ({"type": "trino", "catalog": "hive"}, "hive"),
        ({"type": "databricks"}, None),
    ],
)
def test_the_project_default_catalog_is_read_from_its_gateway(
    connection: dict[str, object], expected: str | None
) -> None:
    assert names.gateway_catalog({"gateways": {"g": {"connection": connection}}}) == expected


def test_the_default_gateway_is_the_one_named_else_the_first() -> None:
    gateways = {
        "a": {"connection": {"type": "duckdb", "database": "a.db"}},
        "b": {"connection": {"type": "duckdb", "database": "b.db"}},
    }
    assert names.gateway_catalog({"gateways": gateways}) == "a"
    assert names.gateway_catalog({"gateways": gateways, "default_gateway": "b"}) == "b"
    assert names.gateway_catalog({"gateways": {"a": "not a mapping"}}) is None
    assert names.gateway_catalog({}) is None


def test_sql_names_quote_the_parts_spark_would_not_read_as_names() -> None:
    assert names.sql_name("lake.sluice__s.s__t__v1") == "lake.sluice__s.s__t__v1"
    assert names.sql_name("lake.2024.t") == "lake.`2024`.t"
    assert names.sql_name("s", "1e5") == "s.`1e5`"


# --- loading: models, references, graph, externals, tests, audits --------------------


def test_references_in_either_form_are_one_model(tmp_path: Path) -> None:
    project = load(
        tmp_path,
        {
            "config.yaml": DUCKDB_LOCAL,
            "models/a.sql": "MODEL (name local.s.a, kind FULL); SELECT 1 AS id",
            "models/b.sql": "MODEL (name s.b, kind FULL); SELECT id FROM local.s.a",
            "models/c.sql": 'MODEL (name "LOCAL"."S".c, kind FULL);\n'
            'SELECT b.id FROM s.b AS b JOIN "local"."s"."a" AS a ON a.id = b.id',
            "models/d.sql": "MODEL (name s.d, kind FULL, depends_on [local.s.c]);\nSELECT 1 AS x",
        },
    )
    assert list(project.models) == ["s.a", "s.b", "s.c", "s.d"]
    assert project.models["s.b"].depends_on == ("s.a",)
    assert project.models["s.c"].depends_on == ("s.a", "s.b")
    assert project.models["s.d"].depends_on == ("s.c",)
    # The default catalog is gone from the kept query too: it is what fingerprints hash.
    assert project.models["s.c"].query_sql == (
        "SELECT b.id FROM s.b AS b JOIN s.a AS a ON a.id = b.id"
    )
    assert project.models["s.a"].catalog is None
    assert any("default catalog is 'local'" in n for n in project.notes)


def test_one_model_named_twice_in_two_forms_is_defined_twice(tmp_path: Path) -> None:
    with pytest.raises(SluiceError) as info:
        load(
            tmp_path,
            {
                "config.yaml": DUCKDB_LOCAL,
                "models/a.sql": "MODEL (name local.s.a, kind FULL); SELECT 1 AS id",
                "models/b.sql": "MODEL (name s.a, kind FULL); SELECT 2 AS id",
            },
        )
    assert "model s.a is defined twice" in str(info.value)


def test_a_model_in_a_configured_catalog_is_its_own_model(tmp_path: Path) -> None:
    project = load(
        tmp_path,
        {
            "config.yaml": DUCKDB_LOCAL + LAKE,
            "external_models.yaml": "- name: LAKE.raw.events\n  columns: {id: int}\n",
            "models/a.sql": "MODEL (name lake.s.a, kind FULL); SELECT id FROM lake.raw.events",
            "models/b.sql": "MODEL (name s.a, kind FULL); SELECT id FROM lake.s.a",
            "models/c.sql": "MODEL (name s.c, kind FULL);\n"
            'SELECT x.id FROM "lake".s.a AS x JOIN s.a AS y USING (id)',
        },
    )
    assert set(project.models) == {"lake.raw.events", "lake.s.a", "s.a", "s.c"}
    lake_a = project.models["lake.s.a"]
    assert (lake_a.catalog, lake_a.schema, lake_a.table) == ("lake", "s", "a")
    assert project.models["s.a"].depends_on == ("lake.s.a",)
    assert project.models["s.c"].depends_on == ("lake.s.a", "s.a")
    assert project.models["s.c"].query_sql == (
        "SELECT x.id FROM lake.s.a AS x JOIN s.a AS y USING (id)"
    )


def test_a_catalog_of_a_pull_request_s_own_spark_settings_is_not_used(tmp_path: Path) -> None:
    """The service loads a PR's project with the trusted ``sluice:`` settings: catalogs
    come from them (the service's Spark settings), never from the PR's config.yaml."""
    root = write_project(
        tmp_path,
        {
            "config.yaml": DUCKDB_LOCAL + LAKE,
            "models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT 1 AS id FROM lake.s.x",
        },
    )
    with pytest.raises(ModelError) as info:
        load_project(root, use_cache=False, sluice=SluiceSettings())
    assert info.value.line == 2 and info.value.col == 21
    assert "names the catalog 'lake', which Sluice does not know" in info.value.message
    trusted = SluiceSettings(spark=SparkSettings(conf={"spark.sql.catalog.lake": "x"}))
    with pytest.raises(GraphError, match=re.escape("reads 'lake.s.x'")):
        load_project(root, use_cache=False, sluice=trusted)


@pytest.mark.parametrize(
    ("files", "where", "message"),
    [
        (
            {"models/a.sql": "MODEL (\n  name dwh.s.a,\n  kind FULL\n);\nSELECT 1 AS id"},
            ("models/a.sql", 2, 8),
            "model name 'dwh.s.a' names the catalog 'dwh', which Sluice does not know",
        ),
        (
            {"models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT id\nFROM   dwh.s.b"},
            ("models/a.sql", 3, 8),
            "'dwh.s.b' names the catalog 'dwh', which Sluice does not know",
        ),
        (
            {"models/a.sql": 'MODEL (name s.a, kind FULL);\nSELECT id FROM s.b JOIN "Dwh".s.c'},
            ("models/a.sql", 2, 25),
            "'dwh.s.c' names the catalog 'dwh', which Sluice does not know",
        ),
        (
            {"models/a.sql": "MODEL (\n  name s.a,\n  depends_on [dwh.s.b]\n);\nSELECT 1 AS x"},
            ("models/a.sql", 3, 15),
            "depends_on 'dwh.s.b' names the catalog 'dwh', which Sluice does not know",
        ),
        (
            {"external_models.yaml": "- name: raw.ok\n- name: dwh.raw.events\n"},
            ("external_models.yaml", 2, None),
            "external table 'dwh.raw.events' names the catalog 'dwh', which Sluice does not know",
        ),
    ],
)
def test_an_unknown_catalog_is_an_error_at_its_file_and_line(
    tmp_path: Path,
    files: dict[str, str],
    where: tuple[str, int, int | None],
    message: str,
) -> None:
    with pytest.raises(SluiceError) as info:
        load(tmp_path, {"config.yaml": DUCKDB_LOCAL, **files})
    error = info.value
    assert isinstance(error, ModelError), str(error)
    assert (Path(error.path or "").name, error.line, error.col) == (
        Path(where[0]).name,
        where[1],
        where[2],
    ), str(error)
    assert error.message == message
    assert error.hint and "known catalogs: spark_catalog (Spark's current catalog), local" in (
        error.hint
    )


def test_a_three_part_name_without_a_project_default_needs_a_catalog(tmp_path: Path) -> None:
    """Without a gateway there is no project default: `local` is just an unknown catalog."""
    with pytest.raises(ModelError, match="names the catalog 'local'"):
        load(tmp_path, {"models/a.sql": "MODEL (name local.s.a, kind FULL); SELECT 1 AS id"})


def test_the_parse_cache_follows_the_catalogs(tmp_path: Path) -> None:
    root = write_project(
        tmp_path,
        {
            "config.yaml": DUCKDB_LOCAL + LAKE,
            "models/a.sql": "MODEL (name s.a, kind FULL); SELECT 1 AS id",
            "models/b.sql": "MODEL (name lake.s.b, kind FULL); SELECT id FROM s.a",
        },
    )
    assert "lake.s.b" in load_project(root).models
    # The same files under settings without `lake`: not served from the cache.
    with pytest.raises(ModelError, match="names the catalog 'lake'"):
        load_project(root, sluice=SluiceSettings())


def test_unit_tests_name_models_and_inputs_in_either_form() -> None:
    from sluice.core.model.definition import Kind, KindName, Model
    from sluice.core.yamlio import parse_yaml

    models = {
        "s.a": Model(name="s.a", kind=Kind(KindName.FULL)),
        "s.b": Model(name="s.b", kind=Kind(KindName.FULL), depends_on=("s.a",)),
    }
    doc = parse_yaml(
        "t:\n  model: LOCAL.s.b\n  inputs:\n    local.s.a: {rows: [{id: 1}]}\n"
        "  outputs: {query: {rows: [{id: 1}]}}\n",
        "tests/t.yaml",
    )
    (test,) = parse_unit_tests(doc, models, catalogs=CATS)
    assert test.model == "s.b" and test.inputs[0][0] == "s.a"
    with pytest.raises(ModelError, match=re.escape("model 'dwh.s.b' does not exist")):
        parse_unit_tests(parse_yaml("t:\n  model: dwh.s.b\n", "t.yaml"), models, catalogs=CATS)


def test_lineage_reads_tables_of_two_catalogs(tmp_path: Path) -> None:
    import sqlglot

    query = sqlglot.parse_one(
        "SELECT a.id, b.v FROM s.a AS a JOIN lake.s.b AS b ON a.id = b.id", read="spark"
    )
    shape = lineage.analyse(query, {"s.a": ["id"], "lake.s.b": ["id", "v"]})
    assert not shape.unknown
    deps = {d for column in shape.deps.values() for d in column}
    assert ("lake.s.b", "v") in deps and ("s.a", "id") in deps


# --- fingerprints: writing the default catalog changes nothing -----------------------


def _strip_default_catalog(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file() and path.suffix in (".sql", ".yaml") and path.name != "config.yaml":
            text = path.read_text(encoding="utf-8")
            path.write_text(re.sub(r'"?local"?\.', "", text), encoding="utf-8")


def test_adding_the_default_catalog_everywhere_changes_no_fingerprint(tmp_path: Path) -> None:
    shutil.copytree(FIXTURE, tmp_path / "prefixed")
    shutil.copytree(FIXTURE, tmp_path / "plain")
    _strip_default_catalog(tmp_path / "plain")
    assert "local." not in (tmp_path / "plain" / "models" / "shop" / "customers.sql").read_text()
    prefixed = load_project(tmp_path / "prefixed", use_cache=False)
    plain = load_project(tmp_path / "plain", use_cache=False)
    assert list(prefixed.models) == list(plain.models)
    one = fingerprint_models(prefixed.models, prefixed.audits)
    other = fingerprint_models(plain.models, plain.audits)
    assert one == other
    # ... and a plan of one on top of the other's changes nothing.
    base = plan_of(plain, end=END)
    again = plan_of(prefixed, base, end=END)
    assert again.directly_modified == () and again.indirectly_modified == ()
    assert {s.name: s.table for s in again.snapshots} == {s.name: s.table for s in base.snapshots}


def test_moving_a_model_to_another_catalog_is_a_new_model(tmp_path: Path) -> None:
    shutil.copytree(FIXTURE, tmp_path / "p")
    base = plan_of(load_project(tmp_path / "p", use_cache=False), end=END)
    path = tmp_path / "p" / "models" / "finance" / "revenue.sql"
    path.write_text(path.read_text().replace("lake.finance.revenue", "finance.revenue"))
    report = tmp_path / "p" / "models" / "shop" / "report.sql"
    report.write_text(report.read_text().replace("lake.finance.revenue", "finance.revenue"))
    plan = plan_of(load_project(tmp_path / "p", use_cache=False), base, end=END)
    assert plan.removed == ("lake.finance.revenue",)
    assert "finance.revenue" in {s.name for s in plan.snapshots}


# --- the fixture project -------------------------------------------------------------


def test_the_fixture_loads_the_models_sqlmesh_loads_and_plans() -> None:
    project = load_project(FIXTURE, use_cache=False)
    # SQLMesh 0.236.4: "local"."shop"."orders", "local"."shop"."customers",
    # "local"."shop"."report", "local"."raw"."orders", "lake"."finance"."revenue",
    # "lake"."raw"."rates" (local is its default catalog).
    assert set(project.models) == {
        "shop.orders",
        "shop.customers",
        "shop.report",
        "raw.orders",
        "lake.finance.revenue",
        "lake.raw.rates",
    }
    assert project.models["lake.finance.revenue"].depends_on == (
        "lake.raw.rates",
        "shop.customers",
    )
    assert project.models["shop.report"].depends_on == ("lake.finance.revenue",)
    assert project.tests[0].model == "shop.customers"
    assert project.tests[0].inputs[0][0] == "shop.orders"
    assert "FROM shop.orders" in project.audits["customer_has_orders"].query_sql
    plan = plan_of(project, end=END)
    tables = {s.name: s.table for s in plan.snapshots}
    version = {s.name: s.version for s in plan.snapshots}
    assert tables["lake.finance.revenue"] == (
        f"lake.sluice__finance.finance__revenue__{version['lake.finance.revenue']}"
    )
    assert tables["shop.orders"] == f"sluice__shop.shop__orders__{version['shop.orders']}"
    assert {b.name for b in plan.backfill} == {
        "shop.orders",
        "shop.customers",
        "lake.finance.revenue",
    }


def test_a_restatement_names_a_model_in_either_form() -> None:
    from sluice.core.errors import PlanError
    from sluice.core.workflow import resolve_restatements

    project = load_project(FIXTURE, use_cache=False)
    assert resolve_restatements(project, ["+LOCAL.shop.customers"]) == {
        "shop.customers",
        "lake.finance.revenue",
        "shop.report",
    }
    assert resolve_restatements(project, ["lake.finance.revenue"]) == {"lake.finance.revenue"}
    with pytest.raises(PlanError, match=re.escape("cannot restate 'finance.revenue'")):
        resolve_restatements(project, ["finance.revenue"])  # another model: not in `lake`


def test_a_bigquery_project_id_is_the_default_catalog(tmp_path: Path) -> None:
    """A BigQuery project id may have hyphens: it is a default catalog, never kept."""
    config = """
        gateways:
          bq:
            connection:
              type: bigquery
              project: My-Proj
        model_defaults:
          dialect: bigquery
    """
    project = load(
        tmp_path,
        {
            "config.yaml": config,
            "models/a.sql": 'MODEL (name "my-proj".shop.orders, kind FULL);\nSELECT 1 AS id',
            "models/b.sql": "MODEL (name shop.items, kind FULL);\n"
            "SELECT o.id FROM `my-proj.shop.orders` AS o JOIN `my-proj`.shop.orders AS p "
            "USING (id)",
        },
    )
    assert set(project.models) == {"shop.orders", "shop.items"}
    assert project.models["shop.items"].query_sql == (
        "SELECT o.id FROM shop.orders AS o JOIN shop.orders AS p USING (id)"
    )
    with pytest.raises(ModelError) as info:
        load(
            tmp_path / "other",
            {
                "config.yaml": config,
                "models/c.sql": "MODEL (name s.c, kind FULL);\nSELECT id FROM `x-proj.s.a`",
            },
        )
    assert (
        info.value.message == "'x-proj.s.a' names the catalog 'x-proj', which Sluice does not know"
    )
    assert (info.value.line, info.value.col) == (2, 16)
