"""The GitLab webhook service harness: the webhook token, the API token and URL,
``GitLabService`` (a running app with its ``FakeGitLab``, to deliver events and wait for the
queue) and ``gitlab_settings`` (the service settings for it).
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from sluice.bot.entry.settings import ServiceSettings
from sluice.bot.intake.verify import gitlab_project_of, gitlab_project_token
from sluice.bot.queue.store import JobQueue
from tests.helpers import accounts
from tests.helpers.gitlab_wire import FakeGitLab

TOKEN = "glwt-s3cr3t-webhook-token"
"""The service's SLUICE_GITLAB_WEBHOOK_SECRET (each project's webhook token derives from it)."""
DERIVED = "derived"
"""``deliver``'s default token: the one derived for the payload's ``project.id``."""


def project_token(project_id: int, secret: str = TOKEN) -> str:
    """GitLab project ``project_id``'s webhook token under ``secret``."""
    return gitlab_project_token(secret, project_id)


API_TOKEN = "glpat-ThisIsTheServiceTokenDoNotLeak"
URL = "https://gitlab.example.com"


class GitLabService:
    """A running app, its fake GitLab, and helpers to deliver GitLab events."""

    def __init__(self, client: TestClient, gitlab: FakeGitLab, settings: ServiceSettings) -> None:
        self.client, self.gitlab, self.settings = client, gitlab, settings

    def deliver(
        self,
        event: str,
        payload: dict[str, Any] | bytes,
        *,
        token: str | None = DERIVED,
        key: str | None = "new",
        event_uuid: str | None = None,
    ) -> Any:
        if isinstance(payload, dict):  # each person's account id, as the fake GitLab's
            payload = accounts.gitlab(payload, self.gitlab.user_id)
            named = payload.get("project") or {}
            if self.gitlab.adopt_project and named.get("id") == self.gitlab.project_id:
                # An adopting fake is whichever project the delivery names: GitLab says
                # its id has that path (the service asks before a job runs).
                with self.gitlab.lock:
                    self.gitlab.project = named.get("path_with_namespace") or self.gitlab.project
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        if token is DERIVED:  # what the project's webhook holds; no project.id: the secret
            try:
                project = gitlab_project_of(json.loads(body))
            except (ValueError, RecursionError):
                project = None
            secret = self.settings.gitlab_webhook_secret
            held = secret.get_secret_value() if secret else TOKEN
            token = TOKEN if project is None or not held else project_token(project, held)
        headers = {"X-Gitlab-Event": event, "Content-Type": "application/json"}
        if token is not None:
            headers["X-Gitlab-Token"] = token
        if key is not None:
            headers["Idempotency-Key"] = str(uuid.uuid4()) if key == "new" else key
        if event_uuid is not None:
            headers["X-Gitlab-Event-UUID"] = event_uuid
        return self.client.post("/webhooks/gitlab", content=body, headers=headers)

    def counts(self) -> dict[str, int]:
        queue = JobQueue(self.settings.state_url())
        try:
            return {state: n for state, n in queue.counts().items() if n}
        finally:
            queue.close()

    def idle(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while (counts := self.counts()).get("queued", 0) or counts.get("running", 0):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out; GitLab saw {self.gitlab.requests[-10:]}")
            time.sleep(0.05)


def gitlab_settings(root: Path, **more: Any) -> ServiceSettings:
    values: dict[str, Any] = dict(
        gitlab_webhook_secret=TOKEN,
        gitlab_token=API_TOKEN,
        gitlab_url=URL,
        workdir=root / "work",
        database_url=f"sqlite:///{root / 'state.db'}",
        job_lease_seconds=30,
        janitor_interval_seconds=0,
    )
    values.update(more)
    return ServiceSettings(**values)
