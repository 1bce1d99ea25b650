"""A writer's ``/sluice plan`` on a fork PR builds the head they saw, not a later push.

A fork's author cannot run code through Sluice until a writer comments ``/sluice plan``;
the build used to fetch whatever head the PR had when the job ran, so the author could
push new code between the writer's review and the build. Now the head is the one the PR's
own events recorded (they share the comment's queue key and run in arrival order; a fork
PR's events supersede none), a push the forge stamped after the comment is refused, and a
PR with no recorded head is not built at the forge's head (its commit date is the
author's to write) but named in a reply for the writer to review and comment again.
Real payloads from tests/fixtures/webhooks; no Spark (no models). The flow runs on an
in-memory GitHub (:class:`~sluice.bot.forge.memory.MemoryForge`); the last test goes
through the service's HTTP app and PyGithub against GitHub faked at the wire.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import responses
from fastapi.testclient import TestClient

from sluice.bot.entry.app import create_app, forge_factory
from sluice.bot.entry.settings import ServiceSettings
from sluice.bot.events.github import parse_github
from sluice.bot.events.neutral import pr_key, supersedes
from sluice.bot.flow import dispatch
from sluice.bot.flow.deps import make_deps
from sluice.bot.flow.ledger import Ledger
from sluice.bot.forge.memory import MemoryForge
from sluice.bot.queue.store import JobQueue, NewJob
from sluice.bot.queue.worker import Worker
from tests.helpers import accounts
from tests.helpers.cases import CASE_REPOSITORY_ID, realcase
from tests.helpers.github_service import SECRET, sign
from tests.helpers.github_wire import FakeGitHub, tarball

REPO = "nodejs/node"
FORK_OPENED = "github/pull_request/nodejs-github-bot__pull-request-opened-v8.json"
SAME_REPO_OPENED = "github/pull_request/opened.payload.json"
COMMENT = "github/issue_comment/drone-go-scm__comment.json"
NUMBER = 9422  # the fork PR of the payload (cristiancavalli/node -> nodejs/node)
AUTHOR = "cristiancavalli"
H1, H2, H3 = "1" * 40, "2" * 40, "3" * 40
NOW = 1_800_000_000_000


def _project(root: Path) -> Path:
    (root / "models").mkdir(parents=True, exist_ok=True)
    (root / "models" / ".gitkeep").write_text("")  # an empty folder, as git keeps one
    (root / "config.yaml").write_text("sluice:\n  project: demo\n")
    return root


def _pr(action: str, head: str, updated_at: str, source: str = FORK_OPENED) -> dict[str, Any]:
    return realcase(source, REPO, action=action, **{
        "number": NUMBER, "pull_request.number": NUMBER, "pull_request.head.sha": head,
        "pull_request.updated_at": updated_at,
    })  # fmt: skip


def _plan(
    user: str, comment_id: int, created_at: str, body: str = "/sluice plan"
) -> dict[str, Any]:
    return realcase(COMMENT, REPO, action="created", **{
        "issue.number": NUMBER, "comment.user.login": user, "comment.body": body,
        "comment.id": comment_id, "comment.created_at": created_at,
    })  # fmt: skip


class Bot:
    def __init__(self, root: Path, github: MemoryForge) -> None:
        self.github = github
        url = f"sqlite:///{root / 'state.db'}"
        self.deps = make_deps(project_python="on", forge_for=lambda _event: github, workdir=root / "work",
                              state_url=url, clock=lambda: NOW)  # fmt: skip
        self.ledger = Ledger(url)

    def deliver(self, event: str, payload: dict[str, Any]) -> None:
        # Each person's account id, as GitHub's webhook says it (the forge's own).
        parsed = parse_github(event, accounts.github(payload, self.github.account_id))
        assert parsed is not None
        dispatch.handle(self.deps, parsed)

    def command(self, user: str, comment_id: int, created_at: str) -> None:
        """``user`` comments ``/sluice plan`` on the PR, then its webhook."""
        self.github.add_comment(NUMBER, user, "/sluice plan", comment_id=comment_id)
        self.deliver("issue_comment", _plan(user, comment_id, created_at))

    def built(self) -> set[str]:
        """The commits whose files Sluice fetched (what it ran)."""
        return {str(args[0]) for name, args in self.github.calls if name == "fetch_tree"}

    def replies(self) -> list[str]:
        return [body for body in self.github.bot_comments(NUMBER)
                if not body.startswith("<!-- sluice")]  # fmt: skip

    def checks_on(self, sha: str) -> dict[str, Any]:
        return dict(self.github.checks.get(sha, {}))

    def move_head(self, sha: str) -> None:
        """The fork's author pushes: the forge's PR now has ``sha`` (its event not yet seen)."""
        self.github.push(NUMBER, sha)


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    github = MemoryForge(REPO, name="github")
    github.repositories[CASE_REPOSITORY_ID] = github.repo  # the id the bodies carry
    github.roles.update({"maintainer": "maintain", AUTHOR: "read"})
    project = _project(tmp_path / "src")
    github.commit_folder("0" * 40, project, branch="master")
    for sha in (H1, H2, H3):
        github.commit_folder(sha, project, parents=("0" * 40,))
    github.open_pull(NUMBER, head_sha=H1, base="master", author=AUTHOR, fork=True)
    made = Bot(tmp_path, github)
    yield made
    made.deps.close()
    made.ledger.close()


def test_plan_builds_the_head_the_writer_saw_not_a_push_made_since(bot: Bot) -> None:
    bot.deliver("pull_request", _pr("opened", H1, "2021-03-01T10:00:00Z"))
    assert bot.built() == set(), "a fork PR is not built on its own"
    bot.move_head(H2)  # pushed after the comment; its synchronize is queued behind it
    bot.command("maintainer", 501, "2021-03-01T10:05:00Z")
    assert bot.built() == {H1}
    assert "sluice/pr-environment" in bot.checks_on(H1)
    assert set(bot.checks_on(H2)) <= {"sluice/approval"}  # "waiting for the plan"
    assert bot.replies()[-1] == (
        f"@maintainer built `{H1[:7]}`, the head when @maintainer commented; the pull request "
        f"has since moved to `{H2[:7]}`: comment `/sluice plan` again to build it."
    )
    # The synchronize comes next: recorded, and still not built until a writer asks.
    bot.deliver("pull_request", _pr("synchronize", H2, "2021-03-01T10:06:00Z"))
    assert bot.built() == {H1}
    bot.command("maintainer", 502, "2021-03-01T10:10:00Z")
    assert bot.built() == {H1, H2}
    assert bot.replies()[-1] == (
        f"@maintainer built `{H2[:7]}`, this pull request's head when you commented."
    )


def test_a_push_stamped_after_the_command_but_delivered_before_it_is_refused(bot: Bot) -> None:
    bot.deliver("pull_request", _pr("opened", H1, "2021-03-01T10:00:00Z"))
    # The author pushed a second after the writer commented, and GitHub delivered the push
    # first: the head recorded is not the one the writer saw.
    bot.move_head(H2)
    bot.deliver("pull_request", _pr("synchronize", H2, "2021-03-01T10:05:01Z"))
    bot.command("maintainer", 503, "2021-03-01T10:05:00Z")
    assert bot.built() == set()
    assert bot.replies()[-1] == (
        "@maintainer not built: the pull request's head changed after your command (to "
        f"`{H2[:7]}`), so what you reviewed is not what would run. Review the new head and "
        "comment `/sluice plan` again."
    )
    assert bot.github.checks == {}


def test_a_push_in_the_same_second_as_the_command_is_refused(bot: Bot) -> None:
    # The forges stamp whole seconds: a push in the comment's second may be after it.
    bot.deliver("pull_request", _pr("synchronize", H2, "2021-03-01T10:05:00Z"))
    bot.command("maintainer", 504, "2021-03-01T10:05:00Z")
    assert bot.built() == set() and "changed after your command" in bot.replies()[-1]


def test_without_a_recorded_head_the_command_names_the_head_and_the_next_one_builds_it(
    bot: Bot,
) -> None:
    # A PR opened before this version: no event of it recorded a head.
    bot.command("maintainer", 505, "2021-03-01T10:05:00Z")
    assert bot.built() == set()
    assert bot.replies()[-1] == (
        "@maintainer not built: Sluice has no record of this fork pull request's head when "
        "you commented (the pull request is older than that record), and its head now may "
        f"hold commits pushed after your review. Its head is now `{H1[:7]}`: review that "
        "commit, then comment `/sluice plan` again to build it."
    )
    # The author pushes before the writer comments again, and the push's event is late:
    # the writer's next command still builds the commit the reply named.
    bot.move_head(H2)
    bot.command("maintainer", 506, "2021-03-01T10:07:00Z")
    assert bot.built() == {H1}
    assert f"has since moved to `{H2[:7]}`" in bot.replies()[-1]


def test_a_late_or_replayed_pr_event_does_not_move_the_recorded_head_back(bot: Bot) -> None:
    bot.deliver("pull_request", _pr("opened", H1, "2021-03-01T10:00:00Z"))
    bot.deliver("pull_request", _pr("synchronize", H2, "2021-03-01T10:02:00Z"))
    # H1's event delivered again (or late): older than H2's, it moves nothing back.
    bot.deliver("pull_request", _pr("synchronize", H1, "2021-03-01T10:01:00Z"))
    bot.move_head(H3)  # and a push after the comment, its event queued behind it
    bot.command("maintainer", 507, "2021-03-01T10:05:00Z")
    assert bot.built() == {H2}
    assert bot.ledger.pr_head(f"github:{REPO}", NUMBER) == (H2, 1614592920000)


def test_a_same_repository_pr_s_late_push_event_builds_nothing(bot: Bot) -> None:
    bot.github.open_pull(NUMBER, head_sha=H2, base="master", author="alice")
    bot.deliver("pull_request", _pr("synchronize", H2, "2021-03-01T10:02:00Z", SAME_REPO_OPENED))
    assert bot.built() == {H2}
    # An older push's event, delivered late or replayed, would build the environment back
    # at H1 while the PR's head is H2.
    bot.deliver("pull_request", _pr("synchronize", H1, "2021-03-01T10:01:00Z", SAME_REPO_OPENED))
    assert bot.built() == {H2}
    assert bot.checks_on(H1) == {}


def test_the_fork_s_author_still_cannot_plan_their_own_pr(bot: Bot) -> None:
    bot.deliver("pull_request", _pr("opened", H1, "2021-03-01T10:00:00Z"))
    bot.command(AUTHOR, 508, "2021-03-01T10:05:00Z")
    assert bot.built() == set()
    assert "only users with write permission" in bot.replies()[-1]


def test_a_same_repository_pr_is_planned_at_its_current_head(bot: Bot) -> None:
    # Its pushes come from writers: `/sluice plan` means "plan it again, as it is now".
    bot.github.open_pull(NUMBER, head_sha=H1, base="master", author="alice")
    bot.deliver("pull_request", _pr("opened", H1, "2021-03-01T10:00:00Z", SAME_REPO_OPENED))
    bot.move_head(H3)
    before = bot.built()
    bot.command("maintainer", 509, "2021-03-01T10:05:00Z")
    assert bot.built() - before == {H3}


# -- the queue: a fork PR's events keep their turn -------------------------------------------


def _job(event_name: str, payload: dict[str, Any]) -> NewJob:
    event = parse_github(event_name, payload)
    assert event is not None
    return NewJob(key=pr_key(event), kind=event.kind, payload=event.to_json(),
                  head_sha=getattr(event, "head_sha", None), supersede=supersedes(event))  # fmt: skip


@pytest.mark.parametrize(("source", "superseded"), [(FORK_OPENED, False), (SAME_REPO_OPENED, True)])
def test_a_fork_pr_s_push_does_not_supersede_the_event_before_a_queued_command(
    tmp_path: Path, source: str, superseded: bool
) -> None:
    queue = JobQueue(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        opened = _job("pull_request", _pr("opened", H1, "2021-03-01T10:00:00Z", source))
        command = _job("issue_comment", _plan("maintainer", 510, "2021-03-01T10:05:00Z"))
        pushed = _job("pull_request", _pr("synchronize", H2, "2021-03-01T10:06:00Z", source))
        assert opened.key == command.key == pushed.key, "one PR, one queue key: in order"
        now = time.time()
        for delivery, job in (("d-1", opened), ("d-2", command), ("d-3", pushed)):
            assert queue.accept(delivery, "github", "x", job, now)
        first = queue.delivery_job("d-1")
        assert first is not None
        record = queue.job(first)
        assert record is not None
        # A same-repository PR's older head is moot (its command builds the current head);
        # a fork PR's is what the queued command must find recorded.
        assert (record.status == "superseded") is superseded
    finally:
        queue.close()


# -- through the service: the order deliveries arrive in is the order they run in -----------


def test_through_the_service_a_push_queued_after_the_command_is_not_what_it_builds(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    settings = ServiceSettings(
        webhook_secret=SECRET, github_token="ghp_forkToken", workdir=tmp_path / "work",
        database_url=url, github_request_interval=0, github_write_interval=0,
    )  # fmt: skip
    github = FakeGitHub(repo=REPO)
    github.permissions["maintainer"] = "maintain"
    github.add_pull(NUMBER, H2, author=AUTHOR, base="master", fork=True)  # pushed already
    for sha in (H1, H2):
        github.trees[sha] = tarball(_project(tmp_path / "src"), f"node-{sha[:7]}")
    command = github.add_comment(NUMBER, "/sluice plan", user="maintainer")  # GitHub's own
    deliveries = [
        ("pull_request", _pr("opened", H1, "2021-03-01T10:00:00Z")),
        ("issue_comment", _plan("maintainer", command, "2021-03-01T10:05:00Z")),
        ("pull_request", _pr("synchronize", H2, "2021-03-01T10:05:30Z")),
    ]
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        github.install(mock)
        with TestClient(create_app(settings, start_workers=False)) as client:
            for n, (event, payload) in enumerate(deliveries):
                body = json.dumps(accounts.github(payload)).encode()  # ids as GitHub's
                headers = {"X-GitHub-Event": event, "X-GitHub-Delivery": f"fork-{n}",
                           "X-Hub-Signature-256": sign(body)}  # fmt: skip
                assert client.post("/webhooks/github", content=body,
                                   headers=headers).status_code == 202  # fmt: skip
        queue = JobQueue(url)
        deps = make_deps(project_python="on", forge_for=forge_factory(settings), workdir=tmp_path / "work",
                         state_url=url)  # fmt: skip
        worker = Worker(queue, **dispatch.bound(deps))
        try:
            while worker.run_once():
                pass
            assert queue.counts()["done"] == 3
        finally:
            deps.close()
            queue.close()
    built = {u.rsplit("/", 1)[-1] for _, u in github.requests if "/tarball/" in u}
    assert built == {H1}
    replies = [c["body"] for c in github.comments_on(NUMBER) if not c["body"].startswith("<!--")]
    assert replies[-1].startswith(f"@maintainer built `{H1[:7]}`, the head when @maintainer")
