"""GitHub's merge queue in tests: a ``merge_group`` body made from GitHub's documented
example (``tests/fixtures/webhooks/github/merge_group``) for a repository, a group's head
commit and the PR it ends with, as the queue names its branch."""

from __future__ import annotations

from typing import Any

from tests.helpers.cases import realcase

CASE = "github/merge_group/checks_requested.payload.json"


def merge_group(
    repo: str,
    head: str,
    base_sha: str,
    number: int,
    *,
    action: str = "checks_requested",
    reason: str | None = None,
    base: str = "main",
) -> dict[str, Any]:
    """The ``merge_group`` delivery of the queue entry of PR ``number`` whose group's head
    is ``head`` on ``base`` at ``base_sha`` (``destroyed``: with ``reason``)."""
    payload = realcase(CASE, repo, action=action, **{
        "merge_group.head_sha": head,
        "merge_group.head_ref": f"refs/heads/gh-readonly-queue/{base}/pr-{number}-{base_sha}",
        "merge_group.base_ref": f"refs/heads/{base}",
        "merge_group.base_sha": base_sha,
        "merge_group.head_commit.id": head,
    })  # fmt: skip
    payload.pop("organization", None)
    if reason is not None:
        payload["reason"] = reason
    return payload
