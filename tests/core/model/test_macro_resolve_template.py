"""@RESOLVE_TEMPLATE: the parts of the model's own physical table, filled in when the
model runs (no Spark)."""

import pytest

from sluice.core.config import ModelDefaults
from sluice.core.errors import ModelError
from sluice.core.model import macros
from sluice.core.model.macro import expand_sql
from sluice.core.model.parse import parse_model
from sluice.core.snapshot import naming
from sluice.core.snapshot.fingerprint import fingerprint_models
from sluice.core.spark.render import render_query


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        # literal mode (the default): a string built from the parts
        (
            "SELECT @RESOLVE_TEMPLATE('s3://b/@{catalog_name}/@{schema_name}/@{table_name}') AS w",
            "SELECT CONCAT('s3://b/', __sluice_macro__this_model_catalog, '/', "
            "__sluice_macro__this_model_schema, '/', __sluice_macro__this_model_table) AS w",
        ),
        (
            "SELECT @RESOLVE_TEMPLATE('@{ TABLE_NAME }') AS t",
            "SELECT __sluice_macro__this_model_table AS t",
        ),
        ("SELECT @RESOLVE_TEMPLATE('no parts') AS t", "SELECT 'no parts' AS t"),
        ("SELECT @RESOLVE_TEMPLATE('', mode := 'literal') AS t", "SELECT '' AS t"),
        (
            "SELECT @RESOLVE_TEMPLATE(@tpl) AS t",
            "SELECT CONCAT(__sluice_macro__this_model_table, '_x') AS t",
        ),
        # table mode: the model's own table, with or without its catalog
        (
            "SELECT * FROM @RESOLVE_TEMPLATE('@{catalog_name}.@{schema_name}.@{table_name}', mode := 'table') AS t",
            "SELECT * FROM __sluice_macro__this_model AS t",
        ),
        (
            "SELECT * FROM @RESOLVE_TEMPLATE(' @{schema_name}.@{table_name} ', 'TABLE')",
            "SELECT * FROM __sluice_macro__this_model",
        ),
    ],
)
def test_templates(sql: str, expected: str) -> None:
    assert expand_sql(sql, variables={"tpl": "@{table_name}_x"}) == expected


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        # names Sluice could not check at plan time: refused, whatever they would name
        (
            "SELECT * FROM @RESOLVE_TEMPLATE('@{schema_name}.@{table_name}$properties', mode := 'table')",
            "cannot check at plan time",
        ),
        (
            "SELECT * FROM @RESOLVE_TEMPLATE('@{schema_name}.dev_@{table_name}', mode := 'table')",
            "cannot check at plan time",
        ),
        (
            "SELECT * FROM @RESOLVE_TEMPLATE('prod.secrets', mode := 'table')",
            "cannot check at plan time",
        ),
        (
            "SELECT * FROM @RESOLVE_TEMPLATE('@{catalog_name}.@{schema_name}.@{table_name}.snapshots', mode := 'table')",
            "cannot check at plan time",
        ),
        ("SELECT @RESOLVE_TEMPLATE('@{table_name}', mode := 'ast')", "unknown mode 'ast'"),
        (
            "SELECT @RESOLVE_TEMPLATE('@{database}.@{table_name}')",
            "unknown placeholder @{database}",
        ),
        ("SELECT @RESOLVE_TEMPLATE(t)", "the template must be a quoted string"),
        ("SELECT @RESOLVE_TEMPLATE()", "missing its template"),
    ],
)
def test_refused_templates_say_why(sql: str, message: str) -> None:
    with pytest.raises(ModelError) as info:
        expand_sql(sql)
    assert message in info.value.message
    assert info.value.line == 1 and info.value.hint


@pytest.mark.parametrize(
    ("table", "parts"),
    [
        ("sluice__s.s__t__123", ("spark_catalog", "sluice__s", "s__t__123")),
        ("lake.sluice__s.s__t__123", ("lake", "sluice__s", "s__t__123")),
    ],
)
def test_the_parts_come_from_the_table_the_model_runs_into(
    table: str, parts: tuple[str, str, str]
) -> None:
    values = macros.this_model_parts(table)
    assert (
        tuple(
            str(values[k].this)
            for k in ("this_model_catalog", "this_model_schema", "this_model_table")
        )
        == parts
    )


def test_a_model_writes_its_physical_names_when_it_runs_and_its_fingerprint_keeps_the_template() -> (
    None
):
    text = (
        "MODEL (name s.t, kind FULL);\n"
        "SELECT id, @RESOLVE_TEMPLATE('@{catalog_name}/@{schema_name}/@{table_name}') AS written_by\n"
        "FROM (SELECT 1 AS id) AS u\n"
    )
    model = parse_model(text, "models/t.sql", ModelDefaults(), {})
    assert model is not None and model.query_sql is not None
    assert "__sluice_macro__this_model_table" in model.query_sql
    own = naming.physical_table("s.t", "42")
    sql = render_query(model, {}, own, 0, 86_400_000, 86_400_000)
    assert sql == (
        "SELECT id, CONCAT('spark_catalog', '/', 'sluice__s', '/', 's__t__42') AS written_by "
        "FROM (SELECT 1 AS id) AS u"
    )
    other = parse_model(
        text.replace("@{table_name}')", "@{table_name}x')"), "models/t.sql", ModelDefaults(), {}
    )
    assert other is not None
    one = fingerprint_models({"s.t": model}, {})["s.t"]
    two = fingerprint_models({"s.t": other}, {})["s.t"]
    assert one != two  # the template is part of the query
    assert "placeholder" not in macros.display(model.query_sql)
    assert "@this_model_table" in macros.display(model.query_sql)
