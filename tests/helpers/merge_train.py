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
