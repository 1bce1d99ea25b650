"""The forge port: everything the flow needs from GitHub, GitLab or a local repo.

One :class:`Forge` object speaks for one repository. Implementations translate these
calls to their API and raise :class:`ForgeError` with the forge's own message when a call
fails; the flow never sees an HTTP library.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

from sluice.core.errors import SluiceError


class ForgeError(SluiceError):
    """A call to the forge failed (what was asked, the status, the forge's message)."""


class UnusableTree(ForgeError):
    """The files of a commit are refused for good (an unsafe archive member, over the size
    limit): asking again gives the same answer, so the PR is told at once."""


LIST_LIMIT = 1_000
"""Most entries :meth:`Forge.list_dir` returns: a folder with more is an error, never a
long wait (GitHub's contents API lists at most 1,000 entries of a folder)."""


@dataclass(frozen=True)
class DirEntry:
    """One entry of a folder (:meth:`Forge.list_dir`): its name (no folder), its kind
    (``file``, ``dir``, ``link`` or ``other``: a submodule) and its size in bytes where the
    forge says (None: it does not, e.g. GitLab's tree)."""

    name: str
    kind: str
    size: int | None = None


PULL_COMMITS_LIMIT = 250
"""Most commits :meth:`Forge.pull_commits` lists (GitHub's API lists no more of a pull
request's); a pull request with more is listed as None (only part is known)."""


@dataclass(frozen=True)
class PullCommit:
    """A commit of a pull request as the forge lists it: its sha, and who wrote and who
    committed it as forge logins (None where the forge maps the commit's e-mail to no
    account, or names no login: GitLab's list has e-mails only), and those accounts' ids
    (GitHub's ``author.id``, ``committer.id``; None where it names no account)."""

    sha: str
    author: str | None = None
    committer: str | None = None
    author_id: int | None = None
    committer_id: int | None = None


PUSH_RECORDS_LIMIT = 300
"""Most push records :meth:`Forge.push_records` reads (three pages of 100, of every
branch's pushes, newest first): a head pushed longer ago, or hidden behind more pushes, is
named by nobody (the gate then asks one approval more, as for a push nobody names)."""


@dataclass(frozen=True)
class PushRecord:
    """One record of the forge's own of a push to a ref (GitHub's repository activity,
    GitLab's push events): who moved it from ``before`` (None: the ref was made, or the
    record does not say) to ``after``; ``ref`` as ``refs/heads/<branch>`` or
    ``refs/tags/<tag>`` (None: the record names none)."""

    before: str | None
    after: str
    login: str
    user_id: int | None
    ref: str | None = None


PULL_VERSIONS_LIMIT = 1_000
"""Most versions :meth:`Forge.pull_versions` reads (ten pages of 100, newest first): an
approval given before the oldest of them is bound to no head (stale)."""


@dataclass(frozen=True)
class PullVersion:
    """One version of a pull request as the forge recorded it (GitLab's merge request
    versions, ``GET /projects/:id/merge_requests/:iid/versions``): the head it had
    (``head_commit_sha``) and when the forge made it (``created_at``: the forge's own clock
    at the push that made it, epoch ms; a commit's dates are the pusher's word, never
    this)."""

    head_sha: str
    created_ms: int


@dataclass(frozen=True)
class PullRequest:
    """A pull (merge) request as the forge reports it now."""

    number: int
    head_sha: str
    head_ref: str
    base_ref: str
    base_sha: str
    author: str
    draft: bool
    fork: bool
    open: bool
    merged: bool
    title: str = ""
    # The author's account id (GitHub ``user.id``, GitLab ``author.id``): a login can be
    # renamed and given up, an id never changes; None where the forge does not say.
    author_id: int | None = None


@dataclass(frozen=True)
class CheckAction:
    """A button on a check run (GitHub ``requested_action``); at most three per check."""

    label: str  # at most 20 characters
    description: str  # at most 40 characters
    identifier: str  # at most 20 characters


@dataclass(frozen=True)
class Check:
    """One named check on a commit (GitHub check run; GitLab commit status).

    ``status``: queued, in_progress or completed; ``conclusion`` (completed only):
    success, failure, neutral, cancelled, skipped or action_required.
    """

    name: str
    status: str
    title: str
    summary: str
    conclusion: str | None = None
    text: str | None = None
    actions: tuple[CheckAction, ...] = ()


@dataclass(frozen=True)
class Review:
    """A review; ``state`` upper-case: APPROVED, CHANGES_REQUESTED, COMMENTED, DISMISSED.

    ``user`` is its author's login as the forge spells it now; ``user_id`` their account's
    id (GitHub's ``user.id``, GitLab's ``approved_by[].user.id``), which a rename does not
    change: the gate tells people apart by it (None where the forge does not say: the
    local forge, whose people are logins only)."""

    id: int
    user: str
    state: str
    commit_sha: str | None
    submitted_at: str | None  # ISO 8601
    user_id: int | None = None


@dataclass(frozen=True)
class PostedComment:
    """A person's comment on a pull request as the forge holds it now (:meth:`Forge.comment`):
    its author's login and account id (None where the forge does not say) and its text;
    when it was last written (epoch ms, the forge's clock; None: not said), and whether
    it is the bot's own (written by the forge's own identity, whoever edited it since)."""

    author: str
    author_id: int | None
    body: str
    updated_ms: int | None = None
    own: bool = False
    comment_id: int | None = None
    """Its id on the forge (None where the forge has none: the local forge's files)."""


@dataclass(frozen=True)
class Posted:
    """What a post of the bot's comment (:meth:`Forge.upsert_comment`) left: the comment's
    id (None where the forge has none) and when it came to read the text posted, by the
    forge's clock (epoch ms; None where the forge says no time)."""

    comment_id: int | None
    at: int | None


@dataclass(frozen=True)
class Account:
    """An account as the forge tells it now, asked by its id: its login of now, and whether
    it is a bot account (an App's, a project's or group's access token user, a service
    account), which some person drives unnamed: GitHub's ``type`` ``Bot``, GitLab's
    ``bot``. A bot's login is no proof either way (GitLab lets whoever makes a service
    account choose its username); ``bot`` is None where the forge did not say."""

    login: str
    bot: bool | None = None


@dataclass(frozen=True)
class RepositoryIdentity:
    """A repository as the forge tells it now (:meth:`Forge.identity`)."""

    id: int
    name: str  # owner/name (GitHub ``full_name``, GitLab ``path_with_namespace``)
    created_ms: int | None  # when it was created, epoch ms; None: the forge did not say


def created_ms(value: object) -> int | None:
    """A forge's ISO 8601 time (``2011-01-26T19:01:12Z``, ``...12.000Z``, an offset) as
    epoch ms; None when it is not one."""
    if not isinstance(value, str):
        return None
    try:
        # GitLab's hooks write "2022-01-10 15:23:41 UTC"; the APIs ISO 8601 with "Z".
        moment = datetime.fromisoformat(value.replace(" UTC", "+00:00").replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return int(moment.timestamp() * 1000)


class Forge(Protocol):
    """What the flow asks of a forge, for one repository."""

    name: str  # "github", "gitlab", "local"
    repo: str
    comment_limit: int  # characters one comment may hold

    def fetch_tree(self, sha: str, dest: Path) -> None:
        """Write the repository's files at commit ``sha`` into the empty directory ``dest``.

        Archive members that would land outside ``dest`` (``..``, absolute paths, links),
        special files, and files over the service's limits
        (:class:`~sluice.bot.forge.archive.TreeLimits`: total and per-file size, members,
        path depth and length, checked as the archive streams in) are refused with
        :class:`UnusableTree`, leaving ``dest`` empty.
        """
        ...

    def read_file(self, ref: str, path: str) -> str | None:
        """The text of ``path`` at ``ref`` (branch, tag or sha); None when it does not exist."""
        ...

    def list_dir(self, ref: str, path: str) -> list[DirEntry] | None:
        """The entries of folder ``path`` at ``ref``, sorted by name; None when there is no
        such folder (or ref).

        Raises:
            ForgeError: ``path`` is a file, or it holds over :data:`LIST_LIMIT` entries.
        """
        ...

    def changed_files(self, number: int) -> list[str] | None:
        """The paths pull request ``number`` changes (added, modified or removed; both
        paths of a rename), sorted; None when the forge would list only part of them
        (GitHub lists at most 3,000; GitLab cuts a large merge request's)."""
        ...

    def pull_request(self, number: int) -> PullRequest:
        """The pull request as it is now."""
        ...

    def pull_commits(self, number: int) -> list[PullCommit] | None:
        """The pull request's commits (on its head, not on its base), oldest first; None
        when the forge would list only part of them (over :data:`PULL_COMMITS_LIMIT`)."""
        ...

    def pushers_of(self, branch: str, sha: str) -> list[tuple[str, int | None]] | None:
        """Who the forge's own records say pushed ``branch`` to ``sha`` (GitHub's repository
        activity, GitLab's push events: kept whether or not a push webhook was sent), as
        (login, account id) pairs; empty when its newest :data:`PUSH_RECORDS_LIMIT`
        records of pushes name nobody; None on a forge that keeps no such records (the
        local forge). Asked for a pull request's head no push webhook told of.

        Raises:
            ForgeError: the forge could not be asked (the gate then fails closed).
        """
        ...

    def push_records(self, shas: Collection[str]) -> list[PushRecord] | None:
        """The forge's own records of pushes to any branch of the repository (a commit
        pushed to another branch, then brought into the pull request's by someone else, was
        pushed by its first pusher all the same) whose ``after`` is one of ``shas`` (a pull
        request's commits): one listing of its newest :data:`PUSH_RECORDS_LIMIT` records,
        of every branch, newest first; None on a forge that keeps no such records (the
        local forge).

        Raises:
            ForgeError: the forge could not be asked (the gate then fails closed).
        """
        ...

    def upsert_comment(
        self, number: int, marker: str, body: str, comment_id: int | None = None
    ) -> Posted:
        """Edit the bot's comment on the PR, or create it (``body`` must contain
        ``marker``): comment ``comment_id`` (the one the bot last wrote, as the flow keeps
        it) while it is still the bot's on this PR, whatever it reads now (someone else's
        rewrite that dropped the marker is put back, never left under the bot's name);
        else the bot's oldest comment opening with ``marker`` (:func:`opens_with`). The
        bot's: written by the forge's own
        identity (a GitHub App's ``<slug>[bot]``, a token's user, the local forge's bot
        user); anyone else's comment, holding the marker or not, is never edited nor
        taken for it.

        Returns the comment's id and when it came to read ``body``, by the forge's own
        clock (epoch ms: the edit's or the creation's time, or the comment's last update
        where it read so already): what an approval the forge stamps is compared with (a
        plan shown from then on); None where the forge says no time (its approvals are
        then stamped by the service's clock, the local forge's)."""
        ...

    def edit_comment(self, number: int, comment_id: int, body: str) -> bool:
        """Rewrite the bot's comment ``comment_id`` on the PR to ``body``, by its id only;
        False when it is gone, another's, or not on this PR (nothing is written then), and
        on a forge whose comments have no ids (the local forge)."""
        ...

    def own_comments(self, number: int) -> list[PostedComment]:
        """Every comment of the bot's own on the PR (written by the forge's own identity;
        not a GitLab system note), oldest first, as the forge holds them now: each with
        its id and when it was last written where the forge says so. Which of them is
        Sluice's comment of a project is the flow's to tell
        (:mod:`sluice.bot.flow.comment_guard`)."""
        ...

    def set_check(self, sha: str, check: Check, run_id: int | None = None) -> int | None:
        """Create the check named ``check.name`` on ``sha``, or update Sluice's own.

        Where the forge has check runs with ids (GitHub), ``run_id`` is the run Sluice made
        for this check before (the flow records each: :mod:`sluice.bot.flow.own_checks`),
        and only that run is edited; without it, or when it is gone, a new run is made. A
        run of the same name made by anyone else (another App, a workflow) is never edited
        nor taken for Sluice's. Returns the id of the run now holding the check (GitLab: of
        the commit status GitLab answered, which the flow records the same way); None where
        the forge has no such ids (GitHub's commit statuses, the local forge)."""
        ...

    def reviews(self, number: int) -> list[Review]:
        """Every review of the pull request, oldest first."""
        ...

    def pull_versions(self, number: int) -> list[PullVersion] | None:
        """The pull request's versions as the forge recorded them, oldest first (at most
        :data:`PULL_VERSIONS_LIMIT`, the newest): a forge whose reviews do not name the
        commit they were given on (GitLab's approvals) binds each to the head of the latest
        version made before it was given, by the forge's clock
        (:func:`sluice.bot.flow.approval._bound`); never from a webhook's word. None on a
        forge whose reviews name their commit (GitHub, the local forge): nothing to bind.

        Raises:
            ForgeError: the forge could not be asked, or listed a version without its
                head or time (the gate then fails closed).
        """
        ...

    def permission(self, user: str) -> str:
        """``user``'s permission on the repository: admin, maintain, write, triage, read
        or none."""
        ...

    def react(self, number: int, comment_id: int, reaction: str) -> bool:
        """Add a reaction (``+1``, ``eyes``, ``rocket``, ``confused``) to a PR comment;
        False when the comment no longer exists (deleted before the bot got to it)."""
        ...

    def comment(self, number: int, comment_id: int) -> PostedComment | None:
        """Comment ``comment_id`` of pull request ``number`` as the forge holds it now;
        None when there is none of that id on that pull request (deleted, or another's).
        A command is run as the forge says it was written, never as a webhook says."""
        ...

    def reply(self, number: int, body: str) -> None:
        """Post a new, separate comment on the pull request (answers to commands)."""
        ...

    def team_members(self, team: str) -> frozenset[str]:
        """The logins of the members of ``team`` (``org/team-slug``); empty when the team
        does not exist or cannot be read."""
        ...

    def account_of(self, user_id: int) -> Account | None:
        """The account ``user_id`` is now (GitHub ``GET /user/{id}``, GitLab ``GET
        /users/:id``), asked once per forge: its login and whether it is a bot; None when
        the forge knows no such account (deleted, or never was), and on a forge whose people
        are logins only (the local forge). A login is renamed at will and freed for anyone
        to take: whatever was recorded with an account id is judged by the login its
        account has now, never by the one it had then."""
        ...

    def repository_of(self, repo_id: int) -> str | None:
        """The name (``owner/name``) the repository of the forge's id ``repo_id`` has now
        (GitHub ``GET /repositories/{id}``, GitLab ``GET /projects/:id``), as the service's
        credentials read it; None when they read none of that id, and on a forge without
        ids (the local forge). A delivery with an id is admitted only when this names its
        name (:func:`sluice.bot.flow.dispatch._confirmed`)."""
        ...

    def identity(self, repo_id: int | None = None) -> RepositoryIdentity | None:
        """The repository of the forge's id ``repo_id`` now, or (None) the one this forge
        works for, by its name now (GitHub ``GET /repositories/{id}`` or ``GET
        /repos/{owner}/{name}``, GitLab ``GET /projects/:id``): its id, name and when it
        was made. None when the credentials read no such repository, and on a forge
        without ids (the local forge). A name the service has records of but bound to no
        id is bound only to a repository made before them
        (:func:`sluice.bot.flow.dispatch._claim`)."""
        ...

    def made_check_run(self, repo_id: int, run_id: int, sha: str) -> bool | None:
        """Whether check run ``run_id`` on ``sha`` is one of the repository of the forge's
        id ``repo_id`` (GitHub ``GET /repositories/{id}/check-runs/{run_id}``; GitLab: the
        commit status ``run_id`` among those project ``repo_id`` lists on ``sha``): proof
        that the service worked for that repository, which a rename or a transfer keeps
        and no other repository can show. None where the forge cannot say (the local
        forge)."""
        ...

    def commit_of(self, ref: str) -> str | None:
        """The commit sha a branch or tag name points at (annotated tags peeled); None
        when there is no such ref."""
        ...

    def id_of(self, login: str) -> int | None:
        """The id of the account holding ``login`` now (GitHub ``GET /users/{login}``,
        GitLab ``GET /users?username=``), asked once per forge; None when no account has
        it, and on a forge whose people are logins only (the local forge). Asked when
        settings come into force (:mod:`sluice.bot.flow.trust`): the logins they name are
        fixed to accounts then, and a login another account takes later names nobody new."""
        ...

    def on_branch(self, sha: str, branch: str) -> bool:
        """Whether commit ``sha`` is reachable from the head of ``branch``."""
        ...

    def merge(self, number: int, method: str, sha: str) -> str:
        """Merge the pull request with ``method`` (merge, squash, rebase), only if its head
        is still ``sha``; returns the merge commit's sha."""
        ...

    def start_deployment(
        self, sha: str, environment: str, description: str, ref: str
    ) -> int | None:
        """Record a deployment of ``sha`` (on branch ``ref``) to ``environment``; its id, or
        None when the forge has no deployment records."""
        ...

    def deployment_status(self, deployment: int, state: str, description: str) -> None:
        """Set a deployment's state: in_progress, success, failure or error."""
        ...


def writer(permission: str) -> bool:
    """Whether a permission level may run commands (write or above)."""
    return permission in {"admin", "maintain", "write"}


def members(forge: Forge, names: Iterable[str]) -> frozenset[str]:
    """The people ``names`` stand for, case-folded: a login itself, an ``org/team`` (GitLab:
    a group's path) its members as the forge lists them."""
    found: set[str] = set()
    for name in names:
        found |= forge.team_members(name) if "/" in name else {name}
    return frozenset(person.casefold() for person in found)


def repo_key(forge: Forge) -> str:
    """How the ledger and the queue name ``forge``'s repository: ``<forge>:<owner/name>``."""
    return f"{forge.name}:{forge.repo}"


def opens_with(body: str | None, marker: str) -> bool:
    """Whether a comment reading ``body`` opens with ``marker`` (its first line, as the
    bot writes it): a marker further down (quoted, or added by someone who may edit the
    comment) does not make a comment the one it marks.

    >>> opens_with("<!-- m -->\\nplan", "<!-- m -->"), opens_with("x\\n<!-- m -->", "<!-- m -->")
    (True, False)
    """
    text = body or ""
    start = 0  # blanks and invisible format characters (a zero-width space) before it
    while start < len(text) and (
        text[start].isspace() or unicodedata.category(text[start]) == "Cf"
    ):
        start += 1
    return text.startswith(marker, start)
