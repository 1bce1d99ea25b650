"""A project of two models whose second builds in six daily batches, for the tests that
stop a Spark job between batches (a lost server, a superseding push)."""

from __future__ import annotations

from pathlib import Path


def six_batches(root: Path, schema: str) -> Path:
    """``schema.raw`` (60 rows over six days) and ``schema.events``, incremental by day in
    batches of one, from 2024-01-01: the project's folder."""
    (root / "models").mkdir(parents=True)
    (root / "config.yaml").write_text(
        "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n  cron: '@daily'\n"
    )
    (root / "models" / "raw.sql").write_text(
        f"MODEL (name {schema}.raw, kind FULL);\n"
        "SELECT CAST(id AS INT) AS id, DATE_ADD(DATE'2024-01-01', CAST(id % 6 AS INT)) AS ds "
        "FROM range(60)"
    )
    (root / "models" / "events.sql").write_text(
        f"MODEL (\n  name {schema}.events,\n"
        "  kind INCREMENTAL_BY_TIME_RANGE (time_column ds, batch_size 1),\n"
        "  grain (id)\n);\n"
        f"SELECT id, ds FROM {schema}.raw WHERE ds BETWEEN @start_ds AND @end_ds"
    )
    return root
