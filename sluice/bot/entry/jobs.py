"""``sluice jobs list|show``: what the service's queue is doing, for its operators.

Reads the queue in the service's database (``--database-url``, else
``SLUICE_DATABASE_URL``); never writes it.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from sluice.bot.queue.schema import JobRecord, JobStatus
from sluice.bot.queue.store import JobQueue
from sluice.core.errors import SluiceError
from sluice.core.words import duration

_out = Console(emoji=False)

database_option = click.option(
    "--database-url",
    envvar="SLUICE_DATABASE_URL",
    required=True,
    help="The service's database (default: SLUICE_DATABASE_URL).",
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


def _open(url: str) -> JobQueue:
    try:
        return JobQueue(url)
    except SluiceError as exc:
        raise click.ClickException(str(exc)) from None


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
    def list_jobs(database_url: str, status: str | None, limit: int, as_json: bool) -> None:
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
    def show_job(job_id: int, database_url: str, as_json: bool) -> None:
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
