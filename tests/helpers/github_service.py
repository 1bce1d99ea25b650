"""The GitHub webhook service harness: the webhook secret and service token, ``sign`` (the
``X-Hub-Signature-256`` of a body), ``Service`` (a running app with its ``FakeGitHub``,
to deliver events and wait for the queue), ``service_settings`` (a test's settings) and
``serve`` (the app running on them, its GitHub the fake one at the wire).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import responses
from fastapi.testclient import TestClient

from sluice.bot.entry.app import create_app
from sluice.bot.entry.settings import ServiceSettings
from sluice.bot.queue.store import JobQueue
from tests.helpers import accounts
from tests.helpers.github_wire import FakeGitHub

SECRET = "s3cr3t-webhook-value"
TOKEN = "ghp_thisIsTheServiceTokenDoNotLeak"


def sign(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class Service:
    """A running app, its fake GitHub, and helpers to deliver events."""

    def __init__(self, client: TestClient, github: FakeGitHub, settings: ServiceSettings) -> None:
        self.client, self.github, self.settings = client, github, settings

    def deliver(
        self,
        event: str,
        payload: dict[str, Any] | bytes,
        *,
        delivery: str | None = None,
        signature: str | None = None,
    ) -> Any:
        if isinstance(payload, dict):  # each person's account id, as GitHub's webhooks say
            payload = accounts.github(payload)
            named = payload.get("repository") or {}
            if not self.github.scoped and named.get("id") == self.github.repo_id:
                # An unscoped fake is whichever repository the delivery names: GitHub says
                # its id has that name (the service asks before a job runs).
                with self.github.lock:
                    self.github.repo = named.get("full_name") or self.github.repo
            if event == "issue_comment" and payload.get("action") == "created":
                self.github.hold_comment(payload)  # a comment's hook: GitHub holds it
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        headers = {
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
            "X-Hub-Signature-256": signature if signature is not None else sign(body),
            "Content-Type": "application/json",
        }
        return self.client.post("/webhooks/github", content=body, headers=headers)

    def queue(self) -> JobQueue:
        return JobQueue(self.settings.state_url())

    def wait(self, done: Callable[[], bool], timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out; GitHub saw {self.github.requests[-10:]}")
            time.sleep(0.05)

    def idle(self, timeout: float = 60.0) -> None:
        """Wait until every job is finished."""
        queue = self.queue()

        def settled() -> bool:
            # One snapshot: a job retried between two reads would be seen neither running
            # (first read) nor queued (second read).
            counts = queue.counts()
            return not (counts.get("queued", 0) or counts.get("running", 0))

        try:
            self.wait(settled, timeout)
        finally:
            queue.close()


def service_settings(root: Path, **overrides: Any) -> ServiceSettings:
    """The service's settings for a test under ``root``: ``SECRET`` and ``TOKEN``, its
    workdir and SQLite state there, a 30 s job lease, no pause between GitHub requests;
    ``overrides`` on top."""
    return ServiceSettings(
        webhook_secret=SECRET, github_token=TOKEN, workdir=root / "work",
        database_url=f"sqlite:///{root / 'state.db'}", job_lease_seconds=30,
        github_request_interval=0, github_write_interval=0, **overrides,
    )  # fmt: skip


@contextmanager
def serve(
    settings: ServiceSettings, github: FakeGitHub, runner_for: Any = None
) -> Iterator[Service]:
    """The app on ``settings`` with its workers (their Spark jobs run by ``runner_for``
    when given, else as the settings say), GitHub's API answered by ``github`` at the wire
    (any other request is a ConnectionError)."""
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        github.install(mock)
        with TestClient(create_app(settings, runner_for=runner_for)) as client:
            yield Service(client, github, settings)
