"""A model's pre- and post-statements with SQLMesh's runtime macros (red team F5).

``@start_ds``, ``@this_model`` and the other macros Sluice renders in a model's query at
run time were left in a statement as ``__sluice_macro__*`` placeholders, which passed the
statement checks and failed in Spark (or, a placeholder read as a column name, did
something else than written). Sluice renders them in the model's query only: a statement
using one is refused at load with file:line, naming the macro; the driver's check
refuses a placeholder too. Macros Sluice renders at load (``@VAR``) still work."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.core.errors import ModelError
from sluice.core.plan import statements
from tests.core.helpers import load

CONFIG = "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\nvariables:\n  tag: a\n"
HEADER = "MODEL (name s.t, kind INCREMENTAL_BY_TIME_RANGE(time_column d), start '2024-01-01');\n"
QUERY = "SELECT CAST(@start_ds AS DATE) AS d"


@pytest.mark.parametrize(
    ("body", "line", "macro"),
    [
        (
            "CREATE TABLE IF NOT EXISTS raw.x AS SELECT @start_ds AS d;\n" + QUERY,
            2,
            "@start_ds",
        ),
        (
            QUERY + ";\nCREATE TABLE IF NOT EXISTS raw.seen AS SELECT * FROM @this_model",
            3,
            "@this_model",
        ),
        (
            "CREATE VIEW IF NOT EXISTS raw.v AS SELECT @execution_ts AS e;\n" + QUERY,
            2,
            "@execution_ts",
        ),
        ("CREATE TABLE raw.x AS SELECT @end_ds AS d;\n" + QUERY, 2, "@end_ds"),
    ],
)
def test_a_runtime_macro_in_a_statement_is_refused_at_load(
    tmp_path: Path, body: str, line: int, macro: str
) -> None:
    files = {"config.yaml": CONFIG, "models/t.sql": HEADER + body + "\n"}
    with pytest.raises(ModelError) as exc:
        load(tmp_path, files)
    assert exc.value.path == str(tmp_path / "models" / "t.sql") and exc.value.line == line
    assert f"uses the macro {macro}" in exc.value.message, exc.value.message


def test_a_python_model_s_statement_too(tmp_path: Path) -> None:
    code = (
        "from sqlmesh import model\n\n"
        "@model(\n"
        '    "s.py",\n'
        '    columns={"id": "int"},\n'
        '    post_statements=["CREATE TABLE IF NOT EXISTS raw.seen AS SELECT * FROM @this_model"],\n'
        ")\n"
        "def execute(context, **kwargs):\n"
        "    return context.spark.range(1)\n"
    )
    with pytest.raises(ModelError) as exc:
        load(tmp_path, {"config.yaml": CONFIG, "models/py.py": code})
    assert "uses the macro @this_model" in exc.value.message, exc.value.message


def test_the_driver_refuses_a_placeholder() -> None:
    sql = "CREATE TABLE IF NOT EXISTS raw.x AS SELECT __sluice_macro__start_ds AS d"
    refused = statements.check(sql, queries=True)
    assert refused is not None and "@start_ds" in refused.what


def test_a_variable_rendered_at_load_still_works(tmp_path: Path) -> None:
    body = "CREATE TABLE IF NOT EXISTS raw.x AS SELECT @VAR('tag') AS v;\n" + QUERY
    project = load(tmp_path, {"config.yaml": CONFIG, "models/t.sql": HEADER + body + "\n"})
    assert project.models["s.t"].pre_statements == (
        "CREATE TABLE IF NOT EXISTS raw.x AS SELECT 'a' AS v",
    )
