"""The web UI's actions on GitLab at the wire (issue 44): one GitLab host answering both
the service's python-gitlab calls (:class:`~tests.helpers.gitlab_wire.FakeGitLab`, with
the service's ``PRIVATE-TOKEN``) and the people's OAuth sign-in (their ``Bearer``
tokens: ``/oauth/token``, ``/api/v4/user``, ``/api/v4/projects/{path}``), and a project
with prod built and merge request 2 opened by alice; the service over it with GitLab
sign-in (:func:`signed_in_service`), its people (``ALICE``, ``BOB``, ``CAROL``, ``EVE``),
a page's flash and the audit log's rows.

Both register routes on the same paths (``GET /api/v4/user``, ``/projects/{path}``), so
the mock's registry is :class:`FirstWins` (the first route that matches answers, none is
used up) and the sign-in's routes match only a person's ``Bearer`` token.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

import responses
from fastapi.testclient import TestClient
from responses import matchers
from responses.registries import FirstMatchRegistry

from sluice.bot.entry.app import create_app
from sluice.bot.flow.ledger import Ledger
from sluice.bot.forge.memory import account_id_of
from sluice.core import workflow
from sluice.core.model.loader import load_project
from sluice.core.spark.scripted import Script, Warehouse
from sluice.core.state import open_state
from sluice.core.timeutil import to_ms
from tests.helpers.cases import load_case
from tests.helpers.fold_settings import fold_settings
from tests.helpers.gitlab_service import GitLabService, gitlab_settings
from tests.helpers.gitlab_wire import FakeGitLab
from tests.helpers.oauth import CLIENT_ID, CLIENT_SECRET, GITLAB, FakeUser
from tests.helpers.world import GATE, edit, sha_of

REPO = Path(__file__).resolve().parents[2]
PROJECT = "data/warehouse"
END = to_ms("2018-04-30")
MAIN, HEAD = sha_of(1), sha_of(2)
TITLE = '<script>alert("mr")</script> Drop returned orders'
KEY = f"gitlab:{PROJECT}"
# alice and bob Developers, carol a Reporter (gitlab_project); eve cannot read the project.
ALICE = FakeUser("alice", code="gl-alice", token="gloas-alice000000000000", readable={PROJECT})
BOB = FakeUser("bob", code="gl-bob", token="gloas-bob00000000000000", readable={PROJECT})
CAROL = FakeUser("carol", code="gl-carol", token="gloas-carol000000000000", readable={PROJECT})
EVE = FakeUser("eve", code="gl-eve", token="gloas-eve00000000000000", readable=())


class FirstWins(FirstMatchRegistry):
    """The first registered route that matches a request answers it, every time."""

    def find(self, request: Any) -> tuple[Any, list[str]]:
        reasons: list[str] = []
        for response in self.registered:
            matched, reason = response.matches(request)
            if matched:
                return response, reasons
            reasons.append(reason)
        return None, reasons


def wire() -> responses.RequestsMock:
    """The HTTP mock for :func:`sign_in_routes` and ``FakeGitLab.install`` (in that order)."""
    return responses.RequestsMock(assert_all_requests_are_fired=False, registry=FirstWins)


def sign_in_routes(rsps: responses.RequestsMock, *users: FakeUser, served: Collection[str]) -> None:
    """GitLab's OAuth side for ``users``: the code traded for their token, and, with
    their ``Bearer`` token only, their login and the projects they can read."""
    by_code = {u.code: u for u in users}

    def token(request: Any) -> tuple[int, dict[str, str], str]:
        form = parse_qs(str(request.body))
        if form.get("client_secret") != [CLIENT_SECRET]:
            return 401, {}, '{"error": "invalid_client"}'
        user = by_code.get(form.get("code", [""])[0])
        if user is None:
            return 400, {}, '{"error": "invalid_grant"}'
        return 200, {}, json.dumps({"access_token": user.token, "token_type": "Bearer"})

    rsps.add_callback(responses.POST, f"{GITLAB}/oauth/token", callback=token)
    for user in users:
        bearer = [matchers.header_matcher({"Authorization": f"Bearer {user.token}"})]
        rsps.add(
            responses.GET, f"{GITLAB}/api/v4/user", json={"username": user.login, "id": account_id_of(user.login)},
            match=bearer,
        )  # fmt: skip
        for name in served:
            url = f"{GITLAB}/api/v4/projects/{quote(name, safe='')}"
            if name in user.readable:
                rsps.add(responses.GET, url, json={"path_with_namespace": name}, match=bearer)
            else:
                rsps.add(responses.GET, url, status=404, json={"message": "404"}, match=bearer)


@dataclass
class GitLabProject:
    """Prod of ``PROJECT`` built from the example (``GATE``: bob approves) at ``MAIN``,
    merge request 2 by alice at ``HEAD`` (``TITLE``), on ``gitlab`` and ``warehouse``."""

    root: Path
    url: str
    gitlab: FakeGitLab
    warehouse: Warehouse

    def mr_hook(self, action: str, user: str) -> dict[str, Any]:
        """GitLab's real merge request payload, moved to MR 2 of ``PROJECT``."""
        payload = load_case("gitlab/merge_request_open.json")
        payload["project"]["path_with_namespace"] = PROJECT
        payload["user"].update(username=user, id=account_id_of(user))
        attrs = payload["object_attributes"]
        attrs.update(action=action, iid=2, source_branch="feature-2", target_branch="main",
                     author_id=account_id_of("alice"), title=TITLE)  # fmt: skip
        attrs["last_commit"]["id"] = HEAD
        return payload


def _commit(gitlab: FakeGitLab, sha: str, src: Path, branch: str | None = None) -> None:
    gitlab.add_tree(sha, src)
    for path in [src / "config.yaml", *sorted(src.rglob("*.py"))]:
        rel = path.relative_to(src).as_posix()
        gitlab.files[(sha, rel)] = path.read_text()
        if branch is not None:
            gitlab.files[(branch, rel)] = path.read_text()
    if branch is not None:
        gitlab.branches[branch] = sha
        gitlab.branch_commits.setdefault(branch, set()).add(sha)


def gitlab_project(root: Path) -> GitLabProject:
    """Prod built (the scripted warehouse), MR 2 opened on the fake GitLab (not yet
    delivered: the test delivers its hook); alice and bob Developers, carol a Reporter."""
    warehouse = Warehouse(Script(rows={"jaffle.orders": 99}))
    gitlab = FakeGitLab(project=PROJECT)
    url = f"sqlite:///{root / 'state.db'}"
    main = root / "main"
    shutil.copytree(REPO / "examples" / "jaffle_shop", main,
                    ignore=shutil.ignore_patterns(".sluice"))  # fmt: skip
    fold_settings(main)  # the example's sluice.yaml into config.yaml
    head, _, _ = (main / "config.yaml").read_text().partition("  pr:\n")
    (main / "config.yaml").write_text(head + GATE.lstrip("\n"))
    project = load_project(main, use_cache=False)
    store = open_state(url)
    try:
        plan = workflow.plan_environment(project, store, "prod", end=END, execution_time=END)
        workflow.apply_plan(project, store, plan, warehouse.runner(project), now=END)
    finally:
        store.close()
    _commit(gitlab, MAIN, main, branch="main")
    src = root / "mr2"
    shutil.copytree(main, src)
    edit(src / "models" / "orders.sql", "  ON o.order_id = p.order_id",
         "  ON o.order_id = p.order_id\nWHERE o.status <> 'returned'")  # fmt: skip
    _commit(gitlab, HEAD, src)
    gitlab.branch_commits[HEAD] = {MAIN}  # the MR's head is on main's tip
    gitlab.add_mr(2, sha=HEAD, source_branch="feature-2", author="alice", title=TITLE)
    gitlab.members.update({"alice": 30, "bob": 30, "carol": 20})
    warehouse.script = Script(rows={"jaffle.orders": 95})
    return GitLabProject(root, url, gitlab, warehouse)


@contextmanager
def signed_in_service(built: GitLabProject) -> Iterator[GitLabService]:
    """The real service over ``built`` (its state, the scripted warehouse) with GitLab
    sign-in for ALICE, BOB, CAROL and EVE, the UI not public, GitLab at the wire; merge
    request 2's open hook delivered and its jobs run."""
    settings = gitlab_settings(
        built.root, database_url=built.url, gitlab_oauth_client_id=CLIENT_ID,
        gitlab_oauth_client_secret=CLIENT_SECRET, ui_public=False,
    )  # fmt: skip
    with wire() as mock:
        sign_in_routes(mock, ALICE, BOB, CAROL, EVE, served=[PROJECT])  # first: Bearer only
        built.gitlab.install(mock)
        app = create_app(settings, runner_for=built.warehouse.runner)
        with TestClient(app) as client:
            served = GitLabService(client, built.gitlab, settings)
            answer = served.deliver("Merge Request Hook", built.mr_hook("open", "alice"))
            assert answer.status_code == 202, answer.text
            served.idle(timeout=300)
            yield served


def flash_of(html: str) -> str:
    """The flash message a page shows (from its ``data-testid`` to the end of its ``<p>``)."""
    start = html.index('data-testid="flash"')
    return html[start : html.index("</p>", start)]


def audit(url: str) -> list[tuple[str, str, str, str]]:
    """The audit log of ``PROJECT`` in the state at ``url``: (kind, actor, outcome, detail)."""
    ledger = Ledger(url)
    try:
        return [(r.kind, r.actor, r.outcome, r.detail) for r in ledger.entries(repo=KEY)]
    finally:
        ledger.close()
