"""GitHub as a forge: :class:`GitHubForge` speaks for one repository through a client from
:func:`~sluice.bot.forge.github.client.github_client` (files, pull requests, reviews,
check runs or commit statuses, the sticky comment, deployments, merges), and :func:`fit`
cuts Markdown to GitHub's limits without breaking a block.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import tempfile
from collections.abc import Collection
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qs, urlsplit

import requests
from github import Github, GithubException
from github.CheckRun import CheckRun
from github.GithubException import RateLimitExceededException, UnknownObjectException
from github.Repository import Repository

from sluice.bot.forge.archive import TREE_LIMITS, TreeLimits, extract
from sluice.bot.forge.base import (
    LIST_LIMIT,
    PULL_COMMITS_LIMIT,
    PUSH_RECORDS_LIMIT,
    Account,
    Check,
    DirEntry,
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
    created_ms,
    opens_with,
)
from sluice.bot.forge.github.client import (
    DEFAULT_TIMEOUT,
    LOGIN,
    InstallationAuth,
    boundary,
    github_message,
)

log = logging.getLogger(__name__)

DEFAULT_WORKDIR_LIMIT = TREE_LIMITS.total_bytes
CHANGED_FILES_MAX = 3_000  # the files of a pull request GitHub lists, at most
ACTIONS_BOT = "github-actions[bot]"  # who an Actions GITHUB_TOKEN writes as
OUTPUT_LIMIT = 65535  # GitHub's cap on a check run's output.summary and output.text
STATUS_DESCRIPTION_LIMIT = 140  # GitHub's cap on a commit status description
TAG_DEPTH = 5  # annotated tags peeled through at most this many tag objects
ROLES = ("admin", "maintain", "write", "triage", "read", "none")
# How a check run's status and conclusion read as a commit status (the token fallback).
STATUS_STATES = {
    "queued": "pending",
    "in_progress": "pending",
    "success": "success",
    "neutral": "success",
    "skipped": "success",
    "failure": "failure",
    "cancelled": "failure",
    "action_required": "failure",
    "timed_out": "failure",
    "stale": "failure",
}


# --- Markdown-aware truncation ----------------------------------------------------------


def _utf16_len(text: str) -> int:
    # GitHub counts characters as JavaScript does; astral characters count twice.
    return len(text.encode("utf-16-le")) // 2


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def _closers(text: str) -> str:
    """What closes the fenced code block and the ``<details>`` blocks ``text`` leaves open."""
    fence: str | None = None
    for line in text.splitlines():
        match = _FENCE.match(line)
        if fence is None:
            if match:
                fence = match.group(1)
        elif (
            match
            and match.group(1)[0] == fence[0]
            and len(match.group(1)) >= len(fence)
            and not line.strip().lstrip(fence[0])
        ):
            fence = None
    outside = text if fence is None else text[: text.rfind(fence)]
    opened = len(re.findall(r"<details\b", outside)) - len(re.findall(r"</details>", outside))
    closing = f"{fence}\n" if fence is not None else ""
    return closing + "</details>\n" * max(opened, 0)


def fit(text: str, limit: int = OUTPUT_LIMIT) -> str:
    """``text`` cut to ``limit`` characters at a line boundary, with open code fences and
    ``<details>`` closed and a note saying how much was left out."""
    if _utf16_len(text) <= limit:
        return text
    budget = limit
    while True:
        kept = text[: max(budget - 100, 0)]
        if "\n" in kept:
            kept = kept[: kept.rfind("\n") + 1]
        dropped = len(text) - len(kept)
        if kept and not kept.endswith("\n"):
            kept += "\n"  # one long line: cut inside it rather than lose it all
        note = f"\n... (truncated: {dropped} more characters)\n"
        result = kept + _closers(kept) + note
        excess = _utf16_len(result) - limit
        if excess <= 0:
            return result
        budget -= max(excess, 1)


# --- the forge --------------------------------------------------------------------------


ACTIVITY_PAGE = 100  # entries of a page of the repository's activity (GitHub's most)


def _next_cursor(headers: dict[str, Any]) -> str | None:
    """The ``after`` cursor of a page's ``rel="next"`` link; the link itself is never
    followed (its host and path are the answer's word, not ours)."""
    for link in requests.utils.parse_header_links(str(headers.get("link") or "")):
        if link.get("rel") == "next":
            cursor = parse_qs(urlsplit(link.get("url", "")).query).get("after")
            return cursor[0] if cursor else None
    return None


_LOGIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*(?:\[bot\])?")
"""What a GitHub login can look like (a person's, an App's ``<slug>[bot]``)."""


def _pushed(shas: Collection[str]) -> str:
    """What asking who pushed ``shas`` (to any branch) is, for an error."""
    return next(iter(shas))[:12] if len(shas) == 1 else f"{len(shas)} commits"


def _sha_or_none(value: object) -> str | None:
    """A push record's ``before`` as a commit sha; None where it names none (a branch
    made, all zeros) or is no sha."""
    text = str(value or "").lower()
    ok = re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", text) and text.strip("0")
    return text if ok else None


def _account_id(value: object) -> int | None:
    """A GitHub account id as the API gave it; None where it gave none a person has (a
    deleted account's reviews name no user)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


class GitHubForge:
    """The :class:`~sluice.bot.forge.base.Forge` for one GitHub repository.

    Args:
        client: An authenticated client, usually from :func:`github_client`.
        repo: ``owner/name``.
        repo_id: The repository's GitHub id, when the caller knows it (a webhook
            delivery's ``repository.id``): every request about the repository is then
            made under ``/repositories/{id}/...``, never under its name, so a rename
            (whose old name GitHub answers with a redirect, and which another repository
            may take) changes nothing of where the forge reads and writes. None: under
            ``/repos/{owner}/{name}/...`` (the Action, the CLI).
        workdir_limit_bytes: The largest total size of the files :meth:`fetch_tree`
            writes, and of the (compressed) archive it downloads; overrides
            ``tree_limits.total_bytes`` when given.
        tree_limits: The service's limits on a commit's files (:class:`TreeLimits`).
        session: The HTTP session archives are downloaded with (tests inject one).
        bot_login: The login the bot's comments are written by, when a token is used
            that cannot say (an installation token given as a token). Otherwise it is
            asked: an App's ``<slug>[bot]`` (``GET /app``), a token's user (``GET /user``),
            and ``github-actions[bot]`` for an Actions ``GITHUB_TOKEN`` (403 there).
    """

    name: str = "github"
    comment_limit: int = 65536

    def __init__(
        self,
        client: Github,
        repo: str,
        *,
        workdir_limit_bytes: int | None = None,
        session: requests.Session | None = None,
        bot_login: str | None = None,
        tree_limits: TreeLimits = TREE_LIMITS,
        repo_id: int | None = None,
    ) -> None:
        self.repo = repo
        self.repo_id = repo_id
        if workdir_limit_bytes is not None:
            tree_limits = dataclasses.replace(tree_limits, total_bytes=workdir_limit_bytes)
        self.tree_limits = tree_limits
        self.workdir_limit_bytes = tree_limits.total_bytes
        self._client = client
        self._session = session or requests.Session()
        self._timeout = (10, DEFAULT_TIMEOUT)
        self._holders: dict[str, int | None] = {}  # case-folded login -> its account's id now
        self._statuses_only = False  # check runs refused (a plain token): commit statuses
        self._check_runs: dict[tuple[str, str], int] = {}  # (sha, check) -> its run's id
        self._login: str | None = bot_login  # whose comments are ours
        self._teams: dict[str, frozenset[str]] = {}  # for the forge's lifetime (one job)
        self._accounts: dict[int, Account | None] = {}  # account id -> it now (one job)
        # Handles that make no request until used (github_client's clients already are).
        self._lazy = client if client.requester.is_lazy else client.withLazy(True)

    @property
    def _repo(self) -> Repository:
        """The repository, by its id when known, else by its name: a new handle each time.
        Every request goes under the handle's own URL (``/repositories/{id}`` or
        ``/repos/{owner}/{name}``) and is followed by nothing built from an answer: an
        object GitHub answers with carries URLs under the repository's name of now (its
        ``url``), and a handle once read takes them as its own, so this forge never edits,
        lists or posts through an object it read (a comment or check run is addressed
        again by its id under this URL)."""
        return self._lazy.get_repo(self.repo if self.repo_id is None else self.repo_id)

    # -- files ---------------------------------------------------------------------------

    def fetch_tree(self, sha: str, dest: Path) -> None:
        """Download the tarball of ``sha`` and extract it into ``dest`` (see the protocol)."""
        with boundary(f"asking for the archive of {sha}"):
            link = self._repo.get_archive_link("tarball", sha)
        dest.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=dest.parent) as archive:
            self._download(link, sha, archive)
            archive.seek(0)
            extract(archive, dest, forge="GitHub", sha=sha, strip_top=True, limits=self.tree_limits)

    def _download(self, link: str, sha: str, out: IO[bytes]) -> None:
        limit = self.workdir_limit_bytes
        too_big = UnusableTree(
            f"GitHub: the archive of {sha} is larger than the limit of {limit:,} bytes of all "
            "files together (SLUICE_TREE_TOTAL_BYTES, a setting of the Sluice service, not of the "
            "repository)",
            hint="keep large or generated files out of the repository, or ask the operator of "
            "the Sluice service to raise the limit",
        )
        # The link is pre-signed (it carries its own short-lived token): no Authorization
        # header goes to codeload.
        with (
            boundary(f"downloading the archive of {sha}"),
            self._session.get(link, stream=True, timeout=self._timeout) as response,
        ):
            if response.status_code != 200:
                raise ForgeError(
                    f"GitHub: downloading the archive of {sha} failed: "
                    f"{response.status_code} {response.reason}"
                )
            declared = response.headers.get("Content-Length", "")
            if declared.isdigit() and int(declared) > limit:
                raise too_big
            size = 0
            for chunk in response.iter_content(chunk_size=1024 * 1024):
                size += len(chunk)
                if size > limit:
                    raise too_big
                out.write(chunk)

    def read_file(self, ref: str, path: str) -> str | None:
        """The text of ``path`` at ``ref``; None when the file (or the ref) does not exist."""
        what = f"reading {path} at {ref}"
        with boundary(what):
            try:
                content = self._repo.get_contents(path, ref=ref)
            except UnknownObjectException:
                return None
            if isinstance(content, list):
                raise ForgeError(f"GitHub: {what} failed: {path} is a directory, not a file")
            if content.encoding != "base64":
                raise ForgeError(
                    f"GitHub: {what} failed: the file is too large for the contents API (1 MB)"
                )
            raw = content.decoded_content
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ForgeError(f"GitHub: {what} failed: the file is not UTF-8 text") from None

    def list_dir(self, ref: str, path: str) -> list[DirEntry] | None:
        """The entries of folder ``path`` at ``ref`` (the contents API: one request, at most
        1,000 entries); None when the folder (or the ref) does not exist."""
        what = f"listing {path} at {ref}"
        kinds = {"file": "file", "dir": "dir", "symlink": "link"}
        with boundary(what):
            try:
                content = self._repo.get_contents(path.strip("/"), ref=ref)
            except UnknownObjectException:
                return None
            if not isinstance(content, list):
                raise ForgeError(f"GitHub: {what} failed: {path} is a file, not a folder")
            if len(content) > LIST_LIMIT:
                raise ForgeError(f"GitHub: {what} failed: over {LIST_LIMIT} entries")
            entries = [
                DirEntry(str(item.name), kinds.get(str(item.type), "other"), int(item.size))
                for item in content
            ]
        return sorted(entries, key=lambda e: e.name)

    def changed_files(self, number: int) -> list[str] | None:
        """The paths pull request ``number`` changes (its files' list, a page at a time);
        None over :data:`CHANGED_FILES_MAX` (GitHub lists no more)."""
        paths: set[str] = set()
        with boundary(f"listing the files of pull request #{number}"):
            if (self._repo.get_pull(number).changed_files or 0) > CHANGED_FILES_MAX:
                return None
            for changed in self._repo.get_pull(number).get_files():
                paths.add(str(changed.filename))
                if changed.previous_filename:
                    paths.add(str(changed.previous_filename))
        return sorted(paths)

    # -- pull requests -------------------------------------------------------------------

    def pull_request(self, number: int) -> PullRequest:
        """The pull request as GitHub reports it now."""
        with boundary(f"reading pull request #{number}"):
            pr = self._repo.get_pull(number)
            head_repo = pr.head.repo  # None when the fork was deleted
            base_repo = pr.base.repo
            fork = head_repo is None or head_repo.full_name.lower() != base_repo.full_name.lower()
            return PullRequest(
                number=pr.number,
                head_sha=pr.head.sha,
                head_ref=pr.head.ref,
                base_ref=pr.base.ref,
                base_sha=pr.base.sha,
                author=pr.user.login if pr.user is not None else "ghost",
                draft=bool(pr.draft),
                fork=fork,
                open=pr.state == "open",
                merged=bool(pr.merged),
                title=pr.title or "",
                author_id=_account_id(pr.user.id if pr.user is not None else None),
            )

    def pull_commits(self, number: int) -> list[PullCommit] | None:
        """The pull request's commits as GitHub lists them (at most 250: None beyond)."""
        with boundary(f"listing the commits of pull request #{number}"):
            if (self._repo.get_pull(number).commits or 0) > PULL_COMMITS_LIMIT:
                return None
            return [
                PullCommit(
                    commit.sha,
                    commit.author.login if commit.author is not None else None,
                    commit.committer.login if commit.committer is not None else None,
                    _account_id(commit.author.id) if commit.author is not None else None,
                    _account_id(commit.committer.id) if commit.committer is not None else None,
                )
                for commit in self._repo.get_pull(number).get_commits()
            ]

    def reviews(self, number: int) -> list[Review]:
        """Every review of pull request ``number``, oldest first."""
        with boundary(f"listing the reviews of pull request #{number}"):
            out = []
            for review in self._repo.get_pull(number).get_reviews():
                submitted = review.submitted_at
                out.append(
                    Review(
                        id=review.id,
                        user=review.user.login if review.user is not None else "ghost",
                        state=(review.state or "").upper(),
                        commit_sha=review.commit_id,
                        submitted_at=submitted.isoformat() if submitted is not None else None,
                        # Who, by the account's id: the login is the one of now (renamed
                        # since the review, maybe), the id is the person's for good.
                        user_id=_account_id(review.user.id if review.user is not None else None),
                    )
                )
            return out

    def pull_versions(self, number: int) -> list[PullVersion] | None:
        """None: each review names the commit it was given on (``commit_id``)."""
        return None

    def permission(self, user: str) -> str:
        """``user``'s role on the repository; ``none`` for a stranger, and for a name that
        is no GitHub login (not asked: it would become a path in the request's URL)."""
        if not LOGIN.fullmatch(user):
            return "none"
        with boundary(f"reading {user}'s permission on {self.repo}"):
            try:
                role = self._repo.get_collaborator_role_name(user)
                if role in ROLES:
                    return role
                # A custom organisation role: fall back to the base permission it extends.
                legacy = self._repo.get_collaborator_permission(user)
            except UnknownObjectException:
                return "none"
            return legacy if legacy in ROLES else "none"

    def account_of(self, user_id: int) -> Account | None:
        """The account ``user_id`` is now (``GET /user/{id}``), asked once per forge: its
        login, and ``type`` ``Bot`` (an App's bot user) or ``User``/``Organization`` (not a
        bot; any other type: not said); None when GitHub knows no such account (404:
        deleted, or never was), or answers for another id."""
        if user_id in self._accounts:
            return self._accounts[user_id]
        account: Account | None
        with boundary(f"reading the login of account {user_id}"):
            try:
                # The answer itself (PyGithub takes the id from the URL it asked).
                data = self._client.get_user_by_id(user_id).raw_data
                found, kind = data.get("login"), data.get("type")
                bot = {"Bot": True, "User": False, "Organization": False}.get(str(kind))
                ok = data.get("id") == user_id and found
                account = Account(str(found), bot) if ok else None
            except UnknownObjectException:
                account = None
        self._accounts[user_id] = account
        return account

    def repository_of(self, repo_id: int) -> str | None:
        """The ``full_name`` of repository ``repo_id`` now (``GET /repositories/{id}``);
        None when GitHub shows the service's credentials no such repository (404), or
        answers for another id."""
        with boundary(f"reading the name of repository {repo_id}"):
            try:
                data = self._client.get_repo(repo_id).raw_data
            except UnknownObjectException:
                return None
        name = data.get("full_name")
        return str(name) if data.get("id") == repo_id and isinstance(name, str) else None

    def identity(self, repo_id: int | None = None) -> RepositoryIdentity | None:
        """Repository ``repo_id`` now (``GET /repositories/{id}``), or this forge's own (by
        the forge's id when it has one, else by its name: ``GET /repos/{owner}/{name}``);
        None when GitHub shows the credentials no such repository (404), or answers for
        another id."""
        with boundary(f"reading repository {self.repo if repo_id is None else repo_id}"):
            try:
                repo = self._repo if repo_id is None else self._client.get_repo(repo_id)
                data = repo.raw_data
            except UnknownObjectException:
                return None
        found, name = data.get("id"), data.get("full_name")
        if not isinstance(found, int) or not isinstance(name, str):
            return None
        if repo_id is not None and found != repo_id:
            return None
        return RepositoryIdentity(found, name, created_ms(data.get("created_at")))

    def made_check_run(self, repo_id: int, run_id: int, sha: str) -> bool:
        """Whether GitHub has check run ``run_id`` on ``sha`` in repository ``repo_id``
        (``GET /repositories/{id}/check-runs/{run_id}``; a run of another repository is
        404 there)."""
        with boundary(f"reading check run {run_id} of repository {repo_id}"):
            try:
                data = self._client.get_repo(repo_id).get_check_run(run_id).raw_data
            except UnknownObjectException:
                return False
        return data.get("id") == run_id and str(data.get("head_sha", "")).lower() == sha.lower()

    def pushers_of(self, branch: str, sha: str) -> list[tuple[str, int | None]]:
        """Who GitHub's repository activity (``GET .../activity``, kept
        whether or not a push webhook was sent) names as moving ``branch`` to ``sha``: a
        push, a force push, the branch's creation, a merge (:meth:`push_records`)."""
        ref = f"refs/heads/{branch}"
        records = self.push_records([sha])
        return list({(r.login, r.user_id): None for r in records if r.ref == ref})

    def push_records(self, shas: Collection[str]) -> list[PushRecord]:
        """GitHub's repository activity of any branch moved to one of ``shas`` (no ``ref``
        asked: a push, a force push, a branch's creation, a merge, of every branch): newest
        first, at most :data:`PUSH_RECORDS_LIMIT` entries in pages of 100, one listing for
        them all. An entry is taken only when its own ``after`` says so (what the query
        asked is not trusted) and it names a ref, and its actor by login and id; one
        naming no actor (a deleted account) names nobody."""
        wanted = {sha.lower() for sha in shas}
        url = f"{self._repo.url}/activity"
        params: dict[str, Any] = {"per_page": ACTIVITY_PAGE}
        found: list[PushRecord] = []
        requester = self._client.requester  # PyGithub has no call for it: its wire, its auth
        with boundary(f"reading who pushed {_pushed(shas)}"):
            for _page in range(PUSH_RECORDS_LIMIT // ACTIVITY_PAGE):
                headers, data = requester.requestJsonAndCheck("GET", url, params)
                if not isinstance(data, list):
                    raise ForgeError(f"GitHub: the activity of {self.repo} is not a list")
                for entry in data:
                    actor = entry.get("actor") if isinstance(entry, dict) else None
                    if not isinstance(actor, dict) or not actor.get("login"):
                        continue
                    after, ref = str(entry.get("after")).lower(), entry.get("ref")
                    if isinstance(ref, str) and ref.startswith("refs/") and after in wanted:
                        before = entry.get("before")
                        login, uid = str(actor["login"]), _account_id(actor.get("id"))
                        found.append(PushRecord(_sha_or_none(before), after, login, uid, ref))
                cursor = _next_cursor(headers)
                if cursor is None:
                    break
                params = {**params, "after": cursor}
        return found

    # -- comments ------------------------------------------------------------------------

    def _own_login(self) -> str:
        """The login the bot's comments are written by, asked once per forge: an App's
        ``<slug>[bot]`` (``GET /app`` with its JWT, cached per App), a token's user
        (``GET /user``), or, when ``GET /user`` answers 403 as it does for an Actions
        ``GITHUB_TOKEN``, ``github-actions[bot]``."""
        if self._login is None:
            auth = self._client.requester.auth
            if isinstance(auth, InstallationAuth):
                self._login = auth.bot_login()
            else:
                try:
                    self._login = self._client.get_user().login
                except GithubException as error:
                    if error.status != 403 or isinstance(error, RateLimitExceededException):
                        raise
                    log.debug("GitHub: GET /user answered 403: an Actions token, %s", ACTIONS_BOT)
                    self._login = ACTIONS_BOT
        return self._login

    def upsert_comment(
        self, number: int, marker: str, body: str, comment_id: int | None = None
    ) -> Posted:
        """Edit our comment on pull request ``number`` (comment ``comment_id`` while it is
        still ours there, else the one opening with ``marker``), or create it.

        Ours: written by the bot's own login (:meth:`_own_login`); found by marker, the
        oldest of ours opening with it. Anyone else's comment, a person's or another App's, is
        never edited nor taken as ours.
        """
        if marker not in body:
            raise ValueError(f"the comment body does not contain its marker {marker!r}")
        with boundary(f"updating the comment on pull request #{number}"):
            issue = self._repo.get_issue(number)
            comment = self._by_id(issue, number, comment_id) or self._own(issue, marker)
            if comment is None:
                made = issue.create_comment(body)
                return Posted(made.id, _ms(made.updated_at))
            if comment.body == body:
                return Posted(comment.id, _ms(comment.updated_at))  # it reads so since then
            ours = issue.get_comment(comment.id)  # by its id, under the repo's URL
            ours.edit(body)  # GitHub's answer: its updated_at too
            return Posted(ours.id, _ms(ours.updated_at))

    def edit_comment(self, number: int, comment_id: int, body: str) -> bool:
        """Rewrite our comment ``comment_id`` on pull request ``number``, by its id only."""
        with boundary(f"updating comment {comment_id} on pull request #{number}"):
            issue = self._repo.get_issue(number)
            found = self._by_id(issue, number, comment_id)
            if found is None:
                return False
            if found.body != body:  # edited under the repo's URL, as upsert_comment does
                issue.get_comment(comment_id).edit(body)
            return True

    def own_comments(self, number: int) -> list[PostedComment]:
        """Our comments on pull request ``number`` (its comments written by our own
        login), oldest first."""
        with boundary(f"reading the comments on pull request #{number}"):
            return [
                PostedComment(c.user.login, c.user.id, c.body or "", _ms(c.updated_at), True, c.id)
                for c in self._ours(self._repo.get_issue(number))
            ]

    def _ours(self, issue: Any) -> list[Any]:
        """The comments of ``issue`` written by our own login, oldest first."""
        login = self._own_login().casefold()
        return [
            c
            for c in issue.get_comments()
            if c.user is not None and (c.user.login or "").casefold() == login
        ]

    def _own(self, issue: Any, marker: str) -> Any:
        """Our oldest comment of ``issue`` opening with ``marker``."""
        return next((c for c in self._ours(issue) if opens_with(c.body, marker)), None)

    def _by_id(self, issue: Any, number: int, comment_id: int | None) -> Any:
        """Comment ``comment_id`` when it is still ours on pull request ``number``."""
        if comment_id is None:
            return None
        try:
            found = issue.get_comment(comment_id)
            issue_url, user = found.issue_url, found.user
        except UnknownObjectException:
            return None
        on_this = str(issue_url or "").endswith(f"/issues/{number}")
        ours = user is not None and user.login.casefold() == self._own_login().casefold()
        return found if on_this and ours else None

    def reply(self, number: int, body: str) -> None:
        """Post a new comment on pull request ``number``."""
        with boundary(f"commenting on pull request #{number}"):
            self._repo.get_issue(number).create_comment(body)

    def comment(self, number: int, comment_id: int) -> PostedComment | None:
        """Comment ``comment_id`` as GitHub holds it (``GET .../issues/comments/{id}``, the
        repository's, by its id); None when it is gone (404) or on another pull request
        (its ``issue_url``)."""
        with boundary(f"reading comment {comment_id} on pull request #{number}"):
            try:
                found = self._repo.get_issue(number).get_comment(comment_id)
                issue_url, user, body = found.issue_url, found.user, found.body
            except UnknownObjectException:
                return None
            if not str(issue_url or "").endswith(f"/issues/{number}") or user is None:
                return None
            own = user.login.casefold() == self._own_login().casefold()
        return PostedComment(
            user.login, user.id, body or "", _ms(found.updated_at), own, comment_id
        )

    def react(self, number: int, comment_id: int, reaction: str) -> bool:
        """Add ``reaction`` to comment ``comment_id`` of pull request ``number``; False
        when the comment is gone (404)."""
        with boundary(f"reacting to comment {comment_id} on pull request #{number}"):
            try:
                self._repo.get_issue(number).get_comment(comment_id).create_reaction(reaction)
            except UnknownObjectException:
                return False
        return True

    # -- teams, refs and branches --------------------------------------------------------

    def team_members(self, team: str) -> frozenset[str]:
        """The logins of ``org/team-slug``'s members (child teams included, as GitHub
        lists them), read once per forge.

        Empty, and logged, when the team does not exist or is not visible to the
        credentials (404), or may not be read (403: an App without the organisation's
        *Members: read* permission): its members then approve nothing, the gate fails
        closed. Other failures raise :class:`ForgeError`.
        """
        cached = self._teams.get(team)
        if cached is not None:
            return cached
        org, _, slug = team.removeprefix("@").partition("/")
        if not org or not slug or "/" in slug:
            log.warning("GitHub: %r is not a team name (org/team-slug): no members", team)
            return frozenset()
        with boundary(f"listing the members of the team {team}"):
            try:
                listed = self._client.get_organization(org).get_team_by_slug(slug).get_members()
                members = frozenset(member.login for member in listed)
            except UnknownObjectException:
                log.info("GitHub: the team %s does not exist or is not visible: no members", team)
                members = frozenset()
            except RateLimitExceededException:
                raise
            except GithubException as error:
                if error.status != 403:
                    raise
                log.warning(
                    "GitHub: the members of the team %s may not be read (%s %s): no members; "
                    "grant the App the organisation permission Members: read",
                    team,
                    error.status,
                    github_message(error),
                )
                members = frozenset()
        self._teams[team] = members
        return members

    def id_of(self, login: str) -> int | None:
        """The id of the account holding ``login`` now (``GET /users/{login}``), asked once
        per forge; None when no account has it (404), or GitHub answers for another login
        or with no id a person has."""
        key = login.casefold()
        if key in self._holders:
            return self._holders[key]
        if not _LOGIN.fullmatch(login):  # no login GitHub gives: never a path to ask
            return None
        uid: int | None
        with boundary(f"reading the account of {login}"):
            try:
                data = self._client.get_user(login).raw_data  # PyGithub quotes the login
                found = str(data.get("login") or "")
                uid = _account_id(data.get("id")) if found.casefold() == key else None
            except UnknownObjectException:
                uid = None
        self._holders[key] = uid
        return uid

    def commit_of(self, ref: str) -> str | None:
        """The commit ``ref`` points at, through the git refs API (exact names, no guessing
        from shas): ``main`` is tried as the branch ``heads/main`` then the tag
        ``tags/main``; ``heads/...``, ``tags/...`` and ``refs/...`` are taken as written.
        Annotated tags are peeled to their commit. None when there is no such ref, or it
        names a tree or a blob."""
        name = ref.removeprefix("refs/")
        if name.startswith(("heads/", "tags/")):
            candidates = [name]
        else:
            candidates = [f"heads/{name}", f"tags/{name}"]
        with boundary(f"resolving {ref}"):
            for candidate in candidates:
                try:
                    target = self._repo.get_git_ref(candidate).object
                except UnknownObjectException:
                    continue
                kind, sha = target.type, target.sha
                for _ in range(TAG_DEPTH):  # a tag may point at another tag
                    if kind != "tag":
                        break
                    peeled = self._repo.get_git_tag(sha).object
                    kind, sha = peeled.type, peeled.sha
                if kind == "commit":
                    return sha
                log.info("GitHub: %s points at a %s, not a commit", ref, kind)
                return None
        return None

    def on_branch(self, sha: str, branch: str) -> bool:
        """Whether ``sha`` is reachable from ``branch`` (a branch name or a commit): GitHub
        compares ``branch...sha`` and says ``behind`` or ``identical``. False when either
        is unknown (404)."""
        with boundary(f"comparing {sha} with {branch}"):
            try:
                status = self._repo.compare(branch, sha).status
            except UnknownObjectException:
                log.info("GitHub: %s or %s is unknown: not on the branch", sha, branch)
                return False
        return status in ("behind", "identical")

    # -- merging and deployment records --------------------------------------------------

    def merge(self, number: int, method: str, sha: str) -> str:
        """Merge pull request ``number`` with ``method`` if its head is still ``sha``; the
        merge commit's sha. GitHub refuses with 409 when the head moved and 405 when the
        pull request is not mergeable (conflicts, failing required checks, a draft):
        :class:`ForgeError` with GitHub's message."""
        what = f"merging pull request #{number} ({method}) at {sha}"
        with boundary(what):
            result = self._repo.get_pull(number).merge(merge_method=method, sha=sha)
            if not result.merged or not result.sha:
                raise ForgeError(f"GitHub: {what} failed: {result.message or 'not merged'}")
            return result.sha

    def start_deployment(
        self, sha: str, environment: str, description: str, ref: str = ""
    ) -> int | None:
        """Create a deployment record of ``sha`` to ``environment`` (required checks not
        enforced: Sluice has its own gate); its id.

        Deployment records are a report, not the promotion itself: when the credentials
        may not write them (403, e.g. an App without *Deployments: write*) this logs a
        warning and returns None, and the promotion goes on without a record. Other
        failures raise :class:`ForgeError`.
        """
        with boundary(f"recording a deployment of {sha} to {environment}"):
            try:
                deployment = self._repo.create_deployment(
                    ref=sha,
                    environment=environment,
                    description=description[:STATUS_DESCRIPTION_LIMIT],
                    auto_merge=False,
                    required_contexts=[],
                    production_environment=environment == "prod",
                )
            except GithubException as error:
                if not _forbidden(error):
                    raise
                log.warning(
                    "GitHub: deployments may not be recorded on %s (%s %s): promoting "
                    "without a deployment record",
                    self.repo,
                    error.status,
                    github_message(error),
                )
                return None
            return int(deployment.id)

    def deployment_status(self, deployment: int, state: str, description: str) -> None:
        """Add a status (in_progress, success, failure, error) to deployment ``deployment``.
        Like :meth:`start_deployment`, a 403 is logged and ignored."""
        with boundary(f"setting deployment {deployment} to {state}"):
            try:
                self._repo.get_deployment(deployment).create_status(
                    state, description=description[:STATUS_DESCRIPTION_LIMIT]
                )
            except GithubException as error:
                if not _forbidden(error):
                    raise
                log.warning(
                    "GitHub: deployment %s may not be updated (%s %s): its state is not %s",
                    deployment,
                    error.status,
                    github_message(error),
                    state,
                )

    # -- checks --------------------------------------------------------------------------

    def set_check(self, sha: str, check: Check, run_id: int | None = None) -> int | None:
        """Create or update Sluice's check run ``check.name`` on ``sha``; its id.

        Sluice's run is the one this forge made or edited for the check in this job, else
        run ``run_id`` (the id the flow recorded when Sluice made it: edited by that id,
        never looked up by name), else a new run. A run of the same name anyone else made
        (another App, a workflow's ``GITHUB_TOKEN``) is never edited nor taken for
        Sluice's: a name is no proof of who made a run.

        With credentials that may not make check runs (403 on making one: a plain token),
        a commit status with the same context instead, for the rest of the job (None
        returned). A 403 or 404 on editing run ``run_id`` is no such proof (GitHub answers
        403 for a run another App made, as for a run the Action's token made once the
        service runs as an App): it is logged and a new run is made in its place.
        """
        if not self._statuses_only:
            try:
                with boundary(f"setting the check {check.name} on {sha}"):
                    return self._set_check_run(sha, check, run_id)
            except _ChecksRefused:
                log.info(
                    "GitHub: check runs refused on %s (not a GitHub App token); "
                    "using commit statuses",
                    self.repo,
                )
                self._statuses_only = True
        with boundary(f"setting the status {check.name} on {sha}"):
            self._set_status(sha, check)
        return None

    def _set_check_run(self, sha: str, check: Check, run_id: int | None) -> int:
        output: dict[str, Any] = {"title": check.title, "summary": fit(check.summary)}
        if check.text is not None:
            output["text"] = fit(check.text)
        fields: dict[str, Any] = {
            "status": check.status,
            "output": output,
            "actions": [
                {"label": a.label, "description": a.description, "identifier": a.identifier}
                for a in check.actions
            ],
        }
        if check.conclusion is not None:
            fields["conclusion"] = check.conclusion
        known = self._check_runs.get((sha, check.name), run_id)
        run: CheckRun | None = None
        if known is not None:
            run = self._repo.get_check_run(known)  # lazy: no request until it is edited
            try:
                run.edit(**fields)
            except GithubException as error:
                if error.status not in (403, 404) or isinstance(error, RateLimitExceededException):
                    raise
                log.warning(
                    "GitHub: Sluice's check run %s (%s on %s) may not be edited (%s %s): "
                    "making a new run for the check",
                    known,
                    check.name,
                    sha,
                    error.status,
                    github_message(error),
                )
                run = None
        if run is None:
            try:
                run = self._repo.create_check_run(name=check.name, head_sha=sha, **fields)
            except GithubException as error:
                if _forbidden(error):
                    raise _ChecksRefused from None
                raise
        # Later updates in this job edit it, by its id (the run GitHub answered with
        # names the repository's URL by name).
        self._check_runs[(sha, check.name)] = int(run.id)
        return int(run.id)

    def _set_status(self, sha: str, check: Check) -> None:
        key = check.conclusion if check.status == "completed" else check.status
        state = STATUS_STATES.get(key or "", "pending")
        description = check.title
        if len(description) > STATUS_DESCRIPTION_LIMIT:
            description = description[: STATUS_DESCRIPTION_LIMIT - 1] + "\u2026"
        # A handle: PyGithub takes the sha from its URL and posts under the repository's.
        self._repo.get_commit(sha).create_status(
            state=state, description=description, context=check.name
        )


def _forbidden(error: GithubException) -> bool:
    """A plain 403 (the credentials lack a permission), not a rate limit."""
    return error.status == 403 and not isinstance(error, RateLimitExceededException)


class _ChecksRefused(Exception):
    """GitHub answered 403 to making a check run: the credentials cannot write check runs."""


def _ms(moment: datetime | None) -> int | None:
    """A time PyGithub read from GitHub's answer as epoch ms (None: GitHub said none)."""
    if moment is None:
        return None
    return int((moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp() * 1000)
