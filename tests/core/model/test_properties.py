"""The MODEL properties of sluice.core.model.properties: how each is read, which ones
change a model's version (SQLMesh's data/metadata split), the notes for those Spark does
not use, ``enabled false``, blueprints, and what the Spark job is told to create."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from sluice.core.config import ModelDefaults
from sluice.core.errors import ModelError
from sluice.core.model import blueprints, parse
from sluice.core.model import header as header_module
from sluice.core.model.blueprints import parse_models
from sluice.core.model.definition import Model
from sluice.core.model.loader import load_project
from sluice.core.model.parse import parse_model
from sluice.core.model.properties import layout_notes, table_layout
from sluice.core.plan.build import PlanRequest, build_plan
from sluice.core.plan.plan import Plan
from sluice.core.snapshot.fingerprint import data_inputs, fingerprint_models
from sluice.core.snapshot.snapshot import Category
from sluice.core.spark.render import build_steps, view_steps
from sluice.core.timeutil import to_ms

PATH = "models/events.sql"
END = to_ms("2024-01-03")
FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "sqlmesh_projects"
QUERY = "SELECT 1 AS id, 7 AS customer_id, CAST('2024-01-01' AS TIMESTAMP) AS ts, 'x' AS ds"


def model(props: str, query: str = QUERY, dialect: str = "spark") -> Model:
    text = f"MODEL (\n  name shop.events,\n  kind FULL,\n  {props}\n);\n{query}\n"
    parsed = parse_model(text, PATH, ModelDefaults(dialect=dialect), {})
    assert parsed is not None
    return parsed


def error(props: str) -> ModelError:
    with pytest.raises(ModelError) as caught:
        model(props)
    return caught.value


def plan(models: list[Model], base: Plan | None = None) -> Plan:
    by_name = {m.name: m for m in models}
    return build_plan(
        PlanRequest(
            environment="prod",
            models=by_name,
            fingerprints=fingerprint_models(by_name, {}),
            base={s.name: s for s in base.snapshots} if base else {},
            base_plan_id=base.plan_id if base else None,
            end=END,
            execution_time=END,
        )
    )


# --- reading ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "read"),
    [
        ("ds", ("ds",)),
        ("'ds'", ("ds",)),
        ("(ds, customer_id)", ("ds", "customer_id")),
        ("DATE(ts)", ("CAST(ts AS DATE)",)),
        ("(DATE(ts), customer_id)", ("CAST(ts AS DATE)", "customer_id")),
        ("(DATE_TRUNC('month', ts))", ("DATE_TRUNC('MONTH', ts)",)),
    ],
)
def test_partitioned_by_takes_columns_and_expressions(written: str, read: tuple[str]) -> None:
    assert model(f"partitioned_by {written}").partitioned_by == read


def test_an_expression_is_read_in_the_models_dialect() -> None:
    parsed = model("partitioned_by TIMESTAMP_TRUNC(ts, DAY)", dialect="bigquery")
    assert parsed.partitioned_by == ("DATE_TRUNC('DAY', ts)",)


def test_clustered_by_takes_one_column_or_a_list() -> None:
    assert model("clustered_by customer_id").clustered_by == ("customer_id",)
    assert model("clustered_by (customer_id, id)").clustered_by == ("customer_id", "id")


def test_a_column_named_twice_is_an_error() -> None:
    err = error("partitioned_by (ds, ds)")
    assert (err.path, err.line) == (PATH, 4) and "named twice" in str(err)


def test_physical_virtual_and_session_properties_are_pairs() -> None:
    parsed = model(
        "physical_properties (retention_days = 7, team = 'web', compact = true),\n"
        "  virtual_properties (exposed = TRUE),\n"
        "  session_properties (spark.sql.shuffle.partitions = 3)"
    )
    assert parsed.physical_properties == (
        ("retention_days", "7"),
        ("team", "web"),
        ("compact", "true"),
    )
    assert parsed.virtual_properties == (("exposed", "true"),)
    assert parsed.session_properties == (("spark.sql.shuffle.partitions", "3"),)


def test_table_properties_is_the_former_name_of_physical_properties() -> None:
    assert model("table_properties (a = 1)").physical_properties == (("a", "1"),)
    err = error("table_properties (a = 1),\n  physical_properties (a = 2)")
    assert err.line == 4 and "same property" in str(err) and err.hint


def test_formats_are_names() -> None:
    parsed = model("table_format ICEBERG,\n  storage_format 'parquet'")
    assert (parsed.table_format, parsed.storage_format) == ("iceberg", "parquet")
    err = error("storage_format (parquet, orc)")
    assert (err.path, err.line, err.col) == (PATH, 4, 18)
    assert "storage_format must be one name" in str(err) and err.hint


def test_a_bad_value_names_file_line_and_hint() -> None:
    err = error("allow_partials maybe")
    assert (err.path, err.line) == (PATH, 4)
    assert "expected true or false" in str(err) and err.hint == "write true or false"
    err = error("physical_properties retention_days")
    assert "physical_properties must be a list of `name = value` pairs" in str(err)
    assert err.line == 4 and err.hint and "physical_properties (" in err.hint


def test_description_as_a_string_in_either_quotes() -> None:
    assert model("description 'Daily events'").description == "Daily events"
    assert model('description "Daily events"').description == "Daily events"
    err = error("description 7")
    assert err.line == 4 and "quoted string" in str(err)


def test_grains_written_as_strings_and_references() -> None:
    parsed = model("grains ('id', 'customer_id'),\n  references (customer_id)")
    assert parsed.grain == ("id", "customer_id")
    assert parsed.column_references == ("customer_id",)
    assert model("grain 'id'").grain == ("id",)


def test_the_other_properties_are_kept() -> None:
    parsed = model(
        "allow_partials true,\n  gateway local,\n  signals [one_week_ago(), ready(x := 1)],\n"
        "  optimize_query false,\n  formatting false,\n  ignored_rules ['ambiguousorinvalidcolumn']"
    )
    assert parsed.allow_partials is True
    assert parsed.gateway == "local"
    assert parsed.signals == ("one_week_ago()", "ready(x := 1)")
    assert parsed.optimize_query is False


# --- notes -----------------------------------------------------------------------------


def test_each_property_spark_does_not_use_gets_a_note_with_file_line() -> None:
    parsed = model(
        "allow_partials true,\n  gateway local,\n  signals [one_week_ago()],\n"
        "  optimize_query false,\n  formatting false,\n  ignored_rules ALL,\n"
        "  session_properties (query_label = 'x', spark.sql.ansi.enabled = true),\n"
        "  physical_properties (creatable_type = TRANSIENT, location = '/tmp/x', a = 1)"
    )
    notes = parsed.warnings
    # Each names its property's line and column.
    lines = {n.split(": ", 2)[1].split(" ")[0]: n.split(": ", 1)[0] for n in notes}
    assert lines["allow_partials"] == f"{PATH}:4:3"
    assert lines["gateway"] == f"{PATH}:5:3"
    assert lines["signals"] == f"{PATH}:6:3"
    assert lines["optimize_query"] == f"{PATH}:7:3"
    assert lines["formatting"] == f"{PATH}:8:3"
    assert lines["ignored_rules"] == f"{PATH}:9:3"
    assert all("\n  hint: " in n for n in notes)
    text = "\n".join(notes)
    assert "session property 'query_label' of shop.events is not applied" in text
    assert "property 'creatable_type' of shop.events is not applied to its table" in text
    assert "property 'location' of shop.events is not applied" in text
    # What is noted is not applied; the rest is.
    assert parsed.session_properties == (("spark.sql.ansi.enabled", "true"),)
    assert parsed.physical_properties == (("a", "1"),)


def test_allow_partials_false_needs_no_note() -> None:
    assert model("allow_partials false").warnings == ()


# --- fingerprints ----------------------------------------------------------------------


def test_a_model_without_these_properties_keeps_its_fingerprint_inputs() -> None:
    plain = model("owner bob")
    assert len(data_inputs(plain)) == 11  # as before these properties were read
    assert data_inputs(plain)[6] == plain.query_sql  # categorize.py's query position


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("partitioned_by ds", "partitioned_by customer_id"),
        ("partitioned_by ds", "partitioned_by (DATE(ts))"),
        ("clustered_by id", "clustered_by customer_id"),
        ("storage_format parquet", "storage_format orc"),
        ("table_format hive", "table_format iceberg"),
        ("physical_properties (a = 1)", "physical_properties (a = 2)"),
        ("gateway local", "gateway other"),
        ("optimize_query true", "optimize_query false"),
    ],
)
def test_what_changes_the_physical_table_is_a_new_version(old: str, new: str) -> None:
    first = plan([model(old)])
    second = plan([model(new)], first)
    assert [c.category for c in second.directly_modified] == [Category.BREAKING]
    assert second.snapshots[0].version != first.snapshots[0].version


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("description 'a'", "description 'b'"),
        ("grains ('id')", "grains ('customer_id')"),
        ("references (id)", "references (customer_id)"),
        ("allow_partials false", "allow_partials true"),
        ("virtual_properties (a = 1)", "virtual_properties (a = 2)"),
        # SQLMesh hashes session_properties with the metadata: no rebuild.
        ("session_properties (spark.sql.ansi.enabled = true)", "owner bob"),
        ("signals [a()]", "signals [b()]"),
    ],
)
def test_what_describes_the_model_is_metadata_only(old: str, new: str) -> None:
    first = plan([model(old)])
    second = plan([model(new)], first)
    assert second.metadata_only == ("shop.events",) and not second.directly_modified
    assert second.snapshots[0].version == first.snapshots[0].version


@pytest.mark.parametrize(
    ("old", "new"),
    [("formatting true", "formatting false"), ("ignored_rules ALL", "ignored_rules (x)")],
)
def test_what_concerns_sqlmesh_tools_changes_nothing(old: str, new: str) -> None:
    first = plan([model(old)])
    second = plan([model(new)], first)
    assert not (second.metadata_only or second.directly_modified or second.added)


# --- enabled, blueprints ---------------------------------------------------------------


def test_enabled_false_removes_the_model() -> None:
    text = "MODEL (name shop.old, enabled false);\nSELECT * FROM nowhere.at_all"
    assert parse_model(text, PATH, ModelDefaults(), {}) is None
    assert parse_models(text, PATH, ModelDefaults(), {}) == []


BLUEPRINTS = """MODEL (
  name @customer.orders_@{suffix},
  kind FULL,
  blueprints (
    (customer := acme, suffix := eu, country := 'FR'),
    (customer := globex, suffix := us, country := 'US')
  )
);
SELECT @country AS country, @VAR('customer') AS customer_column FROM @customer.raw
"""


def test_blueprints_make_one_model_each_with_their_variables() -> None:
    models = parse_models(BLUEPRINTS, PATH, ModelDefaults(), {})
    assert [m.name for m in models] == ["acme.orders_eu", "globex.orders_us"]
    assert models[0].query_sql == "SELECT 'FR' AS country, acme AS customer_column FROM acme.raw"
    assert models[1].depends_on == ("globex.raw",)


@pytest.mark.parametrize(
    "text",
    [BLUEPRINTS, "MODEL (name shop.one, kind FULL);\nSELECT 1 AS id"],
    ids=["blueprints", "one"],
)
def test_a_files_header_is_read_once_for_all_its_models(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    read = header_module.parse_header

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[2])
        return read(*args, **kwargs)

    monkeypatch.setattr(blueprints, "parse_header", counting)
    monkeypatch.setattr(parse, "parse_header", counting)
    models = parse_models(text, PATH, ModelDefaults(), {})
    assert models and calls == ["MODEL"]


def test_blueprints_that_make_the_same_name_are_an_error() -> None:
    text = BLUEPRINTS.replace("name @customer.orders_@{suffix}", "name shop.orders")
    with pytest.raises(ModelError) as caught:
        parse_models(text, PATH, ModelDefaults(), {})
    assert caught.value.line == 4 and "two blueprints" in str(caught.value)


def test_a_blueprint_that_is_not_name_value_pairs_is_an_error() -> None:
    text = BLUEPRINTS.replace("(customer := globex, suffix := us, country := 'US')", "(globex)")
    with pytest.raises(ModelError) as caught:
        parse_models(text, PATH, ModelDefaults(), {})
    assert (caught.value.line, caught.value.col) == (6, 5)
    assert caught.value.hint and "blueprints ((name := value" in caught.value.hint


# --- what Spark gets -------------------------------------------------------------------


def test_partition_transforms_need_a_table_format_that_has_them() -> None:
    parsed = model("partitioned_by (DATE(ts), customer_id)")
    parquet = table_layout(parsed, "parquet")
    assert parquet.partitioned_by == ("customer_id",)
    ((what, hint),) = parquet.notes
    assert "partitioned_by 'CAST(ts AS DATE)' is not applied" in what and "iceberg" in hint
    iceberg = table_layout(model("partitioned_by (DATE(ts), customer_id)"), "iceberg")
    assert iceberg.partitioned_by == ("days(ts)", "customer_id") and not iceberg.notes
    month = table_layout(model("partitioned_by DATE_TRUNC('month', ts)"), "iceberg")
    assert month.partitioned_by == ("months(ts)",)
    (note,) = layout_notes(parsed, "parquet")
    assert note.startswith(f"{PATH}:1: shop.events: partitioned_by") and "\n  hint: " in note


def test_formats_and_clustering_on_spark() -> None:
    both = table_layout(model("table_format iceberg,\n  storage_format orc"), "parquet")
    assert both.provider == "iceberg" and both.properties == (("write.format.default", "orc"),)
    delta = table_layout(model("table_format delta,\n  storage_format orc"), "parquet")
    assert delta.provider == "delta" and "storage_format 'orc' is not applied" in delta.notes[0][0]
    assert table_layout(model("storage_format orc"), "parquet").provider == "orc"
    assert table_layout(model("table_format hive"), "delta").provider == "delta"
    clustered = table_layout(model("clustered_by customer_id"), "parquet")
    assert clustered.clustered_by == ("customer_id",) and not clustered.notes
    both_ways = table_layout(model("partitioned_by ds,\n  clustered_by id"), "parquet")
    assert both_ways.clustered_by == () and "does not cluster" in both_ways.notes[0][0]


def test_the_fixture_project_plans_and_tells_spark_what_to_create() -> None:
    project = load_project(FIXTURE / "model_properties", use_cache=False)
    assert set(project.models) == {
        "shop.events",
        "shop.customers",
        "shop.daily_events",
        "shop.events_by_day",
        "emea.events",
        "amer.events",
    }
    notes = "\n".join(project.notes)
    assert "daily_events.sql:2: shop.daily_events: partitioned_by 'DATE(ts)'" in notes
    assert "events.sql:20:3: allow_partials of shop.events is accepted" in notes
    result = plan(list(project.models.values()))
    steps = {s["model"]: s for s in build_steps(result, {}, project.path, "parquet")
             if s["type"] == "build"}  # fmt: skip
    events = steps["shop.events"]
    assert (events["format"], events["partitioned_by"]) == ("parquet", ["event_date"])
    assert events["table_properties"] == [["retention_days", "7"], ["team", "web"]]
    assert events["session_properties"] == [["spark.sql.shuffle.partitions", "3"]]
    assert steps["shop.customers"]["clustered_by"] == ["customer_id"]
    assert steps["shop.daily_events"]["partitioned_by"] == []
    assert steps["shop.events_by_day"]["partitioned_by"] == ["customer_id"]
    views = {v["view"]: v for v in view_steps(result, None)["views"]}
    assert views["shop.events"]["properties"] == [["exposed", "true"]]
    assert views["emea.events"]["properties"] == []


def test_a_model_round_trips_through_its_stored_form() -> None:
    parsed = model(
        "partitioned_by (DATE(ts)),\n  physical_properties (a = 1),\n"
        "  session_properties (spark.sql.ansi.enabled = true),\n  references (id),\n"
        "  signals [a()],\n  clustered_by id"
    )
    assert Model.from_dict(parsed.to_dict()) == parsed


def test_blueprints_and_disabled_models_come_back_from_the_parse_cache(tmp_path: Path) -> None:
    root = tmp_path / "project"
    shutil.copytree(FIXTURE / "model_properties", root)
    first = load_project(root)
    entries = json.loads((root / ".sluice" / "cache" / "models.json").read_text())
    assert len(entries[str(root / "models" / "per_region.sql")]["models"]) == 2
    assert entries[str(root / "models" / "retired.sql")]["models"] == []
    again = load_project(root)
    assert again.models == first.models
    assert {"emea.events", "amer.events"} <= set(again.models)
    assert "shop.retired" not in again.models
