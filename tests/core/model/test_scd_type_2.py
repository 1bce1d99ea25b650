"""The SCD type 2 kinds without Spark: their properties as SQLMesh documents them, the
errors (file:line, hint), what their fingerprint covers, their category, their intervals
and their restatement. The validity columns on Spark: tests/core/spark/test_scd_type_2.py.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from sluice.core import workflow
from sluice.core.cli.plan import _what_builds
from sluice.core.config import ModelDefaults
from sluice.core.errors import ModelError, PlanError
from sluice.core.model.definition import KindName, Model, Scd
from sluice.core.model.parse import parse_model
from sluice.core.plan import explain
from sluice.core.plan.build import PlanRequest, build_plan
from sluice.core.snapshot.fingerprint import data_inputs, fingerprint_models
from sluice.core.snapshot.snapshot import Category
from sluice.core.spark.render import build_steps
from sluice.core.timeutil import DAY_MS, to_ms
from tests.core.helpers import load

DEFAULTS = ModelDefaults(dialect="spark")
QUERY = "SELECT id, name, price, updated_at FROM raw.menu"


def parse(kind: str, query: str = QUERY, extra: str = "") -> Model:
    text = f"MODEL (\n  name s.menu,\n  kind {kind},\n{extra});\n{query}\n"
    model = parse_model(text, "models/menu.sql", DEFAULTS, {})
    assert model is not None
    return model


def refused(kind: str, query: str = QUERY, extra: str = "") -> ModelError:
    with pytest.raises(ModelError) as err:
        parse(kind, query, extra)
    return err.value


def test_scd_type_2_is_by_time_with_sqlmeshs_defaults() -> None:
    for written in ("SCD_TYPE_2", "scd_type_2_by_time"):
        model = parse(f"{written} (unique_key id)")
        assert model.kind.name == KindName.SCD_TYPE_2_BY_TIME
        assert model.kind.unique_key == ("id",)
        assert model.kind.scd == Scd(updated_at_name="updated_at")
        assert model.kind.scd.valid_from_name == "valid_from"
        assert model.kind.scd.valid_to_name == "valid_to"
        assert model.kind.scd.invalidate_hard_deletes is False  # SQLMesh's, whatever docs said
        assert model.kind.scd.time_data_type == "TIMESTAMP"
        assert model.forward_only  # SQLMesh: these kinds are forward-only by default
        assert model.kind.batch_size is None


def test_every_property_of_both_kinds() -> None:
    by_time = parse(
        "SCD_TYPE_2_BY_TIME (unique_key [id], updated_at_name changed, valid_from_name 'vf', "
        "valid_to_name vt, invalidate_hard_deletes true, updated_at_as_valid_from true, "
        "time_data_type TIMESTAMP_NTZ, disable_restatement false, batch_size 3)",
        "SELECT id, changed FROM raw.menu",
    )
    assert by_time.kind.scd == Scd(
        updated_at_name="changed",
        valid_from_name="vf",
        valid_to_name="vt",
        invalidate_hard_deletes=True,
        updated_at_as_valid_from=True,
        time_data_type="TIMESTAMP_NTZ",
        disable_restatement=False,
    )
    assert by_time.kind.batch_size == 3
    by_column = parse(
        "SCD_TYPE_2_BY_COLUMN (unique_key (region, id), columns [name, price], "
        "execution_time_as_valid_from true, time_data_type DATE)",
        "SELECT region, id, name, price FROM raw.menu",
    )
    assert by_column.kind.name == KindName.SCD_TYPE_2_BY_COLUMN
    assert by_column.kind.unique_key == ("region", "id")
    assert by_column.kind.scd == Scd(
        columns=("name", "price"), execution_time_as_valid_from=True, time_data_type="DATE"
    )
    for star in ("*", "'*'", "[*]"):
        model = parse(f"SCD_TYPE_2_BY_COLUMN (unique_key id, columns {star})")
        assert model.kind.scd is not None and model.kind.scd.columns == ("*",)


def test_time_data_type_is_read_in_the_models_dialect() -> None:
    text = (
        "MODEL (name s.m, kind SCD_TYPE_2_BY_TIME (unique_key id, time_data_type DATETIME), "
        "dialect bigquery);\nSELECT id, updated_at FROM raw.menu\n"
    )
    model = parse_model(text, "models/m.sql", DEFAULTS, {})
    assert model is not None and model.kind.scd is not None
    assert model.kind.scd.time_data_type == "TIMESTAMP"


def test_forward_only_can_be_turned_off_in_the_kind_or_the_model() -> None:
    assert not parse("SCD_TYPE_2 (unique_key id, forward_only false)").forward_only
    assert not parse("SCD_TYPE_2 (unique_key id)", extra="  forward_only false,\n").forward_only


@pytest.mark.parametrize(
    ("kind", "query", "line", "message", "hint"),
    [
        ("SCD_TYPE2 (unique_key id)", QUERY, 3, "unknown model kind", "did you mean 'SCD_TYPE_2'"),
        (
            "SCD_TYPE_2_BY_COLUM (unique_key id, columns *)",
            QUERY,
            3,
            "unknown model kind",
            "did you mean 'SCD_TYPE_2_BY_COLUMN'",
        ),
        (
            "SCD_TYPE_2 (unique_key id, update_at_name ts)",
            QUERY,
            3,
            "has no parameter 'update_at_name'",
            "did you mean 'updated_at_name'",
        ),
        (
            "SCD_TYPE_2_BY_TIME (unique_key id, columns [name])",
            QUERY,
            3,
            "kind SCD_TYPE_2_BY_TIME has no parameter 'columns'",
            "supported properties",
        ),
        (
            "SCD_TYPE_2_BY_COLUMN (unique_key id, columns *, updated_at_as_valid_from true)",
            QUERY,
            3,
            "no parameter 'updated_at_as_valid_from'",
            "execution_time_as_valid_from",
        ),
        (
            "SCD_TYPE_2 (updated_at_name updated_at)",
            QUERY,
            3,
            "needs a unique_key",
            "unique_key id",
        ),
        ("SCD_TYPE_2", QUERY, 3, "needs a unique_key", "SCD_TYPE_2_BY_TIME (unique_key id)"),
        (
            "SCD_TYPE_2_BY_COLUMN (unique_key id)",
            QUERY,
            3,
            "needs the columns whose changes",
            "columns *",
        ),
        (
            "SCD_TYPE_2_BY_COLUMN (unique_key id, columns [*, name])",
            QUERY,
            3,
            "either * (every column) or a list",
            "columns *",
        ),
        ("SCD_TYPE_2 (unique_key *)", QUERY, 3, "must name the key's columns", "(a, b)"),
        ("SCD_TYPE_2 (unique_key id, time_data_type STRING)", QUERY, 3, "not a date", "DATE"),
        (
            "SCD_TYPE_2 (unique_key id, invalidate_hard_deletes maybe)",
            QUERY,
            3,
            "expected true or false",
            "true or false",
        ),
        (
            "SCD_TYPE_2 (unique_key id, valid_from_name t, valid_to_name t)",
            QUERY,
            3,
            "both 't'",
            "different names",
        ),
        (
            "SCD_TYPE_2 (unique_key id)",
            "SELECT id, name FROM raw.menu",
            3,
            "has no column 'updated_at'",
            "updated_at_name",
        ),
        (
            "SCD_TYPE_2 (unique_key id, updated_at_name changed)",
            QUERY,
            3,
            "updated_at column 'changed' is not a column",
            "the query returns: id, name, price, updated_at",
        ),
        (
            "SCD_TYPE_2 (unique_key code)",
            QUERY,
            3,
            "unique key 'code' is not a column",
            "the query returns",
        ),
        (
            "SCD_TYPE_2_BY_COLUMN (unique_key id, columns [name, colour])",
            QUERY,
            3,
            "compared column 'colour' is not a column",
            "the query returns",
        ),
        (
            "SCD_TYPE_2_BY_COLUMN (unique_key id, columns [id, name])",
            QUERY,
            3,
            "'id' is part of the unique_key",
            "without the key",
        ),
        (
            "SCD_TYPE_2 (unique_key id)",
            "SELECT id, updated_at, updated_at AS valid_to FROM raw.menu",
            3,
            "returns a column 'valid_to', which its kind SCD_TYPE_2_BY_TIME writes itself",
            "valid_to_name",
        ),
    ],
)
def test_bad_properties_are_refused_with_where_and_how(
    kind: str, query: str, line: int, message: str, hint: str
) -> None:
    error = refused(kind, query)
    assert error.path == "models/menu.sql"
    assert error.line == line, error
    assert message in error.message, error
    assert hint in (error.hint or ""), error


def test_the_settings_survive_the_stored_form() -> None:
    model = parse(
        "SCD_TYPE_2_BY_COLUMN (unique_key (region, id), columns [name])",
        QUERY.replace("id,", "id, region,"),
    )
    assert Model.from_dict(model.to_dict()) == model


def _fingerprint(model: Model) -> tuple[str, str]:
    alone = dataclasses.replace(model, depends_on=())  # raw.menu is no model here
    found = fingerprint_models({model.name: alone}, {})[model.name]
    return found.data_hash, found.metadata_hash


def test_what_changes_the_history_changes_the_data_hash() -> None:
    base = parse("SCD_TYPE_2 (unique_key id)")
    data, metadata = _fingerprint(base)
    for change in (
        "invalidate_hard_deletes true",
        "valid_from_name vf",
        "valid_to_name vt",
        "time_data_type DATE",
        "updated_at_as_valid_from true",
    ):
        other = parse(f"SCD_TYPE_2 (unique_key id, {change})")
        assert _fingerprint(other)[0] != data, change
    by_column = parse("SCD_TYPE_2_BY_COLUMN (unique_key id, columns *)")
    assert _fingerprint(by_column)[0] != data
    for change in ("columns [name]", "columns *, execution_time_as_valid_from true"):
        other = parse(f"SCD_TYPE_2_BY_COLUMN (unique_key id, {change})")
        assert _fingerprint(other)[0] != _fingerprint(by_column)[0], change
    # Whether a restatement is allowed describes the model: metadata only.
    allowed = parse("SCD_TYPE_2 (unique_key id, disable_restatement false)")
    assert _fingerprint(allowed) == (data, _fingerprint(allowed)[1])
    assert _fingerprint(allowed)[1] != metadata
    # SCD_TYPE_2 and SCD_TYPE_2_BY_TIME are one kind: the same version.
    assert _fingerprint(parse("SCD_TYPE_2_BY_TIME (unique_key id)")) == (data, metadata)


def test_other_kinds_keep_the_hashes_they_had() -> None:
    model = parse_model("MODEL (name s.a, kind FULL);\nSELECT 1 AS id\n", "a.sql", DEFAULTS, {})
    assert model is not None
    assert not any(isinstance(i, dict) and "scd" in i for i in data_inputs(model))


PROJECT = {
    "config.yaml": "model_defaults:\n  dialect: spark\n  cron: '@daily'\n",
    "external_models.yaml": "- name: raw.menu\n  columns: {id: int, name: text}\n",
    "models/menu.sql": """
        MODEL (name s.menu, kind SCD_TYPE_2_BY_COLUMN (unique_key id, columns *));
        SELECT id, name FROM raw.menu
    """,
    "models/clean.sql": """
        MODEL (name s.clean, kind FULL);
        SELECT id, UPPER(name) AS name FROM s.menu WHERE valid_to IS NULL
    """,
}
NOW = to_ms("2024-03-10 11:00:00")


def _request(project, base=None, intervals=None, end=NOW, **kwargs):  # type: ignore[no-untyped-def]
    return PlanRequest(
        environment="prod",
        models=project.models,
        fingerprints=fingerprint_models(project.models, project.audits),
        base={s.name: s for s in base.snapshots} if base else {},
        base_plan_id=base.plan_id if base else None,
        end=end,
        execution_time=end,
        intervals=intervals or {},
        **kwargs,
    )


def test_a_change_is_forward_only_and_keeps_the_history(tmp_path: Path) -> None:
    # SQLMesh 0.236.4, the same edit on the scd_type_2 fixture after two runs: a
    # forward-only snapshot (category NON_BREAKING), its table and history kept.
    first = build_plan(_request(load(tmp_path / "a", PROJECT)))
    edited = {
        **PROJECT,
        "models/menu.sql": PROJECT["models/menu.sql"].replace("id, name", "id, name, 1 AS n"),
    }
    plan = build_plan(_request(load(tmp_path / "b", edited), base=first))
    (change,) = plan.directly_modified
    assert change.category == Category.FORWARD_ONLY
    assert change.version == change.previous_version  # the same table, history and all
    # With `forward_only false` the change gets a table of its own, like other kinds.
    rebuilt = {
        **edited,
        "models/menu.sql": edited["models/menu.sql"].replace(
            "columns *)", "columns *, forward_only false)"
        ),
    }
    plan = build_plan(_request(load(tmp_path / "c", rebuilt), base=first))
    (change,) = plan.directly_modified
    assert change.category != Category.FORWARD_ONLY and change.version != change.previous_version


def test_each_run_merges_every_missing_interval_at_once(tmp_path: Path) -> None:
    project = load(tmp_path / "p", PROJECT)
    first = build_plan(_request(project))
    backfill = {b.name: b for b in first.backfill}["s.menu"]
    day = to_ms("2024-03-09")
    assert backfill.intervals == ((day, day + DAY_MS),)  # no start: the last whole day
    # Three days later: the three missing days, one batch (one merge of the query's rows).
    clean = first.snapshot("s.clean").version
    done = {
        ("s.menu", backfill.version): [(day, day + DAY_MS)],
        ("s.clean", clean): [(day, day + DAY_MS)],
    }
    later = build_plan(_request(project, first, done, end=NOW + 3 * DAY_MS))
    backfill = {b.name: b for b in later.backfill}["s.menu"]
    assert len(backfill.intervals) == 3 and backfill.batches == ((day + DAY_MS, day + 4 * DAY_MS),)
    assert explain.built(later, backfill) == (
        "its query's rows now are merged into its history (3 intervals due)"
    )
    assert _what_builds(later, backfill).startswith("1 merge into its history")
    # The FULL child is built once, as before: only the SCD model is incremental.
    assert "s.clean" not in {b.name for b in later.backfill}
    # The build step says how to merge, with the plan's execution time.
    (step,) = [s for s in build_steps(later, {}, str(tmp_path / "p"), "parquet") if s.get("scd")]
    assert step["scd"]["execution_time"] == NOW + 3 * DAY_MS  # type: ignore[typeddict-item]
    assert step["scd"]["by"] == "column" and step["scd"]["columns"] == ["*"]  # type: ignore[typeddict-item]


def test_batch_size_splits_the_merges(tmp_path: Path) -> None:
    files = {
        **PROJECT,
        "models/menu.sql": PROJECT["models/menu.sql"].replace(
            "columns *", "columns *, batch_size 1"
        ),
    }
    project = load(tmp_path / "p", files)
    first = build_plan(_request(project))
    version = first.snapshot("s.menu").version
    day = to_ms("2024-03-09")
    later = build_plan(
        _request(project, first, {("s.menu", version): [(day, day + DAY_MS)]}, end=NOW + 2 * DAY_MS)
    )
    assert len({b.name: b for b in later.backfill}["s.menu"].batches) == 2


def test_restating_an_scd_model_is_refused_unless_allowed(tmp_path: Path) -> None:
    project = load(tmp_path / "p", PROJECT)
    with pytest.raises(PlanError) as err:
        workflow.resolve_restatements(project, ["s.menu"])
    assert (
        "keeps a history" in err.value.message
        and err.value.location == f"{project.models['s.menu'].path}:1"
    )
    assert "disable_restatement false" in (err.value.hint or "")
    files = {
        **PROJECT,
        "models/raw_copy.sql": "MODEL (name s.raw_copy, kind FULL);\nSELECT id, name FROM raw.menu\n",
        "models/menu.sql": PROJECT["models/menu.sql"].replace("FROM raw.menu", "FROM s.raw_copy"),
    }
    project = load(tmp_path / "q", files)
    # `+parent`: the SCD model is left out (as SQLMesh does), its FULL child is restated.
    assert workflow.resolve_restatements(project, ["+s.raw_copy"]) == {"s.raw_copy", "s.clean"}
    allowed = {
        **files,
        "models/menu.sql": files["models/menu.sql"].replace(
            "columns *", "columns *, disable_restatement false"
        ),
    }
    project = load(tmp_path / "r", allowed)
    assert workflow.resolve_restatements(project, ["+s.raw_copy"]) == {
        "s.raw_copy",
        "s.menu",
        "s.clean",
    }


def test_a_python_model_of_an_scd_kind_is_refused_not_built_as_full() -> None:
    from sluice.core.model.pycode.models import read_text

    src = (
        "from sqlmesh import model\n"
        '@model("s.m", columns={"id": "int"}, kind=dict(name="SCD_TYPE_2_BY_COLUMN", unique_key="id"))\n'
        "def execute(context, start, end, execution_time, **kwargs):\n"
        "    return None\n"
    )
    with pytest.raises(ModelError, match="not a kind a Python model can have") as err:
        list(read_text(src, "models/m.py", "/p"))
    assert err.value.path == "models/m.py"


def test_a_forward_only_change_renaming_a_validity_column_is_destructive(tmp_path: Path) -> None:
    first = build_plan(_request(load(tmp_path / "a", PROJECT)))
    renamed = {
        **PROJECT,
        "models/menu.sql": PROJECT["models/menu.sql"].replace(
            "columns *)", "columns *, valid_to_name ended_at, time_data_type DATE)"
        ),
    }
    with pytest.raises(PlanError) as err:
        build_plan(_request(load(tmp_path / "b", renamed), base=first))
    assert "drops column valid_to" in err.value.message
    assert "changes column valid_from from TIMESTAMP to DATE" in err.value.message
    assert err.value.location is not None and err.value.location.endswith("menu.sql:1")
