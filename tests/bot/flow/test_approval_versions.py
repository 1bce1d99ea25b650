"""Which head a GitLab approval counts for (``approval._version_at``): the head of the merge
request's latest version GitLab made before the approval, both by GitLab's clock; none
when no version was, or when one was made in the approval's very moment (which head was
approved cannot be told)."""

from __future__ import annotations

from sluice.bot.flow.approval import _version_at
from sluice.bot.forge.base import PullVersion

A, B, C = "a" * 40, "b" * 40, "c" * 40
T = 1_800_000_000_000  # a whole second
VERSIONS = [PullVersion(A, T), PullVersion(B, T + 60_000), PullVersion(C, T + 120_000)]


def test_the_latest_version_made_before_the_approval_is_its_head() -> None:
    assert _version_at(VERSIONS, T + 1_000) == A
    assert _version_at(VERSIONS, T + 59_000) == A
    assert _version_at(VERSIONS, T + 61_000) == B
    assert _version_at(VERSIONS, T + 999_000) == C


def test_an_approval_older_than_every_version_has_no_head() -> None:
    assert _version_at(VERSIONS, T - 1_000) is None
    assert _version_at([], T) is None


def test_an_approval_in_the_second_a_version_was_made_has_no_head() -> None:
    # To the second where either time has none finer: the push may have come first.
    assert _version_at(VERSIONS, T + 60_000) is None
    assert _version_at(VERSIONS, T + 60_400) is None  # B's time is whole seconds
    precise = [PullVersion(A, T + 7), PullVersion(B, T + 60_250)]
    assert _version_at(precise, T + 60_250) is None  # the same millisecond
    assert _version_at(precise, T + 60_600) == B  # both to the millisecond: after B
    assert _version_at(precise, T + 60_100) == A  # both to the millisecond: before B


def test_of_two_versions_made_at_one_time_the_later_listed_wins() -> None:
    twice = [PullVersion(A, T), PullVersion(B, T)]  # oldest first, as listed
    assert _version_at(twice, T + 5_000) == B
