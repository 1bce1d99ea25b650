"""GitLab's merge request !8 of ``data/warehouse`` served through the whole service, for
attacks on the approval gate (the red-team modules tests/security/test_red_team_*.py that
drive GitLab): the project with its prod built (``mr_world``, served by ``serving``), its
heads ``S8`` (orders changed, the plan carol is shown and approves) and ``S9`` (orders and
customers changed, a plan she never approves) committed by ``commit_heads``, GitLab's
clock set per test (``clock``, writing times as ``iso_ms`` does), the merge request
opened, pushed with no hook (``move_head``) and its hooks delivered (``deliver_update``,
``approval_hook``), and the gate's status on a head (``approval_state``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timezone
from pathlib import Path
from typing import Any

from tests.helpers.cases import CASE_REPOSITORY_ID
from tests.helpers.gitlab_hooks import mr_open_hook
from tests.helpers.gitlab_service import (
    CUSTOMERS,
    ORDERS,
    GitLabService,
    gitlab_world,
    model_tree,
    moment,
    mr_hook,
    send,
    serve_world,
)
from tests.helpers.gitlab_wire import FakeGitLab, fake_sha
from tests.helpers.lifecycle_prod import GitLabWorld

PATH, PID = "data/warehouse", CASE_REPOSITORY_ID
APPROVAL = "sluice/approval"


def mr_world(tmp_path: Path, gate: str = "") -> GitLabWorld:
    """data/warehouse with its prod built on a scripted warehouse, ``gate`` added to its
    gate settings; alice maintains it (she holds its webhook token), carol is the required
    approver."""
    return gitlab_world(tmp_path, PATH, PID, members={"alice": 40, "carol": 30}, gate=gate)


@contextmanager
def serving(world: GitLabWorld) -> Iterator[GitLabService]:
    with serve_world(world, repositories=("gitlab:data/*",)) as running:
        yield running


# == GitLab's clock ====================================================================


def iso_ms(ms: int, zone: timezone = UTC) -> str:
    """``ms`` (epoch) as GitLab's API writes a time: ``2026-11-30T21:00:00.123Z`` (UTC), or
    with the offset of an instance whose time zone is ``zone``."""
    moment = datetime.fromtimestamp(ms / 1000, zone)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}"
    return text + (
        "Z" if zone is UTC else moment.strftime("%z")[:3] + ":" + moment.strftime("%z")[3:]
    )


def clock(gitlab: FakeGitLab, ahead_ms: int = 0) -> Callable[[], int]:
    """GitLab's clock ``ahead_ms`` ahead of the service's (0: agreeing to the millisecond),
    written to the millisecond, each stamp after the one before (never a whole second, which
    the gate reads as a time known to the second only). Returns the clock's ms now."""
    last = [0]

    def now_ms() -> int:
        ms = max(last[0] + 1, int(time.time() * 1000) + ahead_ms)
        ms += 1 if ms % 1000 == 0 else 0
        last[0] = ms
        return ms

    gitlab._now = lambda: iso_ms(now_ms())  # type: ignore[method-assign]
    return now_ms


# == the merge request =================================================================


S8 = fake_sha("red team approval 5: orders")  # its plan is the one carol approves
S9 = fake_sha("red team approval 5: orders and customers")  # a plan she never approves


def commit_heads(world: GitLabWorld) -> None:
    """S8: orders changed (the plan carol is shown and approves); S9: orders and
    customers changed (a plan she never approves)."""
    world.commit(S8, model_tree(world, "mr8", ORDERS))
    world.commit(S9, model_tree(world, "mr9", ORDERS, CUSTOMERS))


def move_head(gitlab: FakeGitLab, sha: str) -> None:
    """alice pushes ``sha`` (committed already) to MR !8's branch, and GitLab makes its
    version (by its clock, as it does at each push); no hook is delivered."""
    with gitlab.lock:
        mr = gitlab.merge_requests[8]
        mr["sha"] = sha
        mr["diff_refs"]["head_sha"] = sha
        gitlab._sync_versions()


def open_mr8(world: GitLabWorld, service: GitLabService, sha: str) -> None:
    """alice opens MR !8 at ``sha``; GitLab's hook; built."""
    world.gitlab.add_mr(8, sha=sha, source_branch="feature-8", author="alice")
    send(service, mr_open_hook(world.gitlab, 8, sha, PATH, PID))
    assert world.gitlab.statuses_on(sha)["sluice/pr-environment"]["state"] == "success"


def deliver_update(world: GitLabWorld, service: GitLabService, sha: str, old: str) -> None:
    """GitLab's update hook of a push of ``sha`` over ``old`` (delivered now)."""
    send(service, mr_hook(world.gitlab, 8, "update", sha, "alice", oldrev=old, updated_at=moment()))
    assert world.gitlab.statuses_on(sha)["sluice/pr-environment"]["state"] == "success"


def approval_hook(
    world: GitLabWorld,
    service: GitLabService,
    head: str,
    *,
    user: str = "carol",
    action: str = "approval",
    updated_at: str | None = None,
) -> None:
    """GitLab's own approval hook (``action``) of ``user``'s, naming the head GitLab has
    now; its ``updated_at`` the time now unless given."""
    at = updated_at or moment()
    send(service, mr_hook(world.gitlab, 8, action, head, user, updated_at=at))


def approval_state(gitlab: FakeGitLab, sha: str) -> dict[str, Any]:
    """The gate's status (``sluice/approval``) on ``sha`` as GitLab holds it."""
    return gitlab.statuses_on(sha)[APPROVAL]
