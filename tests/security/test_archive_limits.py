"""A commit's archive is held to the service's limits while it streams in: total size,
size per file, number of members, path depth and length, extended headers. The first
member over a limit stops the extraction (a gzip bomb at its first header, having read a
few blocks), nothing is left in the destination, and the message names the limit, says
it is a setting of the service, and gives the sizes.

Bombs are built here: a tar header declaring 2 GiB of zeros, the zeros as one gzip member
of 16 MiB of zeros repeated (gzip allows a file of several members), so the archive is a
couple of MB and costs nothing to build. The forges (fake GitHub and GitLab at the wire,
the local forge on a real git repository) use the same extractor with their limits.
"""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import tarfile
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import responses

from sluice.bot.forge.archive import TREE_LIMITS, TreeLimits, extract
from sluice.bot.forge.base import ForgeError, UnusableTree
from sluice.bot.forge.github import GitHubForge, github_client
from sluice.bot.forge.gitlab import GitLabForge, gitlab_client
from sluice.bot.forge.local import LocalForge
from tests.helpers.github_wire import FakeGitHub
from tests.helpers.gitlab_wire import FakeGitLab, archive_prefix

GiB = 1024**3
MiB = 1024**2
SHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
ZEROS_16MIB = gzip.compress(b"\0" * (16 * MiB), compresslevel=9)


class Counting(io.RawIOBase):
    """A file read through, counting the (compressed) bytes read."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray) -> int:  # type: ignore[override]
        chunk = self.data[self.at : self.at + len(buffer)]
        buffer[: len(chunk)] = chunk
        self.at += len(chunk)
        return len(chunk)


def header(name: str, size: int = 0, kind: bytes = tarfile.REGTYPE, link: str = "") -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.type, info.linkname, info.mode = size, kind, link, 0o644
    return info.tobuf(format=tarfile.PAX_FORMAT)


def padding(size: int) -> bytes:
    return b"\0" * (-size % tarfile.BLOCKSIZE)


def small(name: str, data: bytes) -> bytes:
    return header(name, len(data)) + data + padding(len(data))


def bomb(members: list[tuple[str, int]], before: bytes = b"", top: str = "") -> bytes:
    """A gzip'd tar of ``members`` (name, size in 16 MiB units of zeros)."""
    parts = [gzip.compress(before + (header(top + "/", kind=tarfile.DIRTYPE) if top else b""))]
    for name, units in members:
        parts.append(gzip.compress(header(f"{top}/{name}" if top else name, units * 16 * MiB)))
        parts.extend([ZEROS_16MIB] * units)
    parts.append(gzip.compress(b"\0" * 2 * tarfile.BLOCKSIZE))
    return b"".join(parts)


def plain(*members: bytes) -> bytes:
    return b"".join(members) + b"\0" * 2 * tarfile.BLOCKSIZE


def refused(archive: bytes | io.RawIOBase, dest: Path, limits: TreeLimits = TREE_LIMITS,
            strip_top: bool = False) -> UnusableTree:  # fmt: skip
    source = archive if isinstance(archive, io.RawIOBase) else io.BytesIO(archive)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with pytest.raises(UnusableTree) as caught:
        extract(source, dest, forge="GitHub", sha=SHA[:7], strip_top=strip_top,  # type: ignore[arg-type]
                limits=limits)  # fmt: skip
    assert list(dest.iterdir()) == []  # nothing written
    assert sorted(p.name for p in dest.parent.iterdir()) == [dest.name]  # no staging left
    return caught.value


# --- bombs ----------------------------------------------------------------------------


def test_a_2_gib_gzip_bomb_is_refused_at_its_header(tmp_path: Path) -> None:
    archive = bomb([("models/zeros.sql", 128)])  # 2 GiB of zeros
    assert len(archive) < 4 * MiB
    source = Counting(archive)
    started = time.perf_counter()
    error = refused(source, tmp_path / "tree")
    assert time.perf_counter() - started < 2.0
    assert source.at < 256 * 1024  # a few blocks read, not the 2 GiB
    text = str(error)
    assert "'models/zeros.sql' is 2,147,483,648 bytes" in text
    assert (
        "the limit is 52,428,800 bytes per file (SLUICE_TREE_FILE_BYTES, a setting of the service"
        in text
    )
    assert "operator of the Sluice service" in str(error.hint)


def test_many_files_under_the_file_limit_stop_at_the_total(tmp_path: Path) -> None:
    archive = bomb([(f"seeds/{n}.csv", 2) for n in range(40)])  # 40 x 32 MiB = 1.25 GiB
    source = Counting(archive)
    limits = TreeLimits(total_bytes=100 * MiB, file_bytes=40 * MiB)
    error = refused(source, tmp_path / "tree", limits)
    assert "the files reach 134,217,728 bytes at 'seeds/3.csv'" in str(error)
    assert "104,857,600 bytes of all files together (SLUICE_TREE_TOTAL_BYTES" in str(error)
    assert source.at < len(archive) // 4  # stopped early


def test_a_small_limit_passed_in_applies(tmp_path: Path) -> None:
    archive = gzip.compress(plain(small("a.sql", b"x" * 2000), small("b.sql", b"y" * 2000)))
    error = refused(archive, tmp_path / "t1" / "tree", TreeLimits(total_bytes=3000))
    assert "reach 4,000 bytes at 'b.sql'" in str(error)
    error = refused(archive, tmp_path / "t2" / "tree", TreeLimits(file_bytes=1999))
    assert "'a.sql' is 2,000 bytes" in str(error)
    extract(io.BytesIO(archive), tmp_path / "t3", forge="GitHub", sha="x",
            limits=TreeLimits(total_bytes=4000, file_bytes=2000))  # fmt: skip
    assert sorted(p.name for p in (tmp_path / "t3").iterdir()) == ["a.sql", "b.sql"]


@pytest.mark.parametrize("compress", [gzip.compress, zlib.compress, lambda b: b],
                         ids=["gzip", "not-an-archive", "plain"])  # fmt: skip
def test_too_many_members(tmp_path: Path, compress: object) -> None:
    archive = plain(*[small(f"m/{n}.sql", b"") for n in range(30)])
    if compress is zlib.compress:  # not tar, not gzip: unreadable, not a limit
        with pytest.raises(ForgeError) as caught:
            extract(io.BytesIO(zlib.compress(archive)), tmp_path / "tree", forge="GitHub",
                    sha="x", limits=TreeLimits(files=10))  # fmt: skip
        assert not isinstance(caught.value, UnusableTree)
        return
    error = refused(compress(archive), tmp_path / "tree", TreeLimits(files=10))  # type: ignore[operator]
    assert "more than 10 files, folders and links" in str(error)


def test_too_deep(tmp_path: Path) -> None:
    deep = "/".join(["d"] * 40) + "/x.sql"
    error = refused(plain(small(deep, b"x")), tmp_path / "tree")
    assert "is 41 folders deep; the limit is 32 folders deep (SLUICE_TREE_DEPTH" in str(error)


def test_too_long_a_path(tmp_path: Path) -> None:
    long = "m/" + "x" * 2000 + ".sql"  # written by a pax header
    error = refused(plain(small(long, b"x")), tmp_path / "tree")
    assert "a path is 2,006 characters" in str(error)
    assert "1,024 characters per path (SLUICE_TREE_PATH_CHARS" in str(error)


def test_a_huge_extended_header_is_refused_before_it_is_read(tmp_path: Path) -> None:
    for kind in (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.GNUTYPE_LONGNAME):
        info = tarfile.TarInfo("././@PaxHeader")
        info.type, info.size = kind, 64 * 16 * MiB  # 1 GiB of "header"
        source = Counting(b"".join([gzip.compress(info.tobuf(format=tarfile.USTAR_FORMAT)
                                                  if kind != tarfile.GNUTYPE_LONGNAME else
                                                  info.tobuf(format=tarfile.GNU_FORMAT)),
                                    *[ZEROS_16MIB] * 64]))  # fmt: skip
        started = time.perf_counter()
        error = refused(source, tmp_path / kind.decode() / "tree")
        assert "an extended header of 1,073,741,824 bytes" in str(error)
        assert source.at < 256 * 1024 and time.perf_counter() - started < 2.0


def test_sparse_files_are_refused(tmp_path: Path) -> None:
    info = tarfile.TarInfo("big.sql")
    info.type, info.size = tarfile.GNUTYPE_SPARSE, 0
    archive = plain(info.tobuf(format=tarfile.GNU_FORMAT))
    assert "sparse" in str(refused(archive, tmp_path / "tree"))


def pax_global(size: int) -> bytes:
    info = tarfile.TarInfo("pax_global_header")
    record = b"comment=" + b"x" * size
    line = b" " + record + b"\n"
    width = len(str(len(line) + 7))
    line = str(len(line) + width).encode() + line
    info.type, info.size = tarfile.XGLTYPE, len(line)
    return info.tobuf(format=tarfile.USTAR_FORMAT) + line + padding(len(line))


def test_extended_headers_cannot_run_on(tmp_path: Path) -> None:
    archive = plain(*[pax_global(100) for _ in range(20)], small("a.sql", b"x"))
    assert "more than 8 extended headers in a row" in str(refused(archive, tmp_path / "tree"))


def test_headers_cannot_hold_more_than_the_limits_allow(tmp_path: Path) -> None:
    # Three extended headers of 60 KiB, each allowed, are more than an archive within
    # small limits holds besides its files: the stream is cut there.
    archive = plain(*[pax_global(60_000) for _ in range(3)], small("a.sql", b"x"))
    error = refused(gzip.compress(archive), tmp_path / "tree", TreeLimits(total_bytes=10, files=2))
    assert "holds more than its files (headers, padding) allow" in str(error)
    extract(io.BytesIO(archive), tmp_path / "ok", forge="GitHub", sha="x")  # the defaults
    assert (tmp_path / "ok" / "a.sql").read_bytes() == b"x"


# --- the old refusals still hold while streaming ----------------------------------------


@pytest.mark.parametrize(
    ("member", "why"),
    [
        (small("../evil", b"x"), "'..' in the path"),
        (small("/etc/evil", b"x"), "absolute path"),
        (header("link", kind=tarfile.SYMTYPE, link="/etc/passwd"), "absolute path"),
        (header("up", kind=tarfile.SYMTYPE, link="../../x"), "points outside"),
        (header("hard", kind=tarfile.LNKTYPE, link="../x"), "points outside"),
        (header("dev", kind=tarfile.CHRTYPE), "special file"),
        (header("fifo", kind=tarfile.FIFOTYPE), "special file"),
    ],
)
def test_unsafe_members_after_safe_ones_leave_nothing(
    tmp_path: Path, member: bytes, why: str
) -> None:
    archive = gzip.compress(plain(small("models/a.sql", b"SELECT 1"), member))
    assert why in str(refused(archive, tmp_path / "tree"))


def test_a_link_escaping_through_another_link_is_refused_on_disk(tmp_path: Path) -> None:
    archive = plain(header("here", kind=tarfile.SYMTYPE, link="."),
                    header("escape", kind=tarfile.SYMTYPE, link="here/.."),
                    small("escape/evil", b"x"))  # fmt: skip
    error = refused(archive, tmp_path / "tree")
    assert "outside the destination" in str(error)
    assert not (tmp_path / "evil").exists()


# --- the forges -----------------------------------------------------------------------

LIMITS = TreeLimits(total_bytes=64 * MiB, file_bytes=20 * MiB)


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub(repo="octo/warehouse")
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        fake.install(mock)
        yield fake


def test_github_fetch_tree_refuses_a_bomb_with_its_limits(
    github: FakeGitHub, tmp_path: Path
) -> None:
    github.trees[SHA] = bomb([("ok.sql", 1), ("zeros.sql", 128)], top=f"octo-warehouse-{SHA[:7]}")
    client = github_client(repo="octo/warehouse", token="ghp_" + "t0ken" * 8,
                           seconds_between_requests=None, seconds_between_writes=None)  # fmt: skip
    forge = GitHubForge(client, "octo/warehouse", tree_limits=LIMITS)
    with pytest.raises(UnusableTree, match=r"'zeros.sql' is 2,147,483,648 bytes; the limit is "
                       r"20,971,520 bytes per file \(SLUICE_TREE_FILE_BYTES"):  # fmt: skip
        forge.fetch_tree(SHA, tmp_path / "tree")
    assert list((tmp_path / "tree").iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tree"]


def test_gitlab_fetch_tree_refuses_a_bomb_with_its_limits(tmp_path: Path) -> None:
    fake = FakeGitLab()
    fake.trees[SHA] = bomb([("zeros.sql", 8)], top=archive_prefix(fake.project, SHA))
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        fake.install(mock)
        forge = GitLabForge(gitlab_client(fake.url, "glpat-" + "x" * 20), fake.project,
                            tree_limits=LIMITS)  # fmt: skip
        with pytest.raises(UnusableTree, match=r"'zeros.sql' is 134,217,728 bytes"):
            forge.fetch_tree(SHA, tmp_path / "tree")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tree"]


def _git(repo: Path, *args: str, input: bytes | None = None) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"}  # fmt: skip
    done = subprocess.run(["git", *args], cwd=repo, env=env, input=input, check=True,
                          capture_output=True)  # fmt: skip
    return done.stdout.decode().strip()


@pytest.fixture
def big_commit(tmp_path: Path) -> tuple[Path, str]:
    """A repository whose commit holds a 64 MiB file of zeros (a small blob for git) and
    a few files."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    zeros = _git(repo, "hash-object", "-w", "--stdin", input=b"\0" * (64 * MiB))
    small_blob = _git(repo, "hash-object", "-w", "--stdin", input=b"SELECT 1\n")
    tree = _git(repo, "mktree", input=(f"100644 blob {small_blob}\ta.sql\n"
                                       f"100644 blob {zeros}\tzeros.sql\n").encode())  # fmt: skip
    return repo, _git(repo, "commit-tree", tree, "-m", "big")


def test_the_local_forge_applies_the_limits_while_git_archive_streams(
    big_commit: tuple[Path, str], tmp_path: Path
) -> None:
    repo, sha = big_commit
    forge = LocalForge(repo, tree_limits=TreeLimits(file_bytes=8 * MiB))
    dest = tmp_path / "out" / "tree"
    with pytest.raises(UnusableTree, match=r"'zeros.sql' is 67,108,864 bytes; the limit is "
                       r"8,388,608 bytes per file \(SLUICE_TREE_FILE_BYTES, a setting of the service"):  # fmt: skip
        forge.fetch_tree(sha, dest)
    assert list(dest.iterdir()) == []
    assert sorted(p.name for p in dest.parent.iterdir()) == ["tree"]


def test_the_local_forge_had_no_limit_and_now_has_the_defaults(
    big_commit: tuple[Path, str], tmp_path: Path
) -> None:
    repo, sha = big_commit
    with pytest.raises(UnusableTree, match="SLUICE_TREE_FILE_BYTES"):
        LocalForge(repo).fetch_tree(sha, tmp_path / "tree")
    LocalForge(repo, tree_limits=TreeLimits(file_bytes=64 * MiB)).fetch_tree(sha, tmp_path / "ok")
    assert (tmp_path / "ok" / "zeros.sql").stat().st_size == 64 * MiB


def test_the_local_forge_counts_members(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    blob = _git(repo, "hash-object", "-w", "--stdin", input=b"x")
    tree = _git(repo, "mktree", input="".join(f"100644 blob {blob}\tf{n}.sql\n"
                                              for n in range(40)).encode())  # fmt: skip
    sha = _git(repo, "commit-tree", tree, "-m", "many")
    with pytest.raises(UnusableTree, match="more than 25 files, folders and links"):
        LocalForge(repo, tree_limits=TreeLimits(files=25)).fetch_tree(sha, tmp_path / "tree")
    LocalForge(repo, tree_limits=TreeLimits(files=40)).fetch_tree(sha, tmp_path / "ok")
    assert len(list((tmp_path / "ok").iterdir())) == 40


# --- the limits are the service's settings ------------------------------------------------


@pytest.mark.parametrize("forge", ["github", "gitlab"])
def test_the_service_settings_set_the_limits_of_each_forge(
    forge: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from sluice.bot.entry.app import forge_factory
    from sluice.bot.entry.settings import ServiceSettings
    from sluice.bot.events.neutral import JanitorEvent

    for name, value in {"TOTAL_BYTES": "4096", "FILE_BYTES": "1024", "FILES": "7",
                        "DEPTH": "3", "PATH_CHARS": "64"}.items():  # fmt: skip
        monkeypatch.setenv(f"SLUICE_TREE_{name}", value)
    settings = ServiceSettings(webhook_secret="s", gitlab_webhook_secret="g", github_token="t",
                               gitlab_token="t", workdir=tmp_path)  # type: ignore[arg-type]  # fmt: skip
    limits = TreeLimits(total_bytes=4096, file_bytes=1024, files=7, depth=3, path_chars=64)
    assert settings.tree_limits() == limits
    built = forge_factory(settings)(JanitorEvent(forge=forge, repo="octo/warehouse",
                                                 installation_id=None))  # fmt: skip
    assert built.tree_limits == limits  # type: ignore[attr-defined]


def test_a_limit_must_be_positive(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from pydantic import ValidationError

    from sluice.bot.entry.settings import ServiceSettings

    monkeypatch.setenv("SLUICE_TREE_FILES", "0")
    with pytest.raises(ValidationError, match="tree_files"):
        ServiceSettings(webhook_secret="s", workdir=tmp_path)  # type: ignore[arg-type]


# --- the Action's workspace is held to the same limits -------------------------------------


def test_the_actions_workspace_is_held_to_the_limits_without_its_git_folder(
    tmp_path: Path,
) -> None:
    from sluice.bot.entry.action import copy_workspace

    workspace = tmp_path / "workspace"
    (workspace / "models").mkdir(parents=True)
    (workspace / "models" / "a.sql").write_text("SELECT 1")
    (workspace / ".git" / "objects").mkdir(parents=True)
    (workspace / ".git" / "objects" / "pack").write_bytes(b"\0" * 50_000)  # not counted
    limits = TreeLimits(total_bytes=4000, file_bytes=2000, files=10)
    copy_workspace(workspace, tmp_path / "ok", sha="abc1234", limits=limits)
    assert (tmp_path / "ok" / "models" / "a.sql").read_text() == "SELECT 1"
    assert not (tmp_path / "ok" / ".git").exists()

    (workspace / "seeds").mkdir()
    (workspace / "seeds" / "big.csv").write_bytes(b"x" * 2001)
    with pytest.raises(UnusableTree, match=r"'seeds/big.csv' is 2,001 bytes; the limit is "
                       r"2,000 bytes per file \(SLUICE_TREE_FILE_BYTES"):  # fmt: skip
        copy_workspace(workspace, tmp_path / "big", sha="abc1234", limits=limits)
    assert not (tmp_path / "big").exists()  # refused before anything is copied
    (workspace / "seeds" / "big.csv").unlink()
    for index in range(12):
        (workspace / "seeds" / f"{index}.csv").write_text("a\n")
    with pytest.raises(UnusableTree, match="more than 10 files, folders and links"):
        copy_workspace(workspace, tmp_path / "many", sha="abc1234", limits=limits)
