"""``sluice audit``: the audit log (every gate decision and action, issue 44) for operators.

Reads the service's database as ``sluice jobs`` does (``--database-url``, else the one
``sluice serve`` uses; a SQLite file that does not exist is refused, not made). ``--json``
prints JSON lines: one object a row, oldest first, with the keys of
:meth:`sluice.bot.flow.audit.Entry.to_json`; otherwise a table. Nothing is changed.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from sluice.bot.entry.jobs import database_option, state_url
from sluice.bot.flow.ledger import Ledger
from sluice.core.errors import SluiceError


def since_ms(text: str | None) -> int | None:
    """``--since`` (an ISO 8601 date or time; UTC when it names no zone) in epoch ms.

    >>> since_ms("2026-11-29")
    1795910400000
    >>> since_ms("2026-11-29T10:00:00+01:00")
    1795942800000
    """
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is not an ISO 8601 date or time (e.g. 2026-11-29 or 2026-11-29T10:00:00Z)",
            param_hint="--since",
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def register(cli: click.Group) -> None:
    """Add ``sluice audit`` to the ``sluice`` command."""

    @cli.command("audit")
    @database_option
    @click.option("--repo", default=None, help="Only this repository's rows (forge:owner/name).")
    @click.option("--since", default=None, help="Only rows from this ISO 8601 date or time on.")
    @click.option("--json", "as_json", is_flag=True, help="Print JSON lines, one row each.")
    def audit(database_url: str | None, repo: str | None, since: str | None, as_json: bool) -> None:
        """The audit log: every gate decision and action, oldest first."""
        start = since_ms(since)
        url = state_url(database_url)
        try:
            ledger = Ledger(url)
        except SluiceError as exc:
            raise click.ClickException(str(exc)) from None
        try:
            # A renamed repository's rows are under its first name: either name finds them.
            rows = ledger.entries(
                repo=None if repo is None else ledger.canonical(repo), since=start
            )
        except SluiceError as exc:
            raise click.ClickException(str(exc)) from None
        finally:
            ledger.close()
        if as_json:
            for row in rows:
                click.echo(json.dumps(row.to_json(), ensure_ascii=False))
            return
        table = Table(
            "time", "repository", "kind", "actor", "PR or tag", "plan", "outcome", "detail"
        )
        for row in rows:
            shown = row.to_json()
            cells = (
                str(shown["time"]).replace("T", " ")[:19],
                row.repo,
                row.kind,
                row.actor,
                row.ref or "",
                (row.plan_id or "")[:12],
                row.outcome,
                row.detail,
            )
            table.add_row(*(Text(cell) for cell in cells))  # text, never Rich markup
        out = Console(emoji=False)  # made now: the terminal's width (COLUMNS) as it is now
        out.print(table)
        out.print(f"{len(rows)} row{'s' if len(rows) != 1 else ''}", highlight=False)
