"""``sluice jobs list|show``: what the service's queue is doing, for its operators.

Reads the queue in the service's database: ``--database-url``, else the one ``sluice
serve`` uses (``SLUICE_DATABASE_URL``, else ``state.db`` in ``SLUICE_WORKDIR``, by default
``.sluice-service`` in the current folder). A SQLite file that does not exist is refused,
not made; jobs are never changed.
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from sluice.bot.entry.settings import StateSettings
from sluice.bot.queue.schema import JobRecord, JobStatus
from sluice.bot.queue.store import JobQueue
from sluice.core.errors import SluiceError
from sluice.core.words import duration

_out = Console(emoji=False)

database_option = click.option(
    "--database-url",
    default=None,
    help="The service's database (default: the one `sluice serve` uses here: "
    "SLUICE_DATABASE_URL, else state.db in SLUICE_WORKDIR, by default .sluice-service).",
)


def _when(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def as_dict(record: JobRecord) -> dict[str, Any]:
    """A job as ``--json`` prints it."""
    job = record.job
    return {
        "id": job.id,
        "key": job.key,
        "kind": job.kind,
        "status": record.status.value,
        "attempts": job.attempts,
        "head_sha": job.head_sha,
        "delivery_id": job.delivery_id,
        "created": _when(job.created_ts),
        "started": _when(record.started_ts),
        "finished": _when(record.finished_ts),
        "worker": record.worker,
        "lease_until": _when(record.lease_until),
        "error": record.error,
    }


def _open(url: str | None) -> JobQueue:
    """The queue at ``url``, else at the service's default state."""
    try:
        return JobQueue(state_url(url))
    except SluiceError as exc:
        raise click.ClickException(str(exc)) from None


def state_url(url: str | None) -> str:
    """``url``, else the service's default state (as ``sluice serve`` resolves it);
    refused when it names a SQLite file that does not exist (no service has run with it)."""
    given = bool(url)
    if not url:
        try:
            url = StateSettings().state_url()
        except ValidationError as exc:
            raise click.ClickException(f"the state settings are invalid: {exc}") from None
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        parsed = None
    if parsed is not None and parsed.get_backend_name() == "sqlite":
        path = parsed.database
        if path and path != ":memory:" and not Path(path).is_file():
            where = "--database-url" if given else _default_source()
            raise click.ClickException(
                f"no Sluice state at {path} ({where}): no service has run with it"
                "\n  hint: run this where `sluice serve` runs, with its SLUICE_WORKDIR or "
                "SLUICE_DATABASE_URL, or pass --database-url"
            )
    return url


def _default_source() -> str:
    """Which setting named the default state, as `sluice serve` resolves it."""
    if os.environ.get("SLUICE_WORKDIR"):
        return "SLUICE_WORKDIR's state.db; SLUICE_DATABASE_URL is not set"
    return "the default SLUICE_WORKDIR, .sluice-service, here; SLUICE_DATABASE_URL is not set"


def register(cli: click.Group) -> None:
    """Add ``sluice jobs`` to the ``sluice`` command."""

    @cli.group()
    def jobs() -> None:
        """The service's job queue: list jobs, show one."""

    @jobs.command("list")
    @database_option
    @click.option(
        "--status",
        type=click.Choice([s.value for s in JobStatus]),
        default=None,
        help="Only jobs in this state.",
    )
    @click.option("--limit", default=50, show_default=True, help="At most this many, newest first.")
    @click.option("--json", "as_json", is_flag=True, help="Print the jobs as JSON.")
    def list_jobs(database_url: str | None, status: str | None, limit: int, as_json: bool) -> None:
        """The newest jobs: status, attempts, age, last error."""
        queue = _open(database_url)
        try:
            records = queue.jobs(status=JobStatus(status) if status else None, limit=limit)
            counts = queue.counts()
            waited = queue.oldest_wait(time.time())
        finally:
            queue.close()
        if as_json:
            click.echo(json.dumps([as_dict(r) for r in records]))
            return
        table = Table("id", "status", "kind", "key", "attempts", "age", "last error")
        now = time.time()
        for record in records:
            error = (record.error or "").splitlines()[0][:80] if record.error else ""
            table.add_row(
                str(record.job.id),
                record.status.value,
                record.job.kind,
                record.job.key,
                str(record.job.attempts),
                duration(max(0.0, now - record.job.created_ts)),
                error,
            )
        _out.print(table)
        summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()) if n)
        oldest = f"; the oldest queued job has waited {duration(waited)}" if waited else ""
        _out.print(f"{summary or 'no jobs'}{oldest}", highlight=False)

    @jobs.command("show")
    @click.argument("job_id", type=int)
    @database_option
    @click.option("--json", "as_json", is_flag=True, help="Print the job as JSON.")
    def show_job(job_id: int, database_url: str | None, as_json: bool) -> None:
        """Everything stored about job JOB_ID (its event payload with --json)."""
        queue = _open(database_url)
        try:
            record = queue.job(job_id)
        finally:
            queue.close()
        if record is None:
            raise click.ClickException(f"there is no job {job_id} (`sluice jobs list` shows them)")
        shown = as_dict(record)
        if as_json:
            click.echo(json.dumps({**shown, "payload": record.job.payload}, default=str))
            return
        for name, value in shown.items():
            if name != "error" and value is not None:
                _out.print(f"{name}: {value}", highlight=False, markup=False)
        if record.error:
            _out.print("error:", highlight=False)
            _out.print(record.error, highlight=False, markup=False)
