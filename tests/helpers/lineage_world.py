"""A generated project of N SQL models (``bench/plan_bench.py``'s: layers of 50, each
model reading explicit columns of one to three models of the layers before, ten
external tables at the root) planned into a fresh state without Spark (the plans
committed, as ``workflow.commit_plan`` does for tests), and ``sluice ui``'s site over
it: the lineage page's tests and its benchmark (``bench/lineage_bench.py``).

Beside them, ``hostile.marker`` has a column named like an HTML tag. Prod holds the project; environment ``pr_1`` holds it with one model of the second layer
changed (a breaking change to its ``v0``), so a plan colours its descendants.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.plan_bench import generate
from sluice.bot.web.access import Everyone
from sluice.bot.web.reader import Reader
from sluice.bot.web.site import Site
from sluice.core import workflow
from sluice.core.model.loader import load_project
from sluice.core.snapshot.naming import PROD
from sluice.core.state import open_state
from sluice.core.timeutil import to_ms

REPO = "local:lineage/generated"
HOSTILE = "<img src=x onerror=alert(4)>"
"""A column name of ``hostile.marker`` (a quoted identifier may hold anything)."""
HOSTILE_MODEL = f"""MODEL (
  name hostile.marker,
  kind FULL,
  description '<script>alert(3)</script>'
);
SELECT p.id AS `{HOSTILE}`, p.v0 FROM layer_0.model_0 AS p
"""
NOW = to_ms("2024-03-01")


@dataclass(frozen=True)
class LineageWorld:
    url: str
    names: list[str]  # the models, in layer order
    changed: str  # the model pr_1 changes
    plan_id: str  # pr_1's plan

    def site(self) -> Site:
        return Site(
            lambda: [REPO],
            lambda repo: Reader(repo, self.url, queue=False, clock=lambda: NOW),
            Everyone(),
        )


def lineage_world(root: Path, count: int) -> LineageWorld:
    """Write ``count`` models under ``root``/project and build prod and pr_1 from them."""
    folder = root / "project"
    names = generate(folder, count)
    (folder / "models" / "hostile.sql").write_text(HOSTILE_MODEL)
    url = f"sqlite:///{root / 'state.db'}"
    store = open_state(url)
    try:
        project = load_project(folder)  # its parse cache: the second load reads it
        plan = workflow.plan_environment(project, store, PROD, end=NOW, execution_time=NOW)
        workflow.commit_plan(store, plan, now=NOW)
        changed = names[min(len(names) - 1, 60)]
        path = folder / "models" / f"model_{changed.rsplit('_', 1)[1]}.sql"
        path.write_text(path.read_text().replace(".v0 + 0 AS v0", ".v0 * 2 AS v0"))
        project = load_project(folder)  # its parse cache: the second load reads it
        pr = workflow.plan_environment(project, store, "pr_1", end=NOW, execution_time=NOW)
        workflow.commit_plan(store, pr, now=NOW)
    finally:
        store.close()
    return LineageWorld(url, names, changed, pr.plan_id)
