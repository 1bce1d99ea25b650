"""Chat notifications at the wire (``responses``): the Slack and Teams bodies, user text made
inert in each, retries with backoff (``Retry-After`` honoured within its cap) and giving
up, and the webhook's URL (a secret) in no answer, reason or log line."""

from __future__ import annotations

import json
import logging

import pytest
import requests
import responses

from sluice.bot.forge.chat import MAX_WAIT_S, Channels, Route, Sender, Target
from sluice.bot.present import notify_text
from sluice.bot.present.notify_text import Notice

SLACK = "https://hooks.slack.com/services/T000/B000/s3cretSlackPath"
TEAMS = "https://acme.webhook.office.com/webhookb2/s3cretTeamsPath"
ALL = frozenset(notify_text.EVENTS)
HOSTILE = (
    "<!channel> <@U024BE7LH> <https://evil.example|click me> *bold* `code` "
    "[link](https://evil.example) <at>everyone</at> <b>html</b> & @here\n\u202eevil"
)


def sender(waits: list[float]) -> Sender:
    return Sender(sleep=waits.append)  # no real waiting: the waits asked for are recorded


def notice(**changes: str) -> Notice:
    fields = {
        "event": notify_text.PROMOTION,
        "key": "k",
        "repo": "octo/warehouse",
        "what": "promoted",
        "ref": "#7",
        "actor": "sluice",
        "plan_id": "abc123",
        "detail": "prod at 0123456789ab: Promoted",
    }
    fields.update(changes)
    return Notice(**fields)  # type: ignore[arg-type]


def posted(mock: responses.RequestsMock, index: int = 0) -> dict[str, object]:
    body = mock.calls[index].request.body
    assert body is not None
    return json.loads(body)  # type: ignore[no-any-return]


@responses.activate
def test_slack_gets_block_kit_with_every_user_value_inert() -> None:
    responses.post(SLACK, body="ok")
    hostile = notice(ref=HOSTILE, actor=HOSTILE, detail=HOSTILE, plan_id="p`1")
    delivery = sender([]).post(Target("slack", SLACK, ALL), notify_text.slack(hostile))
    assert delivery.ok and delivery.attempts == 1
    body = posted(responses.mock)
    assert body["unfurl_links"] is False and body["unfurl_media"] is False
    assert body["text"] == "Prod promotion: octo/warehouse"
    [block] = body["blocks"]  # type: ignore[misc]
    assert block["type"] == "section" and block["text"]["type"] == "mrkdwn"
    text = block["text"]["text"]
    assert text.splitlines()[0] == "*Prod promotion*"
    # No mention, link or tag can form: Slack's three characters are escaped everywhere.
    assert "<" not in text and ">" not in text
    assert "&lt;!channel&gt;" in text and "&lt;@U024BE7LH&gt;" in text and "&amp;" in text
    # Each user value is one code span it cannot close (its backticks replaced), one line.
    for line in text.splitlines()[1:]:
        assert line.count("`") == 2 and line.endswith("`"), line
    assert "\u202e" not in text and "Plan: `p\u02cb1`" in text
    assert "About: `&lt;!channel&gt;" in text


@responses.activate
def test_teams_gets_an_adaptive_card_whose_user_text_is_plain_runs() -> None:
    responses.post(TEAMS, status=202)
    hostile = notice(ref=HOSTILE, actor=HOSTILE, detail=HOSTILE)
    delivery = sender([]).post(Target("teams", TEAMS, ALL), notify_text.teams(hostile))
    assert delivery.ok
    body = posted(responses.mock)
    assert body["type"] == "message"
    [attachment] = body["attachments"]  # type: ignore[misc]
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
    card = attachment["content"]
    assert card["type"] == "AdaptiveCard" and card["version"] == "1.4"
    head, *rows = card["body"]
    assert head == {"type": "TextBlock", "text": "Prod promotion", "weight": "Bolder", "wrap": True}
    # User text only ever in TextRuns (plain text: no Markdown), never in a TextBlock.
    assert {row["type"] for row in rows} == {"RichTextBlock"}
    values = [run["text"] for row in rows for run in row["inlines"][1:]]
    # repository, outcome, PR, actor, plan, detail
    assert values[:2] == [" octo/warehouse", " promoted"] and values[4] == " abc123"
    for value in (values[2], values[3], values[5]):
        assert "<" not in value and ">" not in value and "\n" not in value, value
        assert "\u2039at\u203aeveryone\u2039/at\u203a" in value
        assert "\u2039!channel\u203a" in value and "\u202e" not in value
    assert all(run["type"] == "TextRun" for row in rows for run in row["inlines"])


def test_a_long_value_is_cut() -> None:
    text = notify_text.slack(notice(detail="x" * 5000))["blocks"][0]["text"]["text"]
    assert "x" * (notify_text.VALUE_LIMIT - 1) + "…`" in text and "x" * 501 not in text


@responses.activate
def test_429_and_5xx_are_tried_again_honouring_retry_after_within_its_cap() -> None:
    responses.post(SLACK, status=429, headers={"Retry-After": "7"})
    responses.post(SLACK, status=503)
    responses.post(SLACK, status=429, headers={"Retry-After": "3600"})
    responses.post(SLACK, body="ok")
    waits: list[float] = []
    delivery = sender(waits).post(Target("slack", SLACK, ALL), {"text": "x"})
    assert delivery.ok and delivery.attempts == 4
    assert waits == [7.0, 2.0, MAX_WAIT_S]  # Retry-After; backoff 1, 2, 4; capped at 30


@responses.activate
def test_it_gives_up_after_its_attempts_and_says_why_without_the_url(
    caplog: pytest.LogCaptureFixture,
) -> None:
    responses.post(SLACK, body=requests.ConnectionError(f"cannot reach {SLACK}"))
    waits: list[float] = []
    with caplog.at_level(logging.DEBUG):
        delivery = sender(waits).post(Target("slack", SLACK, ALL, name="slack #1"), {"text": "x"})
    assert not delivery.ok and delivery.attempts == 4 and waits == [1.0, 2.0, 4.0]
    assert delivery.reason == "ConnectionError (no answer) after 4 tries"
    assert "s3cret" not in repr(delivery) and "s3cret" not in caplog.text
    assert "s3cret" not in repr(Target("slack", SLACK, ALL, name="slack #1"))
    assert len(responses.calls) == 4


@responses.activate
def test_a_client_error_is_final_and_a_redirect_is_not_followed() -> None:
    responses.post(SLACK, status=404, body=SLACK)
    responses.post(TEAMS, status=302, headers={"Location": "https://elsewhere.example/"})
    waits: list[float] = []
    gone = sender(waits).post(Target("slack", SLACK, ALL), {"text": "x"})
    moved = sender(waits).post(Target("teams", TEAMS, ALL), {"text": "x"})
    assert (gone.ok, gone.attempts, gone.reason) == (False, 1, "HTTP 404")
    assert (moved.ok, moved.attempts, moved.reason) == (False, 1, "HTTP 302")
    assert waits == [] and len(responses.calls) == 2


@responses.activate
def test_a_url_requests_cannot_use_is_given_up_at_once_and_not_shown() -> None:
    waits: list[float] = []
    bad = "https://hooks.slack.com:s3cretPort/services/x"
    delivery = sender(waits).post(Target("slack", bad, ALL), {"text": "x"})
    assert (delivery.ok, delivery.attempts, waits) == (False, 1, [])
    assert delivery.reason == "InvalidURL (not sent)"


def test_routes_pick_a_repository_s_targets_by_pattern_forge_and_event() -> None:
    slack = Target("slack", SLACK, frozenset({"promotion"}), name="s")
    teams = Target("teams", TEAMS, ALL, name="t")
    channels = Channels(
        (
            Route("octo/*", (slack,)),
            Route("gitlab:data/*", (teams,)),
            Route("OCTO/ware*", (teams,)),
        ),
        Sender(),
    )
    assert channels.targets("github:octo/warehouse", "promotion") == [slack, teams]
    assert channels.targets("github:octo/warehouse", "rollback") == [teams]
    assert channels.targets("gitlab:data/platform/x", "rollback") == [teams]
    assert channels.targets("github:data/x", "rollback") == []
