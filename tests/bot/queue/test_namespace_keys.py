"""Jobs are keyed by their repository's namespace, not by the name a delivery says: a
renamed repository's jobs under its old and new names run one at a time (one key), a
successor's (another forge id under a bound name) under a key of its own, which the
renamed repository's jobs page does not list. On SQLite and a real PostgreSQL, the
PostgreSQL batch function (the service's intake path) included."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.bot.flow.ledger import Ledger, QueueKeys
from sluice.bot.flow.ledger_schema import repositories
from sluice.bot.queue.store import Delivery, JobQueue, NewJob

OLD, NEW, UNCONFIRMED = "github:octo/warehouse", "github:octo/warehouse2", "github:octo/wh3"
ID, SUCCESSOR = 4242, 5151


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    found: str = request.getfixturevalue("fresh_postgres_url")
    return found


@pytest.fixture
def ledger(url: str) -> Iterator[Ledger]:
    """octo/warehouse bound to id 4242, renamed octo/warehouse2 (the forge confirmed it)."""
    made = Ledger(url)
    made.bind_repository(OLD, ID, 1_000)
    made.add_name(NEW, ID, OLD, 2_000)
    yield made
    made.close()


@pytest.fixture
def queue(url: str, ledger: Ledger) -> Iterator[JobQueue]:
    made = JobQueue(url, namespaces=ledger.queue_keys)
    yield made
    made.close()


def job(name: str, rest: str, repo_id: int | None) -> NewJob:
    """A job of the event of repository ``name`` (``forge:owner/name``) and ``repo_id``,
    keyed as ``pr_key`` keys it: the name, then ``rest``."""
    forge, _, repo = name.partition(":")
    payload: dict[str, Any] = {"forge": forge, "repo": repo, "repo_id": repo_id, "number": 7}
    return NewJob(key=name + rest, kind="pull_request", payload=payload)


def add(queue: JobQueue, delivery: str, new: NewJob) -> int:
    assert queue.accept(delivery, "github", new.kind, new, 100.0)
    job_id = queue.delivery_job(delivery)
    assert job_id is not None
    return job_id


def key_of(queue: JobQueue, job_id: int) -> str:
    record = queue.job(job_id)
    assert record is not None
    return record.job.key


def test_jobs_under_the_old_and_new_name_never_run_at_once(queue: JobQueue) -> None:
    # A scheduled job says no id; the new name's delivery says the id bound to the old.
    old = add(queue, "d-old", job(OLD, ":prod", None))
    new = add(queue, "d-new", job(NEW, ":prod", ID))
    assert key_of(queue, old) == key_of(queue, new) == f"{OLD}:prod"
    first = queue.claim("w1", 200.0)
    assert first is not None and first.id == old
    assert queue.claim("w2", 200.0) is None, "the new name's job ran beside the old name's"
    assert queue.finish(old, "w1", now=201.0)
    second = queue.claim("w2", 202.0)
    assert second is not None and second.id == new
    # The job runs as its event says: the payload keeps the name the delivery carried.
    assert second.payload["repo"] == "octo/warehouse2"


def test_a_rename_not_yet_confirmed_is_keyed_by_its_id_s_namespace(queue: JobQueue) -> None:
    # The first delivery under a third name: not bound yet (the flow asks the forge), but
    # its id is, so it waits for the old name's PR job rather than running beside it.
    old = add(queue, "d-old", job(OLD, "#7", None))
    unconfirmed = add(queue, "d-new", job(UNCONFIRMED, "#7", ID))
    assert key_of(queue, unconfirmed) == key_of(queue, old) == f"{OLD}#7"


def test_a_successor_s_jobs_have_a_key_of_their_own(queue: JobQueue, ledger: Ledger) -> None:
    # Another repository (id 5151) took the old name: its jobs neither wait for the
    # renamed repository's nor show on its jobs page, under either name.
    mine = add(queue, "d-mine", job(NEW, "#7", ID))
    theirs = add(queue, "d-theirs", job(OLD, "#7", SUCCESSOR))
    assert key_of(queue, theirs) == f"{OLD}~{SUCCESSOR}#7"
    assert {queue.claim("w1", 200.0).id, queue.claim("w2", 200.0).id} == {mine, theirs}  # type: ignore[union-attr]
    listed, total = queue.page(NEW, offset=0, limit=10, also=ledger.names(OLD))
    assert [r.job.id for r in listed] == [mine] and total == 1


def test_unbound_names_and_other_keys_are_kept(queue: JobQueue) -> None:
    plain = add(queue, "d1", job("github:octo/fresh", "#3", None))
    fresh = add(queue, "d2", job("github:octo/fresh2", "@abc", 77))
    odd = add(queue, "d3", NewJob(key="something-else", kind="janitor", payload={}))
    assert key_of(queue, plain) == "github:octo/fresh#3"
    assert key_of(queue, fresh) == "github:octo/fresh2@abc"
    assert key_of(queue, odd) == "something-else"


def test_without_namespaces_the_two_names_ran_at_once(url: str, ledger: Ledger) -> None:
    # What the namespaces prevent: keyed by the name alone, both jobs start together.
    plain = JobQueue(url)
    try:
        add(plain, "d-old", job(OLD, ":prod", None))
        add(plain, "d-new", job(NEW, ":prod", ID))
        assert plain.claim("w1", 200.0) is not None
        assert plain.claim("w2", 200.0) is not None
    finally:
        plain.close()


def test_the_intake_s_batches_are_keyed_alike(queue: JobQueue) -> None:
    # The webhook intake's path: PostgreSQL's batch function, or SQLite in a thread.
    batch = [
        Delivery("b-old", "github", "pull_request", job(OLD, "#7", ID), 100.0),
        Delivery("b-new", "github", "pull_request", job(NEW, "#7", ID), 100.0),
        Delivery("b-succ", "github", "pull_request", job(OLD, "#7", SUCCESSOR), 100.0),
    ]

    async def store() -> list[bool]:
        engine = queue.async_engine()
        try:
            return await queue.accept_many_async(batch, engine)
        finally:
            if engine is not None:
                await engine.dispose()

    assert asyncio.run(store()) == [True, True, True]
    keys = [key_of(queue, queue.delivery_job(d.delivery_id) or 0) for d in batch]
    assert keys == [f"{OLD}#7", f"{OLD}#7", f"{OLD}~{SUCCESSOR}#7"]


def test_the_service_s_keys_read_bound_names_once_a_while(url: str, ledger: Ledger) -> None:
    # The intake's cost: a batch whose names were all found bound lately, each to the id
    # its pair says, reads nothing; a pair saying another id (a name may change hands to
    # it) or none (a scheduled job) is read every time, as a name bound to nothing (its
    # first delivery may bind it); an operator's rebinding is followed once the bound
    # names' time is up.
    clock = [0.0]
    reads: list[int] = []
    read = ledger._bindings_of

    def counted(named: Any) -> Any:
        reads.append(len(named))
        return read(named)

    ledger._bindings_of = counted  # type: ignore[method-assign]
    keys = QueueKeys(ledger, seconds=30.0, clock=lambda: clock[0])
    assert keys([(NEW, ID)]) == {(NEW, ID): OLD} and len(reads) == 1
    assert keys([(NEW, ID)]) == {(NEW, ID): OLD} and len(reads) == 1  # kept
    assert keys([(NEW, ID), (OLD, ID)]) == {(NEW, ID): OLD, (OLD, ID): OLD}
    assert len(reads) == 2  # the old name was not kept yet
    assert keys([(OLD, ID), (NEW, ID)]) == {(OLD, ID): OLD, (NEW, ID): OLD}
    assert len(reads) == 2
    assert keys([(OLD, SUCCESSOR), (NEW, None)]) == {
        (OLD, SUCCESSOR): f"{OLD}~{SUCCESSOR}",
        (NEW, None): OLD,
    }
    assert len(reads) == 3  # another id and none: read
    assert keys([("github:octo/fresh", 77)]) == {("github:octo/fresh", 77): "github:octo/fresh"}
    assert keys([("github:octo/fresh", 77)]) and len(reads) == 5
    # The operator hands the old name to the successor (docs/architecture.md).
    with ledger._writing("rebind") as conn:
        conn.execute(repositories.delete().where(repositories.c.name == OLD.casefold()))
    ledger.bind_repository(OLD, SUCCESSOR, 3_000)
    assert keys([(OLD, ID)]) == {(OLD, ID): OLD} and len(reads) == 5  # not seen yet
    assert keys([(OLD, None)]) == {(OLD, None): f"{OLD}~{SUCCESSOR}"} and len(reads) == 6
    clock[0] = 31.0
    assert keys([(OLD, ID)]) == {(OLD, ID): OLD} and len(reads) == 7
