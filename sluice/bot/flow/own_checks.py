"""Sluice's own check runs: a run is Sluice's because Sluice made it (its id, recorded in
the ledger when it was made), never because of its name.

A check run's name is anyone's to pick: another App installed on the repository, or,
under the Action, any workflow whose ``GITHUB_TOKEN`` may write checks (the same GitHub
Actions App Sluice's own runs are made by there), can make a run named ``sluice/drift``
or ``sluice/approval`` on any commit, with buttons whose identifiers are Sluice's (red
team, drift repair). So:

- :class:`OwnChecks` wraps the job's forge (:meth:`sluice.bot.flow.job.Job.start`): each
  ``set_check`` edits the run Sluice made for that check on that commit (the id the ledger
  recorded), or makes one, and records the id of the run now holding the check. Another
  App's run of the same name is never edited (GitHub refuses with 403, which must not
  pass for "these credentials cannot write check runs").
- :func:`refusal` says why a button's click is not taken: the run it was clicked on is not
  one Sluice recorded for this repository, that head and that check, or (as a GitHub App,
  :attr:`~sluice.bot.flow.deps.Deps.github_app`) the payload names another App as its
  maker. Every check with a button goes through it (:func:`sluice.bot.flow.dispatch.handle`),
  whatever its name.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from sluice.bot.events.neutral import WEB, CheckRunEvent
from sluice.bot.flow import audit
from sluice.bot.flow.ledger import Ledger
from sluice.bot.forge.base import Check, Forge, repo_key

if TYPE_CHECKING:
    from sluice.bot.flow.job import Job

log = logging.getLogger(__name__)

REFUSED = "click refused"
"""The outcome of the audit row of a click on a run that is not Sluice's."""


class OwnChecks:
    """``forge`` with each check set on the run Sluice made for it (see the module's doc);
    every other call is the forge's own."""

    def __init__(self, forge: Forge, ledger: Ledger, now: int) -> None:
        self.inner = forge
        self.name = forge.name
        self.repo = forge.repo
        self.comment_limit = forge.comment_limit
        self._ledger = ledger
        self._now = now
        self.key = repo_key(forge)  # the ledger's key of its records (Job.follow)
        self._known: dict[str, dict[str, int]] = {}  # sha -> check name -> run id

    def set_check(self, sha: str, check: Check, run_id: int | None = None) -> int | None:
        if run_id is None:
            run_id = self._runs(sha).get(check.name)
        made = self.inner.set_check(sha, check, run_id)
        if made is not None and made != run_id:
            self._ledger.record_check_run_later(self.key, sha, check.name, made, self._now)
            self._runs(sha)[check.name] = made
        return made

    def runs_on(self, sha: str) -> None:
        """Read Sluice's runs on ``sha`` now (:meth:`sluice.bot.flow.job.Job.checks_on`)."""
        self._runs(sha)

    def _runs(self, sha: str) -> dict[str, int]:
        """Sluice's runs on ``sha`` by check name, read once per job (one query)."""
        key = sha.lower()
        if key not in self._known:
            self._known[key] = self._ledger.check_runs_on(self.key, sha)
        return self._known[key]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def refusal(job: Job, event: CheckRunEvent) -> str | None:
    """Why ``event``, a button clicked on a check run, is not taken; None when the run is
    Sluice's: one it made (:class:`OwnChecks` recorded its id) in this repository, on the
    head and for the check the event names, and, when the service is a GitHub App, made by
    that App as the payload says. The web UI's "Approve this plan" is no check run's: it
    is the service's own form, its user signed in (:mod:`sluice.bot.web.actions`)."""
    if event.origin == WEB or event.action != "requested_action":
        return None
    run = event.check_run_id
    if run is None:
        return "the event names no check run"
    app = job.deps.github_app
    if app is not None and event.app_id != app:
        maker = "no App" if event.app_id is None else f"App {event.app_id}"
        return f"check run {run} names {maker} as its maker, not this service's App {app}"
    made = job.ledger.own_check_run(job.repo, run)
    if made is None:
        return f"check run {run} is not one Sluice made in this repository (or not its latest)"
    sha, name = made
    if (sha, name) != (event.head_sha.lower(), event.check_name):
        return (
            f"check run {run} is Sluice's {name} on {sha[:12]}, not {event.check_name!r} on "
            f"{event.head_sha[:12]}"
        )
    return None


def refuse(job: Job, event: CheckRunEvent, why: str) -> None:
    """Log, and record in the audit log, a click not taken (:func:`refusal`): nothing else
    is done, nothing is posted (the run is not Sluice's to answer on)."""
    log.warning(
        "%s: %s's click (%r) on the check %r at %s refused: %s; only the buttons of the "
        "check runs Sluice made are taken",
        job.repo,
        event.requester,
        event.identifier,
        event.check_name,
        event.head_sha[:12],
        why,
    )
    audit.record(
        job,
        audit.REFUSAL,
        REFUSED,
        actor=event.requester,
        ref=event.head_sha[:12],
        detail=f"a button of {event.check_name!r}: {why}",
    )
