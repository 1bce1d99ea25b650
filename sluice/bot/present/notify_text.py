"""The words of a chat notification and their escaping, for Slack and Microsoft Teams.

A :class:`Notice` is one event the flow decided to tell (:mod:`sluice.bot.flow.notify`):
which event, the repository, and the facts, every one of them untrusted text (PR
references, logins, plan ids, model and branch names, errors), already scrubbed of the
service's secrets by the flow. Here they become a message body:

- **Slack** (:func:`slack`): Block Kit with one ``mrkdwn`` section and a plain fallback
  ``text``. Untrusted text is made inert: ``&``, ``<`` and ``>`` escaped (so no
  ``<!channel>``, ``<@U123>`` or ``<https://x|link>`` of a user's can form), then put in
  an inline code span (no bold, no emoji codes, no bare link or ``@here``), its backticks
  replaced so the span cannot be closed early. ``unfurl_links`` and ``unfurl_media`` off.
- **Teams** (:func:`teams`): an Adaptive Card (what Teams' Workflows webhooks take) whose
  untrusted text is only in ``TextRun`` inlines of a ``RichTextBlock``, which Teams shows
  as plain text (no Markdown); ``<`` and ``>`` are replaced by look-alikes too, so no
  renderer that reads HTML (or Teams' ``<at>`` mentions) sees a tag.

Every value is cut (:data:`VALUE_LIMIT`) and control characters become spaces first
(:func:`plain`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

RUN_FAILED = "run_failed"
RUN_LATE = "run_late"
PROMOTION = "promotion"
ROLLBACK = "rollback"
BUDGET_HOLD = "budget_hold"
APPROVAL_WAITING = "approval_waiting"
DRIFT = "drift"
DRIFT_REPAIR = "drift_repair"
EVENTS: tuple[str, ...] = (
    RUN_FAILED,
    RUN_LATE,
    PROMOTION,
    ROLLBACK,
    BUDGET_HOLD,
    APPROVAL_WAITING,
    DRIFT,
    DRIFT_REPAIR,
)
"""Every event a target may ask for (``SLUICE_NOTIFY``'s ``events``)."""

VALUE_LIMIT = 500
"""Characters of one untrusted value, at most (an error is cut, an ellipsis says so)."""

_GRAVE = "\u02cb"  # a backtick's look-alike: a code span's text cannot close it
_LEFT, _RIGHT = "\u2039", "\u203a"  # look-alikes of < and >: no tag forms

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2066-\u2069]+")


@dataclass(frozen=True)
class Notice:
    """One event to tell: ``event`` (:data:`EVENTS`), ``key`` (the same event told once:
    the flow's dedupe key), and its untrusted facts."""

    event: str
    key: str
    repo: str
    """``owner/name`` as the forge spells it."""
    what: str = ""
    """The outcome in the flow's words (``promoted``, ``not promoted``, ``rolled back``)."""
    ref: str = ""
    """The PR (``#7``) or tag it is about."""
    actor: str = ""
    plan_id: str = ""
    detail: str = ""
    """A title, the budget exceeded, an error."""
    hours: float | None = None
    """How long it has been (late runs, approvals waiting)."""


_HEADLINES = {
    RUN_FAILED: "The scheduled run of prod failed",
    RUN_LATE: "No successful scheduled run of prod",
    PROMOTION: "Prod promotion",
    ROLLBACK: "Prod rolled back",
    BUDGET_HOLD: "A build waits for the backfill budget's approver",
    APPROVAL_WAITING: "A pull request waits for approval",
    DRIFT: "Prod differs from what Sluice recorded",
    DRIFT_REPAIR: "Prod's drift repaired through the gate",
}


def plain(text: str | None) -> str:
    """Untrusted ``text`` as one bounded line: control characters (line breaks and
    bidirectional overrides too) as one space, cut to :data:`VALUE_LIMIT`.

    >>> plain("a\\n\\u202eb")
    'a b'
    """
    text = _CONTROL.sub(" ", text or "").strip()
    return text if len(text) <= VALUE_LIMIT else text[: VALUE_LIMIT - 1] + "…"


def slack_escape(text: str) -> str:
    """Slack's three control characters as its entities (what its docs ask of any text).

    >>> slack_escape("<!channel> & <@U1>")
    '&lt;!channel&gt; &amp; &lt;@U1&gt;'
    """
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_code(text: str | None) -> str:
    """Untrusted ``text`` inert in Slack mrkdwn: escaped, in a code span it cannot close.

    >>> code = slack_code("*hi* `x` <http://evil|click> @here")
    >>> code.startswith("`*hi* ") and code.count("`") == 2 and "<" not in code
    True
    """
    value = slack_escape(plain(text)).replace("`", _GRAVE)
    return f"`{value}`" if value else "`-`"


def teams_plain(text: str | None) -> str:
    """Untrusted ``text`` for a Teams ``TextRun``: plain, with no ``<`` or ``>`` a
    renderer could take for a tag.

    >>> text = teams_plain("<at>all</at> [x](http://e)")
    >>> "<" in text or ">" in text, text.endswith("all\u2039/at\u203a [x](http://e)")
    (False, True)
    """
    return plain(text).replace("<", _LEFT).replace(">", _RIGHT) or "-"


def _hours(hours: float) -> str:
    return f"{hours:.0f} hour{'s' if round(hours) != 1 else ''}"


def lines(notice: Notice) -> list[tuple[str, str | None]]:
    """The message as (the service's own words, an untrusted value or None) pairs."""
    out: list[tuple[str, str | None]] = [("Repository:", notice.repo)]
    if notice.event in (PROMOTION, ROLLBACK):
        out.append(("Outcome:", notice.what))
    if notice.ref:
        out.append(("About:", notice.ref))
    if notice.actor:
        out.append(("By:", notice.actor))
    if notice.plan_id:
        out.append(("Plan:", notice.plan_id))
    if notice.hours is not None:
        if notice.event == RUN_LATE:
            out.append((f"None for {_hours(notice.hours)}; the last one:", notice.detail or None))
            return out
        out.append((f"Waiting for {_hours(notice.hours)}", None))
    if notice.detail:
        out.append(("Error:" if notice.event == RUN_FAILED else "Detail:", notice.detail))
    return out


def slack(notice: Notice) -> dict[str, Any]:
    """Slack's incoming-webhook body for ``notice``."""
    headline = _HEADLINES[notice.event]
    body = [f"*{headline}*"]
    for words, value in lines(notice):
        body.append(f"{words} {slack_code(value)}" if value is not None else words)
    fallback = f"{headline}: {slack_escape(plain(notice.repo))}"
    return {
        "text": fallback,
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(body)}}],
        "unfurl_links": False,
        "unfurl_media": False,
    }


def teams(notice: Notice) -> dict[str, Any]:
    """A Teams webhook's body for ``notice``: one Adaptive Card (schema 1.4)."""
    blocks: list[dict[str, Any]] = [
        {
            "type": "TextBlock",
            "text": _HEADLINES[notice.event],  # the service's own words only
            "weight": "Bolder",
            "wrap": True,
        }
    ]
    for words, value in lines(notice):
        inlines: list[dict[str, Any]] = [{"type": "TextRun", "text": words, "weight": "Bolder"}]
        if value is not None:
            inlines.append({"type": "TextRun", "text": " " + teams_plain(value)})
        blocks.append({"type": "RichTextBlock", "inlines": inlines})
    card = {
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": "1.4",
        "body": blocks,
    }
    return {
        "type": "message",
        "attachments": [
            {
                "contentType": "application/vnd.microsoft.card.adaptive",
                "contentUrl": None,
                "content": card,
            }
        ],
    }


def body(kind: str, notice: Notice) -> dict[str, Any]:
    """The body a target of ``kind`` (``slack``, ``teams``) takes for ``notice``."""
    return slack(notice) if kind == "slack" else teams(notice)
