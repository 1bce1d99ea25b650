"""The promotion's views swap runs parents first: every view of the views step comes after
the views of the models it reads, whatever order the plan lists its snapshots in (no Spark:
the job spec)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from sluice.core import workflow
from sluice.core.plan.plan import Plan
from sluice.core.snapshot.naming import view_name
from sluice.core.spark.render import view_steps
from sluice.core.state import open_state
from sluice.core.timeutil import to_ms
from tests.core.helpers import load

END = to_ms("2024-01-11")
# Names sorting against the flow of data: z -> y -> a -> m, and z -> m, m -> b.
FILES = {
    "config.yaml": "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n",
    "models/z.sql": "MODEL (name s.z, kind FULL);\nSELECT 1 AS id",
    "models/y.sql": "MODEL (name s.y, kind FULL);\nSELECT id FROM s.z",
    "models/a.sql": "MODEL (name s.a, kind VIEW);\nSELECT id FROM s.y",
    "models/m.sql": "MODEL (name s.m, kind FULL);\nSELECT a.id FROM s.a AS a JOIN s.z AS z ON a.id = z.id",
    "models/b.sql": "MODEL (name s.b, kind FULL);\nSELECT id FROM s.m",
}
PARENTS = {"s.z": [], "s.y": ["s.z"], "s.a": ["s.y"], "s.m": ["s.a", "s.z"], "s.b": ["s.m"]}


def swapped(plan: Plan, previous: dict[str, str] | None) -> list[str]:
    """The models whose views the plan's views step swaps, in its order."""
    names = {view_name(name, plan.environment): name for name in PARENTS}
    return [names[v["view"]] for v in view_steps(plan, previous)["views"]]


def parents_first(order: list[str]) -> bool:
    at = {name: i for i, name in enumerate(order)}
    return all(at[p] < at[name] for name in order for p in PARENTS[name] if p in at)


def test_views_are_swapped_parents_first_whatever_the_plans_order(
    tmp_path: Path, state_url: str
) -> None:
    store = open_state(state_url)
    try:
        first = workflow.plan_environment(
            load(tmp_path / "p", FILES), store, "prod", end=END, execution_time=END
        )
        workflow.commit_plan(store, first, now=END)
        order = swapped(first, None)
        assert sorted(order) == sorted(PARENTS) and parents_first(order)
        # Listed children first (or by name: children first too here), the step's order
        # is still parents first, and its views are the same.
        for listed in (
            tuple(reversed(first.snapshots)),
            tuple(sorted(first.snapshots, key=lambda s: s.name)),
        ):
            shuffled = dataclasses.replace(first, snapshots=listed)
            assert not parents_first([s.name for s in listed])
            assert swapped(shuffled, None) == order
            views = view_steps(shuffled, None)["views"]
            assert sorted(views, key=str) == sorted(view_steps(first, None)["views"], key=str)

        # A promotion changing the root swaps the views of every model it reaches, again
        # parents first.
        changed = load(
            tmp_path / "q", {**FILES, "models/z.sql": FILES["models/z.sql"] + " WHERE 1 = 0"}
        )
        second = workflow.plan_environment(changed, store, "prod", end=END, execution_time=END)
        previous = {s.name: s.version for s in first.snapshots}
        promoted = swapped(
            dataclasses.replace(second, snapshots=tuple(reversed(second.snapshots))), previous
        )
        assert set(promoted) == {"s.z", "s.y", "s.a", "s.m", "s.b"} and parents_first(promoted)
    finally:
        store.close()
