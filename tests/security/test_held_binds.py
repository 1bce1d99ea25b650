"""Hostile: a repository's prod driver writes its root's class archive folder
(``<root>.sluice/jvm``, :mod:`sluice.core.spark.jvm`) while it dumps the archive, and
can rename a link over the archive between the check that a PR job's (or the Connect
server's) JVM may map it and the sandbox's mount of it. A sandbox shows the archive by
the descriptor of the file that was checked (``Profile.held``, bubblewrap
``--ro-bind-fd``), never by its path; every other read-only bind is of a path in no
folder a sandbox writes."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.bot.flow import tenancy
from sluice.bot.flow.checkout import Checkout
from sluice.core import errors, sandbox
from sluice.core.config import SparkSettings
from sluice.core.spark import jvm
from sluice.core.spark.connect import ConnectRunner, ConnectServer
from sluice.core.spark.session import SparkPaths
from sluice.core.spark.submit import SubmitRunner

A, B = "github:mallory/a", "github:acme/b"
SETTINGS = SparkSettings(master="local[2]")
CONNECT = SETTINGS.model_copy(update={"mode": "connect"})
PR: Any = {"environment": "pr", "steps": [], "job_id": "pr-job"}
PROD: Any = {"environment": "prod", "steps": [], "job_id": "prod-job"}
CHILD: Any = {"environment": "pr", "steps": [], "job_id": "c"}


@pytest.fixture
def roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[SparkPaths, Path]]:
    """A's Spark root, and a file of B's warehouse (what a link would lead to)."""
    monkeypatch.delenv(jvm.CACHE_ENV, raising=False)
    monkeypatch.setattr(sandbox, "isolation", lambda: "bwrap")
    work = Checkout(tmp_path / "work")
    a, b = (work.spark_at(tenancy.spark_root(repo)) for repo in (A, B))
    secret = b.warehouse / "sluice_r_b__db.db" / "t" / "part-0.parquet"
    secret.parent.mkdir(parents=True)
    secret.write_text("B's rows")
    a.logs.mkdir(parents=True)
    yield a, secret


def _archive(paths: SparkPaths) -> jvm.ClassArchive:
    archive = jvm.ClassArchive.for_spark(jvm.spark_home(), dict(os.environ), paths.class_archives)
    if archive is None:
        pytest.skip("no Java here: no class archive")
    archive.folder.mkdir(parents=True, exist_ok=True)
    return archive


def _swap(archive: jvm.ClassArchive, target: Path) -> None:
    """What A's prod driver does in the folder it writes: rename a link over the archive."""
    link = archive.folder / "swap"
    link.symlink_to(target)
    os.replace(link, archive.path)


def _driver(paths: SparkPaths, archive: jvm.ArchiveUse, name: str = "pr-job") -> sandbox.Profile:
    spec_path = paths.logs / f"{name}.json"
    spec_path.write_text("{}")
    home = paths.logs / f"{name}.home"
    home.mkdir(exist_ok=True)
    return SubmitRunner(SETTINGS, paths).profile(PR, spec_path, home, archive)


def test_a_pr_driver_binds_the_archive_it_checked_by_its_descriptor(
    roots: tuple[SparkPaths, Path],
) -> None:
    a, secret = roots
    archive = _archive(a)
    archive.path.write_bytes(b"classes")
    with SubmitRunner(SETTINGS, a)._class_archive(dict(os.environ), PR) as use:
        assert use.held is not None and use.binds == ((use.held, archive.path),)
        _swap(archive, secret)
        profile = _driver(a, use)
        launch = sandbox.wrap(["true"], profile)
        assert archive.path not in [Path(p) for p in profile.read]
        assert launch.fds == (use.held,)
        at = launch.argv.index("--ro-bind-fd")
        assert launch.argv[at : at + 3] == ["--ro-bind-fd", str(use.held), str(archive.path)]
        assert str(secret) not in launch.argv
    assert use.held is not None
    with pytest.raises(OSError):  # closed once the job is over
        os.fstat(use.held)


def test_the_connect_server_binds_the_archive_it_checked_by_its_descriptor(
    roots: tuple[SparkPaths, Path],
) -> None:
    a, secret = roots
    archive = _archive(a)
    archive.path.write_bytes(b"classes")
    server = ConnectServer(CONNECT, a)
    home = a.connect / "home"
    home.mkdir(parents=True)
    with server._archive(dict(os.environ)) as use:
        assert use.reads == [archive.path] and use.held is not None
        _swap(archive, secret)
        command = server.command(4040, archive=use)
        profile = server.profile(home, use)
        launch = sandbox.wrap(command, profile)
    assert f"-XX:SharedArchiveFile={archive.path}" in " ".join(command)
    assert profile.held == ((use.held, archive.path),)
    assert archive.path not in [Path(p) for p in profile.read]
    assert str(secret) not in launch.argv


@pytest.mark.parametrize("planted", ["link", "hard link", "empty", "fifo", "folder link"])
def test_only_a_regular_file_of_one_link_of_this_user_is_held(
    roots: tuple[SparkPaths, Path], planted: str
) -> None:
    a, secret = roots
    archive = _archive(a)
    if planted == "link":
        archive.path.symlink_to(secret)
    elif planted == "hard link":  # a file the driver sees, linked where the archive goes
        other = a.root / "t.parquet"
        a.root.mkdir(parents=True, exist_ok=True)
        other.write_text("A's rows")
        os.link(other, archive.path)
    elif planted == "empty":
        archive.path.touch()
    elif planted == "fifo":
        os.mkfifo(archive.path)
    else:  # the archive's folder itself a link (to a folder holding a file of that name)
        elsewhere = secret.parent / archive.path.name
        elsewhere.write_text("B's rows")
        archive.folder.rmdir()
        archive.folder.symlink_to(secret.parent)
    assert archive.mapped({}) == []
    with archive.held({}) as use:
        assert use.flags == [] and use.held is None and use.binds == ()
        assert _driver(a, use).held == ()


def _shown(argv: list[str], fds: tuple[int, ...]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=60, check=False, pass_fds=fds
    )


def test_a_real_sandbox_shows_the_checked_file_or_nothing_after_a_link_is_swapped_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bubblewrap mounts the open file (and fails if what it mounted is another): a link
    put at the path after the check changes nothing inside; a checked file removed
    meanwhile (a link renamed over it) starts nothing; without the descriptor handed
    over, nothing starts either."""
    monkeypatch.delenv(jvm.CACHE_ENV, raising=False)
    if sandbox.isolation() != "bwrap":
        pytest.skip("bubblewrap cannot run here")
    secret = tmp_path / "secret.db"
    secret.write_text("the state")
    archive = _archive(Checkout(tmp_path / "work").spark_at(tenancy.spark_root(A)))
    archive.path.write_bytes(b"checked classes")
    cat = ["/bin/cat", str(archive.path)]
    with archive.held({}) as use:
        # The checked file moved aside, a link where it was.
        os.rename(archive.path, archive.folder / "aside")
        archive.path.symlink_to(secret)
        assert archive.path.read_text() == "the state"  # outside: the link
        launch = sandbox.wrap(cat, sandbox.Profile("t", held=use.binds))
        done = _shown(launch.argv, launch.fds)
        assert (done.returncode, done.stdout) == (0, "checked classes"), done.stderr
        refused = _shown(launch.argv, ())
        assert refused.returncode != 0 and "the state" not in refused.stdout
    (archive.folder / "aside").rename(archive.path)
    with archive.held({}) as use:
        _swap(archive, secret)  # a link renamed over the checked file: it is gone
        launch = sandbox.wrap(cat, sandbox.Profile("t", held=use.binds))
        done = _shown(launch.argv, launch.fds)
        assert done.returncode != 0 and "the state" not in done.stdout


@pytest.mark.spark  # a spark-submit command, though bubblewrap starts none
def test_a_pr_job_whose_archive_is_swapped_before_its_sandbox_binds_it_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The archive checked and held, then a link renamed over it before the sandbox is
    made (a prod job publishing a new archive does the same): bubblewrap cannot bind the
    held file and the job never starts. The error says what happened in the user's terms
    and that running it again is the remedy (a driver lost: the worker retries it), not
    bubblewrap's own line, which goes to the job's log."""
    monkeypatch.delenv(jvm.CACHE_ENV, raising=False)
    if sandbox.isolation() != "bwrap":
        pytest.skip("bubblewrap cannot run here")
    secret = tmp_path / "secret.db"
    secret.write_text("the state")
    paths = Checkout(tmp_path / "work").spark_at(tenancy.spark_root(A))
    archive = _archive(paths)
    archive.path.write_bytes(b"checked classes")
    wrap = sandbox.wrap

    def swapped(argv: list[str], profile: sandbox.Profile) -> sandbox.Launch:
        assert profile.held, "the PR driver binds the archive it holds"
        _swap(archive, secret)  # between the check and the mount
        return wrap(argv, profile)

    monkeypatch.setattr(sandbox, "wrap", swapped)
    with pytest.raises(errors.DriverLost) as caught:
        SubmitRunner(SETTINGS, paths).run({**PR, "kind": "apply"})
    text = str(caught.value)
    assert text.startswith("Spark job pr-job did not start: the Spark class archive")
    assert "changed or vanished" in text
    assert "run the job again" in text and str(paths.logs / "pr-job.log") in text
    assert "bwrap" not in text and "/proc/self/fd" not in text and str(secret) not in text
    log = (paths.logs / "pr-job.log").read_text()
    assert "bwrap: " in log and "the state" not in log


@pytest.mark.spark  # a spark-submit command, though bubblewrap starts none
def test_a_connect_server_whose_archive_is_swapped_before_its_sandbox_binds_it_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Connect server (which a PR job in connect mode starts) the same way: its error
    says the class archive changed, and that running again is the remedy."""
    monkeypatch.delenv(jvm.CACHE_ENV, raising=False)
    if sandbox.isolation() != "bwrap":
        pytest.skip("bubblewrap cannot run here")
    secret = tmp_path / "secret.db"
    secret.write_text("the state")
    paths = Checkout(tmp_path / "work").spark_at(tenancy.spark_root(A))
    archive = _archive(paths)
    archive.path.write_bytes(b"checked classes")
    wrap = sandbox.wrap

    def swapped(argv: list[str], profile: sandbox.Profile) -> sandbox.Launch:
        assert profile.held, "the server binds the archive it holds"
        _swap(archive, secret)
        return wrap(argv, profile)

    monkeypatch.setattr(sandbox, "wrap", swapped)
    server = ConnectServer(CONNECT, paths)
    with pytest.raises(errors.DriverLost) as caught:
        server.endpoint()
    text = str(caught.value)
    assert text.startswith("the Spark Connect server did not start: the Spark class archive")
    assert "run the job again" in text and str(server.log_path) in text
    assert "bwrap" not in text and "/proc/self/fd" not in text and str(secret) not in text
    assert "bwrap: " in server.log_path.read_text()
    assert not server.running()


@pytest.mark.spark  # a spark-submit command, though bubblewrap starts none
def test_a_sandbox_that_fails_with_the_archive_in_place_is_not_blamed_on_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Control: bubblewrap failing for another reason, the held archive still the file at
    its path, keeps the plain failure (its output's error lines)."""
    monkeypatch.delenv(jvm.CACHE_ENV, raising=False)
    if sandbox.isolation() != "bwrap":
        pytest.skip("bubblewrap cannot run here")
    paths = Checkout(tmp_path / "work").spark_at(tenancy.spark_root(A))
    archive = _archive(paths)
    archive.path.write_bytes(b"checked classes")
    wrap = sandbox.wrap

    def broken(argv: list[str], profile: sandbox.Profile) -> sandbox.Launch:
        launch = wrap(argv, profile)
        at = launch.argv.index("--")
        bad = [*launch.argv[:at], "--ro-bind", str(tmp_path / "nowhere"), "/nowhere"]
        return sandbox.Launch(bad + launch.argv[at:], launch.isolation, launch.fds)

    monkeypatch.setattr(sandbox, "wrap", broken)
    with pytest.raises(errors.ExecutionError) as caught:
        SubmitRunner(SETTINGS, paths).run({**PR, "kind": "apply"})
    assert not isinstance(caught.value, errors.DriverLost)
    assert "failed before reporting an error" in str(caught.value)
    assert "class archive" not in str(caught.value)


def _folders(profile: sandbox.Profile) -> list[Path]:
    return [Path(os.path.abspath(p)) for p in profile.write]


def test_no_sandbox_binds_a_read_path_in_a_folder_any_sandbox_writes(
    roots: tuple[SparkPaths, Path],
) -> None:
    """The audit: each Spark sandbox of two roots (a prod driver dumping the archive, a
    PR driver mapping it, the Connect server, a Connect job's child) binds by path only
    what lies outside every folder any of them writes; the archive goes by descriptor."""
    a, _secret = roots
    work = Checkout(a.root.parent.parent)
    b = work.spark_at(tenancy.spark_root(B))
    b.logs.mkdir(parents=True, exist_ok=True)
    profiles: list[sandbox.Profile] = []
    for paths in (a, b):
        archive = _archive(paths)
        archive.path.write_bytes(b"classes")
        runner = SubmitRunner(SETTINGS, paths)
        with runner._class_archive(dict(os.environ), PR) as mapped:
            profiles.append(_driver(paths, mapped))
            assert profiles[-1].held, "the PR driver maps the archive"
        archive.path.unlink()
        with runner._class_archive(dict(os.environ), PROD) as dumping:
            assert dumping.folder == archive.folder
            profiles.append(_driver(paths, dumping, "prod-job"))
        server = ConnectServer(CONNECT, paths)
        profiles.append(server.profile(paths.connect / "home", jvm.ArchiveUse([])))
        child = ConnectRunner(CONNECT, paths)
        profiles.append(
            child.profile(CHILD, paths.logs / "c.json", paths.logs / "c.home", jvm.ArchiveUse([]))
        )
    written = [folder for profile in profiles for folder in _folders(profile)]
    for profile in profiles:
        for read in profile.read:
            path = Path(os.path.abspath(read))
            own = [f for f in _folders(profile) if f == path or f in path.parents]
            if own:
                continue  # shown by its own writable folder's bind, never bound itself
            inside = [f for f in written if f == path or f in path.parents]
            assert not inside, f"{profile.name} binds {path}, which {inside} hold"
