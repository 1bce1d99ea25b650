"""One handler per event type: :data:`HANDLERS` maps each neutral event to the function
that does its work. This module imports the handlers and is imported by none of them;
an entry point binds it to its :class:`~sluice.bot.flow.deps.Deps` (:func:`bound`) and
hands the worker plain callables.

Before a handler runs, :func:`handle` checks what holds for every event: the service
keeps one repository's prod (unless it isolates repositories: then each its own, in its
namespace, :mod:`sluice.bot.flow.tenancy`), a replayed delivery runs once, and a late PR
event does not rebuild over a newer head. The handler runs with its repository's Spark
schema prefix (:func:`~sluice.core.snapshot.naming.schema_prefix`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any, TypedDict

from sluice.bot.events.neutral import (
    BranchPushEvent,
    CheckRunEvent,
    CommentEvent,
    DriftCheckEvent,
    Event,
    JanitorEvent,
    MergeGroupEvent,
    PullRequestEvent,
    ReviewEvent,
    ScheduledRunEvent,
    TagEvent,
)
from sluice.bot.flow import (
    approval,
    drift_repair,
    merge_queue,
    notify,
    own_checks,
    pr_build,
    promotion,
    run_command,
    scheduled,
)
from sluice.bot.flow.checkout import job_spark
from sluice.bot.flow.deps import Deps
from sluice.bot.flow.job import Job
from sluice.bot.forge.base import ForgeError, RepositoryIdentity
from sluice.bot.present import checks, comment, replies
from sluice.bot.present.comment import CommentState
from sluice.core.snapshot.naming import pr_environment, schema_prefix

log = logging.getLogger(__name__)

Handler = Callable[[Job, Any], None]


def _on_pull_request(job: Job, event: PullRequestEvent) -> None:
    if event.action == "closed":
        if event.merged:
            promotion.on_merge(job, event)
        else:
            promotion.cleanup(job, event.number, "the PR was closed")
    elif event.action in pr_build.PREVIEW_ACTIONS:
        pr_build.on_opened(job, event)


def _on_review(job: Job, event: ReviewEvent) -> None:
    # A review hook records nothing (its sender's word): the gate reads the approvals from
    # the forge (GitLab's bound by their approved_at and the MR's versions: approval._bound).
    pr = job.forge.pull_request(event.number)
    if event.state == "APPROVED" and pr_build.on_approved(job, pr, event.reviewer):
        return  # a build held for the backfill budget ran, and its gate with it
    approval.refresh(job, pr)


def _on_tag(job: Job, event: TagEvent) -> None:
    promotion.on_tag(job, event)


def _on_branch_push(job: Job, event: BranchPushEvent) -> None:
    # Who pushed does not approve a pull request holding the push (approval: pushers).
    shas = (event.sha, *event.shas)
    job.ledger.record_branch_push(
        job.repo, event.branch, shas, event.pusher, job.now, event.pusher_id
    )


def _on_janitor(job: Job, event: JanitorEvent) -> None:
    scheduled.janitor(job)


def _on_scheduled_run(job: Job, event: ScheduledRunEvent) -> None:
    scheduled.run(job)


def _on_drift_check(job: Job, event: DriftCheckEvent) -> None:
    scheduled.drift_check(job)


def _on_check_run(job: Job, event: CheckRunEvent) -> None:
    # A button counts only on a run Sluice made, whatever its name (own_checks).
    refused = own_checks.refusal(job, event)
    if refused is not None:
        own_checks.refuse(job, event, refused)
        return
    if event.check_name == checks.DRIFT:  # prod's, not a PR's: queued under prod's key
        drift_repair.on_click(job, event)
    else:
        pr_build.on_check_run(job, event)


HANDLERS: dict[type[Event], Handler] = {
    PullRequestEvent: _on_pull_request,
    ReviewEvent: _on_review,
    CheckRunEvent: _on_check_run,
    CommentEvent: run_command.on_comment,
    TagEvent: _on_tag,
    BranchPushEvent: _on_branch_push,
    MergeGroupEvent: merge_queue.on_merge_group,
    JanitorEvent: _on_janitor,
    ScheduledRunEvent: _on_scheduled_run,
    DriftCheckEvent: _on_drift_check,
}
"""Event type -> the handler that does its work."""


def handle(deps: Deps, event: Event) -> None:
    """Do what ``event`` asks, as one :class:`~sluice.bot.flow.job.Job` (made here, closed
    when it ends). Forge and engine errors are reported on the PR, not raised, unless
    reporting itself fails (then the worker retries the job), or the forge fails when
    asked whether the event's name is its repository's now (:func:`_confirmed`: the
    worker retries it too).

    An event that changes state runs once by its content (``event.content_key()``, see
    :mod:`sluice.bot.events.neutral`): one whose key the ledger has recorded for the
    repository (a signed delivery replayed under a new delivery id) is skipped with an
    INFO line, and nothing is posted. The key is recorded once the event was handled, not
    before: a job cut short by a crash and run again still runs. A PR event records the
    PR's head (what a writer's ``/sluice plan`` on a fork PR builds); one older than the
    head recorded (a late or replayed delivery) builds nothing. These checks are one
    transaction.
    """
    job = Job.start(deps, deps.forge_for(event))
    try:
        if _admitted(job, event):
            # Its Spark schemas' names, and its Spark root (metastore, warehouse, server).
            with schema_prefix(job.namespace.schema_prefix), job_spark(job.namespace.spark):
                HANDLERS[type(event)](job, event)
            key = event.content_key()
            if key is not None:
                job.ledger.record_handled(job.repo, key, event.kind, "done", job.now)
    finally:
        notify.flush(job)  # last: the job's work and records are done (never raises)
        job.close()


def _record_pushers(job: Job, event: PullRequestEvent) -> None:
    """Whoever pushed a head does not approve it (gate_rules: pushers), even when a newer
    event of the PR was handled first: a synchronize's sender pushed its head (so any PR
    holding that commit counts them, as a push hook's pusher); a fork's owner pushed to the
    fork, whose push hooks never reach this repository."""
    ledger, repo = job.ledger, job.repo
    if event.pusher:
        ledger.record_pusher(repo, event.number, event.pusher, job.now, event.pusher_id)
        if event.action == "synchronize":
            ledger.record_branch_push(
                repo, event.head_ref, [event.head_sha], event.pusher, job.now, event.pusher_id
            )
    if event.fork and event.head_owner:
        # By the owner's account id where the forge says it (GitHub), so a rename of the
        # owner does not make them someone else; GitLab's hook names a path alone.
        ledger.record_pusher(repo, event.number, event.head_owner, job.now, event.head_owner_id)


def _admitted(job: Job, event: Event) -> bool:
    """Whether ``event`` is to be handled (see :func:`handle`); the repository's records
    (its owner, that it was seen, the PR's head) made on the way, in one transaction.

    First the forge confirms the name is its repository's now (:func:`_confirmed`): a
    delivery's id is never taken on its word. Then a delivery saying the forge's id binds
    the name to it the first time (a new name of a bound id: a rename, keeping the
    namespace; a name with records bound to nothing: :func:`_claim`; a name bound to
    another id, whose repository the forge says has it no more: :func:`_take_name`)."""
    key = event.content_key()
    if key is not None and _replayed(job, event, _key_of(job.deps, event), key):
        return False  # before asking the forge: a redelivery storm costs it nothing
    if not _confirmed(job, event):
        return False
    return _admit(job, event)


def _replayed(job: Job, event: Event, repo: str, key: str) -> bool:
    """Whether the ledger says ``event`` (its content ``key``) was handled for ``repo``
    already (a delivery sent again under a new delivery id): then skipped, saying so."""
    before = job.ledger.handled(repo, key)
    if before is None:
        return False
    outcome, at = before
    log.info(
        "%s: %s event skipped: the same event (%s) was handled at %s (%s); "
        "a delivery sent again under a new delivery id does not run again",
        repo,
        event.kind,
        key,
        _utc(at),
        outcome,
    )
    return True


def _admit(job: Job, event: Event, took: bool = False) -> bool:
    # The name the delivery carries (never the key the job follows: that may be the first
    # name of a repository that has left it); ``took``: this delivery took it already.
    ledger, name = job.ledger, f"{event.forge}:{event.repo}"
    with ledger.together("admit an event"):
        # None: the Action, the local forge, the CLI say no id (a name bound is followed).
        rid = event.repo_id
        if rid is None:
            binding = None
            job.follow(ledger.canonical(name))
        else:
            binding = ledger.bind_repository(name, rid, job.now)
            if binding.rename:  # a new name of a bound id, confirmed: a rename
                ledger.add_name(name, rid, binding.canonical, job.now)
            elif binding.others:  # a name of a renamed repository, confirmed its now
                ledger.touch_name(name, job.now)
            if binding.since is None:
                job.follow(binding.canonical)
        renamed = binding is not None and binding.rename
        claimed = binding is not None and binding.since is not None
        known = None if binding is None or renamed or claimed else binding.repo_id
        successor = known is not None and known != rid
        repo = job.repo
        # An isolating service binds no owner: each repository has its namespace (tenancy).
        bound = f"{repo}#{job.deps.project_path}"
        stop = successor or claimed
        owner = bound if job.deps.isolate or stop else ledger.belongs_to(bound, job.now)
        if stop or owner != bound:
            refused = True
        else:
            refused = False
            ledger.seen(repo, event.installation_id, job.now)
            if isinstance(event, PullRequestEvent):
                _record_pushers(job, event)
                job.checks_on(event.head_sha)  # the build's checks go on its head
            key = event.content_key()
            replayed = key is not None and _replayed(job, event, repo, key)
            newer = (
                isinstance(event, PullRequestEvent)
                and event.action in pr_build.PREVIEW_ACTIONS
                and not ledger.record_pr_head(
                    repo, event.number, event.head_sha, event.updated_ms, job.now
                )
            )
    if renamed:
        assert binding is not None
        log.warning(
            "%s: the repository first seen as %s (%s id %s) was renamed: it keeps its "
            "namespace and records under its new name",
            job.repo,
            binding.canonical,
            event.forge,
            rid,
        )
    if claimed:  # a name with records, bound to nothing: the forge says whose they are
        assert binding is not None and binding.since is not None and rid is not None
        if not _claim(job, event, rid, binding.canonical, binding.since):
            return False
        return _admit(job, event)  # now bound
    if successor:
        assert known is not None and rid is not None
        if took:  # taken, and bound to another id again at once: not chased further
            raise _rebound(job, event, rid, known)
        _take_name(job, event, rid, known)
        return _admit(job, event, took=True)  # bound to it now (or meanwhile to another)
    if refused:
        _refuse_repository(job, event, owner)
        return False
    if replayed:
        return False
    if newer:
        assert isinstance(event, PullRequestEvent)
        log.info(
            "%s#%s: %s of %s skipped: a newer event of the PR was handled (a late "
            "or replayed delivery)",
            repo,
            event.number,
            event.action,
            event.head_sha[:12],
        )
        return False
    return True


def _confirmed(job: Job, event: Event) -> bool:
    """Whether the forge says the name ``event`` carries is its repository's now: by the
    event's id (a delivery; the web UI's forms carry the id the name is bound to), else
    by the id the name is bound to (:func:`_still_named`). Refused, saying why, when the
    forge names the id otherwise or not at all: a delivery sent late or again under a
    name its repository left, or from a name's former holder, or naming another
    repository's id, never builds in a namespace, binds a name, or posts to whatever
    holds the name now.

    Raises:
        ForgeError: the forge could not say (an error, not an answer): nothing is run,
            recorded or posted, and the worker tries the job again later.
    """
    if event.repo_id is None:
        return _still_named(job, event)
    return _named_now(job, event, event.repo_id, "it comes from")


def _named_now(job: Job, event: Event, repo_id: int, said: str) -> bool:
    """Whether the forge says the repository of ``repo_id`` has the name ``event``
    carries now; refused with an ERROR when not (``said``: how the job names the id)."""
    try:
        now = job.forge.repository_of(repo_id)
    except ForgeError as exc:
        raise _unconfirmed(job, event, f"which repository id {repo_id} is now", exc) from exc
    if now is not None and now.casefold() == event.repo.casefold():
        return True
    log.error(
        "%s: %s job refused: %s the repository whose %s id is %s, and %s says that "
        "repository is %s now, not this name (a delivery sent late or again under a name "
        "its repository left, which another may hold now, or one naming another "
        "repository's id): nothing is run, bound, recorded or posted under it. If the "
        "repository was renamed, check that the service's forge credentials can read it",
        job.repo,
        event.kind,
        said,
        event.forge,
        repo_id,
        event.forge,
        "unknown to it" if now is None else now,
    )
    return False


def _still_named(job: Job, event: Event) -> bool:
    """Whether an event that says no id (the scheduled drift check, run and janitor) may
    run under its name: yes when no delivery bound the name to a forge id (the Action,
    the local forge, the CLI: :func:`_unbound_still_named`), else only when the forge says
    the repository of the bound id has that name now. A renamed repository's scheduled
    jobs run under its new name once a delivery from it binds that name."""
    bound = job.ledger.name_binding(job.repo)
    if bound is None:
        return _unbound_still_named(job, event)
    first, repo_id = bound
    return _named_now(job, event, repo_id, f"this name (first seen as {first}) is bound to")


def _claim(job: Job, event: Event, repo_id: int, key: str, since: int) -> bool:
    """Bind the name a delivery carries, which has records (kept under ``key`` since
    ``since``) but is bound to no id (a repository served before names were bound, quiet
    since), to the delivery's ``repo_id``, as :func:`_whose` finds the repository: another
    than the one served, in a namespace of its own, inheriting nothing; the one served,
    keeping the records. Else refused, binding nothing, with what an operator runs to bind
    it. A forge error raises (:func:`_unconfirmed`: tried again)."""
    try:
        found = job.forge.identity(repo_id)
    except ForgeError as exc:
        raise _unconfirmed(job, event, f"when repository id {repo_id} was made", exc) from exc
    if found is None or found.name.casefold() != event.repo.casefold():
        whose, why = None, f"{event.forge} says no repository of that id is named so now"
    else:
        whose, why = _whose(job, event, found, key, since)
    if whose is not None:
        return _bind_claim(job, event, repo_id, whose, key, why)
    name = job.repo.casefold().replace("'", "''")
    log.error(
        "%s: %s event refused: the service has records of this name since %s, bound to no "
        "repository id yet, and this delivery comes from repository id %s, but %s: its "
        "records go to no repository that cannot show it is theirs. If this is the "
        "repository the service served under the name, bind it on the service's database: "
        "INSERT INTO sluice_repositories (name, forge, repo_id, canonical, spelled, "
        "first_seen_ts, last_seen_ts) VALUES ('%s', '%s', %s, '%s', '%s', 0, 0); to serve "
        "it in a namespace of its own instead, the same with canonical '%s~%s' "
        "(docs/architecture.md, 'A name is bound to its repository's id')",
        job.repo,
        event.kind,
        _utc(since),
        repo_id,
        why,
        name,
        event.forge,
        repo_id,
        key.replace("'", "''"),
        job.repo.replace("'", "''"),
        key.replace("'", "''"),
        repo_id,
    )
    return False


def _whose(
    job: Job, event: Event, found: RepositoryIdentity, key: str, since: int
) -> tuple[str | None, str]:
    """Whose the records of a name bound to no id (kept under ``key`` since ``since``) are
    to the repository the forge says ``found`` is, and why: the key of the namespace it is
    served in, or None. Made after the first record: another repository (made under the
    name since the one served was renamed, transferred or deleted), a namespace of its own
    (``<key>~<id>``). Made before: that is no proof (a repository renamed or transferred
    into the name is older than the records too); the records' (``key``) only when it
    holds one of the newest check runs the service made under the name
    (:func:`_continues`); None otherwise, or when the forge does not say when it was made."""
    made = found.created_ms
    if made is None:
        return None, f"{event.forge} does not say when repository id {found.id} was made"
    if made >= since:
        return f"{key}~{found.id}", (
            f"repository id {found.id} was made {_utc(made)}, after the service's first "
            f"record of the name ({_utc(since)}): another repository than the one served"
        )
    proof = _continues(job, event, key, found.id)
    if proof is True:
        return key, (
            f"repository id {found.id} was made {_utc(made)}, before the service's first "
            f"record of the name ({_utc(since)}), and holds a check run the service made "
            "under it"
        )
    return None, (
        f"{event.forge} says repository id {found.id} was made {_utc(made)}, before them, "
        f"but {'cannot show' if proof is None else 'shows none of'} the check runs the "
        "service made under this name (a repository renamed or transferred into the name "
        "is older than its records too)"
    )


def _continues(job: Job, event: Event, key: str, repo_id: int) -> bool | None:
    """Whether the repository of ``repo_id`` has one of the newest check runs the service
    made for the repository whose records are keyed ``key`` (GitHub: a check run id is one
    repository's, kept through renames and transfers); None when none is recorded or the
    forge keeps no such ids. A forge error raises (:func:`_unconfirmed`: tried again)."""
    runs = job.ledger.newest_check_runs(key)
    if not runs:
        return None
    said = False
    for sha, run_id in runs:
        try:
            made = job.forge.made_check_run(repo_id, run_id, sha)
        except ForgeError as exc:
            asked = f"whether repository id {repo_id} holds check run {run_id}"
            raise _unconfirmed(job, event, asked, exc) from exc
        if made is True:
            return True
        said = said or made is False
    return False if said else None


def _bind_claim(job: Job, event: Event, repo_id: int, canonical: str, key: str, why: str) -> bool:
    """Bind the delivery's name to ``repo_id`` with the namespace ``canonical`` (the
    records' ``key``, or one of its own) and say so, and ``why``."""
    bound = job.ledger.claim_name(job.repo, repo_id, canonical, job.now)
    if bound is None:
        log.error(
            "%s: %s event refused: repository id %s was bound to another name meanwhile "
            "(the next delivery follows it)",
            job.repo,
            event.kind,
            repo_id,
        )
        return False
    if canonical == key:
        log.info(
            "%s: bound to its repository's %s id %s (%s): it keeps its namespace and records",
            job.repo,
            event.forge,
            repo_id,
            why,
        )
    else:
        log.warning(
            "%s: bound to its repository's %s id %s (%s): it is not the repository served "
            "under the name before (renamed, transferred or deleted since), so it has a "
            "namespace of its own (records keyed %s) and inherits nothing; the earlier "
            "repository's namespace stays under %s",
            job.repo,
            event.forge,
            repo_id,
            why,
            bound.canonical,
            key,
        )
    return True


def _utc(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))


def _unbound_still_named(job: Job, event: Event) -> bool:
    """Whether an event that says no id may run under a name bound to no id: yes when the
    service has no records of it, or the forge has no ids (the local forge), or the
    repository the forge names so now was made before the first of them and holds a check
    run the service made under the name (then the name is bound to it here: a rename later
    keeps its namespace); refused, binding nothing, otherwise (another repository may
    hold the name now: its own first delivery binds it). A forge that cannot say raises
    its error (:func:`_still_named`: the worker tries again)."""
    history = job.ledger.history(job.repo)
    if history is None:
        return True
    key, since = history
    try:
        found = job.forge.identity()
    except ForgeError as exc:
        raise _unconfirmed(job, event, "which repository has the name", exc) from exc
    if found is None:
        return True  # a forge without ids
    whose, why = _whose(job, event, found, key, since)
    if whose == key:
        if job.ledger.claim_name(job.repo, found.id, key, job.now) is not None:
            job.readdress(job.deps.forge_for(event))  # bound now: asked by the id
            return True
        why = f"{event.forge} names repository id {found.id} so, bound to another name"
    elif whose is not None:
        why += ": another repository took the name"
    log.error(
        "%s: %s job refused: the service has records of this name, bound to no repository "
        "id, and %s: nothing is run or posted under a name that may be another "
        "repository's now",
        job.repo,
        event.kind,
        why,
    )
    return False


def _unconfirmed(job: Job, event: Event, asked: str, exc: ForgeError) -> ForgeError:
    """The error of a job that says no repository id whose name the forge could not
    confirm (it failed when asked ``asked``): raised, so the worker tries the job again
    (with its backoff) rather than dropping it until the next period; nothing was run or
    posted under the name."""
    log.warning(
        "%s: %s job not run yet: %s could not say %s (%s); the queue tries it again",
        job.repo,
        event.kind,
        event.forge,
        asked,
        exc,
    )
    return ForgeError(
        f"the {event.kind} job of {event.repo} did not start: {event.forge} could not say "
        f"{asked} ({exc.message}), and nothing runs or is posted under a name the forge "
        "has not confirmed as this repository's",
        hint="the queue tries it again; if the forge keeps failing, check the service's "
        "forge credentials and the forge's status",
    )


def _rebound(job: Job, event: Event, rid: int, held_by: int) -> ForgeError:
    """The error of a delivery whose name, just taken for its id ``rid``, was bound to
    ``held_by`` again meanwhile: nothing run; the queue tries it again (one take per
    attempt, so no delivery asks the forge without end)."""
    log.warning(
        "%s: %s job not run yet: the name was bound to repository id %s again as this "
        "delivery (id %s) took it; the queue tries it again",
        event.repo,
        event.kind,
        held_by,
        rid,
    )
    return ForgeError(
        f"the {event.kind} job of {event.repo} did not start: its name changed hands again "
        f"while repository id {rid} took it",
        hint="the queue tries it again; nothing was run or posted",
    )


def _take_name(job: Job, event: Event, rid: int, held_by: int) -> None:
    """The name ``event`` carries is bound to ``held_by``, and the forge confirmed it is
    repository ``rid``'s now (:func:`_confirmed`: ``held_by``'s was renamed, transferred
    or deleted): bind it to ``rid`` (:meth:`~sluice.bot.flow.ledger.Ledger.take_name`),
    which keeps its own namespace when renamed into the name and gets one of its own
    otherwise, inheriting nothing of ``held_by``'s (its prod, tables, Spark root and
    history stay keyed by its first name, for its next delivery under its new name).
    Refusing it instead would let anyone who once delivered under a name (and left it)
    lock out whatever repository is made or renamed into it later.

    Raises:
        ForgeError: the forge could not say what ``held_by``'s repository is named now,
            or says it has the name still (a rename under way): nothing is bound, run or
            posted, and the worker tries the job again later.
    """
    name = f"{event.forge}:{event.repo}"  # the job follows the holder's key until taken
    try:
        held = job.forge.repository_of(held_by)
    except ForgeError as exc:
        raise _unconfirmed(job, event, f"which repository id {held_by} is now", exc) from exc
    if held is not None and held.casefold() == event.repo.casefold():
        log.warning(
            "%s: %s job not run yet: %s names both repository id %s, to which the name is "
            "bound, and id %s, this delivery's, so; the queue tries it again",
            name,
            event.kind,
            event.forge,
            held_by,
            rid,
        )
        raise ForgeError(
            f"the {event.kind} job of {event.repo} did not start: {event.forge} says both "
            f"repository id {held_by}, to which the name is bound, and id {rid}, this "
            "delivery's, have the name (a rename under way)",
            hint="the queue tries it again; nothing of either repository was run or posted",
        )
    taken = job.ledger.take_name(name, rid, held_by, job.now)
    if taken is None:
        return  # bound meanwhile: admitted again as it is now
    log.warning(
        "%s: this name was bound to the repository whose %s id is %s, and %s says it is "
        "repository id %s's now (the other was renamed, transferred or deleted): bound to "
        "it, %s (records keyed %s); nothing of repository id %s's is its",
        name,
        event.forge,
        held_by,
        event.forge,
        rid,
        "a repository renamed into the name, keeping its namespace"
        if taken.rename
        else "in a namespace of its own",
        taken.canonical,
        held_by,
    )


def _refuse_repository(job: Job, event: Event, owner: str) -> None:
    """One state database holds one repository's prod: refuse a second one (a shared
    prod would let either repository's merges replace the other's)."""
    log.error(
        "%s: %s event refused: this service's state database and warehouse "
        "belong to %s; name both in SLUICE_REPOSITORIES (or set "
        "SLUICE_ISOLATE_REPOSITORIES=true) to keep each in a namespace of its own, or "
        "run a separate service (SLUICE_DATABASE_URL, SLUICE_WORKDIR) for each",
        job.repo,
        event.kind,
        owner,
    )
    number = event.number if isinstance(event, PullRequestEvent | CommentEvent) else None
    if number is None or (isinstance(event, PullRequestEvent) and event.action == "closed"):
        return
    job.publish(
        number,
        body=(
            f"{job.deps.sticky.marker}\n### ❌ Sluice refused this repository\n\n"
            "This Sluice service already keeps another repository's prod and environments "
            "in its state database and Spark warehouse, and one service keeps one "
            "repository's apart from nothing else: serving this one too would let the "
            "merges of either replace the other's prod. Nothing was built or changed. Ask "
            "the people who run Sluice to name this repository in the service's "
            "`SLUICE_REPOSITORIES` too (a service of several repositories keeps each one's "
            "state and Spark schemas apart), or for a service of its own."
        ),
    )


def give_up(deps: Deps, event: Event, error: str) -> None:
    """The job failed for good: say so where the people it concerns will look."""
    job = Job.start(deps, deps.forge_for(event))
    try:
        # Told under its name only while the forge says the name is still its
        # repository's, as when it was admitted (its last attempt may have failed asking
        # that; a ForgeError here is logged by abandon, nothing posted).
        if not _confirmed(job, event):
            return
        job.follow(_key_of(deps, event))
        with schema_prefix(job.namespace.schema_prefix):
            _give_up(job, event, error)
    finally:
        notify.flush(job)
        job.close()


def _give_up(job: Job, event: Event, error: str) -> None:
    forge = job.forge
    text = job.scrub(error)
    if isinstance(event, CommentEvent):
        forge.reply(event.number, replies.command_gave_up(event.author, text))
        return
    if isinstance(event, ScheduledRunEvent):
        scheduled.report_failure(job, text)
        return
    if isinstance(event, CheckRunEvent) and event.check_name == checks.DRIFT:
        if own_checks.refusal(job, event) is None:  # a click on Sluice's own drift check
            forge.set_check(event.head_sha, checks.repair_failed(text))
        return
    if isinstance(event, MergeGroupEvent):
        # The queue waits for these checks: fail them, or the entry waits until it times out.
        if event.action == "checks_requested":
            for name in checks.MERGE_GROUP_CHECKS:
                forge.set_check(
                    event.head_sha,
                    checks.merge_group_failed(name, "Sluice gave up on this merge group", text),
                )
        return
    promoted = event.merge_sha if isinstance(event, PullRequestEvent) else None
    if isinstance(event, TagEvent):
        promoted = event.sha
    if promoted:
        forge.set_check(promoted, checks.promotion_gave_up(text))
        promotion.abandon(job, promoted, checks.PROMOTION_GAVE_UP)
    if not isinstance(event, PullRequestEvent) or event.action == "closed":
        return
    for name in checks.PR_CHECKS:
        forge.set_check(event.head_sha, checks.gave_up(name, text))
    state = CommentState(
        None,
        pr_environment(event.number),
        event.head_sha,
        "failure",
        "the job failed after every retry",
        error=("Error", text),
        footer=pr_build.footer(job.deps, event.head_sha),
    )
    body = comment.comment(state, limit=forge.comment_limit, marker=job.deps.sticky.marker)
    job.publish(event.number, body=body, sections=[comment.facts_section(state)])


def abandon(deps: Deps, event: Event, error: str) -> None:
    """The queue gives up on ``event``'s job: :func:`give_up`, then record the event as
    handled (failed), so a replay of it under a new delivery id does not run either, e.g.
    an old merge whose promotion failed after newer ones landed."""
    try:
        give_up(deps, event, error)
    except Exception:
        log.exception("could not report the failure of a %s event on the forge", event.kind)
    key = event.content_key()
    if key is not None:
        deps.ledger.record_handled(_key_of(deps, event), key, event.kind, "failed", deps.clock())


def _key_of(deps: Deps, event: Event) -> str:
    """The key of ``event``'s repository's records, as :func:`_admitted` found it (its
    first name when renamed): read, nothing bound."""
    named = (f"{event.forge}:{event.repo}", event.repo_id)
    return deps.ledger.queue_keys([named])[named]


class Bound(TypedDict):
    """The flow as the queue's worker calls it: plain callables, no flow types."""

    handle: Callable[[Event], None]
    abandon: Callable[[Event, str], None]
    repositories: Callable[[], Iterable[tuple[str, int | None]]]


def bound(deps: Deps) -> Bound:
    """:func:`handle`, :func:`abandon` and the repositories seen, bound to ``deps``."""
    return Bound(
        handle=lambda event: handle(deps, event),
        abandon=lambda event, error: abandon(deps, event, error),
        repositories=deps.ledger.repositories,
    )
