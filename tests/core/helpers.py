"""Small builders shared by the core tests: projects written to disk, loaded for real."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from sluice.core.model.definition import Project
from sluice.core.model.loader import load_project
from sluice.core.plan.build import PlanRequest, build_plan
from sluice.core.plan.plan import Plan
from sluice.core.snapshot.fingerprint import fingerprint_models

BASIC = {
    "config.yaml": """
        model_defaults:
          dialect: spark
          start: '2024-01-01'
          cron: '@daily'
    """,
    "models/a.sql": """
        MODEL (name s.a, kind FULL);
        SELECT 1 AS id, 'x' AS name
    """,
    "models/b.sql": """
        MODEL (name s.b, kind FULL);
        SELECT id, name FROM s.a
    """,
    "models/c.sql": """
        MODEL (name s.c, kind FULL);
        SELECT id FROM s.b
    """,
}


def write_project(root: Path, files: dict[str, str]) -> Path:
    """Write ``files`` (path -> dedented text) under ``root``; return ``root``."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    (root / "models").mkdir(exist_ok=True)
    return root


def load(root: Path, files: dict[str, str]) -> Project:
    """Write and load a project (no cache, so every call parses)."""
    return load_project(write_project(root, files), use_cache=False)


def plan_of(
    project: Project, base: Plan | None = None, env: str = "prod", *, end: int, **kwargs: Any
) -> Plan:
    """The plan of ``project`` for ``env`` on top of ``base`` (another plan's snapshots),
    built purely, with ``end`` as both the end and the execution time."""
    return build_plan(
        PlanRequest(
            environment=env,
            models=project.models,
            fingerprints=fingerprint_models(project.models, project.audits),
            base={s.name: s for s in base.snapshots} if base else {},
            base_plan_id=base.plan_id if base and base.environment == env else None,
            end=end,
            execution_time=end,
            **kwargs,
        )
    )
