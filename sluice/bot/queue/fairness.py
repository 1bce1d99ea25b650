"""Which ready job a worker takes next: the queue's fairness rule, in one place (pure).

A job's **class** follows from its queue key and kind alone (:func:`job_class`):

- ``promotion``: what changes prod on a person's word: a merge, a tag or release, a
  ``/sluice deploy`` or ``/sluice rollback`` (the repository's prod key, not its schedule);
- ``build``: a pull request's work (its build, its gate, its commands);
- ``background``: the repository's scheduled run of prod (a backfill of every interval
  due, possibly long) and its janitor.

The rule, applied at every claim to the jobs that are ready (each the oldest queued job
of its key, its key not running, due) and the jobs running now:

1. **Caps.** Nothing starts while ``max_running`` jobs run (all repositories, all service
   processes sharing the database). A job that is not a promotion does not start while
   its repository runs ``per_repository`` jobs that are not promotions.
2. **A slot kept for promotions.** With ``max_running`` of 2 or more, builds and background
   jobs together hold at most ``max_running - 1`` slots, so a promotion finds a slot free
   and waits behind no running build; with ``max_running`` 1 it waits behind at most the
   one running job.
3. **A long job never holds the last build slot for long.** At most one background job
   runs at once; under a cap, one starts while it leaves a slot free for builds, or once no
   build accepted before it still waits (so a stream of pull requests cannot hold a
   scheduled run off for ever). A small pull request never queues behind a scheduled
   backfill: with ``max_running`` of 3 or more it has a build slot beside it; with 2, at
   most that one job runs before it.
4. **Order.** Promotions first; then builds and background jobs: the repository running
   the fewest jobs first (round-robin: a repository with twenty pull requests waiting
   takes turns with one that has one; promotions are not counted), then the oldest job.

Jobs of one key still run one at a time, oldest first (the key's row in
``sluice_job_keys``), so a promotion waits for its own repository's running promotion,
scheduled run or janitor (they share the prod key: two things changing one prod never
overlap). The queue knows a job's class, not its size: a pull request whose build is a
long backfill is a build (the gate's backfill budget holds one above it until approved).

Example: three slots; two builds of ``a/big`` run; ``a/big``'s third pull request,
``b/small``'s one, ``b/small``'s scheduled run and a merge into ``a/big`` wait. One slot is
free, but the builds have used theirs (the third is kept for promotions), so the merge
alone may start:

>>> caps = Caps(max_running=3)
>>> running = [Running("github:a/big#1", "pull_request"), Running("github:a/big#2", "pull_request")]
>>> ready = [
...     Ready(5, "github:a/big#3", "pull_request"),
...     Ready(6, "github:b/small#1", "pull_request"),
...     Ready(7, "github:b/small:prod", "run"),
...     Ready(8, "github:a/big:prod", "pull_request"),
... ]
>>> [job.id for job in startable(ready, running, caps)]
[8]

Once one build ended, builds may start again: ``b/small``'s first (its repository runs
nothing, ``a/big`` one), then ``a/big``'s; the scheduled run would take the last build slot
while builds accepted before it wait, so it does not start:

>>> [job.id for job in startable(ready[:3], running[:1], caps)]
[6, 5]

With five slots it may, and it comes before ``a/big``'s build (``b/small`` runs nothing):

>>> [job.id for job in startable(ready[:3], running[:1], Caps(max_running=5))]
[6, 7, 5]

Once the builds accepted before it have started, it takes the last build slot in its turn:

>>> [job.id for job in startable([ready[2]], running[:1], caps)]
[7]
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum

PROD_SUFFIX = ":prod"
"""A repository's prod key ends so (:func:`sluice.bot.events.neutral.pr_key`)."""

BACKGROUND_KINDS = frozenset({"run", "janitor"})
"""Event kinds of the schedule's jobs (:mod:`sluice.bot.events.neutral`)."""

BACKGROUND_AT_ONCE = 1
"""Background jobs (scheduled runs, janitors) running at once, at most."""


class JobClass(IntEnum):
    """A job's class; lower goes first."""

    PROMOTION = 0
    BUILD = 1
    BACKGROUND = 2

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class Caps:
    """How many jobs may run at once: in all (``max_running``) and per repository
    (``per_repository``); None: no cap (the workers are the limit)."""

    max_running: int | None = None
    per_repository: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_running", "per_repository"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1, not {value}")


@dataclass(frozen=True)
class Ready:
    """A job that may run as far as its key goes (the oldest queued of its key, due)."""

    id: int
    key: str
    kind: str


@dataclass(frozen=True)
class Running:
    """A job running now."""

    key: str
    kind: str


def repository(key: str) -> str:
    """The repository (``forge:owner/name``) of a queue key: a PR's (``#n``), a head's
    (``@sha``, a check run without a PR) or prod's (``:prod``)."""
    if key.endswith(PROD_SUFFIX):
        return key[: -len(PROD_SUFFIX)]
    for mark in ("#", "@"):
        head, found, _ = key.rpartition(mark)
        if found:
            return head
    return key


def job_class(key: str, kind: str) -> JobClass:
    """A job's class, from its queue key and kind (see the module docstring)."""
    if kind in BACKGROUND_KINDS:
        return JobClass.BACKGROUND
    if key.endswith(PROD_SUFFIX):
        return JobClass.PROMOTION
    return JobClass.BUILD


def startable(ready: Iterable[Ready], running: Sequence[Running], caps: Caps) -> list[Ready]:
    """The ready jobs that may start now, best first (the module docstring's rule).

    The claim takes the first it can (another claimer may win a key first, then the
    next); each claim applies the rule again to what runs then.
    """
    total = len(running)
    if caps.max_running is not None and total >= caps.max_running:
        return []
    # Builds and background jobs leave one slot to promotions (rule 2).
    others_limit = None
    if caps.max_running is not None:
        others_limit = caps.max_running - 1 if caps.max_running >= 2 else caps.max_running
    others = sum(1 for r in running if job_class(r.key, r.kind) is not JobClass.PROMOTION)
    background = sum(1 for r in running if job_class(r.key, r.kind) is JobClass.BACKGROUND)
    per_repo = Counter(
        repository(r.key) for r in running if job_class(r.key, r.kind) is not JobClass.PROMOTION
    )
    builds = [j.id for j in ready if job_class(j.key, j.kind) is JobClass.BUILD]
    allowed = []
    for job in ready:
        cls = job_class(job.key, job.kind)
        if cls is not JobClass.PROMOTION:
            if others_limit is not None and others >= others_limit:
                continue
            if caps.per_repository is not None and per_repo[repository(job.key)] >= (
                caps.per_repository
            ):
                continue
        if cls is JobClass.BACKGROUND:
            if background >= BACKGROUND_AT_ONCE:
                continue
            older_builds_wait = any(b < job.id for b in builds)
            if others_limit is not None and older_builds_wait and others + 1 >= others_limit:
                continue
        allowed.append(job)
    return sorted(
        allowed,
        key=lambda j: (
            job_class(j.key, j.kind) is not JobClass.PROMOTION,
            per_repo[repository(j.key)],
            j.id,
        ),
    )
