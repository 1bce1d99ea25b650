"""Strings from a pull request that reach Spark SQL (issue 40): session properties are
tuning only, the one list the prod branch's ``sluice.spark.conf`` uses; no ``${`` in any
header value; ``sluice.*`` table properties are Sluice's own (the mark of its tables)."""

from __future__ import annotations

import pytest

from sluice.core.config import ModelDefaults
from sluice.core.errors import ModelError
from sluice.core.model.definition import Model
from sluice.core.model.parse import parse_model
from sluice.core.spark import tuning

PATH = "models/events.sql"
QUERY = "SELECT 1 AS id, 'x' AS ds"


def model(props: str) -> Model:
    text = f"MODEL (\n  name shop.events,\n  kind FULL,\n  {props}\n);\n{QUERY}\n"
    parsed = parse_model(text, PATH, ModelDefaults(), {})
    assert parsed is not None
    return parsed


def refused(props: str) -> ModelError:
    with pytest.raises(ModelError) as caught:
        model(props)
    return caught.value


# --- session properties ------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        "spark.sql.variable.substitute",
        "SPARK.SQL.Variable.Substitute",
        "spark.sql.parser.quotedRegexColumnNames",
        "spark.sql.ansi.doubleQuotedIdentifiers",
        "spark.sql.ansi.enforceReservedKeywords",
        "spark.sql.warehouse.dir",
        "spark.sql.catalog.evil",
        "spark.sql.extensions",
        "spark.sql.runSQLOnFiles",
        "spark.sql.defaultCatalog",
        "spark.sql.legacy.setCommandRejectsSparkCoreConfs",
        "spark.sql.adaptive.customCostEvaluatorClass",
        "spark.hadoop.fs.defaultFS",
        "spark.jars",
    ],
)
def test_a_session_property_that_is_not_tuning_is_refused_with_its_line(key: str) -> None:
    error = refused(
        f"session_properties (\n    spark.sql.shuffle.partitions = 3,\n    {key} = true\n  )"
    )
    assert error.path == PATH and error.line == 6 and error.col == 5
    assert f"session property '{key}' of shop.events is not a Spark tuning setting" in error.message
    assert error.hint is not None and "SLUICE_SPARK_CONF" in error.hint
    assert "spark.sql.shuffle.partitions" in error.hint


def test_tuning_session_properties_are_applied_as_spark_spells_them() -> None:
    parsed = model(
        "session_properties (spark.sql.autoBroadcastJoinThreshold = -1, "
        "spark.sql.adaptive.coalescePartitions.enabled = false, spark.sql.ansi.enabled = true)"
    )
    # Spark's settings are case-sensitive: a lower-cased key would set nothing.
    assert parsed.session_properties == (
        ("spark.sql.autoBroadcastJoinThreshold", "-1"),
        ("spark.sql.adaptive.coalescePartitions.enabled", "false"),
        ("spark.sql.ansi.enabled", "true"),
    )
    assert parsed.warnings == ()


def test_application_tuning_and_other_engines_are_noted_not_applied() -> None:
    parsed = model("session_properties (spark.executor.memory = '4g', query_label = 'x')")
    assert parsed.session_properties == ()
    text = "\n".join(parsed.warnings)
    assert f"{PATH}:4:23: session property 'spark.executor.memory'" in text
    assert "sizes the whole Spark application" in text
    assert "session property 'query_label' of shop.events is not applied" in text


def test_the_tuning_list_is_one_list_for_the_prod_branch_and_models() -> None:
    from sluice.bot.flow import trust

    assert trust.split_spark_conf is tuning.split_spark_conf
    kept, refused_keys = trust.split_spark_conf(
        {
            "spark.sql.shuffle.partitions": "8",
            "spark.sql.adaptive.customCostEvaluatorClass": "x.Y",
            "spark.sql.variable.substitute": "true",
        }
    )
    assert kept == {"spark.sql.shuffle.partitions": "8"}
    assert refused_keys == [
        "spark.sql.adaptive.customCostEvaluatorClass",
        "spark.sql.variable.substitute",
    ]


# --- ${ in header values ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("props", "key", "line", "col"),
    [
        (
            "physical_properties (owner_team = '${env:SLUICE_GITHUB_TOKEN}')",
            "physical_properties",
            4,
            38,
        ),
        (
            "virtual_properties (\n    label = 'a ${system:user.home}'\n  )",
            "virtual_properties",
            5,
            16,
        ),
        (
            "session_properties (spark.sql.session.timeZone = '${env:HOME}')",
            "session_properties",
            4,
            53,
        ),
        ("description 'revenue ${hiveconf:x}'", "description", 4, 24),
        ("column_descriptions (id = 'the ${env:X} id')", "column_descriptions", 4, 34),
        ("grain '${x}'", "grain", 4, 10),
        ("owner '${env:USER}'", "owner", 4, 10),
        ("tags ('${a}')", "tags", 4, 10),
    ],
)
def test_substitution_in_any_header_value_is_refused_with_file_line(
    props: str, key: str, line: int, col: int
) -> None:
    error = refused(props)
    assert error.message.startswith(f"model property '{key}' writes '${{")
    assert "Spark replaces" in error.message
    assert (error.path, error.line, error.col) == (PATH, line, col)
    assert error.hint is not None and "'${'" in error.hint


def test_a_dollar_without_a_brace_is_plain_text() -> None:
    assert model("description 'costs in $ (USD)'").description == "costs in $ (USD)"


# --- Sluice's own table properties ---------------------------------------------------------


@pytest.mark.parametrize("key", ["physical_properties", "virtual_properties"])
def test_a_model_cannot_set_sluices_mark(key: str) -> None:
    error = refused(f"{key} (sluice.created_by = 'shop.events@abc')")
    assert "property 'sluice.created_by' of shop.events is Sluice's own" in error.message
    assert (error.path, error.line) == (PATH, 4)


# --- where properties become Spark work (whichever way the model was read) ------------------


def _plan_of(one: Model):  # type: ignore[no-untyped-def]
    from sluice.core.plan.build import PlanRequest, build_plan
    from sluice.core.snapshot.fingerprint import fingerprint_models

    models = {one.name: one}
    return build_plan(
        PlanRequest(
            environment="prod",
            models=models,
            fingerprints=fingerprint_models(models, {}),
            base={},
            base_plan_id=None,
            end=86_400_000 * 19_800,
            execution_time=86_400_000 * 19_800,
        )
    )


@pytest.mark.parametrize(
    ("field", "pairs", "says"),
    [
        (
            "session_properties",
            (("spark.sql.variable.substitute", "true"),),
            "not a Spark SQL tuning",
        ),
        ("session_properties", (("spark.executor.memory", "4g"),), "not a Spark SQL tuning"),
        ("session_properties", (("spark.sql.session.timeZone", "${env:TZ}"),), "writes '\\$\\{'"),
        ("physical_properties", (("team", "${env:SLUICE_GITHUB_TOKEN}"),), "writes '\\$\\{'"),
        ("physical_properties", (("sluice.created_by", "x@1"),), "Sluice's own"),
        ("virtual_properties", (("a", "${system:user.home}"),), "writes '\\$\\{'"),
        ("virtual_properties", (("sluice.created_by", "x@1"),), "Sluice's own"),
    ],
)
def test_properties_are_checked_again_where_they_become_statements(
    field: str, pairs: tuple[tuple[str, str], ...], says: str
) -> None:
    # A Python model's decorator, a cache entry: properties that did not come through a
    # MODEL header's checks are refused when the job is rendered, naming the model's file.
    import dataclasses

    from sluice.core.spark.render import build_steps, view_steps

    hostile = dataclasses.replace(model("owner bob"), **{field: pairs})
    plan = _plan_of(hostile)
    with pytest.raises(ModelError, match=says) as caught:
        if field == "virtual_properties":
            view_steps(plan, None)
        else:
            build_steps(plan, {}, ".", "parquet")
    assert (caught.value.path, caught.value.line) == (PATH, 1)


def test_tuning_and_plain_properties_render_escaped_once() -> None:
    from sluice.core.spark.render import build_steps, view_steps

    parsed = model(
        "physical_properties (team = 'it''s'), virtual_properties (note = 'a\\\\b'), "
        "session_properties (spark.sql.shuffle.partitions = 3)"
    )
    plan = _plan_of(parsed)
    step = next(s for s in build_steps(plan, {}, ".", "parquet") if s["type"] == "build")
    assert step["session_properties"] == [["spark.sql.shuffle.partitions", "3"]]
    assert step["table_properties"] == [["team", "it's"]]  # raw: quoted where the SQL is made
    assert view_steps(plan, None)["views"][0]["properties"] == [["note", "a\\\\b"]]


# --- physical properties that point at files, a data source or a class ------------------


REDIRECTING = [
    "option.path",
    "write.data.path",
    "write.metadata.path",
    "path",
    "LOCATION",
    "spark.sql.sources.provider",
    "hive.metastore.uris",
    "serialization.class",
    "delta.logStore.class",
]


def test_reserved_keys_are_left_out_of_the_table_on_load() -> None:
    kept = model("physical_properties (path = '/tmp/x', \"LOCATION\" = '/tmp/y', team = 1)")
    assert [k for k, _ in kept.physical_properties] == ["team"]


@pytest.mark.parametrize("key", [k for k in REDIRECTING if k.lower() not in ("path", "location")])
def test_a_physical_property_that_redirects_the_table_is_refused_on_load(key: str) -> None:
    error = refused(f"physical_properties (\"{key}\" = '/tmp/elsewhere')")
    assert error.path == PATH and error.line == 4
    assert "may point at files" in str(error) or "own" in str(error) or "reserved" in str(error)


@pytest.mark.parametrize("key", REDIRECTING)
def test_it_is_refused_again_where_it_becomes_a_statement(key: str) -> None:
    # A Python model's decorator reaches the render without the header's checks.
    import dataclasses

    from sluice.core.spark.render import build_steps

    hostile = dataclasses.replace(
        model("owner bob"), physical_properties=((key, "/tmp/elsewhere"),)
    )
    with pytest.raises(ModelError, match="physical_properties") as caught:
        build_steps(_plan_of(hostile), {}, ".", "parquet")
    assert (caught.value.path, caught.value.line) == (PATH, 1)


def test_table_tuning_properties_still_apply() -> None:
    kept = model(
        'physical_properties ("format-version" = 2, "write.parquet.compression-codec" = \'zstd\','
        " \"delta.appendOnly\" = true, team = 'data')"
    ).physical_properties
    assert [k for k, _ in kept] == [
        "format-version",
        "write.parquet.compression-codec",
        "delta.appendonly",
        "team",
    ]
