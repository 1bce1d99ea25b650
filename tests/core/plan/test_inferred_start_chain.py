"""A long chain of incremental models without ``start`` plans (red team F3): where each
backfill begins is inferred from the parents' starts (:func:`inferred_start`), once per
model in topological order with one cache, not by recursing once per parent (a chain of
500 raised RecursionError, which is no SluiceError: the bot retried the plan)."""

from __future__ import annotations

from pathlib import Path

from sluice.core.plan.build import inferred_start
from sluice.core.timeutil import to_ms
from tests.core.helpers import load, plan_of

END = to_ms("2024-01-03")
LENGTH = 1_500


def _chain(length: int) -> dict[str, str]:
    files = {
        "config.yaml": "model_defaults:\n  dialect: spark\n  cron: '@daily'\n",
        "models/m0.sql": (
            "MODEL (name s.m0, kind INCREMENTAL_BY_TIME_RANGE(time_column d), start '2024-01-01');\n"
            "SELECT CAST('2024-01-01' AS DATE) AS d\n"
        ),
    }
    for i in range(1, length):
        files[f"models/m{i}.sql"] = (
            f"MODEL (name s.m{i}, kind INCREMENTAL_BY_TIME_RANGE(time_column d));\n"
            f"SELECT d FROM s.m{i - 1} WHERE d BETWEEN @start_ds AND @end_ds\n"
        )
    return files


def test_a_chain_of_models_without_start_plans_from_the_first_one_s_start(
    tmp_path: Path,
) -> None:
    project = load(tmp_path, _chain(LENGTH))
    last = f"s.m{LENGTH - 1}"
    assert inferred_start(last, project.models, END) == to_ms("2024-01-01")
    plan = plan_of(project, end=END)
    starts = {b.name: b.intervals[0][0] for b in plan.backfill}
    assert len(starts) == LENGTH and set(starts.values()) == {to_ms("2024-01-01")}


def test_one_cache_serves_every_model(tmp_path: Path) -> None:
    project = load(tmp_path, _chain(5))
    cache: dict[str, int] = {}
    assert inferred_start("s.m4", project.models, END, cache) == to_ms("2024-01-01")
    assert cache == {f"s.m{i}": to_ms("2024-01-01") for i in range(5)}
    given = {"s.m2": 7}  # what is cached is read, not inferred again
    assert inferred_start("s.m4", project.models, END, given) == 7
    assert given == {"s.m2": 7, "s.m3": 7, "s.m4": 7}
