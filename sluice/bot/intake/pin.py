"""A tag or release event is pinned to the commit it named when it was received.

A tag moves (``git push --force origin v2``, a tag deleted and made again on GitHub), and
a release names its tag only. Were the worker to ask the forge which commit a tag names
when the job's turn comes, whoever may move the tag would choose what is promoted, after
the person in ``released_by`` published the release; and a queue that is busy with a
long promotion leaves them time to. So the commit is settled here, at intake, before
the delivery is stored: a tag push carries its commit in the payload (GitHub's
``after``, GitLab's ``checkout_sha``), and a release's tag is resolved now, once. The
commit is written into the queued event (``sha``) and the queue row (``head_sha``), and
the flow promotes that commit and never resolves the tag's name again
(:func:`sluice.bot.flow.promotion.on_tag`). Moving the tag afterwards changes nothing
for this event; a new push of the tag is a new event, with its own commit and its
pusher's ``released_by`` check.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from sluice.bot.events.neutral import Event, TagEvent, event_from_json
from sluice.bot.forge.base import Forge
from sluice.bot.queue.store import NewJob
from sluice.core.errors import ConfigError, SluiceError, StateError

log = logging.getLogger(__name__)

ForgeFor = Callable[[Event], Forge]


class TagNotResolved(StateError):
    """The forge did not say which commit a release's tag names (it failed, or did not
    answer): the delivery is not stored, and the forge is asked to deliver it again."""


def pin_event(event: Event, forge_for: ForgeFor) -> Event | None:
    """``event`` with the commit its tag names now, when it is a tag event without one
    (a release); other events as they are. None: the tag names no commit now (deleted
    before the delivery arrived, or it names a tree), or the service has no credentials
    for the event's forge (``forge_for`` raised ``ConfigError``: a setting, not the
    forge, is missing, and no redelivery can change that), so the event has nothing to
    promote.

    Raises:
        TagNotResolved: the forge failed to answer (or its client failed otherwise).
    """
    if not isinstance(event, TagEvent) or event.sha is not None:
        return event
    try:
        forge = forge_for(event)
    except ConfigError as exc:
        # This service has no credentials for the event's forge: no redelivery can
        # resolve the tag until its operator sets them, so a 503 would only be retried
        # for nothing (GitLab disables a hook that keeps failing). Nothing to promote.
        log.error(
            "%s: %s of tag %r not promoted: the service cannot ask %s which commit the "
            "tag names: %s (%s); once set, push the tag again or publish a new release",
            event.repo,
            event.source,
            event.tag,
            event.forge,
            exc.message,
            exc.hint or "check the service's forge settings",
        )
        return None
    except Exception as exc:  # a client that could not be made
        raise _not_resolved(event, exc) from exc
    try:
        sha = forge.commit_of(f"tags/{event.tag}")
    except Exception as exc:  # a forge error: it failed, or did not answer
        raise _not_resolved(event, exc) from exc
    if sha is None:
        log.warning(
            "%s: %s of tag %r ignored: the tag names no commit now (deleted or moved to a "
            "tree before the delivery arrived)",
            event.repo,
            event.source,
            event.tag,
        )
        return None
    return dataclasses.replace(event, sha=sha)


def _not_resolved(event: TagEvent, exc: Exception) -> TagNotResolved:
    reason = exc.message if isinstance(exc, SluiceError) else type(exc).__name__
    return TagNotResolved(
        f"the {event.source} of tag {event.tag!r} in {event.repo} was not stored: the "
        f"forge did not say which commit the tag names ({reason})",
        hint="the forge's delivery answer is 503: deliver it again once the forge answers",
    )


def pin_job(job: NewJob | None, forge_for: ForgeFor) -> NewJob | None:
    """:func:`pin_event` for a job about to be queued: a tag job gets its commit in its
    event and its ``head_sha``; None (no work) when its tag names no commit."""
    if job is None or job.kind != TagEvent.kind:
        return job
    event = pin_event(event_from_json(job.payload), forge_for)
    if not isinstance(event, TagEvent) or event.sha is None:
        return None
    return dataclasses.replace(job, payload=event.to_json(), head_sha=event.sha)
