"""GitHubForge against GitHub's REST API mocked at the wire: PyGithub runs for real.

Every test runs inside a strict ``responses`` mock: an unregistered request is a
ConnectionError (no internet) and a registered one that is never made fails the test.
PyGithub always writes the port, so API URLs are ``https://api.github.com:443/...``.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import re
import tarfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jwt
import pytest
import responses
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from responses import matchers

from sluice.bot.forge.base import (
    Check,
    CheckAction,
    Forge,
    ForgeError,
    Posted,
    PullCommit,
    created_ms,
)
from sluice.bot.forge.github import (
    GitHubForge,
    TokenCache,
    fit,
    github_client,
    redact,
)
from sluice.bot.forge.memory import account_id_of
from sluice.core.errors import ConfigError
from tests.helpers.github_wire import FakeGitHub

REPO = "octo/widgets"
API = "https://api.github.com:443"
R = f"{API}/repos/{REPO}"
TOKEN = "ghp_" + "T0kenT0kenT0kenT0kenT0kenT0kenT0ken12"
INSTALL_TOKEN = "ghs_" + "1nstall1nstall1nstall1nstall1nstall12"
SHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
CODELOAD = f"https://codeload.github.com/{REPO}/legacy.tar.gz/{SHA}"
TOP = f"octo-widgets-{SHA[:7]}"


# --- GitHub-shaped bodies ------------------------------------------------------------


def user(login: str, kind: str = "User", uid: int = 1) -> dict[str, Any]:
    return {
        "login": login, "id": uid, "node_id": f"MDQ6VXNlcj{uid}", "type": kind,
        "avatar_url": f"https://avatars.githubusercontent.com/u/{uid}?v=4",
        "url": f"https://api.github.com/users/{login}", "html_url": f"https://github.com/{login}",
        "site_admin": False,
    }  # fmt: skip


def repo_json(full_name: str, rid: int) -> dict[str, Any]:
    owner, name = full_name.split("/")
    return {
        "id": rid, "node_id": f"R_kgDO{rid}", "name": name, "full_name": full_name,
        "owner": user(owner, "Organization", rid + 1), "private": False, "fork": False,
        "url": f"https://api.github.com/repos/{full_name}",
        "html_url": f"https://github.com/{full_name}", "default_branch": "main",
    }  # fmt: skip


def comment_json(cid: int, body: str, author: dict[str, Any], number: int = 7) -> dict[str, Any]:
    return {
        "id": cid, "node_id": f"IC_kwDO{cid}", "body": body, "user": author,
        "url": f"https://api.github.com/repos/{REPO}/issues/comments/{cid}",
        "html_url": f"https://github.com/{REPO}/pull/{number}#issuecomment-{cid}",
        "issue_url": f"https://api.github.com/repos/{REPO}/issues/{number}",
        "author_association": "NONE",
        "created_at": "2026-03-01T10:00:00Z", "updated_at": "2026-03-01T10:00:00Z",
    }  # fmt: skip


def check_json(rid: int, name: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": rid, "node_id": f"CR_kwDO{rid}", "name": name, "head_sha": SHA,
        "external_id": "", "url": f"https://api.github.com/repos/{REPO}/check-runs/{rid}",
        "html_url": f"https://github.com/{REPO}/runs/{rid}", "details_url": None,
        "status": fields.get("status", "queued"), "conclusion": fields.get("conclusion"),
        "started_at": "2026-03-01T10:00:00Z", "completed_at": None,
        "output": {"title": None, "summary": None, "text": None, "annotations_count": 0,
                   "annotations_url": f"https://api.github.com/repos/{REPO}/check-runs/{rid}/annotations"},
        "check_suite": {"id": 5}, "app": {"id": 123, "slug": "sluice", "name": "Sluice"},
        "pull_requests": [],
    }  # fmt: skip


def error(message: str, doc: str = "https://docs.github.com/rest") -> dict[str, Any]:
    return {"message": message, "documentation_url": doc, "status": "?"}


def sent(call: Any) -> Any:
    return json.loads(call.request.body)


# --- fixtures -------------------------------------------------------------------------


@pytest.fixture
def rs() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=True) as mock:
        yield mock


def token_client(api_url: str = "https://api.github.com") -> Any:
    return github_client(
        repo=REPO,
        api_url=api_url,
        token=TOKEN,
        seconds_between_requests=None,
        seconds_between_writes=None,
    )


@pytest.fixture
def forge(rs: responses.RequestsMock) -> GitHubForge:
    return GitHubForge(token_client(), REPO)


@pytest.fixture(scope="session")
def rsa_key() -> tuple[str, Any]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()
    return pem, key.public_key()


def app_client(pem: str, installation_id: int | None, cache: TokenCache) -> Any:
    return github_client(
        repo=REPO,
        app_id="123",
        private_key=pem,
        installation_id=installation_id,
        cache=cache,
        seconds_between_requests=None,
        seconds_between_writes=None,
    )


def access_token_body(expires: str = "2030-01-01T00:00:00Z") -> dict[str, Any]:
    return {
        "token": INSTALL_TOKEN, "expires_at": expires,
        "permissions": {"checks": "write", "contents": "read", "pull_requests": "write"},
        "repository_selection": "selected",
    }  # fmt: skip


def contents_json(path: str, text: str) -> dict[str, Any]:
    raw = text.encode()
    return {
        "type": "file", "encoding": "base64", "size": len(raw), "name": path.rsplit("/", 1)[-1],
        "path": path, "content": base64.encodebytes(raw).decode(), "sha": "3d21ec53a331a6f037a91c368710b99387d012c1",
        "url": f"https://api.github.com/repos/{REPO}/contents/{path}?ref=main",
        "git_url": f"https://api.github.com/repos/{REPO}/git/blobs/3d21ec5",
        "html_url": f"https://github.com/{REPO}/blob/main/{path}",
        "download_url": f"https://raw.githubusercontent.com/{REPO}/main/{path}",
    }  # fmt: skip


# --- the protocol and authentication ----------------------------------------------------


def test_the_forge_satisfies_the_protocol(forge: GitHubForge) -> None:
    as_port: Forge = forge
    assert (as_port.name, as_port.repo, as_port.comment_limit) == ("github", REPO, 65536)


def test_a_token_is_sent_as_the_authorization_header(
    rs: responses.RequestsMock, forge: GitHubForge
) -> None:
    rs.get(f"{R}/contents/config.yaml", json=contents_json("config.yaml", "name: demo\n"))
    assert forge.read_file("main", "config.yaml") == "name: demo\n"
    assert rs.calls[0].request.headers["Authorization"] == f"token {TOKEN}"
    assert "ref=main" in str(rs.calls[0].request.url)


def test_no_credentials_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="no GitHub credentials"):
        github_client(repo=REPO)


def test_app_auth_uses_a_jwt_for_the_installation_token_then_the_token(
    rs: responses.RequestsMock, rsa_key: tuple[str, Any]
) -> None:
    pem, public = rsa_key
    tokens = rs.post(
        f"{API}/app/installations/42/access_tokens", status=201, json=access_token_body()
    )
    rs.get(f"{R}/contents/a.txt", json=contents_json("a.txt", "a"))
    forge = GitHubForge(app_client(pem, 42, TokenCache()), REPO)
    assert forge.read_file("main", "a.txt") == "a"
    assert tokens.call_count == 1
    bearer = str(rs.calls[0].request.headers["Authorization"])
    assert bearer.startswith("Bearer ")
    claims = jwt.decode(bearer.removeprefix("Bearer "), public, algorithms=["RS256"])
    assert claims["iss"] == "123"
    assert rs.calls[1].request.headers["Authorization"] == f"token {INSTALL_TOKEN}"


def test_app_auth_without_an_installation_id_looks_it_up_by_repository(
    rs: responses.RequestsMock, rsa_key: tuple[str, Any]
) -> None:
    pem, _ = rsa_key
    rs.get(
        f"{R}/installation",
        json={
            "id": 77, "app_id": 123, "app_slug": "sluice", "target_id": 2, "target_type": "Organization",
            "account": user("octo", "Organization", 2), "repository_selection": "selected",
            "access_tokens_url": "https://api.github.com/app/installations/77/access_tokens",
            "permissions": {"checks": "write"}, "events": ["pull_request"],
            "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
        },
    )  # fmt: skip
    rs.post(f"{API}/app/installations/77/access_tokens", status=201, json=access_token_body())
    rs.get(f"{R}/contents/a.txt", json=contents_json("a.txt", "a"))
    forge = GitHubForge(app_client(pem, None, TokenCache()), REPO)
    assert forge.read_file("main", "a.txt") == "a"
    assert str(rs.calls[0].request.headers["Authorization"]).startswith("Bearer ")
    assert rs.calls[2].request.headers["Authorization"] == f"token {INSTALL_TOKEN}"


def test_app_installation_not_found_says_so(
    rs: responses.RequestsMock, rsa_key: tuple[str, Any]
) -> None:
    pem, _ = rsa_key
    rs.get(f"{R}/installation", status=404, json=error("Not Found"))
    forge = GitHubForge(app_client(pem, None, TokenCache()), REPO)
    with pytest.raises(
        ForgeError, match=r"finding the App installation for octo/widgets failed: 404"
    ):
        forge.read_file("main", "a.txt")


def test_installation_tokens_are_cached_until_shortly_before_expiry(
    rs: responses.RequestsMock, rsa_key: tuple[str, Any]
) -> None:
    pem, _ = rsa_key
    expires = datetime(2030, 1, 1, tzinfo=UTC).timestamp()
    now = [expires - 3600]
    cache = TokenCache(clock=lambda: now[0])
    tokens = rs.post(
        f"{API}/app/installations/42/access_tokens", status=201, json=access_token_body()
    )
    rs.get(f"{R}/contents/a.txt", json=contents_json("a.txt", "a"))
    forge = GitHubForge(app_client(pem, 42, cache), REPO)
    forge.read_file("main", "a.txt")
    # A second client sharing the cache (the next webhook) reuses the token too.
    GitHubForge(app_client(pem, 42, cache), REPO).read_file("main", "a.txt")
    assert tokens.call_count == 1
    now[0] = expires - 60  # within the refresh margin: replaced before it can expire mid-job
    forge.read_file("main", "a.txt")
    assert tokens.call_count == 2


def test_github_enterprise_base_url(rs: responses.RequestsMock) -> None:
    ghe = "https://ghe.example:443/api/v3"
    rs.get(f"{ghe}/repos/{REPO}/contents/a.txt", json=contents_json("a.txt", "on prem"))
    forge = GitHubForge(token_client("https://ghe.example/api/v3/"), REPO)
    assert forge.read_file("main", "a.txt") == "on prem"


def test_an_unusable_private_key_is_a_forge_error_without_the_key(
    rs: responses.RequestsMock,
) -> None:
    bad = "-----BEGIN RSA PRIVATE KEY-----\nbm90IGEga2V5\n-----END RSA PRIVATE KEY-----\n"
    forge = GitHubForge(app_client(bad, 42, TokenCache()), REPO)
    with pytest.raises(ForgeError) as caught:
        forge.read_file("main", "a.txt")
    assert "bm90IGEga2V5" not in str(caught.value)
    assert "PRIVATE_KEY" in str(caught.value)


def test_debug_logs_of_pygithub_never_show_the_installation_token(
    rs: responses.RequestsMock, rsa_key: tuple[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    pem, _ = rsa_key
    rs.post(f"{API}/app/installations/42/access_tokens", status=201, json=access_token_body())
    rs.get(f"{R}/contents/a.txt", json=contents_json("a.txt", "a"))
    forge = GitHubForge(app_client(pem, 42, TokenCache()), REPO)
    with caplog.at_level(logging.DEBUG, logger="github"):
        forge.read_file("main", "a.txt")
    assert "access_tokens" in caplog.text  # the request was logged ...
    assert INSTALL_TOKEN not in caplog.text  # ... without the token it returned


def test_redact() -> None:
    assert TOKEN not in redact(f"Authorization: token {TOKEN}")
    assert "s3cret" not in redact("https://codeload.github.com/a/b?token=s3cret&x=1")
    assert redact("nothing secret") == "nothing secret"


# --- fetch_tree ------------------------------------------------------------------------


def tar_gz(*members: tuple[tarfile.TarInfo, bytes | None]) -> bytes:
    buffer = io.BytesIO()
    # GitHub's tarballs start with a pax global header holding the commit.
    with tarfile.open(
        fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT, pax_headers={"comment": SHA}
    ) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def file(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    return info, data


def node(name: str, kind: bytes, link: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, link, 0o755
    return info, None


def repo_tarball(*extra: tuple[tarfile.TarInfo, bytes | None]) -> bytes:
    return tar_gz(
        node(f"{TOP}/", tarfile.DIRTYPE),
        file(f"{TOP}/config.yaml", b"name: demo\n"),
        node(f"{TOP}/models/", tarfile.DIRTYPE),
        file(f"{TOP}/models/orders.sql", b"MODEL (name shop.orders);\nSELECT 1 AS id\n"),
        node(f"{TOP}/models/latest.sql", tarfile.SYMTYPE, "orders.sql"),
        *extra,
    )


def serve(rs: responses.RequestsMock, body: bytes, status: int = 200) -> None:
    rs.get(f"{R}/tarball/{SHA}", status=302, headers={"Location": f"{CODELOAD}?token=AABBCC"})
    rs.get(CODELOAD, status=status, body=body, content_type="application/x-gzip")


def test_fetch_tree_strips_the_top_directory_and_writes_the_files(
    rs: responses.RequestsMock, forge: GitHubForge, tmp_path: Path
) -> None:
    serve(rs, repo_tarball())
    dest = tmp_path / "tree"
    forge.fetch_tree(SHA, dest)
    assert (dest / "config.yaml").read_text() == "name: demo\n"
    assert (dest / "models" / "orders.sql").read_text().startswith("MODEL")
    assert (dest / "models" / "latest.sql").is_symlink()
    assert (dest / "models" / "latest.sql").read_text().startswith("MODEL")
    assert not (dest / TOP).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tree"]  # the download is gone
    # The pre-signed archive link is fetched without our credentials.
    assert "Authorization" not in rs.calls[1].request.headers
    assert rs.calls[0].request.headers["Authorization"] == f"token {TOKEN}"


@pytest.mark.parametrize(
    ("member", "named"),
    [
        (file(f"{TOP}/../evil", b"x"), "../evil"),
        (file("../evil", b"x"), "../evil"),
        (file("/tmp/absolute-evil", b"x"), "/tmp/absolute-evil"),
        (node(f"{TOP}/passwd", tarfile.SYMTYPE, "/etc/passwd"), "passwd"),
        (node(f"{TOP}/models/up", tarfile.SYMTYPE, "../../outside"), "models/up"),
        (node(f"{TOP}/hard", tarfile.LNKTYPE, "/etc/passwd"), "hard"),
        (node(f"{TOP}/dev", tarfile.CHRTYPE), "dev"),
        (file("another-top/file", b"x"), "another-top/file"),
    ],
    ids=[
        "dotdot",
        "dotdot-top",
        "absolute",
        "symlink-abs",
        "symlink-up",
        "hardlink",
        "device",
        "two-tops",
    ],
)
def test_fetch_tree_refuses_unsafe_members_and_writes_nothing(
    rs: responses.RequestsMock,
    forge: GitHubForge,
    tmp_path: Path,
    member: tuple[tarfile.TarInfo, bytes | None],
    named: str,
) -> None:
    serve(rs, repo_tarball(member))
    dest = tmp_path / "tree"
    with pytest.raises(ForgeError, match="unsafe member") as caught:
        forge.fetch_tree(SHA, dest)
    assert named in str(caught.value)
    assert list(dest.iterdir()) == []  # checked before anything is written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tree"]
    assert not (tmp_path / "evil").exists()


def test_fetch_tree_refuses_a_symlink_that_escapes_through_another_symlink(
    rs: responses.RequestsMock, forge: GitHubForge, tmp_path: Path
) -> None:
    # "here/.." looks harmless as text; it leaves the tree once "here" is a link to ".".
    # tarfile's "data" filter resolves it on disk and refuses it.
    serve(
        rs,
        repo_tarball(
            node(f"{TOP}/here", tarfile.SYMTYPE, "."),
            node(f"{TOP}/escape", tarfile.SYMTYPE, "here/.."),
            file(f"{TOP}/escape/evil", b"x"),
        ),
    )
    dest = tmp_path / "tree"
    with pytest.raises(ForgeError, match=r"unsafe member .escape.: .*outside the destination"):
        forge.fetch_tree(SHA, dest)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tree"]


def test_fetch_tree_enforces_the_limit_on_the_download(
    rs: responses.RequestsMock, tmp_path: Path
) -> None:
    big = repo_tarball(file(f"{TOP}/noise.bin", bytes(range(256)) * 400))
    serve(rs, big)
    forge = GitHubForge(token_client(), REPO, workdir_limit_bytes=len(big) - 1)
    with pytest.raises(ForgeError, match=r"archive of .* is larger than the limit"):
        forge.fetch_tree(SHA, tmp_path / "tree")


def test_fetch_tree_enforces_the_limit_on_the_extracted_size(
    rs: responses.RequestsMock, tmp_path: Path
) -> None:
    bomb = repo_tarball(file(f"{TOP}/zeros.bin", b"\0" * 2_000_000))
    assert len(bomb) < 20_000
    serve(rs, bomb)
    forge = GitHubForge(token_client(), REPO, workdir_limit_bytes=1_000_000)
    with pytest.raises(
        ForgeError,
        match=r"files of .* are over a limit .*: the files reach 2,000,052 bytes at .zeros.bin.; the limit is 1,000,000 bytes of all files together \(SLUICE_TREE_TOTAL_BYTES",
    ):
        forge.fetch_tree(SHA, tmp_path / "tree")
    assert list((tmp_path / "tree").iterdir()) == []


def test_fetch_tree_download_failure_does_not_show_the_signed_link(
    rs: responses.RequestsMock, forge: GitHubForge, tmp_path: Path
) -> None:
    serve(rs, b"gone", status=404)
    with pytest.raises(ForgeError, match=r"downloading the archive of .* failed: 404") as caught:
        forge.fetch_tree(SHA, tmp_path / "tree")
    assert "AABBCC" not in str(caught.value)


def test_fetch_tree_unknown_commit(
    rs: responses.RequestsMock, forge: GitHubForge, tmp_path: Path
) -> None:
    rs.get(f"{R}/tarball/{SHA}", status=404, json=error("Not Found"))
    with pytest.raises(ForgeError, match=f"asking for the archive of {SHA} failed: 404 Not Found"):
        forge.fetch_tree(SHA, tmp_path / "tree")


# --- read_file -------------------------------------------------------------------------


def test_read_file_found_and_missing(rs: responses.RequestsMock, forge: GitHubForge) -> None:
    rs.get(f"{R}/contents/models/a%20b.sql", json=contents_json("models/a b.sql", "SELECT 1\n"))
    rs.get(f"{R}/contents/nope.yaml", status=404, json=error("Not Found"))
    assert forge.read_file(SHA, "models/a b.sql") == "SELECT 1\n"
    assert forge.read_file(SHA, "nope.yaml") is None


# --- pull requests -----------------------------------------------------------------------


def pull_json(head_repo: dict[str, Any] | None, **over: Any) -> dict[str, Any]:
    base_repo = repo_json(REPO, 100)
    return {
        "id": 1, "node_id": "PR_kwDO1", "number": 7, "state": "open", "locked": False,
        "title": "Add orders model", "user": user("alice", uid=2), "body": None,
        "draft": False, "merged": False, "mergeable": True,
        "url": f"https://api.github.com/repos/{REPO}/pulls/7",
        "html_url": f"https://github.com/{REPO}/pull/7",
        "head": {"label": "alice:feature", "ref": "feature", "sha": SHA, "user": user("alice", uid=2),
                 "repo": head_repo},
        "base": {"label": "octo:main", "ref": "main", "sha": "b" * 40, "user": user("octo", "Organization", 101),
                 "repo": base_repo},
        **over,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("head_repo", "fork"),
    [
        (repo_json(REPO, 100), False),
        ({**repo_json("alice/widgets", 200), "fork": True}, True),
        (None, True),  # the fork was deleted
    ],
    ids=["same-repo", "fork", "deleted-fork"],
)
def test_pull_request(
    rs: responses.RequestsMock, forge: GitHubForge, head_repo: Any, fork: bool
) -> None:
    rs.get(f"{R}/pulls/7", json=pull_json(head_repo))
    pr = forge.pull_request(7)
    assert (pr.number, pr.head_sha, pr.head_ref, pr.base_ref, pr.base_sha) == (
        7, SHA, "feature", "main", "b" * 40,
    )  # fmt: skip
    assert (pr.author, pr.draft, pr.open, pr.merged, pr.title) == (
        "alice", False, True, False, "Add orders model",
    )  # fmt: skip
    assert pr.fork is fork


def test_pull_request_merged(rs: responses.RequestsMock, forge: GitHubForge) -> None:
    rs.get(f"{R}/pulls/7", json=pull_json(repo_json(REPO, 100), state="closed", merged=True))
    pr = forge.pull_request(7)
    assert (pr.open, pr.merged) == (False, True)


def test_reviews_mapping(rs: responses.RequestsMock, forge: GitHubForge) -> None:
    def review(rid: int, login: str, state: str, at: str | None) -> dict[str, Any]:
        return {
            "id": rid, "node_id": f"PRR_{rid}", "user": user(login, uid=rid), "body": "",
            "state": state, "commit_id": SHA, "submitted_at": at, "author_association": "MEMBER",
            "html_url": f"https://github.com/{REPO}/pull/7#pullrequestreview-{rid}",
            "pull_request_url": f"https://api.github.com/repos/{REPO}/pulls/7",
        }  # fmt: skip

    rs.get(
        f"{R}/pulls/7/reviews",
        json=[
            review(80, "bob", "CHANGES_REQUESTED", "2026-03-01T10:00:00Z"),
            review(81, "bob", "approved", "2026-03-02T11:30:00Z"),
            review(82, "carol", "PENDING", None),
        ],
    )
    reviews = forge.reviews(7)
    assert [(r.id, r.user, r.state, r.commit_sha) for r in reviews] == [
        (80, "bob", "CHANGES_REQUESTED", SHA),
        (81, "bob", "APPROVED", SHA),
        (82, "carol", "PENDING", SHA),
    ]
    assert reviews[1].submitted_at is not None
    assert datetime.fromisoformat(reviews[1].submitted_at) == datetime(
        2026, 3, 2, 11, 30, tzinfo=UTC
    )
    assert reviews[2].submitted_at is None


def test_reviews_and_a_pull_request_name_people_by_account_id(
    rs: responses.RequestsMock, forge: GitHubForge
) -> None:
    # The gate tells people apart by GitHub's account id: a login is renamed at will.
    def review(rid: int, person: dict[str, Any] | None) -> dict[str, Any]:
        return {
            "id": rid, "node_id": f"PRR_{rid}", "user": person, "body": "", "state": "APPROVED",
            "commit_id": SHA, "submitted_at": "2026-03-02T11:30:00Z",
            "author_association": "MEMBER",
        }  # fmt: skip

    rs.get(
        f"{R}/pulls/7/reviews",
        json=[
            review(81, user("bobx", uid=583231)),  # bob, renamed since: the login of now
            review(82, None),  # a deleted account's review names no user
        ],
    )
    assert [(r.user, r.user_id) for r in forge.reviews(7)] == [("bobx", 583231), ("ghost", None)]
    rs.get(f"{R}/pulls/7", json=pull_json(repo_json(REPO, 100)))
    assert (forge.pull_request(7).author, forge.pull_request(7).author_id) == ("alice", 2)


def test_permission(rs: responses.RequestsMock, forge: GitHubForge) -> None:
    body = {"permission": "write", "role_name": "maintain", "user": user("bob")}
    rs.get(f"{R}/collaborators/bob/permission", json=body)
    rs.get(f"{R}/collaborators/mallory/permission", status=404, json=error("Not Found"))
    assert forge.permission("bob") == "maintain"
    assert forge.permission("mallory") == "none"


def test_permission_of_a_custom_role_falls_back_to_its_base_permission(
    rs: responses.RequestsMock, forge: GitHubForge
) -> None:
    body = {"permission": "write", "role_name": "data-reviewer", "user": user("bob")}
    rs.get(f"{R}/collaborators/bob/permission", json=body)
    assert forge.permission("bob") == "write"
    assert len(rs.calls) == 2


# --- comments ----------------------------------------------------------------------------

MARKER = "<!-- sluice:plan project=. -->"
# GitHub's Link header names pages without the port (PyGithub adds it when it asks).
PAGE2 = "https://api.github.com/repositories/100/issues/7/comments?per_page=100&page=2"


def test_upsert_comment_creates_once_then_edits_the_same_comment(
    rs: responses.RequestsMock, forge: GitHubForge
) -> None:
    me = user("sluice-bot", uid=900)
    comments = f"{R}/issues/7/comments"
    rs.get(f"{API}/user", json=me)
    rs.get(comments, json=[comment_json(1, "LGTM", user("bob"))])
    created = rs.post(comments, status=201, json=comment_json(1001, f"{MARKER}\nplan v1", me))

    forge.upsert_comment(7, MARKER, f"{MARKER}\nplan v1")
    assert created.call_count == 1
    assert sent(rs.calls[-1]) == {"body": f"{MARKER}\nplan v1"}

    # Next push: the list now holds ours (on the second page) and a human quoting the marker.
    rs.replace(
        "GET",
        comments,
        json=[comment_json(1, f"> {MARKER}\nquoted", user("bob")),
              comment_json(2, "x", user("carol", uid=3))],
        headers={"Link": f'<{PAGE2}>; rel="next", <{PAGE2}>; rel="last"'},
        match=[matchers.query_param_matcher({"per_page": "100"})],
    )  # fmt: skip
    rs.get(
        f"{API}/repositories/100/issues/7/comments",
        json=[comment_json(1001, f"{MARKER}\nplan v1", me)],
        match=[matchers.query_param_matcher({"per_page": "100", "page": "2"})],
    )
    edited = rs.patch(
        f"{R}/issues/comments/1001", json=comment_json(1001, f"{MARKER}\nplan v2", me)
    )
    forge.upsert_comment(7, MARKER, f"{MARKER}\nplan v2")
    assert edited.call_count == 1
    assert sent(rs.calls[-1]) == {"body": f"{MARKER}\nplan v2"}
    assert created.call_count == 1
    assert [c.request.method for c in rs.calls].count("GET") == 4  # /user asked once


def test_upsert_comment_does_nothing_when_unchanged(
    rs: responses.RequestsMock, forge: GitHubForge
) -> None:
    me = user("sluice-bot", uid=900)
    rs.get(f"{API}/user", json=me)
    rs.get(f"{R}/issues/7/comments", json=[comment_json(1001, f"{MARKER}\nsame", me)])
    # GitHub's time it came to read so: its last update.
    assert forge.upsert_comment(7, MARKER, f"{MARKER}\nsame") == Posted(
        1001, created_ms("2026-03-01T10:00:00Z")
    )
    assert [c.request.method for c in rs.calls] == ["GET", "GET"]


def test_upsert_comment_says_when_github_wrote_it_and_comment_reads_it_back(
    rs: responses.RequestsMock, forge: GitHubForge
) -> None:
    # What the gate compares a review's submitted_at with: GitHub's time of the edit (its
    # answer's updated_at), never the service's clock.
    me = user("sluice-bot", uid=900)
    rs.get(f"{API}/user", json=me)
    rs.get(f"{R}/issues/7/comments", json=[comment_json(1001, f"{MARKER}\nold", me)])
    answer = {**comment_json(1001, f"{MARKER}\nnew", me), "updated_at": "2026-03-02T08:30:05Z"}
    rs.patch(f"{R}/issues/comments/1001", json=answer)
    assert forge.upsert_comment(7, MARKER, f"{MARKER}\nnew") == Posted(
        1001, created_ms("2026-03-02T08:30:05Z")
    )
    rs.get(f"{R}/issues/comments/1001", json=answer)
    found = forge.comment(7, 1001)
    assert found is not None and found.own
    assert found.updated_ms == created_ms("2026-03-02T08:30:05Z")
    rs.get(f"{R}/issues/comments/1002", json=comment_json(1002, f"{MARKER}\ncopy", user("eve")))
    theirs = forge.comment(7, 1002)
    assert theirs is not None and not theirs.own


def test_own_comments_reads_back_the_comment_upsert_comment_edits(
    rs: responses.RequestsMock, forge: GitHubForge
) -> None:
    # The gate's read-back (comment_guard): the comments written by our own login, with
    # GitHub's updated_at; someone else's copy is never ours.
    me = user("sluice-bot", uid=900)
    rs.get(f"{API}/user", json=me)
    ours = {**comment_json(1001, f"{MARKER}\nplan", me), "updated_at": "2026-03-02T08:30:05Z"}
    copy = comment_json(1000, f"{MARKER}\ncopy", user("eve"))
    rs.get(f"{R}/issues/7/comments", json=[copy, ours])
    [found] = forge.own_comments(7)
    assert found.own and found.body == f"{MARKER}\nplan" and found.comment_id == 1001
    assert found.author == "sluice-bot" and found.author_id == 900
    assert found.updated_ms == created_ms("2026-03-02T08:30:05Z")
    rs.replace(rs.GET, f"{R}/issues/7/comments", json=[copy])  # ours deleted
    assert forge.own_comments(7) == []


def test_upsert_comment_with_an_actions_token_matches_github_actions_bot(
    rs: responses.RequestsMock, forge: GitHubForge
) -> None:
    # An Actions GITHUB_TOKEN cannot read /user: its comments are github-actions[bot]'s
    # (an App's are <slug>[bot]'s: tests/security/test_sticky_comment.py).
    rs.get(f"{API}/user", status=403, json=error("Resource not accessible by integration"))
    bot = user("github-actions[bot]", "Bot", 41898282)
    rs.get(
        f"{R}/issues/7/comments",
        json=[
            comment_json(5, f"{MARKER} quoted", user("bob")),
            comment_json(6, f"{MARKER}\nold", bot),
        ],
    )
    edited = rs.patch(f"{R}/issues/comments/6", json=comment_json(6, f"{MARKER}\nnew", bot))
    forge.upsert_comment(7, MARKER, f"{MARKER}\nnew")
    assert edited.call_count == 1


def test_upsert_comment_needs_the_marker_in_the_body(forge: GitHubForge) -> None:
    with pytest.raises(ValueError, match="marker"):
        forge.upsert_comment(7, MARKER, "no marker here")


def test_reply_and_react(rs: responses.RequestsMock, forge: GitHubForge) -> None:
    me = user("sluice-bot", uid=900)
    rs.post(f"{R}/issues/7/comments", status=201, json=comment_json(1002, "Applied.", me))
    rs.post(
        f"{R}/issues/comments/555/reactions",
        status=201,
        json={"id": 1, "node_id": "REA_1", "user": me, "content": "rocket",
              "created_at": "2026-03-01T10:00:00Z"},
    )  # fmt: skip
    rs.post(f"{R}/issues/comments/556/reactions", status=404,
            json={"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})  # fmt: skip
    forge.reply(7, "Applied.")
    assert forge.react(7, 555, "rocket") is True
    assert sent(rs.calls[0]) == {"body": "Applied."}
    assert sent(rs.calls[1]) == {"content": "rocket"}
    assert forge.react(7, 556, "+1") is False  # the comment was deleted


def test_a_post_answered_with_502_is_not_retried(
    rs: responses.RequestsMock, forge: GitHubForge
) -> None:
    # GitHub may have created the comment before the proxy failed: never post it twice.
    posted = rs.post(f"{R}/issues/7/comments", status=502, json=error("Server Error"))
    with pytest.raises(ForgeError, match="commenting on pull request #7 failed: 502"):
        forge.reply(7, "hello")
    assert posted.call_count == 1


# --- against the stateful fake: reviews, roles, files, teams, refs, merge, deployments ------


@pytest.fixture
def fake() -> Iterator[tuple[FakeGitHub, GitHubForge]]:
    github = FakeGitHub(repo=REPO)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        github.install(mock)
        yield github, GitHubForge(token_client(), REPO)


def asked(github: FakeGitHub, method: str, fragment: str) -> int:
    return sum(1 for m, url in github.requests if m == method and fragment in url)


def test_the_fake_serves_pulls_reviews_roles_files_and_reactions(
    fake: tuple[FakeGitHub, GitHubForge],
) -> None:
    github, forge = fake
    github.add_pull(7, SHA, author="alice", draft=True, fork=True, head_ref="orders")
    github.add_pull(8, SHA, state="closed", merged=True, merge_sha="c" * 40)
    first = github.add_review(7, "bob", "CHANGES_REQUESTED", "a" * 40)
    github.add_review(7, "bob", "APPROVED", SHA)
    github.add_review(9, "carol", "APPROVED", SHA)  # another pull request
    github.permissions.update({"bob": "maintain", "carol": "data-reviewer"})
    github.files[(SHA, "config.yaml")] = "name: demo\n"
    github.files[("main", "models/a b.sql")] = "SELECT 1\n"

    pr = forge.pull_request(7)
    assert (pr.draft, pr.fork, pr.open, pr.merged, pr.head_ref) == (
        True,
        True,
        True,
        False,
        "orders",
    )
    assert (forge.pull_request(8).open, forge.pull_request(8).merged) == (False, True)
    reviews = forge.reviews(7)
    assert [(r.id, r.user, r.state, r.commit_sha) for r in reviews] == [
        (first, "bob", "CHANGES_REQUESTED", "a" * 40),
        (first + 1, "bob", "APPROVED", SHA),
    ]
    assert reviews[0].submitted_at is not None and reviews[0].submitted_at < str(
        reviews[1].submitted_at
    )
    assert forge.reviews(99) == []
    assert forge.permission("bob") == "maintain"
    assert forge.permission("carol") == "read"  # a custom role: its base permission
    assert forge.permission("mallory") == "none"
    assert forge.read_file(SHA, "config.yaml") == "name: demo\n"
    assert forge.read_file("main", "models/a b.sql") == "SELECT 1\n"
    assert forge.read_file("main", "config.yaml") is None
    forge.react(7, 501, "eyes")
    assert github.reactions == [{"comment": 501, "content": "eyes"}]


def test_team_members_are_read_once_per_forge(
    fake: tuple[FakeGitHub, GitHubForge], caplog: pytest.LogCaptureFixture
) -> None:
    github, forge = fake
    github.teams["octo/data-eng"] = ["bob", "carol"]
    assert forge.team_members("octo/data-eng") == {"bob", "carol"}
    assert forge.team_members("@octo/data-eng") == {"bob", "carol"}
    assert forge.team_members("octo/data-eng") == {"bob", "carol"}
    assert asked(github, "GET", "/orgs/octo/teams/data-eng/members") == 2  # once per spelling
    with caplog.at_level(logging.INFO, logger="sluice.bot.forge.github"):
        assert forge.team_members("octo/ghosts") == frozenset()
        assert forge.team_members("not-a-team") == frozenset()
    assert "octo/ghosts does not exist" in caplog.text
    assert "'not-a-team' is not a team name" in caplog.text
    assert asked(github, "GET", "/orgs/") == 3  # the malformed name asked nothing


def test_team_members_follow_pages(rs: responses.RequestsMock, forge: GitHubForge) -> None:
    page2 = "https://api.github.com/organizations/1/team/5/members?per_page=100&page=2"
    rs.get(
        f"{API}/orgs/octo/teams/data-eng/members",
        json=[user("bob", uid=2)],
        headers={"Link": f'<{page2}>; rel="next", <{page2}>; rel="last"'},
        match=[matchers.query_param_matcher({"per_page": "100"})],
    )
    rs.get(
        f"{API}/organizations/1/team/5/members",
        json=[user("carol", uid=3)],
        match=[matchers.query_param_matcher({"per_page": "100", "page": "2"})],
    )
    assert forge.team_members("octo/data-eng") == {"bob", "carol"}


def test_team_members_forbidden_is_empty_and_other_failures_raise(
    rs: responses.RequestsMock, forge: GitHubForge, caplog: pytest.LogCaptureFixture
) -> None:
    rs.get(
        f"{API}/orgs/octo/teams/data-eng/members",
        status=403,
        json=error("Resource not accessible by integration"),
    )
    rs.get(f"{API}/orgs/octo/teams/admins/members", status=401, json=error("Bad credentials"))
    with caplog.at_level(logging.WARNING, logger="sluice.bot.forge.github"):
        assert forge.team_members("octo/data-eng") == frozenset()
    assert "Members: read" in caplog.text
    with pytest.raises(ForgeError, match=r"members of the team octo/admins failed: 401 Bad"):
        forge.team_members("octo/admins")


def test_commit_of_branches_and_tags(fake: tuple[FakeGitHub, GitHubForge]) -> None:
    github, forge = fake
    main, v1, v2 = "a" * 40, "b" * 40, "c" * 40
    github.refs["main"] = main
    github.refs["release/1.x"] = v1
    github.add_tag("v1", v1)
    tag_object = github.add_tag("v2", v2, annotated=True)
    assert tag_object != v2
    assert forge.commit_of("main") == main
    assert forge.commit_of("refs/heads/main") == main
    assert forge.commit_of("heads/release/1.x") == v1
    assert forge.commit_of("v1") == v1  # not a branch: the tag
    assert forge.commit_of("tags/v1") == v1
    assert forge.commit_of("tags/v2") == v2  # annotated: peeled to its commit
    assert forge.commit_of("refs/tags/v2") == v2
    assert forge.commit_of("v3") is None
    assert forge.commit_of("tags/main") is None
    assert asked(github, "GET", f"/git/tags/{tag_object}") == 2


def test_commit_of_a_branch_wins_over_a_tag_of_the_same_name(
    fake: tuple[FakeGitHub, GitHubForge],
) -> None:
    github, forge = fake
    github.refs["main"] = "a" * 40
    github.add_tag("main", "b" * 40)
    assert forge.commit_of("main") == "a" * 40
    assert forge.commit_of("tags/main") == "b" * 40


def test_commit_of_a_tag_of_a_tree_is_none_and_failures_raise(
    rs: responses.RequestsMock, forge: GitHubForge
) -> None:
    tree = {"type": "tree", "sha": "d" * 40, "url": f"https://api.github.com/repos/{REPO}/x"}
    rs.get(f"{R}/git/ref/tags/tree", json={"ref": "refs/tags/tree", "object": tree})
    rs.get(f"{R}/git/ref/heads/main", status=401, json=error("Bad credentials"))
    assert forge.commit_of("tags/tree") is None
    with pytest.raises(ForgeError, match="resolving main failed: 401 Bad credentials"):
        forge.commit_of("main")


def test_on_branch(fake: tuple[FakeGitHub, GitHubForge]) -> None:
    github, forge = fake
    old, tip, elsewhere, pr_head = "1" * 40, "2" * 40, "3" * 40, "4" * 40
    github.refs["main"] = tip
    github.branch_commits["main"] = {old}
    github.branch_commits[pr_head] = {tip}  # a pull request branched off main's tip
    assert forge.on_branch(tip, "main")  # identical
    assert forge.on_branch(old, "main")  # behind
    assert not forge.on_branch(elsewhere, "main")  # diverged
    assert not forge.on_branch(pr_head, "main")  # ahead
    assert forge.on_branch(tip, pr_head)  # a commit as the branch
    assert not forge.on_branch(tip, "gone")  # no such branch: 404
    assert asked(github, "GET", f"/compare/main...{old}") == 1


def test_on_branch_reads_the_comparison_status(
    rs: responses.RequestsMock, forge: GitHubForge
) -> None:
    for status, head in (("behind", "1"), ("identical", "2"), ("ahead", "3"), ("diverged", "4")):
        comparison = {"status": status, "ahead_by": 0, "behind_by": 1, "commits": []}
        rs.get(f"{R}/compare/main...{head * 40}", json=comparison)
    assert [forge.on_branch(c * 40, "main") for c in "1234"] == [True, True, False, False]


def test_merge_returns_the_merge_commit_and_moves_the_base(
    fake: tuple[FakeGitHub, GitHubForge],
) -> None:
    github, forge = fake
    github.refs["main"] = "a" * 40
    github.add_pull(7, SHA, merge_sha="e" * 40)
    assert forge.merge(7, "squash", SHA) == "e" * 40
    assert github.merges == [{"number": 7, "method": "squash", "sha": SHA, "merge_sha": "e" * 40}]
    pr = forge.pull_request(7)
    assert (pr.open, pr.merged) == (False, True)
    assert forge.commit_of("main") == "e" * 40
    assert forge.on_branch(SHA, "main")


def test_merge_refused_when_the_head_moved_or_not_mergeable(
    fake: tuple[FakeGitHub, GitHubForge],
) -> None:
    github, forge = fake
    github.add_pull(7, SHA)
    github.add_pull(8, SHA, mergeable=False)
    with pytest.raises(ForgeError, match="failed: 409 Head branch was modified") as caught:
        forge.merge(7, "merge", "f" * 40)
    assert "pull request #7 (merge)" in str(caught.value)
    with pytest.raises(ForgeError, match="failed: 405 Pull Request is not mergeable"):
        forge.merge(8, "merge", SHA)
    with pytest.raises(ForgeError, match="failed: 404 Not Found"):
        forge.merge(9, "merge", SHA)
    assert github.merges == []
    assert asked(github, "PUT", "/pulls/7/merge") == 1  # a 409 is not retried


def test_merge_sends_the_method_and_the_expected_head(
    rs: responses.RequestsMock, forge: GitHubForge
) -> None:
    merged = rs.put(
        f"{R}/pulls/7/merge",
        json={"sha": "e" * 40, "merged": True, "message": "Pull Request successfully merged"},
    )
    assert forge.merge(7, "rebase", SHA) == "e" * 40
    assert merged.call_count == 1
    assert sent(rs.calls[0]) == {"merge_method": "rebase", "sha": SHA}


def test_deployments_are_recorded_with_their_statuses(
    fake: tuple[FakeGitHub, GitHubForge],
) -> None:
    github, forge = fake
    deployment = forge.start_deployment(SHA, "prod", "Sluice: promote #7")
    assert isinstance(deployment, int)
    forge.deployment_status(deployment, "in_progress", "Promoting #7")
    forge.deployment_status(deployment, "success", "Promoted by virtual update")
    assert forge.start_deployment(SHA, "staging", "x") is not None
    first, second = github.deployments
    assert first == {
        "id": deployment, "ref": SHA, "environment": "prod", "description": "Sluice: promote #7",
        "auto_merge": False, "required_contexts": [], "production_environment": True,
        "statuses": [{"state": "in_progress", "description": "Promoting #7"},
                     {"state": "success", "description": "Promoted by virtual update"}],
    }  # fmt: skip
    assert second["production_environment"] is False and second["statuses"] == []


def test_deployments_refused_with_403_are_skipped_with_a_warning(
    fake: tuple[FakeGitHub, GitHubForge], caplog: pytest.LogCaptureFixture
) -> None:
    github, forge = fake
    github.deployments_forbidden = True
    with caplog.at_level(logging.WARNING, logger="sluice.bot.forge.github"):
        assert forge.start_deployment(SHA, "prod", "Sluice: promote #7") is None
        forge.deployment_status(1001, "success", "done")
    assert "promoting without a deployment record" in caplog.text
    assert "deployment 1001 may not be updated" in caplog.text
    assert github.deployments == []
    assert asked(github, "POST", "/deployments") == 2  # a plain 403 is not retried


def test_deployment_failures_other_than_403_raise(
    rs: responses.RequestsMock, forge: GitHubForge
) -> None:
    invalid = {"resource": "Deployment", "code": "custom", "message": "bad ref"}
    rs.post(f"{R}/deployments", status=422, json={"message": "Invalid", "errors": [invalid]})
    rs.post(f"{R}/deployments/5/statuses", status=404, json=error("Not Found"))
    with pytest.raises(ForgeError, match=r"deployment of .* to prod failed: 422 .*bad ref"):
        forge.start_deployment(SHA, "prod", "x")
    with pytest.raises(ForgeError, match="setting deployment 5 to success failed: 404"):
        forge.deployment_status(5, "success", "x")


def test_the_fake_keeps_its_state_in_its_file(tmp_path: Path) -> None:
    state = tmp_path / "github.json"
    github = FakeGitHub(state_file=state)
    github.add_pull(7, SHA, draft=True)
    github.add_review(7, "bob", "APPROVED", SHA)
    github.files[("main", "config.yaml")] = "x: 1\n"
    github.branch_commits["main"] = {SHA}
    github.add_tag("v1", SHA, annotated=True)
    github.permissions["bob"] = "write"
    github.teams["octo/t"] = ["bob"]
    github.merges.append({"number": 7})
    github.deployments.append({"id": 1, "statuses": []})
    github.reactions.append({"comment": 1, "content": "eyes"})
    github.save()
    again = FakeGitHub(state_file=state)
    for name in ("pulls", "reviews", "files", "branch_commits", "refs", "tag_objects",
                 "permissions", "teams", "merges", "deployments", "reactions"):  # fmt: skip
        assert getattr(again, name) == getattr(github, name), name


# --- checks ------------------------------------------------------------------------------


def checks_list(*runs: dict[str, Any]) -> dict[str, Any]:
    return {"total_count": len(runs), "check_runs": list(runs)}


CHECK = Check(
    name="sluice/pr-environment",
    status="completed",
    conclusion="action_required",
    title="2 models changed",
    summary="Plan for `pr_7`",
    text="details",
    actions=(CheckAction("Apply", "Build the PR environment", "apply"),),
)


def test_set_check_creates_then_updates_by_its_id(
    rs: responses.RequestsMock, forge: GitHubForge
) -> None:
    created = rs.post(f"{R}/check-runs", status=201, json=check_json(555, CHECK.name))
    assert forge.set_check(SHA, CHECK) == 555  # made: no lookup by name
    assert created.call_count == 1 and len(rs.calls) == 1
    assert sent(rs.calls[-1]) == {
        "name": CHECK.name,
        "head_sha": SHA,
        "status": "completed",
        "conclusion": "action_required",
        "output": {"title": "2 models changed", "summary": "Plan for `pr_7`", "text": "details"},
        "actions": [
            {"label": "Apply", "description": "Build the PR environment", "identifier": "apply"}
        ],
    }

    # The same forge remembers the run it created: the update edits it.
    edited = rs.patch(f"{R}/check-runs/555", json=check_json(555, CHECK.name, status="in_progress"))
    assert forge.set_check(SHA, Check(CHECK.name, "in_progress", "Building", "2 models")) == 555
    assert edited.call_count == 1 and len(rs.calls) == 2
    assert created.call_count == 1
    assert sent(rs.calls[-1]) == {
        "status": "in_progress",
        "output": {"title": "Building", "summary": "2 models"},
        "actions": [],
    }

    # A fresh forge (the next job) is given the id the flow recorded, and edits that run
    # alone: no request looks runs up by name.
    forge._check_runs.clear()
    done = Check(CHECK.name, "completed", "Built", "2 models", conclusion="success")
    assert forge.set_check(SHA, done, run_id=555) == 555
    assert edited.call_count == 2 and created.call_count == 1 and len(rs.calls) == 3
    assert not [c for c in rs.calls if c.request.method == "GET"]


def test_set_check_never_edits_another_apps_run_of_the_same_name(
    rs: responses.RequestsMock, forge: GitHubForge
) -> None:
    """Another App's run named like Sluice's check is on the commit (a workflow's, under
    the Action): Sluice neither edits it nor takes a 403 of it for a token that cannot
    write check runs; it makes its own run."""
    rs.assert_all_requests_are_fired = False  # what must not be asked is answered, counted
    foreign = check_json(77, CHECK.name, status="completed", conclusion="success")
    foreign["app"] = {"id": 15368, "slug": "github-actions", "name": "GitHub Actions"}
    rs.get(f"{R}/commits/{SHA}/check-runs", json=checks_list(foreign))
    theirs = rs.patch(f"{R}/check-runs/77", status=403, json=error("Invalid app_id"))
    created = rs.post(f"{R}/check-runs", status=201, json=check_json(78, CHECK.name))
    status = rs.post(f"{R}/statuses/{SHA}", status=201, json={"id": 1, "state": "failure"})
    assert forge.set_check(SHA, CHECK) == 78
    assert (theirs.call_count, created.call_count, status.call_count) == (0, 1, 0)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (403, "Invalid app_id `15368` - check run can only be modified by its App"),
        (404, "Not Found"),
    ],
)
def test_a_recorded_run_refused_or_gone_is_made_again_never_a_status(
    rs: responses.RequestsMock, forge: GitHubForge, answer: int, message: str
) -> None:
    """The run recorded was made by another App (the Action's token, before the service ran
    as an App) or is gone: a new run holds the check; a 403 there is no proof that check
    runs cannot be written."""
    rs.assert_all_requests_are_fired = False  # the status must not be asked: counted
    old = rs.patch(f"{R}/check-runs/555", status=answer, json=error(message))
    created = rs.post(f"{R}/check-runs", status=201, json=check_json(556, CHECK.name))
    status = rs.post(f"{R}/statuses/{SHA}", status=201, json={"id": 1, "state": "failure"})
    assert forge.set_check(SHA, CHECK, run_id=555) == 556
    assert (old.call_count, created.call_count, status.call_count) == (1, 1, 0)
    edited = rs.patch(f"{R}/check-runs/556", json=check_json(556, CHECK.name))
    assert forge.set_check(SHA, CHECK, run_id=555) == 556  # this job's run from then on
    assert (old.call_count, edited.call_count) == (1, 1)


def test_check_output_is_truncated_with_balanced_fences(
    rs: responses.RequestsMock, forge: GitHubForge
) -> None:
    rows = "\n".join(f"| {i} | {'x' * 40} |" for i in range(3000))
    summary = f"## Plan\n\n```sql\n{rows}\n```\n\nafter the fence\n"
    assert len(summary) > 65535
    rs.post(f"{R}/check-runs", status=201, json=check_json(555, CHECK.name))
    forge.set_check(SHA, Check(CHECK.name, "completed", "Plan", summary, conclusion="success"))
    posted = sent(rs.calls[-1])["output"]["summary"]
    assert len(posted) <= 65535
    assert posted.count("```") % 2 == 0
    assert re.search(r"\n```\n\n\.\.\. \(truncated: \d+ more characters\)\n$", posted)
    dropped = int(re.findall(r"truncated: (\d+)", posted)[0])
    kept = posted[: posted.rindex("```\n")]
    assert len(kept) + dropped == len(summary)
    assert summary.startswith(kept)


def test_set_check_falls_back_to_a_commit_status_when_check_runs_are_refused(
    rs: responses.RequestsMock, forge: GitHubForge
) -> None:
    refused = rs.post(
        f"{R}/check-runs",
        status=403,
        json=error("Resource not accessible by personal access token"),
    )
    statuses = rs.post(
        f"{R}/statuses/{SHA}",
        status=201,
        json={"id": 1, "node_id": "SC_1", "state": "failure", "context": CHECK.name,
              "description": CHECK.title, "target_url": None, "creator": user("alice"),
              "url": f"https://api.github.com/repos/{REPO}/statuses/{SHA}",
              "created_at": "2026-03-01T10:00:00Z", "updated_at": "2026-03-01T10:00:00Z"},
    )  # fmt: skip
    forge.set_check(SHA, CHECK)
    assert sent(rs.calls[-1]) == {
        "state": "failure",
        "description": "2 models changed",
        "context": "sluice/pr-environment",
    }
    # Remembered: the next check goes straight to a status.
    long_title = "t" * 200
    forge.set_check(SHA, Check("sluice/tests", "in_progress", long_title, "running"))
    assert refused.call_count == 1
    assert statuses.call_count == 2
    body = sent(rs.calls[-1])
    assert body["state"] == "pending"
    assert len(body["description"]) == 140


@pytest.mark.parametrize(
    ("status", "conclusion", "state"),
    [
        ("queued", None, "pending"),
        ("in_progress", None, "pending"),
        ("completed", "success", "success"),
        ("completed", "neutral", "success"),
        ("completed", "skipped", "success"),
        ("completed", "failure", "failure"),
        ("completed", "cancelled", "failure"),
        ("completed", "action_required", "failure"),
    ],
)
def test_status_states(
    rs: responses.RequestsMock, forge: GitHubForge, status: str, conclusion: str | None, state: str
) -> None:
    forge._statuses_only = True
    rs.post(f"{R}/statuses/{SHA}", status=201, json={"id": 1, "state": state, "context": "c"})
    forge.set_check(SHA, Check("c", status, "t", "s", conclusion=conclusion))
    assert sent(rs.calls[0])["state"] == state


# --- fit (the truncation) -------------------------------------------------------------------


def test_fit_leaves_short_text_alone() -> None:
    assert fit("short\n```\ncode\n", 100) == "short\n```\ncode\n"


def test_fit_cuts_at_a_line_and_closes_fences_and_details() -> None:
    text = (
        "intro\n<details><summary>More</summary>\n\n~~~~text\n"
        + "line\n" * 500
        + "~~~~\n</details>\n"
    )
    out = fit(text, 400)
    assert len(out) <= 400
    body, note = out.rsplit("\n...", 1)
    assert body.endswith("line\n~~~~\n</details>\n")
    assert note.startswith(" (truncated: ")


def test_fit_counts_astral_characters_as_github_does() -> None:
    out = fit("\U0001f600" * 300 + "\n" + "\U0001f600" * 300, 400)
    assert len(out.encode("utf-16-le")) // 2 <= 400


# --- errors --------------------------------------------------------------------------------


def test_a_server_error_is_a_forge_error_with_the_status_and_no_token(
    rs: responses.RequestsMock, forge: GitHubForge
) -> None:
    failing = rs.get(f"{R}/pulls/7", status=500, json=error("Server Error"))
    with pytest.raises(ForgeError) as caught:
        forge.pull_request(7)
    text = str(caught.value)
    assert text == "GitHub: reading pull request #7 failed: 500 Server Error"
    assert TOKEN not in text
    assert caught.value.__cause__ is None or TOKEN not in str(caught.value.__cause__)
    assert failing.call_count == 4  # three retries of a GET, then the error


def test_a_validation_error_carries_github_details(
    rs: responses.RequestsMock, forge: GitHubForge
) -> None:
    rs.post(
        f"{R}/issues/7/comments",
        status=422,
        json={"message": "Validation Failed",
              "errors": [{"resource": "IssueComment", "code": "custom", "field": "body",
                          "message": "body is too long (maximum is 65536 characters)"}]},
    )  # fmt: skip
    with pytest.raises(ForgeError, match=r"422 Validation Failed \(body is too long"):
        forge.reply(7, "x")


def test_pull_commits_name_their_authors_and_committers(
    fake: tuple[FakeGitHub, GitHubForge],
) -> None:
    github, forge = fake
    github.add_pull(7, SHA, author="alice")
    assert forge.pull_commits(7) == [PullCommit(SHA)]  # nobody GitHub knows
    github.add_pull_commit(7, "a" * 40, author="bob", committer="web-flow")
    github.add_pull_commit(7, SHA, author=None, committer="alice")
    # By login and by account id (commits[].author.id): the gate counts a commit's author
    # by the account, whatever its login now or later.
    bob, web, alice = (account_id_of(who) for who in ("bob", "web-flow", "alice"))
    assert forge.pull_commits(7) == [
        PullCommit("a" * 40, "bob", "web-flow", bob, web),
        PullCommit(SHA, None, "alice", None, alice),
    ]
    github.pulls[7]["commits"] *= 126  # 252: GitHub would list only 250 of them
    assert forge.pull_commits(7) is None
