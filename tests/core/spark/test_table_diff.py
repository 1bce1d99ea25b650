"""Table diff on real (in-process) Spark: every number of known differences, bad input,
the same-table shortcut, and `sluice table-diff` end to end.

Tables are temp views on the shared ``local_spark`` session. The end-to-end part applies a
copy of the example project whose schema is renamed ``jaffle_td``, so its views and tables
never meet those of test_apply.py in the shared metastore.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from sluice.core import workflow
from sluice.core.model.loader import load_project
from sluice.core.spark.session import SparkPaths
from sluice.core.spark.submit import InProcessRunner
from sluice.core.state import open_state
from sluice.core.tablediff.compute import diff_tables
from sluice.core.tablediff.result import (
    ColumnStats,
    DiffOptions,
    SchemaDiff,
    Sides,
    TableDiffError,
    TableDiffResult,
    TypeChange,
)
from sluice.core.timeutil import to_ms

pytestmark = pytest.mark.spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REPO = Path(__file__).resolve().parents[3]
NOW = to_ms("2018-05-01")

KEYS = "k1 STRING, k2 STRING"
SOURCE = (
    f"{KEYS}, qty INT, price DOUBLE, name STRING, amount DECIMAL(10,2), ratio FLOAT, gone STRING"
)
TARGET = f"{KEYS}, qty BIGINT, price DOUBLE, name STRING, amount DECIMAL(12,3), ratio DOUBLE, fresh BOOLEAN"  # fmt: skip
D = Decimal
SOURCE_ROWS = [
    ("a", "1", 1, 1.0001, "x", D("1.00"), 0.5, "g"),
    ("a", "2", 2, 2.0, "y", D("2.50"), 0.25, "g"),
    ("a", "3", None, None, None, None, None, "g"),
    ("a|b", "c", 4, 4.0, "w", D("4.00"), 1.0, "g"),
    ("n", None, 5, 5.0, "n", D("5.00"), 2.0, "g"),
    (None, None, 6, 6.0, "m", D("6.00"), 3.0, "g"),
    ("d", "1", 7, 7.0, "d", D("7.00"), 4.0, "g"),
    ("d", "1", 8, 8.0, "d", D("8.00"), 5.0, "g"),
    ("r", "1", 9, 9.0, "r", D("9.00"), 6.0, "g"),
]
TARGET_ROWS = [
    ("a", "1", 1, 1.0002, "x", D("1.000"), 0.5, True),
    ("a", "2", 3, 2.01, "y", D("2.500"), 0.25, True),
    ("a", "3", None, None, "z", None, None, True),
    ("a", "b|c", 4, 4.0, "w", D("4.000"), 1.0, True),
    ("n", None, 5, 5.0, "n", D("5.000"), 2.0, True),
    ("d", "1", 7, 7.0, "d", D("7.000"), 4.0, True),
    ("d", "2", 10, 10.0, "e", D("1.000"), 1.0, True),
    ("d", "2", 11, 11.0, "e", D("1.000"), 1.0, True),
    ("t", "1", 12, 12.0, "t", D("1.000"), 1.0, True),
    ("t", "2", 13, 13.0, "t", D("1.000"), 1.0, False),
]
VIEWS = {
    "tdiff_src": (SOURCE, SOURCE_ROWS),
    "tdiff_tgt": (TARGET, TARGET_ROWS),
    # The source with its duplicated key made unique (d/0).
    "tdiff_src_copy": (SOURCE, [r if r[2] != 8 else ("d", "0", *r[2:]) for r in SOURCE_ROWS]),
    "tdiff_empty": ("id INT, v STRING", []),
    "tdiff_tags_array": ("id INT, tags ARRAY<INT>, v INT", [(1, [1], 1)]),
    "tdiff_tags_int": ("id INT, tags INT, v INT", [(1, 1, 2)]),
}


@pytest.fixture(scope="module")
def views(local_spark: SparkSession) -> Iterator[SparkSession]:
    """Temp views with every kind of difference (``tdiff_src`` vs ``tdiff_tgt``) and more."""
    for name, (schema, rows) in VIEWS.items():
        local_spark.createDataFrame(rows, schema).createOrReplaceTempView(name)
    yield local_spark
    for name in VIEWS:
        local_spark.catalog.dropTempView(name)


def _diff(
    spark: SparkSession,
    source: str = "tdiff_src",
    target: str = "tdiff_tgt",
    keys: tuple[str, ...] = ("k1", "k2"),
    **options: Any,
) -> TableDiffResult:
    return diff_tables(spark, source, target, keys=keys, options=DiffOptions(**options))


def test_known_differences_are_counted_exactly(views: SparkSession) -> None:
    result = _diff(views)
    assert (result.source_rows, result.target_rows, result.row_change_pct) == (9, 10, 11.1111)
    # Joined: a/1, a/2, a/3 and (n, NULL), null-safely. ('a|b', 'c') and ('a', 'b|c') stay
    # apart although both would concatenate to 'a|b|c'.
    assert result.joined == 4
    assert (result.source_only, result.target_only) == (3, 3)
    assert result.differing_rows == 2
    assert result.null_keys == Sides(2, 1)
    assert result.duplicate_keys == Sides(1, 1)
    # d/1 is twice in the source (its one target row is left out too); d/2 twice in the target.
    assert result.duplicate_rows == Sides(2, 3)
    assert result.source_rows == result.joined + result.source_only + result.duplicate_rows.source
    assert result.target_rows == result.joined + result.target_only + result.duplicate_rows.target
    assert result.schema == SchemaDiff(
        added=(("fresh", "boolean"),),
        removed=(("gone", "string"),),
        changed=(
            TypeChange("qty", "int", "bigint"),
            TypeChange("amount", "decimal(10,2)", "decimal(12,3)"),
            TypeChange("ratio", "float", "double"),
        ),
    )
    # price: 1.0001 vs 1.0002 match at 3 decimals, 2.0 vs 2.01 do not; NULL equals NULL.
    assert result.columns == {
        "qty": ColumnStats(3, 1),
        "price": ColumnStats(3, 1),
        "name": ColumnStats(3, 1),
        "amount": ColumnStats(4, 0),
        "ratio": ColumnStats(4, 0),
    }
    assert result.columns["qty"].match_rate == 0.75
    assert result.keys == ("k1", "k2") and not result.identical and not result.same_table
    assert result.note == (
        "2 tdiff_src and 3 tdiff_tgt rows have keys that are not unique: "
        "they are counted, not compared"
    )
    row = {"qty": 4, "price": 4.0, "name": "w", "amount": "4.000", "ratio": 1.0}
    assert list(result.samples.source_only) == [
        {"k1": None, "k2": None, "qty": 6, "price": 6.0, "name": "m", "amount": "6.000", "ratio": 3.0},
        {"k1": "a|b", "k2": "c", **row},
        {"k1": "r", "k2": "1", "qty": 9, "price": 9.0, "name": "r", "amount": "9.000", "ratio": 6.0},
    ]  # fmt: skip
    assert [(r["k1"], r["k2"]) for r in result.samples.target_only] == [("a", "b|c"), ("t", "1"), ("t", "2")]  # fmt: skip
    assert result.samples.target_only[0] == {"k1": "a", "k2": "b|c", **row}
    assert list(result.samples.differing) == [
        {"k1": "a", "k2": "2", "qty": {"source": 2, "target": 3},
         "price": {"source": 2.0, "target": 2.01}},
        {"k1": "a", "k2": "3", "name": {"source": None, "target": "z"}},
    ]  # fmt: skip
    data = json.loads(json.dumps(result.to_json()))
    assert data["joined"] == 4 and data["columns"]["name"]["match_rate"] == 0.75


def test_tolerance_decimals_sample_size_skip_and_where(views: SparkSession) -> None:
    loose = _diff(views, tolerance=0.015, sample=1)
    assert loose.columns["price"] == ColumnStats(4, 0)
    assert loose.columns["qty"] == ColumnStats(3, 1)  # 2 vs 3 is beyond 0.015
    assert loose.differing_rows == 2
    assert [(r["k1"], r["k2"]) for r in loose.samples.differing] == [("a", "2")]
    assert len(loose.samples.source_only) == len(loose.samples.target_only) == 1
    looser = _diff(views, tolerance=1.0, sample=0)
    assert looser.columns["qty"] == ColumnStats(4, 0) and looser.differing_rows == 1
    assert looser.samples.differing == () and looser.samples.source_only == ()
    fine = _diff(views, decimals=5)
    assert fine.columns["price"] == ColumnStats(2, 2)  # now 1.0001 vs 1.0002 differs too
    assert fine.differing_rows == 3
    narrowed = _diff(views, skip=("name", "QTY"), where="k1 = 'a' AND coalesce(price, 0) < 2")
    assert narrowed.where == "k1 = 'a' AND COALESCE(price, 0) < 2"
    assert narrowed.skipped == ("name", "qty")
    assert list(narrowed.columns) == ["price", "amount", "ratio"]
    # Rows a/1 and a/3 on both sides: identical values, but the schema still differs.
    assert (narrowed.source_rows, narrowed.target_rows, narrowed.joined) == (2, 2, 2)
    assert narrowed.differing_rows == 0 and not narrowed.identical


def test_identical_and_empty_tables(views: SparkSession) -> None:
    itself = _diff(views, "tdiff_src", "tdiff_src")
    assert (itself.source_rows, itself.target_rows, itself.row_change_pct) == (9, 9, 0.0)
    assert (itself.joined, itself.source_only, itself.target_only) == (7, 0, 0)
    assert itself.differing_rows == 0 and itself.null_keys == Sides(2, 2)
    # Its duplicated key cannot be compared, so identity is not claimed.
    assert itself.duplicate_keys == Sides(1, 1) and itself.duplicate_rows == Sides(2, 2)
    assert not itself.identical and itself.note is not None
    unique = _diff(views, "tdiff_src_copy", "tdiff_src_copy")
    assert unique.identical and unique.note is None and unique.schema == SchemaDiff()
    assert (unique.joined, unique.source_only, unique.target_only, unique.differing_rows) == (9, 0, 0, 0)  # fmt: skip
    assert unique.duplicate_rows == Sides(0, 0) and unique.null_keys == Sides(2, 2)
    assert all(s == ColumnStats(9, 0) for s in unique.columns.values())
    assert unique.samples.differing == unique.samples.source_only == ()
    empty = _diff(views, "tdiff_empty", "tdiff_empty", keys=("id",))
    assert empty.identical and (empty.source_rows, empty.target_rows, empty.joined) == (0, 0, 0)
    assert empty.row_change_pct is None and empty.columns == {"v": ColumnStats(0, 0)}
    assert empty.columns["v"].match_rate is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"keys": ("k1", "gone")}, "key column gone is not in the target (tdiff_tgt: tdiff_tgt)"),
        ({"keys": ()}, "no join keys"),
        ({"skip": ("k1",)}, "k1 is a join key and cannot be skipped"),
        ({"skip": ("nope",)}, "--skip nope: no such column"),
        ({"where": "gone = 'g'"}, "--where reads gone, which tdiff_tgt does not have"),
        ({"where": "upper(name)"}, "is string, not a condition"),
        ({"where": "k1 = 'a' AND"}, "does not parse as a Spark SQL condition"),
        ({"where": "size(qty) > 1"}, "does not run on Spark"),
        ({"source": "tdiff_missing"}, "cannot read the source table tdiff_missing"),
        ({"source": "tdiff_tags_array", "target": "tdiff_tags_int", "keys": ("id",)},
         "column tags is array<int> in tdiff_tags_array and int in tdiff_tags_int: these types do not compare"),
        ({"source": "tdiff_src", "target": "tdiff_tags_int", "keys": ("k1",)}, "key column k1 is not in the target"),
    ],
)  # fmt: skip
def test_bad_input_is_one_clear_error(views: SparkSession, kwargs: dict[str, Any], message: str) -> None:  # fmt: skip
    with pytest.raises(TableDiffError) as info:
        _diff(views, **kwargs)
    assert message in info.value.message
    assert info.value.hint


def test_an_incompatible_column_can_be_skipped(views: SparkSession) -> None:
    with pytest.raises(TableDiffError) as info:
        _diff(views, "tdiff_tags_array", "tdiff_tags_int", keys=("id",))
    assert info.value.hint == "leave it out with --skip tags"
    result = _diff(views, "tdiff_tags_array", "tdiff_tags_int", keys=("id",), skip=("tags",))
    assert result.schema.changed == (TypeChange("tags", "array<int>", "int"),)
    assert result.columns == {"v": ColumnStats(0, 1)} and result.differing_rows == 1
    assert list(result.samples.differing) == [{"id": 1, "v": {"source": 1, "target": 2}}]


# --- through the workflow and the CLI, on the example project ---------------------------


@dataclass
class Project:
    root: Path
    url: str
    spark: SparkSession

    def apply(self, env: str) -> None:
        project = load_project(self.root, use_cache=False)
        store = open_state(self.url)
        try:
            plan = workflow.plan_environment(project, store, env, end=NOW, execution_time=NOW)
            workflow.apply_plan(project, store, plan, self.runner(), url=self.url, now=NOW)
        finally:
            store.close()

    def runner(self, events: list[dict[str, Any]] | None = None) -> InProcessRunner:
        warehouse = Path(self.spark.conf.get("spark.sql.warehouse.dir", "").removeprefix("file:"))
        paths = SparkPaths(root=warehouse.parent, logs=self.root / ".sluice" / "logs")
        on_event = events.append if events is not None else None
        return InProcessRunner(load_project(self.root).config.sluice.spark, paths, on_event=on_event)  # fmt: skip

    def cli(self, *args: str) -> Any:
        from click.testing import CliRunner

        from sluice.core.cli import cli

        return CliRunner().invoke(cli, ["table-diff", *args, "--project", str(self.root), "--state", self.url, "--in-process"])  # fmt: skip


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, local_spark: SparkSession) -> Project:
    """Prod of the example, and pr_td where 9 of 99 orders changed their amount. Without
    the two models downstream of orders that no test here diffs (the batched incremental
    daily_revenue and the PySpark customer_segments): both builds would rebuild them."""
    root = tmp_path_factory.mktemp("tdiff") / "jaffle"
    shutil.copytree(REPO / "examples" / "jaffle_shop", root, ignore=shutil.ignore_patterns(".sluice"))  # fmt: skip
    (root / "models" / "daily_revenue.sql").unlink()
    (root / "models" / "customer_segments.py").unlink()
    for path in [*root.glob("models/*.sql"), *root.glob("models/*.py"), *root.glob("tests/*.yaml")]:
        path.write_text(path.read_text().replace("jaffle.", "jaffle_td."))
    setup = Project(root, f"sqlite:///{root / '.sluice' / 'state.db'}", local_spark)
    setup.apply("prod")
    orders = root / "models" / "orders.sql"
    orders.write_text(orders.read_text().replace(
        "COALESCE(p.total_amount, 0) AS amount",
        "COALESCE(p.total_amount, 0) + IF(o.order_id % 10 = 0, 1, 0) AS amount",
    ))  # fmt: skip
    setup.apply("pr_td")
    return setup


def test_cli_diffs_a_model_between_environments(project: Project) -> None:
    done = project.cli("prod:pr_td", "jaffle_td.orders", "--json")
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    assert (data["name"], data["source"], data["target"], data["keys"]) == ("jaffle_td.orders", "prod", "pr_td", ["order_id"])  # fmt: skip
    assert data["source_table"].startswith("sluice__jaffle_td.jaffle_td__orders__")
    assert data["source_table"] != data["target_table"]
    assert (data["source_rows"], data["target_rows"], data["row_change_pct"]) == (99, 99, 0.0)
    assert (data["joined"], data["source_only"], data["target_only"]) == (99, 0, 0)
    assert data["null_keys"] == data["duplicate_keys"] == {"source": 0, "target": 0}
    assert data["duplicate_rows"] == {"source": 0, "target": 0}
    assert data["schema"] == {"added": [], "removed": [], "changed": []}
    assert data["differing_rows"] == 9 and data["identical"] is False
    assert data["columns"]["amount"] == {"matched": 90, "differed": 9, "match_rate": 90 / 99}
    others = {k: v for k, v in data["columns"].items() if k != "amount"}
    assert len(others) == 7 and all(v["differed"] == 0 for v in others.values())
    first = data["samples"]["differing"][0]
    assert first["order_id"] == 10 and set(first) == {"order_id", "amount"}
    assert first["amount"]["target"] == first["amount"]["source"] + 1
    store = open_state(project.url)
    try:
        pr = store.get_environment("pr_td")
        assert pr is not None
        stored = [r for r in store.get_results(plan_id=pr.plan_id) if r.kind == "table_diff"]
        assert [(r.name, r.passed) for r in stored] == [("jaffle_td.orders", False)]
        assert stored[0].payload == data
    finally:
        store.close()
    shown = project.cli("prod:pr_td", "jaffle_td.orders", "--markdown", "--sample", "2")
    assert shown.exit_code == 0, shown.output
    assert "#### `jaffle_td.orders`: prod → pr_td: 9 rows differ" in shown.stdout
    assert "| `amount` | 90.91% | 9 |" in shown.stdout
    tables = project.cli("--tables", "jaffle_td.orders", "jaffle_td__pr_td.orders", "--on", "order_id", "--where", "order_id <= 20")  # fmt: skip
    assert tables.exit_code == 0, tables.output
    assert "20 rows joined on order_id; 2 differ" in tables.stdout


def test_an_unchanged_model_is_identical_without_spark(project: Project) -> None:
    events: list[dict[str, Any]] = []
    store = open_state(project.url)
    try:
        before = len(store.get_results())
        result = workflow.table_diff(store, project.runner(events), source="prod", target="pr_td",
                                     model="jaffle_td.stg_orders", url=project.url, now=NOW)  # fmt: skip
        assert result.same_table and result.identical and events == []  # no Spark job ran
        assert result.source_table == result.target_table
        assert result.source_table.startswith("sluice__jaffle_td.jaffle_td__stg_orders__")
        assert result.keys == ("order_id",)
        data = result.to_json()
        for key in ("source_rows", "target_rows", "row_change_pct", "joined", "source_only",
                    "target_only", "differing_rows"):  # fmt: skip
            assert data[key] is None, key
        for key in ("null_keys", "duplicate_keys", "duplicate_rows"):
            assert data[key] == {"source": None, "target": None}
        assert data["schema"] == {"added": [], "removed": [], "changed": []}
        assert data["columns"] == {}
        assert data["samples"] == {"source_only": [], "target_only": [], "differing": []}
        assert data["note"] == (
            f"prod and pr_td use the same table {result.source_table}: identical without reading it"
        )
        stored = store.get_results()[before:]
        assert [(r.kind, r.name, r.passed) for r in stored] == [("table_diff", "jaffle_td.stg_orders", True)]  # fmt: skip
    finally:
        store.close()


@pytest.mark.parametrize(
    ("kwargs", "message", "hint"),
    [
        ({"model": "jaffle_td.ordrs"}, "model jaffle_td.ordrs is not in either environment", "did you mean jaffle_td.orders"),
        ({"model": "jaffle_td.orders", "target": "pr_nope"}, "environment 'pr_nope' does not exist", "sluice apply pr_nope"),
        ({"model": None, "source": "jaffle_td.orders", "target": "jaffle_td.customers"}, "no join keys", "--on"),
        ({"model": "jaffle_td.orders", "options": DiffOptions(on=("order_id", "nope"))}, "key column nope is not in the source", "--on"),
        ({"model": "jaffle_td.orders", "options": DiffOptions(where="order_id >")}, "does not parse", "--where"),
    ],
)  # fmt: skip
def test_bad_requests_fail_clearly_and_store_nothing(project: Project, kwargs: dict[str, Any], message: str, hint: str) -> None:  # fmt: skip
    store = open_state(project.url)
    try:
        before = len(store.get_results())
        with pytest.raises(TableDiffError) as info:
            workflow.table_diff(store, project.runner(), **{"source": "prod", "target": "pr_td", "url": project.url, "now": NOW, **kwargs})  # fmt: skip
        assert message in info.value.message
        assert hint in (info.value.hint or "")
        assert len(store.get_results()) == before
    finally:
        store.close()
    refused = project.cli("prod:pr_nope", "jaffle_td.orders")
    assert refused.exit_code == 1 and "error:" in refused.output and "pr_nope" in refused.output
