"""Incremental models without ``start`` (issue 41, item 11): SQLMesh 0.236.4 loads them
and infers where their backfill begins (``sqlmesh.core.snapshot.definition.start_date``):
the model's own start, else the earliest of its parents' (inferred the same way), else
(no parent) the start of its cron's last complete interval. Sluice plans them the same
way, with a warning naming the file and line."""

from __future__ import annotations

from pathlib import Path

from sluice.core.plan.build import inferred_start
from sluice.core.timeutil import to_ms
from tests.core.helpers import load, plan_of

END = to_ms("2024-03-10 13:00:00")
FILES = {
    "config.yaml": "model_defaults:\n  dialect: spark\n",
    "models/raw.sql": """
        MODEL (name s.raw, kind FULL, start '2024-03-01');
        SELECT CAST('2024-03-01' AS DATE) AS ds
    """,
    "models/child.sql": """
        MODEL (name s.child, kind INCREMENTAL_BY_TIME_RANGE (time_column ds));
        SELECT ds FROM s.raw WHERE ds BETWEEN @start_ds AND @end_ds
    """,
    "models/alone.sql": """
        MODEL (name s.alone, kind INCREMENTAL_BY_TIME_RANGE (time_column ds), cron '@hourly');
        SELECT CAST(NULL AS TIMESTAMP) AS ds
    """,
    "models/python.py": """
        from sqlmesh import model

        @model(
            "s.py",
            columns={"ds": "date"},
            kind=dict(name="INCREMENTAL_BY_TIME_RANGE", time_column="ds"),
            depends_on=["s.child"],
        )
        def execute(context, start, end, execution_time, **kwargs):
            return context.spark.table(context.resolve_table("s.child"))
    """,
}


def test_a_model_without_start_is_planned_from_its_parents_or_its_last_interval(
    tmp_path: Path,
) -> None:
    project = load(tmp_path, FILES)
    warned = [n for n in project.notes if "has no start date" in n]
    assert sorted(n.split(":")[0].rsplit("/", 1)[-1] for n in warned) == [
        "alone.sql",
        "child.sql",
        "python.py",
    ]
    models = project.models
    assert inferred_start("s.child", models, END) == to_ms("2024-03-01")  # its parent's
    assert inferred_start("s.py", models, END) == to_ms("2024-03-01")  # through s.child
    # No parent: the last complete hour before the plan's end (12:00 to 13:00).
    assert inferred_start("s.alone", models, END) == to_ms("2024-03-10 12:00:00")
    plan = plan_of(project, end=END)
    backfill = {b.name: b for b in plan.backfill}
    assert backfill["s.child"].start == to_ms("2024-03-01")
    assert backfill["s.child"].intervals[-1][1] == to_ms("2024-03-10")
    assert backfill["s.py"].start == to_ms("2024-03-01")
    assert backfill["s.alone"].intervals == ((to_ms("2024-03-10 12:00:00"), END),)
