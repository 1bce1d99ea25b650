"""The webhook service's durable job queue, kept in the state database.

A webhook delivery is stored with the job it asks for in one transaction, so the service
can answer at once and a restart loses nothing; a delivery id seen before is refused
(GitHub redelivers). Workers, threads of one process or of several processes sharing a
PostgreSQL state, take jobs with :meth:`JobQueue.claim`.

Ordering and exclusion: jobs of one *key* (one pull request, or a repository's prod; see
:func:`sluice.bot.events.neutral.pr_key`, the repository's name in it replaced by its
namespace key when the queue is given ``namespaces``: a renamed repository's jobs under its
old and new names share their keys) run one at a time, oldest first; across keys the
fairness rule (:mod:`sluice.bot.queue.fairness`) picks which ready job goes first. The exclusion does not rely on isolation levels: every key has a
row in ``sluice_job_keys`` naming the job running for it, and a claim takes the key with a
conditional ``UPDATE ... WHERE running_job_id IS NULL`` whose row count says whether it
won. A job is running exactly while its key row names it.

A claimed job holds a lease that the worker renews (:meth:`JobQueue.heartbeat`). When a
worker dies its lease runs out and :meth:`JobQueue.recover` puts the job back, or fails it
for good once it has used all its attempts.

Times are epoch seconds (floats) passed in by the caller, so tests need no clock; they are
stored as epoch milliseconds in BIGINT columns like the rest of the state.

The tables and records are in :mod:`sluice.bot.queue.schema`, a batch on its way in in
:mod:`sluice.bot.queue.batch`, PostgreSQL's batch function in :mod:`sluice.bot.queue.pg`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from typing import Any, TypeVar

from sqlalchemy import (
    Connection,
    Table,
    and_,
    bindparam,
    delete,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Row, RowMapping
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from sluice.bot.events.neutral import KEY_MARKS
from sluice.bot.queue import fairness, pg
from sluice.bot.queue.batch import Batch, ms
from sluice.bot.queue.retry import TRANSIENT_TRIES, backoff, try_again
from sluice.bot.queue.schema import (
    QUEUE,
    Delivery,
    Job,
    JobRecord,
    JobStatus,
    NewJob,
    deliveries,
    job_keys,
    jobs,
    leases,
)
from sluice.core.db.documents import load_json
from sluice.core.db.engine import create_state_engine, driver_message, state_connect_args
from sluice.core.db.migrate import migrate
from sluice.core.db.transactions import CONNECT_HINT, Transactions
from sluice.core.errors import StateError
from sluice.core.state.migrations import STATE

__all__ = ["Delivery", "Job", "JobQueue", "JobRecord", "JobStatus", "NewJob"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

Namespaces = Callable[[Sequence[tuple[str, int | None]]], Mapping[tuple[str, int | None], str]]
"""(``forge:owner/name``, forge id) pairs -> the key each one's jobs run under."""


class _Again(Enum):
    """A claim round lost every candidate to other claimers: look again."""

    AGAIN = 0


# Jobs a claim tries per round, best first: a few, so that losing the race for the best
# one to another claimer can fall through to the next without a new round trip.
_CANDIDATES = 8
# Ready jobs (one per key) the fairness rule chooses among, oldest first: with more keys
# waiting than this, the newest wait for a later claim.
_READY = 256
# PostgreSQL: claims serialise on this transaction lock (arbitrary, fixed; not the
# migration runner's).
_PG_CLAIM_LOCK = int.from_bytes(b"sluiceCL", "big")
_CLAIM_ROUNDS = 20
# PostgreSQL deadlock / serialization failure: the transaction is safe to run again.
_ABANDONED = "the worker stopped renewing the job's lease (it probably died)"


class JobQueue(Transactions):
    """The durable queue on the state database at ``url`` (SQLite or PostgreSQL).

    Migrates the state's and the queue's tables (:data:`~sluice.bot.queue.schema.QUEUE`)
    first, in one run of the migration runner. Thread-safe: every method is one transaction
    on a pooled connection.

    Args:
        url: The state database URL, as for :func:`sluice.core.state.sql.open_state`.
        max_attempts: Attempts a job gets (first run included) before it fails for good.
        lease_seconds: How long a claim or heartbeat keeps a job its worker's.
        retry_seconds: A failed attempt's job waits about this long before its next
            attempt, twice as long after each further failure (at most
            :data:`~sluice.bot.queue.retry.RETRY_CAP_SECONDS`), each wait drawn from half to one and a half times
            that (jitter), so a forge that is down is not hammered by every job at once.
        caps: How many jobs may run at once, in all and per repository
            (:class:`~sluice.bot.queue.fairness.Caps`; the service's
            ``SLUICE_QUEUE_MAX_RUNNING`` and ``SLUICE_QUEUE_MAX_RUNNING_PER_REPOSITORY``).
        namespaces: (``forge:owner/name``, forge id) pairs -> the key their jobs run under
            (the service's: :meth:`sluice.bot.flow.ledger.Ledger.queue_keys`, the
            repository's namespace key): a job's key is its event's (``pr_key``) with the
            repository's name replaced by it when stored, so jobs under a renamed
            repository's old and new names run one at a time. None: keys as given.

    Raises:
        StateError: The URL is invalid, the database unreachable, or the tables cannot be
            created.
    """

    def __init__(
        self,
        url: str,
        *,
        max_attempts: int = 3,
        lease_seconds: float = 900.0,
        retry_seconds: float = 0.0,
        caps: fairness.Caps | None = None,
        namespaces: Namespaces | None = None,
    ) -> None:
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, not {max_attempts}")
        if lease_seconds <= 0:
            raise ValueError(f"lease_seconds must be positive, not {lease_seconds}")
        if retry_seconds < 0:
            raise ValueError(f"retry_seconds must not be negative, not {retry_seconds}")
        self.max_attempts = max_attempts
        self.lease_seconds = lease_seconds
        self.retry_seconds = retry_seconds
        self.caps = caps or fairness.Caps()
        self.namespaces = namespaces
        # Called after a commit that queued work (see on_work): this process's idle
        # workers start it at once instead of at their next poll.
        self._listeners: list[Callable[[], None]] = []
        self.bind(create_state_engine(url))
        try:
            migrate(self._engine, [STATE, QUEUE])
        except BaseException as exc:
            self._engine.dispose()
            if isinstance(exc, SQLAlchemyError):
                raise StateError(
                    f"cannot open the job queue in state database {self._where}: "
                    f"{driver_message(exc, self._engine.url)}",
                    hint=CONNECT_HINT,
                ) from exc
            raise

    def close(self) -> None:
        """Close the queue's database connections."""
        self._engine.dispose()

    def on_work(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` (from any thread; it must not block) after each commit of this
        object that queued a job; the function that stops it. Workers of other processes
        sharing the database still find the job at their next poll."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def _queued(self, outcome: list[bool]) -> list[bool]:
        if any(outcome):
            for listener in list(self._listeners):
                listener()
        return outcome

    # -- producer ---------------------------------------------------------------------------

    def accept(
        self, delivery_id: str, forge: str, event: str, job: NewJob | None, now: float
    ) -> bool:
        """Store a delivery and, when given, its job, in one transaction.

        Returns:
            False, storing nothing, when the delivery id was stored before (also when two
            copies race: the unique key decides).
        """
        return self.accept_many([Delivery(delivery_id, forge, event, job, now)])[0]

    def accept_many(self, batch: Sequence[Delivery]) -> list[bool]:
        """Store deliveries and their jobs in one transaction (one commit for them all).

        The outcome is the same as calling :meth:`accept` for each delivery in turn, in the
        order given (their arrival order): a delivery id stored before, or earlier in the
        batch, is refused and stores nothing; jobs get ids in that order, so they run in
        it; and a superseding job supersedes the queued jobs of its key and kind that came
        before it, batch included, but none that come after it.

        Returns:
            For each delivery, in order, whether it was fresh (stored) or a duplicate.

        Raises:
            StateError: The transaction failed; nothing of the batch is stored.
        """
        if not batch:
            return []
        ready = Batch(self._keyed(batch))
        rows = [
            {
                "delivery_id": d.delivery_id,
                "forge": d.forge,
                "event": d.event,
                "received_ts": ms(d.now),
            }
            for d in ready.unique
        ]

        def run(conn: Connection) -> set[str]:
            found = conn.execute(
                _insert_if_absent(conn, deliveries).returning(deliveries.c.delivery_id), rows
            )
            stored = set(found.scalars())
            fresh = [d for d in ready.unique if d.job is not None and d.delivery_id in stored]
            if fresh:
                self._enqueue(conn, fresh, ready.payloads)
            return stored

        if self._engine.dialect.name == "postgresql":
            params = {"rows": ready.server_rows()}

            def call(conn: Connection) -> list[Row[Any]]:
                return list(conn.execute(pg.CALL, params))

            return self._queued(
                ready.outcome(self._write(f"store {ready.what}", call, autocommit=True))
            )
        stored = self._write(f"store {ready.what}", run)
        return self._queued(ready.outcome({(d, None, 0) for d in stored}))

    def async_engine(self) -> AsyncEngine | None:
        """An engine for :meth:`accept_many_async` on the running event loop (PostgreSQL;
        None on SQLite). The caller disposes of it."""
        if self._engine.dialect.name != "postgresql":
            return None
        # No pre-ping (a round trip per batch): a connection found dead is replaced and the
        # call made again (accept_many_async). Autocommit set once, here: the one call is
        # atomic, and switching each pooled connection to it and back cost the service
        # 1.5-1.7 ms of CPU per batch of 25 instead of 1.4-1.6 (alternated runs).
        return create_async_engine(
            self._engine.url,
            pool_pre_ping=False,
            isolation_level="AUTOCOMMIT",
            connect_args=state_connect_args(self._engine.url),
        )

    async def accept_many_async(
        self, batch: Sequence[Delivery], engine: AsyncEngine | None
    ) -> list[bool]:
        """:meth:`accept_many` without blocking the event loop: on PostgreSQL (``engine``
        from :meth:`async_engine`) one awaited call of the server-side function, on SQLite
        (``engine`` None) :meth:`accept_many` in a worker thread.

        Raises:
            StateError: The call failed; nothing of the batch is stored.
        """
        if engine is None:
            return await asyncio.to_thread(self.accept_many, batch)
        if not batch:
            return []
        if self.namespaces is not None:
            batch = await asyncio.to_thread(self._keyed, batch)
        ready = Batch(batch)
        action = f"store {ready.what}"
        params = {"rows": ready.server_rows()}
        for attempt in range(1, TRANSIENT_TRIES + 1):
            try:
                with self._errors(action):
                    async with engine.connect() as conn:
                        found = list(await conn.execute(pg.CALL, params))
                    return self._queued(ready.outcome(found))
            except StateError as exc:
                # A dead pooled connection (the server restarted or closed it) is discarded by
                # SQLAlchemy: try again on a new one. The call is atomic, and a delivery it
                # stored before the connection died is then answered as a duplicate.
                try_again(exc, attempt, action, reconnect=True)
        raise AssertionError("unreachable")  # pragma: no cover

    def _keyed(self, batch: Sequence[Delivery]) -> Sequence[Delivery]:
        """``batch`` with each job's key under its repository's namespace key
        (``namespaces``, one read for the batch): a key is the repository's name, one of
        :data:`~sluice.bot.events.neutral.KEY_MARKS`, then the rest, the name replaced."""
        if self.namespaces is None:
            return batch
        named = {d.delivery_id: _named(d.job) for d in batch if d.job is not None}
        wanted = {pair for pair in named.values() if pair is not None}
        if not wanted:
            return batch
        keys = self.namespaces(sorted(wanted, key=lambda p: (p[0], p[1] or 0)))
        keyed = []
        for d in batch:
            pair = named.get(d.delivery_id)
            base = keys.get(pair) if pair is not None else None
            if d.job is None or pair is None or base is None or base == pair[0]:
                keyed.append(d)
                continue
            job = dataclasses.replace(d.job, key=base + d.job.key[len(pair[0]) :])
            keyed.append(dataclasses.replace(d, job=job))
        return keyed

    def _enqueue(self, conn: Connection, fresh: list[Delivery], payloads: dict[str, str]) -> None:
        """SQLite: queue the jobs of freshly stored deliveries, in order; supersede what
        they moot. A fixed number of statements whatever the batch size, each an
        executemany (a loop in C). PostgreSQL does the same in its server-side function
        (:mod:`sluice.bot.queue.pg`), whose docstring the steps here follow.
        """
        news = [(d, d.job) for d in fresh if d.job is not None]
        # Create the key rows (SQLite's write lock already serialises batches; on
        # PostgreSQL this upsert takes the key rows' locks, sorted).
        keep = {"running_job_id": job_keys.c.running_job_id}
        conn.execute(
            _upsert(conn, job_keys).on_conflict_do_update(
                index_elements=[job_keys.c.key], set_=keep
            ),
            [{"key": key, "running_job_id": None} for key in sorted({job.key for _, job in news})],
        )
        # Job ids follow the batch's order (the rowid is drawn in it), so the jobs run in
        # arrival order.
        ids = list(
            conn.execute(
                insert(jobs).returning(jobs.c.id, sort_by_parameter_order=True),
                [
                    {
                        "delivery_id": d.delivery_id,
                        "key": job.key,
                        "kind": job.kind,
                        "payload": payloads[d.delivery_id],
                        "head_sha": job.head_sha,
                        "status": JobStatus.QUEUED,
                        "attempts": 0,
                        "created_ts": ms(d.now),
                    }
                    for d, job in news
                ],
            ).scalars()
        )
        conn.execute(
            update(deliveries)
            .where(deliveries.c.delivery_id == bindparam("b_delivery"))
            .values(job_id=bindparam("b_job")),
            [
                {"b_delivery": d.delivery_id, "b_job": new_id}
                for (d, _), new_id in zip(news, ids, strict=True)
            ],
        )
        superseding = [
            (new_id, job, ms(d.now))
            for (d, job), new_id in zip(news, ids, strict=True)
            if job.supersede
        ]
        if superseding:
            self._supersede(conn, superseding)

    def _supersede(self, conn: Connection, superseding: list[tuple[int, NewJob, int]]) -> None:
        """Mark superseded what each superseding job (id, job, time) moots, as if in turn.

        Each one, in id order, supersedes the queued jobs of its key and kind that came
        before it (lower id) for another head, and that nothing before it superseded.
        """
        keys = sorted({job.key for _, job, _ in superseding})
        queued: dict[tuple[str, str], list[tuple[int, str | None]]] = {}
        for job_id, key, kind, head in conn.execute(_QUEUED_OF_KEYS, {"keys": keys}):
            queued.setdefault((key, kind), []).append((int(job_id), head))
        moot: dict[int, tuple[int, int, str]] = {}  # job id -> (superseding id, time, error)
        for new_id, job, at in sorted(superseding, key=lambda s: s[0]):
            for job_id, head in queued.get((job.key, job.kind), []):
                if job_id < new_id and job_id not in moot and head != job.head_sha:
                    moot[job_id] = (new_id, at, f"superseded by job {new_id} (head {job.head_sha})")
        if not moot:
            return
        conn.execute(
            _SUPERSEDE,
            [
                {"b_id": job_id, "b_at": at, "b_error": error}
                for job_id, (_, at, error) in moot.items()
            ],
        )
        by: dict[int, int] = {}
        for new_id, _, _ in moot.values():
            by[new_id] = by.get(new_id, 0) + 1
        for new_id, count in by.items():
            logger.info("job %s superseded %d queued job(s)", new_id, count)

    # -- consumer ---------------------------------------------------------------------------

    def claim(self, worker: str, now: float) -> Job | None:
        """Take the next ready job for ``worker``, by the fairness rule
        (:mod:`sluice.bot.queue.fairness`: promotions first, round-robin across
        repositories, the caps, a slot kept for promotions, one background job at a time).

        A job is ready when it is the oldest queued job of its key, its key runs nothing,
        and it is due. The job becomes running with a lease of ``lease_seconds`` from
        ``now``, and its attempt count goes up by one. Concurrent claimers (threads or
        processes) never get the same job, nor two jobs of one key; on PostgreSQL claims
        take turns (a transaction lock), so the caps hold across service processes too.

        Returns:
            The job, or None when no job may start.
        """
        at = ms(now)
        values = {
            "status": JobStatus.RUNNING,
            "attempts": jobs.c.attempts + 1,
            "started_ts": at,
            "finished_ts": None,
            "lease_until": at + ms(self.lease_seconds),
            "worker": worker,
            "not_before": None,
        }
        # Only the oldest queued job of a key may run next, and only once it is due: a
        # retried job waiting for its next attempt holds the jobs of its key behind it.
        earlier = jobs.alias("earlier")
        ahead = (
            select(earlier.c.id)
            .where(
                earlier.c.key == jobs.c.key,
                earlier.c.status == JobStatus.QUEUED,
                earlier.c.id < jobs.c.id,
            )
            .exists()
        )
        due = or_(jobs.c.not_before.is_(None), jobs.c.not_before <= at)
        candidates = (
            select(jobs.c.id, jobs.c.key, jobs.c.kind)
            .select_from(jobs.join(job_keys, job_keys.c.key == jobs.c.key))
            .where(
                jobs.c.status == JobStatus.QUEUED,
                job_keys.c.running_job_id.is_(None),
                due,
                ~ahead,
            )
            .order_by(jobs.c.id)
            .limit(_READY)
        )
        running = select(jobs.c.key, jobs.c.kind).where(jobs.c.status == JobStatus.RUNNING)
        caps = self.caps

        def run(conn: Connection) -> Job | _Again | None:
            """The claimed job; None when nothing may start; AGAIN to look again."""
            if conn.dialect.name == "postgresql":
                # Claims take turns, so two processes never both see a slot free.
                conn.execute(select(func.pg_advisory_xact_lock(_PG_CLAIM_LOCK)))
            ready = [fairness.Ready(int(i), k, kind) for i, k, kind in conn.execute(candidates)]
            if not ready:
                return None
            now_running = [fairness.Running(k, kind) for k, kind in conn.execute(running)]
            order = fairness.startable(ready, now_running, caps)
            if not order:
                return None
            lost: set[str] = set()
            for job_id, key in ((r.id, r.key) for r in order[:_CANDIDATES]):
                if key in lost:
                    continue
                # Take the key: fails when another claimer got it since the select.
                took = conn.execute(
                    update(job_keys)
                    .where(job_keys.c.key == key, job_keys.c.running_job_id.is_(None))
                    .values(running_job_id=job_id)
                ).rowcount
                if took != 1:
                    lost.add(key)
                    continue
                # Then the job: fails when it stopped being queued since the select (run
                # and finished by another claimer, or superseded).
                row = (
                    conn.execute(
                        update(jobs)
                        .where(jobs.c.id == job_id, jobs.c.status == JobStatus.QUEUED)
                        .values(values)
                        .returning(*jobs.c)
                    )
                    .mappings()
                    .first()
                )
                if row is not None:
                    return self._job(row)
                conn.execute(
                    update(job_keys)
                    .where(job_keys.c.key == key, job_keys.c.running_job_id == job_id)
                    .values(running_job_id=None)
                )
            return _Again.AGAIN  # every candidate went to others

        for _ in range(_CLAIM_ROUNDS):
            outcome = self._write("claim a job", run)
            if not isinstance(outcome, _Again):
                if outcome is not None:
                    logger.debug("worker %s claimed job %s (%s)", worker, outcome.id, outcome.key)
                return outcome
        # Others keep winning: they are making progress, and this worker polls again.
        return None

    def newer_heads(self, job: Job) -> list[tuple[int, str | None, dict[str, Any]]]:
        """The queued jobs of ``job``'s key and kind that came after it for another head
        commit, oldest first, at most a few: (id, head, payload). A running build one of
        them supersedes (:func:`sluice.bot.events.neutral.supersedes` of its event) is
        stopped by its worker (:mod:`sluice.bot.queue.worker`)."""
        query = (
            select(jobs.c.id, jobs.c.head_sha, jobs.c.payload)
            .where(
                jobs.c.key == job.key,
                jobs.c.kind == job.kind,
                jobs.c.status == JobStatus.QUEUED,
                jobs.c.id > job.id,
            )
            .order_by(jobs.c.id)
            .limit(_CANDIDATES)
        )
        with self._reading(f"read the jobs after job {job.id}") as conn:
            rows = conn.execute(query).all()
        return [
            (int(i), head, load_json(payload, dict, f"job {i}", self._where))
            for i, head, payload in rows
            if head != job.head_sha
        ]

    def heartbeat(self, job_id: int, worker: str, now: float) -> bool:
        """Extend the job's lease to ``lease_seconds`` from ``now``.

        Returns:
            False when the job is no longer running for ``worker`` (its lease ran out and
            it was recovered, perhaps claimed by another worker): stop working on it.
        """
        lease = ms(now) + ms(self.lease_seconds)

        def run(conn: Connection) -> bool:
            renewed = conn.execute(
                update(jobs).where(*_held(job_id, worker)).values(lease_until=lease)
            ).rowcount
            return bool(renewed == 1)

        return self._write(f"renew the lease of job {job_id}", run)

    def finish(
        self,
        job_id: int,
        worker: str,
        *,
        error: str | None = None,
        now: float,
        superseded: bool = False,
    ) -> bool:
        """End a running job: done when ``error`` is None, else failed, or superseded (it
        was stopped for a newer head; ``error`` says which); frees its key.

        Returns:
            False (changing nothing) when the job is no longer running for ``worker``.
        """
        status = JobStatus.DONE if error is None else JobStatus.FAILED
        if superseded:
            status = JobStatus.SUPERSEDED
        values = {"status": status, "finished_ts": ms(now), "lease_until": None, "error": error}
        return self._write(
            f"finish job {job_id}", lambda conn: self._release(conn, job_id, worker, values)
        )

    def retry(self, job_id: int, worker: str, error: str, now: float) -> bool:
        """After a failed attempt: back to the queue if attempts remain, else failed.

        The job keeps its place: it is the next of its key to run, once its wait
        (``retry_seconds``, doubled per further attempt, with jitter) is over.

        Returns:
            True when the job was queued again; False when it failed for good (or was no
            longer running for ``worker``, in which case nothing changed).
        """
        at = ms(now)

        def run(conn: Connection) -> bool:
            attempts = conn.execute(
                select(jobs.c.attempts).where(*_held(job_id, worker))
            ).scalar_one_or_none()
            if attempts is None:
                return False
            again = attempts < self.max_attempts
            values: dict[str, Any] = {"lease_until": None, "error": error}
            if again:
                wait = backoff(self.retry_seconds, attempts)
                due = at + ms(wait) if wait > 0 else None
                values.update(status=JobStatus.QUEUED, worker=None, not_before=due)
            else:
                values.update(status=JobStatus.FAILED, finished_ts=at)
            return self._release(conn, job_id, worker, values) and again

        return self._write(f"retry job {job_id}", run)

    def release(self, job_id: int, worker: str, reason: str) -> bool:
        """Put a job ``worker`` is running back in the queue, keeping its place, ready at
        once and without counting the attempt: its service is stopping before the job
        could finish (the drain ran out), so the job runs again on the next start, or on
        another service process.

        Returns:
            False (changing nothing) when the job is no longer running for ``worker``.
        """
        values = {
            "status": JobStatus.QUEUED,
            "attempts": jobs.c.attempts - 1,
            "worker": None,
            "lease_until": None,
            "not_before": None,
            "error": reason,
        }
        return self._write(
            f"release job {job_id}", lambda conn: self._release(conn, job_id, worker, values)
        )

    def recover(self, now: float) -> list[Job]:
        """Put back running jobs whose lease ran out (their worker died).

        A job with attempts left is queued again (keeping its place); one without fails.
        Call at service start and periodically.

        Returns:
            The jobs that just failed for good, so the caller can report them.
        """
        at = ms(now)
        expired = (jobs.c.status == JobStatus.RUNNING, jobs.c.lease_until < at)

        def run(conn: Connection) -> list[Job]:
            failed = (
                conn.execute(
                    update(jobs)
                    .where(*expired, jobs.c.attempts >= self.max_attempts)
                    .values(
                        status=JobStatus.FAILED, finished_ts=at, lease_until=None, error=_ABANDONED
                    )
                    .returning(*jobs.c)
                )
                .mappings()
                .all()
            )
            requeued = conn.execute(
                update(jobs)
                .where(*expired, jobs.c.attempts < self.max_attempts)
                .values(status=JobStatus.QUEUED, worker=None, lease_until=None, error=_ABANDONED)
                .returning(jobs.c.id, jobs.c.key)
            ).all()
            freed = [(row["id"], row["key"]) for row in failed] + [(i, k) for i, k in requeued]
            if freed:
                conn.execute(
                    update(job_keys)
                    .where(
                        job_keys.c.key.in_([k for _, k in freed]),
                        job_keys.c.running_job_id.in_([i for i, _ in freed]),
                    )
                    .values(running_job_id=None)
                )
                logger.warning(
                    "recovered %d abandoned job(s); %d failed for good", len(freed), len(failed)
                )
            return [self._job(row) for row in failed]

        return self._write("recover abandoned jobs", run)

    def purge(self, now: float, keep_seconds: float) -> tuple[int, int]:
        """Forget finished jobs, and deliveries, older than ``keep_seconds``: (jobs,
        deliveries) deleted. Queued and running jobs are kept whatever their age, and so are
        the deliveries that carried them. A delivery forgotten this way would be accepted
        again if the forge sent it again, so keep well over the forge's redelivery window.
        """
        cutoff = ms(now - keep_seconds)
        finished = (JobStatus.DONE, JobStatus.FAILED, JobStatus.SUPERSEDED)

        def run(conn: Connection) -> tuple[int, int]:
            gone = conn.execute(
                delete(jobs).where(jobs.c.status.in_(finished), jobs.c.finished_ts < cutoff)
            ).rowcount
            live = select(jobs.c.id).where(jobs.c.id == deliveries.c.job_id)
            forgotten = conn.execute(
                delete(deliveries).where(deliveries.c.received_ts < cutoff, ~live.exists())
            ).rowcount
            return int(gone), int(forgotten)

        return self._write("purge old jobs and deliveries", run)

    # -- leases -----------------------------------------------------------------------------

    def take_lease(self, name: str, holder: str, now: float, seconds: float) -> bool:
        """Take the lease ``name`` for ``holder`` until ``seconds`` from ``now``, or renew
        it: one statement (an upsert whose update applies only when ``holder`` holds the
        lease already or it expired), so two takers at once cannot both win, on SQLite
        (one writer at a time) as on PostgreSQL (the row's lock; the condition is checked
        again on the row as committed).

        Returns:
            Whether ``holder`` holds the lease now (False: another holder's has not
            expired).
        """
        until = ms(now) + ms(seconds)

        def run(conn: Connection) -> bool:
            insert_ = _upsert(conn, leases).values(name=name, holder=holder, expires=until)
            taken = insert_.on_conflict_do_update(
                index_elements=[leases.c.name],
                set_={"holder": insert_.excluded.holder, "expires": insert_.excluded.expires},
                where=or_(leases.c.holder == holder, leases.c.expires < ms(now)),
            ).returning(leases.c.holder)
            return conn.execute(taken).scalar_one_or_none() == holder

        return self._write(f"take the {name} lease", run)

    def drop_lease(self, name: str, holder: str) -> bool:
        """Let go of the lease ``name`` if ``holder`` holds it (one statement); whether it
        did. Anyone may take it then, without waiting for it to expire."""
        gone = delete(leases).where(leases.c.name == name, leases.c.holder == holder)
        return self._write(f"let go of the {name} lease", lambda c: c.execute(gone).rowcount == 1)

    def lease_holder(self, name: str, now: float) -> tuple[str, float] | None:
        """Who holds the lease ``name`` at ``now`` and until when (epoch seconds); None
        when nobody does (never taken, let go, or expired)."""
        query = select(leases.c.holder, leases.c.expires).where(
            leases.c.name == name, leases.c.expires >= ms(now)
        )
        with self._reading(f"read the {name} lease") as conn:
            row = conn.execute(query).first()
        return None if row is None else (str(row.holder), row.expires / 1000)

    # -- inspection -------------------------------------------------------------------------

    def depth(self) -> int:
        """Jobs waiting to run."""
        query = select(func.count()).select_from(jobs).where(jobs.c.status == JobStatus.QUEUED)
        with self._reading("count queued jobs") as conn:
            return int(conn.execute(query).scalar_one())

    def counts(self) -> dict[str, int]:
        """Jobs by status (every status present, zero included)."""
        query = select(jobs.c.status, func.count()).group_by(jobs.c.status)
        found = dict.fromkeys((str(s) for s in JobStatus), 0)
        with self._reading("count jobs") as conn:
            for status, count in conn.execute(query):
                found[str(status)] = int(count)
        return found

    def oldest_wait(self, now: float) -> float:
        """Seconds the oldest queued job has waited (0.0 when none waits)."""
        query = select(func.min(jobs.c.created_ts)).where(jobs.c.status == JobStatus.QUEUED)
        with self._reading("read the oldest queued job") as conn:
            oldest = conn.execute(query).scalar_one_or_none()
        return 0.0 if oldest is None else max(0.0, now - oldest / 1000)

    def job(self, job_id: int) -> JobRecord | None:
        """Everything stored about one job, or None when there is no such job."""
        with self._reading(f"read job {job_id}") as conn:
            row = conn.execute(select(jobs).where(jobs.c.id == job_id)).mappings().first()
        return None if row is None else self._record(row)

    def jobs(self, *, status: JobStatus | None = None, limit: int = 50) -> list[JobRecord]:
        """The newest ``limit`` jobs (of ``status``, when given), newest first."""
        query = select(jobs).order_by(jobs.c.id.desc()).limit(limit)
        if status is not None:
            query = query.where(jobs.c.status == status.value)
        with self._reading("list jobs") as conn:
            rows = conn.execute(query).mappings().all()
        return [self._record(row) for row in rows]

    def _record(self, row: RowMapping) -> JobRecord:
        return JobRecord(
            job=self._job(row),
            status=JobStatus(row["status"]),
            worker=row["worker"],
            error=row["error"],
            started_ts=_seconds(row["started_ts"]),
            finished_ts=_seconds(row["finished_ts"]),
            lease_until=_seconds(row["lease_until"]),
            not_before=_seconds(row["not_before"]),
        )

    def page(
        self, repo: str, *, offset: int, limit: int, also: Sequence[str] = ()
    ) -> tuple[list[JobRecord], int]:
        """The jobs of repository ``repo`` (``forge:owner/name``; ``also``: its other
        names, a renamed repository's), newest first: ``limit`` of them from ``offset``,
        and how many there are (the web UI's list). Its own alone, matched exactly in the
        query (the key is a name then one of :data:`~sluice.bot.events.neutral.KEY_MARKS`),
        so neither page nor total counts a repository whose name merely starts the same."""
        mine = or_(
            *(
                and_(
                    func.substr(jobs.c.key, 1, len(name)) == name,
                    func.substr(jobs.c.key, len(name) + 1, 1).in_(KEY_MARKS),
                )
                for name in dict.fromkeys((repo, *also))
            )
        )
        query = select(jobs).where(mine).order_by(jobs.c.id.desc()).offset(offset).limit(limit)
        with self._reading("list jobs") as conn:
            rows = conn.execute(query).mappings().all()
            total = conn.execute(select(func.count()).select_from(jobs).where(mine)).scalar_one()
        return [self._record(row) for row in rows], int(total)

    def delivery_job(self, delivery_id: str) -> int | None:
        """The id of the job a stored delivery asked for (None: no job, or no delivery)."""
        query = select(deliveries.c.job_id).where(deliveries.c.delivery_id == delivery_id)
        with self._reading(f"read delivery {delivery_id!r}") as conn:
            job_id: int | None = conn.execute(query).scalar_one_or_none()
        return job_id

    # -- helpers ----------------------------------------------------------------------------

    def _release(self, conn: Connection, job_id: int, worker: str, values: dict[str, Any]) -> bool:
        """Move the worker's running job out of running and free its key."""
        key = conn.execute(
            update(jobs).where(*_held(job_id, worker)).values(values).returning(jobs.c.key)
        ).scalar_one_or_none()
        if key is None:
            logger.warning("job %s is no longer running for worker %s", job_id, worker)
            return False
        conn.execute(
            update(job_keys)
            .where(job_keys.c.key == key, job_keys.c.running_job_id == job_id)
            .values(running_job_id=None)
        )
        return True

    def _write(
        self, action: str, run: Callable[[Connection], _T], *, autocommit: bool = False
    ) -> _T:
        """``run`` in one write transaction, again when PostgreSQL asks (deadlock victim).

        ``autocommit``: ``run`` is one statement, its own transaction (no BEGIN, no COMMIT
        round trips).
        """
        for attempt in range(1, TRANSIENT_TRIES + 1):
            try:
                if autocommit:
                    with self._errors(action), self._writer.connect() as conn:
                        return run(conn.execution_options(isolation_level="AUTOCOMMIT"))
                with self._errors(action), self._writer.begin() as conn:
                    return run(conn)
            except StateError as exc:
                try_again(exc, attempt, action)
        raise AssertionError("unreachable")  # pragma: no cover

    def _job(self, row: RowMapping) -> Job:
        payload = load_json(row["payload"], dict, f"job {row['id']}", self._where)
        return Job(
            id=int(row["id"]),
            delivery_id=row["delivery_id"],
            key=row["key"],
            kind=row["kind"],
            payload=payload,
            head_sha=row["head_sha"],
            attempts=int(row["attempts"]),
            created_ts=row["created_ts"] / 1000,
        )


# The queued jobs of some keys, oldest first (for supersede).
_QUEUED_OF_KEYS = (
    select(jobs.c.id, jobs.c.key, jobs.c.kind, jobs.c.head_sha)
    .where(jobs.c.key.in_(bindparam("keys", expanding=True)), jobs.c.status == JobStatus.QUEUED)
    .order_by(jobs.c.id)
)
# Built once, plain UPDATE: SQLAlchemy compiles it once and caches it.
_SUPERSEDE = (
    update(jobs)
    .where(jobs.c.id == bindparam("b_id"), jobs.c.status == JobStatus.QUEUED)
    .values(status=JobStatus.SUPERSEDED, finished_ts=bindparam("b_at"), error=bindparam("b_error"))
)


def _named(job: NewJob | None) -> tuple[str, int | None] | None:
    """(``forge:owner/name``, forge id or None) of the event ``job`` is for, when its key
    starts with that name then one of :data:`~sluice.bot.events.neutral.KEY_MARKS` (every
    key ``pr_key`` makes); None otherwise (the key is kept as it is)."""
    if job is None:
        return None
    forge, repo, rid = job.payload.get("forge"), job.payload.get("repo"), job.payload.get("repo_id")
    if not isinstance(forge, str) or not isinstance(repo, str):
        return None
    name = f"{forge}:{repo}"
    if not job.key.startswith(name) or job.key[len(name) : len(name) + 1] not in KEY_MARKS:
        return None
    return name, rid if isinstance(rid, int) and not isinstance(rid, bool) else None


def _held(job_id: int, worker: str) -> tuple[Any, ...]:
    """The condition: the job is running for this worker."""
    return (jobs.c.id == job_id, jobs.c.worker == worker, jobs.c.status == JobStatus.RUNNING)


def _insert_if_absent(conn: Connection, table: Table) -> postgresql.Insert | sqlite.Insert:
    return _upsert(conn, table).on_conflict_do_nothing()


def _upsert(conn: Connection, table: Table) -> postgresql.Insert | sqlite.Insert:
    if conn.dialect.name == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)


def _seconds(ms: int | None) -> float | None:
    return None if ms is None else ms / 1000
