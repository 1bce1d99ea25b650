"""GitLabForge against GitLab's REST API faked at the wire: python-gitlab runs for real.

Most tests run against :class:`~tests.helpers.gitlab_wire.FakeGitLab` (a stateful project);
a few pin a response shape with a strict ``responses`` mock of their own (``rs``), where a
registered request that is never made fails the test. Either way an unregistered request
is a ConnectionError: no internet.
"""

from __future__ import annotations

import io
import json
import logging
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import responses

from sluice.bot.forge.base import (
    Check,
    CheckAction,
    Forge,
    ForgeError,
    PullCommit,
    UnusableTree,
    created_ms,
    writer,
)
from sluice.bot.forge.gitlab import GitLabForge, gitlab_client, redact
from sluice.core.errors import ConfigError
from tests.helpers.gitlab_wire import FakeGitLab, archive_prefix

TOKEN = "glpat-" + "T0kenT0kenT0kenT0ken12"
URL = "https://gitlab.example.com"
REPO = "data/warehouse"
P = f"{URL}/api/v4/projects/data%2Fwarehouse"
SHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
OTHER = "c3d0be41ecbe669545ee3e94d31ed9a4bc91ee3c"
TOP = archive_prefix(REPO, SHA)
MARKER = "<!-- sluice:pr-comment -->"


# --- fixtures -------------------------------------------------------------------------


@pytest.fixture
def gl() -> Iterator[FakeGitLab]:
    fake = FakeGitLab()
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        fake.install(mock)
        yield fake


def new_forge(**kwargs: Any) -> GitLabForge:
    return GitLabForge(gitlab_client(URL, TOKEN), REPO, **kwargs)


@pytest.fixture
def forge(gl: FakeGitLab) -> GitLabForge:
    return new_forge()


@pytest.fixture
def rs() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=True) as mock:
        yield mock


def sent(call: Any) -> Any:
    return json.loads(call.request.body)


def mr_json(**over: Any) -> dict[str, Any]:
    """A merge request as an older GitLab (13.x) returns it: no ``draft`` field."""
    return {
        "id": 91, "iid": 7, "project_id": 4242, "title": "Add orders", "state": "opened",
        "source_branch": "orders", "target_branch": "main", "source_project_id": 4242,
        "target_project_id": 4242, "work_in_progress": True, "sha": SHA,
        "author": {"id": 2, "username": "alice", "name": "Alice", "state": "active"},
        "web_url": f"{URL}/{REPO}/-/merge_requests/7", **over,
    }  # fmt: skip


# --- the client and the protocol ---------------------------------------------------------


def test_the_forge_satisfies_the_protocol(forge: GitLabForge) -> None:
    as_port: Forge = forge
    assert (as_port.name, as_port.repo, as_port.comment_limit) == ("gitlab", REPO, 1_000_000)


def test_the_token_is_sent_as_private_token_with_sluices_user_agent(
    rs: responses.RequestsMock,
) -> None:
    call = rs.get(f"{P}/repository/files/config.yaml/raw", body="name: demo\n")
    assert new_forge().read_file("main", "config.yaml") == "name: demo\n"
    assert call.calls[0].request.headers["PRIVATE-TOKEN"] == TOKEN
    assert str(call.calls[0].request.headers["User-Agent"]).startswith("sluice/")
    assert "ref=main" in str(call.calls[0].request.url)


def test_no_token_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="no GitLab credentials"):
        gitlab_client(URL, None)


def test_creating_the_forge_asks_nothing(gl: FakeGitLab) -> None:
    new_forge()
    assert gl.requests == []


def test_another_project_is_not_found(gl: FakeGitLab) -> None:
    forge = GitLabForge(gitlab_client(URL, TOKEN), "data/elsewhere")
    with pytest.raises(ForgeError, match=r"reading merge request !7 failed: 404 Project Not Found"):
        forge.pull_request(7)


def test_the_fake_answers_by_numeric_id_and_can_adopt_a_project(gl: FakeGitLab) -> None:
    gl.add_mr(7, sha=SHA)
    assert GitLabForge(gitlab_client(URL, TOKEN), "4242").pull_request(7).head_sha == SHA
    gl.adopt_project = True
    assert GitLabForge(gitlab_client(URL, TOKEN), "org/other").pull_request(7).head_sha == SHA
    assert gl.project == "org/other"


# --- fetch_tree ------------------------------------------------------------------------


def tar_gz(*members: tuple[tarfile.TarInfo, bytes | None]) -> bytes:
    buffer = io.BytesIO()
    # GitLab's archives start with a pax global header holding the commit, as git's do.
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


def repo_archive(*extra: tuple[tarfile.TarInfo, bytes | None]) -> bytes:
    return tar_gz(
        node(f"{TOP}/", tarfile.DIRTYPE),
        file(f"{TOP}/config.yaml", b"name: demo\n"),
        node(f"{TOP}/models/", tarfile.DIRTYPE),
        file(f"{TOP}/models/orders.sql", b"MODEL (name shop.orders);\nSELECT 1 AS id\n"),
        node(f"{TOP}/models/latest.sql", tarfile.SYMTYPE, "orders.sql"),
        *extra,
    )


def test_fetch_tree_strips_the_top_directory_and_writes_the_files(
    gl: FakeGitLab, forge: GitLabForge, tmp_path: Path
) -> None:
    gl.trees[SHA] = repo_archive()
    dest = tmp_path / "tree"
    forge.fetch_tree(SHA, dest)
    assert (dest / "config.yaml").read_text() == "name: demo\n"
    assert (dest / "models" / "orders.sql").read_text().startswith("MODEL")
    assert (dest / "models" / "latest.sql").is_symlink()
    assert (dest / "models" / "latest.sql").read_text().startswith("MODEL")
    assert not (dest / TOP).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tree"]  # the download is gone
    assert gl.requests == [
        ("GET", f"/projects/data%2Fwarehouse/repository/archive.tar.gz?sha={SHA}")
    ]


def test_fetch_tree_of_a_directory_served_by_the_fake(
    gl: FakeGitLab, forge: GitLabForge, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    (src / "models").mkdir(parents=True)
    (src / "config.yaml").write_text("name: demo\n")
    (src / "models" / "a.sql").write_text("SELECT 1\n")
    gl.add_tree(SHA, src)
    forge.fetch_tree(SHA, tmp_path / "tree")
    assert (tmp_path / "tree" / "models" / "a.sql").read_text() == "SELECT 1\n"


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
    gl: FakeGitLab,
    forge: GitLabForge,
    tmp_path: Path,
    member: tuple[tarfile.TarInfo, bytes | None],
    named: str,
) -> None:
    gl.trees[SHA] = repo_archive(member)
    dest = tmp_path / "tree"
    with pytest.raises(
        UnusableTree, match=r"GitLab: the archive of .* has an unsafe member"
    ) as caught:
        forge.fetch_tree(SHA, dest)
    assert named in str(caught.value)
    assert list(dest.iterdir()) == []  # checked before anything is written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tree"]


def test_fetch_tree_enforces_the_limit_on_the_download(gl: FakeGitLab, tmp_path: Path) -> None:
    big = repo_archive(file(f"{TOP}/noise.bin", bytes(range(256)) * 400))
    gl.trees[SHA] = big
    forge = new_forge(workdir_limit_bytes=len(big) - 1)
    with pytest.raises(UnusableTree, match=r"archive of .* is larger than the limit"):
        forge.fetch_tree(SHA, tmp_path / "tree")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tree"]


def test_fetch_tree_enforces_the_limit_on_the_extracted_size(
    gl: FakeGitLab, tmp_path: Path
) -> None:
    bomb = repo_archive(file(f"{TOP}/zeros.bin", b"\0" * 2_000_000))
    assert len(bomb) < 20_000
    gl.trees[SHA] = bomb
    forge = new_forge(workdir_limit_bytes=1_000_000)
    with pytest.raises(
        UnusableTree,
        match=r"files of .* are over a limit .*: the files reach 2,000,052 bytes at .zeros.bin.; the limit is 1,000,000 bytes of all files together \(SLUICE_TREE_TOTAL_BYTES",
    ):
        forge.fetch_tree(SHA, tmp_path / "tree")
    assert list((tmp_path / "tree").iterdir()) == []


def test_fetch_tree_of_an_unknown_commit(forge: GitLabForge, tmp_path: Path) -> None:
    with pytest.raises(
        ForgeError, match=f"downloading the archive of {SHA} failed: 404 File Not Found"
    ) as caught:
        forge.fetch_tree(SHA, tmp_path / "tree")
    assert not isinstance(caught.value, UnusableTree)  # may be asked again


def test_fetch_tree_of_something_that_is_no_archive(
    gl: FakeGitLab, forge: GitLabForge, tmp_path: Path
) -> None:
    gl.trees[SHA] = b"<html>sign in</html>"
    with pytest.raises(ForgeError, match=r"archive of .* cannot be read"):
        forge.fetch_tree(SHA, tmp_path / "tree")


# --- read_file -------------------------------------------------------------------------


def test_read_file_found_missing_and_not_text(gl: FakeGitLab, forge: GitLabForge) -> None:
    gl.files[(SHA, "models/a b.sql")] = "SELECT 'é'\n"
    gl.files[("main", "config.yaml")] = "name: demo\n"
    assert forge.read_file(SHA, "models/a b.sql") == "SELECT 'é'\n"
    assert forge.read_file("main", "config.yaml") == "name: demo\n"
    assert forge.read_file(SHA, "config.yaml") is None
    assert forge.read_file("gone", "config.yaml") is None
    assert gl.asked("GET", "/repository/files/models%2Fa%20b.sql/raw?ref=") == 1


def test_read_file_that_is_not_utf8(rs: responses.RequestsMock) -> None:
    rs.get(f"{P}/repository/files/logo.png/raw", body=b"\x89PNG\xff\xfe")
    with pytest.raises(ForgeError, match=r"reading logo.png at main failed: the file is not UTF-8"):
        new_forge().read_file("main", "logo.png")


# --- merge requests -------------------------------------------------------------------------


def test_pull_request_fields(gl: FakeGitLab, forge: GitLabForge) -> None:
    gl.branches["main"] = OTHER
    gl.add_mr(7, sha=SHA, source_branch="orders", author="alice", title="Add orders")
    pr = forge.pull_request(7)
    assert (pr.number, pr.head_sha, pr.head_ref, pr.base_ref, pr.base_sha) == (
        7, SHA, "orders", "main", OTHER,
    )  # fmt: skip
    assert (pr.author, pr.draft, pr.fork, pr.open, pr.merged, pr.title) == (
        "alice", False, False, True, False, "Add orders",
    )  # fmt: skip


def test_pull_request_of_a_fork_a_draft_and_closed_ones(gl: FakeGitLab, forge: GitLabForge) -> None:
    gl.add_mr(7, sha=SHA, fork=True, draft=True)
    gl.add_mr(8, sha=SHA, state="merged")
    gl.add_mr(9, sha=SHA, state="closed")
    gl.add_mr(10, sha=SHA, state="locked")
    pr = forge.pull_request(7)
    assert (pr.fork, pr.draft, pr.open) == (True, True, True)
    assert [(p.open, p.merged) for p in map(forge.pull_request, (8, 9, 10))] == [
        (False, True), (False, False), (False, False),
    ]  # fmt: skip
    with pytest.raises(ForgeError, match=r"reading merge request !11 failed: 404 Not found"):
        forge.pull_request(11)


def test_pull_request_from_an_older_gitlab(rs: responses.RequestsMock) -> None:
    # GitLab before 14 says work_in_progress, not draft; diff_refs may be missing.
    rs.get(f"{P}/merge_requests/7", json=mr_json())
    pr = new_forge().pull_request(7)
    assert (pr.draft, pr.base_sha, pr.head_ref, pr.fork) == (True, "", "orders", False)


def test_reviews_are_the_approvals(gl: FakeGitLab, forge: GitLabForge) -> None:
    gl.add_mr(7, sha=SHA)
    gl.approve(7, "bob")
    gl.approve(7, "carol")
    gl.approve(7, "bob")  # again: still one approval
    gl.approve(8, "dave")  # another merge request
    reviews = forge.reviews(7)
    assert [(r.id, r.user, r.state, r.commit_sha) for r in reviews] == [
        (gl.users["bob"], "bob", "APPROVED", None),
        (gl.users["carol"], "carol", "APPROVED", None),
    ]
    assert reviews[0].submitted_at is not None
    assert reviews[0].submitted_at < str(reviews[1].submitted_at)
    gl.unapprove(7, "bob")
    assert [r.user for r in forge.reviews(7)] == ["carol"]
    gl.add_mr(9, sha=SHA)
    assert forge.reviews(9) == []


def test_reviews_without_approved_at(rs: responses.RequestsMock) -> None:
    approvals = {"id": 91, "iid": 7, "approved": True, "approvals_required": 1,
                 "approved_by": [{"user": {"id": 5, "username": "bob", "name": "Bob"}}]}  # fmt: skip
    rs.get(f"{P}/merge_requests/7/approvals", json=approvals)
    [review] = new_forge().reviews(7)
    assert (review.id, review.user, review.submitted_at) == (5, "bob", None)


def test_approvals_and_a_merge_request_name_people_by_account_id(
    rs: responses.RequestsMock,
) -> None:
    # The gate tells people apart by GitLab's user id (approved_by[].user.id): a username
    # can be changed. An id GitLab would never give (not a positive integer) is none.
    approvals = {"id": 91, "iid": 7, "approved": True, "approvals_required": 1,
                 "approved_by": [{"user": {"id": 5, "username": "bobx", "name": "Bob"}},
                                 {"user": {"id": "5", "username": "eve", "name": "Eve"}},
                                 {"user": {"id": 0, "username": "zed", "name": "Zed"}}]}  # fmt: skip
    rs.get(f"{P}/merge_requests/7/approvals", json=approvals)
    reviews = new_forge().reviews(7)
    assert [(r.user, r.user_id) for r in reviews] == [("bobx", 5), ("eve", None), ("zed", None)]
    rs.get(f"{P}/merge_requests/7", json=mr_json())
    pr = new_forge().pull_request(7)
    assert (pr.author, pr.author_id) == ("alice", 2)


@pytest.mark.parametrize(
    ("level", "role"),
    [
        (50, "admin"),
        (40, "maintain"),
        (30, "write"),
        (20, "read"),
        (15, "read"),
        (10, "read"),
        (5, "read"),
        (None, "none"),
    ],
)
def test_permission_from_the_access_level(
    gl: FakeGitLab, forge: GitLabForge, level: int | None, role: str
) -> None:
    if level is None:
        gl.users["bob"] = 77  # a user of the instance, not a member of the project
    else:
        gl.members["bob"] = level
    assert forge.permission("bob") == role
    assert writer(role) is (level is not None and level >= 30)


def test_permission_of_an_unknown_user_asks_no_member(gl: FakeGitLab, forge: GitLabForge) -> None:
    assert forge.permission("mallory") == "none"
    assert gl.asked("GET", "/users?username=mallory") == 1
    assert gl.asked("GET", "/members/all/") == 0


def test_permission_matches_the_username_ignoring_case(gl: FakeGitLab, forge: GitLabForge) -> None:
    gl.members["Bob"] = 30
    assert forge.permission("bob") == "write"
    assert gl.asked("GET", f"/members/all/{gl.users['Bob']}") == 1


# --- notes ---------------------------------------------------------------------------------


def test_upsert_comment_creates_once_then_edits_the_same_note(
    gl: FakeGitLab, forge: GitLabForge
) -> None:
    gl.add_mr(7, sha=SHA)
    gl.add_note(7, "LGTM", author="bob")
    forge.upsert_comment(7, MARKER, f"{MARKER}\nplan v1")
    [ours] = gl.bot_notes(7)
    assert ours["body"] == f"{MARKER}\nplan v1"

    # Next push: a human quoting the marker, and a system note holding it, come after ours.
    gl.add_note(7, f"> {MARKER}\nquoted", author="bob")
    gl.add_note(7, f"changed the description {MARKER}", author=gl.bot, system=True)
    forge.upsert_comment(7, MARKER, f"{MARKER}\nplan v2")
    assert [n["id"] for n in gl.bot_notes(7)] == [ours["id"]]
    assert ours["bodies"] == [f"{MARKER}\nplan v1", f"{MARKER}\nplan v2"]
    assert [n["body"] for n in gl.notes_on(7) if n["author"] == "bob"] == [
        "LGTM", f"> {MARKER}\nquoted",
    ]  # fmt: skip
    assert gl.asked("GET", "/user") == 1  # the bot's own user is asked once
    assert gl.asked("POST", "/notes") == 1


def test_upsert_comment_says_when_gitlab_wrote_the_note_and_comment_reads_it_back(
    gl: FakeGitLab, forge: GitLabForge
) -> None:
    # What the gate compares GitLab's approved_at with: GitLab's time of the note's
    # edit (its answer's updated_at), never the service's clock.
    gl.add_mr(7, sha=SHA)
    made = forge.upsert_comment(7, MARKER, f"{MARKER}\nplan v1").at
    [ours] = gl.bot_notes(7)
    assert made == created_ms(ours["updated_at"])
    edited = forge.upsert_comment(7, MARKER, f"{MARKER}\nplan v2").at
    assert edited == created_ms(ours["updated_at"]) and edited is not None and made is not None
    assert edited > made
    # Unchanged: the time it came to read so.
    assert forge.upsert_comment(7, MARKER, f"{MARKER}\nplan v2").at == edited
    # Read back: GitLab's time and whether it is the bot's own note.
    found = forge.comment(7, ours["id"])
    assert found is not None and found.own and found.updated_ms == edited
    theirs = forge.comment(7, gl.add_note(7, f"{MARKER}\ncopied", author="mallory"))
    assert theirs is not None and not theirs.own


def test_own_comments_reads_back_the_note_upsert_comment_edits(
    gl: FakeGitLab, forge: GitLabForge
) -> None:
    # The gate's read-back (comment_guard): the bot's own note holding the marker, as it
    # reads now, whoever edited it; none when it is gone. No time: GitLab moves a note's
    # updated_at when anyone awards it an emoji, so its text is what tells.
    gl.add_mr(7, sha=SHA)
    assert forge.own_comments(7) == []
    gl.add_note(7, f"{MARKER}\ncopied", author="mallory")  # someone else's: never ours
    posted = forge.upsert_comment(7, MARKER, f"{MARKER}\nplan")
    [found] = forge.own_comments(7)
    assert found.own and found.body == f"{MARKER}\nplan" and found.comment_id == posted.comment_id
    assert found.author == gl.bot and found.updated_ms is None
    [ours] = gl.bot_notes(7)
    with gl.lock:  # a maintainer edits it in GitLab's UI, with no hook
        ours["body"], ours["updated_at"] = f"{MARKER}\nrewritten", gl._now()
    [again] = forge.own_comments(7)
    assert again.body == f"{MARKER}\nrewritten"
    gl.notes[7].remove(ours)
    assert forge.own_comments(7) == []


def test_upsert_comment_does_nothing_when_unchanged(gl: FakeGitLab, forge: GitLabForge) -> None:
    gl.add_mr(7, sha=SHA)
    forge.upsert_comment(7, MARKER, f"{MARKER}\nsame")
    forge.upsert_comment(7, MARKER, f"{MARKER}\nsame")
    assert gl.asked("PUT", "/notes/") == 0
    assert len(gl.bot_notes(7)) == 1


def test_upsert_comment_ignores_someone_elses_note_with_the_marker(
    gl: FakeGitLab, forge: GitLabForge
) -> None:
    gl.add_mr(7, sha=SHA)
    theirs = gl.add_note(7, f"{MARKER}\ncopied from the bot", author="mallory")
    forge.upsert_comment(7, MARKER, f"{MARKER}\nplan")
    assert [n["body"] for n in gl.notes_on(7)] == [f"{MARKER}\ncopied from the bot",
                                                     f"{MARKER}\nplan"]  # fmt: skip
    assert gl.notes_on(7)[0]["id"] == theirs and gl.notes_on(7)[0]["bodies"] == [
        f"{MARKER}\ncopied from the bot"
    ]


def test_upsert_comment_finds_its_note_on_a_later_page(gl: FakeGitLab, forge: GitLabForge) -> None:
    gl.add_mr(7, sha=SHA)
    for i in range(130):
        gl.add_note(7, f"comment {i}", author="bob")
    ours = gl.add_note(7, f"{MARKER}\nold", author=gl.bot)  # the 131st, oldest first
    forge.upsert_comment(7, MARKER, f"{MARKER}\nnew")
    assert [n["id"] for n in gl.bot_notes(7)] == [ours]
    assert gl.asked("GET", "/notes?") == 2  # two pages of 100
    assert gl.asked("POST", "/notes") == 0


def test_upsert_comment_when_the_token_cannot_read_its_user(
    gl: FakeGitLab, forge: GitLabForge
) -> None:
    # A token that may not read /user cannot tell its note from anyone else's: refused,
    # saying which token to use (tests/security/test_sticky_comment.py has more).
    gl.user_status = 403
    gl.add_mr(7, sha=SHA)
    gl.add_note(7, f"{MARKER}\nold", author=gl.bot)
    with pytest.raises(ForgeError, match=r"GET /user\) failed: 403") as caught:
        forge.upsert_comment(7, MARKER, f"{MARKER}\nnew")
    assert "api scope" in str(caught.value)
    assert [n["body"] for n in gl.bot_notes(7)] == [f"{MARKER}\nold"]


def test_upsert_comment_raises_when_the_user_lookup_fails_for_a_while(
    gl: FakeGitLab, forge: GitLabForge
) -> None:
    gl.add_mr(7, sha=SHA)
    gl.fail("GET", r"^/user$", 502, "502 Bad Gateway", times=4)  # one try and three retries
    with pytest.raises(ForgeError, match=r"updating the note on merge request !7 failed: 502"):
        forge.upsert_comment(7, MARKER, f"{MARKER}\nplan")
    forge.upsert_comment(7, MARKER, f"{MARKER}\nplan")  # asked again, and found
    assert gl.asked("GET", "/user") == 5
    assert len(gl.bot_notes(7)) == 1


def test_upsert_comment_needs_the_marker_in_the_body(forge: GitLabForge) -> None:
    with pytest.raises(ValueError, match="marker"):
        forge.upsert_comment(7, MARKER, "no marker here")


def test_reply_posts_a_new_note_each_time(gl: FakeGitLab, forge: GitLabForge) -> None:
    gl.add_mr(7, sha=SHA)
    forge.reply(7, "Applied.")
    forge.reply(7, "Applied.")
    assert [n["body"] for n in gl.bot_notes(7)] == ["Applied.", "Applied."]
    with pytest.raises(ForgeError, match=r"commenting on merge request !8 failed: 404"):
        forge.reply(8, "no such merge request")


@pytest.mark.parametrize(
    ("reaction", "emoji"),
    [
        ("+1", "thumbsup"),
        ("-1", "thumbsdown"),
        ("confused", "confused"),
        ("eyes", "eyes"),
        ("rocket", "rocket"),
        ("heart", "heart"),
        ("hooray", "tada"),
        ("laugh", "laughing"),
    ],
)
def test_react_awards_the_matching_emoji(
    gl: FakeGitLab, forge: GitLabForge, reaction: str, emoji: str
) -> None:
    gl.add_mr(7, sha=SHA)
    note = gl.add_note(7, "/sluice apply", author="bob")
    forge.react(7, note, reaction)
    assert [(a["iid"], a["note"], a["name"]) for a in gl.awards] == [(7, note, emoji)]


def test_react_twice_is_not_an_error(gl: FakeGitLab, forge: GitLabForge) -> None:
    gl.add_mr(7, sha=SHA)
    note = gl.add_note(7, "/sluice apply", author="bob")
    assert forge.react(7, note, "+1") is True
    assert (
        forge.react(7, note, "+1") is True
    )  # GitLab: 404 "Award Emoji Name has already been taken"
    assert len(gl.awards) == 1
    assert forge.react(7, 999, "+1") is False  # 404 Note Not Found: deleted


def test_react_already_awarded_as_a_400(rs: responses.RequestsMock) -> None:
    rs.post(f"{P}/merge_requests/7/notes/5/award_emoji", status=400,
            json={"message": {"name": ["has already been taken"]}})  # fmt: skip
    new_forge().react(7, 5, "eyes")
    assert sent(rs.calls[0]) == {"name": "eyes"}


# --- commit statuses -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "conclusion", "state"),
    [
        ("queued", None, "pending"),
        ("in_progress", None, "running"),
        ("completed", "success", "success"),
        ("completed", "neutral", "success"),
        ("completed", "skipped", "success"),
        ("completed", "failure", "failed"),
        ("completed", "action_required", "failed"),
        ("completed", "timed_out", "failed"),
        ("completed", "cancelled", "canceled"),
    ],
)
def test_status_states(
    gl: FakeGitLab, forge: GitLabForge, status: str, conclusion: str | None, state: str
) -> None:
    forge.set_check(SHA, Check("sluice/tests", status, "Tests", "s", conclusion=conclusion))
    [posted] = gl.statuses
    assert (posted["sha"], posted["name"], posted["state"]) == (SHA, "sluice/tests", state)
    assert (posted["description"], posted["target_url"], posted["ref"]) == ("Tests", None, None)


def test_set_check_posts_only_changes_and_takes_gitlabs_refusal_as_done(
    gl: FakeGitLab, forge: GitLabForge
) -> None:
    running = Check("sluice/tests", "in_progress", "Running", "s")
    forge.set_check(SHA, running)
    forge.set_check(SHA, Check("sluice/tests", "in_progress", "Still running", "s"))
    assert gl.asked("POST", "/statuses/") == 1  # the same state is not posted again
    new_forge().set_check(SHA, running)  # the next job does not know: GitLab answers 400
    assert gl.refused_statuses == [{"sha": SHA, "name": "sluice/tests", "state": "running"}]
    forge.set_check(SHA, Check("sluice/tests", "completed", "Passed", "s", conclusion="success"))
    forge.set_check(SHA, Check("sluice/plan", "queued", "Planning", "s"))
    assert [(s["name"], s["state"]) for s in gl.statuses] == [
        ("sluice/tests", "running"), ("sluice/tests", "success"), ("sluice/plan", "pending"),
    ]  # fmt: skip
    assert gl.statuses_on(SHA)["sluice/tests"]["state"] == "success"
    # A finished status posted again (the next job) is a new status, not a refusal.
    new_forge().set_check(SHA, Check("sluice/tests", "completed", "Passed", "s", "success"))
    assert len(gl.statuses) == 4 and len(gl.refused_statuses) == 1


def test_set_check_cuts_the_description_and_leaves_out_buttons(
    gl: FakeGitLab, forge: GitLabForge
) -> None:
    check = Check("sluice/pr-environment", "completed", "t" * 300, "summary " * 99,
                  conclusion="action_required", text="details",
                  actions=(CheckAction("Apply", "Build the PR environment", "apply"),))  # fmt: skip
    forge.set_check(SHA, check)
    body = sent_status(gl)
    assert set(body) == {"state", "name", "description"}
    assert len(body["description"]) == 255 and body["description"].endswith("\u2026")


def sent_status(gl: FakeGitLab) -> dict[str, Any]:
    status = gl.statuses[-1]
    return {k: status[k] for k in ("state", "name", "description", "target_url", "ref")
            if status[k] is not None}  # fmt: skip


def test_set_check_links_the_sticky_note_of_the_merge_request_at_that_head(
    gl: FakeGitLab, forge: GitLabForge
) -> None:
    gl.add_mr(7, sha=SHA, source_branch="orders")
    forge.pull_request(7)
    forge.set_check(SHA, Check("sluice/plan", "queued", "Planning", "s"))
    assert sent_status(gl) == {"state": "pending", "name": "sluice/plan",
                               "description": "Planning", "ref": "orders"}  # fmt: skip
    forge.upsert_comment(7, MARKER, f"{MARKER}\nplan")
    [note] = gl.bot_notes(7)
    forge.set_check(SHA, Check("sluice/plan", "in_progress", "Planning", "s"))
    assert sent_status(gl)["target_url"] == (f"{URL}/{REPO}/-/merge_requests/7#note_{note['id']}")
    forge.set_check(OTHER, Check("sluice/plan", "queued", "Planning", "s"))  # another commit
    assert "target_url" not in sent_status(gl)


def test_set_check_on_a_fork_merge_request_names_no_branch(
    gl: FakeGitLab, forge: GitLabForge
) -> None:
    gl.add_mr(7, sha=SHA, fork=True)
    forge.pull_request(7)
    forge.upsert_comment(7, MARKER, f"{MARKER}\nplan")
    forge.set_check(SHA, Check("sluice/plan", "queued", "Planning", "s"))
    assert "ref" not in sent_status(gl) and "target_url" in sent_status(gl)


def test_set_check_other_refusals_raise(gl: FakeGitLab, forge: GitLabForge) -> None:
    gl.fail(
        "POST", "/statuses/", 400, {"target_url": ["is blocked: Requests to localhost"]}, times=1
    )
    with pytest.raises(ForgeError, match=r"status sluice/plan on .* failed: 400 target_url is"):
        forge.set_check(SHA, Check("sluice/plan", "queued", "Planning", "s"))
    forge.set_check(SHA, Check("sluice/plan", "queued", "Planning", "s"))  # not remembered
    assert gl.asked("POST", "/statuses/") == 2


def test_a_merge_train_s_statuses_go_into_its_pipeline_on_its_train_ref(
    rs: responses.RequestsMock,
) -> None:
    """The train's commit is on no branch: its statuses name the train ref and the
    pipeline, which GitLab then holds them in (an ``external`` stage the train waits for)."""
    rs.post(f"{P}/statuses/{OTHER}", status=201, json={"id": 1, "status": "pending"})
    rs.post(f"{P}/statuses/{OTHER}", status=201, json={"id": 2, "status": "failed"})
    forge = new_forge()
    forge.post_into(OTHER, "refs/merge-requests/7/train", 4242)
    forge.set_check(OTHER, Check("sluice/approval", "queued", "Queued", "s"))
    forge.set_check(OTHER, Check("sluice/approval", "completed", "1 unapproved change", "s",
                                 conclusion="failure"))  # fmt: skip
    assert [sent(call) for call in rs.calls] == [
        {"state": "pending", "name": "sluice/approval", "description": "Queued",
         "ref": "refs/merge-requests/7/train", "pipeline_id": 4242},
        {"state": "failed", "name": "sluice/approval", "description": "1 unapproved change",
         "ref": "refs/merge-requests/7/train", "pipeline_id": 4242},
    ]  # fmt: skip


def test_a_train_commit_that_is_also_a_head_still_posts_into_the_train_pipeline(
    gl: FakeGitLab, forge: GitLabForge
) -> None:
    """Nothing ahead on the train and the MR rebased: its train commit can be its head.
    The statuses go into the train's pipeline all the same; other commits' do not."""
    gl.add_mr(7, sha=SHA, source_branch="orders")
    forge.pull_request(7)
    forge.post_into(SHA, "refs/merge-requests/7/train", 4242)
    forge.set_check(SHA, Check("sluice/tests", "queued", "Queued", "s"))
    assert sent_status(gl)["ref"] == "refs/merge-requests/7/train"
    assert gl.statuses[-1]["pipeline_id"] == 4242
    forge.set_check(OTHER, Check("sluice/tests", "queued", "Queued", "s"))
    assert gl.statuses[-1]["pipeline_id"] is None and "ref" not in sent_status(gl)


# --- teams, refs and branches ------------------------------------------------------------


def test_team_members_are_read_once_per_forge(
    gl: FakeGitLab, forge: GitLabForge, caplog: pytest.LogCaptureFixture
) -> None:
    gl.groups["org/data/reviewers"] = ["bob", "carol"]
    assert forge.team_members("org/data/reviewers") == {"bob", "carol"}
    assert forge.team_members("@org/data/reviewers") == {"bob", "carol"}
    assert forge.team_members("org/data/reviewers") == {"bob", "carol"}
    assert gl.asked("GET", "/groups/org%2Fdata%2Freviewers/members/all") == 2  # per spelling
    with caplog.at_level(logging.INFO, logger="sluice.bot.forge.gitlab"):
        assert forge.team_members("org/ghosts") == frozenset()
    assert "group org/ghosts cannot be read (404 Group Not Found)" in caplog.text


def test_team_members_follow_pages(gl: FakeGitLab, forge: GitLabForge) -> None:
    gl.groups["org/all"] = [f"user{i}" for i in range(230)]
    assert len(forge.team_members("org/all")) == 230
    assert gl.asked("GET", "/groups/org%2Fall/members/all") == 3


def test_team_members_forbidden_is_empty_and_failures_raise(
    gl: FakeGitLab, forge: GitLabForge
) -> None:
    gl.groups["org/secret"] = ["bob"]
    gl.fail("GET", "/groups/org%2Fsecret/", 403, "403 Forbidden")
    assert forge.team_members("org/secret") == frozenset()
    gl.groups["org/flaky"] = ["bob"]
    gl.fail("GET", "/groups/org%2Fflaky/", 401, "401 Unauthorized")
    with pytest.raises(ForgeError, match="members of the group org/flaky failed: 401"):
        forge.team_members("org/flaky")


def test_commit_of_branches_and_tags(gl: FakeGitLab, forge: GitLabForge) -> None:
    main, v1, release = "a" * 40, "b" * 40, "c" * 40
    gl.branches.update({"main": main, "release/1.x": release})
    gl.tags.update({"v1": v1, "main": "d" * 40})
    assert forge.commit_of("main") == main  # a branch wins over a tag of the same name
    assert forge.commit_of("heads/main") == main
    assert forge.commit_of("refs/heads/main") == main
    assert forge.commit_of("release/1.x") == release
    assert forge.commit_of("v1") == v1  # not a branch: the tag
    assert forge.commit_of("tags/v1") == v1
    assert forge.commit_of("refs/tags/main") == "d" * 40
    assert forge.commit_of("v3") is None
    assert forge.commit_of("heads/v1") is None
    assert forge.commit_of("tags/release/1.x") is None
    assert gl.asked("GET", "/repository/branches/release%2F1.x") == 1


def test_commit_of_failures_raise(gl: FakeGitLab, forge: GitLabForge) -> None:
    gl.fail("GET", "/repository/branches/", 401, "401 Unauthorized")
    with pytest.raises(ForgeError, match="resolving main failed: 401 Unauthorized"):
        forge.commit_of("main")


def test_on_branch(gl: FakeGitLab, forge: GitLabForge) -> None:
    old, tip, elsewhere, mr_head = "1" * 40, "2" * 40, "3" * 40, "4" * 40
    gl.branches["main"] = tip
    gl.branch_commits["main"] = {old}
    gl.branch_commits[mr_head] = {tip}  # a merge request branched off main's tip
    assert forge.on_branch(tip, "main")
    assert forge.on_branch(old, "main")
    assert not forge.on_branch(elsewhere, "main")  # no common history: 404
    assert not forge.on_branch(mr_head, "main")  # ahead of main
    assert forge.on_branch(tip, mr_head)  # a commit as the branch
    assert not forge.on_branch(tip, "gone")  # no such branch: 400
    assert gl.asked("GET", f"/repository/merge_base?refs%5B%5D={old}&refs%5B%5D=main") == 1


def test_on_branch_failures_raise(gl: FakeGitLab, forge: GitLabForge) -> None:
    gl.fail("GET", "/merge_base", 403, "403 Forbidden")
    with pytest.raises(ForgeError, match=r"comparing .* with main failed: 403 Forbidden"):
        forge.on_branch(SHA, "main")


# --- merging -----------------------------------------------------------------------------


def test_merge_returns_the_merge_commit_and_moves_the_target(
    gl: FakeGitLab, forge: GitLabForge
) -> None:
    gl.branches["main"] = "a" * 40
    gl.add_mr(7, sha=SHA, merge_sha="e" * 40)
    assert forge.merge(7, "merge", SHA) == "e" * 40
    assert gl.merges == [{"iid": 7, "sha": SHA, "squash": False, "method": "merge",
                          "merge_commit_sha": "e" * 40, "squash_commit_sha": None}]  # fmt: skip
    pr = forge.pull_request(7)
    assert (pr.open, pr.merged) == (False, True)
    assert forge.commit_of("main") == "e" * 40
    assert forge.on_branch(SHA, "main")
    put = [p for m, p in gl.requests if m == "PUT"]
    assert put == ["/projects/data%2Fwarehouse/merge_requests/7/merge"]  # the body holds sha


def test_merge_sends_the_head_and_squash_in_the_body(rs: responses.RequestsMock) -> None:
    merged = mr_json(state="merged", merge_commit_sha="e" * 40, squash_commit_sha="f" * 40)
    rs.put(f"{P}/merge_requests/7/merge", json=merged)
    assert new_forge().merge(7, "squash", SHA) == "e" * 40
    assert sent(rs.calls[0]) == {"sha": SHA, "squash": True}
    rs.put(f"{P}/merge_requests/8/merge", json=merged)
    new_forge().merge(8, "rebase", SHA)  # the project's own merge method
    assert sent(rs.calls[1]) == {"sha": SHA}


@pytest.mark.parametrize(
    ("method", "merge_method", "expected"),
    [
        ("squash", "merge", "merge"),  # a merge commit over the squash commit
        ("squash", "ff", "squash"),  # the squash commit is the new tip
        ("merge", "ff", "head"),  # fast-forward: the head itself
        ("rebase", "rebase_merge", "merge"),
    ],
)
def test_merge_returns_the_new_tip_of_the_target(
    gl: FakeGitLab, forge: GitLabForge, method: str, merge_method: str, expected: str
) -> None:
    gl.merge_method = merge_method
    gl.add_mr(7, sha=SHA)
    tip = forge.merge(7, method, SHA)
    [merge] = gl.merges
    wanted = {"merge": merge["merge_commit_sha"], "squash": merge["squash_commit_sha"],
              "head": SHA}[expected]  # fmt: skip
    assert tip == wanted and gl.branches["main"] == tip
    assert merge["squash"] is (method == "squash")


def test_merge_refused(gl: FakeGitLab, forge: GitLabForge) -> None:
    gl.add_mr(7, sha=SHA)
    gl.add_mr(8, sha=SHA, draft=True)
    gl.add_mr(9, sha=SHA, has_conflicts=True)
    gl.add_mr(10, sha=SHA, state="closed")
    with pytest.raises(ForgeError, match="failed: 409 the MR cannot be merged: SHA does not match"):
        forge.merge(7, "merge", OTHER)
    with pytest.raises(ForgeError, match=r"!8 .* failed: 405 the MR cannot be merged: Method Not"):
        forge.merge(8, "merge", SHA)
    with pytest.raises(ForgeError, match="failed: 406 the MR cannot be merged: Branch cannot be"):
        forge.merge(9, "merge", SHA)
    with pytest.raises(ForgeError, match=r"!10 .* failed: 405"):
        forge.merge(10, "merge", SHA)
    with pytest.raises(ForgeError, match=r"!11 .* failed: 404 Not found"):
        forge.merge(11, "merge", SHA)
    assert gl.merges == []
    assert gl.asked("PUT", "/merge_requests/7/merge") == 1


def test_merge_that_gitlab_did_not_do(rs: responses.RequestsMock) -> None:
    rs.put(
        f"{P}/merge_requests/7/merge", json=mr_json(merge_error="Merge request is not mergeable")
    )
    with pytest.raises(ForgeError, match="the MR cannot be merged: Merge request is not mergeable"):
        new_forge().merge(7, "merge", SHA)


def test_a_merge_answered_with_502_is_not_retried(gl: FakeGitLab, forge: GitLabForge) -> None:
    gl.add_mr(7, sha=SHA)
    gl.fail("PUT", "/merge$", 502, "502 Bad Gateway")
    with pytest.raises(ForgeError, match=r"merging merge request !7 .* failed: 502 Bad Gateway"):
        forge.merge(7, "merge", SHA)
    assert gl.asked("PUT", "/merge") == 1


# --- deployments --------------------------------------------------------------------------


def test_deployments_are_recorded_with_their_statuses(gl: FakeGitLab, forge: GitLabForge) -> None:
    deployment = forge.start_deployment(SHA, "prod", "Sluice: promote !7", "main")
    assert isinstance(deployment, int)
    forge.deployment_status(deployment, "in_progress", "Promoting !7")  # already running
    forge.deployment_status(deployment, "success", "Promoted")
    failed = forge.start_deployment(OTHER, "prod", "Sluice: promote !8", "main")
    assert failed is not None
    forge.deployment_status(failed, "error", "Promotion failed")
    first, second = gl.deployments
    assert {k: first[k] for k in ("id", "environment", "sha", "ref", "tag", "statuses")} == {
        "id": deployment, "environment": "prod", "sha": SHA, "ref": "main", "tag": False,
        "statuses": ["running", "success"],
    }  # fmt: skip
    assert second["statuses"] == ["running", "failed"]
    assert gl.asked("PUT", "/deployments/") == 2


def test_deployments_refused_with_403_are_skipped_with_a_warning(
    gl: FakeGitLab, forge: GitLabForge, caplog: pytest.LogCaptureFixture
) -> None:
    gl.deployments_forbidden = True
    with caplog.at_level(logging.WARNING, logger="sluice.bot.forge.gitlab"):
        assert forge.start_deployment(SHA, "prod", "Sluice: promote !7", "main") is None
        forge.deployment_status(1001, "success", "done")
    assert "promoting without a deployment record" in caplog.text
    assert "deployment 1001 may not be set to success (403" in caplog.text
    assert gl.deployments == []
    assert gl.asked("POST", "/deployments") == 1  # a 403 is not retried


def test_a_refused_deployment_transition_is_logged(
    gl: FakeGitLab, forge: GitLabForge, caplog: pytest.LogCaptureFixture
) -> None:
    deployment = forge.start_deployment(SHA, "prod", "x", "main")
    assert deployment is not None
    forge.deployment_status(deployment, "success", "done")
    with caplog.at_level(logging.WARNING, logger="sluice.bot.forge.gitlab"):
        new_forge().deployment_status(deployment, "failure", "late")  # GitLab: 400
    assert "may not be set to failed (400" in caplog.text
    assert gl.deployments[0]["statuses"] == ["running", "success"]


def test_deployment_failures_other_than_403_raise(gl: FakeGitLab, forge: GitLabForge) -> None:
    gl.fail("POST", "/deployments$", 422, {"ref": ["is invalid"]})
    with pytest.raises(ForgeError, match=r"deployment of .* to prod failed: 422 ref is invalid"):
        forge.start_deployment(SHA, "prod", "x", "main")
    with pytest.raises(ForgeError, match="setting deployment 5 to success failed: 404"):
        forge.deployment_status(5, "success", "x")


# --- errors -------------------------------------------------------------------------------


def test_a_server_error_is_retried_then_a_forge_error_with_the_status(
    gl: FakeGitLab, forge: GitLabForge
) -> None:
    gl.add_mr(7, sha=SHA)
    gl.fail("GET", "/merge_requests/7$", 500, "500 Internal Server Error")
    with pytest.raises(ForgeError) as caught:
        forge.pull_request(7)
    assert str(caught.value) == (
        "GitLab: reading merge request !7 failed: 500 Internal Server Error"
    )
    assert caught.value.__cause__ is None
    assert gl.asked("GET", "/merge_requests/7") == 4  # three retries of a GET, then the error


def test_a_post_answered_with_502_is_not_retried(gl: FakeGitLab, forge: GitLabForge) -> None:
    # GitLab may have created the note before the proxy failed: never post it twice.
    gl.add_mr(7, sha=SHA)
    gl.fail("POST", "/notes$", 502, "502 Bad Gateway")
    with pytest.raises(ForgeError, match=r"commenting on merge request !7 failed: 502"):
        forge.reply(7, "hello")
    assert gl.asked("POST", "/notes") == 1


def test_error_messages_never_hold_the_token(gl: FakeGitLab, forge: GitLabForge) -> None:
    # A proxy that echoes the request's headers into its error.
    gl.add_mr(7, sha=SHA)
    gl.fail("GET", "/merge_requests/7$", 401, f"401 Unauthorized: PRIVATE-TOKEN: {TOKEN}")
    gl.fail("POST", "/notes$", 422, {"body": [f"mentions {TOKEN}"]})
    messages = []
    for call in (lambda: forge.pull_request(7), lambda: forge.reply(7, "x")):
        with pytest.raises(ForgeError) as caught:
            call()
        messages.append(str(caught.value))
    assert messages[0].startswith("GitLab: reading merge request !7 failed: 401 Unauthorized")
    assert messages[1].startswith("GitLab: commenting on merge request !7 failed: 422 body")
    for text in messages:
        assert TOKEN not in text and "T0kenT0ken" not in text
        assert "[redacted]" in text


def test_a_network_error_names_only_its_kind(rs: responses.RequestsMock) -> None:
    failing = rs.get(
        f"{P}/merge_requests/7", body=requests.ConnectionError(f"{URL}?private_token=x")
    )
    with pytest.raises(ForgeError) as caught:
        new_forge().pull_request(7)
    assert failing.call_count == 4  # retried as a transient error, then given up
    assert str(caught.value) == (
        "GitLab: reading merge request !7 failed: ConnectionError (network error)"
    )


def test_redact() -> None:
    assert TOKEN not in redact(f"PRIVATE-TOKEN: {TOKEN}")
    assert "s3cret" not in redact(f"{URL}/api/v4/projects?private_token=s3cret&x=1")
    assert "gldt-" not in redact("deploy token gldt-AbCdEfGhIjKlMnOpQrSt")
    assert redact("say hush to me", ("hush",)) == "say [redacted] to me"
    assert redact("nothing secret") == "nothing secret"


# --- the fake's own file -------------------------------------------------------------------


def test_the_fake_keeps_its_state_in_its_file(tmp_path: Path) -> None:
    state = tmp_path / "gitlab.json"
    fake = FakeGitLab(state_file=state)
    fake.add_mr(7, sha=SHA, draft=True)
    fake.add_note(7, "hello", author="bob")
    fake.approve(7, "bob")
    fake.members["bob"] = 30
    fake.groups["org/t"] = ["bob"]
    fake.files[("main", "config.yaml")] = "x: 1\n"
    fake.branches["main"] = SHA
    fake.tags["v1"] = SHA
    fake.branch_commits["main"] = {OTHER}
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        fake.install(mock)
        forge = new_forge()
        forge.set_check(SHA, Check("sluice/tests", "queued", "t", "s"))
        forge.start_deployment(SHA, "prod", "x", "main")
    again = FakeGitLab(state_file=state)
    for name in ("merge_requests", "notes", "approvals", "members", "users", "groups", "files",
                 "branches", "tags", "branch_commits", "statuses", "latest_statuses",
                 "deployments", "requests", "_ids"):  # fmt: skip
        assert getattr(again, name) == getattr(fake, name), name


def test_the_fake_serves_threads_at_once(gl: FakeGitLab) -> None:
    # The service's worker threads share the fake: every callback holds its lock.
    gl.add_mr(7, sha=SHA)

    def work(n: int) -> None:
        forge = new_forge()
        for i in range(10):
            forge.reply(7, f"reply {n}-{i}")
            forge.set_check(f"{n:040d}", Check(f"check-{i}", "queued", "t", "s"))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({n["id"] for n in gl.bot_notes(7)}) == 60
    assert len(gl.statuses) == len(gl.latest_statuses) == 60
    assert len(gl.requests) == 120


def test_pull_commits_are_the_merge_requests_commits(gl: FakeGitLab, forge: GitLabForge) -> None:
    gl.add_mr(7, sha=SHA)
    assert forge.pull_commits(7) == [PullCommit(SHA)]  # e-mails only: no login
    with pytest.raises(ForgeError, match="commits of merge request !8"):
        forge.pull_commits(8)
