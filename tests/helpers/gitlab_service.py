"""The GitLab webhook service harness: the webhook token, the API token and URL,
``GitLabService`` (a running app with its ``FakeGitLab``, to deliver events and wait for the
queue) and ``gitlab_settings`` (the service settings for it).

A project served through the whole service: ``gitlab_world`` (its prod built from main on a
scripted warehouse, its commits served by a fake GitLab project) and ``serve_world`` (the
real app over it, GitLab at the wire); its merge requests opened (``open_mr``, the edits
``ORDERS`` and ``CUSTOMERS`` of main's models, ``model_tree``) and their Merge Request
Hook bodies (``mr_hook``, dated by ``moment``) delivered signed with the project's own
token (``send``).
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import responses
from fastapi.testclient import TestClient

from sluice.bot.entry.app import create_app
from sluice.bot.entry.settings import ServiceSettings
from sluice.bot.flow import tenancy
from sluice.bot.intake.verify import gitlab_project_of, gitlab_project_token
from sluice.bot.queue.store import JobQueue
from sluice.core.snapshot.naming import schema_prefix
from sluice.core.spark.scripted import Warehouse
from tests.helpers import accounts
from tests.helpers.gitlab_hooks import mr_open_hook
from tests.helpers.gitlab_wire import FakeGitLab
from tests.helpers.lifecycle_prod import GitLabWorld, build_main, main_tree
from tests.helpers.world import edit, sha_of

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


# == a project served through the whole service ========================================

MR_HOOK = "Merge Request Hook"
ORDERS = ("orders.sql", "  o.status,\n", "  o.status,\n  o.status = 'completed' AS is_completed,\n")
"""An edit of main's models (file, old, new): orders gets a column."""
CUSTOMERS = ("customers.sql", "  c.first_name,\n",
             "  c.first_name,\n  LENGTH(c.first_name) AS first_name_length,\n")  # fmt: skip
"""An edit of main's models (file, old, new): customers gets a column."""


def gitlab_world(
    root: Path,
    path: str,
    project_id: int,
    *,
    members: Mapping[str, int],
    isolated: bool = True,
    gate: str = "",
    **fake: Any,
) -> GitLabWorld:
    """GitLab project ``path`` (id ``project_id``; ``fake``: more of ``FakeGitLab``'s
    fields) with its prod built up to now on a scripted warehouse from main (the example
    gated by carol, ``gate`` added to its gate settings), its ``members`` (login: access
    level) added. Built in the project's namespace (its own state and Spark schemas) when
    the service is to isolate repositories (``isolated``), else in the service's state.
    The world's ``shared`` is the service's state URL; the caller closes it."""
    shared = f"sqlite:///{root / 'state.db'}"
    key = f"gitlab:{path}"
    url = tenancy.state_url(shared, key) if isolated else shared
    env = GitLabWorld(root, root / "work", url, None, {},  # type: ignore[arg-type]
                      warehouse=Warehouse())  # fmt: skip
    env.gitlab = FakeGitLab(project=path, project_id=project_id, **fake)
    main = main_tree(root, approver="carol")
    if gate:
        config = main / "config.yaml"
        config.write_text(config.read_text().replace("  deploy:\n", gate + "  deploy:\n", 1))
    with schema_prefix(tenancy.schema_prefix(key) if isolated else ""):
        build_main(env, main, int(time.time() * 1000))
    env.gitlab.members.update(members)
    env.shared = shared  # type: ignore[attr-defined]
    env.isolated = isolated  # type: ignore[attr-defined]
    return env


@contextmanager
def serve_world(world: GitLabWorld, **more: Any) -> Iterator[GitLabService]:
    """The real app over ``world`` (made by :func:`gitlab_world`: its state, isolating
    repositories as it was built for; ``more``: further settings) with its workers on the
    scripted warehouse, GitLab's API answered by the world's fake at the wire."""
    settings = gitlab_settings(
        world.root, workdir=world.work, database_url=world.shared,  # type: ignore[attr-defined]
        isolate_repositories=world.isolated, **more,  # type: ignore[attr-defined]
    )  # fmt: skip
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        world.gitlab.install(mock)
        with TestClient(create_app(settings, runner_for=world.runner_for)) as client:
            yield GitLabService(client, world.gitlab, settings)


def moment(seconds_from_now: float = 0) -> str:
    """A time ``seconds_from_now`` as a Merge Request Hook writes it
    (``2026-11-30 21:00:00 UTC``)."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(time.time() + seconds_from_now))


def mr_hook(
    gitlab: FakeGitLab, iid: int, action: str, head: str, user: str, **attrs: Any
) -> dict[str, Any]:
    """A real Merge Request Hook body of MR ``iid`` (alice's) of the fake's project for
    ``action`` by ``user`` at ``head``, ``attrs`` in its ``object_attributes``."""
    payload = mr_open_hook(gitlab, iid, head, gitlab.project, gitlab.project_id)
    payload["user"].update(username=user, id=gitlab.user_id(user))
    payload["object_attributes"].update(action=action, **attrs)
    return payload


def send(service: GitLabService, payload: dict[str, Any]) -> None:
    """Deliver Merge Request Hook ``payload`` signed with the project's own webhook token
    (its maintainers hold it) and wait for the queue."""
    response = service.deliver(MR_HOOK, payload, token=project_token(service.gitlab.project_id))
    assert response.status_code == 202, response.text
    service.idle(timeout=300)


def model_tree(world: GitLabWorld, name: str, *edits: tuple[str, str, str]) -> Path:
    """main's tree with ``edits`` (model file, old, new) applied, as ``root/name``."""
    src = world.root / name
    shutil.copytree(world.trees[sha_of(1)], src)
    for model, old, new in edits:
        edit(src / "models" / model, old, new)
    return src


def open_mr(
    world: GitLabWorld, service: GitLabService, iid: int, *edits: tuple[str, str, str]
) -> None:
    """MR ``iid`` (head ``sha_of(iid)``: main's tree with ``edits``) opened by alice in the
    project under the path the fake has for it now; GitLab's hook; its jobs run."""
    world.commit(sha_of(iid), model_tree(world, f"mr{iid}", *edits))
    gitlab = world.gitlab
    gitlab.add_mr(iid, sha=sha_of(iid), source_branch=f"feature-{iid}", author="alice")
    hook = mr_open_hook(gitlab, iid, sha_of(iid), gitlab.project, gitlab.project_id)
    response = service.deliver(MR_HOOK, hook)
    assert response.status_code == 202, response.text
    service.idle(timeout=300)
