"""A failed job's message in its author's terms (``sluice.core.spark.failures``,
``steps.context.spark_error``): the model's file and line, Spark's error class and
one-line message; no position in generated SQL, no logical plan."""

from __future__ import annotations

from sluice.core.spark.failures import job_failure
from sluice.core.spark.render import source_path
from sluice.core.spark.steps.context import spark_error


class AnalysisException(Exception):
    """Spark's, by name: what the driver sees."""


SPARK_TEXT = (
    "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with "
    "name `amout` cannot be resolved. Did you mean one of the following? [`o`.`amount`, "
    "`o`.`id`]. SQLSTATE: 42703; line 1 pos 625;\n'Project ['amout AS x#1]\n"
    "+- SubqueryAlias o\n   +- Relation sluice__jaffle.jaffle__orders__1a2b[id#0] parquet\n"
    "\nJVM stacktrace:\norg.apache.spark.sql.AnalysisException\n\tat org.apache.x(y.scala:1)"
)


def test_a_spark_error_is_its_class_and_one_line() -> None:
    text = spark_error(AnalysisException(SPARK_TEXT))
    assert text == (
        "AnalysisException [UNRESOLVED_COLUMN.WITH_SUGGESTION]: A column, variable, or "
        "function parameter with name `amout` cannot be resolved. Did you mean one of the "
        "following? [`o`.`amount`, `o`.`id`]."
    )


def test_a_python_error_keeps_its_lines() -> None:
    text = spark_error(ValueError("bad row\n  in line 3 of the model\n  value: x"))
    assert text.splitlines() == ["ValueError: bad row", "  in line 3 of the model", "  value: x"]


def test_a_failed_build_names_the_model_s_file_and_line() -> None:
    events = [
        {"event": "step_start", "index": 1, "label": "build jaffle.bad"},
        {
            "event": "step_failed",
            "index": 1,
            "label": "build jaffle.bad",
            "model": "jaffle.bad",
            "source": "models/bad.sql:1",
            "error": spark_error(AnalysisException(SPARK_TEXT)),
        },
    ]
    error = job_failure("j", events, exit_code=3)
    first = str(error).splitlines()[0]
    assert first.startswith(
        "models/bad.sql:1: Spark job failed at step 'build jaffle.bad': "
        "AnalysisException [UNRESOLVED_COLUMN.WITH_SUGGESTION]: "
    )
    assert "pos 625" not in str(error) and "Project [" not in str(error)


def test_a_model_s_source_is_relative_to_its_project() -> None:
    assert source_path("/srv/repo/models/m.sql", "/srv/repo") == "models/m.sql"
    assert source_path("/elsewhere/m.sql", "/srv/repo") == "/elsewhere/m.sql"
