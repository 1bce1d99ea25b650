"""GitLabForge addressing its project by its numeric id (issue 46), python-gitlab against
``FakeGitLab`` at the wire.

GitLab answers a renamed or moved project's old path as the project only until another
project takes it; its id never changes. Here the project ``data/warehouse`` (id 4242) is
renamed ``data/warehouse-2`` and another project (id 5151) takes the old path: a forge
made for the old path (a delivery sent before the rename, handled after) with the id
reads and writes the renamed project, every request under ``/projects/4242``; without
the id it would read the new holder's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import responses

from sluice.bot.forge.base import Check
from sluice.bot.forge.gitlab import GitLabForge, gitlab_client
from tests.helpers.gitlab_wire import FakeGitLab

TOKEN = "glpat-" + "T0kenT0kenT0kenT0ken12"
URL = "https://gitlab.example.com"
OLD, NEW, PID, HOLDER = "data/warehouse", "data/warehouse-2", 4242, 5151
SHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
MARKER = "<!-- sluice:pr-comment -->"


@pytest.fixture
def gl() -> Iterator[FakeGitLab]:
    fake = FakeGitLab(project=OLD, project_id=PID)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        fake.install(mock)
        yield fake


def _arranged(gl: FakeGitLab, src: Path) -> None:
    """MR !7 at ``SHA`` with a note by alice, a tree, main and a tag; then the project is
    renamed and another project takes its old path."""
    (src / "models").mkdir(parents=True)
    (src / "config.yaml").write_text("sluice:\n  project: demo\n")
    gl.add_mr(7, sha=SHA, source_branch="feature", author="alice")
    gl.add_note(7, "/sluice plan", author="alice")
    gl.add_tree(SHA, src)
    gl.files[(SHA, "config.yaml")] = "sluice:\n  project: demo\n"
    gl.branches["main"], gl.tags["v1"] = SHA, SHA
    gl.branch_commits["main"] = {SHA}
    gl.members["alice"] = 30
    gl.approve(7, "carol")
    gl.rename(NEW)
    gl.taken[OLD] = HOLDER


def _projects(gl: FakeGitLab, since: int = 0) -> list[str]:
    """The project part of each request about a project (``/projects/<this>/...``)."""
    return [m.group(1) for _, path in gl.requests[since:]
            if (m := re.match(r"/projects/([^/?]+)", path))]  # fmt: skip


def test_a_forge_given_the_id_works_on_the_renamed_project_under_its_id(
    gl: FakeGitLab, tmp_path: Path
) -> None:
    _arranged(gl, tmp_path / "src")
    forge = GitLabForge(gitlab_client(URL, TOKEN), OLD, repo_id=PID)
    assert gl.requests == []  # made without a request
    forge.fetch_tree(SHA, tmp_path / "tree")
    assert (tmp_path / "tree" / "config.yaml").exists()
    assert forge.read_file(SHA, "config.yaml") == "sluice:\n  project: demo\n"
    assert [e.name for e in forge.list_dir(SHA, "") or []] == ["config.yaml"]
    pr = forge.pull_request(7)
    assert (pr.head_sha, pr.author) == (SHA, "alice")
    assert [c.sha for c in forge.pull_commits(7) or []] == [SHA]
    assert [r.user for r in forge.reviews(7)] == ["carol"]
    assert forge.permission("alice") == "write"
    assert [r.login for r in forge.push_records([SHA])] == ["alice"]
    assert forge.commit_of("main") == SHA and forge.commit_of("tags/v1") == SHA
    assert forge.on_branch(SHA, "main")
    forge.upsert_comment(7, MARKER, f"{MARKER}\nplanned")
    forge.reply(7, "done")
    note = gl.notes_on(7)[0]["id"]
    assert forge.react(7, note, "+1")
    forge.set_check(SHA, Check(name="sluice/tests", status="completed", conclusion="success",
                               title="ok", summary="ok"))  # fmt: skip
    deployment = forge.start_deployment(SHA, "prod", "promote", ref="main")
    assert deployment is not None
    forge.deployment_status(deployment, "success", "promoted")
    assert forge.merge(7, "merge", SHA)

    # All of it reached the renamed project, by its id: nothing under a path, nothing of
    # the project that holds the old path now.
    assert set(_projects(gl)) == {str(PID)}, sorted(set(_projects(gl)))
    assert [n["body"] for n in gl.bot_notes(7)] == [f"{MARKER}\nplanned", "done"]
    assert gl.statuses_on(SHA)["sluice/tests"]["state"] == "success"
    assert gl.statuses_on(SHA)["sluice/tests"]["target_url"].startswith(f"{URL}/{NEW}/")
    assert [d["status"] for d in gl.deployments] == ["success"]
    assert [m["iid"] for m in gl.merges] == [7] and gl.awards[0]["name"] == "thumbsup"


def test_the_merge_request_s_changes_are_read_under_the_id(
    rs_strict: responses.RequestsMock,
) -> None:
    api = f"{URL}/api/v4/projects/{PID}/merge_requests/7"
    rs_strict.get(api, json={"iid": 7, "project_id": PID})
    rs_strict.get(f"{api}/changes", json={"changes": [{"old_path": "a.sql", "new_path": "b.sql"}]})
    forge = GitLabForge(gitlab_client(URL, TOKEN), OLD, repo_id=PID)
    assert forge.changed_files(7) == ["a.sql", "b.sql"]


@pytest.fixture
def rs_strict() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=True) as mock:
        yield mock


def test_without_the_id_the_old_path_is_the_new_holder_s(gl: FakeGitLab, tmp_path: Path) -> None:
    """What the id guards against: by its old path, the project is another's now (GitLab
    dropped the redirect when the path was taken), and a merge request of the renamed
    project is not found there."""
    _arranged(gl, tmp_path / "src")
    by_path = GitLabForge(gitlab_client(URL, TOKEN), OLD)
    with pytest.raises(Exception, match="404"):
        by_path.pull_request(7)
    assert _projects(gl) == ["data%2Fwarehouse"]
    identity = by_path.identity()
    assert identity is not None and (identity.id, identity.name) == (HOLDER, OLD)
    # Before another project took it, the old path was answered as the renamed project.
    gl.taken.clear()
    assert by_path.pull_request(7).head_sha == SHA


def test_identity_and_repository_of_still_ask_what_they_are_asked(
    gl: FakeGitLab, tmp_path: Path
) -> None:
    """``identity()`` asks which project has the forge's path (a scheduled job's question);
    ``repository_of`` and ``identity(id)`` ask by the id given."""
    _arranged(gl, tmp_path / "src")
    forge = GitLabForge(gitlab_client(URL, TOKEN), OLD, repo_id=PID)
    found = forge.identity()
    assert found is not None and (found.id, found.name) == (HOLDER, OLD)
    assert forge.repository_of(PID) == NEW
    assert forge.repository_of(HOLDER) == OLD
    again = forge.identity(PID)
    assert again is not None and again.name == NEW


@pytest.mark.parametrize("bad", [0, -3, True, "4242"])
def test_a_project_id_that_is_not_a_positive_integer_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="positive integer"):
        GitLabForge(gitlab_client(URL, TOKEN), OLD, repo_id=bad)  # type: ignore[arg-type]
