"""One service for two repositories (issue 46, docs/architecture.md "Many repositories,
isolated"): ``SLUICE_REPOSITORIES`` naming both isolates them. Through the running service,
GitHub at the wire (two repositories' ``FakeGitHub``, PyGithub against them), Spark
scripted (one warehouse both repositories' jobs run on): each repository's PR builds in its
own state and schemas, and a merge in one promotes its prod only."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import responses
from fastapi.testclient import TestClient

from sluice.bot.entry.app import create_app
from sluice.bot.entry.settings import ServiceSettings
from sluice.bot.flow import tenancy
from sluice.bot.web.site import StateOwner
from sluice.core.snapshot.naming import PROD, pr_environment, schema_prefix, view_name
from sluice.core.spark.scripted import Warehouse
from sluice.core.state import open_state
from tests.helpers.cases import realcase
from tests.helpers.fold_settings import fold_settings
from tests.helpers.github_service import SECRET, TOKEN, Service
from tests.helpers.github_wire import FakeGitHub, tarball
from tests.helpers.world import edit, sha_of

ROOT = Path(__file__).resolve().parents[3]
A, B = "octo/warehouse", "mallory/other"
IDS = {A: 4242, B: 5353}  # each repository its forge id (one id for two would be a rename)
SETTINGS = "  pr:\n    backfill_days: null\n  deploy:\n    prod_branch: main\n    on: merge\n"


def _commit(github: FakeGitHub, sha: str, src: Path, branch: str | None = None) -> None:
    github.trees[sha] = tarball(src, f"{github.repo.replace('/', '-')}-{sha[:7]}")
    for path in [src / "config.yaml", *sorted(src.rglob("*.py"))]:
        rel = path.relative_to(src).as_posix()
        github.files[(sha, rel)] = path.read_text()
        if branch is not None:
            github.files[(branch, rel)] = path.read_text()
    if branch is not None:
        github.refs[branch] = sha
        github.branch_commits.setdefault(branch, set()).add(sha)


def _pull(repo: str, number: int, head: str, action: str, **more: Any) -> dict[str, Any]:
    event = realcase("github/pull_request/opened.payload.json", repo, action=action, **{
        "number": number, "pull_request.number": number, "pull_request.head.sha": head,
        "pull_request.user.login": "alice", "pull_request.base.ref": "main",
        "pull_request.head.ref": f"feature-{number}",
    })  # fmt: skip
    event["pull_request"]["head"]["repo"]["full_name"] = repo
    event["repository"]["id"] = IDS[repo]
    for side in ("head", "base"):
        event["pull_request"][side]["repo"]["id"] = IDS[repo]
    event["pull_request"].update(more)
    return event


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[Service, dict[str, FakeGitHub], Warehouse, str]]:
    main = tmp_path / "main"
    shutil.copytree(ROOT / "examples" / "jaffle_shop", main,
                    ignore=shutil.ignore_patterns(".sluice"))  # fmt: skip
    fold_settings(main)
    head, _, _ = (main / "config.yaml").read_text().partition("  pr:\n")
    (main / "config.yaml").write_text(head + SETTINGS)
    pr = tmp_path / "pr"
    shutil.copytree(main, pr)
    edit(pr / "models" / "orders.sql", "  ON o.order_id = p.order_id",
         "  ON o.order_id = p.order_id\nWHERE o.status <> 'returned'")  # fmt: skip
    fakes = {repo: FakeGitHub(repo=repo, repo_id=IDS[repo], scoped=True) for repo in (A, B)}
    for github in fakes.values():
        _commit(github, sha_of(1), main, branch="main")
        _commit(github, sha_of(7), pr)
        github.add_pull(7, sha_of(7), author="alice")
        github.permissions.update({"alice": "write"})
    url = f"sqlite:///{tmp_path / 'state.db'}"
    settings = ServiceSettings(
        webhook_secret=SECRET, github_token=TOKEN, workdir=tmp_path / "work", database_url=url,
        github_request_interval=0, github_write_interval=0, janitor_interval_seconds=0,
        repositories=f"{A} {B}",
    )  # type: ignore[arg-type]  # fmt: skip
    assert settings.isolates()  # two repositories named: each in its own namespace
    warehouse = Warehouse()
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        for github in fakes.values():
            github.install(mock)
        with TestClient(create_app(settings, runner_for=warehouse.runner)) as client:
            yield Service(client, fakes[A], settings), fakes, warehouse, url


def _deliver(service: Service, body: dict[str, Any]) -> None:
    response = service.deliver("pull_request", body)
    assert response.status_code == 202, response.text
    service.idle(timeout=600)


def _environments(url: str) -> set[str]:
    store = open_state(url)
    try:
        return {e.name for e in store.list_environments() if not e.invalidated}
    finally:
        store.close()


def test_two_repositories_build_and_promote_apart(
    world: tuple[Service, dict[str, FakeGitHub], Warehouse, str],
) -> None:
    service, fakes, warehouse, url = world
    for repo in (A, B):
        _deliver(service, _pull(repo, 7, sha_of(7), "opened"))
        checks = fakes[repo].checks_on(sha_of(7))
        assert checks["sluice/pr-environment"]["conclusion"] == "success", checks
        # Each repository's comment on its own PR, in its own repository.
        assert fakes[repo].comments_on(7)
    prefixes = {repo: tenancy.schema_prefix(f"github:{repo}") for repo in (A, B)}
    made = {name.rsplit(".", 1)[0] for name in [*warehouse.tables, *warehouse.views]}
    assert made and all(s.startswith(tuple(prefixes.values())) for s in made), made
    states = {repo: tenancy.state_url(url, f"github:{repo}") for repo in (A, B)}
    assert all(_environments(states[repo]) == {pr_environment(7)} for repo in (A, B))

    # B merges: B's prod is promoted, in B's schemas; A has no prod, anywhere.
    fakes[B].pulls[7]["state"], fakes[B].pulls[7]["merged"] = "closed", True
    _commit(fakes[B], sha_of(70), service.settings.workdir.parent / "pr", branch="main")
    _deliver(service, _pull(B, 7, sha_of(7), "closed", merged=True, merge_commit_sha=sha_of(70)))
    assert PROD in _environments(states[B])
    assert PROD not in _environments(states[A])
    with schema_prefix(prefixes[B]):
        assert view_name("jaffle.orders", PROD) in warehouse.views
    assert view_name("jaffle.orders", PROD) not in warehouse.views  # nothing unprefixed
    with schema_prefix(prefixes[A]):
        assert view_name("jaffle.orders", PROD) not in warehouse.views
        assert view_name("jaffle.orders", pr_environment(7)) in warehouse.views
    # The shared database holds the queue and the ledger, no repository's engine state.
    assert _environments(url) == set()
    # The web UI shows both, each from its own state.
    owner = StateOwner(url, isolate=True)
    try:
        assert sorted(owner()) == sorted(f"github:{repo}" for repo in (A, B))
        assert owner.state_url(f"github:{B}") == states[B]
    finally:
        owner.close()


def test_a_rename_to_a_name_the_repositories_setting_does_not_admit_is_refused(
    world: tuple[Service, dict[str, FakeGitHub], Warehouse, str],
) -> None:
    service, _fakes, _warehouse, _url = world
    _deliver(service, _pull(A, 7, sha_of(7), "opened"))  # A's name bound to its id
    # GitHub renames A: its deliveries name it octo/renamed, which the setting does not
    # name. Refused at the door (nothing queued), saying what to add; still refused
    # whatever the delivery's id (the setting decides by the name a delivery carries).
    renamed = _pull(A, 8, sha_of(7), "opened")
    renamed["repository"]["full_name"] = "octo/renamed"
    renamed["pull_request"]["head"]["repo"]["full_name"] = "octo/renamed"
    answer = service.deliver("pull_request", renamed)
    assert answer.status_code == 403, answer.text
    said = answer.json()
    assert said["repository"] == "octo/renamed" and said["setting"] == "SLUICE_REPOSITORIES"
    assert "add it there" in said["error"]
