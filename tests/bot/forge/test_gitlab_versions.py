"""GitLabForge's merge request versions and approval times, python-gitlab against
``FakeGitLab`` at the wire: what the gate binds a GitLab approval by (GitLab's
``approved_at`` and the versions' ``created_at``, both GitLab's clock; never a webhook)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import responses

from sluice.bot.forge.base import PULL_VERSIONS_LIMIT, ForgeError, created_ms
from sluice.bot.forge.gitlab import GitLabForge, gitlab_client
from tests.helpers.gitlab_wire import FakeGitLab

TOKEN = "glpat-" + "V3rsionsV3rsionsV3rs12"
URL = "https://gitlab.example.com"
A, B, C = "a1" * 20, "b2" * 20, "c3" * 20


@pytest.fixture
def gl() -> Iterator[FakeGitLab]:
    fake = FakeGitLab()
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        fake.install(mock)
        yield fake


@pytest.fixture
def forge(gl: FakeGitLab) -> GitLabForge:
    return GitLabForge(gitlab_client(URL, TOKEN), gl.project, repo_id=gl.project_id)


def test_versions_are_each_head_pushed_oldest_first_with_gitlab_s_times(
    gl: FakeGitLab, forge: GitLabForge
) -> None:
    gl.add_mr(7, sha=A)
    gl.approve(7, "carol")  # given at A
    gl.merge_requests[7]["sha"] = B  # a push
    forge.pull_request(7)  # GitLab sees it (the fake: at its next request)
    gl.merge_requests[7]["sha"] = C
    versions = forge.pull_versions(7)
    assert [v.head_sha for v in versions] == [A, B, C]
    made = [v.created_ms for v in versions]
    assert made == sorted(made) and len(set(made)) == 3
    [carol] = forge.reviews(7)
    approved = created_ms(carol.submitted_at)
    assert carol.commit_sha is None and approved is not None
    assert made[0] < approved < made[1]  # approved_at: GitLab's clock, between the pushes
    assert gl.asked("GET", "/merge_requests/7/versions") == 1


def test_versions_are_read_page_by_page_up_to_the_limit(gl: FakeGitLab, forge: GitLabForge) -> None:
    gl.add_mr(7, sha=A)
    for n in range(1, 131):
        gl.merge_requests[7]["sha"] = f"{n:040x}"
        gl.add_mr(8, sha=f"{n:040x}")  # the fake sees 7's push then (as at any request)
    versions = forge.pull_versions(7)
    assert len(versions) == 131 and versions[0].head_sha == A
    assert versions[-1].head_sha == f"{130:040x}"
    assert gl.asked("GET", "/merge_requests/7/versions") == 2  # pages of 100
    assert PULL_VERSIONS_LIMIT >= 1_000  # the newest 1,000 at the most


def test_a_version_without_a_time_fails_closed(gl: FakeGitLab, forge: GitLabForge) -> None:
    gl.add_mr(7, sha=A)
    gl.versions[7][0]["created_at"] = None
    with pytest.raises(ForgeError, match=r"versions of merge request !7 .*created_at=None"):
        forge.pull_versions(7)
    gl.versions[7][0]["created_at"] = "2026-11-21T10:00:00"  # no zone: not GitLab's time
    with pytest.raises(ForgeError, match="names no head commit or creation time"):
        forge.pull_versions(7)


def test_versions_of_a_merge_request_gitlab_does_not_have_are_an_error(
    forge: GitLabForge,
) -> None:
    with pytest.raises(ForgeError, match=r"listing the versions of merge request !9 failed: 404"):
        forge.pull_versions(9)


def test_an_approval_from_a_gitlab_that_lists_no_approved_at_has_no_time(
    gl: FakeGitLab, forge: GitLabForge
) -> None:
    gl.lists_approved_at = False
    gl.add_mr(7, sha=A)
    gl.approve(7, "carol")
    [carol] = forge.reviews(7)
    assert (carol.user, carol.commit_sha, carol.submitted_at) == ("carol", None, None)
    assert [v.head_sha for v in forge.pull_versions(7)] == [A]
