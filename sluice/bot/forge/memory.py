"""A forge held in memory: the :class:`~sluice.bot.forge.base.Forge` protocol over plain
dicts, shipped beside the protocol (as httpx ships its ``MockTransport``) so that flow
and gate code can be exercised without HTTP, git or a network.

It keeps the protocol's promises the real forges keep: the sticky comment is matched by
its author as well as its marker, a merge happens only while the head is still the sha
asked for, a commit's files are held to the same limits and path rules as an archive.
What a test sets up (commits, branches, tags, pull requests, comments, reviews,
permissions, teams) it sets through the methods below; what the bot did it reads from the
public fields, and every protocol call, with its arguments, is in :attr:`MemoryForge.calls`
(what a wire fake's request log tells).

People are accounts, as on the real forges: an account's id never changes, its login can
(:meth:`MemoryForge.rename`: GitHub frees the old login at once, for anyone to take). A
login first seen is an account of id :func:`account_id_of` (stable: a test building a
webhook can name the same id without the forge); reviews and pull requests carry their
people's ids, and a rename moves the login everywhere the forge shows it now (reviews, a
pull request's author, roles, teams, commits), never the id.

``name`` is the forge the flow sees: ``memory`` by default; ``github`` or ``gitlab`` when
the flow's words for one forge are under test (the ledger keys the repository by it too).

>>> forge = MemoryForge("octo/warehouse")
>>> forge.commit("c1", {"config.yaml": "sluice: {}\\n"}, branch="main")
>>> forge.read_file("main", "config.yaml")
'sluice: {}\\n'
>>> forge.open_pull(1, head_sha="c1", base="main", author="alice").number
1
>>> forge.upsert_comment(1, "<!-- m -->", "<!-- m --> hello")
Posted(comment_id=1001, at=None)
>>> [c.body for c in forge.comments[1]]
['<!-- m --> hello']
"""

from __future__ import annotations

import dataclasses
import hashlib
import posixpath
import zlib
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from sluice.bot.forge.archive import TREE_LIMITS, TreeLimits, check_folder
from sluice.bot.forge.base import (
    LIST_LIMIT,
    PULL_COMMITS_LIMIT,
    PULL_VERSIONS_LIMIT,
    PUSH_RECORDS_LIMIT,
    Account,
    Check,
    DirEntry,
    Forge,
    ForgeError,
    Posted,
    PostedComment,
    PullCommit,
    PullRequest,
    PullVersion,
    PushRecord,
    RepositoryIdentity,
    Review,
    UnusableTree,
    opens_with,
)

BOT_USER = "sluice-bot"
WRITES = frozenset(
    {
        "upsert_comment",
        "edit_comment",
        "reply",
        "react",
        "set_check",
        "merge",
        "start_deployment",
        "deployment_status",
    }
)
"""The protocol's calls that change the forge (see :meth:`MemoryForge.writes`)."""
_ROLES = ("admin", "maintain", "write", "triage", "read", "none")
_JAN_2026 = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def account_id_of(login: str) -> int:
    """The id of the account the in-memory forge first sees as ``login`` (any case): stable
    and positive, so a test's webhook can carry it without asking the forge."""
    return zlib.crc32(login.casefold().encode()) % 1_000_000_000 + 1


@dataclass
class Comment:
    """A comment on a pull request: the bot's (sticky or a reply) or a person's."""

    id: int
    author: str
    body: str
    reactions: list[str] = field(default_factory=list)
    updated: int | None = None  # when last written, by the forge's clock (None: no clock)


@dataclass(frozen=True)
class Merge:
    """A merge the bot made: pull request, method, the head it merged, the merge commit."""

    number: int
    method: str
    sha: str
    merge_sha: str


@dataclass
class Deployment:
    """A deployment record: ``sha`` to ``environment`` from branch ``ref``; its states."""

    id: int
    sha: str
    environment: str
    ref: str
    description: str
    statuses: list[tuple[str, str]] = field(default_factory=list)  # (state, description)


@dataclass(frozen=True)
class CheckRun:
    """A check run on a commit (GitHub's): its id, the App that made it, what it shows.
    The bot's are made by :attr:`MemoryForge.app_id`; a test adds anyone else's with
    :meth:`MemoryForge.foreign_run`."""

    id: int
    sha: str
    app: int
    check: Check


ACTIONS_APP = 15368
"""GitHub Actions' App id: what a workflow's ``GITHUB_TOKEN`` makes its check runs as."""


@dataclass
class MemoryForge:
    """One repository's forge, in memory (see the module's doc).

    ``bot_user`` writes the bot's comments; a comment holding the marker written by
    anyone else is never taken for the sticky one. ``tree_limits`` are checked when a
    commit's files are written out, as an archive's would be.
    """

    repo: str = "octo/warehouse"
    bot_user: str = BOT_USER
    tree_limits: TreeLimits = TREE_LIMITS
    name: str = "memory"
    comment_limit: int = 65536
    files: dict[str, dict[str, bytes]] = field(default_factory=dict)  # sha -> path -> bytes
    parents: dict[str, tuple[str, ...]] = field(default_factory=dict)  # sha -> parents
    # sha -> (author, committer) logins; a commit not in it: neither maps to an account
    people: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    # case-folded login -> account id, where it is not account_id_of(login): renames
    accounts: dict[str, int] = field(default_factory=dict)
    # case-folded login (of now) -> whether its account is a bot, as the forge answers it
    # (GitHub's type Bot, GitLab's bot); a login not in it: the forge does not say
    bots: dict[str, bool] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)  # branch or tag -> sha
    pulls: dict[int, PullRequest] = field(default_factory=dict)
    comments: dict[int, list[Comment]] = field(default_factory=dict)  # PR -> comments
    checks: dict[str, dict[str, Check]] = field(default_factory=dict)  # sha -> name -> check
    review_log: dict[int, list[Review]] = field(default_factory=dict)  # PR -> reviews
    roles: dict[str, str] = field(default_factory=dict)  # login (any case) -> role
    teams: dict[str, frozenset[str]] = field(default_factory=dict)  # "org/slug" -> logins
    merges: list[Merge] = field(default_factory=list)
    # (branch, head sha, pusher's login) of each push the forge records, oldest first
    # (GitHub's repository activity, GitLab's push events): whether or not a hook was sent
    push_log: list[tuple[str, str, str]] = field(default_factory=list)
    deployments: list[Deployment] = field(default_factory=list)
    gone: set[str] = field(default_factory=set)  # case-folded logins no account has now
    calls: list[tuple[str, tuple[object, ...]]] = field(default_factory=list)  # (method, args)
    clock: Callable[[], int] | None = None
    """The time (epoch ms) a review is submitted at, plus a second per review of its PR
    (the first a second after it);
    None: 2026-01-01T00:00:00Z plus that. A flow whose clock is later sets it (the gate
    counts a review only if given once its commit had the plan it has)."""
    app_id: int = 4242
    """The App the bot's check runs are made by (GitHub's ``check_run.app.id``)."""
    runs: dict[int, CheckRun] = field(default_factory=dict)
    """Every check run by id: the bot's (its latest of each check is also in ``checks``)
    and those others made (:meth:`foreign_run`), which share names with the bot's."""
    repositories: dict[int, str] = field(default_factory=dict)
    """The forge's id -> the name (``owner/name``) of each repository its credentials read,
    as it is now (:meth:`repository_of`; a test renames one here)."""
    run_repository: dict[int, int] = field(default_factory=dict)
    """A check run's id -> the id of the repository it was made in (:attr:`repositories`'
    id of :attr:`repo` then; none there: no entry)."""
    created: dict[int, int] = field(default_factory=dict)
    """The forge's id -> when the repository was made (epoch ms; :meth:`identity`); one
    not here was made at the epoch, before any record a test's clock makes."""
    versions: dict[int, list[PullVersion]] = field(default_factory=dict)
    """A pull request's number -> its versions, oldest first (GitLab's merge request
    versions, :meth:`pull_versions`): one made by :meth:`open_pull` and by each
    :meth:`push` that moves its head, at the forge's time (:attr:`clock`), a second after
    anything the forge stamped on it before (its versions, its reviews) at the least, as
    the forge's own clock runs on."""
    _ids: int = 1000
    _named: list[str] = field(default_factory=list)  # logins account_id was asked of

    # -- what a test sets up -------------------------------------------------------------

    def account_id(self, login: str) -> int:
        """The id of the account whose login is ``login`` now (any case)."""
        if login not in self._named:
            self._named.append(login)
        return self.accounts.get(login.casefold(), account_id_of(login))

    def rename(self, old: str, new: str) -> int:
        """The account ``old`` is renamed ``new`` (its id kept; the id returned): the forge
        shows ``new`` wherever it showed the account (its reviews, the pull requests it
        opened, its role, its teams, the commits it is named on); ``old`` is free, and
        whoever takes it next is another account."""
        uid = self.account_id(old)
        if self.account_id(new) != uid and new.casefold() in self._logins():
            raise ForgeError(f"memory: login {new!r} is taken")
        self.accounts[new.casefold()] = uid
        self.accounts[old.casefold()] = 2_000_000_000 + len(self.accounts)  # a new account's
        fold = old.casefold()

        def moved(login: str | None) -> str | None:
            return new if login is not None and login.casefold() == fold else login

        for key in [k for k in self.roles if k.casefold() == fold]:
            self.roles[new] = self.roles.pop(key)
        self.teams = {
            team: frozenset(str(moved(m)) for m in members) for team, members in self.teams.items()
        }
        for number, log in self.review_log.items():
            self.review_log[number] = [
                dataclasses.replace(r, user=new) if r.user_id == uid else r for r in log
            ]
        for number, pull in self.pulls.items():
            if pull.author_id == uid:
                self.pulls[number] = dataclasses.replace(pull, author=new)
        self.people = {sha: (moved(a), moved(c)) for sha, (a, c) in self.people.items()}
        if fold in self.bots:  # what the account is goes with it
            self.bots[new.casefold()] = self.bots.pop(fold)
        return uid

    def _logins(self) -> set[str]:
        """The logins (case-folded) the forge knows of accounts now."""
        known = {k.casefold() for k in self.roles}
        known |= {m.casefold() for members in self.teams.values() for m in members}
        known |= {r.user.casefold() for log in self.review_log.values() for r in log}
        return known

    def commit(
        self,
        sha: str,
        files: dict[str, str | bytes],
        *,
        parents: tuple[str, ...] = (),
        branch: str | None = None,
        author: str | None = None,
        committer: str | None = None,
    ) -> None:
        """Record commit ``sha`` holding ``files`` (path -> text or bytes), its ``parents``;
        with ``branch``, the branch moves to it (its previous head becomes a parent).
        ``author`` and ``committer``: the logins the forge lists it with (None: none)."""
        if author is not None or committer is not None:
            self.people[sha] = (author, committer)
        if not parents and sha in self.parents:
            parents = self.parents[sha]  # the same commit again: its history stays
        elif branch is not None and self.refs.get(branch, sha) != sha and not parents:
            parents = (self.refs[branch],)
        self.files[sha] = {
            path: data.encode("utf-8") if isinstance(data, str) else data
            for path, data in files.items()
        }
        self.parents[sha] = parents
        if branch is not None:
            self.refs[branch] = sha

    def write_file(
        self, branch: str, path: str, text: str, *, sha: str | None = None, start: str = "main"
    ) -> str:
        """A commit on ``branch`` that writes ``path`` (the rest as the branch's head has
        it; a new branch starts from ``start``); its sha (``sha``, or one made up)."""
        tip = self.refs.get(branch) or self.refs.get(start)
        files: dict[str, str | bytes] = dict(self.files.get(tip, {})) if tip else {}
        files[path] = text
        sha = sha or hashlib.sha1(f"{tip} {branch} {path} {text}".encode()).hexdigest()
        self.commit(sha, files, parents=(tip,) if tip else (), branch=branch)
        return sha

    def commit_folder(
        self,
        sha: str,
        folder: Path,
        *,
        parents: tuple[str, ...] = (),
        branch: str | None = None,
    ) -> None:
        """:meth:`commit` of the files under ``folder`` (as a forge's archive of it holds
        them: links and special files left out)."""
        files: dict[str, str | bytes] = {
            path.relative_to(folder).as_posix(): path.read_bytes()
            for path in sorted(folder.rglob("*"))
            if path.is_file() and not path.is_symlink()
        }
        self.commit(sha, files, parents=parents, branch=branch)

    def tag(self, name: str, sha: str) -> None:
        """Tag commit ``sha`` as ``name`` (``commit_of`` answers the commit, as for a
        peeled annotated tag)."""
        if sha not in self.files:
            raise ForgeError(f"memory: no commit {sha} to tag")
        self.refs[name] = sha

    def open_pull(
        self,
        number: int,
        *,
        head_sha: str,
        base: str,
        author: str,
        head_ref: str = "change",
        fork: bool = False,
        draft: bool = False,
        title: str = "",
        pushed_by: str | None = None,
    ) -> PullRequest:
        """Open pull request ``number`` from ``head_sha`` into branch ``base``; the forge
        records ``pushed_by`` (by default its author) as who pushed ``head_ref`` to
        ``head_sha``, ``""`` nobody (a fork's pushes are never recorded here)."""
        base_sha = self.refs.get(base)
        if base_sha is None:
            raise ForgeError(f"memory: no branch {base!r} to open a pull request into")
        pull = PullRequest(
            number,
            head_sha,
            head_ref,
            base,
            base_sha,
            author,
            draft,
            fork,
            open=True,
            merged=False,
            title=title,
            author_id=self.account_id(author),
        )
        self.pulls[number] = pull
        self._record_push(pull, author if pushed_by is None else pushed_by)
        self._version(pull)
        return pull

    def push(self, number: int, head_sha: str, by: str | None = None) -> PullRequest:
        """A new head commit on pull request ``number``, recorded as pushed by ``by`` (by
        default the pull request's author; ``""`` nobody)."""
        before = self._pull(number).head_sha
        pull = dataclasses.replace(self._pull(number), head_sha=head_sha)
        self.pulls[number] = pull
        self._record_push(pull, pull.author if by is None else by)
        if head_sha != before:
            self._version(pull)
        return pull

    def _record_push(self, pull: PullRequest, by: str) -> None:
        if by and not pull.fork:
            self.push_log.append((pull.head_ref, pull.head_sha, by))

    def _version(self, pull: PullRequest) -> None:
        """A new version of ``pull`` at its head, stamped by the forge's clock."""
        made = self._after(pull.number, self.clock() if self.clock is not None else _JAN_2026)
        self.versions.setdefault(pull.number, []).append(PullVersion(pull.head_sha, made))

    def _after(self, number: int, at: int) -> int:
        """``at``, or a second after the latest time the forge stamped on pull request
        ``number`` (its versions, its reviews) where that is later: its clock runs on."""
        stamped = [v.created_ms for v in self.versions.get(number, [])]
        stamped += [
            ms for r in self.review_log.get(number, []) if (ms := _ms(r.submitted_at)) is not None
        ]
        return max([at, *(ms + 1000 for ms in stamped)])

    def close_pull(self, number: int, *, merged: bool = False) -> PullRequest:
        """Someone closes pull request ``number``, or merges it outside the bot (the test
        commits the merge and moves the base itself)."""
        pull = dataclasses.replace(self._pull(number), open=False, merged=merged)
        self.pulls[number] = pull
        return pull

    def add_review(
        self,
        number: int,
        user: str,
        state: str,
        commit_sha: str | None = None,
        *,
        unbound: bool = False,
    ) -> Review:
        """``user`` reviews pull request ``number`` (at its head unless ``commit_sha``);
        ``unbound``: the review names no commit (as GitLab lists its approvals)."""
        self._ids += 1
        count = len(self.review_log.get(number, []))
        # A second after now at the least (a person reads the plan before approving; the
        # gate counts no approval stamped in the second its plan was published), and a
        # second after the review before; one naming no commit (GitLab's) a second after
        # the pull request's latest version too: the forge's clock runs on.
        at = (self.clock() if self.clock is not None else _JAN_2026) + (count + 1) * 1000
        if unbound:
            at = self._after(number, at)
        review = Review(
            self._ids,
            user,
            state.upper(),
            None if unbound else commit_sha or self._pull(number).head_sha,
            _iso(at),
            user_id=self.account_id(user),
        )
        self.review_log.setdefault(number, []).append(review)
        return review

    def dismiss_review(self, number: int, review_id: int) -> None:
        """Dismiss a review (GitHub rewrites its state to DISMISSED)."""
        log = self.review_log.get(number, [])
        for index, review in enumerate(log):
            if review.id == review_id:
                log[index] = dataclasses.replace(review, state="DISMISSED")
                return
        raise ForgeError(f"memory: no review {review_id} on #{number}")

    def withdraw_reviews(self, number: int, user: str) -> None:
        """``user``'s reviews are gone from the list (a GitLab approval taken back)."""
        self.review_log[number] = [r for r in self.review_log.get(number, []) if r.user != user]

    def add_comment(
        self, number: int, author: str, body: str, *, comment_id: int | None = None
    ) -> int:
        """A person's comment on pull request ``number`` (with ``comment_id``, that id);
        its id."""
        if comment_id is None:
            self._ids += 1
            comment_id = self._ids
        elif any(c.id == comment_id for cs in self.comments.values() for c in cs):
            raise ForgeError(f"memory: comment {comment_id} exists already")
        self.comments.setdefault(number, []).append(Comment(comment_id, author, body))
        return comment_id

    def delete_comment(self, number: int, comment_id: int) -> None:
        """Someone deletes comment ``comment_id``."""
        before = self.comments.get(number, [])
        self.comments[number] = [c for c in before if c.id != comment_id]
        if len(self.comments[number]) == len(before):
            raise ForgeError(f"memory: no comment {comment_id} on #{number}")

    def bot_comments(self, number: int) -> list[str]:
        """The bodies of the bot's comments on pull request ``number``, oldest first."""
        return [c.body for c in self.comments.get(number, []) if c.author == self.bot_user]

    def reactions(self, number: int) -> list[tuple[int, str]]:
        """(comment id, reaction) for every reaction on pull request ``number``'s comments,
        by comment then in the order given."""
        return [(c.id, r) for c in self.comments.get(number, []) for r in c.reactions]

    def writes(self, since: int = 0) -> list[tuple[str, tuple[object, ...]]]:
        """The calls from ``since`` on (an index into :attr:`calls`) that change the forge."""
        return [call for call in self.calls[since:] if call[0] in WRITES]

    def _call(self, method: str, *args: object) -> None:
        self.calls.append((method, args))

    # -- the protocol: files and refs ------------------------------------------------------

    def fetch_tree(self, sha: str, dest: Path) -> None:
        """Write the files of ``sha`` into ``dest``, held to the limits and path rules an
        archive is held to (:class:`UnusableTree` leaves ``dest`` empty)."""
        self._call("fetch_tree", sha, dest)
        tree = self.files.get(sha)
        if tree is None:
            raise ForgeError(f"memory: no commit {sha}")
        for path in tree:
            parts = path.split("/")
            if path.startswith("/") or ".." in parts or posixpath.normpath(path) != path:
                raise UnusableTree(f"memory: the files of {sha} hold an unsafe path {path!r}")
        dest.mkdir(parents=True, exist_ok=True)
        try:
            for path, data in tree.items():
                target = dest / path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            check_folder(dest, forge="memory", sha=sha, limits=self.tree_limits)
        except UnusableTree:
            for item in sorted(dest.iterdir()):
                _remove(item)
            raise

    def read_file(self, ref: str, path: str) -> str | None:
        self._call("read_file", ref, path)
        sha = self._resolve(ref) or (ref if ref in self.files else None)
        data = self.files.get(sha, {}).get(path) if sha is not None else None
        return None if data is None else data.decode("utf-8")

    def list_dir(self, ref: str, path: str) -> list[DirEntry] | None:
        self._call("list_dir", ref, path)
        sha = self._resolve(ref) or (ref if ref in self.files else None)
        tree = self.files.get(sha, {}) if sha is not None else {}
        folder = path.strip("/")
        if folder in tree:
            raise ForgeError(f"memory: listing {path} at {ref} failed: it is a file")
        prefix = folder + "/" if folder else ""
        found: dict[str, DirEntry] = {}
        for name, data in tree.items():
            if not name.startswith(prefix):
                continue
            first, slash, _rest = name[len(prefix) :].partition("/")
            found[first] = DirEntry(first, "dir") if slash else DirEntry(first, "file", len(data))
        if not found:
            return None
        if len(found) > LIST_LIMIT:
            raise ForgeError(f"memory: listing {path} at {ref} failed: over {LIST_LIMIT} entries")
        return [found[name] for name in sorted(found)]

    def changed_files(self, number: int) -> list[str] | None:
        self._call("changed_files", number)
        pull = self._pull(number)
        base, head = self.files.get(pull.base_sha, {}), self.files.get(pull.head_sha, {})
        return sorted(p for p in set(base) | set(head) if base.get(p) != head.get(p))

    def id_of(self, login: str) -> int | None:
        """The id of the account holding ``login`` now; None for a login in :attr:`gone`."""
        self._call("id_of", login)
        return None if login.casefold() in self.gone else self.account_id(login)

    def commit_of(self, ref: str) -> str | None:
        self._call("commit_of", ref)
        return self._resolve(ref)

    def _resolve(self, ref: str) -> str | None:
        # ``main``, ``heads/main``, ``tags/v1``, ``refs/tags/v1``: branches and tags
        # share one namespace here.
        name = ref.removeprefix("refs/")
        for prefix in ("heads/", "tags/"):
            if name.startswith(prefix) and name.removeprefix(prefix) in self.refs:
                return self.refs[name.removeprefix(prefix)]
        return self.refs.get(name)

    def on_branch(self, sha: str, branch: str) -> bool:
        self._call("on_branch", sha, branch)
        tip = self.refs.get(branch, branch if branch in self.files else None)  # or a commit
        return sha in self._ancestors(tip)

    # -- the protocol: pull requests -------------------------------------------------------

    def _pull(self, number: int) -> PullRequest:
        pull = self.pulls.get(number)
        if pull is None:
            raise ForgeError(f"memory: no pull request #{number}")
        return pull

    def pull_request(self, number: int) -> PullRequest:
        self._call("pull_request", number)
        return self._pull(number)

    def pull_commits(self, number: int) -> list[PullCommit] | None:
        self._call("pull_commits", number)
        pull = self._pull(number)
        on_base = self._ancestors(self.refs.get(pull.base_ref, pull.base_sha))
        ours = [sha for sha in self._ancestors(pull.head_sha) if sha not in on_base]
        if len(ours) > PULL_COMMITS_LIMIT:
            return None
        return [self._pull_commit(sha) for sha in reversed(ours)]

    def _pull_commit(self, sha: str) -> PullCommit:
        """Commit ``sha`` as the forge lists it: the accounts its e-mails map to now, by
        login and id (an account's id is kept through a rename)."""
        author, committer = self.people.get(sha, (None, None))

        def uid(login: str | None) -> int | None:
            if login is None:
                return None
            return self.accounts.get(login.casefold(), account_id_of(login))

        return PullCommit(sha, author, committer, uid(author), uid(committer))

    def _ancestors(self, tip: str | None) -> list[str]:
        """``tip`` and every commit before it, newest first (parents after children)."""
        seen: dict[str, None] = {}
        todo = [tip] if tip is not None else []
        while todo:
            current = todo.pop(0)
            if current not in seen:
                seen[current] = None
                todo.extend(self.parents.get(current, ()))
        return list(seen)

    def upsert_comment(
        self, number: int, marker: str, body: str, comment_id: int | None = None
    ) -> Posted:
        """At the forge's :attr:`clock` (None: it keeps no time of comments)."""
        self._call("upsert_comment", number, marker, body)
        if marker not in body:
            raise ForgeError("memory: the comment's body does not hold its marker")
        self._pull(number)
        at = self.clock() if self.clock is not None else None
        for comment in self._own(number, marker, comment_id):
            if comment.body != body:
                comment.body, comment.updated = body, at
            return Posted(comment.id, comment.updated)
        self._ids += 1
        made = Comment(self._ids, self.bot_user, body, updated=at)
        self.comments.setdefault(number, []).append(made)
        return Posted(made.id, at)

    def edit_comment(self, number: int, comment_id: int, body: str) -> bool:
        self._call("edit_comment", number, comment_id, body)
        for comment in self.comments.get(number, []):
            if comment.id == comment_id and comment.author == self.bot_user:
                if comment.body != body:
                    comment.body = body
                    comment.updated = self.clock() if self.clock is not None else None
                return True
        return False

    def own_comments(self, number: int) -> list[PostedComment]:
        self._call("own_comments", number)
        return [
            PostedComment(c.author, self.account_id(c.author), c.body, c.updated, True, c.id)
            for c in self.comments.get(number, [])
            if c.author == self.bot_user
        ]

    def _own(self, number: int, marker: str, comment_id: int | None) -> list[Comment]:
        """The bot's comment ``comment_id`` on PR ``number``, else its oldest opening with
        ``marker`` (none: empty)."""
        mine = [c for c in self.comments.get(number, []) if c.author == self.bot_user]
        by_id = [c for c in mine if comment_id is not None and c.id == comment_id]
        return by_id or [c for c in mine if opens_with(c.body, marker)][:1]

    def reply(self, number: int, body: str) -> None:
        self._call("reply", number, body)
        self._pull(number)
        self._ids += 1
        self.comments.setdefault(number, []).append(Comment(self._ids, self.bot_user, body))

    def comment(self, number: int, comment_id: int) -> PostedComment | None:
        self._call("comment", number, comment_id)
        for comment in self.comments.get(number, []):
            if comment.id == comment_id:
                return PostedComment(
                    comment.author,
                    self.account_id(comment.author),
                    comment.body,
                    self.clock() if self.clock is not None else None,  # its latest time
                    own=comment.author == self.bot_user,
                    comment_id=comment.id,
                )
        return None

    def react(self, number: int, comment_id: int, reaction: str) -> bool:
        self._call("react", number, comment_id, reaction)
        for comment in self.comments.get(number, []):
            if comment.id == comment_id:
                comment.reactions.append(reaction)
                return True
        return False

    def foreign_run(self, sha: str, check: Check, app: int = ACTIONS_APP) -> int:
        """A check run someone else made on ``sha`` (another App, or a workflow's token:
        GitHub Actions' App), perhaps named as one of the bot's; its id. The bot never
        edits it (GitHub refuses: 403) and it is not in ``checks``."""
        self._ids += 1
        self.runs[self._ids] = CheckRun(self._ids, sha, app, check)
        return self._ids

    def run_id(self, sha: str, name: str) -> int | None:
        """The id of the bot's latest check run ``name`` on ``sha``; None if it made none."""
        ours = [r.id for r in self.runs.values() if r.app == self.app_id]
        return max(
            (i for i in ours if self.runs[i].sha == sha and self.runs[i].check.name == name),
            default=None,
        )

    def set_check(self, sha: str, check: Check, run_id: int | None = None) -> int | None:
        """The bot's run ``run_id`` edited when it is the bot's run of this check on
        ``sha``; otherwise a new run is made, as the GitHub forge does (another App's run,
        whatever its name, is never edited: GitHub answers 403)."""
        self._call("set_check", sha, check)
        run = self.runs.get(run_id) if run_id is not None else None
        if run is None or run.app != self.app_id or (run.sha, run.check.name) != (sha, check.name):
            self._ids += 1
            made = self._ids
        else:
            made = run.id
        self.runs[made] = CheckRun(made, sha, self.app_id, check)
        self.checks.setdefault(sha, {})[check.name] = check
        own = self.identity()  # the repository named so when the run was made
        if own is not None:
            self.run_repository[made] = own.id
        return made

    def reviews(self, number: int) -> list[Review]:
        self._call("reviews", number)
        self._pull(number)
        return list(self.review_log.get(number, []))

    def pull_versions(self, number: int) -> list[PullVersion] | None:
        """:attr:`versions` of pull request ``number``, oldest first: the newest
        :data:`PULL_VERSIONS_LIMIT` of them, as GitLab's forge reads its own."""
        self._call("pull_versions", number)
        self._pull(number)
        return list(self.versions.get(number, [])[-PULL_VERSIONS_LIMIT:])

    def permission(self, user: str) -> str:
        self._call("permission", user)
        role = {k.casefold(): v for k, v in self.roles.items()}.get(user.casefold(), "none")
        return role if role in _ROLES else "none"

    def team_members(self, team: str) -> frozenset[str]:
        self._call("team_members", team)
        wanted = team.casefold()  # GitHub's org and team slugs ignore case
        return next(
            (frozenset(v) for k, v in self.teams.items() if k.casefold() == wanted), frozenset()
        )

    def account_of(self, user_id: int) -> Account | None:
        """The account ``user_id`` is now, among those the forge has seen (roles, teams,
        reviews, pull requests, commits, renames, any a test asked the id of): its login of
        now, a bot as ``bots`` says."""
        self._call("account_of", user_id)
        seen = [*self.roles, *(m for members in self.teams.values() for m in members)]
        seen += [r.user for log in self.review_log.values() for r in log]
        seen += [p.author for p in self.pulls.values()]
        seen += [who for pair in self.people.values() for who in pair if who]
        seen += [*self._named, *self.accounts, *self.bots]
        login = next((login for login in seen if self.account_id(login) == user_id), None)
        return None if login is None else Account(login, self.bots.get(login.casefold()))

    def repository_of(self, repo_id: int) -> str | None:
        """:attr:`repositories`' name of ``repo_id``; None: not there."""
        self._call("repository_of", repo_id)
        return self.repositories.get(repo_id)

    def identity(self, repo_id: int | None = None) -> RepositoryIdentity | None:
        """:attr:`repositories`' ``repo_id`` (None: the one named :attr:`repo` there) with
        its :attr:`created` time; None: not there."""
        self._call("identity", repo_id)
        if repo_id is None:
            repo_id = self._own_id()
        name = None if repo_id is None else self.repositories.get(repo_id)
        if repo_id is None or name is None:
            return None
        return RepositoryIdentity(repo_id, name, self.created.get(repo_id, 0))

    def _own_id(self) -> int | None:
        """:attr:`repositories`' id of :attr:`repo` now; None: not there."""
        wanted = self.repo.casefold()
        return next((k for k, name in self.repositories.items() if name.casefold() == wanted), None)

    def made_check_run(self, repo_id: int, run_id: int, sha: str) -> bool:
        """Whether run ``run_id`` on ``sha`` was made in repository ``repo_id``
        (:attr:`run_repository`)."""
        self._call("made_check_run", repo_id, run_id, sha)
        run = self.runs.get(run_id)
        ours = self.run_repository.get(run_id) == repo_id
        return run is not None and ours and run.sha.lower() == sha.lower()

    def pushers_of(self, branch: str, sha: str) -> list[tuple[str, int | None]] | None:
        """Who :attr:`push_log` names as pushing ``branch`` to ``sha``, within its newest
        :data:`PUSH_RECORDS_LIMIT` records, as GitHub's and GitLab's forges read theirs."""
        self._call("pushers_of", branch, sha)
        newest = self.push_log[::-1][:PUSH_RECORDS_LIMIT]
        named = [who for ref, head, who in newest if ref == branch and head == sha.lower()]
        return [(who, self.account_id(who)) for who in dict.fromkeys(named)]

    def push_records(self, shas: Collection[str]) -> list[PushRecord] | None:
        """The records of :attr:`push_log` of any branch to one of ``shas``, within its
        newest :data:`PUSH_RECORDS_LIMIT` (of every branch), newest first; each one's
        ``before`` is the head its branch's previous record left (None for the first)."""
        self._call("push_records", tuple(shas))
        wanted = {sha.lower() for sha in shas}
        before: list[str | None] = []
        last: dict[str, str] = {}
        for ref, head, _who in self.push_log:
            before.append(last.get(ref))
            last[ref] = head
        first = max(0, len(self.push_log) - PUSH_RECORDS_LIMIT)
        return [
            PushRecord(before[n], head, who, self.account_id(who), f"refs/heads/{ref}")
            for n in range(len(self.push_log) - 1, first - 1, -1)
            for ref, head, who in [self.push_log[n]]
            if head in wanted and who
        ]

    def merge(self, number: int, method: str, sha: str) -> str:
        self._call("merge", number, method, sha)
        pull = self._pull(number)
        if not pull.open or pull.merged:
            raise ForgeError(f"memory: pull request #{number} is not open")
        if pull.head_sha != sha:
            raise ForgeError(
                f"memory: pull request #{number}'s head is {pull.head_sha[:7]}, not {sha[:7]}: "
                "the head changed; merge refused"
            )
        if method not in ("merge", "squash", "rebase"):
            raise ForgeError(f"memory: unknown merge method {method!r}")
        base = self.refs.get(pull.base_ref)
        merged = f"m{len(self.merges) + 1:039x}"
        self.commit(
            merged, dict(self.files.get(sha, {})), parents=tuple(p for p in (base, sha) if p)
        )
        self.refs[pull.base_ref] = merged
        self.pulls[number] = dataclasses.replace(pull, open=False, merged=True)
        self.merges.append(Merge(number, method, sha, merged))
        return merged

    def start_deployment(self, sha: str, environment: str, description: str, ref: str) -> int:
        self._call("start_deployment", sha, environment, description, ref)
        self._ids += 1
        self.deployments.append(Deployment(self._ids, sha, environment, ref, description))
        return self._ids

    def deployment_status(self, deployment: int, state: str, description: str) -> None:
        self._call("deployment_status", deployment, state, description)
        for record in self.deployments:
            if record.id == deployment:
                record.statuses.append((state, description))
                return
        raise ForgeError(f"memory: no deployment {deployment}")


def _ms(moment: str | None) -> int | None:
    """An ISO 8601 time (a review's ``submitted_at``) as epoch ms; None if absent or bad."""
    try:
        return int(datetime.fromisoformat(moment).timestamp() * 1000) if moment else None
    except ValueError:
        return None


def _iso(ms: int) -> str:
    """``ms`` (epoch) as GitHub writes a time: ``2026-01-01T00:00:00Z``."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        for item in path.iterdir():
            _remove(item)
        path.rmdir()
    else:
        path.unlink()


def as_forge(forge: MemoryForge) -> Forge:
    """``forge`` as the protocol it implements (where mypy checks that it does)."""
    return forge
