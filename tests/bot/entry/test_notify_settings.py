"""``SLUICE_NOTIFY``: repository patterns to Slack and Teams webhooks, checked when the
service starts; its URLs are secrets (scrubbed, in no summary, repr or error)."""

from __future__ import annotations

import json

import pytest

from sluice.bot.entry.settings import ServiceSettings
from sluice.bot.present import notify_text
from sluice.core.errors import ConfigError

SLACK = "https://hooks.slack.com/services/T0/B0/s3cretSlack"
TEAMS = "https://acme.webhook.office.com/webhookb2/s3cretTeams"


def settings(notify: object, **more: object) -> ServiceSettings:
    text = notify if isinstance(notify, str) else json.dumps(notify)
    return ServiceSettings(webhook_secret="w", notify=text, **more)  # type: ignore[arg-type]


def test_routes_targets_and_their_events() -> None:
    made = settings({
        "acme/*": [{"kind": "slack", "url": SLACK, "events": ["promotion", "rollback"]}],
        "gitlab:data/*": [{"kind": "teams", "url": TEAMS}, {"kind": "slack", "url": SLACK}],
    })  # fmt: skip
    first, second = made.notify_routes()
    assert first.pattern == "acme/*" and second.pattern == "gitlab:data/*"
    [slack] = first.targets
    assert (slack.kind, slack.url, slack.events) == ("slack", SLACK, {"promotion", "rollback"})
    assert slack.name == "slack #1 of acme/*"
    teams = second.targets[0]
    assert teams.events == set(notify_text.EVENTS)  # every event unless it says
    channels = made.chat()
    assert channels is not None
    assert channels.targets("gitlab:data/x/y", "run_failed") == list(second.targets)
    # Secrets: scrubbed from text leaving the service, never in its summary or repr.
    assert SLACK in made.secrets() and TEAMS in made.secrets()
    shown = made.summary() + repr(made) + repr(made.notify_routes())
    assert "s3cret" not in shown
    assert "notify:       acme/*: slack; gitlab:data/*: teams, slack" in made.summary()


def test_unset_is_off() -> None:
    made = ServiceSettings(webhook_secret="w")  # type: ignore[arg-type]
    assert made.notify_routes() == () and made.chat() is None
    assert "notify:       off (SLUICE_NOTIFY is not set)" in made.summary()
    assert (made.notify_run_late_hours, made.notify_approval_wait_hours) == (26.0, 24.0)


@pytest.mark.parametrize(
    ("notify", "says"),
    [
        (f'{{"acme/*": [{{"kind": "slack", "url": "{SLACK}"', "is not JSON"),
        ([{"kind": "slack", "url": SLACK}], "should map repository patterns"),
        ({"acme/*": {"kind": "slack", "url": SLACK}}, "['acme/*'] should be a list of targets"),
        ({"https://x/y": [{"kind": "slack", "url": SLACK}]}, "does not name repositories"),
        ({"acme/*": [{"kind": "discord", "url": SLACK}]}, "target 1: kind should be one of"),
        ({"acme/*": [{"kind": "slack", "url": SLACK.replace("https", "http")}]}, "https://"),
        ({"acme/*": [{"kind": "slack", "url": SLACK.replace("com/", "com:x/")}]}, "https://"),
        ({"acme/*": [{"kind": "slack", "url": SLACK, "events": ["deploy"]}]}, "'deploy'"),
        ({"acme/*": [{"kind": "slack", "url": SLACK, "channel": "#x"}]}, "unknown key(s)"),
    ],
)
def test_a_wrong_value_is_refused_without_showing_a_url(notify: object, says: str) -> None:
    with pytest.raises(ConfigError) as refused:
        settings(notify)
    text = str(refused.value)
    assert says in text and "SLUICE_NOTIFY" in text
    assert "s3cret" not in text


def test_thresholds_are_hours_not_below_zero() -> None:
    made = settings({}, notify_run_late_hours=0, notify_approval_wait_hours=48)
    assert (made.notify_run_late_hours, made.notify_approval_wait_hours) == (0, 48)
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        settings({}, notify_run_late_hours=-1)
