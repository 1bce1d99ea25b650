"""The warm Spark server is ours alone (issue 40 §4): a client must send its token.

The service's Spark Connect server (and ``sluice spark start``'s, the same class) takes only
clients that send the random token it was started with. The token travels in environments
only: the server's, the job's child's and the health check's; never on a command line, in
a job spec, a log or a file another user can read. Another OS user on the machine can reach
the loopback port but is refused, and can read the token from neither the server's
``/proc/<pid>/environ`` nor a developer server's record.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from sluice.core.config import SparkSettings
from sluice.core.spark import dev_server
from sluice.core.spark.connect import (
    BIND_ADDRESS,
    REMOTE_ENV,
    TOKEN_ENV,
    ConnectRunner,
    ConnectServer,
    health_check,
)
from sluice.core.spark.session import SparkPaths

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(sys.platform != "linux", reason="reads /proc"),
]

NOBODY = 65534

# A Connect client as another OS user: imports what a session needs as root (the
# interpreter's own files are root's), drops to ``nobody`` for good, then tries the server
# without the token, with the given one (``PROBE_TOKEN``), and reads the named files.
_OTHER_USER = """
import json, os, sys
import grpc, pandas, pyarrow
import pyspark.sql.connect.client.core, pyspark.sql.connect.conversion
import pyspark.sql.connect.dataframe, pyspark.sql.connect.session
import pyspark.errors.exceptions.connect
from pyspark.sql import SparkSession
import encodings.idna

url, files = sys.argv[1], sys.argv[2:]
token = os.environ.pop("PROBE_TOKEN", None)
os.setgroups([])
os.setgid(NOBODY)
os.setuid(NOBODY)
out = {"uid": os.getuid()}


def select(token):
    if token is None:
        os.environ.pop("SPARK_CONNECT_AUTHENTICATE_TOKEN", None)
    else:
        os.environ["SPARK_CONNECT_AUTHENTICATE_TOKEN"] = token
    try:
        spark = SparkSession.builder.remote(url).create()
        try:
            return str(spark.sql("SELECT 1 AS one").collect()[0][0])
        finally:
            spark.stop()
    except Exception as exc:
        return "refused: " + (str(exc).splitlines() or [type(exc).__name__])[0][:300] + (
            " UNAUTHENTICATED" if "UNAUTHENTICATED" in str(exc) else ""
        )


out["without"] = select(None)
out["wrong"] = select("x" * 43)
out["with"] = select(token) if token else None
for name in files:
    try:
        with open(name, "rb") as handle:
            out[name] = "read " + str(len(handle.read()))
    except OSError as exc:
        out[name] = type(exc).__name__
print(json.dumps(out))
""".replace("NOBODY", str(NOBODY))


# A Spark RPC client that knows no secret (a JVM of its own, through PySpark's gateway): can
# it reach the BlockManagerMaster endpoint of the driver listening at argv[1]?
_RPC_PROBE = """
import sys
from pyspark import SparkConf
from pyspark.java_gateway import launch_gateway
jvm = launch_gateway(SparkConf(loadDefaults=False)).jvm
spark = jvm.org.apache.spark
conf = spark.SparkConf(False).set("spark.rpc.askTimeout", "20s")
conf.set("spark.network.timeout", "20s")
config = jvm.java.lang.Class.forName("org.apache.spark.internal.config.package$")
secret_file = config.getField("MODULE$").get(None).AUTH_SECRET_FILE()
security = spark.SecurityManager(conf, jvm.scala.Option.empty(), secret_file)
env = spark.rpc.RpcEnv.create("probe", "127.0.0.1", 0, conf, security, True)
for port in sys.argv[1:]:
    try:
        env.setupEndpointRef(spark.rpc.RpcAddress("127.0.0.1", int(port)), "BlockManagerMaster")
        print(port, "reached", flush=True)
    except Exception as exc:
        print(port, "refused", flush=True)
env.shutdown()
"""


def _listening_ports(pids: list[int]) -> set[int]:
    """The TCP ports the processes ``pids`` listen on (from /proc/net and their sockets)."""
    inodes = set()
    for pid in pids:
        fds = Path(f"/proc/{pid}/fd")
        for fd in fds.iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def _rpc_probe(ports: set[int], home: Path) -> dict[int, str]:
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLUICE_", "SPARK_CONN"))}
    done = subprocess.run(
        [sys.executable, "-c", _RPC_PROBE, *map(str, sorted(ports))],
        env={**env, "HOME": str(home), "SPARK_LOCAL_IP": BIND_ADDRESS},
        cwd=home,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line.split() for line in done.stdout.splitlines()]
    return {int(port): what for port, what in lines}


def _other_user(url: str, files: list[str], token: str | None) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in (TOKEN_ENV, REMOTE_ENV)}
    env["HOME"] = "/"
    if token is not None:
        env["PROBE_TOKEN"] = token
    done = subprocess.run(
        [sys.executable, "-c", _OTHER_USER, url, *files],
        env=env,
        cwd="/",
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["uid"] == NOBODY
    return found


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (the launcher, or a sandbox, and the JVM under it)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat_line = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat_line.rsplit(")", 1)[1].split()[1])
    found, todo = [], [pid]
    while todo:
        here = todo.pop()
        found.append(here)
        todo += [child for child, parent in parents.items() if parent == here]
    return found


def _files_holding(root: Path, text: str) -> list[Path]:
    needle = text.encode()
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_a_client_without_the_token_or_with_a_wrong_one_is_refused(
    connect_server: ConnectServer, tmp_path: Path
) -> None:
    url, token = connect_server.connection()
    assert url.startswith("sc://localhost:") and token not in url
    # Control: the same client with the token is answered.
    assert health_check(url, token=token) is None
    for wrong in (None, "", token[:-1], token + "x", "x" * len(token)):
        problem = health_check(url, token=wrong or None)
        assert problem is not None and "UNAUTHENTICATED" in problem, (wrong, problem)
    # Over 127.0.0.1 (no TLS, no local credentials) a client sends nothing and is refused.
    problem = health_check(f"sc://{BIND_ADDRESS}:{connect_server.port}")
    assert problem is not None and "UNAUTHENTICATED" in problem
    assert connect_server.healthy()


def test_the_token_is_in_environments_only(
    connect_server: ConnectServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    url, token = connect_server.connection()
    assert connect_server.pid is not None
    # The server has it in its environment (root reads it: the control for the other user)
    assert _environ(connect_server.pid)[TOKEN_ENV] == token
    # and on no command line, of the server's process or of any under it (the JVM).
    tree = _tree(connect_server.pid)
    cmdlines = [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in tree]
    assert any(b"SparkConnectServer" in line for line in cmdlines)
    for line in cmdlines:
        assert token.encode() not in line and b"spark.connect.authenticate.token" not in line
    # A job: its child gets the URL and the token in its environment, its command line,
    # spec, session settings, events and log hold neither the token nor a way to it.
    paths = SparkPaths(root=connect_server.paths.root, logs=tmp_path / "logs")
    seen: list[dict[str, Any]] = []
    runner = ConnectRunner(
        connect_server.settings, paths, server=connect_server, on_event=seen.append
    )
    env = runner.environment(tmp_path / "home")
    runner._preflight({"job_id": "token-env", "steps": []}, env)
    assert (env[REMOTE_ENV], env[TOKEN_ENV]) == (url, token)
    command = runner.command(paths.logs / "token-env.json", "token-env", "test")
    assert token not in " ".join(command)
    spec = {"job_id": "token-job", "kind": "test", "steps": [
        {"type": "sql", "label": "one", "statements": ["SELECT 1 AS one"]},
        {"type": "sql", "label": "env", "statements": [
            f"SELECT reflect('java.lang.System', 'getenv', '{TOKEN_ENV}') IS NOT NULL AS has"
        ]},
    ]}  # fmt: skip
    result = runner.run(spec)
    assert result.results["0"]["rows"] == [{"one": 1}]
    assert result.results["1"]["rows"] == [{"has": True}]  # the server's JVM does hold it
    assert token not in json.dumps(seen) and token not in caplog.text
    assert (paths.logs / "token-job.json").is_file()  # the spec, kept: no token in it
    assert _files_holding(paths.logs, token) == []
    # Nor anything the server writes (its log, homes, metastore, warehouse).
    assert connect_server.log_path.is_file()
    assert _files_holding(connect_server.paths.root, token) == []
    assert stat.S_IMODE(connect_server.folder.stat().st_mode) == 0o700


@pytest.mark.skipif(os.geteuid() != 0, reason="switches to another uid")
def test_another_user_is_refused_and_reads_no_token(
    connect_server: ConnectServer, tmp_path: Path
) -> None:
    url, token = connect_server.connection()
    pid = connect_server.pid
    assert pid is not None
    # A developer server's record for this server, as `sluice spark start` writes it.
    record = connect_server.folder / dev_server.STATE_NAME
    dev_server._write_record(record, connect_server.settings, connect_server.paths,
                             connect_server)  # fmt: skip
    assert json.loads(record.read_text())["token"] == token
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    # Control: a copy the other user may read (0644, in a 0755 folder) is read.
    shared = Path(tempfile.mkdtemp(prefix="sluice-token-probe-"))
    try:
        shared.chmod(0o755)
        copy = shared / "record.json"
        copy.write_bytes(record.read_bytes())
        copy.chmod(0o644)
        environs = [f"/proc/{p}/environ" for p in _tree(pid)]
        files = [*environs, str(record), str(copy)]
        found = _other_user(url, files, token)
    finally:
        copy.unlink(missing_ok=True)
        shared.rmdir()
    assert found["without"].startswith("refused") and "UNAUTHENTICATED" in found["without"]
    assert found["wrong"].startswith("refused") and "UNAUTHENTICATED" in found["wrong"]
    assert found["with"] == "1"  # control: from that uid the port answers, given the token
    assert all(found[name] == "PermissionError" for name in environs), found
    assert found[str(record)] == "PermissionError"
    assert found[str(copy)].startswith("read ")  # control: the probe reads what it may
    record.unlink()


def test_the_dev_servers_record_is_private_and_a_shared_one_is_not_used(
    tmp_path: Path,
) -> None:
    paths = SparkPaths.for_project(tmp_path)
    server = ConnectServer(SparkSettings(), paths)
    server.port, server._token = 15002, "t0ken-" + "y" * 37
    record = paths.connect / dev_server.STATE_NAME
    record.parent.mkdir(parents=True)
    record.parent.chmod(0o700)
    dev_server._write_record(record, SparkSettings(), paths, server)
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    assert not record.with_suffix(".tmp").exists()
    # status (what `sluice spark status --json` prints) never carries the token
    assert "t0ken" not in json.dumps(dev_server.status(SparkSettings(), paths).__dict__)
    record.chmod(0o644)  # e.g. written by hand or by an older sluice
    found = dev_server.status(SparkSettings(), paths)
    assert not found.running and "open to other users" in str(found.problem)
    assert dev_server.connection(SparkSettings(), paths) is None


def test_the_servers_other_ports_take_no_peer_without_spark_s_secret(
    connect_server: ConnectServer, tmp_path: Path
) -> None:
    """Its JVM's own ports (driver RPC, block transfers; 127.0.0.1) ask for the secret
    Spark makes at start (``spark.authenticate``); the control: a server started without
    it lets the same probe reach its driver. One probe (a JVM of its own) tries both
    servers' ports, each through a connection of its own. The control's driver listens on
    a port chosen here, the one probed: its block transfer port takes no RPC, and a probe
    of it waits out the probe's 20 s time limit."""
    connect_server.endpoint()
    assert connect_server.pid is not None and connect_server.port is not None
    ports = _listening_ports(_tree(connect_server.pid)) - {connect_server.port}
    assert ports, "the server's JVM listens on its RPC port too"
    root = tmp_path / "open"
    with socket.socket() as sock:
        sock.bind((BIND_ADDRESS, 0))
        driver = int(sock.getsockname()[1])
    settings = SparkSettings(master="local[1]", mode="connect",
                             conf={"spark.authenticate": "false", "spark.driver.port": str(driver)})  # fmt: skip
    open_server = ConnectServer(settings, SparkPaths(root, root / "logs"))
    try:
        open_server.endpoint()
        assert open_server.pid is not None
        others = _listening_ports(_tree(open_server.pid)) - {open_server.port}
        assert others and not others & ports
        # (Spark binds the next port when another process took the chosen one meanwhile:
        # then every port of the control is probed.)
        control = {driver} if driver in others else others
        seen = _rpc_probe(ports | control, tmp_path / "probe")
    finally:
        open_server.stop()
    assert {seen[port] for port in ports} == {"refused"}
    assert "reached" in {seen[port] for port in control}
