"""What the web UI's drift page shows (issue 47): prod's last drift check as the flow left
it, kept in the state database for every forge.

GitHub shows a drift, its repair plan and the policies' verdicts on the ``sluice/drift``
check run, with its buttons; a GitLab commit status holds a title only, and has no
buttons. So each time the flow sets that check (the scheduled check, each click of a
repair, from the forge or the web UI) it also keeps the same facts, as plain values
(:func:`sluice.bot.flow.drift_repair.show`), and the web UI's ``/ui/drift`` page shows
them, with its forms (:mod:`sluice.bot.web.repair`).

Where: the ledger's row of sticky comments, under number 0 (no pull request has it), as
one section of JSON; one row a repository, each check replacing the last. Nothing here
decides anything: a form the page sends is checked against this view (the page it came
from showed the plan that is prod's repair plan now), then becomes the check's button's
event, which the flow judges as it judges the button, the repair plan made again.

Every text in it is as the catalog, the state or the policies gave it (a view's SQL, an
error, a policy's description): the page escapes it (its templates are autoescaped).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from sluice.bot.flow.ledger import Ledger
from sluice.core.errors import SluiceError

log = logging.getLogger(__name__)

NUMBER = 0
"""The ledger's sticky comment row prod's drift view is kept under (no pull request's)."""
SECTION = "drift"
ROWS = 50
"""Differences a view keeps at most (the rest counted), as the check's text lists them."""
MAX_CHARS = 1_000_000
"""The longest view read back (its JSON): anything longer is not shown."""


def save(ledger: Ledger, repo: str, view: dict[str, Any]) -> None:
    """Keep ``view`` as ``repo``'s drift view; a write that fails is logged, never raised
    (the check on the forge was set: the page shows the last view it could keep)."""
    try:
        ledger.save_comment(repo, NUMBER, None, {SECTION: json.dumps(view, sort_keys=True)})
    except SluiceError as exc:
        log.warning("%s: the web UI's drift view was not kept: %s", repo, exc)


def load(ledger: Ledger, repo: str) -> dict[str, Any] | None:
    """``repo``'s drift view (None: no drift check kept one yet)."""
    _body, sections = ledger.comment(repo, NUMBER)
    text = sections.get(SECTION)
    if not isinstance(text, str) or len(text) > MAX_CHARS:
        return None
    try:
        view = json.loads(text)
    except json.JSONDecodeError:
        return None
    return view if isinstance(view, dict) else None
