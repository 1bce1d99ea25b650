"""GitLab's merge trains in tests: the Pipeline Hook of a merge train's pipeline, made from
GitLab's documented example (``tests/fixtures/webhooks/gitlab/pipeline.docs.json``, the
Pipeline Hook example of GitLab's webhook events page as go-gitlab keeps it: see the
fixtures' MANIFEST.tsv), moved to a project, a train ref, its commit and pipeline."""

from __future__ import annotations

from typing import Any

from tests.helpers.cases import load_case

CASE = "gitlab/pipeline.docs.json"


def train_pipeline(
    project: str,
    iid: int,
    sha: str,
    pipeline: int,
    *,
    status: str = "running",
    target: str = "main",
    user: str = "carol",
) -> dict[str, Any]:
    """The Pipeline Hook of the pipeline ``pipeline`` GitLab's merge train runs for merge
    request ``iid`` on the commit ``sha`` of ``refs/merge-requests/<iid>/train`` (into
    ``target``), now ``status``; ``user`` added the merge request to the train."""
    payload = load_case(CASE)
    payload["project"]["path_with_namespace"] = project
    payload["object_attributes"].update(
        id=pipeline, iid=pipeline, ref=f"refs/merge-requests/{iid}/train", sha=sha,
        before_sha="0" * 40, source="merge_request_event", status=status,
        detailed_status=status, finished_at=None,
    )  # fmt: skip
    payload["merge_request"].update(iid=iid, target_branch=target, source_branch=f"mr-{iid}")
    payload["commit"]["id"] = sha
    payload["user"]["username"] = user
    return payload


def merge_request(
    project: str,
    iid: int,
    head: str,
    action: str,
    *,
    user: str = "alice",
    target: str = "main",
    updated_at: str | None = None,
    merge_sha: str | None = None,
    uid: int | None = None,
) -> dict[str, Any]:
    """A Merge Request Hook of merge request ``iid`` at ``head`` into ``target``, made from
    real deliveries: ``open`` and ``update`` (a push: ``oldrev`` set) by its author
    ``user``; ``approval`` by ``user``, at ``updated_at``; ``merge`` into ``merge_sha``.
    ``uid``: ``user``'s account id, as the forge under test knows them (the gate tells
    people apart by it)."""
    case = {"open": "merge_request_open.json", "update": "merge_request_update.json",
            "approval": "merge_request_approved.json",
            "merge": "merge_request_merge.json"}[action]  # fmt: skip
    payload = load_case(f"gitlab/{case}")
    payload["project"]["path_with_namespace"] = project
    attrs = payload["object_attributes"]
    attrs.update(action=action, iid=iid, source_branch=f"mr-{iid}", target_branch=target)
    attrs["last_commit"]["id"] = head
    payload["user"]["username"] = user
    # The author acts, but for an approval (the author's would never count).
    payload["user"]["id"] = attrs["author_id"] + (action == "approval") if uid is None else uid
    if updated_at is not None:
        attrs["updated_at"] = updated_at
    if merge_sha is not None:
        attrs["merge_commit_sha"] = merge_sha
    return payload
