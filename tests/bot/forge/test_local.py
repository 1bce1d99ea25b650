"""The local forge (a git repository on disk) and ``sluice pr``, on real git repositories.

Every method of :class:`LocalForge` runs against a repository made in a temporary folder.
The CLI tests drive the flow through ``sluice pr``; all but one replace Spark with
a runner that fails at once (or need none: the gate, commands and a promotion that finds
prod already in place), and plans are recorded in the ledger as a build would record
them. One test runs the whole flow on Spark: open, approve, merge, promoted.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from sluice.bot.flow.ledger import Ledger
from sluice.bot.flow.reviewed_plan import PlanReview
from sluice.bot.forge.base import Check, CheckAction, ForgeError
from sluice.bot.forge.local import LocalForge, _checked
from sluice.cli import cli
from sluice.core.errors import ExecutionError
from sluice.core.spark.scripted import Warehouse
from tests.helpers.cases import record_prod
from tests.helpers.fold_settings import fold_settings

REPO = Path(__file__).resolve().parents[3]
MARK = "<!-- sluice:pr-comment -->"


def git(repo: Path, *args: str, input: str | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=repo, input=input, capture_output=True,
                          text=True, check=True)  # fmt: skip
    return done.stdout.strip()


def commit(repo: Path, files: dict[str, str | None], message: str) -> str:
    """Write (or, for None, delete) ``files`` and commit them on the current branch."""
    for name, text in files.items():
        path = repo / name
        if text is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def make_repo(path: Path, files: dict[str, str | None] | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.name", "alice")
    git(path, "config", "user.email", "alice@example.com")
    git(path, "config", "commit.gpgsign", "false")
    commit(path, files or {"README.md": "hello\n"}, "initial")
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "warehouse", {"README.md": "hello\n", "models/a.sql": "SELECT 1\n"})


@pytest.fixture
def forge(repo: Path) -> LocalForge:
    return LocalForge(repo)


def branch(repo: Path, name: str, files: dict[str, str | None], message: str = "change") -> str:
    """Commit ``files`` on a new branch ``name`` off the current one; back to main after."""
    git(repo, "checkout", "-q", "-b", name)
    sha = commit(repo, files, message)
    git(repo, "checkout", "-q", "main")
    return sha


# -- the repository --------------------------------------------------------------------


def test_opening_names_the_repository_and_refuses_what_is_not_one(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sub = LocalForge(repo / "models")  # a folder inside: the repository is its top
    assert sub.repo == "warehouse" and sub.root == repo.resolve()
    assert sub.store == repo.resolve() / ".sluice" / "forge"
    assert (sub.name, sub.comment_limit) == ("local", 1_000_000)
    plain = tmp_path / "plain"
    plain.mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    with pytest.raises(ForgeError, match="is not a git repository"):
        LocalForge(plain)
    with pytest.raises(ForgeError, match="is not a directory"):
        LocalForge(tmp_path / "missing")


def test_a_bare_repository_is_a_forge_too(repo: Path, tmp_path: Path) -> None:
    bare = tmp_path / "origin.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(bare)], check=True)
    forge = LocalForge(bare, store_dir=tmp_path / "records")
    assert forge.bare and forge.repo == "origin"
    assert forge.read_file("main", "README.md") == "hello\n"
    git(bare, "branch", "feature", "main")
    number = forge.open_pull("main", "feature", "alice").number
    assert (tmp_path / "records" / "prs" / f"{number}.json").is_file()


# -- files -----------------------------------------------------------------------------


def test_fetch_tree_writes_the_commit_files_and_safe_links(
    repo: Path, forge: LocalForge, tmp_path: Path
) -> None:
    (repo / "models" / "link.sql").symlink_to("a.sql")
    (repo / "run.sh").write_text("#!/bin/sh\n")
    (repo / "run.sh").chmod(0o755)
    sha = commit(repo, {"seeds/x.csv": "id\n1\n"}, "more")
    commit(repo, {"README.md": "later\n"}, "later")  # fetch_tree takes the commit, not HEAD
    dest = tmp_path / "tree"
    forge.fetch_tree(sha, dest)
    files = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if not p.is_dir())
    assert files == ["README.md", "models/a.sql", "models/link.sql", "run.sh", "seeds/x.csv"]
    assert (dest / "README.md").read_text() == "hello\n"
    assert (dest / "models" / "link.sql").is_symlink()
    assert (dest / "models" / "link.sql").read_text() == "SELECT 1\n"
    assert os.access(dest / "run.sh", os.X_OK)
    forge.fetch_tree("main", tmp_path / "by-branch")  # a branch resolves too
    assert (tmp_path / "by-branch" / "README.md").read_text() == "later\n"
    with pytest.raises(ForgeError, match="there is no commit"):
        forge.fetch_tree("0" * 40, tmp_path / "none")


@pytest.mark.parametrize("target", ["../../outside.txt", "/etc/passwd", "../x/../../y"])
def test_fetch_tree_refuses_links_that_leave_the_tree(
    repo: Path, forge: LocalForge, tmp_path: Path, target: str
) -> None:
    (repo / "models" / "evil.sql").symlink_to(target)
    sha = commit(repo, {}, "a link out")
    dest = tmp_path / "tree"
    with pytest.raises(ForgeError, match=r"unsafe member 'models/evil\.sql'"):
        forge.fetch_tree(sha, dest)
    assert list(dest.iterdir()) == []  # refused before anything was written


def test_fetch_tree_refuses_a_commit_with_a_dot_dot_entry(
    repo: Path, forge: LocalForge, tmp_path: Path
) -> None:
    blob = git(repo, "hash-object", "-w", "--stdin", input="evil\n")
    inner = git(repo, "mktree", input=f"100644 blob {blob}\tescape.txt\n")
    tree = git(repo, "mktree", input=f"040000 tree {inner}\t..\n")
    sha = git(repo, "commit-tree", tree, "-m", "evil")
    dest = tmp_path / "deep" / "tree"
    with pytest.raises(ForgeError, match=r"escape\.txt"):
        forge.fetch_tree(sha, dest)
    assert not (tmp_path / "deep" / "escape.txt").exists()


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


@pytest.mark.parametrize(
    ("member", "why"),
    [
        (_member("/etc/cron.d/x"), "absolute path"),
        (_member("models/../../x"), "'..' in the path"),
        (_member("C:/x"), "absolute path"),
        (_member("dev", tarfile.CHRTYPE), "special file"),
        (_member("fifo", tarfile.FIFOTYPE), "special file"),
        (_member("a/l", tarfile.SYMTYPE, "../../x"), "points outside"),
        (_member("l", tarfile.SYMTYPE, "/etc"), "absolute path"),
        (_member("h", tarfile.LNKTYPE, "../x"), "points outside"),
    ],
)
def test_unsafe_archive_members_are_refused(member: tarfile.TarInfo, why: str) -> None:
    ok = _member("models/a.sql")
    with pytest.raises(ForgeError, match=why):
        _checked([ok, member], "abc1234")
    assert _checked([ok, _member("models/l", tarfile.SYMTYPE, "../seeds/x")], "s") != []


def test_read_file_at_branches_tags_and_shas(repo: Path, forge: LocalForge) -> None:
    first = git(repo, "rev-parse", "HEAD")
    git(repo, "tag", "-a", "v1", "-m", "release")
    commit(repo, {"README.md": "changed\n"}, "second")
    assert forge.read_file("main", "README.md") == "changed\n"
    assert forge.read_file(first, "README.md") == "hello\n"
    assert forge.read_file("v1", "README.md") == "hello\n"
    assert forge.read_file("main", "./models/a.sql") == "SELECT 1\n"
    assert forge.read_file("main", "missing.yaml") is None
    assert forge.read_file("no-such-branch", "README.md") is None
    assert forge.read_file("--help", "README.md") is None
    with pytest.raises(ForgeError, match="it is a tree, not a file"):
        forge.read_file("main", "models")
    (repo / "blob.bin").write_bytes(b"\xff\xfe\x00")
    commit(repo, {}, "binary")
    with pytest.raises(ForgeError, match="not UTF-8"):
        forge.read_file("main", "blob.bin")


def test_commit_of_peels_tags_and_knows_only_commits(repo: Path, forge: LocalForge) -> None:
    head = git(repo, "rev-parse", "HEAD")
    git(repo, "tag", "light")
    git(repo, "tag", "-a", "v1.0", "-m", "annotated")
    git(repo, "tag", "-a", "v1.0-again", "-m", "a tag of a tag", "v1.0")
    assert forge.commit_of("main") == head
    assert forge.commit_of("heads/main") == head
    assert forge.commit_of("refs/heads/main") == head
    assert forge.commit_of("tags/v1.0") == head
    assert forge.commit_of("v1.0") == head and forge.commit_of("light") == head
    assert forge.commit_of("v1.0-again") == head
    assert git(repo, "rev-parse", "v1.0") != head  # the tag object itself
    assert forge.commit_of("nope") is None and forge.commit_of("tags/nope") is None
    assert forge.commit_of("main^{tree}") is None
    assert forge.commit_of("-v") is None


def test_on_branch(repo: Path, forge: LocalForge) -> None:
    old = git(repo, "rev-parse", "HEAD")
    side = branch(repo, "side", {"b.txt": "b\n"})
    assert forge.on_branch(old, "main") and forge.on_branch(old, "side")
    assert forge.on_branch(side, "side") and not forge.on_branch(side, "main")
    assert forge.on_branch(old, side)  # a commit as the "branch", as the deploy check asks
    assert not forge.on_branch("0" * 40, "main") and not forge.on_branch(old, "nope")


# -- pull requests, comments, reviews ----------------------------------------------------


def test_pull_requests_are_numbered_and_follow_their_branches(
    repo: Path, forge: LocalForge
) -> None:
    head = branch(repo, "feature", {"b.txt": "b\n"})
    base = git(repo, "rev-parse", "main")
    pr = forge.open_pull("main", "feature", "alice", "Add b")
    assert (pr.number, pr.head_sha, pr.base_sha, pr.head_ref, pr.base_ref) == (
        1, head, base, "feature", "main",
    )  # fmt: skip
    assert (pr.author, pr.title, pr.open, pr.merged, pr.fork, pr.draft) == (
        "alice", "Add b", True, False, False, False,
    )  # fmt: skip
    with pytest.raises(ForgeError, match="#1 is already open for feature -> main"):
        forge.open_pull("main", "feature", "bob")
    with pytest.raises(ForgeError, match="there is no branch 'ghost'"):
        forge.open_pull("main", "ghost", "bob")
    with pytest.raises(ForgeError, match="both 'main'"):
        forge.open_pull("main", "main", "bob")
    branch(repo, "other", {"c.txt": "c\n"})
    assert forge.open_pull("main", "other", "bob").number == 2
    assert forge.pull_numbers() == [1, 2]
    record = json.loads((forge.store / "prs" / "1.json").read_text())
    assert record["state"] == "open" and record["head_sha"] == head

    git(repo, "checkout", "-q", "feature")
    newer = commit(repo, {"b.txt": "bb\n"}, "more")
    git(repo, "checkout", "-q", "main")
    assert forge.pull_request(1).head_sha == newer  # the branch, as on a forge
    assert forge.synchronize(1).head_sha == newer
    assert forge.record(1)["head_sha"] == newer
    closed = forge.close(2)
    assert not closed.open and not closed.merged and forge.record(2)["state"] == "closed"
    with pytest.raises(ForgeError, match="#2 is closed"):
        forge.synchronize(2)
    with pytest.raises(ForgeError, match="there is no pull request #9"):
        forge.pull_request(9)


def test_one_sticky_comment_per_marker_and_numbered_replies(repo: Path, forge: LocalForge) -> None:
    branch(repo, "feature", {"b.txt": "b\n"})
    forge.open_pull("main", "feature", "alice")
    forge.upsert_comment(1, MARK, f"{MARK}\nfirst")
    forge.upsert_comment(1, MARK, f"{MARK}\nsecond")
    folder = forge.store / "prs" / "1"
    assert (folder / "comment.md").read_text() == f"{MARK}\nsecond"
    other = "<!-- sluice:pr-comment:sub -->"
    forge.upsert_comment(1, other, f"{other}\nanother project")
    assert (folder / "comment-2.md").read_text() == f"{other}\nanother project"
    forge.upsert_comment(1, MARK, f"{MARK}\nthird")
    assert forge.comments(1) == [f"{MARK}\nthird", f"{other}\nanother project"]
    found = forge.own_comments(1)  # read back: no time nor ids (this forge keeps none)
    assert [c.body for c in found] == [f"{MARK}\nthird", f"{other}\nanother project"]
    assert all(c.own and c.updated_ms is None and c.comment_id is None for c in found)
    with pytest.raises(ValueError, match="marker"):
        forge.upsert_comment(1, MARK, "no marker")
    forge.reply(1, "one")
    forge.reply(1, "two")
    assert sorted(p.name for p in (folder / "replies").iterdir()) == ["001.md", "002.md"]
    assert forge.replies(1) == ["one", "two"]
    with pytest.raises(ForgeError, match="no pull request #5"):
        forge.reply(5, "x")
    assert not [p for p in forge.store.rglob("*.tmp")]  # written by rename, nothing left


def test_comments_reactions_and_reviews(repo: Path, forge: LocalForge) -> None:
    head = branch(repo, "feature", {"b.txt": "b\n"})
    forge.open_pull("main", "feature", "alice")
    first = forge.add_comment(1, "bob", "/sluice plan")
    second = forge.add_comment(1, "carol", "looks good")
    assert (first, second) == (1, 2)
    forge.react(1, first, "+1")
    forge.react(1, first, "rocket")
    assert [c["reactions"] for c in forge.user_comments(1)] == [["+1", "rocket"], []]
    assert forge.react(1, 7, "+1") is False

    forge.add_review(1, "bob", "approved", head)
    forge.add_review(1, "bob", "CHANGES_REQUESTED", head)
    reviews = forge.reviews(1)
    assert [(r.id, r.user, r.state, r.commit_sha) for r in reviews] == [
        (1, "bob", "APPROVED", head), (2, "bob", "CHANGES_REQUESTED", head),
    ]  # fmt: skip
    assert all(r.submitted_at and r.submitted_at.endswith("Z") for r in reviews)
    with pytest.raises(ForgeError, match="'LGTM' is not a review state"):
        forge.add_review(1, "bob", "lgtm", head)


def test_permissions_default_to_write_until_collaborators_are_listed(forge: LocalForge) -> None:
    assert forge.permission("anyone") == "write"
    forge.store.mkdir(parents=True, exist_ok=True)
    path = forge.store / "collaborators.json"
    path.write_text(json.dumps({"alice": "admin", "dave": "read"}))
    assert forge.permission("alice") == "admin" and forge.permission("dave") == "read"
    assert forge.permission("mallory") == "none"
    path.write_text(json.dumps({"alice": "boss"}))
    with pytest.raises(ForgeError, match="'boss' is not a role"):
        forge.permission("alice")
    path.write_text('{"alice": "admin",\n}')
    with pytest.raises(ForgeError, match=r"collaborators.json:2: .*not valid JSON"):
        forge.permission("alice")


def test_team_members(forge: LocalForge) -> None:
    assert forge.team_members("octo/data") == frozenset()
    forge.store.mkdir(parents=True, exist_ok=True)
    (forge.store / "teams.json").write_text(json.dumps({"octo/data": ["erin", "frank"]}))
    assert forge.team_members("octo/data") == {"erin", "frank"}
    assert forge.team_members("@octo/data") == {"erin", "frank"}
    assert forge.team_members("octo/other") == frozenset()


def test_checks_are_kept_per_commit_with_their_history(repo: Path, forge: LocalForge) -> None:
    sha = git(repo, "rev-parse", "HEAD")
    forge.set_check(sha, Check("sluice/tests", "queued", "Queued", "Waiting."))
    action = CheckAction("Approve this plan", "Approve the plan", "approve")
    forge.set_check(sha, Check("sluice/tests", "completed", "2 passed", "All good.",
                               conclusion="success", text="details", actions=(action,)))  # fmt: skip
    forge.set_check(sha, Check("sluice/approval", "in_progress", "Waiting", "For the plan."))
    checks = forge.checks(sha)
    assert sorted(checks) == ["sluice/approval", "sluice/tests"]
    tests = checks["sluice/tests"]
    assert (tests["status"], tests["conclusion"], tests["title"], tests["summary"]) == (
        "completed", "success", "2 passed", "All good.",
    )  # fmt: skip
    assert tests["text"] == "details"
    assert tests["actions"] == [
        {"label": "Approve this plan", "description": "Approve the plan", "identifier": "approve"}
    ]
    assert [h["status"] for h in tests["history"]] == ["queued", "completed"]
    assert json.loads((forge.store / "checks" / f"{sha}.json").read_text()) == checks
    assert forge.checks("0" * 40) == {}
    with pytest.raises(ForgeError, match="is not a commit sha"):
        forge.set_check("../../etc", Check("x", "queued", "t", "s"))


def test_deployments_are_recorded(forge: LocalForge) -> None:
    first = forge.start_deployment("a" * 40, "prod", "Sluice: promote #1")
    second = forge.start_deployment("b" * 40, "prod", "Sluice: promote #2")
    assert (first, second) == (1, 2)
    forge.deployment_status(1, "in_progress", "Promoting")
    forge.deployment_status(1, "success", "Promoted")
    [one, two] = forge.deployments()
    assert [s["state"] for s in one["statuses"]] == ["in_progress", "success"]
    assert (one["sha"], one["environment"], two["statuses"]) == ("a" * 40, "prod", [])
    with pytest.raises(ForgeError, match="no deployment 3"):
        forge.deployment_status(3, "success", "x")


# -- merging -------------------------------------------------------------------------------


def _parents(repo: Path, sha: str) -> list[str]:
    return git(repo, "rev-list", "--parents", "-n", "1", sha).split()[1:]


def test_merge_makes_a_merge_commit_on_the_base(repo: Path, forge: LocalForge) -> None:
    head = branch(repo, "feature", {"b.txt": "b\n"}, "add b")
    git(repo, "checkout", "-q", "-b", "elsewhere")  # the base is not checked out
    base = git(repo, "rev-parse", "main")
    forge.open_pull("main", "feature", "alice", "Add b")
    merged = forge.merge(1, "merge", head)
    assert git(repo, "rev-parse", "main") == merged
    assert _parents(repo, merged) == [base, head]
    assert git(repo, "log", "-1", "--format=%s", merged) == "Merge pull request #1 from feature"
    assert forge.read_file("main", "b.txt") == "b\n"
    pr = forge.pull_request(1)
    assert pr.merged and not pr.open and pr.head_sha == head
    assert forge.record(1)["merge_sha"] == merged and forge.record(1)["merge_method"] == "merge"
    with pytest.raises(ForgeError, match="#1 is merged"):
        forge.merge(1, "merge", head)


def test_squash_and_rebase(repo: Path, forge: LocalForge) -> None:
    git(repo, "checkout", "-q", "-b", "feature")
    commit(repo, {"b.txt": "b\n"}, "add b")
    head = commit(repo, {"c.txt": "c\n"}, "add c")
    git(repo, "checkout", "-q", "main")
    base = commit(repo, {"README.md": "moved on\n"}, "main moved")
    forge.open_pull("main", "feature", "alice", "Two files")
    squashed = forge.merge(1, "squash", head)
    assert _parents(repo, squashed) == [base]
    assert git(repo, "log", "-1", "--format=%B", squashed) == "Two files (#1)\n\n* add b\n* add c"
    assert sorted(git(repo, "ls-tree", "--name-only", squashed).split()) == [
        "README.md", "b.txt", "c.txt", "models",
    ]  # fmt: skip
    assert (repo / "c.txt").read_text() == "c\n"  # main is checked out: its files followed

    ahead = branch(repo, "ahead", {"d.txt": "d\n"})  # contains main: rebase fast-forwards
    forge.open_pull("main", "ahead", "alice")
    assert forge.merge(2, "rebase", ahead) == ahead == git(repo, "rev-parse", "main")
    behind = branch(repo, "behind", {"e.txt": "e\n"})
    commit(repo, {"f.txt": "f\n"}, "main again")
    forge.open_pull("main", "behind", "alice")
    rebased = forge.merge(3, "rebase", behind)  # cannot fast-forward: squashed
    assert len(_parents(repo, rebased)) == 1 and forge.read_file(rebased, "e.txt") == "e\n"
    with pytest.raises(ForgeError, match="'octopus' is not a merge method"):
        forge.merge(3, "octopus", behind)


def test_merge_refuses_a_moved_head_and_conflicts(repo: Path, forge: LocalForge) -> None:
    old = branch(repo, "feature", {"README.md": "theirs\n"})
    forge.open_pull("main", "feature", "alice")
    git(repo, "checkout", "-q", "feature")
    new = commit(repo, {"x.txt": "x\n"}, "pushed after approval")
    git(repo, "checkout", "-q", "main")
    main = git(repo, "rev-parse", "main")
    with pytest.raises(ForgeError, match=f"its head moved to {new[:7]}, not {old[:7]}"):
        forge.merge(1, "merge", old)
    commit(repo, {"README.md": "ours\n"}, "conflicting")
    main = git(repo, "rev-parse", "main")
    with pytest.raises(ForgeError, match=r"has conflicts with its base: README\.md"):
        forge.merge(1, "squash", new)
    assert git(repo, "rev-parse", "main") == main and forge.pull_request(1).open


def test_merge_refuses_when_local_edits_are_in_the_way(repo: Path, forge: LocalForge) -> None:
    head = branch(repo, "feature", {"README.md": "from the PR\n"})
    forge.open_pull("main", "feature", "alice")
    (repo / "README.md").write_text("uncommitted\n")
    main = git(repo, "rev-parse", "main")
    with pytest.raises(ForgeError, match="'main' is checked out and could not be updated"):
        forge.merge(1, "merge", head)
    assert git(repo, "rev-parse", "main") == main and forge.pull_request(1).open
    assert (repo / "README.md").read_text() == "uncommitted\n"


def test_merge_without_a_git_identity_signs_as_sluice(
    repo: Path, forge: LocalForge, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = branch(repo, "feature", {"b.txt": "b\n"})
    git(repo, "config", "--unset", "user.name")
    git(repo, "config", "--unset", "user.email")
    monkeypatch.setenv("HOME", str(repo.parent))  # no global identity either
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for var in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "EMAIL"):
        monkeypatch.delenv(var, raising=False)
    git(repo, "config", "user.useConfigOnly", "true")
    forge.open_pull("main", "feature", "alice")
    git(repo, "checkout", "-q", "-b", "away")
    merged = forge.merge(1, "merge", head)
    assert git(repo, "log", "-1", "--format=%an <%ae>", merged) == "Sluice <sluice@localhost>"


# -- sluice pr, without Spark ------------------------------------------------------------

GATE = "  gate:\n    required_approvers:\n      users: [bob]\n"


class NoSpark:
    """A runner for tests that must not start Spark: every job fails at once."""

    def __init__(self, *_args: Any) -> None:
        pass

    def run(self, spec: dict[str, Any]) -> Any:
        raise ExecutionError("Spark is not run in this test")


def shop(tmp_path: Path, extra: str = GATE) -> Path:
    """A repository holding the example project, the gate on main."""
    root = tmp_path / "shop"
    shutil.copytree(REPO / "examples" / "jaffle_shop", root,
                    ignore=shutil.ignore_patterns(".sluice"))  # fmt: skip
    fold_settings(root)  # the example's sluice.yaml into config.yaml
    text = (root / "config.yaml").read_text()
    head, _, _ = text.partition("  pr:\n")
    (root / "config.yaml").write_text(head + "  pr:\n    backfill_days: null\n" + extra)
    make_repo(root, {})
    return root


def customers_change(root: Path) -> str:
    path = "models/customers.sql"
    text = (
        (root / path)
        .read_text()
        .replace("  c.last_name,\n", "  c.last_name,\n  UPPER(c.last_name) AS last_name_upper,\n")
    )
    return branch(root, "change", {path: text}, "customers: last_name_upper")


def sluice(root: Path, *args: str, runner_for: Callable[..., Any] | None = NoSpark) -> Result:
    obj = {"runner_for": runner_for} if runner_for is not None else None
    return CliRunner().invoke(cli, [args[0], args[1], "--repo", str(root), *args[2:]], obj=obj)


def status(root: Path, number: int = 1) -> dict[str, Any]:
    result = sluice(root, "pr", "status", str(number), "--json")
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.output)
    return data


def conclusions(data: dict[str, Any]) -> dict[str, str | None]:
    return {c["name"]: c["conclusion"] or c["status"] for c in data["checks"]}


def record_plan(root: Path, sha: str, fingerprint: str = "fp1", number: int = 1) -> None:
    """Record the plan a build of ``sha`` would have recorded."""
    ledger = Ledger(f"sqlite:///{root / '.sluice' / 'state.db'}")
    try:
        review = PlanReview(fingerprint, (("jaffle.customers", f"{fingerprint}-c"),), {}, {})
        ledger.record_plan(f"local:{root.name}", number, sha, review, 1)
    finally:
        ledger.close()


def test_open_reports_a_failed_build_on_the_checks_and_comment(tmp_path: Path) -> None:
    root = shop(tmp_path)
    head = customers_change(root)
    result = sluice(root, "pr", "open", "--base", "main", "--head", "change", "--user", "alice",
                    "--title", "Upper last names")  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "1"
    assert "--- the PR comment of #1 ---" in result.output
    assert "Building the environment failed" in result.output
    assert "Spark is not run in this test" in result.output
    assert "#1 'Upper last names': change -> main by alice, open; head " + head[:7] in lines
    data = status(root)
    assert (data["state"], data["head_sha"], data["author"], data["base"]) == (
        "open", head, "alice", "main",
    )  # fmt: skip
    assert conclusions(data) == {
        "sluice/approval": "failure", "sluice/pr-environment": "failure",
        "sluice/prod-plan": "failure", "sluice/tests": "failure",
    }  # fmt: skip
    [approval] = [c for c in data["checks"] if c["name"] == "sluice/approval"]
    assert approval["title"] == "No plan to approve" and approval["sha"] == head
    assert data["comment"].startswith("<!-- sluice:pr-comment -->")
    assert (root / ".sluice" / "forge" / "prs" / "1" / "comment.md").read_text() == data["comment"]
    assert git(root, "status", "--porcelain") == ""  # .sluice/ stays out of git status
    quiet = sluice(root, "pr", "open", "--base", "main", "--head", "change", "-q")
    assert quiet.exit_code == 1 and "already open" in quiet.output

    human = sluice(root, "pr", "status", "1")
    assert human.exit_code == 0
    assert "  ✗ sluice/approval" in human.output and "No plan to approve" in human.output
    # Piped, the comment prints as its Markdown; rendered, as text for a terminal: no
    # HTML comment, no fold tags, the failure still in it.
    assert "<!-- sluice:pr-comment -->" in human.output
    rendered = sluice(root, "pr", "status", "1", "--format", "rendered")
    assert rendered.exit_code == 0, rendered.output
    assert "Building the environment failed" in rendered.output
    assert "<!--" not in rendered.output and "<sub>" not in rendered.output
    listing = sluice(root, "pr", "list")
    assert listing.output.startswith("#1 open   change -> main  Upper last names")


def test_the_gate_merge_protection_and_a_promotion_without_spark(tmp_path: Path) -> None:
    root = shop(tmp_path)
    head = customers_change(root)
    assert sluice(root, "pr", "open", "--base", "main", "--head", "change", "--user", "alice",
                  "-q").output == "1\n"  # fmt: skip
    record_plan(root, head)  # what the (Spark) build records

    # The author's own approval and one by someone the base branch does not list.
    for user in ("alice", "carol"):
        result = sluice(root, "pr", "approve", "1", "--user", user)
        assert result.exit_code == 0, result.output
        assert "  ✗ sluice/approval        failure      1 more approval needed" in result.output
    checks = status(root)["checks"]
    summary = next(c for c in checks if c["name"] == "sluice/approval")["summary"]
    assert "@alice's own approval does not count (PR author)." in summary
    assert "Not counted: @carol (not a required approver or owner)." in summary

    refused = sluice(root, "pr", "merge", "1", "--user", "alice")
    assert refused.exit_code == 1
    assert "#1 cannot be merged: sluice/approval on" in refused.output
    assert "is failure: 1 more approval needed" in refused.output
    assert status(root)["state"] == "open"
    not_admin = sluice(root, "pr", "merge", "1", "--admin", "--user", "alice")
    assert not_admin.exit_code == 1 and "--admin needs admin permission" in not_admin.output

    approved = sluice(root, "pr", "approve", "1", "--user", "bob")
    assert "  ✓ sluice/approval        success      Approved" in approved.output
    assert "**Approval:** ✅ Approved. Approved by @bob (1 of 1 required)." in approved.output

    # Prod already holds the PR's models (recorded as built): promoting needs no Spark.
    tree = tmp_path / "tree"
    LocalForge(root).fetch_tree(head, tree)
    prod_at(root, tree)
    merged = sluice(root, "pr", "merge", "1", "--method", "squash", "--user", "alice")
    assert merged.exit_code == 0, merged.output
    assert "Merged #1 into main as " in merged.output and "(squash)." in merged.output
    data = status(root)
    assert data["state"] == "merged" and data["merge_sha"] == git(root, "rev-parse", "main")
    [deploy] = [c for c in data["checks"] if c["name"] == "sluice/deploy"]
    assert (deploy["conclusion"], deploy["title"], deploy["sha"]) == (
        "success", "Prod already has this state", data["merge_sha"],
    )  # fmt: skip
    assert "**Promotion** of " in data["comment"]
    [deployment] = LocalForge(root).deployments()
    assert [s["state"] for s in deployment["statuses"]] == ["in_progress", "success"]
    again = sluice(root, "pr", "merge", "1")
    assert again.exit_code == 1 and "#1 is merged" in again.output


def prod_at(root: Path, tree: Path) -> None:
    """Record prod as the project in ``tree`` (its data taken as built: no Spark)."""
    record_prod(tree, f"sqlite:///{root / '.sluice' / 'state.db'}", int(time.time() * 1000))


def test_commands_permissions_sync_and_close(tmp_path: Path) -> None:
    root = shop(tmp_path)
    customers_change(root)
    sluice(root, "pr", "open", "--base", "main", "--head", "change", "--user", "alice")
    store = root / ".sluice" / "forge"
    (store / "collaborators.json").write_text(json.dumps({"alice": "write", "dave": "read"}))

    helped = sluice(root, "pr", "comment", "1", "/sluice help", "--user", "alice")
    assert helped.exit_code == 0, helped.output
    assert "Sluice reacted to your comment: +1" in helped.output
    assert "--- Sluice replied on #1 ---\n**Sluice commands.**" in helped.output
    refused = sluice(root, "pr", "comment", "1", "/sluice deploy", "--user", "dave")
    assert "@dave only users with write permission" in refused.output
    assert "(your permission: read)" in refused.output
    plain = sluice(root, "pr", "comment", "1", "Looks good", "--user", "dave")
    assert plain.exit_code == 0 and "replied" not in plain.output
    comments = json.loads((store / "prs" / "1" / "comments.json").read_text())
    assert [(c["author"], c["reactions"]) for c in comments] == [
        ("alice", ["+1"]), ("dave", []), ("dave", []),
    ]  # fmt: skip
    assert len(status(root)["replies"]) == 2

    git(root, "checkout", "-q", "change")
    newer = commit(root, {"README.md": "docs\n"}, "docs")
    git(root, "checkout", "-q", "main")
    synced = sluice(root, "pr", "sync", "1")
    assert synced.exit_code == 0, synced.output
    assert status(root)["head_sha"] == newer
    assert conclusions(status(root))["sluice/tests"] == "failure"  # built again (and failed)

    closed = sluice(root, "pr", "close", "1")
    assert closed.exit_code == 0, closed.output
    assert "change -> main by alice, closed; head " + newer[:7] in closed.output
    assert status(root)["state"] == "closed"
    late = sluice(root, "pr", "approve", "1", "--user", "bob")
    assert late.exit_code == 1 and "#1 is closed" in late.output


def test_deploy_command_promotes_then_merges_and_the_merge_is_announced(tmp_path: Path) -> None:
    root = shop(tmp_path, GATE + "  deploy:\n    merge_method: squash\n")
    head = customers_change(root)
    sluice(root, "pr", "open", "--base", "main", "--head", "change", "--user", "alice", "-q")
    record_plan(root, head)
    sluice(root, "pr", "approve", "1", "--user", "bob")
    tree = tmp_path / "tree"
    LocalForge(root).fetch_tree(head, tree)
    prod_at(root, tree)
    result = sluice(root, "pr", "comment", "1", "/sluice deploy", "--user", "bob")
    assert result.exit_code == 0, result.output
    data = status(root)
    assert data["state"] == "merged" and data["merge_sha"] == git(root, "rev-parse", "main")
    assert data["replies"][-1].startswith("@bob deployed to prod (Prod already has this state)")
    assert "and merged as `" in data["replies"][-1]
    assert "**Promotion** of " in data["comment"]
    assert len(_parents(root, data["merge_sha"])) == 1  # squash, as the base config says


def test_errors_are_one_line_and_exit_1(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo")
    unknown = sluice(root, "pr", "status", "4")
    assert unknown.exit_code == 1
    assert "error: local: there is no pull request #4 in repo" in unknown.output
    missing = sluice(root, "pr", "open", "--base", "main", "--head", "nope")
    assert missing.exit_code == 1 and "there is no branch 'nope'" in missing.output
    plain = tmp_path / "plain"
    plain.mkdir()
    env = {"GIT_CEILING_DIRECTORIES": str(tmp_path)}
    not_git = CliRunner(env=env).invoke(cli, ["pr", "list", "--repo", str(plain)])
    assert not_git.exit_code == 1 and "is not a git repository" in not_git.output
    gone = CliRunner().invoke(cli, ["pr", "list", "--repo", str(tmp_path / "gone")])
    assert gone.exit_code == 1 and "is not a directory" in gone.output


def test_the_default_user_is_git_s_user_name(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo")
    branch(root, "feature", {"b.txt": "b\n"})
    result = sluice(root, "pr", "open", "--base", "main", "--head", "feature", "-q")
    assert result.exit_code == 0, result.output
    assert status(root)["author"] == "alice"  # from git config user.name


# -- the whole flow, Spark scripted -------------------------------------------------------
# (`sluice demo`, tests/bot/entry/test_demo.py, runs the same commands on real Spark.)


def test_open_approve_merge_promote_on_the_scripted_runner(tmp_path: Path) -> None:
    root = shop(tmp_path)
    warehouse = Warehouse()
    head = customers_change(root)
    opened = sluice(root, "pr", "open", "--base", "main", "--head", "change", "--user", "alice",
                    runner_for=warehouse.runner)  # fmt: skip
    assert opened.exit_code == 0, opened.output
    data = status(root)
    assert conclusions(data) == {
        "sluice/approval": "failure", "sluice/pr-environment": "success",
        "sluice/prod-plan": "success", "sluice/tests": "success",
    }, data["checks"]  # fmt: skip
    assert "; waiting for @bob" in data["comment"].split("\n")[1]  # the verdict's headline
    assert "`sluice query pr_1 " in data["comment"]
    approved = sluice(root, "pr", "approve", "1", "--user", "bob", runner_for=warehouse.runner)
    assert conclusions(status(root))["sluice/approval"] == "success", approved.output
    merged = sluice(root, "pr", "merge", "1", runner_for=warehouse.runner)
    assert merged.exit_code == 0, merged.output
    data = status(root)
    assert data["state"] == "merged"
    assert git(root, "rev-parse", "main") == data["merge_sha"] != head
    [deploy] = [c for c in data["checks"] if c["name"] == "sluice/deploy"]
    assert deploy["conclusion"] == "success", deploy
    assert deploy["title"] == "Promoted by virtual update"
    assert "`pr_1` is removed (promoted to prod)" in data["comment"]
    # The build computed the PR's tables once; the merge only pointed prod's views at them.
    assert warehouse.built("preview").count("jaffle.customers") == 1
    kinds = {job["kind"] for job in warehouse.jobs} - {"preview"}
    assert kinds and not any(warehouse.built(kind) for kind in kinds), kinds
    assert warehouse.reads("jaffle.customers") == warehouse.reads("jaffle__pr_1.customers")
