"""Hostile probes inside every sandboxed process kind (``sluice.core.sandbox``).

Each probe is what a pull request's code would try from inside the process that runs or
renders it: read the state database, another repository's tree, the service's
``/proc/<pid>/environ`` and home; write outside its own tmp; open a socket; fork without
end; allocate past its limit. Every probe runs under the very profile the real caller
uses, after the limits the real child sets itself, and fails; the same probe without the
sandbox (the control) succeeds, so each assertion can fail.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from sluice.core import sandbox
from sluice.core.config import SparkSettings
from sluice.core.errors import ConfigError, ExecutionError
from sluice.core.model import jinja
from sluice.core.model.pycode import macros
from sluice.core.spark import jvm
from sluice.core.spark.session import SparkPaths
from sluice.core.spark.submit import SubmitRunner

pytestmark = pytest.mark.skipif(
    sandbox.isolation() != "bwrap", reason="needs bubblewrap (scripts/ensure-bwrap.sh)"
)

_PROBE = textwrap.dedent(
    """
    import json, os, socket, sys
    targets = json.loads(sys.argv[1])
    limit = targets.pop("limit")
    if limit:
        sys.path.insert(0, targets["sluice_root"])
        if limit == "jinja":
            from sluice.core.model.jinja_sandbox import _limit_self
            _limit_self()
        else:
            from sluice.core.model.pycode.child import _limit
            _limit()
    out = {}
    def attempt(name, fn):
        try:
            fn()
            out[name] = True
        except BaseException as exc:
            out[name] = False
    def read(path):
        with open(path, "rb") as f:
            f.read(1)
    attempt("state", lambda: read(targets["state"]))
    attempt("other_repo", lambda: read(targets["other_repo"]))
    attempt("environ", lambda: read(f"/proc/{targets['parent']}/environ"))
    attempt("home", lambda: os.listdir(targets["home"]))
    def write(path):
        with open(path, "w") as f:
            f.write("x")
    attempt("write_project", lambda: write(os.path.join(targets["project"], "x.txt")))
    def user_namespace():
        import ctypes
        def unshare():
            if ctypes.CDLL(None, use_errno=True).unshare(0x10000000) != 0:  # CLONE_NEWUSER
                raise OSError(ctypes.get_errno(), "unshare")
        in_child(unshare)()
    pending = [("userns", user_namespace)]
    attempt("write_outside", lambda: write(targets["outside"]))
    def connect():
        s = socket.create_connection(("127.0.0.1", targets["port"]), timeout=2)
        s.close()
    attempt("socket", connect)
    def fork_bomb():
        pids = []
        try:
            for _ in range(targets["forks"]):
                pid = os.fork()
                if pid == 0:
                    import time
                    time.sleep(5)
                    os._exit(0)
                pids.append(pid)
        finally:
            for pid in pids:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
    attempt("fork_bomb", fork_bomb)
    def in_child(fn):
        # Memory is bounded by rlimits (an error) or a cgroup (the kernel kills): the
        # attempt runs in a child, and works when the child finishes it.
        def run():
            pid = os.fork()
            if pid == 0:
                try:
                    fn()
                    os._exit(0)
                except BaseException:
                    os._exit(1)
            _, status = os.waitpid(pid, 0)
            if status != 0:
                raise MemoryError(status)
        return run
    size = targets["allocate"]
    def touch(buffer):
        for i in range(0, size, 4096):
            buffer[i] = 1
    attempt("allocate", in_child(lambda: touch(bytearray(size))))
    import mmap
    attempt("shared", in_child(lambda: touch(mmap.mmap(-1, size))))
    fill = os.path.join(targets["tmp"], "fill")
    def fill_tmp():
        with open(fill, "wb") as f:
            for _ in range(size // 2**20 + 1):
                f.write(b"x" * 2**20)
    attempt("tmpfs", in_child(fill_tmp))
    for name, fn in pending:
        attempt(name, fn)
    os.path.exists(fill) and os.remove(fill)
    print(json.dumps(out))
    """
)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[dict[str, object]]:
    """The service's secrets around a project: a state database, another repository,
    a home, a listening socket."""
    project = tmp_path / "repo"
    (project / "models").mkdir(parents=True)
    state = tmp_path / "workdir" / "state.db"
    state.parent.mkdir()
    state.write_bytes(b"SQLite format 3\x00secret")
    other = tmp_path / "other-repo" / "models" / "secret.sql"
    other.parent.mkdir(parents=True)
    other.write_text("SELECT 'secret'")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".netrc").write_text("machine forge login bot password secret")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    try:
        yield {
            "state": str(state),
            "other_repo": str(other),
            "parent": os.getpid(),
            "home": str(home),
            "project": str(project),
            "outside": str(tmp_path / "written.txt"),
            "port": listener.getsockname()[1],
            "sluice_root": str(Path(sandbox.__file__).resolve().parents[2]),
        }
    finally:
        listener.close()


PROCESSES = 256
"""The process ceiling of the Spark sandboxes here (``SLUICE_SANDBOX_PROCESSES``)."""
DRIVER_MEMORY = "256m"


def _probe(
    argv_for: Callable[[list[str]], list[str]],
    world: dict[str, object],
    limit: str,
    memory: int,
    tmp: str = "/tmp",
) -> dict[str, bool]:
    """The probes' verdicts; ``memory``: the process's memory limit (one more than it
    is allocated), a fork bomb forks past :data:`PROCESSES` (every child limits itself
    to fewer); ``tmp``: the folder the tmpfs probe fills (the sandbox's own ``/tmp``)."""
    forks = PROCESSES + 64
    targets = json.dumps({**world, "limit": limit, "forks": forks, "allocate": memory + 2**28,
                          "tmp": tmp})  # fmt: skip
    argv = argv_for([sys.executable, "-I", "-c", _PROBE, targets])
    done = subprocess.run(argv, capture_output=True, timeout=120, check=False, env={})
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    result: dict[str, bool] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return result


def _profiles(
    world: dict[str, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, tuple[sandbox.Profile, str, int]]:
    """Each process kind's profile as its real caller builds it, the limits a light child
    sets itself, and the memory limit in force (a Spark process's from its profile)."""
    from sluice.core.model import jinja_sandbox
    from sluice.core.model.pycode import child
    from sluice.core.spark.connect import ConnectServer

    monkeypatch.setenv(sandbox.PROCESSES_SETTING, str(PROCESSES))
    project = Path(str(world["project"]))
    conf = {"spark.driver.memory": DRIVER_MEMORY}
    paths = SparkPaths(root=tmp_path / "spark", logs=tmp_path / "logs")
    runner = SubmitRunner(SparkSettings(master="local[1]", conf=conf), paths)
    spec_path = tmp_path / "logs" / "job.json"
    spec_path.parent.mkdir()
    spec_path.write_text("{}")
    spec = {"job_id": "j", "kind": "apply", "steps": [{"python": {"root": str(project)}}]}
    driver = runner.profile(spec, spec_path, tmp_path / "logs" / "job.home", jvm.ArchiveUse([]))  # type: ignore[arg-type]
    server = ConnectServer(SparkSettings(master="local[1]", mode="connect", conf=conf), paths)
    served = server.profile(paths.connect / "home")
    found = {
        "jinja": (jinja.PROFILE, "jinja", jinja_sandbox.MEMORY_BYTES),
        "macros": (macros.profile(project), "macros", child.MEMORY_BYTES),
    }
    for name, profile in (("driver", driver), ("connect-server", served)):
        assert profile.limits is not None and profile.limits.processes == PROCESSES
        found[name] = (profile, "", profile.limits.memory)
    return found


def _escaped(confined: dict[str, bool], world: dict[str, object]) -> set[str]:
    # A write "works" inside when it lands in the sandbox's own tmp: what counts is the host.
    confined["write_outside"] = Path(str(world["outside"])).exists()
    confined["write_project"] = Path(str(world["project"]), "x.txt").exists()
    return {name for name, worked in confined.items() if worked}


# A Spark process's probes fork hundreds of processes and fill gigabytes of memory: `slow`,
# out of the editing loop (`make test` runs them, and the control below).
_SPARK_KINDS = [pytest.param(k, marks=pytest.mark.slow) for k in ("driver", "connect-server")]


@pytest.mark.parametrize("kind", ["jinja", "macros", *_SPARK_KINDS])
def test_every_probe_fails_inside_the_sandbox(
    kind: str, world: dict[str, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    profile, limit, memory = _profiles(world, tmp_path, monkeypatch)[kind]
    confined = _probe(lambda argv: sandbox.wrap(argv, profile).argv, world, limit, memory)
    escaped = _escaped(confined, world)
    # The Connect server listens on the host's loopback (its clients send its token).
    expected = {"socket"} if profile.network == "host" else set()
    assert escaped == expected, f"{kind}: {sorted(escaped)} worked"


@pytest.mark.slow
def test_every_probe_works_without_the_sandbox(
    world: dict[str, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: each probe would work, so each assertion above can fail."""
    memory = max(m for _, _, m in _profiles(world, tmp_path, monkeypatch).values())
    # The host's tmpfs, as the sandbox's /tmp is one (the host's /tmp may be a disk).
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else str(tmp_path)
    control = _probe(lambda argv: argv, world, "", memory, tmp=shm)
    escaped = _escaped(control, world)
    assert escaped >= {"state", "other_repo", "environ", "home", "write_outside", "socket"}
    assert escaped >= {"fork_bomb", "allocate", "shared", "tmpfs", "userns"}


def test_the_project_is_read_only_and_the_warehouse_writable(tmp_path: Path) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    (project / "m.sql").write_text("SELECT 1")
    spark = tmp_path / "spark"
    profile = sandbox.Profile("driver", read=(project,), write=(spark,), java=True, light=False)
    script = (
        "import os,sys; print(open(sys.argv[1]).read());"
        "open(os.path.join(sys.argv[2], 'w.txt'), 'w').write('ok')"
    )
    argv = [sys.executable, "-I", "-c", script, str(project / "m.sql"), str(spark)]
    done = subprocess.run(sandbox.wrap(argv, profile).argv, capture_output=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().strip() == "SELECT 1"
    assert (spark / "w.txt").read_text() == "ok"


def test_the_sandbox_has_its_own_pid_namespace_and_no_capability() -> None:
    script = "print(os.getpid(), open('/proc/self/status').read())"
    argv = [sys.executable, "-I", "-c", "import os;" + script]
    done = subprocess.run(sandbox.wrap(argv, jinja.PROFILE).argv, capture_output=True, check=True)
    pid, status = done.stdout.decode().split(" ", 1)
    assert int(pid) < 10  # pid 1 is bubblewrap's init in the new namespace
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    assert fields["CapEff"].strip() == "0000000000000000"
    assert fields["NoNewPrivs"].strip() == "1"
    assert int(fields["Uid"].split()[0]) != 0


def test_the_real_macro_child_starts_in_a_pid_namespace_of_its_own(tmp_path: Path) -> None:
    """Not only the profiles: the real children start in a PID namespace of their own."""
    (tmp_path / "macros").mkdir()
    child = macros.PythonMacros(tmp_path)
    try:
        pid = child._process.pid
        assert os.readlink(f"/proc/{pid}/ns/pid") == os.readlink("/proc/self/ns/pid")
        # the process we started is bubblewrap; its sandboxed child is in another one
        ours = os.readlink("/proc/self/ns/pid")
        namespaces: set[str] = set()
        deadline = time.monotonic() + 10
        # (first a shell may join cgroups, its commands in our namespace, then it becomes
        # bubblewrap, which forks the sandbox soon after)
        while not namespaces - {ours} and time.monotonic() < deadline:
            for inner in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
                try:  # (a short-lived helper bubblewrap forks first may be gone already)
                    namespaces.add(os.readlink(f"/proc/{inner}/ns/pid"))
                except FileNotFoundError:
                    continue
            time.sleep(0.05)
        assert namespaces - {ours}
    finally:
        child.close()


def test_no_sandbox_refuses_pull_request_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(sandbox.SETTING, "off")
    assert sandbox.isolation() == "none"
    with pytest.raises(ConfigError, match="SLUICE_SANDBOX"):
        sandbox.require_isolation("a pull request's Python macros")
    assert "refused" in sandbox.describe()


def test_an_unknown_setting_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(sandbox.SETTING, "maybe")
    with pytest.raises(ConfigError, match="auto, bwrap, setpriv or off"):
        sandbox.isolation()


def test_every_cli_command_is_non_dumpable_before_it_starts_a_child() -> None:
    """``sluice`` (serve, action, pr, demo and every CLI command go through its main)
    makes itself non-dumpable first; the control: a plain Python process is dumpable."""
    probe = textwrap.dedent(
        """
        import ctypes, sys, click
        import sluice.cli as entry
        def dumpable():
            print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))  # PR_GET_DUMPABLE
        entry.cli.add_command(click.Command("probe", callback=dumpable))
        sys.argv = ["sluice", "probe"]
        {call}
        """
    )
    for call, expected in (("entry.main()", "0"), ("dumpable()", "1")):
        done = subprocess.run(
            [sys.executable, "-c", probe.format(call=call)], capture_output=True, check=True
        )
        assert done.stdout.decode().strip() == expected


def test_the_loaders_parsing_child_has_no_network_and_writes_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The prefetch child runs no project code, but it is still confined: what a parser
    bug could reach (a socket, a file) is refused; the control in this process works."""
    from sluice.core.model import prefetch

    # Whether the loader forks (cores, threads: a pytest-xdist worker has some) is not
    # what is tested here; the child's confinement is.
    monkeypatch.setattr(prefetch, "_may_fork", lambda: True)

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    files = [tmp_path / f"m{i}.sql" for i in range(4)]

    def parse(file: Path) -> None:
        found: dict[str, bool] = {}
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            found["socket"] = True
        except OSError:
            found["socket"] = False
        try:
            (tmp_path / f"{file.name}.out").write_text("x")
            found["write"] = True
        except OSError:
            found["write"] = False
        entries[str(file)] = found

    try:
        entries: dict[str, dict[str, bool]] = {}
        parse(files[0])  # the control, here
        assert entries[str(files[0])] == {"socket": True, "write": True}
        child = prefetch.start(files, parse, entries, minimum=1)
        assert child is not None
        made: dict[str, dict[str, bool]] = {}
        assert child.join(made) == 2
        assert all(v == {"socket": False, "write": False} for v in made.values()), made
    finally:
        listener.close()


@pytest.mark.slow  # a Connect server's relay and a child that probes it
def test_the_connect_job_child_reaches_only_its_server_through_the_relay(
    world: dict[str, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The warm default's job child (a PR's Python runs there) has no network: the
    server's port is reachable only through the socket the service relays to it."""
    from sluice.core.spark.connect import RELAY_ENV, ConnectRunner

    port = int(str(world["port"]))

    class Server:  # the running server's connection, as ConnectServer gives it
        pid = None  # no JVM of ours to watch: the job is not stopped for its death

        def connection(self) -> tuple[str, str]:
            return f"sc://localhost:{port}", "token"

    runner = ConnectRunner(
        SparkSettings(
            master="local[1]", mode="connect", conf={"spark.driver.memory": DRIVER_MEMORY}
        ),
        SparkPaths(root=tmp_path / "spark", logs=tmp_path / "logs"),
        server=Server(),  # type: ignore[arg-type]
    )
    spec: dict[str, object] = {"job_id": "j1", "kind": "apply", "steps": []}
    env: dict[str, str] = {}
    runner._preflight(spec, env)  # type: ignore[arg-type]
    try:
        home = tmp_path / "logs" / "j1.home"  # the job's own home, not the service's
        profile = runner.profile(spec, tmp_path / "j1.json", home, jvm.ArchiveUse([]))  # type: ignore[arg-type]
        assert profile.network == "none"
        (tmp_path / "j1.json").write_text("{}")
        assert profile.limits is not None
        monkeypatch.setenv(sandbox.PROCESSES_SETTING, str(PROCESSES))
        profile = replace(profile, limits=sandbox.Limits.for_spark(profile.limits.memory))
        confined = _probe(
            lambda argv: sandbox.wrap(argv, profile).argv, world, "", profile.limits.memory
        )
        assert not _escaped(confined, world)
        script = (
            "import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]);"
            "s.sendall(b'hello'); print('relayed')"
        )
        argv = [sys.executable, "-I", "-c", script, env[RELAY_ENV]]
        done = subprocess.run(sandbox.wrap(argv, profile).argv, capture_output=True, check=False)
        assert done.stdout.decode().strip() == "relayed", done.stderr
    finally:
        runner._after("j1", env, [], 0, False)
    assert not Path(env[RELAY_ENV]).exists()


def test_only_the_service_s_fields_of_a_spec_are_shown_to_the_driver(tmp_path: Path) -> None:
    """A seed's CSV and a Python model's file and project are shown; a value a PR chose
    (a unit test's expected row with a ``root`` or ``path`` column) never is."""
    from sluice.core.spark.confine import spec_files

    project = tmp_path / "repo"
    (project / "seeds").mkdir(parents=True)
    (project / "seeds" / "s.csv").write_text("a\n1\n")
    (project / "models").mkdir()
    (project / "models" / "m.py").write_text("")
    spec = {
        "job_id": "j",
        "kind": "apply",
        "steps": [
            {"type": "build", "seed": {"path": str(project / "seeds" / "s.csv")}},
            {
                "type": "build",
                "python": {"path": str(project / "models" / "m.py"), "root": str(project)},
            },
            {
                "type": "unit_test",
                "path": str(project / "tests" / "t.yaml"),
                "expected": [{"root": "/", "path": "/root"}],
                "inputs": [{"rows": [{"root": "/", "path": str(tmp_path)}]}],
            },
        ],
    }
    shown = spec_files(spec)  # type: ignore[arg-type]
    assert shown == [project / "seeds" / "s.csv", project / "models" / "m.py", project]


def test_the_service_s_own_spark_paths_are_shown_to_spark_and_urls_reach_out(
    tmp_path: Path,
) -> None:
    """A warehouse or scratch folder the service's settings name is writable in Spark's
    sandbox (else Spark would write into the sandbox's own tmp and the data would be
    lost), a jar readable; a setting with a URL gives the driver the host's network."""
    from sluice.core.spark.confine import reaches_out, service_paths

    jar = tmp_path / "x.jar"
    jar.write_bytes(b"PK")
    conf = {
        "spark.sql.warehouse.dir": f"file:{tmp_path / 'warehouse'}",
        "spark.local.dir": f"{tmp_path / 'a'}, {tmp_path / 'b'}",
        "spark.jars": str(jar),
        "spark.driver.extraJavaOptions": f"-Dx={tmp_path / 'no'}",
        "spark.sql.shuffle.partitions": "4",
        # Only a setting that names a path for Spark to read or write shows one.
        "spark.app.name": "/",
        "spark.sql.some.option": str(tmp_path),
        "spark.driver.extraClassPath": f"{jar}:{tmp_path / 'lib'}/*",
    }
    (tmp_path / "lib").mkdir()
    files, folders = service_paths(conf)
    assert files == [jar, jar, tmp_path / "lib"]
    assert folders == [tmp_path / "warehouse", tmp_path / "a", tmp_path / "b"]
    local = SparkSettings(master="local[1]")
    assert not reaches_out(local, conf)
    assert reaches_out(local, {**conf, "spark.hadoop.fs.s3a.endpoint": "http://minio:9000"})
    assert reaches_out(SparkSettings(master="spark://host:7077"), conf)


def test_spark_limits_follow_the_driver_s_memory_and_the_host_s_ceiling(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sluice.core.spark.confine import limits

    monkeypatch.delenv(sandbox.PROCESSES_SETTING, raising=False)
    assert limits({}) == sandbox.Limits(sandbox.PROCESSES, 4 * 2**30)
    assert limits({"spark.driver.memory": "3g"}).memory == 8 * 2**30
    assert limits({"spark.driver.memory": "512"}).memory == 3 * 2**30  # MiB, as Spark reads it
    with pytest.raises(ConfigError, match=r"spark\.driver\.memory"):
        limits({"spark.driver.memory": "lots"})
    monkeypatch.setenv(sandbox.PROCESSES_SETTING, "12")
    with pytest.raises(ConfigError, match=sandbox.PROCESSES_SETTING):
        limits({})


def test_a_service_that_is_not_root_bounds_spark_processes_by_their_rlimit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An ordinary user's service makes no cgroup: the sandbox's processes count against
    ``RLIMIT_NPROC`` in its own user namespace (the kernel exempts only root's uid), and
    each may write ``RLIMIT_DATA`` of memory."""
    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(sandbox, "_cgroups", lambda limits: [])  # none delegated to it
    profile = sandbox.Profile("driver", light=False, limits=sandbox.Limits(300, 2**31))
    argv = sandbox.wrap(["java"], profile).argv
    assert argv[0].endswith("bwrap") and "--unshare-user" in argv
    tail = argv[argv.index("--", argv.index("--chdir")) + 1 :]
    assert tail[0].endswith("prlimit") and tail[-2:] == ["--", "java"]
    assert {"--nproc=300:300", f"--data={2**31}:{2**31}"} <= set(tail)


def test_only_stale_empty_cgroups_are_cleaned_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cgroup is made by the shell that joins it; clean-up removes an empty one only once
    it is old, so one being joined by a process starting elsewhere is never taken."""
    parent = sandbox._own_cgroups().get("pids")
    if parent is None or not os.access(parent, os.W_OK):
        pytest.skip("this process cannot make cgroups")
    fresh = parent / f"{sandbox.CGROUP_PREFIX}test{os.getpid()}"
    fresh.mkdir()
    try:
        assert sandbox._usable(parent, {"pids"})
        assert fresh.exists()
        monkeypatch.setattr(sandbox, "CGROUP_STALE_SECONDS", -1.0)
        assert sandbox._usable(parent, {"pids"})
        assert not fresh.exists()
    finally:
        if fresh.exists():
            fresh.rmdir()


def test_what_the_service_opens_is_beside_the_spark_root_never_in_it(tmp_path: Path) -> None:
    """A sandboxed Spark process writes the Spark root (warehouse, metastore): the files the
    service opens for that root (the metastore lock, the Connect server's folder, whose
    ``home`` it binds into the next server's sandbox) live beside it, where no sandbox
    writes, so none can leave a link there for the service to follow."""
    from sluice.core.spark.connect import ConnectServer
    from sluice.core.spark.session import metastore_lock

    paths = SparkPaths(root=tmp_path / "spark", logs=tmp_path / "logs")
    runner = SubmitRunner(SparkSettings(master="local[1]"), paths)
    spec_path = tmp_path / "logs" / "j.json"
    spec_path.parent.mkdir()
    spec_path.write_text("{}")
    home = tmp_path / "logs" / "j.home"
    driver = runner.profile(
        {"job_id": "j", "kind": "apply", "steps": []}, spec_path, home, jvm.ArchiveUse([])
    )  # type: ignore[arg-type]
    server = ConnectServer(SparkSettings(master="local[1]", mode="connect"), paths)
    served = server.profile(paths.connect / "home")
    for profile in (driver, served):
        for opened in (paths.lock_file, paths.connect):
            assert not any(opened.is_relative_to(w) for w in profile.write), (opened, profile)
    # Were a link there all the same (made by hand), the lock does not follow it ...
    victim = tmp_path / "victim"
    victim.write_text("keep")
    paths.service.mkdir()
    paths.lock_file.symlink_to(victim)
    with pytest.raises(OSError), metastore_lock(SparkSettings(), paths, "j", timeout=1):
        pass
    assert victim.read_text() == "keep"
    # ... and the server does not start in a linked folder.
    paths.connect.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ExecutionError, match="is a link"):
        server._start()


def test_the_sandbox_s_own_root_and_dev_take_no_file(tmp_path: Path) -> None:
    """Only /tmp, /var/tmp and /dev/shm (sized for a Spark process) and the profile's
    folders take files: the folders the sandbox makes on its own root (around the bound
    ones) and /dev are read-only, else they would hold files of any size, in memory."""
    paths = SparkPaths(root=tmp_path / "spark", logs=tmp_path / "logs")
    profile = sandbox.Profile(
        "driver",
        read=(tmp_path / "spark",),
        write=(paths.warehouse,),
        java=True,
        light=False,
        limits=sandbox.Limits(256, 2**31),
    )
    script = textwrap.dedent(
        """
        import os, sys
        made = []
        for path in ("/x", "/dev/x", "/dev/shm/x", "/tmp/x", sys.argv[1]):
            try:
                with open(path, "w") as f:
                    f.write("x")
                made.append(path)
            except OSError:
                pass
        print(" ".join(made))
        """
    )
    # "/x": the sandbox's own root, where it makes the folders around the bound ones.
    argv = [sys.executable, "-I", "-c", script, str(paths.warehouse / "w")]
    launch = sandbox.wrap(argv, profile).argv
    done = subprocess.run(launch, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["/dev/shm/x", "/tmp/x", str(paths.warehouse / "w")]
    # Control: without the remounts, the sandbox's own root and /dev take files.
    again = sandbox.wrap(argv, profile).argv  # (a cgroup of its own, as every start)
    loose = [a for i, a in enumerate(again) if "--remount-ro" not in (a, again[i - 1])]
    done = subprocess.run(loose, capture_output=True, text=True, check=True)
    assert {"/x", "/dev/x"} <= set(done.stdout.split())


def test_a_link_a_driver_left_in_its_root_never_binds_another_repository_s_folder(
    tmp_path: Path,
) -> None:
    """A's driver writes A's whole root: it can leave A's warehouse a link to B's. The
    next A driver's sandbox shows the warehouse through the root's bind (where the link
    leads nowhere), never binds the link's target: B's files stay out of sight."""
    a = SparkPaths(root=tmp_path / "a", logs=tmp_path / "logs")
    b = SparkPaths(root=tmp_path / "b", logs=tmp_path / "logs")
    b.warehouse.mkdir(parents=True)
    (b.warehouse / "part-0.parquet").write_text("B's rows")
    a.root.mkdir()
    a.warehouse.symlink_to(b.warehouse)
    profile = sandbox.Profile("driver", write=(a.root, a.warehouse), light=False)
    script = "import os, sys; print(sorted(os.listdir(sys.argv[1])), os.path.exists(sys.argv[2]))"
    argv = [sys.executable, "-I", "-c", script, str(a.warehouse), str(b.warehouse)]
    launch = sandbox.wrap(argv, profile).argv
    done = subprocess.run(launch, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["[]", "False"], (done.stdout, done.stderr)
    assert not a.warehouse.is_symlink() and a.warehouse.is_dir()
    assert sorted(os.listdir(b.warehouse)) == ["part-0.parquet"]
