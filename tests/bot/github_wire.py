"""A stateful GitHub REST API at the wire, for the service's tests.

Registered on a ``responses.RequestsMock``, so PyGithub really runs and every request it
makes is a real HTTP request that this fake answers with bodies shaped like GitHub's.
It keeps what a repository would: issue comments, check runs, commit statuses, reactions,
and serves a tarball per commit. Anything it does not know is a ConnectionError (no
internet).
"""

from __future__ import annotations

import io
import json
import re
import tarfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import responses

API = "https://api.github.com"
CODELOAD = "https://codeload.github.com"
BOT = {"login": "sluice-bot[bot]", "id": 900, "type": "Bot", "node_id": "B_1"}


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
    """One repository's state on a fake GitHub."""

    repo: str = "octo/warehouse"
    trees: dict[str, bytes] = field(default_factory=dict)  # sha -> tar.gz
    comments: dict[int, dict[str, Any]] = field(default_factory=dict)
    check_runs: dict[int, dict[str, Any]] = field(default_factory=dict)
    statuses: list[dict[str, Any]] = field(default_factory=list)
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    state_file: Path | None = None  # when set, the state survives the process (kill -9 tests)
    _ids: int = 1000

    def __post_init__(self) -> None:
        if self.state_file is not None and self.state_file.exists():
            saved = json.loads(self.state_file.read_text())
            self.comments = {int(k): v for k, v in saved["comments"].items()}
            self.check_runs = {int(k): v for k, v in saved["check_runs"].items()}
            self.statuses, self._ids = saved["statuses"], saved["ids"]
            self.requests = [tuple(r) for r in saved["requests"]]  # type: ignore[misc]

    def save(self) -> None:
        if self.state_file is None:
            return
        data = {"comments": self.comments, "check_runs": self.check_runs, "ids": self._ids,
                "statuses": self.statuses, "requests": self.requests}  # fmt: skip
        partial = self.state_file.with_suffix(".partial")
        partial.write_text(json.dumps(data))
        partial.replace(self.state_file)

    # --- what tests look at -----------------------------------------------------------

    def comments_on(self, number: int) -> list[dict[str, Any]]:
        return [c for c in self.comments.values() if c["issue"] == number]

    def checks_on(self, sha: str) -> dict[str, dict[str, Any]]:
        return {r["name"]: r for r in self.check_runs.values() if r["head_sha"] == sha}

    def add_pull(
        self, number: int, head_sha: str, *, author: str = "alice", base: str = "main"
    ) -> None:
        self.pulls[number] = {
            "number": number,
            "head_sha": head_sha,
            "author": author,
            "base": base,
        }

    # --- the wire ---------------------------------------------------------------------

    def install(self, mock: responses.RequestsMock) -> None:
        api = r"https://api\.github\.com(?::443)?"  # PyGithub spells out the port
        base = api + r"/repos/[^/]+/[^/]+"
        routes: list[tuple[str, str, Any]] = [
            ("GET", rf"{base}$", self._repo_body),
            ("GET", rf"{base}/tarball/(\w+)$", self._tarball_link),
            ("GET", r"https://codeload\.github\.com(?::443)?/.*tar\.gz/(\w+)$", self._tarball),
            ("GET", rf"{base}/issues/(\d+)$", self._issue),
            ("GET", rf"{base}/issues/(\d+)/comments(\?.*)?$", self._list_comments),
            ("POST", rf"{base}/issues/(\d+)/comments$", self._create_comment),
            ("PATCH", rf"{base}/issues/comments/(\d+)$", self._edit_comment),
            ("GET", rf"{base}/commits/(\w+)$", self._commit),
            ("GET", rf"{base}/commits/(\w+)/check-runs(\?.*)?$", self._list_checks),
            ("POST", rf"{base}/check-runs$", self._create_check),
            ("PATCH", rf"{base}/check-runs/(\d+)$", self._edit_check),
            ("POST", rf"{base}/statuses/(\w+)$", self._status),
            ("GET", rf"{base}/pulls/(\d+)$", self._pull),
            ("GET", rf"{api}/user$", self._user),
        ]
        for method, pattern, handler in routes:
            mock.add_callback(method, re.compile(pattern), callback=self._wrap(handler, pattern))

    def _wrap(self, handler: Any, pattern: str) -> Any:
        def callback(request: Any) -> tuple[int, dict[str, str], str]:
            match = re.search(pattern, request.url)
            assert match is not None
            named = re.search(r"/repos/([^/]+/[^/]+?)(/|$)", request.url)
            with self.lock:
                if named and "codeload" not in request.url:
                    self.repo = named.group(1)
                self.requests.append((request.method, request.url))
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
            "id": 1296269, "node_id": "R_1", "name": name, "full_name": self.repo,
            "owner": {"login": owner, "id": 1, "type": "Organization"}, "private": False,
            "url": f"{API}/repos/{self.repo}", "default_branch": "main",
        }  # fmt: skip

    def _repo_body(self, match: Any, body: Any) -> Any:
        return self._json(self._repo_json())

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
            "url": f"{API}/repos/{self.repo}/issues/{number}", "user": {"login": "alice", "id": 2},
            "pull_request": {"url": f"{API}/repos/{self.repo}/pulls/{number}"},
        })  # fmt: skip

    def _comment_json(self, comment: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": comment["id"], "node_id": f"IC_{comment['id']}", "body": comment["body"],
            "user": comment["user"], "url": f"{API}/repos/{self.repo}/issues/comments/{comment['id']}",
            "html_url": f"https://github.com/{self.repo}/pull/{comment['issue']}#issuecomment-{comment['id']}",
            "created_at": "2026-11-21T10:00:00Z", "updated_at": "2026-11-21T10:00:00Z",
        }  # fmt: skip

    def _list_comments(self, match: Any, body: Any) -> Any:
        number = int(match.group(1))
        return self._json([self._comment_json(c) for c in self.comments_on(number)])

    def _create_comment(self, match: Any, body: Any) -> Any:
        comment = {"id": self._next(), "issue": int(match.group(1)), "body": body["body"],
                   "user": BOT, "edits": 0}  # fmt: skip
        self.comments[comment["id"]] = comment
        return self._json(self._comment_json(comment), 201)

    def _edit_comment(self, match: Any, body: Any) -> Any:
        comment = self.comments[int(match.group(1))]
        comment.setdefault("bodies", [comment["body"]]).append(body["body"])
        comment["body"] = body["body"]
        comment["edits"] += 1
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
        }  # fmt: skip

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
        run = self.check_runs[int(match.group(1))]
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
        return self._json({
            "id": number, "number": number, "state": "open", "title": "change", "draft": False,
            "merged": False, "user": {"login": pull["author"], "id": 2},
            "head": {"sha": pull["head_sha"], "ref": "feature", "repo": repo},
            "base": {"sha": "b" * 40, "ref": pull["base"], "repo": repo},
            "url": f"{API}/repos/{self.repo}/pulls/{number}",
        })  # fmt: skip

    def _user(self, match: Any, body: Any) -> Any:
        return self._json(BOT)
