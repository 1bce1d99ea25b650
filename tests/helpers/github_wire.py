"""A stateful GitHub REST API at the wire, for the service's tests.

Registered on a ``responses.RequestsMock``, so PyGithub really runs and every request it
makes is a real HTTP request that this fake answers with bodies shaped like GitHub's.
It keeps what a repository would: issue comments, check runs, commit statuses, reactions,
pull requests and their reviews, collaborators' roles, files by ref, teams, branches and
tags, merges and deployments, and serves a tarball per commit. Anything it does not know
is a ConnectionError (no internet).

Tests arrange it through its fields and helpers: ``add_pull``, ``add_review``,
``add_comment`` (someone else's), ``add_tag``; ``permissions``, ``files``, ``teams``,
``refs`` and ``branch_commits`` are plain dicts; ``app_slug`` names the App (``GET /app``,
whose JWT also gets installation tokens), ``user_status`` fails ``GET /user``,
``actions_token`` makes the token an Actions ``GITHUB_TOKEN``. Comments are written by the
caller: the App's ``<slug>[bot]`` with its installation token, ``github-actions[bot]``
with an Actions token, else the token's user; editing someone else's is refused (403) as
on GitHub. What the bot did is in ``comments``, ``check_runs``, ``statuses``,
``reactions``, ``merges`` and ``deployments``. Every route of the repository is served
by name (``/repos/{owner}/{name}/...``) and by its id (``/repositories/{id}/...``, the id
``repo_id``; another id is 404, but for the repository that took an old name). ``rename`` renames the repository on GitHub: its old
name then answers 301 (307 for a write) to the same path under its id, or, once ``taken``
says another repository has it, as that one (an unscoped fake: a scoped one answers its
first name).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import tarfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import responses

from sluice.bot.forge.memory import account_id_of
from tests.helpers.cases import CASE_REPOSITORY_ID
from tests.helpers.graph import reachable

API = "https://api.github.com"
CODELOAD = "https://codeload.github.com"
BOT = {"login": "sluice-bot[bot]", "id": 900, "type": "Bot", "node_id": "B_1"}
INSTALLATION_TOKEN = "ghs_" + "fakeInstallationToken0123456789abcd"  # what access_tokens gives
# The base permission GitHub reports next to a role (a custom role reads as "read").
LEGACY = {"admin": "admin", "maintain": "write", "write": "write", "triage": "read",
          "read": "read", "none": "none"}  # fmt: skip
NOT_FOUND = {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}
SLUICE_APP = {"id": 4242, "slug": "sluice-bot", "name": "Sluice"}  # makes the service's runs
ACTIONS_APP = {"id": 15368, "slug": "github-actions", "name": "GitHub Actions"}


def user_json(login: str) -> dict[str, Any]:
    uid = account_id_of(login)  # as the in-memory forge and the webhooks' stamps give it
    kind = "Bot" if login.endswith("[bot]") else "User"  # an App's bot user, as GitHub says
    return {"login": login, "id": uid, "node_id": f"U_{uid}", "type": kind}


def _sha1(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()  # a fake commit id


def tarball(src: Path, prefix: str) -> bytes:
    """``src`` as GitHub's tarball: every file under one top directory ``prefix``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in sorted(src.rglob("*")):
            if ".sluice" in path.parts or "__pycache__" in path.parts:
                continue
            tar.add(path, arcname=f"{prefix}/{path.relative_to(src)}", recursive=False)
    return buffer.getvalue()


@dataclass
class FakeGitHub:
    """One repository's state on a fake GitHub.

    ``refs`` maps a branch name (``main``) or ``tags/NAME`` to the sha it points at (for
    an annotated tag, the tag object's sha: see :meth:`add_tag`). ``branch_commits`` maps
    a branch name, or a commit sha, to commits reachable from it (transitively through
    other keys; the tip in ``refs`` is always reachable): compare answers from it.
    """

    repo: str = "octo/warehouse"
    # Its GitHub id: the one load_case's bodies carry (a scoped fake beside another on one
    # mock needs one of its own: each answers /repositories/{its id}/... alone).
    repo_id: int = CASE_REPOSITORY_ID
    trees: dict[str, bytes] = field(default_factory=dict)  # sha -> tar.gz
    _last_review: int = 0  # epoch seconds of the latest time it gave (_now)
    comments: dict[int, dict[str, Any]] = field(default_factory=dict)
    check_runs: dict[int, dict[str, Any]] = field(default_factory=dict)
    statuses: list[dict[str, Any]] = field(default_factory=list)
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)
    reviews: list[dict[str, Any]] = field(default_factory=list)  # add_review
    # GET /repos/{repo}/activity: add_activity's entries, oldest first; each open pull
    # request's head is listed too, pushed by its author (a fork's is not this repository's)
    activity: list[dict[str, Any]] = field(default_factory=list)
    activity_status: int = 200  # another status for GET /activity (502: GitHub is down)
    permissions: dict[str, str] = field(default_factory=dict)  # login -> role; else 404
    reactions: list[dict[str, Any]] = field(default_factory=list)  # {comment, content}
    files: dict[tuple[str, str], str] = field(default_factory=dict)  # (ref, path) -> text
    teams: dict[str, list[str]] = field(default_factory=dict)  # "org/slug" -> logins
    refs: dict[str, str] = field(default_factory=dict)  # "main" / "tags/v1" -> sha
    tag_objects: dict[str, str] = field(default_factory=dict)  # tag object sha -> commit
    branch_commits: dict[str, set[str]] = field(default_factory=dict)
    merges: list[dict[str, Any]] = field(default_factory=list)  # {number, method, sha, merge_sha}
    deployments: list[dict[str, Any]] = field(default_factory=list)  # each with "statuses"
    deployments_forbidden: bool = False  # 403 on deployments, as for a token without the scope
    app_slug: str = "sluice-bot"  # GET /app (with the App's JWT): its bot user is <slug>[bot]
    user_status: int = 200  # another status for GET /user (401: a token GitHub refuses)
    actions_token: bool = False  # the token is an Actions GITHUB_TOKEN: see _caller, _user
    requests: list[tuple[str, str]] = field(default_factory=list)
    scoped: bool = False  # answer only this repository's URLs (several fakes on one mock)
    lock: threading.Lock = field(default_factory=threading.Lock)
    state_file: Path | None = None  # when set, the state survives the process (kill -9 tests)
    # A rename (:meth:`rename`): each old name, case-folded -> the name now; and an old
    # name another repository took since -> that repository's id (see _moved).
    renamed: dict[str, str] = field(default_factory=dict)
    taken: dict[str, int] = field(default_factory=dict)
    _ids: int = 1000
    _auth: str = ""  # the Authorization header of the request being answered

    def __post_init__(self) -> None:
        if self.state_file is not None and self.state_file.exists():
            saved = json.loads(self.state_file.read_text())
            self.comments = {int(k): v for k, v in saved["comments"].items()}
            self.check_runs = {int(k): v for k, v in saved["check_runs"].items()}
            self.statuses, self._ids = saved["statuses"], saved["ids"]
            self.requests = [tuple(r) for r in saved["requests"]]  # type: ignore[misc]
            self.pulls = {int(k): v for k, v in saved.get("pulls", {}).items()}
            self.files = {(ref, path): text for ref, path, text in saved.get("files", [])}
            self.branch_commits = {k: set(v) for k, v in saved.get("branch_commits", {}).items()}
            for name in ("reviews", "permissions", "reactions", "teams", "refs", "tag_objects",
                         "merges", "deployments"):  # fmt: skip
                if name in saved:
                    setattr(self, name, saved[name])

    def publish(self, ref: str, root: Path) -> None:
        """Put ``root``'s config.yaml and Python files on ``ref``, as a prod branch holds
        them: the settings in force, and the only Python the service runs by default
        (SLUICE_PROJECT_PYTHON=prod)."""
        self.files[(ref, "config.yaml")] = (root / "config.yaml").read_text()
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if not rel.startswith(".sluice/"):
                self.files[(ref, rel)] = path.read_text()

    def save(self) -> None:
        if self.state_file is None:
            return
        data = {"comments": self.comments, "check_runs": self.check_runs, "ids": self._ids,
                "statuses": self.statuses, "requests": self.requests, "pulls": self.pulls,
                "files": [[ref, path, text] for (ref, path), text in self.files.items()],
                "branch_commits": {k: sorted(v) for k, v in self.branch_commits.items()},
                "reviews": self.reviews, "permissions": self.permissions,
                "reactions": self.reactions, "teams": self.teams, "refs": self.refs,
                "tag_objects": self.tag_objects, "merges": self.merges,
                "deployments": self.deployments}  # fmt: skip
        partial = self.state_file.with_suffix(".partial")
        partial.write_text(json.dumps(data))
        partial.replace(self.state_file)

    def rename(self, new: str) -> None:
        """The repository is renamed ``new`` on GitHub: its id's repository is named so
        (``GET /repositories/{id}``, ``GET /repos/{new}``), and its old name is moved
        (:meth:`_moved`) until another repository takes it (``taken``)."""
        with self.lock:
            self.renamed[self.repo.casefold()] = new
            self.renamed.pop(new.casefold(), None)
            self.repo = new

    def _moved(self, request: Any, old: str) -> tuple[int, dict[str, str], str]:
        """A request under a name the repository was renamed away from, as GitHub answers
        it: taken by another repository since, that one's (``GET /repos/{old}``: its body,
        its own id; anything else of it: 404, it has none of this repository's pulls,
        commits or runs); else a redirect to the same path under the repository's id
        (``/repositories/{id}/...``, as GitHub's Location says), 301 Moved Permanently for
        a GET, 307 Temporary Redirect for anything else, as GitHub's documentation says."""
        other = self.taken.get(old.casefold())
        path = urlsplit(request.url).path
        if other is not None:
            if request.method == "GET" and re.fullmatch(r"/repos/[^/]+/[^/]+/?", path):
                return self._json(self._holder_json(old, other))
            return self._json(NOT_FOUND, 404)
        moved = path.replace(f"/repos/{old}", f"/repositories/{self.repo_id}", 1)
        query = urlsplit(request.url).query
        location = f"{API}{moved}" + (f"?{query}" if query else "")
        body = {"message": "Moved Permanently", "url": location,
                "documentation_url": "https://docs.github.com/rest"}  # fmt: skip
        status = 301 if request.method in ("GET", "HEAD") else 307
        if status == 307:
            body["message"] = "Temporary Redirect"
        return status, {"Location": location, "Content-Type": "application/json"}, json.dumps(body)

    def _holder_json(self, old: str, other: int) -> dict[str, Any]:
        """The repository of id ``other`` that took the name ``old`` (made just now)."""
        return {**self._repo_json(), "full_name": old, "id": other, "node_id": "R_2",
                "name": old.split("/")[1], "url": f"{API}/repos/{old}",
                "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}  # fmt: skip

    def _other(self, request: Any, other: int) -> tuple[int, dict[str, str], str]:
        """A request under another repository's id: the one that took an old name
        (``taken``) is itself (``GET /repositories/{id}``: its body; anything else of it
        404); an id this fake does not know, 404."""
        path = urlsplit(request.url).path
        held = [old for old, holder in self.taken.items() if holder == other]
        if held and request.method == "GET" and re.fullmatch(r"/repositories/\d+/?", path):
            return self._json(self._holder_json(held[0], other))
        return self._json(NOT_FOUND, 404)

    # --- what tests look at -----------------------------------------------------------

    def comments_on(self, number: int) -> list[dict[str, Any]]:
        return [c for c in self.comments.values() if c["issue"] == number]

    def checks_on(self, sha: str) -> dict[str, dict[str, Any]]:
        return {r["name"]: r for r in self.check_runs.values() if r["head_sha"] == sha}

    def add_pull(
        self, number: int, head_sha: str, *, author: str = "alice", base: str = "main",
        state: str = "open", merged: bool = False, draft: bool = False, fork: bool = False,
        mergeable: bool = True, head_ref: str = "feature", title: str = "change",
        merge_sha: str | None = None,
    ) -> None:  # fmt: skip
        """A pull request; ``merge_sha`` is the commit a merge through the API makes
        (default: a sha derived from the number and head)."""
        self.pulls[number] = {
            "number": number, "head_sha": head_sha, "author": author, "base": base,
            "state": state, "merged": merged, "draft": draft, "fork": fork,
            "mergeable": mergeable, "head_ref": head_ref, "title": title, "merge_sha": merge_sha,
        }  # fmt: skip

    def add_comment(
        self, number: int, body: str, *, user: str = "alice", kind: str = "User"
    ) -> int:
        """A comment someone else wrote on pull request ``number`` (``kind`` ``Bot`` for
        another App's); its id."""
        comment = {"id": self._next(), "issue": number, "body": body, "edits": 0,
                   "user": {**user_json(user), "type": kind}}  # fmt: skip
        self.comments[comment["id"]] = comment
        return int(comment["id"])

    def hold_comment(self, payload: dict[str, Any]) -> None:
        """Hold the comment an ``issue_comment`` hook names (its id, issue, author and
        body), unless one of that id is held: GitHub sends a created comment's hook only
        for a comment it holds, and the service reads it back before running a command."""
        comment, issue = payload.get("comment") or {}, payload.get("issue") or {}
        if not isinstance(comment.get("id"), int) or not isinstance(issue.get("number"), int):
            return
        with self.lock:
            if comment["id"] not in self.comments:
                user = comment.get("user") or {}
                self.comments[comment["id"]] = {
                    "id": comment["id"], "issue": issue["number"], "edits": 0,
                    "body": str(comment.get("body") or ""),
                    "user": {**user_json(str(user.get("login") or "someone")),
                             **({"id": user["id"]} if isinstance(user.get("id"), int) else {})},
                }  # fmt: skip

    def _now(self) -> str:
        # GitHub's clock, to the second as GitHub writes its times: a review's and a
        # comment's edit (the plan's publication). A second after the time it last gave
        # at the least, and after the real time: the gate does not count an approval
        # stamped in the second its plan was published, and a person reads the plan
        # before approving it.
        self._last_review = max(int(time.time()) + 1, self._last_review + 1)
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._last_review))

    def add_review(self, number: int, user: str, state: str, commit_sha: str | None) -> int:
        """A submitted review (``state`` as GitHub's API: APPROVED, CHANGES_REQUESTED,
        COMMENTED, DISMISSED); its id. Reviews list in the order they were added."""
        review_id = self._next()
        self.reviews.append({
            "id": review_id, "number": number, "user": user, "state": state,
            "commit_id": commit_sha,
            # Now, as GitHub stamps it (the gate counts a review given once its commit had
            # the plan it has; the service's clock is the real one here), a second after
            # the review before at the least: reviews list in the order given.
            "submitted_at": self._now(),
        })  # fmt: skip
        return review_id

    def add_tag(self, name: str, sha: str, *, annotated: bool = False) -> str:
        """Tag commit ``sha`` as ``name``; what ``refs["tags/NAME"]`` holds (for an
        annotated tag, the tag object's sha, which GitHub peels through /git/tags)."""
        target = sha
        if annotated:
            target = _sha1(f"tag {name} {sha}")
            self.tag_objects[target] = sha
        self.refs[f"tags/{name}"] = target
        return target

    # --- the wire ---------------------------------------------------------------------

    def install(self, mock: responses.RequestsMock) -> None:
        api = r"https://api\.github\.com(?::443)?"  # PyGithub spells out the port
        repo = re.escape(self.repo) if self.scoped else r"[^/]+/[^/]+"
        # Each route of the repository by its name or by its id (no group: the handlers'
        # groups are their own); another id's answered 404 in _wrap.
        by_id = str(self.repo_id) if self.scoped else r"\d+"
        base = api + rf"(?:/repos/{repo}|/repositories/{by_id})"
        codeload = r"https://codeload\.github\.com(?::443)?/" + (repo if self.scoped else "")
        routes: list[tuple[str, str, Any]] = [
            ("GET", rf"{base}$", self._repo_body),
            ("GET", rf"{base}/tarball/(\w+)$", self._tarball_link),
            ("GET", codeload + r".*tar\.gz/(\w+)$", self._tarball),
            ("GET", rf"{base}/issues/(\d+)$", self._issue),
            ("GET", rf"{base}/issues/(\d+)/comments(\?.*)?$", self._list_comments),
            ("POST", rf"{base}/issues/(\d+)/comments$", self._create_comment),
            ("GET", rf"{base}/issues/comments/(\d+)$", self._get_comment),
            ("PATCH", rf"{base}/issues/comments/(\d+)$", self._edit_comment),
            ("GET", rf"{base}/commits/(\w+)$", self._commit),
            ("GET", rf"{base}/commits/(\w+)/check-runs(\?.*)?$", self._list_checks),
            ("POST", rf"{base}/check-runs$", self._create_check),
            ("PATCH", rf"{base}/check-runs/(\d+)$", self._edit_check),
            ("POST", rf"{base}/statuses/(\w+)$", self._status),
            ("GET", rf"{base}/pulls/(\d+)$", self._pull),
            ("GET", rf"{base}/pulls/(\d+)/reviews(\?.*)?$", self._reviews),
            ("GET", rf"{base}/pulls/(\d+)/commits(\?.*)?$", self._pull_commits),
            ("GET", rf"{base}/pulls/(\d+)/files(\?.*)?$", self._pull_files),
            ("GET", rf"{base}/activity(\?.*)?$", self._activity),
            ("PUT", rf"{base}/pulls/(\d+)/merge$", self._merge),
            ("GET", rf"{base}/collaborators/([^/]+)/permission$", self._permission),
            ("POST", rf"{base}/issues/comments/(\d+)/reactions$", self._react),
            ("GET", rf"{base}/contents/([^?]+)(\?.*)?$", self._contents),
            ("GET", rf"{api}/orgs/([^/]+)/teams/([^/]+)/members(\?.*)?$", self._team_members),
            ("GET", rf"{base}/git/ref/([^?]+)$", self._git_ref),
            ("GET", rf"{base}/git/tags/(\w+)$", self._git_tag),
            ("GET", rf"{base}/compare/(.+?)\.\.\.([^?]+)(\?.*)?$", self._compare),
            ("POST", rf"{base}/deployments$", self._create_deployment),
            ("POST", rf"{base}/deployments/(\d+)/statuses$", self._deployment_status),
            ("GET", rf"{base}/check-runs/(\d+)$", self._check),
            ("GET", rf"{api}/user$", self._user),
            ("GET", rf"{api}/user/(\d+)$", self._user_by_id),
            ("GET", rf"{api}/users/([^/?]+)$", self._user_by_login),
            ("GET", rf"{api}/app$", self._app),
            ("POST", rf"{api}/app/installations/(\d+)/access_tokens$", self._access_token),
            ("GET", rf"{base}/installation$", self._installation),
        ]
        for method, pattern, handler in routes:
            mock.add_callback(method, re.compile(pattern), callback=self._wrap(handler, pattern))

    def _wrap(self, handler: Any, pattern: str) -> Any:
        def callback(request: Any) -> tuple[int, dict[str, str], str]:
            match = re.search(pattern, request.url)
            assert match is not None
            named = re.search(r"/repos/([^/]+/[^/]+?)(/|$)", request.url)
            numbered = re.search(r"/repositories/(\d+)(/|$)", request.url)
            with self.lock:
                if numbered and int(numbered.group(1)) != self.repo_id:
                    self.requests.append((request.method, request.url))
                    return self._other(request, int(numbered.group(1)))
                moved = named and named.group(1).casefold() in self.renamed
                if moved and named and "codeload" not in request.url:
                    self.requests.append((request.method, request.url))
                    return self._moved(request, named.group(1))
                if named and "codeload" not in request.url:
                    self.repo = named.group(1)
                self.requests.append((request.method, request.url))
                self._auth = str(request.headers.get("Authorization", ""))
                body = json.loads(request.body) if request.body else None
                answer = handler(match, body)
                self.save()
                return answer

        return callback

    def _next(self) -> int:
        self._ids += 1
        return self._ids

    def _json(self, data: Any, status: int = 200) -> tuple[int, dict[str, str], str]:
        return status, {"Content-Type": "application/json"}, json.dumps(data)

    def _repo_json(self) -> dict[str, Any]:
        owner, name = self.repo.split("/")
        return {
            # The id the bodies load_case gives carry: deliveries bind the name to it, and
            # jobs that carry none ask GET /repositories/{id} what it is named now.
            "id": self.repo_id, "node_id": "R_1", "name": name, "full_name": self.repo,
            "owner": {"login": owner, "id": 1, "type": "Organization"}, "private": False,
            "url": f"{API}/repos/{self.repo}", "default_branch": "main",
            # Made long before any test's clock: the service's records of the name are its.
            "created_at": "2011-01-26T19:01:12Z",
        }  # fmt: skip

    def _repo_body(self, match: Any, body: Any) -> Any:
        return self._json(self._repo_json())

    def _check(self, match: Any, body: Any) -> Any:
        # GET .../check-runs/{run_id}: a run of this repository (how Sluice asks whether a
        # repository holds a run it made under a name, by the repository's id); else 404.
        run = self.check_runs.get(int(match.group(1)))
        if run is None:
            return self._json(NOT_FOUND, 404)
        return self._json(self._check_json(run))

    def _tarball_link(self, match: Any, body: Any) -> Any:
        sha = match.group(1)
        if sha not in self.trees:
            return self._json({"message": "Not Found"}, 404)
        location = f"{CODELOAD}/{self.repo}/legacy.tar.gz/{sha}"
        return 302, {"Location": location}, ""

    def _tarball(self, match: Any, body: Any) -> Any:
        sha = match.group(1)
        if sha not in self.trees:
            return 404, {}, ""
        return 200, {"Content-Type": "application/x-gzip"}, self.trees[sha]  # type: ignore[return-value]

    def _issue(self, match: Any, body: Any) -> Any:
        number = int(match.group(1))
        return self._json({
            "id": number, "number": number, "title": "PR", "state": "open",
            "url": f"{API}/repos/{self.repo}/issues/{number}", "user": user_json("alice"),
            "pull_request": {"url": f"{API}/repos/{self.repo}/pulls/{number}"},
        })  # fmt: skip

    def _comment_json(self, comment: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": comment["id"], "node_id": f"IC_{comment['id']}", "body": comment["body"],
            "user": comment["user"], "url": f"{API}/repos/{self.repo}/issues/comments/{comment['id']}",
            "issue_url": f"{API}/repos/{self.repo}/issues/{comment['issue']}",
            "html_url": f"https://github.com/{self.repo}/pull/{comment['issue']}#issuecomment-{comment['id']}",
            "created_at": comment.get("created_at", "2026-11-21T10:00:00Z"),
            "updated_at": comment.get("updated_at", "2026-11-21T10:00:00Z"),
        }  # fmt: skip

    def _list_comments(self, match: Any, body: Any) -> Any:
        number = int(match.group(1))
        return self._json([self._comment_json(c) for c in self.comments_on(number)])

    def _caller(self) -> dict[str, Any]:
        """Who a write is made by: the App's bot user with an installation token,
        ``github-actions[bot]`` with an Actions token, else the token's user (:data:`BOT`)."""
        if self._auth == f"token {INSTALLATION_TOKEN}":
            return {**BOT, "login": f"{self.app_slug}[bot]"}
        if self.actions_token:
            return {**BOT, "login": "github-actions[bot]", "id": 41898282}
        return BOT

    def _create_comment(self, match: Any, body: Any) -> Any:
        now = self._now()
        comment = {"id": self._next(), "issue": int(match.group(1)), "body": body["body"],
                   "user": self._caller(), "edits": 0, "created_at": now, "updated_at": now}  # fmt: skip
        self.comments[comment["id"]] = comment
        return self._json(self._comment_json(comment), 201)

    def _get_comment(self, match: Any, body: Any) -> Any:
        comment = self.comments.get(int(match.group(1)))
        if comment is None:
            return self._json({"message": "Not Found"}, 404)
        return self._json(self._comment_json(comment))

    def _edit_comment(self, match: Any, body: Any) -> Any:
        comment = self.comments[int(match.group(1))]
        if comment["user"]["login"] != self._caller()["login"]:  # as GitHub: not yours
            return self._json({"message": "Resource not accessible by integration"}, 403)
        comment.setdefault("bodies", [comment["body"]]).append(body["body"])
        comment["body"] = body["body"]
        comment["edits"] += 1
        comment["updated_at"] = self._now()
        return self._json(self._comment_json(comment))

    def _commit(self, match: Any, body: Any) -> Any:
        sha = match.group(1)
        return self._json({"sha": sha, "url": f"{API}/repos/{self.repo}/commits/{sha}",
                           "commit": {"message": "change"}})  # fmt: skip

    def _check_json(self, run: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": run["id"], "name": run["name"], "head_sha": run["head_sha"],
            "status": run["status"], "conclusion": run.get("conclusion"),
            "url": f"{API}/repos/{self.repo}/check-runs/{run['id']}", "output": run.get("output", {}),
            "app": run.get("app", SLUICE_APP),
        }  # fmt: skip

    def add_check_run(self, sha: str, name: str, *, app: dict[str, Any] = ACTIONS_APP,
                      **fields: Any) -> int:  # fmt: skip
        """A check run another App made on ``sha`` (a workflow's ``GITHUB_TOKEN`` makes
        GitHub Actions'), perhaps named as one of Sluice's; its id. Only the App that made a
        run may edit it: Sluice's edit is refused with 403, as on GitHub."""
        run = {"id": self._next(), "name": name, "head_sha": sha, "status": "completed",
               "app": app, "history": [], **fields}  # fmt: skip
        self.check_runs[run["id"]] = run
        return int(run["id"])

    def _list_checks(self, match: Any, body: Any) -> Any:
        sha = match.group(1)
        name = re.search(r"check_name=([^&]+)", match.group(0))
        runs = [r for r in self.check_runs.values() if r["head_sha"] == sha]
        if name:
            from urllib.parse import unquote

            runs = [r for r in runs if r["name"] == unquote(name.group(1))]
        return self._json(
            {"total_count": len(runs), "check_runs": [self._check_json(r) for r in runs]}
        )

    def _create_check(self, match: Any, body: Any) -> Any:
        run = {"id": self._next(), **body, "history": [body.get("status")]}
        self.check_runs[run["id"]] = run
        return self._json(self._check_json(run), 201)

    def _edit_check(self, match: Any, body: Any) -> Any:
        run = self.check_runs.get(int(match.group(1)))
        if run is None:
            return self._json(NOT_FOUND, 404)
        if run.get("app", SLUICE_APP)["id"] != SLUICE_APP["id"]:
            app = run["app"]["id"]
            return self._json({"message": f"Invalid app_id `{app}` - check run can only be "
                               "modified by the GitHub App that created it."}, 403)  # fmt: skip
        run.update(body)
        run["history"].append(body.get("status"))
        return self._json(self._check_json(run))

    def _status(self, match: Any, body: Any) -> Any:
        self.statuses.append({"sha": match.group(1), **body})
        return self._json({"id": self._next(), **body}, 201)

    def _pull(self, match: Any, body: Any) -> Any:
        number = int(match.group(1))
        pull = self.pulls.get(number)
        if pull is None:
            return self._json({"message": "Not Found"}, 404)
        repo = self._repo_json()
        head_repo = repo
        if pull.get("fork"):
            owner = pull["author"]
            head_repo = {**repo, "id": 2, "full_name": f"{owner}/{repo['name']}", "fork": True,
                         "owner": {"login": owner, "id": 3, "type": "User"}}  # fmt: skip
        return self._json({
            "id": number, "number": number, "state": pull.get("state", "open"),
            "title": pull.get("title", "change"), "draft": pull.get("draft", False),
            "merged": pull.get("merged", False), "mergeable": pull.get("mergeable", True),
            "merge_commit_sha": pull.get("merge_sha"), "user": user_json(pull["author"]),
            "head": {"sha": pull["head_sha"], "ref": pull.get("head_ref", "feature"),
                     "repo": head_repo},
            "base": {"sha": self.refs.get(pull["base"], "b" * 40), "ref": pull["base"],
                     "repo": repo},
            "url": f"{API}/repos/{self.repo}/pulls/{number}",
            "commits": len(self._commits_of(pull)),
            "changed_files": len(pull.get("files", [])),
        })  # fmt: skip

    def _pull_files(self, match: Any, body: Any) -> Any:
        """The paths a pull request changes: its ``files`` (set by a test), else none."""
        pull = self.pulls.get(int(match.group(1)))
        if pull is None:
            return self._json(NOT_FOUND, 404)
        return self._json([
            {"sha": _sha1(path), "filename": path, "status": "modified", "additions": 1,
             "deletions": 0, "changes": 1}
            for path in pull.get("files", [])
        ])  # fmt: skip

    def _commits_of(self, pull: dict[str, Any]) -> list[dict[str, Any]]:
        """The pull request's commits: those :meth:`add_pull_commit` named, else its head
        (by nobody GitHub knows)."""
        return pull.get("commits") or [{"sha": pull["head_sha"]}]

    def add_pull_commit(
        self, number: int, sha: str, *, author: str | None = None, committer: str | None = None
    ) -> None:
        """Commit ``sha`` is one of pull request ``number``'s (after those added before),
        written and committed by the accounts GitHub maps its e-mails to (None: none)."""
        pull = self.pulls[number]
        pull["commits"] = [*pull.get("commits", []), {"sha": sha, "author": author,
                                                      "committer": committer}]  # fmt: skip

    def _pull_commits(self, match: Any, body: Any) -> Any:
        pull = self.pulls.get(int(match.group(1)))
        if pull is None:
            return self._json({"message": "Not Found"}, 404)
        return self._json([
            {"sha": c["sha"], "url": f"{API}/repos/{self.repo}/commits/{c['sha']}",
             "commit": {"message": "change", "author": {"name": "x", "email": "x@example.com"},
                        "committer": {"name": "x", "email": "x@example.com"}},
             "author": user_json(c["author"]) if c.get("author") else None,
             "committer": user_json(c["committer"]) if c.get("committer") else None,
             "parents": []}
            for c in self._commits_of(pull)
        ])  # fmt: skip

    def add_activity(self, ref: str, after: str, actor: str | None, kind: str = "push") -> None:
        """An entry of the repository's activity: ``actor`` (None: a deleted account) moved
        ``ref`` (``refs/heads/<branch>``, as GitHub writes it) to ``after``."""
        self.activity.append({
            "id": self._next(), "node_id": "RA_1", "before": "0" * 40, "after": after,
            "ref": ref, "timestamp": "2026-11-21T10:00:00Z", "activity_type": kind,
            "actor": user_json(actor) if actor is not None else None,
        })  # fmt: skip

    def _activity(self, match: Any, body: Any) -> Any:
        """The activity of every branch, newest first (of the ``ref`` alone where one is
        asked, in any spelling GitHub takes), ``per_page`` at a time; the next page's
        ``after`` cursor in the Link header."""
        if self.activity_status != 200:
            return self._json({"message": "Server Error"}, self.activity_status)
        query = self._query(match)
        pushed = [
            {"id": number, "node_id": "RA_0", "before": "0" * 40, "after": pull["head_sha"],
             "ref": f"refs/heads/{pull.get('head_ref', 'feature')}", "activity_type": "push",
             "timestamp": "2026-11-21T09:00:00Z", "actor": user_json(pull["author"])}
            for number, pull in self.pulls.items() if not pull.get("fork")
        ]  # fmt: skip
        entries = [*pushed, *self.activity][::-1]
        ref = query.get("ref")
        if ref is not None:
            full = ref if ref.startswith("refs/") else f"refs/heads/{ref}"
            entries = [e for e in entries if e["ref"] == full]
        size, start = int(query.get("per_page", "30")), int(query.get("after", "0"))
        status, headers, text = self._json(entries[start : start + size])
        if start + size < len(entries):
            page = f"activity?per_page={size}&after={start + size}"
            url = f"{API}/repositories/{self.repo_id}/{page}"
            headers["Link"] = f'<{url}>; rel="next"'
        return status, headers, text

    def _reviews(self, match: Any, body: Any) -> Any:
        # Lenient: a pull request the test never added simply has no reviews.
        number = int(match.group(1))
        return self._json([
            {"id": r["id"], "node_id": f"PRR_{r['id']}", "user": user_json(r["user"]),
             "body": "", "state": r["state"], "commit_id": r["commit_id"],
             "submitted_at": r["submitted_at"], "author_association": "MEMBER",
             "pull_request_url": f"{API}/repos/{self.repo}/pulls/{number}"}
            for r in self.reviews if r["number"] == number
        ])  # fmt: skip

    def _merge(self, match: Any, body: Any) -> Any:
        number = int(match.group(1))
        pull = self.pulls.get(number)
        if pull is None:
            return self._json(NOT_FOUND, 404)
        if (
            pull.get("state", "open") != "open"
            or pull.get("draft")
            or not pull.get("mergeable", True)
        ):
            return self._json({"message": "Pull Request is not mergeable"}, 405)
        head = pull["head_sha"]
        if body.get("sha") not in (None, head):
            message = "Head branch was modified. Review and try the merge again."
            return self._json({"message": message}, 409)
        sha = pull.get("merge_sha") or _sha1(f"merge {number} {head}")
        pull.update(state="closed", merged=True, merge_sha=sha)
        self.refs[pull["base"]] = sha  # the base branch moves to the merge commit
        self.branch_commits.setdefault(pull["base"], set()).update({head, sha})
        self.merges.append({"number": number, "method": body.get("merge_method", "merge"),
                            "sha": head, "merge_sha": sha})  # fmt: skip
        return self._json(
            {"sha": sha, "merged": True, "message": "Pull Request successfully merged"}
        )

    def _permission(self, match: Any, body: Any) -> Any:
        login = unquote(match.group(1))
        role = self.permissions.get(login)
        if role is None:
            return self._json(NOT_FOUND, 404)
        return self._json({"permission": LEGACY.get(role, "read"), "role_name": role,
                           "user": user_json(login)})  # fmt: skip

    def _react(self, match: Any, body: Any) -> Any:
        reaction = {"comment": int(match.group(1)), "content": body["content"]}
        self.reactions.append(reaction)
        return self._json({"id": self._next(), "node_id": "REA_1", "user": BOT,
                           "content": body["content"], "created_at": "2026-11-21T10:00:00Z"},
                          201)  # fmt: skip

    def _query(self, match: Any) -> dict[str, str]:
        return {k: v[0] for k, v in parse_qs(urlsplit(match.group(0)).query).items()}

    def _contents(self, match: Any, body: Any) -> Any:
        path, ref = unquote(match.group(1)), self._query(match).get("ref", "main")
        text = self.files.get((ref, path))
        if text is None:  # a commit a branch points at serves that branch's files, as on GitHub
            branch = next((b for b, sha in self.refs.items() if sha == ref), None)
            text = self.files.get((branch, path)) if branch is not None else None
        if text is None:
            return self._folder(path, ref)
        raw = text.encode()
        return self._json({
            "type": "file", "encoding": "base64", "size": len(raw), "path": path,
            "name": path.rsplit("/", 1)[-1], "content": base64.encodebytes(raw).decode(),
            "sha": _sha1(text), "url": f"{API}/repos/{self.repo}/contents/{path}?ref={ref}",
        })  # fmt: skip

    def _folder(self, path: str, ref: str) -> Any:
        """A folder's listing (the contents API's list of entries), from the files served
        at ``ref`` (or the branch pointing at it); 404 when none is under ``path``."""
        refs = {ref, *(b for b, sha in self.refs.items() if sha == ref)}
        prefix = path.strip("/") + "/"
        names = {
            tuple(name.removeprefix(prefix).split("/", 1))
            for r, name in self.files
            if r in refs and name.startswith(prefix)
        }
        if not names:
            return self._json(NOT_FOUND, 404)
        entries = {(parts[0], "dir" if len(parts) > 1 else "file") for parts in names}
        return self._json([
            {"type": kind, "name": name, "path": prefix + name, "size": 0, "sha": _sha1(name),
             "url": f"{API}/repos/{self.repo}/contents/{prefix}{name}?ref={ref}"}
            for name, kind in sorted(entries)
        ])  # fmt: skip

    def _team_members(self, match: Any, body: Any) -> Any:
        wanted = f"{unquote(match.group(1))}/{unquote(match.group(2))}".casefold()
        for team, logins in self.teams.items():
            if team.casefold() == wanted:
                return self._json([user_json(login) for login in logins])
        return self._json(NOT_FOUND, 404)

    def _git_ref(self, match: Any, body: Any) -> Any:
        name = unquote(match.group(1))
        sha = self.refs.get(name.removeprefix("heads/")) if name.startswith("heads/") else None
        if name.startswith("tags/"):
            sha = self.refs.get(name)
        if sha is None:
            return self._json(NOT_FOUND, 404)
        kind = "tag" if sha in self.tag_objects else "commit"
        return self._json({"ref": f"refs/{name}", "node_id": "REF_1",
                           "url": f"{API}/repos/{self.repo}/git/refs/{name}",
                           "object": {"type": kind, "sha": sha, "url": f"{API}/x/{sha}"}})  # fmt: skip

    def _git_tag(self, match: Any, body: Any) -> Any:
        sha = match.group(1)
        commit = self.tag_objects.get(sha)
        if commit is None:
            return self._json(NOT_FOUND, 404)
        return self._json({"sha": sha, "node_id": "TAG_1", "tag": "tag", "message": "release",
                           "url": f"{API}/repos/{self.repo}/git/tags/{sha}",
                           "object": {"type": "commit", "sha": commit, "url": f"{API}/x/{commit}"}})  # fmt: skip

    def _reachable(self, ref: str) -> tuple[str, set[str]]:
        """The commit ``ref`` (a branch or a sha) names, and every commit reachable from it."""
        tip = self.refs.get(ref, ref)
        return tip, reachable(self.branch_commits, ref, tip)

    def _compare(self, match: Any, body: Any) -> Any:
        base, head = unquote(match.group(1)), unquote(match.group(2))
        known = (
            base in self.refs or base in self.branch_commits or re.fullmatch(r"[0-9a-f]{40}", base)
        )
        if not known:
            return self._json(NOT_FOUND, 404)
        tip, behind = self._reachable(base)
        if head == tip:
            status = "identical"
        elif head in behind:
            status = "behind"
        else:
            status = "ahead" if tip in self._reachable(head)[1] else "diverged"
        return self._json({"status": status, "ahead_by": int(status in ("ahead", "diverged")),
                           "behind_by": int(status in ("behind", "diverged")),
                           "total_commits": 0, "commits": [], "files": [],
                           "url": f"{API}/repos/{self.repo}/compare/{base}...{head}"})  # fmt: skip

    def _forbidden(self) -> Any:
        return self._json({"message": "Resource not accessible by integration"}, 403)

    def _deployment_json(self, d: dict[str, Any]) -> dict[str, Any]:
        url = f"{API}/repos/{self.repo}/deployments/{d['id']}"
        return {"id": d["id"], "node_id": f"DE_{d['id']}", "sha": d["ref"], "ref": d["ref"],
                "task": "deploy", "environment": d.get("environment"),
                "description": d.get("description"), "creator": BOT, "url": url,
                "statuses_url": f"{url}/statuses", "created_at": "2026-11-21T10:00:00Z",
                "production_environment": d.get("production_environment", False)}  # fmt: skip

    def _create_deployment(self, match: Any, body: Any) -> Any:
        if self.deployments_forbidden:
            return self._forbidden()
        deployment = {"id": self._next(), **body, "statuses": []}
        self.deployments.append(deployment)
        return self._json(self._deployment_json(deployment), 201)

    def _deployment_status(self, match: Any, body: Any) -> Any:
        if self.deployments_forbidden:
            return self._forbidden()
        number = int(match.group(1))
        found = [d for d in self.deployments if d["id"] == number]
        if not found:
            return self._json(NOT_FOUND, 404)
        found[0]["statuses"].append(body)
        return self._json({"id": self._next(), "node_id": "DES_1", "creator": BOT,
                           "url": f"{API}/repos/{self.repo}/deployments/{number}/statuses/1",
                           **body}, 201)  # fmt: skip

    def _user(self, match: Any, body: Any) -> Any:
        if self.actions_token:  # an Actions GITHUB_TOKEN may not read /user
            return self._json({"message": "Resource not accessible by integration"}, 403)
        if self.user_status != 200:
            return self._json({"message": "Resource not accessible by integration"},
                              self.user_status)  # fmt: skip
        return self._json(BOT)

    def _user_by_id(self, match: Any, body: Any) -> Any:
        """``GET /user/{id}``: the account of that id among the people the fake knows
        (collaborators, team members, authors and reviewers), by login of now."""
        uid = int(match.group(1))
        known = [*self.permissions, *(m for team in self.teams.values() for m in team)]
        known += [str(p.get("author")) for p in self.pulls.values() if p.get("author")]
        known += [str(r["user"]) for r in self.reviews if isinstance(r.get("user"), str)]
        found = [login for login in known if account_id_of(login) == uid]
        if not found:
            return self._json({"message": "Not Found"}, 404)
        return self._json(user_json(found[0]))

    def _user_by_login(self, match: Any, body: Any) -> Any:
        """``GET /users/{login}``: the account holding that login (every login is one, of
        the id the in-memory forge gives it)."""
        return self._json(user_json(match.group(1)))

    def _jwt(self) -> bool:
        return self._auth.startswith("Bearer ")

    def _app(self, match: Any, body: Any) -> Any:
        if not self._jwt():  # GET /app answers only to the App's JWT
            return self._json({"message": "A JSON web token could not be decoded"}, 401)
        return self._json({"id": 123, "slug": self.app_slug, "node_id": "A_1",
                           "name": self.app_slug.title(), "owner": user_json("octo"),
                           "created_at": "2026-01-01T00:00:00Z",
                           "updated_at": "2026-01-01T00:00:00Z"})  # fmt: skip

    def _access_token(self, match: Any, body: Any) -> Any:
        if not self._jwt():
            return self._json({"message": "A JSON web token could not be decoded"}, 401)
        return self._json({"token": INSTALLATION_TOKEN, "expires_at": "2030-01-01T00:00:00Z",
                           "permissions": {"issues": "write"}}, 201)  # fmt: skip

    def _installation(self, match: Any, body: Any) -> Any:
        if not self._jwt():
            return self._json({"message": "A JSON web token could not be decoded"}, 401)
        return self._json({"id": 42, "app_id": 123, "app_slug": self.app_slug,
                           "target_type": "Organization", "account": user_json("octo"),
                           "access_tokens_url": f"{API}/app/installations/42/access_tokens",
                           "permissions": {}, "events": []})  # fmt: skip
