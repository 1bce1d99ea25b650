"""GitLab commit status ids as the proof a project is the one the service served under a
name (``GitLabForge.set_check`` answers the id of the status GitLab made or moved; the
flow records it, as it records a GitHub check run's; ``GitLabForge.made_check_run`` asks
whether a project lists it), python-gitlab against ``FakeGitLab`` at the wire.

A status id is one project's: the project ``data/warehouse`` (id 4242) lists its own,
asked by its id through a rename; the project that took its old path (id 5151) lists
none of them. Another post of a status's name on the commit hides it from GitLab's
default list (the latest of each name), not from ``all=true``'s.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests
import responses

from sluice.bot.forge.base import Check, ForgeError
from sluice.bot.forge.gitlab import GitLabForge, gitlab_client
from tests.helpers.gitlab_wire import FakeGitLab

TOKEN = "glpat-" + "T0kenT0kenT0kenT0ken12"
URL = "https://gitlab.example.com"
OLD, NEW, PID, HOLDER = "data/warehouse", "data/warehouse-2", 4242, 5151
SHA, OTHER = "6dcb09b5b57875f334f61aebed695e2e4193db5e", "ab" * 20


@pytest.fixture
def gl() -> Iterator[FakeGitLab]:
    fake = FakeGitLab(project=OLD, project_id=PID)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        fake.install(mock)
        yield fake


def _forge(repo_id: int | None = PID) -> GitLabForge:
    return GitLabForge(gitlab_client(URL, TOKEN), OLD, repo_id=repo_id)


def _check(status: str, conclusion: str | None = None) -> Check:
    return Check("sluice/tests", status, "tests", "tests", conclusion=conclusion)


def test_set_check_answers_the_id_of_the_status_gitlab_holds_the_check_in(
    gl: FakeGitLab,
) -> None:
    forge = _forge()
    pending = forge.set_check(SHA, _check("queued"))
    assert pending is not None and pending == gl.statuses[-1]["id"]
    # Moved on while pending or running: GitLab keeps the status, and its id.
    assert forge.set_check(SHA, _check("in_progress")) == pending
    assert forge.set_check(SHA, _check("completed", "success")) == pending
    assert forge.set_check(SHA, _check("completed", "success")) == pending  # not sent again
    assert len(gl.statuses) == 3 and {s["id"] for s in gl.statuses} == {pending}
    # Finished: a new post is a new status, of a new id.
    again = _forge().set_check(SHA, _check("queued"))
    assert again is not None and again != pending and again == gl.statuses[-1]["id"]
    # Refused as the status's state already (400): the id this forge got, else none.
    assert _forge().set_check(SHA, _check("queued")) is None
    assert len(gl.refused_statuses) == 1


def test_a_project_lists_its_own_status_by_its_id_through_a_rename(gl: FakeGitLab) -> None:
    made = _forge().set_check(SHA, _check("completed", "success"))
    other = _forge().set_check(OTHER, _check("completed", "failure"))
    assert made is not None and other is not None
    gl.rename(NEW)
    gl.taken[OLD] = HOLDER
    asked = len(gl.requests)
    forge = _forge(None)  # a job of the path's new holder: asks by id all the same
    assert forge.made_check_run(PID, made, SHA.upper()) is True
    assert forge.made_check_run(PID, other, SHA) is False  # another commit's status
    assert forge.made_check_run(PID, other + 1000, SHA) is False  # no such status
    assert forge.made_check_run(HOLDER, made, SHA) is False  # the old path's new holder's
    paths = [path for _, path in gl.requests[asked:]]
    assert all("all=true" in path for path in paths), paths
    assert [p.split("/repository")[0] for p in paths] == [f"/projects/{PID}"] * 3 + [
        f"/projects/{HOLDER}"
    ]


def test_another_post_of_the_name_hides_nothing_from_all_statuses(gl: FakeGitLab) -> None:
    # sluice/tests is posted on the commit again after Sluice's finished (by a writer of
    # the project, or a later job): GitLab's default list shows the latest of the name
    # alone; every status is listed with all=true.
    made = _forge().set_check(SHA, _check("completed", "success"))
    later = _forge().set_check(SHA, _check("completed", "failure"))
    assert made is not None and later is not None and later != made
    statuses = f"{URL}/api/v4/projects/{PID}/repository/commits/{SHA}/statuses"
    assert [s["id"] for s in requests.get(statuses, timeout=5).json()] == [later]
    assert _forge().made_check_run(PID, made, SHA) is True


def test_a_status_on_a_later_page_is_found(gl: FakeGitLab) -> None:
    made = _forge().set_check(SHA, _check("completed", "success"))
    assert made is not None
    for n in range(150):  # newer statuses of a pipeline's jobs, listed first
        _forge().set_check(SHA, Check(f"job-{n}", "completed", "t", "t", conclusion="success"))
    asked = len(gl.requests)
    assert _forge().made_check_run(PID, made, SHA) is True
    assert len(gl.requests) - asked == 2  # two pages of 100


def test_gitlab_s_failure_to_answer_is_an_error_and_a_missing_project_is_no(
    gl: FakeGitLab,
) -> None:
    made = _forge().set_check(SHA, _check("completed", "success"))
    assert made is not None
    gl.fail("GET", r"/statuses", 500, "500 Internal Server Error", times=4)  # and 3 retries
    with pytest.raises(ForgeError, match=rf"project {PID} holds status {made} failed: 500"):
        _forge().made_check_run(PID, made, SHA)
    assert _forge().made_check_run(PID, made, SHA) is True
    assert _forge().made_check_run(9999, made, SHA) is False  # 404 Project Not Found
