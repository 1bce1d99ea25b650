"""The audit log (issue 44): every gate decision and action, appended to the state database.

One row per decision, never changed or deleted: when (epoch ms), the repository, what kind
of decision (:data:`KINDS`), who made it (a forge login, or ``sluice`` for the service
itself), the PR (``#7``) or tag (``tag v1.2``) it was about, the plan it was about (a plan
review's fingerprint, or the state's plan id), its outcome and a short detail. The table is
this module's (its own track of migrations, :data:`AUDIT`, opened with the ledger), and so
are writing and reading it: :meth:`AuditLog.append` and :meth:`AuditLog.entries`, which the
:class:`~sluice.bot.flow.ledger.Ledger` carries so an audit row can join a ledger
transaction. ``sluice audit`` and the web UI read it.

Each decision is recorded by one call of :func:`record` in the one place it is made:

- ``approval`` (the gate's outcome on a PR's plan): :func:`sluice.bot.flow.approval.refresh`;
  an "Approve this plan" click (the check's button or the web UI's form, outcome
  ``given``, the clicker the actor; the gate's row says whether it counted):
  :func:`sluice.bot.flow.pr_build.on_check_run`;
- ``promotion`` (merge, tag, ``/sluice deploy``) and its refusal:
  :func:`sluice.bot.flow.promotion.promote`;
- ``rollback``: ``run_command._rollback``;
- ``refusal`` (a command by someone without write permission, a release tag by someone
  not in ``released_by``, a merge group whose combined plan holds an unapproved change):
  ``run_command.on_comment``, ``promotion.on_tag`` and ``merge_queue.check_group``;
- ``merge queue`` (a merge group merged, dequeued or invalidated: GitHub's ``destroyed``):
  :func:`sluice.bot.flow.merge_queue.on_merge_group`;
- ``override`` (the backfill budget's approver released a held build):
  :func:`sluice.bot.flow.pr_build.on_approved`;
- ``policy override`` (``/sluice override POLICY reason``: a soft policy lifted for one
  plan, the plan's fingerprint its plan id, the reason its detail; the row is the
  override, read back by :meth:`AuditLog.policy_overrides`):
  :func:`sluice.bot.flow.policies.override`;
- ``deploy command`` (a writer asked for ``/sluice deploy``): ``run_command._deploy``; the
  gate's row and, when it passes, the promotion's follow it; a command from the web UI
  says so in its rows' detail;
- ``budget hold`` (a PR's build waits for the backfill budget's approver, once per
  head): ``pr_build._build``;
- ``notification`` (an event told to chat targets, its key the reference, its event the
  outcome: the row that makes it told once): :func:`sluice.bot.flow.notify.flush`;
- ``drift repair`` (prod's drift repair through the gate: a writer's request, a required
  approver's approval, the repair applied, each row naming the repair plan's fingerprint;
  the rows are the repair's only record, read back by :meth:`AuditLog.plan_entries`):
  :mod:`sluice.bot.flow.drift_repair`;
- ``settings change`` (the settings in force moved by a promotion, in its transaction):
  :func:`sluice.bot.flow.trust.pin`; settings on the prod branch no gate approved, kept
  out of force (told once per commit): :func:`sluice.bot.flow.trust.settings_for`.

A row may also be told in chat: ``record(..., notify=event)`` adds the notice to the job,
sent when the job ends (:mod:`sluice.bot.flow.notify`).

Text is bounded and made safe before it is stored: the service's secrets (in any printed
encoding) and host paths are replaced by the job's scrubber (:mod:`sluice.bot.present.redact`),
forge tokens of known shapes are masked, control characters become spaces, and every field
is cut (:data:`DETAIL_LIMIT`, :data:`NAME_LIMIT`). Pages escape it again when they show it.

A failure to write a row: inside a transaction the caller opened for the decision
(``ledger.together``), it fails that transaction, so the decision and its record are
written together or not at all (the job fails and is retried as for any state error);
outside one, the row is lost, the error is logged (``ERROR``, naming the decision) and
the flow goes on: a decision already taken on the forge is never undone for its record.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    func,
    insert,
    inspect,
    select,
)

from sluice.bot.present.notify_text import Notice
from sluice.core.db.migrate import Migration, Track, create_tables
from sluice.core.db.transactions import Transactions
from sluice.core.errors import StateError

if TYPE_CHECKING:
    from sluice.bot.flow.job import Job

log = logging.getLogger(__name__)

APPROVAL = "approval"
REFUSAL = "refusal"
PROMOTION = "promotion"
ROLLBACK = "rollback"
OVERRIDE = "override"
SETTINGS = "settings change"
DEPLOY = "deploy command"
HOLD = "budget hold"
NOTICE = "notification"
MERGE_QUEUE = "merge queue"
POLICY_OVERRIDE = "policy override"
REPAIR = "drift repair"
KINDS = (
    APPROVAL, REFUSAL, PROMOTION, ROLLBACK, OVERRIDE, SETTINGS, DEPLOY, HOLD, NOTICE, MERGE_QUEUE,
    POLICY_OVERRIDE, REPAIR,
)  # fmt: skip
OVERRODE = "overrode "
"""A ``policy override`` row's outcome: this, the policy's name and the settings generation
it was given under (:data:`sluice.bot.flow.policies.UNDER`)."""
"""Every kind of row."""

SERVICE = "sluice"
"""The actor of a decision the service made on its own (the gate, a merge's promotion)."""

DETAIL_LIMIT = 300
"""Characters of a row's detail, at most."""
NAME_LIMIT = 120
"""Characters of a row's actor, reference, plan id and outcome, at most."""

metadata = MetaData()

entries_table = Table(
    "sluice_audit",
    metadata,
    # INTEGER on SQLite so the column aliases the rowid and autoincrements: the order rows
    # were appended in.
    Column(
        "id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    ),
    Column("at_ts", BigInteger, nullable=False),  # epoch milliseconds
    Column("repo", String, nullable=False),
    Column("kind", String, nullable=False),
    Column("actor", String, nullable=False),
    Column("ref", String, nullable=True),  # "#7", "tag v1.2"
    Column("plan_id", String, nullable=True),
    Column("outcome", String, nullable=False),
    Column("detail", Text, nullable=False),
    # The actor's forge account id, where the row's decision compares people (a drift
    # repair's requests and approvals): a login can be renamed, an id never. None: another
    # kind of row, a row written before migration 2, or an actor known by login only.
    Column("actor_id", BigInteger, nullable=True),
)
Index("ix_sluice_audit_repo_ts", entries_table.c.repo, entries_table.c.at_ts)


def _actor_id(conn: Connection) -> None:
    # Migration 1 makes the table as declared now: add the column only where missing.
    if "actor_id" not in {c["name"] for c in inspect(conn).get_columns(entries_table.name)}:
        conn.exec_driver_sql(f"ALTER TABLE {entries_table.name} ADD COLUMN actor_id BIGINT")


AUDIT = Track(
    name="audit",
    tables=metadata,
    migrations=(
        Migration(1, "the audit log", create_tables(entries_table)),
        Migration(2, "who acted, by the forge's account id", _actor_id),
    ),
)
"""The audit log's track of migrations (after the ledger's)."""

# Forge tokens of known shapes (GitHub's classic and fine-grained, GitLab's), masked even
# when the service was not told of them: a PR's text is no place for one, and a log of it
# is read by more people than the PR.
_TOKENS = re.compile(
    r"(gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,}|glpat-[A-Za-z0-9_\-]{16,})"
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2066-\u2069]+")
MASK = "***"


def bounded(text: str | None, limit: int) -> str:
    """``text`` as a row holds it: tokens masked, control characters (line breaks and
    bidirectional overrides too) as one space, cut to ``limit`` characters (an ellipsis
    says it was cut).

    >>> bounded("ok\\n\\x1b[31mred ghp_" + "a" * 36, 40)
    'ok [31mred ***'
    >>> bounded("x" * 10, 5)
    'xxxx…'
    """
    text = _CONTROL.sub(" ", _TOKENS.sub(MASK, text or "")).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class Entry:
    """One row of the audit log."""

    at: int
    """Epoch milliseconds."""
    repo: str
    kind: str
    actor: str
    outcome: str
    ref: str | None = None
    plan_id: str | None = None
    detail: str = ""
    id: int | None = None
    """Its place in the log (None before it is appended)."""
    actor_id: int | None = None
    """The actor's forge account id, where the forge said (drift repair rows)."""

    def to_json(self) -> dict[str, Any]:
        """The row as ``sluice audit --json`` prints it (stable keys, this order)."""
        return {
            "id": self.id,
            "time": datetime.fromtimestamp(self.at / 1000, tz=UTC).isoformat(
                timespec="milliseconds"
            ),
            "at_ms": self.at,
            "repo": self.repo,
            "kind": self.kind,
            "actor": self.actor,
            "ref": self.ref,
            "plan_id": self.plan_id,
            "outcome": self.outcome,
            "detail": self.detail,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Entry:
        """The row :meth:`to_json` printed."""
        return cls(
            at=int(data["at_ms"]),
            repo=str(data["repo"]),
            kind=str(data["kind"]),
            actor=str(data["actor"]),
            outcome=str(data["outcome"]),
            ref=data["ref"],
            plan_id=data["plan_id"],
            detail=str(data["detail"]),
            id=data["id"],
        )


class AuditLog(Transactions):
    """Appends to and reads the audit log on a bound state engine (the ledger's: see
    :class:`~sluice.bot.flow.ledger.Ledger`, which migrates :data:`AUDIT`)."""

    def append(self, entry: Entry, *, once: bool = False) -> bool:
        """Append ``entry`` (bounded here); whether it was written. ``once``: not when a
        row of the repository with its kind, reference and outcome is there already (a
        decision every job takes again, told once). See the module docstring for what a
        failure does.

        Raises:
            StateError: only inside a transaction the caller opened (``together``).
        """
        row = {
            "at_ts": entry.at,
            "repo": bounded(entry.repo, NAME_LIMIT * 3),
            "kind": bounded(entry.kind, NAME_LIMIT),
            "actor": bounded(entry.actor, NAME_LIMIT) or "?",
            "ref": bounded(entry.ref, NAME_LIMIT) if entry.ref else None,
            "plan_id": bounded(entry.plan_id, NAME_LIMIT) if entry.plan_id else None,
            "outcome": bounded(entry.outcome, NAME_LIMIT),
            "detail": bounded(entry.detail, DETAIL_LIMIT),
            "actor_id": entry.actor_id,
        }
        inside = getattr(self._shared, "conn", None) is not None
        try:
            with self._writing("append to the audit log") as conn:
                if once and _found(conn, row):
                    return False
                conn.execute(insert(entries_table).values(row))
        except StateError as exc:
            if inside:
                raise  # the decision's own transaction fails with its record
            log.error(
                "%s: the audit log lost a row (%s %s by %s: %s): %s",
                row["repo"],
                row["kind"],
                row["outcome"],
                row["actor"],
                row["ref"] or "-",
                exc,
            )
            return False
        return True

    def entries(
        self,
        *,
        repo: str | None = None,
        since: int | None = None,
        offset: int = 0,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[Entry]:
        """Rows of ``repo`` (None: every repository's) appended at or after ``since``
        (epoch ms), in the order they were appended (``newest_first``: the other way)."""
        query = select(entries_table)
        if repo is not None:
            query = query.where(entries_table.c.repo == repo)
        if since is not None:
            query = query.where(entries_table.c.at_ts >= since)
        order = entries_table.c.id.desc() if newest_first else entries_table.c.id
        query = query.order_by(order).offset(offset)
        if limit is not None:
            query = query.limit(limit)
        with self._reading("read the audit log") as conn:
            return [
                Entry(
                    at=int(r.at_ts),
                    repo=r.repo,
                    kind=r.kind,
                    actor=r.actor,
                    outcome=r.outcome,
                    ref=r.ref,
                    plan_id=r.plan_id,
                    detail=r.detail,
                    id=int(r.id),
                    actor_id=None if r.actor_id is None else int(r.actor_id),
                )
                for r in conn.execute(query)
            ]

    def appended(self, repo: str, kind: str, ref: str, outcome: str) -> bool:
        """Whether ``repo`` has a row of ``kind`` with this reference and outcome (the test
        :meth:`append`'s ``once`` makes), the reference bounded as rows hold it."""
        row = {
            "repo": bounded(repo, NAME_LIMIT * 3),
            "kind": bounded(kind, NAME_LIMIT),
            "ref": bounded(ref, NAME_LIMIT) if ref else None,
            "outcome": bounded(outcome, NAME_LIMIT),
        }
        with self._reading("read the audit log") as conn:
            return _found(conn, row)

    def policy_overrides(self, repo: str, plan_id: str) -> list[Entry]:
        """The ``policy override`` rows of ``repo`` for the plan ``plan_id`` (a review's
        fingerprint), oldest first: the row is the override's only record, so it is
        written or the override is not given (:func:`sluice.bot.flow.policies.override`)."""
        return self.plan_entries(repo, POLICY_OVERRIDE, plan_id)

    def plan_entries(self, repo: str, kind: str, plan_id: str) -> list[Entry]:
        """The rows of ``repo`` of ``kind`` about the plan ``plan_id``, oldest first."""
        t = entries_table
        query = (
            select(t)
            .where(t.c.repo == bounded(repo, NAME_LIMIT * 3))
            .where(t.c.kind == kind, t.c.plan_id == bounded(plan_id, NAME_LIMIT))
            .order_by(t.c.id)
        )
        with self._reading("read the audit log") as conn:
            rows = conn.execute(query).all()
        return [
            Entry(
                int(r.at_ts), r.repo, r.kind, r.actor, r.outcome, r.ref, r.plan_id, r.detail,
                int(r.id), None if r.actor_id is None else int(r.actor_id),
            )
            for r in rows
        ]  # fmt: skip

    def audit_count(self, repo: str | None = None) -> int:
        """How many rows ``repo`` (None: every repository) has."""
        query = select(func.count()).select_from(entries_table)
        if repo is not None:
            query = query.where(entries_table.c.repo == repo)
        with self._reading("count the audit log") as conn:
            return int(conn.execute(query).scalar_one())


def _found(conn: Connection, row: dict[str, Any]) -> bool:
    t = entries_table
    ref = t.c.ref.is_(None) if row["ref"] is None else t.c.ref == row["ref"]
    query = select(t.c.id).where(
        t.c.repo == row["repo"], t.c.kind == row["kind"], t.c.outcome == row["outcome"], ref
    )
    return conn.execute(query.limit(1)).first() is not None


def record(
    job: Job,
    kind: str,
    outcome: str,
    *,
    actor: str = SERVICE,
    actor_id: int | None = None,
    ref: str | None = None,
    plan_id: str | None = None,
    detail: str = "",
    once: bool = False,
    notify: str | None = None,
) -> bool:
    """Append a decision of ``job``'s repository, now, its text scrubbed by the job's
    redactor (secrets, host paths) before :meth:`AuditLog.append` bounds it (``once``:
    see there). ``notify``: the event (:data:`~sluice.bot.present.notify_text.EVENTS`) the
    row is also told in chat as, when the job ends (:mod:`sluice.bot.flow.notify`), if
    the row was written; keyed by the row (with ``once``, by its reference and outcome)."""
    entry = Entry(
        at=job.now,
        repo=job.repo,
        kind=kind,
        actor=job.scrub(actor),
        outcome=job.scrub(outcome),
        ref=job.scrub(ref) if ref else None,
        plan_id=plan_id,
        detail=job.scrub(detail),
        actor_id=actor_id,
    )
    written = job.ledger.append(entry, once=once)
    if written and notify is not None:
        key = f"{entry.ref or '-'} {entry.outcome} {plan_id or '-'}"
        job.tell(
            Notice(
                notify,
                key=key if once else f"{key} {job.now}",
                repo=job.forge.repo,
                what=entry.outcome,
                ref=entry.ref or "",
                actor=entry.actor,
                plan_id=plan_id or "",
                detail=entry.detail,
            )
        )
    return written
