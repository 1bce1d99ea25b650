"""A repository renamed on the fake GitHub, as the GitHub forge sees it at the wire (the
fake the service's rename test runs on, ``tests/bot/entry/test_rename_service.py``): the
id and the new name say the new name; a read under the old name is moved (301) and
followed to the same path under the repository's id; once another repository takes the
old name, the old name is that repository (its own id) and has none of the renamed one's
pull requests. A forge given the repository's id (the service's, from the delivery) reads
and writes it under ``/repositories/{id}/...`` alone, whatever name it was given."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import responses

from sluice.bot.forge.base import Check, ForgeError
from tests.helpers.cases import CASE_REPOSITORY_ID
from tests.helpers.forge_clients import GITHUB_API, github_forge, rs
from tests.helpers.github_wire import FakeGitHub, tarball

__all__ = ["rs"]

OLD, NEW = "octo/warehouse", "octo/warehouse2"
HEAD = "8" * 40
SUCCESSOR_ID = 5151
BY_ID = f"/repositories/{CASE_REPOSITORY_ID}"


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub(repo=OLD)
    fake.add_pull(8, HEAD, author="alice", head_ref="feature-8")
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        fake.install(mock)
        yield fake


def test_the_old_name_is_moved_to_the_new_one(github: FakeGitHub) -> None:
    assert github_forge(OLD).repository_of(CASE_REPOSITORY_ID) == OLD
    github.rename(NEW)
    assert github_forge(NEW).repository_of(CASE_REPOSITORY_ID) == NEW
    assert github_forge(NEW).pull_request(8).head_sha == HEAD
    asked = len(github.requests)
    assert github_forge(OLD).pull_request(8).head_sha == HEAD  # followed
    urls = [url for _, url in github.requests[asked:]]
    assert any(url.endswith(f"/repos/{OLD}/pulls/8") for url in urls), urls
    # GitHub's Location: the same path under the repository's id
    assert any(url.endswith(f"/repositories/{CASE_REPOSITORY_ID}/pulls/8") for url in urls), urls
    assert github_forge(OLD).repository_of(CASE_REPOSITORY_ID) == NEW


def test_an_old_name_taken_since_is_the_other_repository(github: FakeGitHub) -> None:
    github.rename(NEW)
    github.taken[OLD] = 5151
    assert github_forge(NEW).repository_of(CASE_REPOSITORY_ID) == NEW
    found = github_forge(OLD).identity()
    assert found is not None and found.id == 5151 and found.name == OLD
    assert github_forge(NEW).repository_of(5151) == OLD  # by its id, the same repository
    with pytest.raises(ForgeError):
        github_forge(OLD).pull_request(8)


def _by_name(requests: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The requests made under a repository's name (any name)."""
    return [(m, url) for m, url in requests if re.search(r"/repos/[^/]+/[^/?]+", url)]


def test_a_forge_given_the_id_reads_and_writes_the_renamed_repository_by_its_id(
    github: FakeGitHub, tmp_path: Path
) -> None:
    """A job of a delivery under the old name, made with the repository's id, across the
    rename and another repository taking the old name: its checks (made, then edited),
    its comments, reactions, merge, deployment and every read go under
    /repositories/{id}/ to the renamed repository; nothing goes under any name, so
    nothing reaches the old name's new holder."""
    src = tmp_path / "src"
    (src / "models").mkdir(parents=True)
    (src / "models" / "a.sql").write_text("SELECT 1 AS a\n")
    github.trees[HEAD] = tarball(src, "octo-warehouse-8888888")
    github.files[("main", "config.yaml")] = "model_defaults:\n  dialect: spark\n"
    github.files[("main", "models/a.sql")] = "SELECT 1 AS a\n"
    github.refs["main"] = "a" * 40
    github.branch_commits["main"] = {HEAD}
    github.permissions["alice"] = "write"
    github.pulls[8]["files"] = ["models/a.sql"]
    github.add_review(8, "carol", "APPROVED", HEAD)
    theirs = github.add_comment(8, "<!-- sluice:plan --> not the bot's", user="mallory")
    forge = github_forge(OLD, repo_id=CASE_REPOSITORY_ID)
    asked = len(github.requests)
    building = Check("sluice/pr-environment", "in_progress", "building", "building")
    run = forge.set_check(HEAD, building)

    github.rename(NEW)
    github.taken[OLD] = SUCCESSOR_ID
    assert forge.repository_of(CASE_REPOSITORY_ID) == NEW
    pull = forge.pull_request(8)
    assert (pull.head_sha, pull.author) == (HEAD, "alice")
    assert forge.changed_files(8) == ["models/a.sql"]
    assert [c.sha for c in forge.pull_commits(8) or []] == [HEAD]
    assert [r.user for r in forge.reviews(8)] == ["carol"]
    assert forge.permission("alice") == "write"
    assert forge.read_file("main", "config.yaml") == github.files[("main", "config.yaml")]
    assert [e.name for e in forge.list_dir("main", "models") or []] == ["a.sql"]
    assert forge.commit_of("main") == "a" * 40
    assert forge.on_branch(HEAD, "main")
    assert [r.after for r in forge.push_records([HEAD])] == [HEAD]
    found = forge.identity()
    assert found is not None and (found.id, found.name) == (CASE_REPOSITORY_ID, NEW)
    forge.fetch_tree(HEAD, tmp_path / "tree")
    assert (tmp_path / "tree" / "models" / "a.sql").read_text() == "SELECT 1 AS a\n"

    done = Check("sluice/pr-environment", "completed", "built", "built", conclusion="success")
    assert forge.set_check(HEAD, done) == run  # edited by its id
    gate = Check("sluice/gate", "completed", "approved", "approved", conclusion="success")
    gate_run = forge.set_check(HEAD, gate)
    forge.upsert_comment(8, "<!-- sluice:plan -->", "<!-- sluice:plan -->\nplan 1")
    forge.upsert_comment(8, "<!-- sluice:plan -->", "<!-- sluice:plan -->\nplan 2")
    forge.reply(8, "merging")
    assert forge.react(8, theirs, "+1")
    deployment = forge.start_deployment(HEAD, "prod", "Promoting #8")
    assert deployment is not None
    forge.deployment_status(deployment, "success", "promoted")
    merged = forge.merge(8, "squash", HEAD)
    # A later job of the same delivery edits the run it recorded, by its id again.
    assert github_forge(OLD, repo_id=CASE_REPOSITORY_ID).set_check(HEAD, gate, gate_run) == gate_run

    made = github.requests[asked:]
    assert _by_name(made) == [], _by_name(made)
    api = [url for _, url in made if "codeload" not in url and "/user" not in url]
    assert api and all(f"{BY_ID}/" in url or url.endswith(BY_ID) for url in api), api
    # Everything landed on the renamed repository.
    runs = github.checks_on(HEAD)
    assert runs["sluice/pr-environment"]["id"] == run
    assert runs["sluice/pr-environment"]["conclusion"] == "success"
    assert runs["sluice/pr-environment"]["history"] == ["in_progress", "completed"]
    assert runs["sluice/gate"]["history"] == ["completed", "completed"]
    ours = [c for c in github.comments_on(8) if c["id"] != theirs]
    assert [c["body"] for c in ours] == ["<!-- sluice:plan -->\nplan 2", "merging"]
    assert github.comments[theirs]["edits"] == 0  # someone else's is never edited
    assert github.reactions == [{"comment": theirs, "content": "+1"}]
    assert github.deployments[0]["statuses"][0]["state"] == "success"
    assert github.merges == [{"number": 8, "method": "squash", "sha": HEAD, "merge_sha": merged}]


def test_a_forge_given_another_id_reaches_nothing_of_the_repository(github: FakeGitHub) -> None:
    """The id is where the forge goes, not the name: given the id of a repository the
    fake does not hold (the old name's new holder), it finds nothing and writes nothing,
    though the name is the renamed repository's pull request's."""
    forge = github_forge(OLD, repo_id=SUCCESSOR_ID)
    with pytest.raises(ForgeError):
        forge.pull_request(8)
    with pytest.raises(ForgeError):
        forge.reply(8, "hello")
    assert github.comments_on(8) == []
    assert all(f"/repositories/{SUCCESSOR_ID}" in url for _, url in github.requests)


def test_a_commit_status_by_id_when_check_runs_are_refused(rs: responses.RequestsMock) -> None:
    """The commit-status fallback (a token that may not make check runs) posts under the
    id too, and asks nothing of the commit first (a commit read would carry the URL of
    the repository's name, and PyGithub would post under it)."""
    base = f"{GITHUB_API}{BY_ID}"
    refused = rs.post(f"{base}/check-runs", status=403,
                      json={"message": "Resource not accessible by personal access token"})  # fmt: skip
    status = rs.post(f"{base}/statuses/{HEAD}", status=201, json={"id": 1, "state": "success"})
    forge = github_forge(NEW, repo_id=CASE_REPOSITORY_ID)
    done = Check("sluice/pr-environment", "completed", "built", "built", conclusion="success")
    assert forge.set_check(HEAD, done) is None
    assert refused.call_count == 1 and status.call_count == 1
