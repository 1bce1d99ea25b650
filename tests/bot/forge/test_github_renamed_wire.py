"""A repository renamed on the fake GitHub, as the GitHub forge sees it at the wire (the
fake the service's rename test runs on, ``tests/bot/entry/test_rename_service.py``): the
id and the new name say the new name; a read under the old name is moved (301) and
followed to the new one; once another repository takes the old name, the old name is
that repository (its own id) and has none of the renamed one's pull requests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import responses

from sluice.bot.forge.base import ForgeError
from tests.helpers.cases import CASE_REPOSITORY_ID
from tests.helpers.forge_clients import github_forge
from tests.helpers.github_wire import FakeGitHub

OLD, NEW = "octo/warehouse", "octo/warehouse2"
HEAD = "8" * 40


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
    assert any(url.endswith(f"/repos/{NEW}/pulls/8") for url in urls), urls
    assert github_forge(OLD).repository_of(CASE_REPOSITORY_ID) == NEW


def test_an_old_name_taken_since_is_the_other_repository(github: FakeGitHub) -> None:
    github.rename(NEW)
    github.taken[OLD] = 5151
    assert github_forge(NEW).repository_of(CASE_REPOSITORY_ID) == NEW
    found = github_forge(OLD).identity()
    assert found is not None and found.id == 5151 and found.name == OLD
    with pytest.raises(ForgeError):
        github_forge(OLD).pull_request(8)
