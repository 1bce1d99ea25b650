"""Chat notifications through the flow (issue 46): a promotion of prod, a rollback, a
scheduled run that failed for good, a build held for the backfill budget, a late run and a
PR waiting for approval each reach the repository's Slack and Teams webhooks once (the
same event again, a replay or a re-run, tells nobody), after the job's work; a webhook that
fails never fails the job and its URL is in no log line. Real GitHub payloads on the
in-memory forge; the webhooks at the wire with ``responses``; no Spark."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import responses

from sluice.bot.events.github import parse_github
from sluice.bot.events.neutral import CommentEvent, JanitorEvent, ScheduledRunEvent
from sluice.bot.flow import dispatch
from sluice.bot.flow.deps import Deps, make_deps
from sluice.bot.flow.reviewed_plan import PlanReview
from sluice.bot.forge.chat import Channels, Route, Sender, Target
from sluice.bot.forge.memory import MemoryForge, as_forge
from sluice.bot.intake.pin import pin_event
from sluice.bot.present import notify_text
from sluice.bot.present.metrics import Registry
from sluice.core import runs
from sluice.core.spark.scripted import Warehouse
from sluice.core.state import JobResult, open_state
from tests.helpers.cases import CASE_REPOSITORY_ID, realcase
from tests.helpers.prod_twice import prod_recorded_twice

REPO = Path(__file__).resolve().parents[3]
OWNER = "octo/warehouse"
KEY = f"github:{OWNER}"
NOW = 1_800_000_000_000  # 2027-01-15
HOUR = 3_600_000
A, B, C = "a" * 40, "b" * 40, "c" * 40
ROOT = "0" * 40
SLACK = "https://hooks.slack.com/services/T0/B0/s3cretSlack"
TEAMS = "https://acme.webhook.office.com/webhookb2/s3cretTeams"
CONFIG = "sluice:\n  project: jaffle\n  gate:\n    required_approvers:\n      users: [bob]\n"
BUDGET = (
    CONFIG
    + "    backfill:\n      max_intervals: 30\n      approver: octo/data-leads\n"
    + "  pr:\n    backfill_days: null\n"
)
DAILY = (
    "MODEL (name s.daily, kind INCREMENTAL_BY_TIME_RANGE (time_column ds), start '2026-01-01');\n"
    "SELECT 1 AS n, DATE '2026-01-01' AS ds WHERE ds BETWEEN @start_ds AND @end_ds\n"
)


@dataclass
class Chat:
    """The Slack and Teams webhooks at the wire, and what was posted to each."""

    mock: responses.RequestsMock
    waits: list[float] = field(default_factory=list)

    def bodies(self, url: str) -> list[dict[str, Any]]:
        return [
            json.loads(call.request.body or b"{}")
            for call in self.mock.calls
            if call.request.url == url
        ]

    def slack_texts(self) -> list[str]:
        return [b["blocks"][0]["text"]["text"] for b in self.bodies(SLACK)]


@pytest.fixture
def chat() -> Iterator[Chat]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.post(SLACK, body="ok")
        mock.post(TEAMS, status=202)
        yield Chat(mock)


def channels(chat: Chat, events: frozenset[str] = frozenset(notify_text.EVENTS)) -> Channels:
    targets = (
        Target("slack", SLACK, events, name="slack #1 of octo/*"),
        Target("teams", TEAMS, events, name="teams #2 of octo/*"),
    )
    return Channels((Route("octo/*", targets),), Sender(sleep=chat.waits.append))


def deps_for(root: Path, forge: Any, chat: Chat, *, url: str | None = None, **extra: Any) -> Deps:
    return make_deps(
        project_python="on",
        forge_for=lambda _event: forge,
        workdir=root / "work",
        state_url=url or f"sqlite:///{root / 'state.db'}",
        clock=extra.pop("clock", lambda: NOW),
        chat=channels(chat),
        metrics=Registry(service_metrics=True),
        **extra,
    )


def deliver(deps: Deps, event: str, payload: dict[str, Any]) -> None:
    parsed = parse_github(event, payload)
    assert parsed is not None
    parsed = pin_event(parsed, deps.forge_for)
    assert parsed is not None
    dispatch.handle(deps, parsed)


def sent(deps: Deps, event: str, outcome: str) -> float:
    assert deps.metrics is not None
    text = deps.metrics.render()
    line = f'sluice_notifications_total{{event="{event}",outcome="{outcome}"}} '
    found = [row for row in text.splitlines() if row.startswith(line)]
    return float(found[0].split()[-1]) if found else 0.0


def github(config: str, files: dict[str, str] | None = None) -> MemoryForge:
    forge = MemoryForge(OWNER, name="github")
    forge.repositories[CASE_REPOSITORY_ID] = forge.repo  # the id the bodies carry
    forge.commit(ROOT, {"config.yaml": config, **(files or {"models/.keep": ""})}, branch="main")
    forge.roles.update({"alice": "write", "bob": "write", "erin": "write"})
    return forge


def merged(number: int, *, head: str, merge: str) -> dict[str, Any]:
    return realcase("github/pull_request/woodpecker__HookPullRequestMerged.json", OWNER, **{
        "pull_request.number": number, "number": number, "pull_request.merge_commit_sha": merge,
        "pull_request.head.sha": head, "pull_request.base.ref": "main",
        "pull_request.user.login": "alice",
    })  # fmt: skip


def test_a_promotion_of_prod_is_told_once_to_each_target(tmp_path: Path, chat: Chat) -> None:
    forge = github(CONFIG)
    forge.commit(C, {"config.yaml": CONFIG, "models/.keep": ""}, parents=(ROOT,), branch="main")
    forge.open_pull(7, head_sha=A, base="main", author="alice")
    deps = deps_for(tmp_path, forge, chat)
    try:
        deliver(deps, "pull_request", merged(7, head=A, merge=C))
        assert forge.checks[C]["sluice/deploy"].conclusion == "success"
        [slack] = chat.slack_texts()
        assert slack.startswith("*Prod promotion*\nRepository: `octo/warehouse`\n")
        assert "Outcome: `promoted`" in slack and "About: `#7`" in slack
        [teams] = chat.bodies(TEAMS)
        assert teams["attachments"][0]["content"]["body"][0]["text"] == "Prod promotion"
        # The same merge delivered again (a new delivery id) runs and tells nothing.
        deliver(deps, "pull_request", merged(7, head=A, merge=C))
        assert len(chat.slack_texts()) == 1 and len(chat.bodies(TEAMS)) == 1
        assert sent(deps, "promotion", "sent") == 2.0
        rows = [r for r in deps.ledger.entries() if r.kind == "notification"]
        assert [(r.outcome, r.detail) for r in rows] == [
            ("promotion", "2 target(s): slack #1 of octo/*, teams #2 of octo/*")
        ]
    finally:
        deps.close()


def test_a_held_build_is_told_once_per_head(tmp_path: Path, chat: Chat) -> None:
    forge = github(BUDGET, {"models/daily.sql": DAILY})
    forge.commit(B, {"config.yaml": BUDGET, "models/daily.sql": DAILY}, parents=(ROOT,))
    forge.teams["octo/data-leads"] = frozenset({"erin"})
    forge.open_pull(7, head_sha=B, base="main", author="alice")
    deps = deps_for(tmp_path, forge, chat)
    opened = realcase("github/pull_request/opened.payload.json", OWNER, **{
        "number": 7, "pull_request.number": 7, "pull_request.head.sha": B,
        "pull_request.user.login": "alice", "pull_request.base.ref": "main",
    })  # fmt: skip
    rerun = realcase("github/check_run/rerequested.payload.json", OWNER, **{
        "check_run.name": "sluice/pr-environment", "check_run.head_sha": B,
    })  # fmt: skip
    rerun["check_run"]["pull_requests"] = [{"number": 7, "id": 7}]
    try:
        deliver(deps, "pull_request", opened)
        assert forge.checks[B]["sluice/pr-environment"].conclusion == "action_required"
        [slack] = chat.slack_texts()
        assert slack.startswith("*A build waits for the backfill budget's approver*")
        assert "About: `#7`" in slack and "intervals (budget 30)" in slack
        assert "octo/data-leads" in slack
        deliver(deps, "check_run", rerun)  # held again at the same head: nobody told
        assert len(chat.slack_texts()) == 1 and len(chat.bodies(TEAMS)) == 1
        holds = [r for r in deps.ledger.entries() if r.kind == "budget hold"]
        assert [(r.ref, r.outcome) for r in holds] == [("#7", f"held at {B[:12]}")]
    finally:
        deps.close()


def test_a_rollback_is_told_once(tmp_path: Path, chat: Chat) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    second = prod_recorded_twice(tmp_path, url, NOW)
    forge = MemoryForge()
    forge.commit_folder(A, second, branch="main")
    forge.open_pull(7, head_sha=A, base="main", author="alice")
    forge.close_pull(7, merged=True)
    forge.roles.update({"bob": "write"})
    runner = Warehouse()
    deps = deps_for(tmp_path, as_forge(forge), chat, url=url, runner_for=runner.runner,
                    clock=lambda: NOW + 120_000)  # fmt: skip
    deps.ledger.seen(f"memory:{forge.repo}", None, NOW, sha=A)
    try:
        for comment_id in (1, 2):  # a second rollback: prod is already there, told again
            body = "/sluice rollback"
            made = forge.add_comment(7, "bob", body, comment_id=comment_id)
            dispatch.handle(deps, CommentEvent(
                forge="memory", repo=forge.repo, installation_id=None, action="created",
                number=7, comment_id=made, author="bob", body=body,
            ))  # fmt: skip
            if comment_id == 1:
                assert forge.bot_comments(7)[-1].startswith("@bob rolled prod back")
                [slack] = chat.slack_texts()
                assert slack.startswith("*Prod rolled back*")
                assert "By: `bob`" in slack and "Outcome: `rolled back`" in slack
                assert len(chat.bodies(TEAMS)) == 1
        rollbacks = [r for r in deps.ledger.entries() if r.kind == "rollback"]
        notices = [r for r in deps.ledger.entries() if r.kind == "notification"]
        assert len(notices) == len(rollbacks)  # one told per rollback made, no more
        assert len(chat.slack_texts()) == len(rollbacks)
    finally:
        deps.close()


def test_a_failed_scheduled_run_is_told_escaped_and_a_dead_webhook_fails_nothing(
    tmp_path: Path, chat: Chat, caplog: pytest.LogCaptureFixture
) -> None:
    forge = github(CONFIG)
    chat.mock.replace(responses.POST, TEAMS, status=500)
    deps = deps_for(tmp_path, forge, chat)
    event = ScheduledRunEvent(forge="github", repo=OWNER, installation_id=None)
    error = "model <!channel> failed: `x` <@U1> & [here](https://evil.example)"
    try:
        with caplog.at_level(logging.DEBUG):
            dispatch.abandon(deps, event, error)  # the queue gives up on the run's job
        [slack] = chat.slack_texts()
        assert slack.startswith("*The scheduled run of prod failed*")
        assert "Error: `model &lt;!channel&gt; failed: \u02cbx\u02cb &lt;@U1&gt; &amp;" in slack
        assert len(chat.bodies(TEAMS)) == 4  # tried, then given up: the job is not failed
        assert chat.waits == [1.0, 2.0, 4.0]
        assert sent(deps, "run_failed", "sent") == 1.0
        assert sent(deps, "run_failed", "failed") == 1.0
        assert "teams #2 of octo/*" in caplog.text and "HTTP 500 after 4 tries" in caplog.text
        assert "s3cret" not in caplog.text
        assert all("s3cret" not in r.detail for r in deps.ledger.entries())
    finally:
        deps.close()


def test_a_late_run_and_a_pr_waiting_for_approval_are_told_once_by_the_janitor(
    tmp_path: Path, chat: Chat
) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    forge = github(CONFIG)
    forge.commit(A, {"config.yaml": CONFIG, "models/.keep": ""}, parents=(ROOT,))
    forge.open_pull(7, head_sha=A, base="main", author="alice", title="<!here> my *PR*")
    forge.open_pull(8, head_sha=B, base="main", author="alice")  # planned, then pushed to
    clock = [NOW]
    deps = deps_for(tmp_path, forge, chat, clock=lambda: clock[0],
                    notify_run_late_hours=26, notify_approval_wait_hours=24)  # fmt: skip
    store = open_state(url)
    try:  # prod's last successful run ended 30 hours ago, a failed one since (as runs.py saves)
        for at, ok in ((NOW - 31 * HOUR, True), (NOW - 2 * HOUR, False)):
            payload = {"environment": "prod", "at": at, "started": at, "finished": at + HOUR}
            store.save_results([JobResult(f"run-{at}", None, runs.RUN, "prod", ok, payload, at)])
    finally:
        store.close()
    review = PlanReview("fp7", (("s.m", "k"),), {}, {})
    deps.ledger.record_plan(KEY, 7, A, review, NOW - 25 * HOUR)
    deps.ledger.record_plan(KEY, 8, C, review, NOW - 25 * HOUR)
    forge.open_pull(9, head_sha=A, base="main", author="alice")  # waited past the window
    deps.ledger.record_plan(KEY, 9, A, review, NOW - (24 + 7 * 24 + 1) * HOUR)
    janitor = JanitorEvent(forge="github", repo=OWNER, installation_id=None)
    try:
        dispatch.handle(deps, janitor)
        texts = chat.slack_texts()
        assert len(texts) == 2, texts  # PR 8's plan is not of its head, 9's too old: not told
        by_head = {t.splitlines()[0]: t for t in texts}
        assert "None for 30 hours" in by_head["*No successful scheduled run of prod*"]
        pr = by_head["*A pull request waits for approval*"]
        assert "About: `#7`" in pr and "Waiting for 25 hours" in pr
        assert "`&lt;!here&gt; my *PR*`" in pr
        clock[0] += HOUR
        dispatch.handle(deps, janitor)  # an hour on: both still so, neither told again
        assert len(chat.slack_texts()) == 2
    finally:
        deps.close()
