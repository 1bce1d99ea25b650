"""A throwaway PostgreSQL cluster from the local server binaries, for the tests and benches.

``initdb`` + ``pg_ctl`` on a free port of 127.0.0.1, owned by the postgres user when we are
root (initdb refuses to run as root), stopped and deleted on exit. Install the binaries
with ``scripts/ensure-postgres.sh``.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, make_url, text


class ClusterError(Exception):
    """The cluster cannot be started; the message says why (with the server's log)."""


def pg_bindir() -> Path | None:
    """Directory holding ``initdb`` and ``pg_ctl``: PATH first, then Debian's layout."""
    found = shutil.which("initdb")
    if found and (Path(found).resolve().parent / "pg_ctl").exists():
        return Path(found).resolve().parent
    # Newest version first; numeric sort so 16 beats 9.6.
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda p: [int(x) for x in Path(p).parent.name.split(".") if x.isdigit()],
        reverse=True,
    )
    for candidate in candidates:
        if (Path(candidate) / "initdb").exists() and (Path(candidate) / "pg_ctl").exists():
            return Path(candidate)
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def normalise(url: str) -> str:
    """``url`` with the psycopg 3 driver named (the one installed), password kept."""
    parsed = make_url(url)
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


@contextmanager
def throwaway_postgres(*, durable: bool = False, prefix: str = "sluice-pg-") -> Iterator[str]:
    """A new cluster; yields its superuser URL once it accepts connections.

    Without ``durable``, fsync, synchronous_commit and full_page_writes are off: worthless
    durability for a throwaway cluster, and much faster.

    Raises:
        ClusterError: no server binaries, or the server did not start.
    """
    bindir = pg_bindir()
    if bindir is None:
        raise ClusterError(
            "no PostgreSQL server binaries (initdb, pg_ctl) found: run scripts/ensure-postgres.sh"
        )
    # Not under a private temporary directory: the server may run as the postgres user.
    base = Path(tempfile.mkdtemp(prefix=prefix))
    datadir = base / "data"
    runner: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(base, user="postgres", group="postgres")
        runner = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    options = f"-h 127.0.0.1 -p {port} -k {base}"
    if not durable:
        options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"

    def run(*args: str) -> None:
        # Own session: a Ctrl-C reaches this process only, which then stops the server.
        subprocess.run(
            [*runner, *args], check=True, capture_output=True, text=True, start_new_session=True
        )

    pg_ctl = str(bindir / "pg_ctl")
    try:
        try:
            run(str(bindir / "initdb"), "-D", str(datadir), "-U", "postgres", "-A", "trust", "-N")
            run(pg_ctl, "-D", str(datadir), "-l", str(base / "server.log"), "-o", options,
                "-w", "start")  # fmt: skip
        except subprocess.CalledProcessError as exc:
            log = base / "server.log"
            detail = log.read_text() if log.exists() else ""
            raise ClusterError(f"could not start PostgreSQL: {exc.stderr}\n{detail}") from None
        url = f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
        try:
            _wait_until_accepting(url)
            yield url
        finally:
            subprocess.run([*runner, pg_ctl, "-D", str(datadir), "-m", "fast", "-w", "stop"],
                           check=False, capture_output=True, start_new_session=True)  # fmt: skip
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _wait_until_accepting(url: str, timeout_s: float = 30.0) -> None:
    engine = create_engine(url)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                with engine.connect() as conn:
                    conn.execute(text("SELECT 1"))
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    finally:
        engine.dispose()
