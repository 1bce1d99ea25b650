"""One event's unit of work: what every handler of it shares, made and closed by the
dispatcher (:func:`sluice.bot.flow.dispatch.handle`).

A :class:`Job` holds the forge of the event's repository, the clock read once when the job
started, the trusted settings once resolved (:func:`sluice.bot.flow.trust.for_repository`
keeps them here), one state store and the files read from the prod branch (each fetched
once). Handlers take ``(job, event)`` and pass the job on; nothing in here decides
anything. The sticky comment is not kept here: each publication reads and writes the
ledger's record in one transaction, so another job's sections are never overwritten.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sluice.bot.flow import comment_guard, tenancy
from sluice.bot.flow.deps import Deps
from sluice.bot.flow.ledger import CommentWrites, Ledger
from sluice.bot.flow.own_checks import OwnChecks
from sluice.bot.flow.sticky import Guarded
from sluice.bot.flow.tenancy import Namespace
from sluice.bot.forge.base import Account, DirEntry, Forge, PostedComment, PushRecord, repo_key
from sluice.bot.present.notify_text import Notice
from sluice.core.state import StateStore, open_state

if TYPE_CHECKING:
    from sluice.bot.flow.trust import Settings

log = logging.getLogger(__name__)


@dataclass
class Job:
    """One event's work: its forge, its clock reading, its settings, state and prod files."""

    deps: Deps
    forge: Forge
    now: int
    """The clock, read once when the job started (epoch ms)."""
    trusted: Settings | None = None
    """The trusted settings, once :func:`~sluice.bot.flow.trust.for_repository` resolved
    them for this job."""
    notices: list[Notice] = field(default_factory=list)
    """Events to tell in chat when the job ends (:func:`sluice.bot.flow.notify.flush`)."""
    head_pushers: dict[tuple[str, str], tuple[list[PushRecord] | None, str]] = field(
        default_factory=dict
    )
    """(branch, head sha) -> the forge's records of pushes of the PR's commits to it, or why
    it could not say (:func:`sluice.bot.flow.approval._with_head`): asked once per head."""
    _state: StateStore | None = None
    _namespace: Namespace | None = None
    _repo: str | None = None
    _files: dict[tuple[str, str], str | None] = field(default_factory=dict)
    _folders: dict[tuple[str, str], list[DirEntry] | None] = field(default_factory=dict)
    _accounts: dict[int, Account | None] = field(default_factory=dict)

    @classmethod
    def start(cls, deps: Deps, forge: Forge) -> Job:
        """The job of one event on ``forge``, whose checks are set on the runs Sluice made
        (:class:`~sluice.bot.flow.own_checks.OwnChecks`), never another's of their name."""
        now = deps.clock()
        return cls(deps, OwnChecks(forge, deps.ledger, now), now)

    @property
    def repo(self) -> str:
        """The key of the repository's records and namespace: ``forge:owner/name`` as the
        forge names it, or its first name when it was renamed (:meth:`follow`)."""
        return self._repo if self._repo is not None else repo_key(self.forge)

    def follow(self, repo: str) -> None:
        """Key the job's records (ledger, check runs, comment) and namespace by ``repo``,
        the first name of a repository the forge knows by another now (a rename; the
        forge is still asked under its name now). Called before anything is read."""
        assert self._namespace is None, "the namespace was decided under another name"
        self._repo = repo
        if isinstance(self.forge, OwnChecks):
            self.forge.key = repo

    def readdress(self, forge: Forge) -> None:
        """Ask ``forge`` from now on in place of the one the job started with: a name bound
        to its repository's id during admission is asked by that id, not by the name (a
        rename, and another repository taking the name, change nothing of where the rest
        of the job reads and writes). Called before anything is read."""
        assert self._namespace is None, "the job read under the forge it started with"
        key = self.forge.key if isinstance(self.forge, OwnChecks) else None
        self.forge = OwnChecks(forge, self.deps.ledger, self.now)
        if key is not None:
            self.forge.key = key

    @property
    def ledger(self) -> Ledger:
        return self.deps.ledger

    @property
    def namespace(self) -> Namespace:
        """The repository's namespace (its state, Spark schema prefix, trees' folder),
        decided once per job by :func:`sluice.bot.flow.tenancy.namespace_of`."""
        if self._namespace is None:
            self._namespace = tenancy.namespace_of(
                self.repo, self.ledger, self.deps.state_url, isolate=self.deps.isolate
            )
        return self._namespace

    @property
    def state_url(self) -> str:
        """The repository's state database (its schema made first on PostgreSQL)."""
        url = self.namespace.state_url
        tenancy.ensure_schema(url)
        return url

    def state(self) -> StateStore:
        """The state store, opened on first use and closed with the job."""
        if self._state is None:
            self._state = open_state(self.state_url)
        return self._state

    def tree(self, sha: str) -> Path:
        """The repository's files at ``sha`` (:meth:`Checkout.tree`), in its namespace's
        folder when the service isolates repositories."""
        folder = self.namespace.folder if self.deps.isolate else None
        if folder is None:
            return self.deps.checkout.tree(self.forge, sha)
        return self.deps.checkout.tree(self.forge, sha, folder)

    def read_file(self, ref: str, path: str) -> str | None:
        """``path`` at ``ref`` on the forge (None: absent), fetched once per job."""
        key = (ref, path)
        if key not in self._files:
            self._files[key] = self.forge.read_file(ref, path)
        return self._files[key]

    def list_dir(self, ref: str, path: str) -> list[DirEntry] | None:
        """The entries of folder ``path`` at ``ref`` on the forge (None: absent), listed
        once per job."""
        key = (ref, path)
        if key not in self._folders:
            self._folders[key] = self.forge.list_dir(ref, path)
        return self._folders[key]

    def account_of(self, user_id: int) -> Account | None:
        """The account ``user_id`` is now on the forge, its login and whether a bot (None:
        it knows none), asked once per job (:meth:`~sluice.bot.forge.base.Forge.account_of`)."""
        if user_id not in self._accounts:
            self._accounts[user_id] = self.forge.account_of(user_id)
        return self._accounts[user_id]

    def login_of(self, user_id: int) -> str | None:
        """The login account ``user_id`` has now on the forge (None: it knows none)."""
        account = self.account_of(user_id)
        return None if account is None else account.login

    def publish(
        self,
        number: int,
        *,
        body: str | None = None,
        section: tuple[str, str | None] | None = None,
        sections: Sequence[tuple[str, str | None]] = (),
    ) -> int | None:
        """Update PR ``number``'s sticky comment (:meth:`StickyComment.publish`); when, by
        the forge's clock (None: it says no time). What someone else wrote into it since
        Sluice's last post is kept before this edit overwrites it (:mod:`comment_guard`).

        A new ``body`` that fails may yet have been applied (the forge's answer lost): the
        comment may show a plan no publication records, so from just after the last one it
        shows no head's plan (:meth:`Ledger.record_unshown`, red team round 7) until a
        later publication is recorded. A failed edit of sections alone leaves the body, and
        the plan in it, as it was."""

        def guard(found: list[PostedComment], writes: CommentWrites) -> Guarded:
            return comment_guard.check(self, number, found, writes)

        try:
            return self.deps.sticky.publish(
                self.forge,
                number,
                body=body,
                section=section,
                sections=sections,
                repo=self.repo,
                guard=guard,
            )
        except Exception:
            if body is not None:
                self._unanswered(number)
            raise

    def _unanswered(self, number: int) -> None:
        try:
            self.ledger.record_unshown(self.repo, number, self.deps.clock(), kind="unanswered")
        except Exception:  # the failure being raised says what went wrong first
            log.exception("#%s: could not record a comment's unanswered write", number)

    def tell(self, notice: Notice) -> None:
        """Tell ``notice`` in chat once the job's work is done (:mod:`sluice.bot.flow.notify`)."""
        self.notices.append(notice)

    def scrub(self, text: str, tree: Path | None = None) -> str:
        """``text`` fit to leave the service (:meth:`Deps.scrub`)."""
        return self.deps.scrub(text, tree)

    def checks_on(self, sha: str) -> None:
        """Read which check runs Sluice made on ``sha`` now (inside a transaction the
        caller holds, it costs none of its own), for the job's checks set on it later."""
        if isinstance(self.forge, OwnChecks):
            self.forge.runs_on(sha)

    def close(self) -> None:
        try:
            self.deps.ledger.write_deferred()  # the ids of the check runs it made
        finally:
            if self._state is not None:
                self._state.close()
                self._state = None
