"""GitLab webhook bodies built from real ones, for tests that deliver them through the
service (the rename, quiet-project and names red-team tests)."""

from __future__ import annotations

import time
from typing import Any

from tests.helpers.cases import load_case
from tests.helpers.gitlab_wire import FakeGitLab


def mr_open_hook(
    gitlab: FakeGitLab, iid: int, head: str, path: str, project_id: int
) -> dict[str, Any]:
    """GitLab's real Merge Request Hook body: alice opens MR ``iid`` (head ``head``, from
    ``feature-<iid>`` into main) in the project ``path`` of id ``project_id``."""
    payload = load_case("gitlab/merge_request_open.json")
    payload["project"].update(id=project_id, path_with_namespace=path)
    payload["user"].update(username="alice", id=gitlab.user_id("alice"))
    attrs = payload["object_attributes"]
    attrs.update(action="open", iid=iid, source_branch=f"feature-{iid}", target_branch="main",
                 author_id=gitlab.user_id("alice"), source_project_id=project_id,
                 target_project_id=project_id,
                 updated_at=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))  # fmt: skip
    for side in ("source", "target"):
        attrs[side].update(id=project_id, path_with_namespace=path)
    attrs["last_commit"]["id"] = head
    return payload
