"""Replays: a signed delivery sent again under a new delivery id must not change state again.

The queue refuses a delivery id it stored, but whoever holds a signed body (a log, a proxy,
the forge's delivery history) can send it again with a fresh ``X-GitHub-Delivery``. Every
state-changing event is handled once by its content (``content_key``, see
``sluice/bot/events/neutral.py``): the same merge, tag, release, comment command, review, approval
or "Approve this plan" click, delivered again, is skipped with an INFO line and nothing is
posted. What users re-run on purpose (a re-requested check, a new comment, a new push)
still runs. Real payloads from tests/fixtures/webhooks; GitHub and GitLab in memory
(:class:`~sluice.bot.forge.memory.MemoryForge`), and GitHub faked at the wire where the
deliveries go through the service's HTTP endpoint; no Spark (the projects have no models,
or prod already holds them, or the runner is a stand-in).
"""

from __future__ import annotations

import logging
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.bot.events.github import parse_github
from sluice.bot.events.gitlab import parse_gitlab
from sluice.bot.events.neutral import (
    CheckRunEvent,
    CommentEvent,
    Event,
    JanitorEvent,
    PullRequestEvent,
    ReviewEvent,
    TagEvent,
    event_from_json,
)
from sluice.bot.flow import dispatch
from sluice.bot.flow.deps import Deps, make_deps
from sluice.bot.flow.ledger import Ledger
from sluice.bot.flow.reviewed_plan import PlanReview
from sluice.bot.forge.base import Forge
from sluice.bot.forge.local import LocalForge
from sluice.bot.forge.memory import MemoryForge
from sluice.bot.intake.pin import pin_event
from sluice.bot.queue.store import JobQueue, NewJob
from sluice.bot.queue.worker import Worker
from sluice.core.errors import DriverLost
from sluice.core.spark.submit import JobResult
from tests.helpers import accounts
from tests.helpers.cases import CASE_REPOSITORY_ID, load_case, realcase
from tests.helpers.github_service import Service, serve, service_settings
from tests.helpers.github_wire import FakeGitHub, tarball
from tests.helpers.own_runs import sluices_run

OWNER = "octo/warehouse"
NOW = 1_800_000_000_000
A, B, C, D = "a" * 40, "b" * 40, "c" * 40, "d" * 40
MERGED = "github/pull_request/woodpecker__HookPullRequestMerged.json"
COMMENT = "github/issue_comment/drone-go-scm__comment.json"
TAG_DEPLOY = 'sluice:\n  project: demo\n  deploy:\n    on: tag\n    tag_pattern: "v*"\n'


def _project(root: Path, config: str = "sluice:\n  project: demo\n") -> Path:
    """A project without models: planning and promoting it needs no Spark (an empty
    models/ is kept by a file in it, as in a git repository)."""
    (root / "models").mkdir(parents=True, exist_ok=True)
    (root / "models" / ".gitkeep").write_text("")
    (root / "config.yaml").write_text(config)
    return root


ROOT = "0" * 40  # main's first commit


def _memory(repo: str, name: str = "github") -> MemoryForge:
    """A repository in memory whose ``main`` holds a project without models."""
    forge = MemoryForge(repo, name=name, comment_limit=1_000_000 if name == "gitlab" else 65536)
    forge.repositories[CASE_REPOSITORY_ID] = forge.repo  # the id the bodies carry
    forge.commit(ROOT, {"config.yaml": "sluice:\n  project: demo\n"}, branch="main")
    return forge


class Bot:
    """A flow on a SQLite state talking to an in-memory GitHub, fed parsed real payloads
    (``github`` is repository ``OWNER``; :meth:`repository` adds others)."""

    def __init__(self, root: Path, github: MemoryForge) -> None:
        self.root, self.github = root, github
        self.forges = {github.repo: github}
        self.url = f"sqlite:///{root / 'state.db'}"
        self.deps = make_deps(project_python="on", forge_for=self._forge_for, workdir=root / "work",
                              state_url=self.url, clock=lambda: NOW)  # fmt: skip
        self.ledger = Ledger(self.url)

    def _forge_for(self, event: Event) -> Forge:
        return self.forges[event.repo]

    def repository(self, repo: str) -> MemoryForge:
        self.forges[repo] = _memory(repo)
        return self.forges[repo]

    def deliver(self, event: str, payload: dict[str, Any]) -> Event:
        # Each person's account id, as GitHub's webhook says it (the forge's own).
        parsed = parse_github(event, accounts.github(payload, self.github.account_id))
        assert parsed is not None, (event, payload.get("action"))
        parsed = pin_event(parsed, self._forge_for)  # as the service's intake does
        assert parsed is not None, (event, "a tag that names no commit")
        dispatch.handle(self.deps, parsed)
        return parsed

    def say(self, user: str, body: str, comment_id: int, number: int = 7) -> None:
        """The webhook of ``user``'s comment (written on the PR first, unless it is there:
        a replay sends the same comment again)."""
        if all(c.id != comment_id for c in self.github.comments.get(number, [])):
            self.github.add_comment(number, user, body, comment_id=comment_id)
        self.deliver("issue_comment", _comment(user, body, comment_id, number))

    def commit(
        self, sha: str, config: str = "sluice:\n  project: demo\n", branch: str | None = None
    ) -> None:
        src = _project(self.root / f"tree-{sha[:6]}", config)
        self.github.commit_folder(sha, src, parents=() if branch else (ROOT,), branch=branch)

    def plan(self, number: int, sha: str) -> None:
        """Record the (empty) plan a build of ``sha`` would have recorded."""
        self.ledger.record_plan(f"github:{OWNER}", number, sha, PlanReview("fp", (), {}, {}), 1)

    def calls(self) -> int:
        """How many calls the flow made of the forge so far."""
        return len(self.github.calls)

    def posts(self, since: int) -> list[tuple[str, tuple[object, ...]]]:
        """Every call made of the forge since the ``since``-th: a skipped event makes none."""
        return self.github.calls[since:]

    def refs_deployed(self) -> list[str]:
        """The commits of the deployment records, in order."""
        return [d.sha for d in self.github.deployments]


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    github = _memory(OWNER)
    github.roles.update({"alice": "write", "bob": "write", "carol": "admin"})
    github.open_pull(7, head_sha=A, base="main", author="alice")
    made = Bot(tmp_path, github)
    yield made
    made.deps.close()
    made.ledger.close()


def _merged(number: int, merge_sha: str, head: str = A) -> dict[str, Any]:
    return realcase(MERGED, OWNER, **{
        "number": number, "pull_request.number": number, "pull_request.head.sha": head,
        "pull_request.merge_commit_sha": merge_sha, "pull_request.base.ref": "main",
    })  # fmt: skip


def _comment(user: str, body: str, comment_id: int, number: int = 7) -> dict[str, Any]:
    return realcase(COMMENT, OWNER, action="created", **{
        "issue.number": number, "comment.user.login": user, "comment.body": body,
        "comment.id": comment_id,
    })  # fmt: skip


def _skipped(caplog: pytest.LogCaptureFixture, key: str) -> bool:
    return any(
        r.levelno == logging.INFO and "skipped" in r.getMessage() and key in r.getMessage()
        for r in caplog.records
    )


# -- merges ----------------------------------------------------------------------------------


def test_the_same_merge_delivered_twice_promotes_once(
    bot: Bot, caplog: pytest.LogCaptureFixture
) -> None:
    bot.commit(C)
    bot.deliver("pull_request", _merged(7, C))
    [deployment] = bot.github.deployments
    assert deployment.sha == C
    assert bot.github.checks[C]["sluice/deploy"].conclusion == "success"
    before = bot.calls()
    caplog.set_level(logging.INFO)
    bot.deliver("pull_request", _merged(7, C))  # the signed body again, a new delivery id
    assert len(bot.github.deployments) == 1
    assert bot.posts(before) == [], "a replay asks and posts nothing"
    assert _skipped(caplog, f"merge:7:{C}")


def test_an_old_merge_replayed_after_newer_ones_does_not_take_prod_back(bot: Bot) -> None:
    bot.commit(C)
    bot.commit(D)
    bot.deliver("pull_request", _merged(7, C))
    bot.github.open_pull(8, head_sha=B, base="main", author="bob")
    bot.deliver("pull_request", _merged(8, D, head=B))
    bot.deliver("pull_request", _merged(7, C))  # replayed: prod must stay at D
    assert bot.refs_deployed() == [C, D]


def test_a_merge_of_another_pr_into_the_same_commit_is_not_a_replay(bot: Bot) -> None:
    # The key is the PR and its merge commit: PR 8 fast-forwarded to the same commit runs.
    bot.commit(C)
    bot.deliver("pull_request", _merged(7, C))
    bot.github.open_pull(8, head_sha=A, base="main", author="bob")
    bot.deliver("pull_request", _merged(8, C))
    assert bot.refs_deployed() == [C, C]


# -- comment commands ------------------------------------------------------------------------


def test_the_same_deploy_comment_twice_deploys_once(bot: Bot) -> None:
    bot.commit(A)
    bot.plan(7, A)  # planned; no gate configured: it passes
    bot.say("carol", "/sluice deploy", 950)
    assert len(bot.github.deployments) == 1
    assert bot.github.bot_comments(7)[-1].startswith("@carol deployed to prod")
    replies, before = len(bot.github.bot_comments(7)), bot.calls()
    bot.say("carol", "/sluice deploy", 950)
    assert len(bot.github.deployments) == 1
    assert len(bot.github.bot_comments(7)) == replies and bot.posts(before) == []
    assert bot.github.reactions(7) == [(950, "+1")]


def test_the_same_comment_twice_runs_once_and_a_new_comment_runs_again(
    bot: Bot, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    bot.say("bob", "/sluice help", 901)
    bot.say("bob", "/sluice help", 901)
    assert len(bot.github.bot_comments(7)) == 1
    assert _skipped(caplog, "comment:7:901:bob")
    bot.say("bob", "/sluice help", 902)  # asked again
    assert len(bot.github.bot_comments(7)) == 2
    assert [comment for comment, _ in bot.github.reactions(7)] == [901, 902]


def test_a_replayed_refusal_is_not_posted_again(bot: Bot) -> None:
    # A command with bad arguments, or from a reader, is answered once, not once per copy.
    bot.say("bob", "/sluice plan now", 903)
    bot.say("dave", "/sluice deploy", 904)
    replies = len(bot.github.bot_comments(7))
    assert replies == 2
    bot.say("bob", "/sluice plan now", 903)
    bot.say("dave", "/sluice deploy", 904)
    assert len(bot.github.bot_comments(7)) == replies


def test_a_comment_on_another_repository_with_the_same_id_is_not_a_replay(bot: Bot) -> None:
    bot.say("bob", "/sluice help", 905)
    elsewhere = bot.repository("octo/other")
    elsewhere.repositories[5353] = "octo/other"
    elsewhere.open_pull(7, head_sha=A, base="main", author="alice")
    elsewhere.add_comment(7, "bob", "/sluice help", comment_id=905)
    other = _comment("bob", "/sluice help", 905)
    other["repository"]["full_name"] = "octo/other"
    other["repository"]["id"] = 5353  # its own (one id under two names is a rename)
    bot.deliver("issue_comment", other)
    assert len(bot.github.bot_comments(7)) == 1
    # Handled, not skipped: this service keeps octo/warehouse, so it refuses octo/other.
    [refusal] = elsewhere.bot_comments(7)
    assert "Sluice refused this repository" in refusal


# -- tags and releases -----------------------------------------------------------------------


def _on_main(bot: Bot, sha: str) -> None:
    bot.commit(sha, TAG_DEPLOY, branch="main")


def _tag(tag: str, sha: str) -> dict[str, Any]:
    return realcase("github/push/woodpecker__HookTag.json", OWNER, ref=f"refs/tags/{tag}",
                    after=sha)  # fmt: skip


def test_the_same_tag_push_twice_promotes_once_and_a_moved_tag_promotes(bot: Bot) -> None:
    _on_main(bot, C)
    bot.deliver("push", _tag("v1.0", C))
    bot.deliver("push", _tag("v1.0", C))
    assert bot.refs_deployed() == [C]
    _on_main(bot, D)
    bot.deliver("push", _tag("v1.0", D))  # the tag moved to a new commit: a new event
    assert bot.refs_deployed() == [C, D]


def test_a_release_created_and_published_promotes_once(bot: Bot) -> None:
    _on_main(bot, C)
    bot.github.tag("v2.0", C)
    created = realcase("github/release/created.payload.json", OWNER,
                       **{"release.tag_name": "v2.0", "release.draft": False})  # fmt: skip
    published = realcase("github/release/published.payload.json", OWNER,
                         **{"release.tag_name": "v2.0"})  # fmt: skip
    assert created["release"]["id"] == published["release"]["id"]
    bot.deliver("release", created)
    bot.deliver("release", published)
    bot.deliver("release", published)
    assert bot.refs_deployed() == [C]


# -- reviews and clicks ----------------------------------------------------------------------


def _review(review_id: int, state: str, action: str = "submitted") -> dict[str, Any]:
    return realcase("github/pull_request_review/submitted.payload.json", OWNER, action=action,
                    **{"pull_request.number": 7, "pull_request.head.sha": A,
                       "review.user.login": "bob", "review.state": state, "review.id": review_id,
                       "review.commit_id": A})  # fmt: skip


def test_the_same_review_twice_is_evaluated_once_and_its_dismissal_is_not_a_replay(
    bot: Bot,
) -> None:
    bot.plan(7, A)
    bot.github.add_review(7, "bob", "APPROVED", A)
    bot.deliver("pull_request_review", _review(41, "approved"))
    before = bot.calls()
    bot.deliver("pull_request_review", _review(41, "approved"))
    assert bot.posts(before) == []
    bot.deliver("pull_request_review", _review(41, "dismissed", action="dismissed"))
    assert bot.posts(before) != []


def test_the_key_of_a_review_names_its_pr_and_reviewer(bot: Bot) -> None:
    # An id is one review; a payload reusing it for another PR or user is not its replay.
    bot.plan(7, A)
    bot.github.open_pull(8, head_sha=A, base="main", author="alice")
    bot.deliver("pull_request_review", _review(42, "approved"))
    before = bot.calls()
    other_pr = _review(42, "approved")
    other_pr["pull_request"]["number"] = 8
    bot.deliver("pull_request_review", other_pr)
    assert bot.posts(before) != []
    before = bot.calls()
    other_user = _review(42, "approved")
    other_user["review"]["user"]["login"] = "carol"
    bot.deliver("pull_request_review", other_user)
    assert bot.posts(before) != []


def _click(user: str, run_id: int, head: str = A) -> dict[str, Any]:
    payload = realcase("github/check_run/requested_action.payload.json", OWNER, **{
        "check_run.name": "sluice/approval", "check_run.head_sha": head, "check_run.id": run_id,
        "requested_action.identifier": "approve", "sender.login": user,
    })  # fmt: skip
    payload["check_run"]["pull_requests"] = [{"number": 7, "id": 7}]
    return payload


def test_the_same_click_twice_is_recorded_once_and_another_user_s_click_counts(bot: Bot) -> None:
    bot.plan(7, A)
    run = sluices_run(bot.deliver, bot.github, A)
    bot.deliver("check_run", _click("bob", run))
    before = bot.calls()
    bot.deliver("check_run", _click("bob", run))
    assert bot.posts(before) == []
    bot.deliver("check_run", _click("carol", run))
    assert bot.posts(before) != []
    assert {c.user for c in bot.ledger.clicks(f"github:{OWNER}", 7)} == {"bob", "carol"}


def test_a_rerequested_check_runs_every_time_it_is_asked_for(bot: Bot) -> None:
    bot.plan(7, A)
    rerun = realcase("github/check_run/rerequested.payload.json", OWNER, **{
        "check_run.name": "sluice/approval", "check_run.head_sha": A,
    })  # fmt: skip
    rerun["check_run"]["pull_requests"] = [{"number": 7, "id": 7}]
    for expected in (1, 2, 3):
        before = bot.calls()
        bot.deliver("check_run", rerun)
        assert bot.posts(before) != [], f"re-run {expected} did nothing"


# -- what has a key, and what does not -------------------------------------------------------


def test_comment_ids_numbered_per_pr_are_not_replays_of_each_other(tmp_path: Path) -> None:
    # The local forge numbers each PR's comments from 1: the key holds the PR's number.
    repo = tmp_path / "warehouse"
    repo.mkdir()
    for args in (["init", "-q", "-b", "main"], ["config", "user.name", "alice"],
                 ["config", "user.email", "alice@example.com"],
                 ["commit", "-q", "--allow-empty", "-m", "initial"],
                 ["branch", "one"], ["branch", "two"]):  # fmt: skip
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    forge = LocalForge(repo)
    deps = make_deps(project_python="on", forge_for=lambda _event: forge, workdir=tmp_path / "work",
                     state_url=f"sqlite:///{tmp_path / 'state.db'}", clock=lambda: NOW)  # fmt: skip
    try:
        for head in ("one", "two"):
            pr = forge.open_pull("main", head, "alice")
            comment_id = forge.add_comment(pr.number, "alice", "/sluice help")
            assert comment_id == 1
            dispatch.handle(deps, CommentEvent(
                forge="local", repo=forge.repo, installation_id=None, action="created",
                number=pr.number, comment_id=comment_id, author="alice", body="/sluice help",
            ))  # fmt: skip
            assert len(forge.replies(pr.number)) == 1, f"PR {pr.number} got no answer"
    finally:
        deps.close()


def test_content_keys_of_real_payloads() -> None:
    merged = parse_github("pull_request", _merged(7, C))
    opened = parse_github("pull_request", realcase("github/pull_request/opened.payload.json",
                                                   OWNER))  # fmt: skip
    closed = parse_github("pull_request", realcase("github/pull_request/closed.payload.json",
                                                   OWNER))  # fmt: skip
    comment = parse_github("issue_comment", _comment("bob", "/sluice plan", 5))
    chatter = parse_github("issue_comment", _comment("bob", "looks good", 6))
    edited = parse_github("issue_comment", {**_comment("bob", "/sluice deploy", 7),
                                            "action": "edited"})  # fmt: skip
    assert isinstance(merged, PullRequestEvent) and merged.content_key() == f"merge:7:{C}"
    assert isinstance(opened, PullRequestEvent) and opened.content_key() is None
    assert isinstance(closed, PullRequestEvent)
    assert closed.content_key() == f"close:{closed.number}:{closed.head_sha}:1557933678000"
    assert isinstance(comment, CommentEvent) and comment.content_key() == "comment:7:5:bob"
    assert chatter is not None and chatter.content_key() is None
    assert edited is not None and edited.content_key() is None
    rerun = parse_github("check_run", load_case("github/check_run/rerequested.payload.json"))
    suite = parse_github("check_suite", load_case("github/check_suite/rerequested.payload.json"))
    assert isinstance(rerun, CheckRunEvent) and rerun.content_key() is None
    assert suite is not None and suite.content_key() is None
    janitor = JanitorEvent(forge="github", repo=OWNER, installation_id=None)
    assert janitor.content_key() is None


def test_gitlab_approval_hooks_are_never_skipped_as_replays() -> None:
    # GitLab's approval hook carries the merge request's updated_at from before the
    # approval: an approval, its withdrawal and the approval again at one head look alike,
    # so none has a key (each makes the gate ask GitLab again; that is all it does).
    payload = realcase_gitlab("gitlab/merge_request_approved.json")
    first = parse_gitlab("Merge Request Hook", payload)
    assert isinstance(first, ReviewEvent) and first.state == "APPROVED"
    assert first.content_key() is None
    payload["object_attributes"]["action"] = "unapproved"
    withdrawn = parse_gitlab("Merge Request Hook", payload)
    assert isinstance(withdrawn, ReviewEvent) and withdrawn.content_key() is None


def test_a_job_queued_before_content_keys_still_runs() -> None:
    # Documents stored by the previous version lack the new fields: they read back, and an
    # event whose key needs a missing field has none (it runs as it did).
    old_review = {"kind": "review", "forge": "github", "repo": OWNER, "installation_id": None,
                  "action": "submitted", "number": 7, "reviewer": "bob", "state": "APPROVED",
                  "commit_sha": A, "head_sha": A}  # fmt: skip
    review = event_from_json(old_review)
    assert isinstance(review, ReviewEvent) and review.content_key() is None
    old_release = {"kind": "tag", "forge": "github", "repo": OWNER, "installation_id": None,
                   "tag": "v1", "sha": None, "source": "release"}  # fmt: skip
    release = event_from_json(old_release)
    assert isinstance(release, TagEvent) and release.content_key() is None


def realcase_gitlab(relpath: str) -> dict[str, Any]:
    payload = load_case(relpath)
    payload["project"]["path_with_namespace"] = "data/warehouse"
    return payload


# -- a job cut short runs again; a job done (or failed for good) does not --------------------


class Flaky:
    """A runner whose first ``lost`` jobs lose their Spark driver (no Spark)."""

    def __init__(self, lost: int) -> None:
        self.lost, self.jobs = lost, 0

    def __call__(self, *_args: Any) -> Flaky:
        return self

    def run(self, spec: dict[str, Any]) -> JobResult:
        self.jobs += 1
        if self.jobs <= self.lost:
            raise DriverLost("Spark job failed: the driver was killed by signal 9")
        return JobResult(spec["job_id"], {}, 0.1, None)


def _worker(tmp_path: Path, github: MemoryForge, lost: int) -> tuple[Worker, JobQueue, Flaky, Deps]:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    runner = Flaky(lost)
    deps = make_deps(project_python="on", forge_for=lambda _event: github, workdir=tmp_path / "work",
                     state_url=url, runner_for=runner, clock=lambda: NOW)  # fmt: skip
    queue = JobQueue(url, max_attempts=2)
    return Worker(queue, **dispatch.bound(deps)), queue, runner, deps


def _changed_project(tmp_path: Path) -> Path:
    """A project whose one model is not in prod yet: promoting it runs a Spark job."""
    src = _project(tmp_path / "change")
    (src / "models" / "one.sql").write_text("MODEL (name demo.one, kind FULL);\nSELECT 1 AS id\n")
    return src


def _queue_merge(queue: JobQueue, delivery: str) -> None:
    event = parse_github("pull_request", _merged(7, C))
    assert event is not None
    job = NewJob(key="github:octo/warehouse:prod", kind=event.kind, payload=event.to_json())
    assert queue.accept(delivery, "github", "pull_request", job, time.time())


def _merged_forge(tmp_path: Path) -> MemoryForge:
    """PR 7 merged as C, which holds a model prod does not have yet."""
    github = _memory(OWNER)
    github.commit_folder(C, _changed_project(tmp_path), parents=(ROOT,))
    github.open_pull(7, head_sha=A, base="main", author="alice")
    github.close_pull(7, merged=True)
    return github


def test_a_promotion_cut_short_runs_again_but_its_replay_does_not(tmp_path: Path) -> None:
    github = _merged_forge(tmp_path)
    worker, queue, runner, deps = _worker(tmp_path, github, lost=1)
    try:
        _queue_merge(queue, "merge-1")
        assert worker.run_once()  # the driver is lost: the job goes back to the queue
        assert worker.run_once()  # run again: not skipped as "handled"
        assert github.checks[C]["sluice/deploy"].conclusion == "success"
        jobs = runner.jobs
        assert jobs >= 2
        _queue_merge(queue, "merge-1-replayed")
        assert worker.run_once()
        assert runner.jobs == jobs and len(github.deployments) == 1
        assert queue.counts()["done"] == 2
    finally:
        deps.close()
        queue.close()


def test_a_promotion_that_failed_for_good_is_not_run_by_its_replay(tmp_path: Path) -> None:
    github = _merged_forge(tmp_path)
    worker, queue, runner, deps = _worker(tmp_path, github, lost=100)
    try:
        _queue_merge(queue, "merge-1")
        assert worker.run_once() and worker.run_once()  # both attempts lose the driver
        assert queue.counts()["failed"] == 1
        jobs, calls = runner.jobs, len(github.calls)
        _queue_merge(queue, "merge-1-replayed")
        assert worker.run_once()
        assert runner.jobs == jobs and github.calls[calls:] == []
    finally:
        deps.close()
        queue.close()


# -- through the service, where delivery ids really differ -----------------------------------


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    with serve(service_settings(tmp_path), FakeGitHub(repo=OWNER)) as made:
        yield made


def test_a_merge_replayed_through_the_endpoint_promotes_once(
    service: Service, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    service.github.trees[C] = tarball(_project(tmp_path / "src"), "octo-warehouse-ccccccc")
    first = service.deliver("pull_request", _merged(7, C), delivery="delivery-1")
    service.idle()
    again = service.deliver("pull_request", _merged(7, C), delivery="delivery-2")
    service.idle()
    assert (first.status_code, again.status_code) == (202, 202)  # two deliveries, by id
    assert len(service.github.deployments) == 1
    assert _skipped(caplog, f"merge:7:{C}")


def test_a_comment_replayed_through_the_endpoint_runs_once(service: Service) -> None:
    service.github.permissions["bob"] = "write"
    service.github.add_pull(7, A, author="alice")
    first = service.github.add_comment(7, "/sluice help", user="bob")  # GitHub's own
    for delivery in ("c-1", "c-2", "c-3"):
        response = service.deliver("issue_comment", _comment("bob", "/sluice help", first),
                                   delivery=delivery)  # fmt: skip
        assert response.status_code == 202
    service.idle()
    assert len(service.github.comments_on(7)) == 2  # bob's and one answer
    assert len(service.github.reactions) == 1
    second = service.github.add_comment(7, "/sluice help", user="bob")
    assert (
        service.deliver("issue_comment", _comment("bob", "/sluice help", second)).status_code == 202
    )
    service.idle()
    assert len(service.github.comments_on(7)) == 4


# -- GitLab ----------------------------------------------------------------------------------

PROJECT = "data/warehouse"


@pytest.fixture
def gitlab_bot(tmp_path: Path) -> Iterator[tuple[Deps, MemoryForge]]:
    gitlab = _memory(PROJECT, name="gitlab")
    gitlab.open_pull(7, head_sha=A, base="main", author="alice")
    gitlab.roles["bob"] = "write"  # a Developer
    deps = make_deps(project_python="on", forge_for=lambda _event: gitlab, workdir=tmp_path / "work",
                     state_url=f"sqlite:///{tmp_path / 'state.db'}", clock=lambda: NOW)  # fmt: skip
    yield deps, gitlab
    deps.close()


def _gitlab(deps: Deps, hook: str, payload: dict[str, Any]) -> None:
    event = parse_gitlab(hook, accounts.gitlab(payload))  # account ids as the forge's
    assert event is not None
    dispatch.handle(deps, event)


def test_gitlab_the_same_merge_twice_promotes_once(
    gitlab_bot: tuple[Deps, MemoryForge], tmp_path: Path
) -> None:
    deps, gitlab = gitlab_bot
    gitlab.commit_folder(C, _project(tmp_path / "src"), parents=(ROOT,))
    gitlab.close_pull(7, merged=True)
    merge = realcase_gitlab("gitlab/merge_request_merge.json")
    merge["object_attributes"].update(iid=7, merge_commit_sha=C, target_branch="main")
    _gitlab(deps, "Merge Request Hook", merge)
    _gitlab(deps, "Merge Request Hook", merge)
    assert [d.sha for d in gitlab.deployments] == [C]


def test_gitlab_the_same_note_twice_runs_once(gitlab_bot: tuple[Deps, MemoryForge]) -> None:
    deps, gitlab = gitlab_bot
    note_id = gitlab.add_comment(7, "bob", "/sluice help")
    note = realcase_gitlab("gitlab/note_merge_request.docs.json")
    note["user"]["username"] = "bob"
    note["object_attributes"].update(note="/sluice help", id=note_id)
    note["merge_request"]["iid"] = 7
    _gitlab(deps, "Note Hook", note)
    _gitlab(deps, "Note Hook", note)
    assert len(gitlab.bot_comments(7)) == 1


def test_gitlab_the_same_approval_twice_changes_nothing_and_a_withdrawal_is_seen(
    gitlab_bot: tuple[Deps, MemoryForge],
) -> None:
    deps, gitlab = gitlab_bot
    approval = realcase_gitlab("gitlab/merge_request_approved.json")
    approval["user"]["username"] = "bob"
    approval["object_attributes"].update(iid=7)
    approval["object_attributes"]["last_commit"]["id"] = A
    gitlab.add_review(7, "bob", "APPROVED", unbound=True)  # as GitLab lists approvals
    _gitlab(deps, "Merge Request Hook", approval)

    def seen() -> tuple[dict[str, str | None], int]:
        posted = {name: check.conclusion for name, check in gitlab.checks.get(A, {}).items()}
        return posted, sum(len(notes) for notes in gitlab.comments.values())

    first = seen()
    # Delivered again: the gate asks GitLab again (no key: a GitLab approval hook is never
    # skipped as a replay) and finds the same, so nothing else changes.
    _gitlab(deps, "Merge Request Hook", approval)
    assert seen() == first
    # Taken back with the very same body but its action: asked again, and told.
    approval["object_attributes"]["action"] = "unapproved"
    gitlab.withdraw_reviews(7, "bob")
    before = len(gitlab.calls)
    _gitlab(deps, "Merge Request Hook", approval)
    assert any(call[0] == "set_check" for call in gitlab.calls[before:]), gitlab.calls[before:]
