"""The in-memory forge keeps the protocol's promises, and carries the flow
without HTTP, git or Spark."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.bot.events.neutral import CommentEvent
from sluice.bot.flow import dispatch
from sluice.bot.flow.deps import Deps, make_deps
from sluice.bot.forge.archive import TreeLimits
from sluice.bot.forge.base import Check, ForgeError, UnusableTree
from sluice.bot.forge.memory import BOT_USER, MemoryForge

HEAD = "a" * 40
BASE = "b" * 40


def _forge() -> MemoryForge:
    forge = MemoryForge("octo/warehouse")
    forge.commit(BASE, {"config.yaml": "sluice:\n  project: w\n"}, branch="main")
    forge.commit(
        HEAD,
        {"config.yaml": "sluice:\n  project: w\n", "models/a.sql": "SELECT 1"},
        parents=(BASE,),
    )
    forge.open_pull(7, head_sha=HEAD, base="main", author="alice")
    return forge


def test_the_sticky_comment_is_the_bots_own_never_another_authors() -> None:
    forge = _forge()
    forge.add_comment(7, "mallory", "<!-- sluice --> I am the sticky comment now")
    forge.upsert_comment(7, "<!-- sluice -->", "<!-- sluice --> plan v1")
    forge.upsert_comment(7, "<!-- sluice -->", "<!-- sluice --> plan v2")
    assert forge.bot_comments(7) == ["<!-- sluice --> plan v2"]
    assert [c.body for c in forge.comments[7] if c.author == "mallory"] == [
        "<!-- sluice --> I am the sticky comment now"
    ]
    with pytest.raises(ForgeError, match="does not hold its marker"):
        forge.upsert_comment(7, "<!-- sluice -->", "no marker")
    [found] = forge.own_comments(7)  # read back: the bot's, not mallory's
    assert found.own and found.body == "<!-- sluice --> plan v2" and found.comment_id is not None


def test_the_sticky_comment_keeps_when_it_last_read_what_it_reads() -> None:
    forge, now = _forge(), [1_000]
    forge.clock = lambda: now[0]
    assert forge.upsert_comment(7, "<!-- s -->", "<!-- s --> v1").at == 1_000
    now[0] = 2_000
    assert forge.upsert_comment(7, "<!-- s -->", "<!-- s --> v1").at == 1_000  # unchanged
    [found] = forge.own_comments(7)
    assert found.updated_ms == 1_000
    assert forge.upsert_comment(7, "<!-- s -->", "<!-- s --> v2").at == 2_000


def test_files_by_branch_and_by_sha_and_reachability() -> None:
    forge = _forge()
    assert forge.read_file("main", "models/a.sql") is None
    assert forge.read_file(HEAD, "models/a.sql") == "SELECT 1"
    assert forge.read_file("nowhere", "config.yaml") is None
    assert forge.commit_of("refs/heads/main") == BASE
    assert forge.on_branch(BASE, "main") and not forge.on_branch(HEAD, "main")


def test_a_merge_needs_the_head_it_was_asked_for_and_moves_the_base() -> None:
    forge = _forge()
    with pytest.raises(ForgeError, match="the head changed; merge refused"):
        forge.merge(7, "squash", BASE)
    merged = forge.merge(7, "squash", HEAD)
    assert forge.commit_of("main") == merged
    assert forge.on_branch(HEAD, "main") and forge.on_branch(BASE, "main")
    assert forge.pull_request(7).merged and not forge.pull_request(7).open
    with pytest.raises(ForgeError, match="is not open"):
        forge.merge(7, "squash", HEAD)


def test_a_commits_files_are_held_to_the_limits_and_path_rules(tmp_path: Path) -> None:
    forge = _forge()
    forge.fetch_tree(HEAD, tmp_path / "ok")
    assert (tmp_path / "ok" / "models" / "a.sql").read_text() == "SELECT 1"
    forge.commit("c" * 40, {"../escape.sql": "SELECT 1"})
    with pytest.raises(UnusableTree, match=r"unsafe path '\.\./escape\.sql'"):
        forge.fetch_tree("c" * 40, tmp_path / "bad")
    assert not (tmp_path / "escape.sql").exists()
    small = MemoryForge(tree_limits=TreeLimits(file_bytes=4))
    small.commit("d" * 40, {"big.csv": "12345"})
    with pytest.raises(UnusableTree, match="SLUICE_TREE_FILE_BYTES"):
        small.fetch_tree("d" * 40, tmp_path / "big")
    assert list((tmp_path / "big").iterdir()) == []


def test_reviews_permissions_reactions_checks_and_deployments() -> None:
    forge = _forge()
    forge.roles["Bob"] = "write"
    assert forge.permission("bob") == "write" and forge.permission("eve") == "none"
    review = forge.add_review(7, "bob", "approved")
    assert [(r.user, r.state, r.commit_sha) for r in forge.reviews(7)] == [
        ("bob", "APPROVED", HEAD)
    ]
    comment = forge.add_comment(7, "bob", "/sluice plan")
    assert forge.react(7, comment, "eyes") and not forge.react(7, review.id + 999, "eyes")
    forge.set_check(HEAD, Check("sluice/approval", "in_progress", "Waiting", "..."))
    forge.set_check(HEAD, Check("sluice/approval", "completed", "Approved", "...", "success"))
    assert forge.checks[HEAD]["sluice/approval"].conclusion == "success"
    deployment = forge.start_deployment(HEAD, "prod", "promote", "main")
    forge.deployment_status(deployment, "success", "done")
    assert forge.deployments[0].statuses == [("success", "done")]


def test_a_folder_commits_as_its_files_and_tags_and_ref_names_resolve(tmp_path: Path) -> None:
    forge = _forge()
    (tmp_path / "src" / "models").mkdir(parents=True)
    (tmp_path / "src" / "models" / "b.sql").write_text("SELECT 2")
    (tmp_path / "src" / "link.sql").symlink_to(tmp_path / "src" / "models" / "b.sql")
    forge.commit_folder("c" * 40, tmp_path / "src", branch="main")
    assert forge.files["c" * 40] == {"models/b.sql": b"SELECT 2"}  # no links, as an archive
    assert forge.parents["c" * 40] == (BASE,) and forge.on_branch(BASE, "main")
    forge.tag("v1", BASE)
    for ref in ("v1", "tags/v1", "refs/tags/v1"):
        assert forge.commit_of(ref) == BASE
    assert forge.commit_of("heads/main") == forge.commit_of("main") == "c" * 40
    assert forge.commit_of("v2") is None
    with pytest.raises(ForgeError, match="no commit"):
        forge.tag("v2", "e" * 40)
    # Reachability from a commit as well as from a branch (a compare of two commits).
    assert forge.on_branch(BASE, HEAD) and not forge.on_branch(HEAD, BASE)
    assert not forge.on_branch(BASE, "nowhere")


def test_a_file_written_on_a_branch_is_a_new_commit_on_its_head() -> None:
    forge = _forge()
    first = forge.write_file("main", "config.yaml", "sluice: {}\n")
    assert forge.commit_of("main") == first and forge.parents[first] == (BASE,)
    assert forge.read_file("main", "config.yaml") == "sluice: {}\n"
    assert forge.read_file(BASE, "config.yaml") == "sluice:\n  project: w\n"
    side = forge.write_file("side", "models/s.sql", "SELECT 3", sha="e" * 40)
    assert side == "e" * 40 and forge.on_branch(first, "side")
    assert forge.read_file("side", "config.yaml") == "sluice: {}\n"
    # Committing a branch's head again keeps its history.
    forge.commit(side, {"config.yaml": "x"}, branch="side")
    assert forge.parents[side] == (first,)


def test_reviews_dismissed_withdrawn_and_unbound() -> None:
    forge = _forge()
    bob = forge.add_review(7, "bob", "approved")
    forge.add_review(7, "carol", "approved", unbound=True)  # as GitLab lists approvals
    forge.dismiss_review(7, bob.id)
    assert [(r.user, r.state, r.commit_sha) for r in forge.reviews(7)] == [
        ("bob", "DISMISSED", HEAD),
        ("carol", "APPROVED", None),
    ]
    forge.withdraw_reviews(7, "carol")
    assert [r.user for r in forge.reviews(7)] == ["bob"]
    with pytest.raises(ForgeError, match="no review"):
        forge.dismiss_review(7, 1)
    with pytest.raises(ForgeError, match="no pull request #8"):
        forge.reviews(8)


def test_comments_with_ids_deleted_comments_and_reactions_by_comment() -> None:
    forge = _forge()
    first = forge.add_comment(7, "bob", "/sluice plan", comment_id=901)
    second = forge.add_comment(7, "bob", "/sluice help")
    with pytest.raises(ForgeError, match="exists already"):
        forge.add_comment(7, "eve", "again", comment_id=901)
    assert forge.react(7, second, "eyes") and forge.react(7, first, "+1")
    assert forge.reactions(7) == [(901, "+1"), (second, "eyes")]
    forge.delete_comment(7, first)
    assert not forge.react(7, first, "rocket")  # deleted before the bot got to it
    with pytest.raises(ForgeError, match="no comment"):
        forge.delete_comment(7, first)
    with pytest.raises(ForgeError, match="no pull request"):
        forge.reply(8, "hello")


def test_every_call_is_logged_and_the_writes_are_told_apart() -> None:
    forge = _forge()
    forge.read_file("main", "config.yaml")
    forge.permission("bob")
    start = len(forge.calls)
    forge.reply(7, "hi")
    forge.set_check(HEAD, Check("sluice/plan", "queued", "Queued", "..."))
    forge.team_members("octo/data")
    assert forge.calls[:2] == [("read_file", ("main", "config.yaml")), ("permission", ("bob",))]
    assert [name for name, _ in forge.writes()] == ["reply", "set_check"]
    assert forge.writes(start + 2) == []


def test_a_merge_is_recorded_with_its_head_and_teams_ignore_case() -> None:
    forge = _forge()
    merged = forge.merge(7, "squash", HEAD)
    [merge] = forge.merges
    assert (merge.number, merge.method, merge.sha, merge.merge_sha) == (7, "squash", HEAD, merged)
    with pytest.raises(ForgeError, match="unknown merge method"):
        forge.open_pull(8, head_sha=HEAD, base="main", author="bob")
        forge.merge(8, "fast-forward", HEAD)
    with pytest.raises(ForgeError, match="no pull request #9"):
        forge.merge(9, "merge", HEAD)
    forge.open_pull(10, head_sha=HEAD, base="main", author="bob")
    closed = forge.close_pull(10)
    assert not closed.open and not closed.merged
    assert forge.close_pull(10, merged=True).merged
    forge.teams["Octo/Data"] = frozenset({"erin"})
    assert forge.team_members("octo/data") == {"erin"}
    assert forge.team_members("octo/other") == frozenset()
    with pytest.raises(ForgeError, match="no deployment"):
        forge.deployment_status(1, "success", "done")


# -- the flow on it: commands, no HTTP, no Spark ---------------------------


def _deps(forge: MemoryForge, tmp_path: Path) -> Deps:
    context = make_deps(
        project_python="on",
        forge_for=lambda _event: forge,
        workdir=tmp_path / "work",
        state_url=f"sqlite:///{tmp_path / 'state.db'}",
        clock=lambda: 1_700_000_000_000,
    )
    return context


def _comment(author: str, body: str, comment_id: int) -> CommentEvent:
    return CommentEvent(
        forge="github",
        repo="octo/warehouse",
        installation_id=None,
        action="created",
        number=7,
        comment_id=comment_id,
        author=author,
        body=body,
    )


def test_a_command_from_someone_without_write_access_gets_one_fixed_reply(tmp_path: Path) -> None:
    forge = _forge()
    deps = _deps(forge, tmp_path)
    try:
        comment = forge.add_comment(7, "eve", "/sluice deploy [x](https://evil.example)")
        dispatch.handle(deps, _comment("eve", "/sluice deploy [x](https://evil.example)", comment))
    finally:
        deps.close()
    [reply] = forge.bot_comments(7)
    assert reply.startswith("@eve only users with write permission")
    assert "evil.example" not in reply
    assert forge.merges == [] and forge.deployments == []


def test_help_from_a_writer_lists_the_commands(tmp_path: Path) -> None:
    forge = _forge()
    forge.roles["bob"] = "write"
    deps = _deps(forge, tmp_path)
    try:
        comment = forge.add_comment(7, "bob", "/sluice help")
        dispatch.handle(deps, _comment("bob", "/sluice help", comment))
    finally:
        deps.close()
    [reply] = forge.bot_comments(7)
    assert "/sluice plan" in reply and "/sluice deploy" in reply
    assert [c.author for c in forge.comments[7]] == ["bob", BOT_USER]
