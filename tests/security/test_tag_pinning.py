"""A release or tag event promotes the commit its tag named when the delivery arrived
(docs/security.md, "which commit a tag or release promotes"): the commit is recorded at
intake, in the queued event and its row, and the flow never resolves the tag's name
again. The attack: someone with write access force-pushes the tag to another commit on
the prod branch after a releaser published the release, while the job waits in the queue.

Real payloads (tests/fixtures/webhooks), the service's own intake (``create_app`` with
its queue, no workers), and the flow on an in-memory GitHub; no Spark (prod already holds
the tagged commit's state, or the promoted commit is read from the deployment record).
"""

from __future__ import annotations

import json
import logging
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from sluice.bot.entry import action
from sluice.bot.entry.app import create_app
from sluice.bot.entry.settings import ServiceSettings
from sluice.bot.events.github import parse_github
from sluice.bot.events.neutral import TagEvent, event_from_json
from sluice.bot.flow import dispatch
from sluice.bot.forge.memory import MemoryForge
from sluice.bot.intake.pin import TagNotResolved, pin_event
from sluice.bot.queue.store import JobQueue
from tests.helpers.cases import load_case, realcase
from tests.helpers.github_service import SECRET, sign
from tests.security.github_bot import OWNER, PREAMBLE, Bot, C, D, tag

TAG_DEPLOY = PREAMBLE + "sluice:\n  project: jaffle\n  deploy:\n    on: tag\n"


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    github = MemoryForge(OWNER, name="github")
    made = Bot(tmp_path, github)
    made.prod(C, TAG_DEPLOY)
    made.commit(D, TAG_DEPLOY, parents=(C,))
    github.refs["main"] = D  # both C and D are on the prod branch
    github.tag("v1.0", C)
    yield made
    made.close()


def _release(name: str) -> dict[str, Any]:
    return realcase("github/release/published.payload.json", OWNER, **{"release.tag_name": name})


def _deployed(bot: Bot) -> list[str]:
    return [d.sha for d in bot.github.deployments]


def _tag_lookups(bot: Bot, since: int) -> list[tuple[str, tuple[object, ...]]]:
    """The flow's questions of what a tag names (the prod branch's head is not one)."""
    return [c for c in bot.github.calls[since:] if c[0] == "commit_of" and "v1.0" in str(c[1])]


def test_the_service_records_a_release_s_commit_at_intake(bot: Bot, tmp_path: Path) -> None:
    settings = ServiceSettings(webhook_secret=SECRET, workdir=tmp_path / "svc",
                               database_url=f"sqlite:///{tmp_path / 'queue.db'}")  # fmt: skip
    body = json.dumps(_release("v1.0")).encode()
    headers = {"X-GitHub-Event": "release", "X-GitHub-Delivery": str(uuid.uuid4()),
               "X-Hub-Signature-256": sign(body)}  # fmt: skip
    app = create_app(settings, forge_for=lambda _event: bot.github, start_workers=False)
    with TestClient(app) as client:
        assert client.post("/webhooks/github", content=body, headers=headers).status_code == 202
    queue = JobQueue(settings.state_url())
    try:
        job = queue.claim("test", 0.0)
    finally:
        queue.close()
    assert job is not None and job.head_sha == C  # the queue row
    event = event_from_json(job.payload)
    assert isinstance(event, TagEvent) and event.sha == C
    # The tag is force-pushed to D while the job waits: the job still promotes C, and the
    # flow does not ask the forge what the tag names.
    bot.github.tag("v1.0", D)
    since = len(bot.github.calls)
    dispatch.handle(bot.deps, event)
    assert _deployed(bot) == [C]
    assert _tag_lookups(bot, since) == []


def test_the_flow_promotes_the_recorded_commit_never_the_tag_s_current_one(bot: Bot) -> None:
    parsed = parse_github("release", _release("v1.0"))
    assert isinstance(parsed, TagEvent) and parsed.sha is None
    pinned = pin_event(parsed, lambda _event: bot.github)  # received: v1.0 is C
    bot.github.tag("v1.0", D)  # then moved
    assert pinned is not None
    dispatch.handle(bot.deps, pinned)
    assert _deployed(bot) == [C]


def test_a_release_without_its_commit_is_not_promoted(bot: Bot) -> None:
    # Queued unpinned (an older version's queue row): the flow does not resolve the tag.
    unpinned = parse_github("release", _release("v1.0"))
    assert isinstance(unpinned, TagEvent)
    bot.github.tag("v1.0", D)
    since = len(bot.github.calls)
    dispatch.handle(bot.deps, unpinned)
    assert _deployed(bot) == [] and _tag_lookups(bot, since) == []
    assert "sluice/deploy" not in bot.checks_on(C) and "sluice/deploy" not in bot.checks_on(D)


def test_a_pushed_tag_promotes_the_commit_of_its_payload(bot: Bot) -> None:
    pushed = parse_github("push", tag("v1.0", C))
    bot.github.tag("v1.0", D)
    assert pushed is not None and pin_event(pushed, lambda _event: bot.github) == pushed
    since = len(bot.github.calls)
    dispatch.handle(bot.deps, pushed)
    assert _deployed(bot) == [C] and _tag_lookups(bot, since) == []


def test_a_tag_that_names_no_commit_at_intake_is_no_work_and_a_forge_error_is_a_503(
    bot: Bot,
) -> None:
    gone = parse_github("release", _release("v9.9"))
    assert gone is not None and pin_event(gone, lambda _event: bot.github) is None

    def broken(_event: object) -> MemoryForge:
        raise RuntimeError("no route to GitHub")

    with pytest.raises(TagNotResolved) as raised:
        pin_event(gone, broken)
    assert "tag 'v9.9'" in raised.value.message and "RuntimeError" in raised.value.message


def test_the_action_pins_a_release_to_github_sha() -> None:
    parsed = parse_github("release", _release("v1.0"))
    assert parsed is not None
    pinned = action.pinned(parsed, C)
    assert isinstance(pinned, TagEvent) and pinned.sha == C
    pushed = parse_github("push", tag("v1.0", D))
    assert pushed is not None and action.pinned(pushed, C) == pushed  # its own commit


# --- a release the intake cannot pin (tests/fuzz/test_webhooks_schemathesis.py found it) ---


def _stored(db: Path) -> tuple[list[tuple[str, int | None]], int]:
    """The deliveries stored (id, job id) and the count of jobs queued."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT delivery_id, job_id FROM sluice_deliveries").fetchall()
        (jobs,) = conn.execute("SELECT COUNT(*) FROM sluice_jobs").fetchone()
        return [tuple(row) for row in rows], jobs


def _post_release(client: TestClient, delivery: str) -> Any:
    # The fuzzer's exact input: the real payload as captured, signed, delivery id "Q,W".
    body = json.dumps(load_case("github/release/published.payload.json")).encode()
    headers = {"X-GitHub-Event": "release", "X-GitHub-Delivery": delivery,
               "X-Hub-Signature-256": sign(body)}  # fmt: skip
    return client.post("/webhooks/github", content=body, headers=headers)


def test_a_release_to_a_service_without_forge_credentials_is_stored_as_no_work(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # No SLUICE_GITHUB_TOKEN nor App: no redelivery can resolve the tag until the operator
    # sets one, so a 503 ("deliver it again") was a retry loop for nothing, and the fuzzer's
    # server error. The release is stored without work, the log names the settings.
    db = tmp_path / "queue.db"
    settings = ServiceSettings(webhook_secret=SECRET, workdir=tmp_path / "svc",
                               database_url=f"sqlite:///{db}")  # fmt: skip
    with TestClient(create_app(settings, start_workers=False)) as client:
        first = _post_release(client, "Q,W")
        assert (first.status_code, first.json()) == (202, {"status": "queued", "delivery": "Q,W"})
        again = _post_release(client, "Q,W")
        assert (again.status_code, again.json()["status"]) == (200, "duplicate")
    assert _stored(db) == ([("Q,W", None)], 0)  # no job: nothing it could promote
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors and all("tag '0.0.1' not promoted" in error for error in errors), errors
    assert "no GitHub credentials" in errors[0] and "SLUICE_GITHUB_TOKEN" in errors[0]


def test_a_release_the_forge_cannot_resolve_now_is_a_503_that_stores_nothing(
    tmp_path: Path,
) -> None:
    db = tmp_path / "queue.db"
    settings = ServiceSettings(webhook_secret=SECRET, workdir=tmp_path / "svc",
                               database_url=f"sqlite:///{db}")  # fmt: skip
    github = MemoryForge("Codertocat/Hello-World", name="github")
    github.commit(C, {"README.md": "hello\n"})
    github.tag("0.0.1", C)
    answers = iter([RuntimeError("no route to GitHub"), None])

    def forge_for(_event: object) -> MemoryForge:
        failure = next(answers)
        if failure is not None:
            raise failure
        return github

    with TestClient(create_app(settings, forge_for=forge_for, start_workers=False)) as client:
        down = _post_release(client, "Q,W")
        assert down.status_code == 503
        assert down.json() == {"error": "the forge did not say which commit the release's "
                               "tag names: deliver it again later"}  # fmt: skip
        assert _stored(db) == ([], 0)  # nothing stored: the redelivery is fresh
        back = _post_release(client, "Q,W")
        assert back.status_code == 202
    deliveries, jobs = _stored(db)
    assert [d for d, _ in deliveries] == ["Q,W"] and jobs == 1
    queue = JobQueue(settings.state_url())
    try:
        job = queue.claim("test", 0.0)
    finally:
        queue.close()
    assert job is not None and job.head_sha == C  # pinned on the redelivery
