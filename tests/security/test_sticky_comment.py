"""The sticky comment is the bot's own: a comment by anyone else holding the marker is
never edited, never taken for Sluice's, and never keeps Sluice's text from showing.

Each forge finds its identity itself: a GitHub App its ``<slug>[bot]`` (``GET /app`` with
the App's JWT, once per App), a GitHub token its user (``GET /user``; an Actions
``GITHUB_TOKEN``, which may not ask, is ``github-actions[bot]``), a GitLab token its user
(``GET /user``; a token that may not ask is refused), the local forge its bot user. The
fakes answer at the wire, so PyGithub and python-gitlab really run.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import responses
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from sluice.bot.forge.base import ForgeError
from sluice.bot.forge.github import GitHubForge, TokenCache, github_client
from sluice.bot.forge.gitlab import GitLabForge, gitlab_client
from sluice.bot.forge.local import LocalForge
from tests.helpers.github_wire import FakeGitHub
from tests.helpers.gitlab_wire import FakeGitLab

REPO = "octo/warehouse"
MARKER = "<!-- sluice:plan project=jaffle -->"
OURS = f"{MARKER}\n**Sluice** plan: 2 models changed"


@pytest.fixture(scope="module")
def pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub(repo=REPO)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        fake.install(mock)
        yield fake


def app_forge(pem: str, cache: TokenCache | None = None) -> GitHubForge:
    client = github_client(repo=REPO, app_id="123", private_key=pem, installation_id=42,
                           cache=cache or TokenCache(), seconds_between_requests=None,
                           seconds_between_writes=None)  # fmt: skip
    return GitHubForge(client, REPO)


def token_forge(**kwargs: Any) -> GitHubForge:
    client = github_client(repo=REPO, token="ghp_" + "t0ken" * 8,
                           seconds_between_requests=None, seconds_between_writes=None)  # fmt: skip
    return GitHubForge(client, REPO, **kwargs)


def bodies(github: FakeGitHub) -> list[tuple[str, str]]:
    return [(c["user"]["login"], c["body"]) for c in github.comments_on(7)]


# --- GitHub App -------------------------------------------------------------------------

OTHERS = {
    "another-app": ("renovate[bot]", "Bot"),
    "actions": ("github-actions[bot]", "Bot"),
    "a-person": ("mallory", "User"),
    "same-slug-as-a-user": ("sluice-bot", "User"),  # the slug without [bot]
}


@pytest.mark.parametrize(("login", "kind"), OTHERS.values(), ids=OTHERS.keys())
def test_an_app_never_edits_someone_elses_comment_holding_the_marker(
    github: FakeGitHub, pem: str, login: str, kind: str
) -> None:
    theirs = github.add_comment(7, f"{MARKER}\nsee https://evil.example", user=login, kind=kind)
    app_forge(pem).upsert_comment(7, MARKER, OURS)
    assert bodies(github) == [(login, f"{MARKER}\nsee https://evil.example"),
                              ("sluice-bot[bot]", OURS)]  # fmt: skip
    assert github.comments[theirs]["edits"] == 0


def test_an_app_is_not_silenced_by_a_copy_of_its_own_text(github: FakeGitHub, pem: str) -> None:
    # Another bot posts exactly what Sluice would: Sluice still posts its own.
    github.add_comment(7, OURS, user="copycat[bot]", kind="Bot")
    app_forge(pem).upsert_comment(7, MARKER, OURS)
    assert bodies(github) == [("copycat[bot]", OURS), ("sluice-bot[bot]", OURS)]


def test_an_app_edits_its_own_comment_after_others(github: FakeGitHub, pem: str) -> None:
    github.add_comment(7, f"> {MARKER}\nquoted", user="bob")
    forge = app_forge(pem)
    forge.upsert_comment(7, MARKER, OURS)
    github.add_comment(7, f"{MARKER}\nlater", user="renovate[bot]", kind="Bot")
    forge.upsert_comment(7, MARKER, f"{MARKER}\nplan v2")
    assert bodies(github) == [
        ("bob", f"> {MARKER}\nquoted"),
        ("sluice-bot[bot]", f"{MARKER}\nplan v2"),
        ("renovate[bot]", f"{MARKER}\nlater"),
    ]


def test_the_apps_login_comes_from_get_app_with_its_jwt_once(github: FakeGitHub, pem: str) -> None:
    github.app_slug = "acme-sluice"
    cache = TokenCache()
    app_forge(pem, cache).upsert_comment(7, MARKER, OURS)
    app_forge(pem, cache).upsert_comment(7, MARKER, f"{MARKER}\nv2")  # the next job
    assert bodies(github) == [("acme-sluice[bot]", f"{MARKER}\nv2")]
    apps = [url for method, url in github.requests if url.endswith("/app")]
    assert len(apps) == 1


# --- GitHub tokens ----------------------------------------------------------------------


def test_a_token_matches_its_own_user(github: FakeGitHub) -> None:
    github.add_comment(7, OURS, user="renovate[bot]", kind="Bot")
    github.add_comment(7, f"{MARKER}\nold", user="alice")
    forge = token_forge()
    forge.upsert_comment(7, MARKER, OURS)
    forge.upsert_comment(7, MARKER, f"{MARKER}\nv2")
    assert bodies(github)[-1] == ("sluice-bot[bot]", f"{MARKER}\nv2")
    assert len(bodies(github)) == 3


def test_an_actions_token_matches_github_actions_bot_only(github: FakeGitHub) -> None:
    # An Actions GITHUB_TOKEN may not read /user (403); its comments are
    # github-actions[bot]'s. Another App's comment holding the marker is not ours.
    github.actions_token = True
    renovate = github.add_comment(7, f"{MARKER}\nrenovate", user="renovate[bot]", kind="Bot")
    github.add_comment(7, f"{MARKER}\nold", user="github-actions[bot]", kind="Bot")
    token_forge().upsert_comment(7, MARKER, OURS)
    assert bodies(github) == [("renovate[bot]", f"{MARKER}\nrenovate"),
                              ("github-actions[bot]", OURS)]  # fmt: skip
    assert github.comments[renovate]["edits"] == 0


def test_an_actions_token_posts_its_own_when_only_others_hold_the_marker(
    github: FakeGitHub,
) -> None:
    github.actions_token = True
    github.add_comment(7, OURS, user="dependabot[bot]", kind="Bot")
    token_forge().upsert_comment(7, MARKER, OURS)
    assert bodies(github) == [("dependabot[bot]", OURS), ("github-actions[bot]", OURS)]


def test_a_token_told_its_login_uses_it(github: FakeGitHub) -> None:
    github.user_status = 403
    github.add_comment(7, f"{MARKER}\nold", user="github-actions[bot]", kind="Bot")
    token_forge(bot_login="sluice-bot[bot]").upsert_comment(7, MARKER, OURS)
    assert bodies(github)[-1] == ("sluice-bot[bot]", OURS)
    assert not [url for _, url in github.requests if url.endswith("/user")]


def test_a_token_that_is_refused_is_an_error_not_a_guess(github: FakeGitHub) -> None:
    github.user_status = 401
    github.add_comment(7, f"{MARKER}\nold", user="renovate[bot]", kind="Bot")
    with pytest.raises(ForgeError, match="401"):
        token_forge().upsert_comment(7, MARKER, OURS)
    assert [m for m, _ in github.requests if m != "GET"] == []


def test_a_rewrite_that_dropped_the_marker_is_found_and_put_back_by_its_id(
    github: FakeGitHub,
) -> None:
    # Someone with write access rewrites Sluice's comment and drops the marker (red team
    # round 9, 7): by marker there is none; by the id the flow kept it is still Sluice's,
    # read back as rewritten and put back, never left under Sluice's name beside a new one.
    posted = token_forge().upsert_comment(7, MARKER, OURS)
    assert posted.comment_id is not None
    github.comments[posted.comment_id]["body"] = "### Sluice\nPlan: nothing changes"
    forge = token_forge()
    [found] = forge.own_comments(7)  # read back: Sluice's, by its id (no marker now)
    assert found.own and found.comment_id == posted.comment_id
    assert found.body == "### Sluice\nPlan: nothing changes"
    assert forge.upsert_comment(7, MARKER, OURS, posted.comment_id).comment_id == posted.comment_id
    me = github.comments[posted.comment_id]["user"]["login"]
    assert bodies(github) == [(me, OURS)]


def test_an_id_that_is_not_sluices_comment_on_this_pull_request_is_never_taken(
    github: FakeGitHub,
) -> None:
    # An id kept for a comment that is someone else's, or Sluice's on another pull request,
    # is passed over: the comment is found by marker (or made) as before.
    mallory = github.add_comment(7, "### Sluice\nPlan: nothing changes", user="mallory")
    forge = token_forge()
    elsewhere = forge.upsert_comment(8, MARKER, f"{MARKER}\non #8").comment_id
    for wrong in (mallory, elsewhere, 999_999):
        assert wrong is not None
        mine = {c.comment_id for c in forge.own_comments(7)}
        assert mallory not in mine and elsewhere not in mine
        made = forge.upsert_comment(7, MARKER, OURS, wrong)
        assert made.comment_id not in (mallory, elsewhere)
    assert github.comments[mallory]["edits"] == 0
    assert [b for _, b in bodies(github)] == ["### Sluice\nPlan: nothing changes", OURS]


def test_edit_comment_rewrites_sluices_comment_by_its_id_and_nothing_else(
    github: FakeGitHub,
) -> None:
    # How a copy of Sluice's comment is rewritten to its stub: by its id only; someone
    # else's comment, one on another pull request, or one gone is never written.
    forge = token_forge()
    mine = forge.upsert_comment(7, MARKER, OURS).comment_id
    elsewhere = forge.upsert_comment(8, MARKER, f"{MARKER}\non #8").comment_id
    mallory = github.add_comment(7, OURS, user="mallory")
    assert mine is not None and elsewhere is not None
    assert forge.edit_comment(7, mine, f"{MARKER}\nstub")
    assert github.comments[mine]["body"] == f"{MARKER}\nstub"
    for wrong in (mallory, elsewhere, 999_999):
        assert not forge.edit_comment(7, wrong, f"{MARKER}\nstub")
    assert github.comments[mallory]["body"] == OURS and github.comments[mallory]["edits"] == 0
    assert github.comments[elsewhere]["body"] == f"{MARKER}\non #8"


# --- GitLab -----------------------------------------------------------------------------


@pytest.fixture
def gitlab() -> Iterator[FakeGitLab]:
    fake = FakeGitLab()
    fake.add_mr(7, sha="a" * 40)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        fake.install(mock)
        yield fake


def gitlab_forge(fake: FakeGitLab) -> GitLabForge:
    return GitLabForge(gitlab_client(fake.url, "glpat-" + "x" * 20), fake.project)


@pytest.mark.parametrize("author", ["mallory", "renovate-bot", "project_4242_bot_abc"])
def test_gitlab_never_edits_someone_elses_note_holding_the_marker(
    gitlab: FakeGitLab, author: str
) -> None:
    gitlab.add_note(7, f"{MARKER}\nsee https://evil.example", author=author)
    gitlab.add_note(7, OURS, author="copycat")
    gitlab_forge(gitlab).upsert_comment(7, MARKER, OURS)
    notes = [(n["author"], n["body"], len(n["bodies"])) for n in gitlab.notes_on(7)]
    assert notes == [(author, f"{MARKER}\nsee https://evil.example", 1), ("copycat", OURS, 1),
                     ("sluice-bot", OURS, 1)]  # fmt: skip


@pytest.mark.parametrize("status", [401, 403])
def test_gitlab_refuses_to_guess_when_the_token_cannot_say_who_it_is(
    gitlab: FakeGitLab, status: int
) -> None:
    gitlab.user_status = status
    gitlab.add_note(7, f"{MARKER}\nold", author="mallory")
    with pytest.raises(ForgeError, match=rf"GET /user\) failed: {status}") as caught:
        gitlab_forge(gitlab).upsert_comment(7, MARKER, OURS)
    assert "api scope" in str(caught.value.hint)
    assert [n["bodies"] for n in gitlab.notes_on(7)] == [[f"{MARKER}\nold"]]
    assert gitlab.asked("POST", "/notes") == 0 and gitlab.asked("PUT", "/notes") == 0


def test_gitlab_a_rewrite_that_dropped_the_marker_is_put_back_by_its_id(
    gitlab: FakeGitLab,
) -> None:
    posted = gitlab_forge(gitlab).upsert_comment(7, MARKER, OURS)
    assert posted.comment_id is not None
    [ours] = gitlab.bot_notes(7)
    ours["body"] = "### Sluice\nPlan: nothing changes"  # a maintainer's rewrite
    mallory = gitlab.add_note(7, "### Sluice\nPlan: nothing changes", author="mallory")
    forge = gitlab_forge(gitlab)
    [found] = forge.own_comments(7)  # Sluice's by its id; mallory's is never the bot's
    assert found.own and found.updated_ms is None and found.comment_id == posted.comment_id
    assert mallory != posted.comment_id
    assert forge.upsert_comment(7, MARKER, OURS, posted.comment_id).comment_id == ours["id"]
    notes = [(n["author"], n["body"]) for n in gitlab.notes_on(7)]
    assert notes == [("sluice-bot", OURS), ("mallory", "### Sluice\nPlan: nothing changes")]


def test_gitlab_edit_comment_rewrites_the_bots_note_by_its_id_only(gitlab: FakeGitLab) -> None:
    forge = gitlab_forge(gitlab)
    mine = forge.upsert_comment(7, MARKER, OURS).comment_id
    mallory = gitlab.add_note(7, OURS, author="mallory")
    assert mine is not None and forge.edit_comment(7, mine, f"{MARKER}\nstub")
    assert not forge.edit_comment(7, mallory, f"{MARKER}\nstub")
    assert not forge.edit_comment(7, 999_999, f"{MARKER}\nstub")
    notes = [(n["author"], n["body"]) for n in gitlab.notes_on(7)]
    assert notes == [("sluice-bot", f"{MARKER}\nstub"), ("mallory", OURS)]


# --- the local forge --------------------------------------------------------------------


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x", "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}  # fmt: skip
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "init"],
                 ["branch", "change"]):  # fmt: skip
        subprocess.run(["git", *args], cwd=repo, env=env, check=True)
    return repo


def test_local_bots_sharing_a_store_keep_their_own_comments(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    first = LocalForge(repo, bot_user="sluice-a")
    first.open_pull("main", "change", "alice")
    second = LocalForge(repo, bot_user="sluice-b")
    first.upsert_comment(1, MARKER, f"{MARKER}\nfrom a")
    second.upsert_comment(1, MARKER, f"{MARKER}\nfrom b")
    first.upsert_comment(1, MARKER, f"{MARKER}\nfrom a, v2")
    assert first.comments(1) == [f"{MARKER}\nfrom a, v2", f"{MARKER}\nfrom b"]


def test_local_comments_written_before_authors_were_kept_are_the_default_bots(
    tmp_path: Path,
) -> None:
    repo = _repo(tmp_path)
    forge = LocalForge(repo)
    forge.open_pull("main", "change", "alice")
    folder = forge.store / "prs" / "1"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "comment.md").write_text(f"{MARKER}\nold")  # no authors.json
    forge.upsert_comment(1, MARKER, f"{MARKER}\nnew")
    LocalForge(repo, bot_user="other").upsert_comment(1, MARKER, f"{MARKER}\nother")
    assert forge.comments(1) == [f"{MARKER}\nnew", f"{MARKER}\nother"]


def test_a_local_users_comment_holding_the_marker_is_never_the_bots(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    forge = LocalForge(repo)
    forge.open_pull("main", "change", "alice")
    forge.add_comment(1, "mallory", f"{MARKER}\nfake plan")
    forge.add_comment(1, "sluice", f"{MARKER}\nfake plan, as the bot's name")
    forge.upsert_comment(1, MARKER, OURS)
    assert forge.comments(1) == [OURS]
    assert [c["body"] for c in forge.user_comments(1)] == [
        f"{MARKER}\nfake plan", f"{MARKER}\nfake plan, as the bot's name",
    ]  # fmt: skip
