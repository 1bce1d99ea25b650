"""What holds after a repository's rename, asserted alike for GitHub and GitLab (the two
rename tests through the service, ``tests/bot/entry/test_*rename_service.py``): PR 9 of
the renamed repository was built in the namespace of its first name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sluice.bot.flow import tenancy
from sluice.core.snapshot.naming import schema_prefix, view_name
from tests.helpers.world import World


def assert_namespace_kept(world: World, key: str, new_key: str, prod: Any, jobs: int) -> None:
    """PR 9 of the repository first keyed ``key`` (``forge:owner/name``), renamed to
    ``new_key``, kept its namespace: the same state (PR 8's environment beside PR 9's),
    prod untouched, a plan of its change alone (customers built, nothing else: prod is
    known; the warehouse's jobs from ``jobs`` on), and, isolated, no namespace of the new
    name's (the views in the first name's Spark schemas)."""
    assert world.versions("prod") == prod
    assert world.versions("pr_8")["jaffle.orders"] != prod["jaffle.orders"]
    assert world.versions("pr_9")["jaffle.customers"] != prod["jaffle.customers"]
    assert world.versions("pr_9")["jaffle.orders"] == prod["jaffle.orders"]
    warehouse = world.scripted
    if getattr(world, "isolated", False):
        made = tenancy.state_url(world.shared, new_key)  # type: ignore[attr-defined]
        assert not Path(made.removeprefix("sqlite:///")).exists()
        with schema_prefix(tenancy.schema_prefix(key)):
            assert view_name("jaffle.customers", "pr_9") in warehouse.views
    steps = [s["model"] for job in warehouse.jobs[jobs:] for s in job["steps"]
             if s["type"] == "build"]  # fmt: skip
    assert steps == ["jaffle.customers"], steps
