"""A git repository on disk as the forge: pull requests without GitHub.

A pull request is a pair of branches (base, head) with a number. Everything a forge would
keep (the PR records, reviews, comments, reactions, check runs, deployments) is written as
JSON and Markdown files under ``<repo>/.sluice/forge/`` (each file replaced atomically),
so a person or another CI system (Jenkins, Buildkite) can read what Sluice said::

    .sluice/forge/
      prs/<n>.json                 the PR: branches, author, state, head at merge, merge sha
      prs/<n>/comment.md           the bot's sticky comment (one per marker: comment-2.md ...)
      prs/<n>/authors.json         who wrote each of those files (the forge's bot user)
      prs/<n>/replies/001.md       the bot's replies to commands, in order
      prs/<n>/comments.json        comments people wrote (with their reactions)
      prs/<n>/reviews.json         reviews (approvals) people gave
      checks/<sha>.json            check name -> status, conclusion, title, summary, history
      deployments.json             deployment records and their states
      collaborators.json           optional input: {"user": "role"} (see permission)
      teams.json                   optional input: {"org/team": ["user", ...]}

Git is run as a subprocess (``git`` 2.38 or later, for ``merge-tree --write-tree``); merges
are made without touching a worktree, except that a base branch checked out in the
repository's worktree is fast-forwarded there so the files on disk follow it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tarfile
import tempfile
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

from sluice.bot.forge.archive import TREE_LIMITS, TreeLimits, checked_members
from sluice.bot.forge.base import (
    PULL_COMMITS_LIMIT,
    Account,
    Check,
    ForgeError,
    Posted,
    PostedComment,
    PullCommit,
    PullRequest,
    PullVersion,
    PushRecord,
    Review,
    opens_with,
)
from sluice.bot.forge.local_git import GitRepo

try:  # a lock between two commands run at once; absent on Windows, where it is skipped
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

ROLES = ("admin", "maintain", "write", "triage", "read", "none")
BOT_USER = "sluice"
"""Who the local forge's sticky comments are written by, unless told otherwise."""
METHODS = ("merge", "squash", "rebase")
HISTORY_LIMIT = 50
_SHA = re.compile(r"[0-9a-f]{7,64}")
_DEFAULT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Sluice",
    "GIT_AUTHOR_EMAIL": "sluice@localhost",
    "GIT_COMMITTER_NAME": "Sluice",
    "GIT_COMMITTER_EMAIL": "sluice@localhost",
}


def _now() -> str:
    """Now, to the millisecond (the gate compares an approval's time with its plan's)."""
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}Z"


class LocalForge(GitRepo):
    """The forge of the git repository at ``repo_dir``, its records in ``store_dir``
    (default ``<repo>/.sluice/forge``), its sticky comments written as ``bot_user``, the
    files of a commit held to ``tree_limits``.

    Raises:
        ForgeError: ``repo_dir`` is not a git repository, or git is not installed.
    """

    name: str = "local"
    comment_limit: int = 1_000_000

    def __init__(
        self,
        repo_dir: Path,
        store_dir: Path | None = None,
        bot_user: str = BOT_USER,
        tree_limits: TreeLimits = TREE_LIMITS,
    ) -> None:
        super().__init__(repo_dir, tree_limits)
        self.store = (store_dir or self.root / ".sluice" / "forge").resolve()
        self.bot_user = bot_user
        self._lock_depth = 0
        self._ignored = False
        self._lock_file: IO[str] | None = None

    # -- the store -----------------------------------------------------------------------

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the store's lock (two commands at once do not lose each other's writes)."""
        if self._lock_depth == 0:
            if not self._ignored:  # keep the records out of commits and branch switches
                self.ignore(self.store)
                self._ignored = True
            self.store.mkdir(parents=True, exist_ok=True)
            self._lock_file = open(self.store / ".lock", "a")  # noqa: SIM115
            if fcntl is not None:
                fcntl.flock(self._lock_file.fileno(), fcntl.LOCK_EX)
        self._lock_depth += 1
        try:
            yield
        finally:
            self._lock_depth -= 1
            if self._lock_depth == 0 and self._lock_file is not None:
                self._lock_file.close()  # closing releases the lock
                self._lock_file = None

    def _read(self, path: Path, default: Any) -> Any:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return default
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ForgeError(
                f"local: {path} is not valid JSON: {exc.msg}", path=path, line=exc.lineno
            ) from None

    def _write(self, path: Path, data: Any) -> None:
        text = data if isinstance(data, str) else json.dumps(data, indent=2, sort_keys=True) + "\n"
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
            os.replace(temp, path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise

    def _pr_path(self, number: int) -> Path:
        return self.store / "prs" / f"{int(number)}.json"

    def _pr_dir(self, number: int) -> Path:
        return self.store / "prs" / str(int(number))

    def _record(self, number: int) -> dict[str, Any]:
        record = self._read(self._pr_path(number), None)
        if not isinstance(record, dict):
            raise ForgeError(
                f"local: there is no pull request #{number} in {self.repo}",
                hint="`sluice pr list` shows the pull requests",
            )
        return record

    def ignore(self, path: Path) -> None:
        """Keep ``path`` (inside the worktree) out of ``git status`` through the
        repository's own ``info/exclude``, unless it is ignored already."""
        if self.bare:
            return
        try:
            relative = path.resolve().relative_to(self.root)
        except ValueError:
            return
        if not relative.parts:
            return
        done = self._run("check-ignore", "-q", "--no-index", str(relative), what="checking ignores")
        if done.returncode == 0:
            return
        exclude = Path(
            self._git("rev-parse", "--git-path", "info/exclude", what="ignoring").strip()
        )
        exclude = exclude if exclude.is_absolute() else self._cwd / exclude
        exclude.parent.mkdir(parents=True, exist_ok=True)
        with exclude.open("a", encoding="utf-8") as out:
            out.write(f"/{relative.as_posix()}/\n")

    # -- pull requests -------------------------------------------------------------------

    def open_pull(self, base: str, head: str, author: str, title: str = "") -> PullRequest:
        """Open pull request ``head`` -> ``base``; the next free number."""
        base_sha, head_sha = self.branch_sha(base), self.branch_sha(head)
        for branch, sha in ((base, base_sha), (head, head_sha)):
            if sha is None:
                raise ForgeError(f"local: there is no branch '{branch}' in {self.repo}")
        if base == head:
            raise ForgeError(f"local: the head and base branches are both '{base}'")
        with self._locked():
            numbers = [p.stem for p in (self.store / "prs").glob("*.json")]
            known = [int(n) for n in numbers if n.isdigit()]
            for number in known:
                record = self._record(number)
                if record["state"] == "open" and (record["base"], record["head"]) == (base, head):
                    raise ForgeError(
                        f"local: pull request #{number} is already open for {head} -> {base}"
                    )
            number = max(known, default=0) + 1
            self._write(
                self._pr_path(number),
                {
                    "number": number,
                    "title": title or head,
                    "base": base,
                    "head": head,
                    "author": author,
                    "state": "open",
                    "head_sha": head_sha,
                    "base_sha": base_sha,
                    "merge_sha": None,
                    "merge_method": None,
                    "created_at": _now(),
                    "closed_at": None,
                    "draft": False,
                },
            )
        return self.pull_request(number)

    def pull_numbers(self) -> list[int]:
        """Every pull request's number, in order."""
        names = [p.stem for p in (self.store / "prs").glob("*.json")]
        return sorted(int(n) for n in names if n.isdigit())

    def pull_request(self, number: int) -> PullRequest:
        """The PR as it is now: an open PR's head and base are its branches' current commits."""
        record = self._record(number)
        head_sha, base_sha = record["head_sha"], record["base_sha"]
        if record["state"] == "open":
            head_sha = self.branch_sha(record["head"]) or head_sha
            base_sha = self.branch_sha(record["base"]) or base_sha
        return PullRequest(
            number=int(record["number"]),
            head_sha=head_sha,
            head_ref=record["head"],
            base_ref=record["base"],
            base_sha=base_sha,
            author=record["author"],
            draft=bool(record.get("draft")),
            fork=False,
            open=record["state"] == "open",
            merged=record["state"] == "merged",
            title=record.get("title") or "",
        )

    def pull_commits(self, number: int) -> list[PullCommit] | None:
        """The PR's commits (on its head, not its base), oldest first; a local repository
        maps its authors to no forge login."""
        pull = self.pull_request(number)
        if not all(_SHA.fullmatch(sha) for sha in (pull.head_sha, pull.base_sha)):
            return []
        listed = self._git(
            "rev-list", "--reverse", f"{pull.base_sha}..{pull.head_sha}", what="listing commits"
        ).split()
        return None if len(listed) > PULL_COMMITS_LIMIT else [PullCommit(sha) for sha in listed]

    def record(self, number: int) -> dict[str, Any]:
        """The stored record of PR ``number`` (state, merge sha, times)."""
        return dict(self._record(number))

    def changed_files(self, number: int) -> list[str] | None:
        """The paths the PR changes since it left its base (``git diff base...head``)."""
        pull = self.pull_request(number)
        if not all(_SHA.fullmatch(sha) for sha in (pull.head_sha, pull.base_sha)):
            return []
        listed = self._git(
            "diff", "--name-only", "-z", "--no-renames", f"{pull.base_sha}...{pull.head_sha}",
            what="listing changed files",
        )  # fmt: skip
        return sorted(p for p in listed.split("\0") if p)

    def synchronize(self, number: int) -> PullRequest:
        """Record the head branch's current commit as the PR's head (it got commits)."""
        with self._locked():
            record = self._open(number)
            sha = self.branch_sha(record["head"])
            if sha is None:
                raise ForgeError(f"local: there is no branch '{record['head']}' in {self.repo}")
            record["head_sha"] = sha
            record["base_sha"] = self.branch_sha(record["base"]) or record["base_sha"]
            self._write(self._pr_path(number), record)
        return self.pull_request(number)

    def close(self, number: int) -> PullRequest:
        """Close PR ``number`` without merging it."""
        with self._locked():
            record = self._open(number)
            record["head_sha"] = self.branch_sha(record["head"]) or record["head_sha"]
            record.update(state="closed", closed_at=_now())
            self._write(self._pr_path(number), record)
        return self.pull_request(number)

    def _open(self, number: int) -> dict[str, Any]:
        record = self._record(number)
        if record["state"] != "open":
            raise ForgeError(f"local: pull request #{number} is {record['state']}")
        return record

    # -- comments, reviews, reactions ----------------------------------------------------

    def upsert_comment(
        self, number: int, marker: str, body: str, comment_id: int | None = None
    ) -> Posted:
        """Replace this forge's bot user's comment opening with ``marker``
        (``prs/<n>/comment.md`` ...), or create it; a comment holding the marker written by anyone else (another
        bot user sharing the store) is never taken as ours. Who wrote each comment file is
        in ``prs/<n>/authors.json``; a file it does not name was written by
        :data:`BOT_USER` (before authors were recorded). No id (``comment_id`` is never
        given back: the files are found by marker) and no time: this forge's reviews are
        stamped by the service's own clock."""
        if marker not in body:
            raise ValueError(f"the comment body does not contain its marker {marker!r}")
        with self._locked():
            self._record(number)
            folder = self._pr_dir(number)
            authors = self._authors(number)
            existing = self._sticky(number)
            for path in existing:
                if authors.get(path.name, BOT_USER) != self.bot_user:
                    continue
                if opens_with(path.read_text(encoding="utf-8"), marker):
                    self._write(path, body)
                    return Posted(None, None)
            name = "comment.md" if not existing else f"comment-{len(existing) + 1}.md"
            authors[name] = self.bot_user
            self._write(folder / "authors.json", authors)
            self._write(folder / name, body)
        return Posted(None, None)

    def _authors(self, number: int) -> dict[str, str]:
        path = self._pr_dir(number) / "authors.json"
        authors = self._read(path, {})
        if not isinstance(authors, dict):
            raise ForgeError(f'local: {path} must hold an object {{"comment.md": "user"}}')
        return {str(k): str(v) for k, v in authors.items()}

    def edit_comment(self, number: int, comment_id: int, body: str) -> bool:
        """No ids: this forge's comment files are found by marker only; nothing edited."""
        return False

    def own_comments(self, number: int) -> list[PostedComment]:
        """This forge's bot user's comment files, oldest first (no ids, no time: this
        forge keeps none)."""
        with self._locked():
            authors = self._authors(number)
            return [
                PostedComment(self.bot_user, None, path.read_text(encoding="utf-8"), None, True)
                for path in self._sticky(number)
                if authors.get(path.name, BOT_USER) == self.bot_user
            ]

    def _sticky(self, number: int) -> list[Path]:
        folder = self._pr_dir(number)
        found = [folder / "comment.md"] if (folder / "comment.md").is_file() else []
        extra = sorted(folder.glob("comment-*.md"), key=lambda p: int(p.stem.split("-")[1]))
        return found + extra

    def comments(self, number: int) -> list[str]:
        """The bot's sticky comments on PR ``number`` (one per project), oldest first."""
        return [p.read_text(encoding="utf-8") for p in self._sticky(number)]

    def reply(self, number: int, body: str) -> None:
        """Write a new reply ``prs/<n>/replies/NNN.md``."""
        with self._locked():
            self._record(number)
            folder = self._pr_dir(number) / "replies"
            count = len(list(folder.glob("*.md"))) if folder.is_dir() else 0
            self._write(folder / f"{count + 1:03d}.md", body)

    def replies(self, number: int) -> list[str]:
        """The bot's replies on PR ``number``, oldest first."""
        folder = self._pr_dir(number) / "replies"
        return [p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.md"))]

    def add_comment(self, number: int, author: str, body: str) -> int:
        """Record a comment ``author`` wrote on PR ``number``; its id."""
        with self._locked():
            self._record(number)
            path = self._pr_dir(number) / "comments.json"
            comments = self._read(path, [])
            comment_id = max((c["id"] for c in comments), default=0) + 1
            comments.append(
                {
                    "id": comment_id,
                    "author": author,
                    "body": body,
                    "created_at": _now(),
                    "reactions": [],
                }
            )
            self._write(path, comments)
        return comment_id

    def user_comments(self, number: int) -> list[dict[str, Any]]:
        """The comments people wrote on PR ``number`` (with reactions), oldest first."""
        comments: list[dict[str, Any]] = self._read(self._pr_dir(number) / "comments.json", [])
        return comments

    def comment(self, number: int, comment_id: int) -> PostedComment | None:
        """Comment ``comment_id`` people wrote on PR ``number`` (``add_comment``); None
        when there is none of that id."""
        for comment in self.user_comments(number):
            if comment.get("id") == comment_id:
                return PostedComment(str(comment["author"]), None, str(comment["body"]))
        return None

    def react(self, number: int, comment_id: int, reaction: str) -> bool:
        """Add ``reaction`` to comment ``comment_id`` of PR ``number``; False when the PR
        has no such comment."""
        with self._locked():
            self._record(number)
            path = self._pr_dir(number) / "comments.json"
            comments = self._read(path, [])
            for comment in comments:
                if comment["id"] == comment_id:
                    comment["reactions"].append(reaction)
                    self._write(path, comments)
                    return True
            return False

    def add_review(self, number: int, user: str, state: str, commit_sha: str) -> Review:
        """Record a review (``APPROVED``, ``CHANGES_REQUESTED``, ``COMMENTED``) by ``user``
        on ``commit_sha``."""
        state = state.upper()
        if state not in ("APPROVED", "CHANGES_REQUESTED", "COMMENTED", "DISMISSED"):
            raise ForgeError(f"local: '{state}' is not a review state")
        with self._locked():
            self._open(number)
            path = self._pr_dir(number) / "reviews.json"
            reviews = self._read(path, [])
            review = Review(
                id=max((r["id"] for r in reviews), default=0) + 1,
                user=user,
                state=state,
                commit_sha=commit_sha,
                submitted_at=_now(),
            )
            reviews.append(asdict(review))
            self._write(path, reviews)
        return review

    def reviews(self, number: int) -> list[Review]:
        """Every review of PR ``number``, oldest first."""
        self._record(number)
        stored = self._read(self._pr_dir(number) / "reviews.json", [])
        return [Review(**r) for r in stored]

    def pull_versions(self, number: int) -> list[PullVersion] | None:
        """None: each review names the commit it was given on."""
        return None

    # -- people --------------------------------------------------------------------------

    def permission(self, user: str) -> str:
        """``user``'s role from ``collaborators.json`` ({"user": "role"}); a user it does
        not list has none. Without that file every user has ``write``: a repository on
        your own disk trusts its users, as git itself does."""
        path = self.store / "collaborators.json"
        roles = self._read(path, None)
        if roles is None:
            return "write"
        if not isinstance(roles, dict):
            raise ForgeError(f'local: {path} must hold an object {{"user": "role"}}')
        role = roles.get(user, "none")
        if role not in ROLES:
            raise ForgeError(
                f"local: {path}: '{role}' is not a role", hint=f"use one of {', '.join(ROLES)}"
            )
        return str(role)

    def team_members(self, team: str) -> frozenset[str]:
        """The members of ``team`` in ``teams.json`` ({"org/team": ["user", ...]}); empty
        when it is not listed."""
        path = self.store / "teams.json"
        teams = self._read(path, {})
        if not isinstance(teams, dict):
            raise ForgeError(f'local: {path} must hold an object {{"org/team": [users]}}')
        return frozenset(str(u) for u in teams.get(team.removeprefix("@"), []))

    def account_of(self, user_id: int) -> Account | None:
        """None: the local forge's people are logins only, no account has an id."""
        return None

    def id_of(self, login: str) -> int | None:
        """None: the local forge's people are logins only (the gate compares logins)."""
        return None

    def repository_of(self, repo_id: int) -> str | None:
        """None: the local forge's repository has no id."""
        return None

    def identity(self, repo_id: int | None = None) -> None:
        """None: the local forge's repository has no id."""
        return None

    def made_check_run(self, repo_id: int, run_id: int, sha: str) -> None:
        """None: the local forge's repository has no id."""
        return None

    def pushers_of(self, branch: str, sha: str) -> list[tuple[str, int | None]] | None:
        """None: the local forge keeps no record of pushes beyond its own hooks."""
        return None

    def push_records(self, shas: Collection[str]) -> list[PushRecord] | None:
        """None: the local forge keeps no record of pushes beyond its own hooks."""
        return None

    # -- checks --------------------------------------------------------------------------

    def _check_path(self, sha: str) -> Path:
        if not _SHA.fullmatch(sha):
            raise ForgeError(f"local: '{sha}' is not a commit sha")
        return self.store / "checks" / f"{sha}.json"

    def set_check(self, sha: str, check: Check, run_id: int | None = None) -> int | None:
        """Create or update check ``check.name`` on ``sha`` (``checks/<sha>.json``), its
        earlier states kept in ``history``. One check of a name per commit, no run ids:
        ``run_id`` is ignored and None returned."""
        with self._locked():
            path = self._check_path(sha)
            checks = self._read(path, {})
            entry = {
                "status": check.status,
                "conclusion": check.conclusion,
                "title": check.title,
                "summary": check.summary,
                "text": check.text,
                "actions": [asdict(a) for a in check.actions],
                "updated_at": _now(),
            }
            history = checks.get(check.name, {}).get("history", [])
            history.append({k: entry[k] for k in ("status", "conclusion", "title", "updated_at")})
            checks[check.name] = {**entry, "history": history[-HISTORY_LIMIT:]}
            self._write(path, checks)
        return None

    def checks(self, sha: str) -> dict[str, dict[str, Any]]:
        """Check name -> its stored state, on commit ``sha``."""
        found: dict[str, dict[str, Any]] = self._read(self._check_path(sha), {})
        return found

    # -- merging and deployments ---------------------------------------------------------

    def merge(self, number: int, method: str, sha: str) -> str:
        """Merge PR ``number`` into its base branch, only if its head is still ``sha``; the
        new base commit.

        ``merge`` makes a merge commit (always, as GitHub does); ``squash`` one commit of
        the merged tree on the base; ``rebase`` fast-forwards the base when it is already
        in the head, and otherwise squashes (this forge does not replay commits one by one).
        Conflicts are refused, naming the files.
        """
        if method not in METHODS:
            raise ForgeError(f"local: '{method}' is not a merge method ({', '.join(METHODS)})")
        with self._locked():
            record = self._open(number)
            base, head = record["base"], record["head"]
            head_sha, base_sha = self.branch_sha(head), self.branch_sha(base)
            if head_sha is None or base_sha is None:
                missing = head if head_sha is None else base
                raise ForgeError(f"local: there is no branch '{missing}' in {self.repo}")
            if head_sha != sha:
                raise ForgeError(
                    f"local: pull request #{number} was not merged: its head moved to "
                    f"{head_sha[:7]}, not {sha[:7]}",
                    hint=f"run `sluice pr sync {number}` and get the new head approved",
                )
            title = record.get("title") or head
            if method == "rebase" and self.on_branch(base_sha, head_sha):
                new = head_sha
            else:
                if method == "rebase":
                    log.info("local: #%s cannot be fast-forwarded: squashed instead", number)
                tree = self._merged_tree(base_sha, head_sha, number)
                if method == "merge":
                    parents = ["-p", base_sha, "-p", head_sha]
                    message = f"Merge pull request #{number} from {head}\n\n{title}\n"
                else:
                    parents = ["-p", base_sha]
                    message = f"{title} (#{number})\n\n" + self._subjects(base_sha, head_sha)
                new = self._git(
                    "commit-tree",
                    tree,
                    *parents,
                    "-m",
                    message,
                    what="writing the merge commit",
                    env=self._identity(),
                ).strip()
            self._advance(base, base_sha, new, f"sluice: merge pull request #{number} ({method})")
            record.update(
                state="merged",
                head_sha=head_sha,
                base_sha=base_sha,
                merge_sha=new,
                merge_method=method,
                closed_at=_now(),
            )
            self._write(self._pr_path(number), record)
        return new

    def start_deployment(
        self, sha: str, environment: str, description: str, ref: str = ""
    ) -> int | None:
        """Record a deployment of ``sha`` to ``environment`` in ``deployments.json``."""
        with self._locked():
            path = self.store / "deployments.json"
            deployments = self._read(path, [])
            deployment = max((d["id"] for d in deployments), default=0) + 1
            deployments.append(
                {
                    "id": deployment,
                    "sha": sha,
                    "environment": environment,
                    "description": description,
                    "created_at": _now(),
                    "statuses": [],
                }
            )
            self._write(path, deployments)
        return deployment

    def deployment_status(self, deployment: int, state: str, description: str) -> None:
        """Add a state to deployment ``deployment``."""
        with self._locked():
            path = self.store / "deployments.json"
            deployments = self._read(path, [])
            for record in deployments:
                if record["id"] == deployment:
                    record["statuses"].append(
                        {"state": state, "description": description, "at": _now()}
                    )
                    self._write(path, deployments)
                    return
            raise ForgeError(f"local: there is no deployment {deployment}")

    def deployments(self) -> list[dict[str, Any]]:
        """Every deployment record, oldest first."""
        found: list[dict[str, Any]] = self._read(self.store / "deployments.json", [])
        return found


def _checked(
    members: list[tarfile.TarInfo], sha: str, limits: TreeLimits = TREE_LIMITS
) -> list[tarfile.TarInfo]:
    """The archive's members, every unsafe one (or one over a limit) refused."""
    return checked_members(members, forge="local", sha=sha, limits=limits)
