"""When the service received an event (``Event.received_ms``) is the service's own word.

The gate orders a person's clicks with their reviews by it (``gate_rules._standings``): a
payload able to set it could place a click before its clicker's objection. No parser reads
it from a payload; the intake stamps it (``intake.group_commit.job_of``). These tests hand
every real webhook body of both forges, with a ``received_ms`` (and ``received``) planted
at every level of the document, to the parsers and the intake.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.bot.events.github import parse_github
from sluice.bot.events.gitlab import parse_gitlab
from sluice.bot.events.neutral import Event, event_from_json
from sluice.bot.events.payload import PayloadError
from sluice.bot.intake.group_commit import job_of

CASES = Path(__file__).resolve().parents[2].parent / "shared" / "realcases"
PLANTED = 1  # 1970: before any review or click a forge could show

# The GitHub event of each folder of real bodies; GitLab's hook of each file's prefix.
GITHUB = {
    "check_run": "check_run",
    "issue_comment": "issue_comment",
    "pull_request": "pull_request",
    "pull_request_review": "pull_request_review",
    "push": "push",
    "release": "release",
}
GITLAB = {
    "merge_request": "Merge Request Hook",
    "note": "Note Hook",
    "pipeline": "Pipeline Hook",
    "push": "Push Hook",
    "release": "Release Hook",
    "tag_push": "Tag Push Hook",
}


def _planted(node: Any) -> Any:
    """``node`` with ``received_ms`` and ``received`` set in every object of it."""
    if isinstance(node, dict):
        return {
            **{k: _planted(v) for k, v in node.items()},
            "received_ms": PLANTED,
            "received": PLANTED,
        }
    if isinstance(node, list):
        return [_planted(v) for v in node]
    return node


def _bodies() -> Iterator[tuple[str, str, Path]]:
    for folder, event in GITHUB.items():
        for path in sorted((CASES / "github" / folder).glob("*.json")):
            yield "github", event, path
    for path in sorted((CASES / "gitlab").glob("*.json")):
        hook = next((h for p, h in GITLAB.items() if path.name.startswith(p)), None)
        if hook is not None:
            yield "gitlab", hook, path


BODIES = list(_bodies())


def _parse(forge: str, event: str, path: Path) -> Event | None:
    payload = _planted(json.loads(path.read_text()))
    try:
        return (parse_github if forge == "github" else parse_gitlab)(event, payload)
    except PayloadError:
        return None  # refused as a whole (a documentation sample without its iid)


def test_the_real_bodies_are_here() -> None:
    assert len({p.parent.name for f, _, p in BODIES if f == "github"}) == len(GITHUB)
    assert len({h for f, h, _ in BODIES if f == "gitlab"}) >= 5
    assert sum(_parse(*body) is not None for body in BODIES) >= 40  # most are queued


@pytest.mark.parametrize(("forge", "event", "path"), BODIES, ids=[p.name for *_, p in BODIES])
def test_no_payload_says_when_the_service_received_it(forge: str, event: str, path: Path) -> None:
    parsed = _parse(forge, event, path)
    if parsed is None:
        return  # an event the service ignores: nothing is queued
    assert parsed.received_ms is None, f"{path.name} set when the service received it"
    before = int(time.time() * 1000)
    queued = event_from_json(job_of(parsed).payload)
    assert queued.received_ms is not None and queued.received_ms >= before
