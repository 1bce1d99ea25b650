"""Real webhook bodies captured by other projects, for the bot tests.

The bodies are in ``tests/fixtures/webhooks`` (``github/<X-GitHub-Event>/*.json``,
``gitlab/*.json``), copied from the team's shared test material; their sources and
licenses are in its ``MANIFEST.tsv`` and ``LICENSES/``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REALCASES = Path(__file__).resolve().parents[1] / "fixtures" / "webhooks"


def case_paths(pattern: str) -> list[Path]:
    """Files under tests/fixtures/webhooks matching ``pattern`` (e.g. ``github/*/*.json``).

    Sorted, for stable test ids. Use it to parametrise.
    """
    return sorted(REALCASES.glob(pattern))


CASE_REPOSITORY_ID = 4242
"""The forge's repository id every body :func:`load_case` gives says (GitHub's
``repository.id``, GitLab's ``project.id``, where the body has one): tests move bodies
captured from many repositories to theirs by name, and the service refuses a delivery
whose name is bound to another id (a repository that took another's name)."""


def load_case(relpath: str | Path) -> dict[str, Any]:
    """The JSON object in ``tests/fixtures/webhooks/<relpath>``, its repository's id
    :data:`CASE_REPOSITORY_ID`."""
    data = json.loads((REALCASES / relpath).read_text(encoding="utf-8"))
    assert isinstance(data, dict), f"{relpath} does not hold a JSON object"
    for where in ("repository", "project"):
        found = data.get(where)
        if isinstance(found, dict) and isinstance(found.get("id"), int):
            found["id"] = CASE_REPOSITORY_ID
    return data


def realcase(relpath: str, repo: str, **changes: Any) -> dict[str, Any]:
    """A copy of a real payload, moved to ``repo`` without an installation, with dotted
    paths set (``realcase(p, "o/r", **{"pull_request.number": 7})``)."""
    payload = load_case(relpath)  # a fresh parse: callers may change it freely
    payload["repository"]["full_name"] = repo
    payload.pop("installation", None)
    for path, value in changes.items():
        node = payload
        *parents, last = path.split(".")
        for part in parents:
            node = node[part]
        node[last] = value
    return payload


def record_prod(project_dir: Path, url: str, now: int, commit: str | None = None) -> None:
    """Record prod as the project in ``project_dir`` with its data taken as built (no
    Spark): for tests of paths where a promotion finds nothing left to do. ``commit``: the
    one its plan records it was promoted from (None: none, as a state from before that
    record, where prod's scheduled runs and drift repairs refuse)."""
    from sluice.core import workflow
    from sluice.core.model.loader import load_project
    from sluice.core.plan.plan import VIEW_MARKER
    from sluice.core.state import open_state

    project = load_project(project_dir, use_cache=False)
    store = open_state(url)
    try:
        plan = workflow.plan_environment(project, store, "prod", end=now, execution_time=now)
        workflow.commit_plan(store, plan, now=now)
        if commit is not None:
            store.set_plan_commit(plan.plan_id, commit)
        for backfill in plan.backfill:
            store.add_intervals(backfill.name, backfill.version, backfill.intervals)
        for name in plan.create_views:
            store.add_intervals(name, plan.snapshot(name).version, [VIEW_MARKER])
    finally:
        store.close()
