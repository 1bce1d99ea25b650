"""A stateful GitLab REST API (v4) at the wire, for the service's tests.

Registered on a ``responses.RequestsMock``, so python-gitlab really runs and every request
it makes is a real HTTP request that this fake answers with bodies shaped like GitLab's.
It holds one project (by default ``data/warehouse`` on ``https://gitlab.example.com``):
its merge requests, their notes, award emoji and approvals, commit statuses, members,
groups, files by ref, branches and tags, merges, deployments, and a ``tar.gz`` archive per
commit. A request for a route it does not know is a ConnectionError (``responses`` finds
no match; no internet); a request for another project is ``404 Project Not Found``.
``rename`` moves the project to a new path, its id kept: GitLab's API answers its old path
as the project (it follows the redirect GitLab keeps) until another project takes it
(``taken``), then as that one.

Tests arrange it through plain fields and helpers (``add_mr``, ``add_note``, ``approve``,
``add_tree``, ``fail``; ``members``, ``groups``, ``files``, ``branches``, ``tags``,
``branch_commits`` are dicts) and read what the bot did in ``notes``, ``awards``,
``statuses``, ``merges``, ``deployments`` and ``requests``. Every callback holds ``lock``,
so the service's worker threads may call it. Error messages follow GitLab's where known;
the texts for a refused deployment transition are this fake's own.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit, urlunsplit

import responses

from sluice.bot.forge.memory import account_id_of
from tests.helpers.github_wire import tarball
from tests.helpers.graph import reachable

Answer = tuple[int, dict[str, str], Any]
STATES = ("pending", "running", "success", "failed", "canceled", "skipped")
# The state-machine event GitLab names when it refuses a status transition.
EVENTS = {"pending": "enqueue", "running": "run", "success": "success", "failed": "drop",
          "canceled": "cancel", "skipped": "skip"}  # fmt: skip
DEPLOYMENT_STATES = ("created", "running", "success", "failed", "canceled", "blocked")
ACCESS_NAMES = {50: "Owner", 40: "Maintainer", 30: "Developer", 20: "Reporter", 10: "Guest"}


def fake_sha(text: str) -> str:
    """A made-up commit id derived from ``text``."""
    return hashlib.sha1(text.encode()).hexdigest()


def archive_prefix(project: str, sha: str) -> str:
    """The single top directory of GitLab's archive of ``sha``: ``<name>-<sha>-<sha>``."""
    return f"{project.rsplit('/', 1)[-1]}-{sha}-{sha}"


@dataclass
class FakeGitLab:
    """One project's state on a fake GitLab.

    What tests arrange:

    - ``merge_requests``: iid -> the merge request as GitLab's REST API returns it (see
      :meth:`add_mr`; edit a field, e.g. ``["sha"]``, to move its head).
    - ``members``: username -> access level on the project, inherited ones included
      (50 Owner, 40 Maintainer, 30 Developer, 20 Reporter, 10 Guest); not listed: 404.
    - ``users``: username -> user id. Users are also known, with an id given on first
      use, when they are members, in a group, authors, approvers or the bot;
      ``GET /users?username=`` finds nobody else.
    - ``groups``: full path (``org/team``) -> usernames (``members/all``).
    - ``files``: (ref, path) -> text (also what ``repository/tree`` lists); ``trees``:
      sha -> ``tar.gz`` bytes (see :meth:`add_tree`).
    - ``commit_dates``: sha -> the date a commit claims (its author's and committer's
      dates, which whoever made it chose: GitLab lists them as given); one not here claims
      its merge request's ``updated_at``.
    - ``branches`` / ``tags``: name -> commit sha. ``branch_commits`` maps a branch name
      or a commit sha to commits reachable from it (transitively; a branch's tip is
      always reachable): the merge base answers from it.
    - ``merge_method``: the project's ``merge`` / ``rebase_merge`` / ``ff``.
    - ``bot``: the token's user (``GET /user``); ``user_status`` another status for it
      (401 or 403, a token that cannot read its user).
    - ``deployments_forbidden``: 403 on deployments, as for a token without the right.
    - ``fail(...)``: answer matching requests with an error.
    - ``rename(path)``: the project is renamed or moved to ``path`` (its id kept); each
      path it had before still answers as it (``old_paths``), as GitLab's API does, until
      ``taken`` says another project has it: path -> that project's id. A taken path, or
      that id, then answers ``GET /projects/:id`` as that project (its id, the path, made
      now, or at ``taken_created``'s time for its id) and ``404 Not found`` for anything
      in it (it has none of this project's merge requests, commits or notes).
    - ``created_at``: when the project was made, as ``GET /projects/:id`` says it (None:
      not said).

    What the bot did:

    - ``notes``: iid -> notes oldest first, each ``{"id", "body", "author", "system",
      "created_at", "updated_at", "bodies"}`` (``bodies``: every body it had, in order).
    - ``awards``: ``{"iid", "note", "name", "user"}`` per award emoji.
    - ``statuses``: every commit status GitLab accepted, in order (``{"sha", "name",
      "state", "description", "target_url", "ref", "pipeline_id", "id"}``); ``latest_statuses``:
      (sha, name) -> the latest; ``refused_statuses``: posts answered 400 as GitLab does
      ("Cannot transition status ...") when a pending or running status would stay as it
      is or go back to pending. A pending or running status moved on keeps its id; a
      finished one is replaced by a new one (the old one listed only with ``all=true``).
    - ``approvals``: iid -> ``{"user", "approved_at"}`` (see :meth:`approve`);
      ``approved_at`` is the fake's clock when it was given, and is listed unless
      ``lists_approved_at`` is False (a GitLab from before it listed one).
    - ``versions``: iid -> the merge request's versions, oldest first (``GET
      .../versions`` lists them newest first): one made whenever the fake sees its head
      (``sha``) other than its latest version's, at :meth:`add_mr`, at :meth:`approve` and
      before it answers any request (a test moves a head by editing ``["sha"]``), each
      ``created_at`` the fake's clock then, as GitLab makes one at each push.
    - ``merges``: ``{"iid", "sha", "squash", "method", "merge_commit_sha",
      "squash_commit_sha"}``; the merge request becomes ``merged`` and its target branch
      moves.
    - ``deployments``: ``{"id", "iid", "environment", "sha", "ref", "tag", "status",
      "statuses"}`` (``statuses``: every status it was given, in order).
    - ``requests``: (method, path after ``/api/v4`` with its query) of every request.
    """

    url: str = "https://gitlab.example.com"
    project: str = "data/warehouse"
    project_id: int = 4242
    adopt_project: bool = False  # answer for any project path or id, and take it as ours
    old_paths: list[str] = field(default_factory=list)  # rename(): paths it had, case-folded
    taken: dict[str, int] = field(default_factory=dict)  # an old path -> its new holder's id
    taken_created: dict[int, str] = field(default_factory=dict)  # a holder's id -> made when
    created_at: str | None = None  # when the project was made (None: GitLab says nothing)
    merge_requests: dict[int, dict[str, Any]] = field(default_factory=dict)
    notes: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    awards: list[dict[str, Any]] = field(default_factory=list)
    statuses: list[dict[str, Any]] = field(default_factory=list)
    latest_statuses: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    refused_statuses: list[dict[str, Any]] = field(default_factory=list)
    approvals: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    lists_approved_at: bool = True
    commit_dates: dict[str, str] = field(default_factory=dict)
    versions: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    # GET /projects/:id/events?action=pushed: add_push_event's, oldest first; each open
    # merge request's head is listed too, pushed by its author (not a fork's)
    push_events: list[dict[str, Any]] = field(default_factory=list)
    members: dict[str, int] = field(default_factory=dict)
    users: dict[str, int] = field(default_factory=dict)
    groups: dict[str, list[str]] = field(default_factory=dict)
    files: dict[tuple[str, str], str] = field(default_factory=dict)
    trees: dict[str, bytes] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    branch_commits: dict[str, set[str]] = field(default_factory=dict)
    merge_method: str = "merge"
    planned_merges: dict[int, str] = field(default_factory=dict)  # iid -> merge commit sha
    merges: list[dict[str, Any]] = field(default_factory=list)
    deployments: list[dict[str, Any]] = field(default_factory=list)
    deployments_forbidden: bool = False
    bot: str = "sluice-bot"
    user_status: int = 200
    faults: list[dict[str, Any]] = field(default_factory=list)  # see fail()
    requests: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    state_file: Path | None = None  # when set, the state survives the process (kill -9 tests)
    _ids: int = 1000
    _clock: int = 0
    _url_now: str = ""

    def __post_init__(self) -> None:
        if self.state_file is not None and self.state_file.exists():
            self._load(json.loads(self.state_file.read_text()))

    # --- arranging --------------------------------------------------------------------

    @property
    def web_url(self) -> str:
        return f"{self.url.rstrip('/')}/{self.project}"

    def add_mr(
        self, iid: int, *, sha: str, source_branch: str = "feature", target_branch: str = "main",
        author: str = "alice", draft: bool = False, fork: bool = False, state: str = "opened",
        title: str = "change", base_sha: str | None = None, has_conflicts: bool = False,
        merge_sha: str | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """A merge request (``state``: opened, closed, merged, locked) from
        ``source_branch`` (of a fork with ``fork``) into ``target_branch``; ``merge_sha``
        is the merge commit a merge through the API makes (default: derived). Returns the
        stored JSON, which tests may edit."""
        base = base_sha or self.branches.get(target_branch) or fake_sha(f"base {target_branch}")
        mr = {
            "id": self._next(), "iid": iid, "project_id": self.project_id, "title": title,
            "description": "", "state": state, "created_at": self._now(),
            "updated_at": self._now(), "merged_by": None, "merge_user": None, "merged_at": None,
            "closed_by": None, "closed_at": None, "target_branch": target_branch,
            "source_branch": source_branch, "user_notes_count": 0, "upvotes": 0,
            "downvotes": 0, "author": self.user_json(author), "assignees": [],
            "assignee": None, "reviewers": [],
            "source_project_id": self.project_id + 1000 if fork else self.project_id,
            "target_project_id": self.project_id, "labels": [], "draft": draft,
            "work_in_progress": draft, "milestone": None,
            "merge_when_pipeline_succeeds": False, "merge_status": "can_be_merged",
            "detailed_merge_status": "mergeable", "sha": sha, "merge_commit_sha": None,
            "squash_commit_sha": None, "discussion_locked": None,
            "should_remove_source_branch": None, "force_remove_source_branch": False,
            "reference": f"!{iid}",
            "references": {"short": f"!{iid}", "relative": f"!{iid}",
                           "full": f"{self.project}!{iid}"},
            "web_url": f"{self.web_url}/-/merge_requests/{iid}",
            "time_stats": {"time_estimate": 0, "total_time_spent": 0,
                           "human_time_estimate": None, "human_total_time_spent": None},
            "squash": False, "squash_on_merge": False,
            "task_completion_status": {"count": 0, "completed_count": 0},
            "has_conflicts": has_conflicts, "blocking_discussions_resolved": True,
            "diff_refs": {"base_sha": base, "head_sha": sha, "start_sha": base},
            "merge_error": None, "user": {"can_merge": True},
        }  # fmt: skip
        self.merge_requests[iid] = mr
        if merge_sha is not None:
            self.planned_merges[iid] = merge_sha
        self._sync_versions()
        return mr

    def add_note(self, iid: int, body: str, *, author: str = "alice", system: bool = False) -> int:
        """A note someone wrote on merge request ``iid`` (a command, a quote); its id."""
        return self._store_note(iid, body, author, system)["id"]  # type: ignore[no-any-return]

    def approve(self, iid: int, user: str) -> None:
        """``user`` approves merge request ``iid`` (again: no change), at the fake's clock
        now: after every version of it made so far."""
        with self.lock:
            self._sync_versions()
            listed = self.approvals.setdefault(iid, [])
            if not any(a["user"] == user for a in listed):
                listed.append({"user": user, "approved_at": self._now()})

    def unapprove(self, iid: int, user: str) -> None:
        """``user`` takes their approval back."""
        self.approvals[iid] = [a for a in self.approvals.get(iid, []) if a["user"] != user]

    def rename(self, path: str) -> None:
        """The project is renamed or moved to ``path``, its id kept: GitLab's API answers
        it by its id and by ``path``, and by each path it had until another project takes
        that path (``taken``). Its merge requests' web addresses move with it."""
        with self.lock:
            old, new = self.web_url, f"{self.url.rstrip('/')}/{path}"
            if self.project.casefold() not in self.old_paths:
                self.old_paths.append(self.project.casefold())
            if path.casefold() in self.old_paths:
                self.old_paths.remove(path.casefold())
            for mr in self.merge_requests.values():
                mr["web_url"] = str(mr["web_url"]).replace(old, new, 1)
                mr["references"]["full"] = f"{path}!{mr['iid']}"
            self.project = path

    def add_tree(self, sha: str, src: Path) -> None:
        """Serve the files under ``src`` as the archive of ``sha``."""
        self.trees[sha] = tarball(src, archive_prefix(self.project, sha))

    def fail(
        self, method: str, path: str, status: int, message: Any = None, *, times: int | None = None
    ) -> None:
        """Answer ``method`` requests whose path (after ``/api/v4``, with the query)
        matches the regular expression ``path`` with ``status`` and ``{"message":
        message}``, ``times`` times (None: always)."""
        self.faults.append({"method": method.upper(), "path": path, "status": status,
                            "message": message or f"{status} failure", "times": times})  # fmt: skip

    # --- reading ----------------------------------------------------------------------

    def notes_on(self, iid: int) -> list[dict[str, Any]]:
        return self.notes.get(iid, [])

    def bot_notes(self, iid: int) -> list[dict[str, Any]]:
        return [n for n in self.notes_on(iid) if n["author"] == self.bot and not n["system"]]

    def statuses_on(self, sha: str) -> dict[str, dict[str, Any]]:
        """The latest status of each name on ``sha``."""
        return {name: s for (at, name), s in self.latest_statuses.items() if at == sha}

    def asked(self, method: str, fragment: str) -> int:
        """How many ``method`` requests had ``fragment`` in their path."""
        return sum(1 for m, path in self.requests if m == method and fragment in path)

    def user_json(self, username: str) -> dict[str, Any]:
        return {"id": self.user_id(username), "username": username,
                "name": username.replace("-", " ").title(), "state": "active", "locked": False,
                "avatar_url": f"{self.url}/uploads/-/system/user/avatar/{username}.png",
                "web_url": f"{self.url}/{username}"}  # fmt: skip

    def user_id(self, username: str) -> int:
        if username not in self.users:
            # the id the in-memory forge and the sign-in fakes give the same username: the
            # gate compares people by it, so every fake must agree
            self.users[username] = account_id_of(username)
        return self.users[username]

    # --- the wire ---------------------------------------------------------------------

    def install(self, mock: responses.RequestsMock) -> None:
        """Register every route on ``mock``."""
        where = urlsplit(self.url.rstrip("/"))
        host = re.escape(f"{where.scheme}://{where.hostname}") + r"(?::\d+)?"
        api = host + re.escape(where.path) + "/api/v4"
        p = r"/projects/(?P<project>[^/?]+)"
        mr = p + r"/merge_requests/(?P<iid>\d+)"
        routes: list[tuple[str, str, Any]] = [
            ("GET", r"/user", self._user),
            ("GET", r"/users", self._users),
            ("GET", r"/users/(?P<uid>\d+)", self._user_by_id),
            ("GET", r"/groups/(?P<group>[^/?]+)/members/all", self._group_members),
            ("GET", p, self._project_body),
            ("GET", p + r"/repository/archive(?:\.tar\.gz)?", self._archive),
            ("GET", p + r"/repository/tree", self._tree),
            ("GET", p + r"/repository/files/(?P<path>[^/?]+)/raw", self._raw_file),
            ("GET", p + r"/repository/files/(?P<path>[^/?]+)", self._file),
            ("GET", p + r"/repository/branches/(?P<name>[^/?]+)", self._branch),
            ("GET", p + r"/repository/tags/(?P<name>[^/?]+)", self._tag),
            ("GET", p + r"/repository/merge_base", self._merge_base),
            ("GET", p + r"/repository/commits/(?P<sha>\w+)/statuses", self._list_statuses),
            ("POST", p + r"/statuses/(?P<sha>\w+)", self._post_status),
            ("GET", p + r"/members/all/(?P<uid>\d+)", self._member),
            ("GET", mr, self._mr),
            ("GET", mr + r"/notes", self._list_notes),
            ("POST", mr + r"/notes", self._create_note),
            ("GET", mr + r"/notes/(?P<note>\d+)", self._get_note),
            ("PUT", mr + r"/notes/(?P<note>\d+)", self._edit_note),
            ("GET", mr + r"/notes/(?P<note>\d+)/award_emoji", self._list_awards),
            ("POST", mr + r"/notes/(?P<note>\d+)/award_emoji", self._award),
            ("GET", mr + r"/approvals", self._approvals),
            ("GET", mr + r"/versions", self._versions),
            ("GET", mr + r"/commits", self._mr_commits),
            ("GET", p + r"/events", self._events),
            ("PUT", mr + r"/merge", self._merge),
            ("POST", p + r"/deployments", self._create_deployment),
            ("GET", p + r"/deployments/(?P<id>\d+)", self._get_deployment),
            ("PUT", p + r"/deployments/(?P<id>\d+)", self._update_deployment),
        ]
        for method, pattern, handler in routes:
            full = re.compile(api + pattern + r"(?:\?.*)?$")
            mock.add_callback(method, full, callback=self._wrap(handler, full))

    def _wrap(self, handler: Any, pattern: re.Pattern[str]) -> Any:
        def callback(request: Any) -> Answer:
            match = pattern.match(request.url)
            assert match is not None
            parts = urlsplit(request.url)
            path = parts.path.split("/api/v4", 1)[1] + (f"?{parts.query}" if parts.query else "")
            with self.lock:
                self.requests.append((request.method, path))
                self._url_now = request.url
                self._sync_versions()  # a head a test moved is a push GitLab has seen
                answer = self._fault(request.method, path) or self._answer(
                    handler, match, parts.query, request.body
                )
                self.save()
                return answer

        return callback

    def _answer(self, handler: Any, match: re.Match[str], query: str, body: Any) -> Answer:
        project = match.groupdict().get("project")
        holder = self._holder(unquote(project)) if project is not None else None
        if holder is not None:
            if handler == self._project_body:
                return self._project_body(match, {}, holder=holder)
            return self._not_found()
        if project is not None and not self._ours(unquote(project)):
            return self._json({"message": "404 Project Not Found"}, 404)
        params: dict[str, Any] = {}
        for key, values in parse_qs(query, keep_blank_values=True).items():
            params[key] = values if key.endswith("[]") else values[-1]
        if body:
            params.update(json.loads(body))
        return handler(match, params)  # type: ignore[no-any-return]

    def _fault(self, method: str, path: str) -> Answer | None:
        for fault in self.faults:
            if fault["method"] == method and re.search(fault["path"], path):
                if fault["times"] is not None:
                    if fault["times"] <= 0:
                        continue
                    fault["times"] -= 1
                return self._json({"message": fault["message"]}, fault["status"])
        return None

    def _holder(self, project: str) -> tuple[int, str] | None:
        """The id and path of the project that took one of this project's old paths, when
        ``project`` (a path or an id) names it."""
        for path, holder in self.taken.items():
            if project.casefold() == path.casefold() or project == str(holder):
                return holder, path
        return None

    def _ours(self, project: str) -> bool:
        if project in (str(self.project_id),) or project.casefold() == self.project.casefold():
            return True
        if project.casefold() in self.old_paths:  # GitLab follows a rename's redirect
            return True
        if self.adopt_project:
            if project.isdigit():
                self.project_id = int(project)
            else:
                self.project = project
            return True
        return False

    # --- helpers ----------------------------------------------------------------------

    def _next(self) -> int:
        self._ids += 1
        return self._ids

    def _now(self) -> str:
        """GitLab's clock: a second after the time it last gave, and after the real time
        (the service's clock: a plan is published at it, and an approval GitLab stamps
        in the second its plan was published counts for none)."""
        self._clock = max(self._clock + 1, int(time.time()) + 1)
        return datetime.fromtimestamp(self._clock, UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")

    def _json(self, data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Answer:
        return status, {"Content-Type": "application/json", **(headers or {})}, json.dumps(data)

    def _not_found(self, what: str = "Not found") -> Answer:
        return self._json({"message": f"404 {what}"}, 404)

    def _paged(self, items: list[Any], params: dict[str, Any]) -> Answer:
        """One page of ``items`` with GitLab's pagination headers and ``Link``."""
        per_page = max(1, min(int(params.get("per_page") or 20), 100))
        page = max(1, int(params.get("page") or 1))
        pages = max(1, -(-len(items) // per_page))
        parts = urlsplit(self._url_now)

        def link(number: int) -> str:
            query = {k: v for k, v in parse_qs(parts.query).items() if k != "page"}
            query["page"] = [str(number)]
            return urlunsplit(parts._replace(query=urlencode(query, doseq=True)))

        links = [f'<{link(page + 1)}>; rel="next"'] if page < pages else []
        links += [f'<{link(1)}>; rel="first"', f'<{link(pages)}>; rel="last"']
        headers = {"X-Page": str(page), "X-Per-Page": str(per_page), "X-Total": str(len(items)),
                   "X-Total-Pages": str(pages), "X-Next-Page": str(page + 1) if page < pages else "",
                   "X-Prev-Page": str(page - 1) if page > 1 else "", "Link": ", ".join(links)}  # fmt: skip
        return self._json(items[(page - 1) * per_page : page * per_page], headers=headers)

    def _commit_json(self, sha: str) -> dict[str, Any]:
        return {"id": sha, "short_id": sha[:8], "title": "change", "message": "change\n",
                "author_name": "Alice", "author_email": "alice@example.com",
                "authored_date": "2026-11-21T09:00:00.000Z", "committer_name": "Alice",
                "committer_email": "alice@example.com",
                "committed_date": "2026-11-21T09:00:00.000Z",
                "created_at": "2026-11-21T09:00:00.000Z", "parent_ids": [],
                "web_url": f"{self.web_url}/-/commit/{sha}"}  # fmt: skip

    def _known_users(self) -> set[str]:
        known = set(self.users) | set(self.members) | {self.bot}
        for listed in self.groups.values():
            known.update(listed)
        for mr in self.merge_requests.values():
            known.add(mr["author"]["username"])
        for approvals in self.approvals.values():
            known.update(a["user"] for a in approvals)
        return known

    # --- users, groups, members -------------------------------------------------------

    def _user(self, match: Any, params: Any) -> Answer:
        if self.user_status != 200:
            message = "401 Unauthorized" if self.user_status == 401 else "403 Forbidden"
            return self._json({"message": message}, self.user_status)
        return self._json({**self.user_json(self.bot), "bot": True, "email": "bot@example.com",
                           "is_admin": False, "created_at": "2026-01-01T00:00:00.000Z"})  # fmt: skip

    def _users(self, match: Any, params: Any) -> Answer:
        wanted = str(params.get("username", "")).casefold()
        found = [u for u in sorted(self._known_users()) if u.casefold() == wanted]
        return self._paged([self.user_json(u) for u in found], params)

    def _user_by_id(self, match: Any, params: Any) -> Answer:
        uid = int(match.group("uid"))
        found = [u for u in sorted(self._known_users()) if self.user_id(u) == uid]
        return self._json(self.user_json(found[0])) if found else self._not_found("User Not Found")

    def _member_json(self, username: str, level: int) -> dict[str, Any]:
        return {**self.user_json(username), "access_level": level,
                "created_at": "2026-01-01T00:00:00.000Z", "expires_at": None,
                "membership_state": "active"}  # fmt: skip

    def _group_members(self, match: Any, params: Any) -> Answer:
        wanted = unquote(match.group("group")).casefold()
        for path, usernames in self.groups.items():
            if path.casefold() == wanted:
                return self._paged([self._member_json(u, 30) for u in usernames], params)
        return self._not_found("Group Not Found")

    def _member(self, match: Any, params: Any) -> Answer:
        uid = int(match.group("uid"))
        for username in self._known_users():
            if self.user_id(username) == uid and username in self.members:
                return self._json(self._member_json(username, self.members[username]))
        return self._not_found()

    # --- the repository ---------------------------------------------------------------

    def _project_body(
        self, match: Any, params: Any, holder: tuple[int, str] | None = None
    ) -> Answer:
        """This project, or ``holder`` (the id and path of a project that took one of its
        old paths: made now)."""
        pid, path = holder or (self.project_id, self.project)
        name = path.rsplit("/", 1)[-1]
        namespace = path.rsplit("/", 1)[0] if "/" in path else ""
        web = f"{self.url.rstrip('/')}/{path}"
        return self._json({
            "id": pid, "name": name, "path": name, "description": "",
            "path_with_namespace": path, "name_with_namespace": path,
            "namespace": {"id": 7, "name": namespace, "path": namespace, "kind": "group",
                          "full_path": namespace},
            "default_branch": "main", "visibility": "private", "web_url": web,
            "http_url_to_repo": f"{web}.git", "merge_method": self.merge_method,
            "squash_option": "default_off",
            **({"created_at": self.taken_created.get(pid, "2026-11-21T12:00:00.000Z")}
               if holder else {} if self.created_at is None else
               {"created_at": self.created_at}),
        })  # fmt: skip

    def _archive(self, match: Any, params: Any) -> Answer:
        sha = str(params.get("sha", ""))
        if sha not in self.trees:
            return self._not_found("File Not Found")
        headers = {"Content-Type": "application/octet-stream", "Content-Disposition":
                   f'attachment; filename="{archive_prefix(self.project, sha)}.tar.gz"'}  # fmt: skip
        return 200, headers, self.trees[sha]

    def _tree(self, match: Any, params: Any) -> Answer:
        """A folder's entries at a ref, from ``files`` (a file's folders are trees); a
        folder with nothing in it, or none, lists empty, as GitLab's tree does."""
        ref, folder = str(params.get("ref", "main")), str(params.get("path") or "").strip("/")
        prefix = f"{folder}/" if folder else ""
        entries: dict[str, str] = {}
        for at, path in self.files:
            if at == ref and path.startswith(prefix):
                name, _, rest = path[len(prefix) :].partition("/")
                entries[name] = "tree" if rest else entries.get(name, "blob")
        listed = [{"id": fake_sha(f"{ref}:{prefix}{name}"), "name": name, "type": kind,
                   "path": f"{prefix}{name}", "mode": "040000" if kind == "tree" else "100644"}
                  for name, kind in sorted(entries.items())]  # fmt: skip
        return self._paged(listed, params)

    def _raw_file(self, match: Any, params: Any) -> Answer:
        text = self.files.get((str(params.get("ref", "main")), unquote(match.group("path"))))
        if text is None:
            return self._not_found("File Not Found")
        return 200, {"Content-Type": "text/plain; charset=utf-8"}, text.encode()

    def _file(self, match: Any, params: Any) -> Answer:
        path, ref = unquote(match.group("path")), str(params.get("ref", "main"))
        text = self.files.get((ref, path))
        if text is None:
            return self._not_found("File Not Found")
        raw = text.encode()
        commit = self.branches.get(ref, ref)
        return self._json({
            "file_name": path.rsplit("/", 1)[-1], "file_path": path, "size": len(raw),
            "encoding": "base64", "content": base64.b64encode(raw).decode(),
            "content_sha256": hashlib.sha256(raw).hexdigest(), "ref": ref,
            "blob_id": fake_sha(text), "commit_id": commit, "last_commit_id": commit,
        })  # fmt: skip

    def _branch(self, match: Any, params: Any) -> Answer:
        name = unquote(match.group("name"))
        sha = self.branches.get(name)
        if sha is None:
            return self._not_found("Branch Not Found")
        return self._json({"name": name, "merged": False, "protected": name == "main",
                           "default": name == "main", "developers_can_push": False,
                           "developers_can_merge": False, "can_push": True,
                           "web_url": f"{self.web_url}/-/tree/{quote(name)}",
                           "commit": self._commit_json(sha)})  # fmt: skip

    def _tag(self, match: Any, params: Any) -> Answer:
        name = unquote(match.group("name"))
        sha = self.tags.get(name)
        if sha is None:
            return self._not_found("Tag Not Found")
        return self._json({"name": name, "message": "", "target": sha,
                           "commit": self._commit_json(sha), "release": None,
                           "protected": False, "created_at": None})  # fmt: skip

    def _reachable(self, ref: str) -> tuple[str, set[str]]:
        """The commit ``ref`` (a branch, a tag or a sha) names, and every commit reachable
        from it."""
        tip = self.branches.get(ref) or self.tags.get(ref) or ref
        return tip, reachable(self.branch_commits, ref, tip)

    def _merge_base(self, match: Any, params: Any) -> Answer:
        refs = [str(r) for r in params.get("refs[]", [])]
        if len(refs) < 2:
            return self._json({"message": "Provide at least 2 refs"}, 400)
        unknown = [r for r in refs if not (r in self.branches or r in self.tags
                   or r in self.branch_commits or re.fullmatch(r"[0-9a-f]{40}", r))]  # fmt: skip
        if unknown:
            noun = "ref" if len(unknown) == 1 else "refs"
            return self._json({"message": f"Could not find {noun}: {', '.join(unknown)}"}, 400)
        reach = [self._reachable(r)[1] for r in refs]
        common = set.intersection(*reach)
        # The best common ancestors: those no other common commit reaches.
        best = sorted(c for c in common
                      if not any(c in self._reachable(o)[1] for o in common - {c}))  # fmt: skip
        if not best:
            return self._not_found("Merge Base Not Found")
        return self._json(self._commit_json(best[0]))

    # --- commit statuses --------------------------------------------------------------

    def _status_json(self, status: dict[str, Any]) -> dict[str, Any]:
        return {"id": status["id"], "sha": status["sha"], "ref": status.get("ref"),
                "status": status["state"], "name": status["name"],
                "target_url": status.get("target_url"), "description": status.get("description"),
                "created_at": status["created_at"], "started_at": None, "finished_at": None,
                "allow_failure": False, "coverage": None,
                "pipeline_id": status.get("pipeline_id") or 77,
                "author": self.user_json(self.bot)}  # fmt: skip

    def _post_status(self, match: Any, params: Any) -> Answer:
        sha, state = match.group("sha"), params.get("state")
        if state not in STATES:
            return self._json({"error": "state does not have a valid value"}, 400)
        name = str(params.get("name") or params.get("context") or "default")
        latest = self.latest_statuses.get((sha, name))
        was = latest["state"] if latest is not None else None
        # GitLab reuses a pending or running status of that name, and refuses to move it to
        # the state it has (or back from running to pending); a finished one is replaced.
        if was in ("pending", "running") and state in (was, "pending"):
            self.refused_statuses.append({"sha": sha, "name": name, "state": state})
            event = EVENTS[state]
            message = (f"Cannot transition status via :{event} from :{was} "
                       f'(Reason(s): Status cannot transition via "{event}")')  # fmt: skip
            return self._json({"message": message}, 400)
        # A pending or running status moved on keeps its id; a finished one is retried
        # (listed with all=true only) and a new status, of a new id, takes its place.
        moved = latest is not None and was in ("pending", "running")
        status = {"id": latest["id"] if moved else self._next(), "sha": sha, "name": name,
                  "state": state,
                  "description": params.get("description"), "target_url": params.get("target_url"),
                  "ref": params.get("ref"), "pipeline_id": params.get("pipeline_id"),
                  "created_at": self._now()}  # fmt: skip
        self.statuses.append(status)
        self.latest_statuses[(sha, name)] = status
        return self._json(self._status_json(status), 201)

    def _list_statuses(self, match: Any, params: Any) -> Answer:
        """The statuses of a commit, newest first, each once as it is now: the latest of
        each name, or (``all``) every one, those retried included; ``ref`` and ``name``
        filter, as GitLab's do."""
        sha, every = match.group("sha"), str(params.get("all", "")).lower() == "true"
        listed = self.statuses if every else list(self.latest_statuses.values())
        now: dict[int, dict[str, Any]] = {}
        for status in listed:
            if status["sha"] == sha:
                now.pop(status["id"], None)
                now[status["id"]] = status  # a status moved on: as it is now
        wanted = {k: params[k] for k in ("ref", "name") if params.get(k)}
        found = [self._status_json(s) for s in reversed(now.values())
                 if all(s.get(k) == v for k, v in wanted.items())]  # fmt: skip
        return self._paged(found, params)

    # --- merge requests, notes, emoji, approvals --------------------------------------

    def _mr_json(self, iid: int) -> dict[str, Any] | None:
        mr = self.merge_requests.get(iid)
        if mr is None:
            return None
        data = json.loads(json.dumps(mr))
        data["diff_refs"] = {**(data.get("diff_refs") or {}), "head_sha": data["sha"]}
        data["work_in_progress"] = data["draft"]
        data["user_notes_count"] = sum(1 for n in self.notes_on(iid) if not n["system"])
        if data["state"] != "opened":
            data["detailed_merge_status"] = "not_open"
        elif data["draft"]:
            data["detailed_merge_status"] = "draft_status"
        elif data["has_conflicts"]:
            data["detailed_merge_status"], data["merge_status"] = "conflict", "cannot_be_merged"
        return data  # type: ignore[no-any-return]

    def _mr(self, match: Any, params: Any) -> Answer:
        data = self._mr_json(int(match.group("iid")))
        return self._json(data) if data is not None else self._not_found()

    def _store_note(self, iid: int, body: str, author: str, system: bool) -> dict[str, Any]:
        now = self._now()
        note = {"id": self._next(), "body": body, "author": author, "system": system,
                "created_at": now, "updated_at": now, "bodies": [body]}  # fmt: skip
        self.notes.setdefault(iid, []).append(note)
        return note

    def _note_json(self, iid: int, note: dict[str, Any]) -> dict[str, Any]:
        mr = self.merge_requests.get(iid) or {"id": iid}
        return {"id": note["id"], "type": None, "body": note["body"], "attachment": None,
                "author": self.user_json(note["author"]), "created_at": note["created_at"],
                "updated_at": note["updated_at"], "system": note["system"],
                "noteable_id": mr["id"], "noteable_type": "MergeRequest",
                "project_id": self.project_id, "resolvable": False, "confidential": False,
                "internal": False, "noteable_iid": iid, "commands_changes": {}}  # fmt: skip

    def _find_note(self, match: Any) -> tuple[int, dict[str, Any] | None]:
        iid, note_id = int(match.group("iid")), int(match.group("note"))
        return iid, next((n for n in self.notes_on(iid) if n["id"] == note_id), None)

    def _list_notes(self, match: Any, params: Any) -> Answer:
        iid = int(match.group("iid"))
        if iid not in self.merge_requests:
            return self._not_found()
        listed = sorted(self.notes_on(iid), key=lambda n: n["id"],
                        reverse=params.get("sort", "desc") == "desc")  # fmt: skip
        return self._paged([self._note_json(iid, n) for n in listed], params)

    def _create_note(self, match: Any, params: Any) -> Answer:
        iid = int(match.group("iid"))
        if iid not in self.merge_requests:
            return self._not_found()
        if not params.get("body"):
            return self._json({"message": "400 Bad request - Note {:note=>[\"can't be blank\"]}"},
                              400)  # fmt: skip
        note = self._store_note(iid, str(params["body"]), self.bot, False)
        return self._json(self._note_json(iid, note), 201)

    def _get_note(self, match: Any, params: Any) -> Answer:
        iid, note = self._find_note(match)
        return self._json(self._note_json(iid, note)) if note else self._not_found("Note Not Found")

    def _edit_note(self, match: Any, params: Any) -> Answer:
        iid, note = self._find_note(match)
        if note is None:
            return self._not_found("Note Not Found")
        if note["author"] != self.bot:
            return self._json({"message": "403 Forbidden"}, 403)
        note["body"] = str(params["body"])
        note["bodies"].append(note["body"])
        note["updated_at"] = self._now()
        return self._json(self._note_json(iid, note))

    def _award_json(self, award: dict[str, Any]) -> dict[str, Any]:
        return {"id": award["id"], "name": award["name"], "user": self.user_json(award["user"]),
                "created_at": award["created_at"], "updated_at": award["created_at"],
                "awardable_id": award["note"], "awardable_type": "Note"}  # fmt: skip

    def _list_awards(self, match: Any, params: Any) -> Answer:
        _, note = self._find_note(match)
        if note is None:
            return self._not_found("Note Not Found")
        found = [self._award_json(a) for a in self.awards if a["note"] == note["id"]]
        return self._paged(found, params)

    def _award(self, match: Any, params: Any) -> Answer:
        iid, note = self._find_note(match)
        if note is None:
            return self._not_found("Note Not Found")
        name = str(params.get("name", ""))
        if any(a["note"] == note["id"] and a["name"] == name and a["user"] == self.bot
               for a in self.awards):  # fmt: skip
            return self._not_found("Award Emoji Name has already been taken Not Found")
        award = {"id": self._next(), "iid": iid, "note": note["id"], "name": name,
                 "user": self.bot, "created_at": self._now()}  # fmt: skip
        self.awards.append(award)
        return self._json(self._award_json(award), 201)

    def _mr_commits(self, match: Any, params: Any) -> Answer:
        # Its head alone (GitLab lists newest first, with e-mails, not usernames).
        mr = self._mr_json(int(match.group("iid")))
        if mr is None:
            return self._not_found()
        claimed = self.commit_dates.get(mr["sha"], mr["updated_at"])
        return self._json([
            {"id": mr["sha"], "short_id": mr["sha"][:8], "title": "change",
             "author_name": "x", "author_email": "x@example.com",
             "committer_name": "x", "committer_email": "x@example.com",
             "created_at": claimed, "authored_date": claimed, "committed_date": claimed,
             "message": "change", "parent_ids": []}
        ])  # fmt: skip

    def add_push_event(
        self, ref: str | None, sha: str, author: str, *, ref_type: str = "branch",
        ref_count: int | None = None,
    ) -> None:  # fmt: skip
        """A push event: ``author`` pushed ``ref`` to ``sha``; a push of many refs at once
        is one event of ``ref`` None and their ``ref_count``, as GitLab records it."""
        event = self._push_event(ref, sha, author, ref_type, ref_count)
        self.push_events.append({**event, "id": self._next(), "created_at": self._now()})

    def _push_event(
        self, ref: str | None, sha: str, author: str, ref_type: str, ref_count: int | None
    ) -> dict[str, Any]:
        return {
            "id": 1, "project_id": self.project_id, "action_name": "pushed to",
            "target_id": None, "target_type": None, "target_title": None,
            "author_id": self.user_id(author), "author": self.user_json(author),
            "author_username": author, "created_at": "2026-11-21T09:00:00.000Z",
            "push_data": {"commit_count": 1, "action": "pushed", "ref_type": ref_type,
                          "commit_from": None, "commit_to": sha, "ref": ref,
                          "commit_title": "change", "ref_count": ref_count},
        }  # fmt: skip

    def _events(self, match: Any, params: Any) -> Answer:
        """The project's push events, newest first, a page at a time (GitLab filters no
        branch)."""
        if params.get("action") not in (None, "pushed"):
            return self._paged([], params)
        opened = [
            self._push_event(mr["source_branch"], mr["sha"], mr["author"]["username"], "branch",
                             None)
            for mr in self.merge_requests.values()
            if mr["source_project_id"] == mr["target_project_id"]
        ]  # fmt: skip
        return self._paged([*opened, *self.push_events][::-1], params)

    def _approvals(self, match: Any, params: Any) -> Answer:
        iid = int(match.group("iid"))
        mr = self._mr_json(iid)
        if mr is None:
            return self._not_found()
        approved_by = [{"user": self.user_json(a["user"]), "approved_at": a["approved_at"]}
                       for a in self.approvals.get(iid, [])]  # fmt: skip
        if not self.lists_approved_at:
            for entry in approved_by:
                del entry["approved_at"]
        return self._json({
            "id": mr["id"], "iid": iid, "project_id": self.project_id, "title": mr["title"],
            "description": "", "state": mr["state"], "created_at": mr["created_at"],
            "updated_at": mr["updated_at"], "merge_status": mr["merge_status"],
            "approved": bool(approved_by), "approvals_required": 0, "approvals_left": 0,
            "require_password_to_approve": False, "approved_by": approved_by,
            "suggested_approvers": [], "approvers": [], "approver_groups": [],
            "user_has_approved": False, "user_can_approve": True, "approval_rules_left": [],
            "has_approval_rules": False, "merge_request_approvers_available": False,
            "multiple_approval_rules_available": False,
        })  # fmt: skip

    def _sync_versions(self) -> None:
        """A new version of each merge request whose head is not its latest version's."""
        for iid, mr in self.merge_requests.items():
            listed = self.versions.setdefault(iid, [])
            if listed and listed[-1]["head_commit_sha"] == mr["sha"]:
                continue
            base = (mr.get("diff_refs") or {}).get("base_sha")
            listed.append({"id": self._next(), "head_commit_sha": mr["sha"],
                           "base_commit_sha": base, "start_commit_sha": base,
                           "created_at": self._now(), "merge_request_id": mr["id"],
                           "state": "collected", "real_size": "1",
                           "patch_id_sha": fake_sha(f"patch {mr['sha']}")})  # fmt: skip

    def _versions(self, match: Any, params: Any) -> Answer:
        """``GET .../versions``: the merge request's versions, newest first, a page at a
        time."""
        iid = int(match.group("iid"))
        if iid not in self.merge_requests:
            return self._not_found()
        return self._paged(self.versions.get(iid, [])[::-1], params)

    def _merge(self, match: Any, params: Any) -> Answer:
        iid = int(match.group("iid"))
        mr = self.merge_requests.get(iid)
        if mr is None:
            return self._not_found()
        if mr["state"] != "opened" or mr["draft"]:
            return self._json({"message": "405 Method Not Allowed"}, 405)
        if mr["has_conflicts"]:
            return self._json({"message": "Branch cannot be merged"}, 406)
        head = mr["sha"]
        if params.get("sha") not in (None, head):
            return self._json({"message": f"SHA does not match HEAD of source branch: {head}"},
                              409)  # fmt: skip
        squash = params.get("squash") in (True, "true", "True", "1")
        squash_sha = fake_sha(f"squash {iid} {head}") if squash else None
        if self.merge_method == "ff":
            merge_sha, tip = None, squash_sha or head
        else:
            merge_sha = self.planned_merges.get(iid) or fake_sha(f"merge {iid} {head}")
            tip = merge_sha
        target = mr["target_branch"]
        self.branches[target] = tip
        self.branch_commits.setdefault(target, set()).update(
            c for c in (head, squash_sha, tip) if c is not None
        )
        mr.update(state="merged", merged_at=self._now(), merged_by=self.user_json(self.bot),
                  merge_user=self.user_json(self.bot), merge_commit_sha=merge_sha,
                  squash_commit_sha=squash_sha, squash=squash)  # fmt: skip
        self.merges.append({"iid": iid, "sha": head, "squash": squash,
                            "method": self.merge_method, "merge_commit_sha": merge_sha,
                            "squash_commit_sha": squash_sha})  # fmt: skip
        return self._json(self._mr_json(iid))

    # --- deployments ------------------------------------------------------------------

    def _deployment_json(self, d: dict[str, Any]) -> dict[str, Any]:
        env = d["environment"]
        return {"id": d["id"], "iid": d["iid"], "ref": d["ref"], "sha": d["sha"],
                "status": d["status"], "created_at": d["created_at"],
                "updated_at": d["created_at"], "user": self.user_json(self.bot),
                "environment": {"id": 50 + len(env), "name": env, "slug": env.lower(),
                                "external_url": None, "state": "available",
                                "tier": "production" if env in ("prod", "production") else "other"},
                "deployable": None}  # fmt: skip

    def _create_deployment(self, match: Any, params: Any) -> Answer:
        if self.deployments_forbidden:
            return self._json({"message": "403 Forbidden"}, 403)
        missing = [k for k in ("environment", "sha", "ref", "tag", "status") if k not in params]
        if missing:
            return self._json({"error": f"{', '.join(missing)} is missing"}, 400)
        if params["status"] not in DEPLOYMENT_STATES:
            return self._json({"error": "status does not have a valid value"}, 400)
        deployment = {"id": self._next(), "iid": len(self.deployments) + 1,
                      "environment": params["environment"], "sha": params["sha"],
                      "ref": params["ref"], "tag": params["tag"], "status": params["status"],
                      "statuses": [params["status"]], "created_at": self._now()}  # fmt: skip
        self.deployments.append(deployment)
        return self._json(self._deployment_json(deployment), 201)

    def _find_deployment(self, match: Any) -> dict[str, Any] | None:
        number = int(match.group("id"))
        return next((d for d in self.deployments if d["id"] == number), None)

    def _get_deployment(self, match: Any, params: Any) -> Answer:
        found = self._find_deployment(match)
        return self._json(self._deployment_json(found)) if found else self._not_found()

    def _update_deployment(self, match: Any, params: Any) -> Answer:
        if self.deployments_forbidden:
            return self._json({"message": "403 Forbidden"}, 403)
        found = self._find_deployment(match)
        if found is None:
            return self._not_found()
        status, was = params.get("status"), found["status"]
        if status not in DEPLOYMENT_STATES:
            return self._json({"error": "status does not have a valid value"}, 400)
        if status == was or was in ("success", "failed", "canceled"):
            return self._json({"message": f"Cannot transition status from {was} to {status}"},
                              400)  # fmt: skip
        found["status"] = status
        found["statuses"].append(status)
        return self._json(self._deployment_json(found))

    # --- keeping the state in a file --------------------------------------------------

    _PLAIN = ("awards", "statuses", "refused_statuses", "members", "users", "groups",
              "branches", "tags", "merge_method", "merges", "deployments",
              "deployments_forbidden", "bot", "user_status", "faults", "project",
              "project_id", "old_paths", "taken", "_ids", "_clock",
              "lists_approved_at")  # fmt: skip
    _BY_IID = ("merge_requests", "notes", "approvals", "planned_merges", "versions")

    def save(self) -> None:
        """Write the state (not ``trees``) to ``state_file``, when there is one."""
        if self.state_file is None:
            return
        data: dict[str, Any] = {name: getattr(self, name) for name in self._PLAIN + self._BY_IID}
        data["files"] = [[ref, path, text] for (ref, path), text in self.files.items()]
        data["latest_statuses"] = list(self.latest_statuses.values())
        data["branch_commits"] = {k: sorted(v) for k, v in self.branch_commits.items()}
        data["requests"] = self.requests
        partial = self.state_file.with_suffix(".partial")
        partial.write_text(json.dumps(data))
        partial.replace(self.state_file)

    def _load(self, saved: dict[str, Any]) -> None:
        for name in self._PLAIN:
            if name in saved:
                setattr(self, name, saved[name])
        for name in self._BY_IID:
            setattr(self, name, {int(k): v for k, v in saved.get(name, {}).items()})
        self.files = {(ref, path): text for ref, path, text in saved.get("files", [])}
        self.latest_statuses = {(s["sha"], s["name"]): s for s in saved.get("latest_statuses", [])}
        self.branch_commits = {k: set(v) for k, v in saved.get("branch_commits", {}).items()}
        self.requests = [(m, p) for m, p in saved.get("requests", [])]
