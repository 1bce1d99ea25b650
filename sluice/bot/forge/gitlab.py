"""GitLab as a forge, through python-gitlab: the only module that imports ``gitlab``.

:func:`gitlab_client` builds an authenticated :class:`gitlab.Gitlab` (a personal, group
or project access token) and :class:`GitLabForge` speaks for one project with it. A merge
request's ``iid`` is the pull request ``number``; its notes are the comments, award emoji
the reactions, approvals the reviews, commit statuses the checks and the project's
deployments the deployment records. Every python-gitlab or ``requests`` failure is turned
into :class:`~sluice.bot.forge.base.ForgeError` here; messages carry what was asked, the
HTTP status and GitLab's own message, never a credential.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import re
import tempfile
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import gitlab
import requests
from gitlab.exceptions import GitlabError

from sluice import __version__
from sluice.bot.forge.archive import TREE_LIMITS, TreeLimits, extract
from sluice.bot.forge.base import (
    LIST_LIMIT,
    PULL_COMMITS_LIMIT,
    PULL_VERSIONS_LIMIT,
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
from sluice.core.errors import ConfigError

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 30  # seconds, per request
DEFAULT_WORKDIR_LIMIT = TREE_LIMITS.total_bytes
MAX_RETRIES = 3  # after a 429 or a transient 5xx (python-gitlab's default is 10)
DESCRIPTION_LIMIT = 255  # GitLab's cap on a commit status description
STATUS_LIST_LIMIT = 1_000  # most statuses of a commit made_check_run reads (10 pages of 100)
ARCHIVE_CHUNK = 1024 * 1024
# GitHub's reaction names (what the flow speaks) as GitLab award emoji.
EMOJI = {
    "+1": "thumbsup",
    "-1": "thumbsdown",
    "confused": "confused",
    "eyes": "eyes",
    "rocket": "rocket",
    "heart": "heart",
    "hooray": "tada",
    "laugh": "laughing",
}
# A check's conclusion (or, before it completes, its status) as a commit status state.
STATUS_STATES = {
    "queued": "pending",
    "in_progress": "running",
    "success": "success",
    "neutral": "success",
    "skipped": "success",
    "failure": "failed",
    "action_required": "failed",
    "timed_out": "failed",
    "stale": "failed",
    "cancelled": "canceled",
}
DEPLOYMENT_STATES = {
    "in_progress": "running",
    "success": "success",
    "failure": "failed",
    "error": "failed",
}
# Member access levels (Owner 50, Maintainer 40, Developer 30, Reporter 20, Planner 15,
# Guest 10, Minimal access 5) as the forge's roles, highest first.
ACCESS_ROLES = ((50, "admin"), (40, "maintain"), (30, "write"), (5, "read"))

# Anything that looks like a GitLab credential: the token prefixes GitLab gives (personal,
# OAuth, deploy, runner, CI job, trigger, feed, agent ... tokens), and a token in a query
# string or a header written out.
_SECRET = re.compile(
    r"\bgl[a-z]{2,7}-[A-Za-z0-9_\-.]{16,}"
    r"|(?<=private_token=)[^&\s'\"]+"
    r"|(?<=access_token=)[^&\s'\"]+"
    r"|(?i:(?<=PRIVATE-TOKEN': ')[^']+)"
    r"|(?i:(?<=PRIVATE-TOKEN: )\S+)"
)


def redact(text: str, secrets: tuple[str, ...] = ()) -> str:
    """``text`` with ``secrets`` and anything that looks like a GitLab token replaced."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    return _SECRET.sub("[redacted]", text)


# --- the client -------------------------------------------------------------------------


class _Gitlab(gitlab.Gitlab):
    """python-gitlab's client with a bounded retry (three, not ten), and no retry of a
    POST after a transient 5xx: GitLab may have created the note, status or deployment
    before the proxy failed, and posting it twice is worse than failing once (the job
    queue retries the whole job). A 429 is still waited out for every method."""

    def http_request(self, verb: str, path: str, *args: Any, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("max_retries", MAX_RETRIES)
        if verb.lower() == "post":
            kwargs.setdefault("retry_transient_errors", False)
        return super().http_request(verb, path, *args, **kwargs)


def gitlab_client(
    url: str,
    token: str | None,
    *,
    timeout: int = DEFAULT_TIMEOUT,
    per_page: int = 100,
    ssl_verify: bool | str = True,
) -> gitlab.Gitlab:
    """An authenticated :class:`gitlab.Gitlab` for the instance at ``url``
    (``https://gitlab.com``, or a self-managed instance's address, without ``/api/v4``).

    ``token`` is a personal, group or project access token with the ``api`` scope, sent
    as ``PRIVATE-TOKEN``; transient failures (5xx, timeouts) are retried a few times, and
    a 429 is waited out as GitLab's ``Retry-After`` says. Nothing is asked of the server
    here.

    Raises:
        ConfigError: no token given.
    """
    if not token:
        raise ConfigError(
            "no GitLab credentials",
            hint="set SLUICE_GITLAB_TOKEN to an access token with the api scope",
        )
    return _Gitlab(
        url.rstrip("/"),
        private_token=token,
        timeout=timeout,
        per_page=per_page,
        ssl_verify=ssl_verify,
        retry_transient_errors=True,
        user_agent=f"sluice/{__version__}",
    )


# --- errors ---------------------------------------------------------------------------


def _status(error: GitlabError) -> int | None:
    return error.response_code


def _message(error: GitlabError, secrets: tuple[str, ...] = ()) -> str:
    """GitLab's message, redacted: a string, or a dict of field -> problems for a
    validation error; without the status GitLab repeats in front of it (``404 Project Not
    Found``)."""
    raw: Any = error.error_message
    if isinstance(raw, dict):
        parts = []
        for key, value in raw.items():
            listed = value if isinstance(value, list) else [value]
            parts.append(f"{key} {', '.join(str(v) for v in listed)}".strip())
        text = "; ".join(parts)
    elif isinstance(raw, list):
        text = "; ".join(str(v) for v in raw)
    else:
        text = str(raw or "")
    text = " ".join(text.split())  # an HTML error page on one line
    code = _status(error)
    if code is not None:
        text = text.removeprefix(f"{code} ").strip()
    return redact(text, secrets)[:300] or "no message"


@contextmanager
def _boundary(what: str, secrets: tuple[str, ...] = ()) -> Iterator[None]:
    """Turn python-gitlab and requests failures into ForgeError; never show a credential."""
    try:
        yield
    except ForgeError:
        raise
    except GitlabError as error:
        code = _status(error)
        status = str(code) if code is not None else type(error).__name__
        raise ForgeError(f"GitLab: {what} failed: {status} {_message(error, secrets)}") from None
    except requests.RequestException as error:
        # requests' messages hold URLs: keep only the kind of failure.
        response = error.response
        reason = str(response.status_code) if response is not None else type(error).__name__
        raise ForgeError(f"GitLab: {what} failed: {reason} (network error)") from None


# --- the forge --------------------------------------------------------------------------


def _pushed(shas: Collection[str]) -> str:
    """What asking who pushed ``shas`` (to any branch) is, for an error."""
    return next(iter(shas))[:12] if len(shas) == 1 else f"{len(shas)} commits"


def _event_ref(data: dict[str, Any]) -> str | None:
    """The ref a push event's ``push_data`` names (``refs/heads/<branch>``,
    ``refs/tags/<tag>``); None where it names none (a push of many refs at once)."""
    ref, kind = data.get("ref"), data.get("ref_type")
    if not isinstance(ref, str) or not ref:
        return None
    return {"branch": f"refs/heads/{ref}", "tag": f"refs/tags/{ref}"}.get(str(kind))


class GitLabForge:
    """The :class:`~sluice.bot.forge.base.Forge` for one GitLab project.

    Args:
        client: An authenticated client, usually from :func:`gitlab_client`.
        repo: The project's path with its namespace (``group/subgroup/name``).
        repo_id: The project's numeric id (a webhook's ``project.id``), when known: every
            request about the project is then made under it (``/projects/:id/...``), not
            under ``repo``. GitLab answers a renamed or moved project's old path only
            until another project takes it; its id never changes. ``repo`` still names
            the project in messages, and :meth:`identity` without an id asks by it (which
            project has the path now).
        workdir_limit_bytes: The largest total size of the files :meth:`fetch_tree`
            writes, and of the (compressed) archive it downloads; overrides
            ``tree_limits.total_bytes`` when given.
        tree_limits: The service's limits on a commit's files (:class:`TreeLimits`).

    One forge serves one job: it remembers what it learnt on the way (its own username,
    team members, each merge request's head and web address, the states it posted) and
    forgets it with the job.
    """

    name: str = "gitlab"
    comment_limit: int = 1_000_000  # GitLab's cap on a note's body

    def __init__(
        self,
        client: gitlab.Gitlab,
        repo: str,
        *,
        workdir_limit_bytes: int | None = None,
        tree_limits: TreeLimits = TREE_LIMITS,
        repo_id: int | None = None,
    ) -> None:
        if repo_id is not None and (
            not isinstance(repo_id, int) or isinstance(repo_id, bool) or repo_id <= 0
        ):
            raise ValueError(f"a GitLab project id is a positive integer, not {repo_id!r}")
        self.repo = repo
        self.repo_id = repo_id
        if workdir_limit_bytes is not None:
            tree_limits = dataclasses.replace(tree_limits, total_bytes=workdir_limit_bytes)
        self.tree_limits = tree_limits
        self.workdir_limit_bytes = tree_limits.total_bytes
        self._client = client
        self._secrets = tuple(
            t for t in (client.private_token, client.oauth_token, client.job_token) if t
        )
        self._holders: dict[str, int | None] = {}  # case-folded username -> its user's id now
        # No request; every call about the project is made under its id when known.
        self._project = client.projects.get(repo if repo_id is None else repo_id, lazy=True)
        self._username: str | None = None  # the token's user
        self._teams: dict[str, frozenset[str]] = {}
        self._accounts: dict[int, Account | None] = {}  # user id -> their account now
        self._heads: dict[int, tuple[str, str | None]] = {}  # iid -> head sha, source branch
        self._mr_urls: dict[int, str] = {}  # iid -> the merge request's web address
        self._note_urls: dict[int, str] = {}  # iid -> the bot's sticky note's address
        self._states: dict[tuple[str, str], str] = {}  # (sha, name) -> status state posted
        self._status_ids: dict[tuple[str, str], int] = {}  # (sha, name) -> the status's id
        self._deployments: dict[int, str] = {}  # deployment id -> status set
        self._pipelines: dict[str, tuple[str, int]] = {}  # sha -> its statuses' ref, pipeline

    def _guard(self, what: str) -> Any:
        return _boundary(what, self._secrets)

    def _message(self, error: GitlabError) -> str:
        return _message(error, self._secrets)

    def _mr(self, number: int) -> Any:
        return self._project.mergerequests.get(number, lazy=True)

    # -- files ---------------------------------------------------------------------------

    def fetch_tree(self, sha: str, dest: Path) -> None:
        """Download the ``tar.gz`` archive of ``sha`` and extract it into ``dest`` without
        its top directory ``<project>-<sha>-<sha>/`` (see the protocol). The download
        stops at :attr:`workdir_limit_bytes`."""
        limit = self.workdir_limit_bytes
        dest.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=dest.parent) as archive:
            written = 0

            def write(chunk: bytes) -> None:
                nonlocal written
                written += len(chunk)
                if written > limit:
                    raise UnusableTree(
                        f"GitLab: the archive of {sha} is larger than the limit of {limit:,} "
                        "bytes of all files together (SLUICE_TREE_TOTAL_BYTES, a setting of the Sluice "
                        "service, not of the repository)",
                        hint="keep large or generated files out of the repository, or ask the "
                        "operator of the Sluice service to raise the limit",
                    )
                archive.write(chunk)

            with self._guard(f"downloading the archive of {sha}"):
                self._project.repository_archive(
                    sha=sha,
                    format="tar.gz",
                    streamed=True,
                    action=write,
                    chunk_size=ARCHIVE_CHUNK,
                )
            archive.seek(0)
            extract(archive, dest, forge="GitLab", sha=sha, strip_top=True, limits=self.tree_limits)

    def read_file(self, ref: str, path: str) -> str | None:
        """The text of ``path`` at ``ref``; None when the file (or the ref) does not exist."""
        what = f"reading {path} at {ref}"
        with self._guard(what):
            try:
                raw = self._project.files.raw(file_path=path, ref=ref)
            except GitlabError as error:
                if _status(error) == 404:
                    return None
                raise
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ForgeError(f"GitLab: {what} failed: the file is not UTF-8 text") from None

    def list_dir(self, ref: str, path: str) -> list[DirEntry] | None:
        """The entries of folder ``path`` at ``ref`` (the repository tree, a page of 100 at a
        time, at most :data:`LIST_LIMIT` entries); None when there is no such folder (or
        ref). GitLab's tree gives no sizes."""
        folder = path.strip("/")
        what = f"listing {folder or '/'} at {ref}"
        kinds = {"blob": "file", "tree": "dir"}
        entries: list[DirEntry] = []
        page = 1
        while True:
            with self._guard(what):
                try:
                    found = self._project.repository_tree(
                        path=folder, ref=ref, page=page, per_page=100, get_all=False
                    )
                except GitlabError as error:
                    if _status(error) == 404:
                        return None
                    raise
            found = list(found)
            for item in found:
                kind = kinds.get(str(item.get("type")), "other")
                if kind == "file" and str(item.get("mode")) == "120000":
                    kind = "link"
                entries.append(DirEntry(str(item.get("name")), kind))
            if len(entries) > LIST_LIMIT:
                raise ForgeError(f"GitLab: {what} failed: over {LIST_LIMIT} entries")
            if len(found) < 100:
                break
            page += 1
        if not entries:
            # GitLab lists a missing folder as empty; a file is not a folder either.
            if folder and self.read_file(ref, folder) is not None:
                raise ForgeError(f"GitLab: {what} failed: {folder} is a file, not a folder")
            return None
        return sorted(entries, key=lambda e: e.name)

    def changed_files(self, number: int) -> list[str] | None:
        """The paths merge request ``!number`` changes (its changes); None when GitLab cut
        the list (``overflow``: over its limit of files or lines)."""
        with self._guard(f"listing the files of merge request !{number}"):
            answer = self._project.mergerequests.get(number).changes()
        found: dict[str, Any] = answer if isinstance(answer, dict) else {}
        if found.get("overflow"):
            return None
        changes = found.get("changes") or []
        paths = {str(c[key]) for c in changes for key in ("old_path", "new_path") if c.get(key)}
        return sorted(paths)

    # -- merge requests ------------------------------------------------------------------

    def pull_request(self, number: int) -> PullRequest:
        """Merge request ``!number`` as GitLab reports it now. A fork is a merge request
        whose source project is not the target project; ``draft`` reads GitLab's
        ``draft``, or ``work_in_progress`` on versions before 14."""
        with self._guard(f"reading merge request !{number}"):
            data: dict[str, Any] = self._project.mergerequests.get(number).attributes
        diff_refs = data.get("diff_refs") or {}
        draft = data.get("draft")
        if draft is None:
            draft = data.get("work_in_progress", False)
        fork = data.get("source_project_id") != data.get("target_project_id")
        head = str(data.get("sha") or "")
        source = str(data.get("source_branch") or "")
        self._heads[number] = (head, None if fork else source)
        if data.get("web_url"):
            self._mr_urls[number] = str(data["web_url"])
        author = data.get("author") or {}
        state = data.get("state")
        return PullRequest(
            number=int(data.get("iid", number)),
            head_sha=head,
            head_ref=source,
            base_ref=str(data.get("target_branch") or ""),
            base_sha=str(diff_refs.get("base_sha") or ""),
            author=str(author.get("username") or "ghost"),
            draft=bool(draft),
            fork=fork,
            open=state == "opened",
            merged=state == "merged",
            title=str(data.get("title") or ""),
            author_id=_account_id(author.get("id")),
        )

    def pull_commits(self, number: int) -> list[PullCommit] | None:
        """The merge request's commits, oldest first; GitLab lists e-mails, not usernames,
        so only the shas are known (who pushed comes from its push and merge request
        hooks, which name the user)."""
        with self._guard(f"listing the commits of merge request !{number}"):
            listed = self._mr(number).commits()  # an iterator: pages as it goes
            shas: list[str] = []
            for commit in listed:
                if len(shas) == PULL_COMMITS_LIMIT:
                    return None
                shas.append(str(commit.id))
        return [PullCommit(sha) for sha in reversed(shas)]  # GitLab lists newest first

    def reviews(self, number: int) -> list[Review]:
        """The approvals of merge request ``!number``, as GitLab lists them: one APPROVED
        review per approver, its id and ``user_id`` the user's id (``approved_by[].user.id``:
        the gate tells people apart by it, a username can be changed), ``submitted_at`` its
        ``approved_at`` (GitLab's clock when it was given; None from a GitLab that does not
        list it, before 2025). GitLab does not say which commit an approval was given on
        (``commit_sha`` None): the flow binds it from :meth:`pull_versions`, never from a
        webhook."""
        with self._guard(f"listing the approvals of merge request !{number}"):
            approvals = self._mr(number).approvals.get().attributes
        out = []
        for entry in approvals.get("approved_by") or []:
            user = entry.get("user") or {}
            at = entry.get("approved_at")
            out.append(
                Review(
                    id=int(user.get("id") or 0),
                    user=str(user.get("username") or "ghost"),
                    state="APPROVED",
                    commit_sha=None,
                    submitted_at=str(at) if at else None,
                    user_id=_account_id(user.get("id")),
                )
            )
        return out

    def pull_versions(self, number: int) -> list[PullVersion]:
        """The versions of merge request ``!number`` (``GET .../versions``: GitLab makes one
        at each push to its source branch, and lists them newest first), oldest first, the
        newest :data:`PULL_VERSIONS_LIMIT` of them: each one's ``head_commit_sha`` and
        ``created_at`` (GitLab's clock).

        Raises:
            ForgeError: GitLab could not be asked, or listed a version without a head or a
                time (no approval is bound then: the gate fails closed).
        """
        what = f"listing the versions of merge request !{number}"
        found: list[PullVersion] = []
        with self._guard(what):
            listed = self._mr(number).diffs.list(iterator=True, per_page=100)
            for version in listed:
                if len(found) == PULL_VERSIONS_LIMIT:
                    break
                attrs = version.attributes
                head, made = attrs.get("head_commit_sha"), created_ms(attrs.get("created_at"))
                if not isinstance(head, str) or not head or made is None:
                    raise ForgeError(
                        f"GitLab: {what} failed: version {attrs.get('id')!r} names no head "
                        f"commit or creation time (head_commit_sha={head!r}, "
                        f"created_at={attrs.get('created_at')!r})"
                    )
                found.append(PullVersion(head.lower(), made))
        return found[::-1]

    def permission(self, user: str) -> str:
        """``user``'s role from their access level on the project, inherited from parent
        groups included: Owner ``admin``, Maintainer ``maintain``, Developer ``write``,
        Reporter, Planner, Guest and Minimal access ``read``; ``none`` for a non-member or
        an unknown user."""
        with self._guard(f"reading {user}'s access to {self.repo}"):
            found = self._client.users.list(username=user, get_all=False)
            ids = [u.id for u in found if str(u.username).casefold() == user.casefold()]
            if not ids:
                return "none"
            try:
                member = self._project.members_all.get(ids[0])
            except GitlabError as error:
                if _status(error) == 404:
                    return "none"
                raise
        level = int(member.attributes.get("access_level") or 0)
        return next((role for floor, role in ACCESS_ROLES if level >= floor), "none")

    def account_of(self, user_id: int) -> Account | None:
        """The user ``user_id`` is now (``GET /users/:id``), asked once per forge: their
        username, and ``bot`` (true for project and group access token users and service
        accounts; not said where the answer has none); None when GitLab knows no such user
        (404: deleted, or never was), or answers for another id."""
        if user_id in self._accounts:
            return self._accounts[user_id]
        with self._guard(f"reading the username of user {user_id}"):
            try:
                attrs = self._client.users.get(user_id).attributes
                bot = attrs.get("bot")
                account = (
                    Account(str(attrs["username"]), bot if isinstance(bot, bool) else None)
                    if attrs.get("id") == user_id and attrs.get("username")
                    else None
                )
            except GitlabError as error:
                if _status(error) != 404:
                    raise
                account = None
        self._accounts[user_id] = account
        return account

    def repository_of(self, repo_id: int) -> str | None:
        """The ``path_with_namespace`` of project ``repo_id`` now (``GET /projects/:id``);
        None when GitLab shows the service's token no such project (404), or answers for
        another id."""
        with self._guard(f"reading the path of project {repo_id}"):
            try:
                attrs = self._client.projects.get(repo_id).attributes
            except GitlabError as error:
                if _status(error) != 404:
                    raise
                return None
        path = attrs.get("path_with_namespace")
        return str(path) if attrs.get("id") == repo_id and isinstance(path, str) else None

    def identity(self, repo_id: int | None = None) -> RepositoryIdentity | None:
        """Project ``repo_id`` now, or this forge's own by its path (``GET /projects/:id``);
        None when GitLab shows the token no such project (404), or answers for another
        id."""
        asked: int | str = self.repo if repo_id is None else repo_id
        with self._guard(f"reading project {asked}"):
            try:
                attrs = self._client.projects.get(asked).attributes
            except GitlabError as error:
                if _status(error) != 404:
                    raise
                return None
        found, path = attrs.get("id"), attrs.get("path_with_namespace")
        if not isinstance(found, int) or not isinstance(path, str):
            return None
        if repo_id is not None and found != repo_id:
            return None
        return RepositoryIdentity(found, path, created_ms(attrs.get("created_at")))

    def made_check_run(self, repo_id: int, run_id: int, sha: str) -> bool:
        """Whether project ``repo_id`` holds the commit status ``run_id`` on ``sha``: GitLab
        lists it among the commit's statuses, asked by the project's id (``GET
        /projects/:id/repository/commits/:sha/statuses?all=true``: every status, not only
        the latest of each name, which another post of the name would hide; pages of 100,
        at most :data:`STATUS_LIST_LIMIT`). A status id is one project's, kept through
        renames and transfers (its project's id is), and no other project lists it: proof
        the service worked for that project (:meth:`set_check` returns the ids the flow
        records). False when the project lists others only, or GitLab shows the token no
        such project or commit (404)."""
        wanted = sha.lower()
        project = self._client.projects.get(repo_id, lazy=True)
        with self._guard(f"reading whether project {repo_id} holds status {run_id}"):
            try:
                listed = project.commits.get(wanted, lazy=True).statuses.list(
                    iterator=True, per_page=100, query_parameters={"all": "true"}
                )
                for status in itertools.islice(listed, STATUS_LIST_LIMIT):
                    attrs = status.attributes
                    same = _positive_id(attrs.get("id")) == run_id
                    if same and str(attrs.get("sha")).lower() == wanted:
                        return True
            except GitlabError as error:
                if _status(error) != 404:
                    raise
        return False

    def pushers_of(self, branch: str, sha: str) -> list[tuple[str, int | None]]:
        """Who the project's push events (``GET /projects/:id/events?action=pushed``, kept
        whether or not a push hook was sent) name as pushing ``branch`` to ``sha``
        (:meth:`push_records`)."""
        ref = f"refs/heads/{branch}"
        records = self.push_records([sha])
        return list({(r.login, r.user_id): None for r in records if r.ref == ref})

    def push_records(self, shas: Collection[str]) -> list[PushRecord]:
        """The project's push events of any branch or tag to one of ``shas``: newest first,
        at most :data:`PUSH_RECORDS_LIMIT` events in pages of 100 (the API filters no
        branch), one listing for them all. An event is taken only when its own
        ``push_data``'s ``commit_to`` is one of the shas (a push of many commits names its
        last alone, ``commit_from`` the ref's head before it), with the ref it names; a
        push of many refs at once, which GitLab records as one event naming no commit,
        names nobody; its author by username and id."""
        wanted = {sha.lower() for sha in shas}
        found: list[PushRecord] = []
        with self._guard(f"reading who pushed {_pushed(shas)}"):
            events = self._project.events.list(action="pushed", per_page=100, iterator=True)
            for event in itertools.islice(events, PUSH_RECORDS_LIMIT):  # no page past them
                attrs = event.attributes
                data, author = attrs.get("push_data"), attrs.get("author")
                if not isinstance(data, dict) or not isinstance(author, dict):
                    continue
                after = str(data.get("commit_to")).lower()
                if after in wanted and author.get("username"):
                    before = data.get("commit_from")
                    before = str(before).lower() if before and str(before).strip("0") else None
                    login, uid = str(author["username"]), _account_id(author.get("id"))
                    found.append(PushRecord(before, after, login, uid, _event_ref(data)))
        return found

    # -- notes ---------------------------------------------------------------------------

    def _own_username(self) -> str:
        """The token's user (``GET /user``), asked once per forge.

        Raises:
            ForgeError: GitLab will not say (401/403, e.g. a CI job token): without it
                the bot's note cannot be told from someone else's holding the marker.
        """
        if self._username is None:
            if self._client.user is None:
                try:
                    self._client.auth()
                except GitlabError as error:
                    if _status(error) not in (401, 403):
                        raise  # a passing failure: asked again next time
                    raise ForgeError(
                        f"GitLab: reading the token's own user (GET /user) failed: "
                        f"{_status(error)} {self._message(error)}; Sluice finds its note on a "
                        "merge request by its author, so it needs to know who it is",
                        hint="set SLUICE_GITLAB_TOKEN to a personal, group or project access "
                        "token with the api scope",
                    ) from None
            if self._client.user is None:
                raise ForgeError("GitLab: GET /user did not say who the token's user is")
            self._username = str(self._client.user.username)
        return self._username

    def _note_url(self, number: int, note_id: int) -> str:
        mr_url = self._mr_urls.get(number) or (
            f"{self._client.url}/{self.repo}/-/merge_requests/{number}"
        )
        return f"{mr_url}#note_{note_id}"

    def upsert_comment(
        self, number: int, marker: str, body: str, comment_id: int | None = None
    ) -> Posted:
        """Edit the bot's note on merge request ``!number`` (note ``comment_id`` while it
        is still the bot's there, else the one opening with ``marker``), or create it. The
        bot's: a non-system note written by the token's user (:meth:`_own_username`);
        found by marker, the oldest of its opening with it. Anyone else's note is never edited
        nor taken as the bot's. The merge request is read once per forge, so statuses on
        its head can link to the note."""
        if marker not in body:
            raise ValueError(f"the comment body does not contain its marker {marker!r}")
        if number not in self._heads:
            self.pull_request(number)
        with self._guard(f"updating the note on merge request !{number}"):
            mr = self._mr(number)
            note = self._note_by_id(mr, comment_id) or self._own_note(mr, marker)
            if note is None:
                created = mr.notes.create({"body": body})
                self._note_urls[number] = self._note_url(number, int(created.id))
                return Posted(int(created.id), created_ms(created.attributes.get("updated_at")))
            attrs = note.attributes
            if attrs.get("body") != body:  # GitLab's answer: the note, updated_at too
                attrs = mr.notes.update(note.id, {"body": body}) or {}
            self._note_urls[number] = self._note_url(number, int(note.id))
            return Posted(int(note.id), created_ms(attrs.get("updated_at")))

    def edit_comment(self, number: int, comment_id: int, body: str) -> bool:
        """Rewrite our note ``comment_id`` on merge request ``!number``, by its id only."""
        with self._guard(f"updating note {comment_id} on merge request !{number}"):
            mr = self._mr(number)
            note = self._note_by_id(mr, comment_id)
            if note is None:
                return False
            if note.attributes.get("body") != body:
                mr.notes.update(note.id, {"body": body})
            return True

    def own_comments(self, number: int) -> list[PostedComment]:
        """Our notes on merge request ``!number`` (non-system notes by the token's user),
        oldest first. No time: GitLab moves a note's ``updated_at`` when anyone awards it
        an emoji, so it does not say when its text was written (red team round 9)."""
        with self._guard(f"reading the notes on merge request !{number}"):
            found = []
            for note in self._own_notes(self._mr(number)):
                author = note.attributes.get("author") or {}
                found.append(
                    PostedComment(
                        str(author.get("username") or ""),
                        _account_id(author.get("id")),
                        str(note.attributes.get("body") or ""),
                        None,
                        True,
                        int(note.id),
                    )
                )
            return found

    def _own_notes(self, mr: Any) -> list[Any]:
        """The non-system notes of ``mr`` by the token's user, oldest first."""
        me = self._own_username()  # asked first: a failed lookup makes no second note
        notes = mr.notes.list(get_all=True, sort="asc", order_by="created_at")
        return [note for note in notes if _is_own(note, me)]

    def _own_note(self, mr: Any, marker: str) -> Any:
        """Our oldest note of ``mr`` opening with ``marker``."""
        return next(
            (n for n in self._own_notes(mr) if opens_with(n.attributes.get("body"), marker)),
            None,
        )

    def _note_by_id(self, mr: Any, note_id: int | None) -> Any:
        """Note ``note_id`` of ``mr`` when it is still the token's user's own."""
        if note_id is None:
            return None
        try:
            note = mr.notes.get(note_id)
        except GitlabError as error:
            if _status(error) == 404:
                return None
            raise
        return note if _is_own(note, self._own_username()) else None

    def reply(self, number: int, body: str) -> None:
        """Post a new note on merge request ``!number``."""
        with self._guard(f"commenting on merge request !{number}"):
            self._mr(number).notes.create({"body": body})

    def comment(self, number: int, comment_id: int) -> PostedComment | None:
        """Note ``comment_id`` of merge request ``!number`` as GitLab holds it
        (``GET .../merge_requests/:iid/notes/:id``); None when it is gone (404)."""
        with self._guard(f"reading note {comment_id} on merge request !{number}"):
            try:
                note = self._mr(number).notes.get(comment_id)
            except GitlabError as error:
                if _status(error) == 404:
                    return None
                raise
            author = getattr(note, "author", None) or {}
            if not author.get("username"):
                return None
            own = author["username"] == self._own_username()
        return PostedComment(
            str(author["username"]),
            _account_id(author.get("id")),
            str(note.body or ""),
            created_ms(note.attributes.get("updated_at")),
            own,
            comment_id,
        )

    def react(self, number: int, comment_id: int, reaction: str) -> bool:
        """Award the emoji for ``reaction`` (``+1`` is ``thumbsup`` ...) to note
        ``comment_id`` of merge request ``!number``; one the bot already awarded there is
        left alone (GitLab answers 404 or 400 "has already been taken"). False when the
        note is gone (any other 404)."""
        name = EMOJI.get(reaction, reaction)
        with self._guard(f"reacting to note {comment_id} on merge request !{number}"):
            note = self._mr(number).notes.get(comment_id, lazy=True)
            try:
                note.awardemojis.create({"name": name})
            except GitlabError as error:
                already = "already" in self._message(error)
                if _status(error) == 404 and not already:
                    return False
                if _status(error) not in (400, 404) or not already:
                    raise
                log.debug("GitLab: %s already awarded to note %s", name, comment_id)
        return True

    # -- teams, refs and branches --------------------------------------------------------

    def team_members(self, team: str) -> frozenset[str]:
        """The usernames of the members of the group ``team`` (its full path,
        ``org/team`` or deeper; members inherited from parent groups included; blocked
        and pending members left out), read once per forge.

        Empty, and logged, when the group does not exist or is not visible to the token
        (404), or may not be read (403): its members then approve nothing, the gate fails
        closed. Other failures raise :class:`ForgeError`.
        """
        cached = self._teams.get(team)
        if cached is not None:
            return cached
        path = team.removeprefix("@").strip("/")
        if not path:
            log.warning("GitLab: %r is not a group path: no members", team)
            return frozenset()
        with self._guard(f"listing the members of the group {path}"):
            try:
                listed = self._client.groups.get(path, lazy=True).members_all.list(get_all=True)
                members = frozenset(
                    str(m.username)
                    for m in listed
                    if m.attributes.get("state", "active") == "active"
                )
            except GitlabError as error:
                if _status(error) not in (403, 404):
                    raise
                log.warning(
                    "GitLab: the members of the group %s cannot be read (%s %s): no members",
                    path,
                    _status(error),
                    self._message(error),
                )
                members = frozenset()
        self._teams[team] = members
        return members

    def id_of(self, login: str) -> int | None:
        """The id of the user holding the username ``login`` now (``GET
        /users?username=``), asked once per forge; None when no user has it, or GitLab
        answers only for other usernames or with no id a person has."""
        key = login.casefold()
        if key in self._holders:
            return self._holders[key]
        with self._guard(f"reading the user {login}"):
            listed = self._client.users.list(username=login, get_all=False)
        found = [
            user.attributes.get("id")
            for user in listed
            if str(user.attributes.get("username") or "").casefold() == key
        ]
        uid = found[0] if len(found) == 1 else None
        valid = isinstance(uid, int) and not isinstance(uid, bool) and uid > 0
        self._holders[key] = uid if valid else None
        return self._holders[key]

    def commit_of(self, ref: str) -> str | None:
        """The commit ``ref`` points at: ``main`` is tried as a branch, then as a tag;
        ``heads/...``, ``tags/...`` and ``refs/...`` are taken as written. GitLab peels
        annotated tags itself. None when there is no such ref."""
        name = ref.removeprefix("refs/")
        if name.startswith("heads/"):
            candidates = [("branch", name.removeprefix("heads/"))]
        elif name.startswith("tags/"):
            candidates = [("tag", name.removeprefix("tags/"))]
        else:
            candidates = [("branch", name), ("tag", name)]
        with self._guard(f"resolving {ref}"):
            for kind, candidate in candidates:
                manager: Any = self._project.branches if kind == "branch" else self._project.tags
                try:
                    found = manager.get(candidate)
                except GitlabError as error:
                    if _status(error) == 404:
                        continue
                    raise
                commit = found.attributes.get("commit") or {}
                if commit.get("id"):
                    return str(commit["id"])
                log.info("GitLab: %s points at no commit", ref)
                return None
        return None

    def on_branch(self, sha: str, branch: str) -> bool:
        """Whether ``sha`` is reachable from ``branch`` (a branch name or a commit): the
        merge base of the two is ``sha`` itself. False when either is unknown (400) or
        they share no history (404)."""
        with self._guard(f"comparing {sha} with {branch}"):
            try:
                base = self._project.repository_merge_base([sha, branch])
            except GitlabError as error:
                if _status(error) in (400, 404):
                    log.info("GitLab: no merge base of %s and %s: not on the branch", sha, branch)
                    return False
                raise
        found = str(base.get("id") or "") if isinstance(base, dict) else ""
        return bool(found) and found.lower().startswith(sha.lower())

    # -- merging and deployment records --------------------------------------------------

    def merge(self, number: int, method: str, sha: str) -> str:
        """Merge merge request ``!number`` if its head is still ``sha``; the commit the
        target branch now points at.

        GitLab sets the merge method per project (merge commit, merge commit with
        semi-linear history, fast-forward): ``merge`` and ``rebase`` both merge the way
        the project says, ``squash`` asks GitLab to squash first (refused when the
        project never squashes). Returns the merge commit, else the squash commit, else
        (fast-forward) ``sha``. GitLab refuses with 409 when the head moved and 405, 406
        or 422 when the merge request cannot be merged (a draft, conflicts, failing
        pipeline, missing approvals): :class:`ForgeError` with GitLab's message. The
        request is not retried, so a merge that went through is never asked twice.
        """
        what = f"merging merge request !{number} ({method}) at {sha}"
        data: dict[str, Any] = {"sha": sha}
        if method == "squash":
            data["squash"] = True
        path = f"{self._project.mergerequests.path}/{number}/merge"
        with self._guard(what):
            try:
                result = self._client.http_put(path, post_data=data, retry_transient_errors=False)
            except GitlabError as error:
                code = _status(error)
                if code not in (405, 406, 409, 422):
                    raise
                reason = self._message(error)
                raise ForgeError(
                    f"GitLab: {what} failed: {code} the MR cannot be merged: {reason}"
                ) from None
        if not isinstance(result, dict) or result.get("state") != "merged":
            said = result.get("merge_error") if isinstance(result, dict) else None
            reason = redact(str(said), self._secrets) if said else "GitLab did not merge it"
            raise ForgeError(f"GitLab: {what} failed: the MR cannot be merged: {reason}")
        return str(result.get("merge_commit_sha") or result.get("squash_commit_sha") or sha)

    def start_deployment(
        self, sha: str, environment: str, description: str, ref: str = ""
    ) -> int | None:
        """Create a ``running`` deployment of ``sha`` (on branch ``ref``) to
        ``environment`` (GitLab creates the environment when it is new); its id. GitLab's
        deployments carry no description: ``description`` is only logged.

        Deployment records are a report, not the promotion itself: when the token may not
        write them (403) this logs a warning and returns None, and the promotion goes on
        without a record. Other failures raise :class:`ForgeError`.
        """
        data = {
            "environment": environment,
            "sha": sha,
            "ref": ref or sha,
            "tag": False,
            "status": "running",
        }
        with self._guard(f"recording a deployment of {sha} to {environment}"):
            try:
                deployment = self._project.deployments.create(data)
            except GitlabError as error:
                if _status(error) != 403:
                    raise
                log.warning(
                    "GitLab: deployments may not be recorded on %s (403 %s): promoting "
                    "without a deployment record",
                    self.repo,
                    self._message(error),
                )
                return None
        number = int(deployment.id)
        self._deployments[number] = "running"
        log.debug("GitLab: deployment %s of %s: %s", number, sha, description)
        return number

    def deployment_status(self, deployment: int, state: str, description: str) -> None:
        """Set deployment ``deployment`` to ``state`` (in_progress is GitLab's running,
        failure and error its failed). A state this forge already set is not sent again;
        a 403 (no right) or 400 (GitLab refuses the transition) is logged and ignored."""
        status = DEPLOYMENT_STATES.get(state, "failed")
        if self._deployments.get(deployment) == status:
            return
        with self._guard(f"setting deployment {deployment} to {state}"):
            try:
                self._project.deployments.update(deployment, {"status": status})
            except GitlabError as error:
                if _status(error) not in (400, 403):
                    raise
                log.warning(
                    "GitLab: deployment %s may not be set to %s (%s %s): %s",
                    deployment,
                    status,
                    _status(error),
                    self._message(error),
                    description,
                )
                return
        self._deployments[deployment] = status

    # -- checks --------------------------------------------------------------------------

    def post_into(self, sha: str, ref: str, pipeline: int) -> None:
        """Post the statuses of ``sha`` into pipeline ``pipeline`` of ``ref``: a merge
        train's (``refs/merge-requests/<iid>/train``), whose commit no branch holds.
        GitLab adds each status to that pipeline as a job of its ``external`` stage, so
        the pipeline, and the train, waits for it and fails when it fails. Without
        them, GitLab would look for a pipeline of ``sha`` on a branch and find none."""
        self._pipelines[sha] = (ref, pipeline)

    def set_check(self, sha: str, check: Check, run_id: int | None = None) -> int | None:
        """Post the commit status ``check.name`` on ``sha``: its state from the check's
        status and conclusion, the title as description, and, once this forge knows the
        merge request whose head is ``sha`` and its sticky note, a link to that note.

        GitLab refuses (400 "Cannot transition status") a state the status already has:
        a state this forge already posted is not sent again, and that answer is taken as
        done. GitLab has no buttons: ``check.actions`` are left out (approvals are
        GitLab's own), and so are the summary and text (the sticky note holds them).

        Returns the id of the status GitLab answers (one project's: GitLab moves a pending
        or running status of the name in place and replaces a finished one with a new
        status): the flow records it as the run Sluice made
        (:mod:`sluice.bot.flow.own_checks`), proof a project renamed or transferred since
        is the one served (:meth:`made_check_run`). A state not posted again, or refused
        as the status's already, returns the id this forge got for it, else None.
        ``run_id`` is not used: GitLab picks the status a post moves itself.
        """
        key = check.conclusion if check.status == "completed" else check.status
        state = STATUS_STATES.get(key or "", "failed" if check.status == "completed" else "pending")
        if self._states.get((sha, check.name)) == state:
            return self._status_ids.get((sha, check.name))
        description = check.title
        if len(description) > DESCRIPTION_LIMIT:
            description = description[: DESCRIPTION_LIMIT - 1] + "\u2026"
        data: dict[str, Any] = {"state": state, "name": check.name, "description": description}
        for number, (head, source) in self._heads.items():
            if head != sha:
                continue
            if source:
                data["ref"] = source
            if number in self._note_urls:
                data["target_url"] = self._note_urls[number]
                break
        if sha in self._pipelines:  # a train's commit may also be a head (nothing ahead)
            data["ref"], data["pipeline_id"] = self._pipelines[sha]
        with self._guard(f"setting the status {check.name} on {sha}"):
            try:
                made = self._project.commits.get(sha, lazy=True).statuses.create(data)
            except GitlabError as error:
                if _status(error) != 400 or "Cannot transition status" not in self._message(error):
                    raise
                log.debug("GitLab: %s on %s is already %s", check.name, sha, state)
            else:
                status_id = _positive_id(made.attributes.get("id"))
                if status_id is not None:
                    self._status_ids[(sha, check.name)] = status_id
        self._states[(sha, check.name)] = state
        return self._status_ids.get((sha, check.name))


__all__ = ["DEFAULT_TIMEOUT", "GitLabForge", "gitlab_client", "redact"]


def _account_id(value: object) -> int | None:
    """A GitLab user id as the API gave it (a positive integer); None for anything else."""
    return _positive_id(value)


def _positive_id(value: object) -> int | None:
    """An id as the API gave it (a positive integer); None for anything else."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _is_own(note: Any, me: str) -> bool:
    """Whether ``note`` is a person's note (not GitLab's system note) written by ``me``."""
    attrs = note.attributes
    return not attrs.get("system") and (attrs.get("author") or {}).get("username") == me
