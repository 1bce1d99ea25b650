"""What ``GET /healthz`` says of Spark, cheaply: no JVM or Spark session starts for a poll.

``connect`` mode: whether the Spark Connect server takes a TCP connection
(``SLUICE_SPARK_REMOTE``'s endpoint), or, for the service's own servers (one per Spark
root: per repository when they are kept apart, a pool of at most
``SLUICE_SPARK_CONNECT_SERVERS``), how many run, start, run a job, died or were stopped by
the pool (:func:`sluice.core.spark.connect.pool_status`: the pool's own state and a TCP
connect to each live server's port on 127.0.0.1), and whether a server could start
(spark-submit and Java found). A server the pool stopped (idle, or for another root's) is
not unhealthy: the next job of its root starts it; one that died is, until a job starts
it again. Counts only: ``/healthz`` answers anyone, and a root's folder is named after its
repository, so which repository has which server is the web UI's to say (its jobs page,
to who may read that repository). ``submit`` mode: whether ``spark-submit`` and Java are
found. An answer is kept for :data:`CACHE_SECONDS`, so polls in a burst ask once.

>>> remote_address("sc://spark.example:15003/;token=x"), remote_address("sc://h")
(('spark.example', 15003), ('h', 15002))
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sluice.core.config import SparkSettings
from sluice.core.spark import connect

CACHE_SECONDS = 5.0
"""How long one answer about Spark is reused."""

CONNECT_DEFAULT_PORT = 15002
"""Spark Connect's port when an ``sc://`` URL names none."""


def remote_address(url: str) -> tuple[str, int]:
    """The host and port of a Spark Connect URL (``sc://host[:port][/;params]``)."""
    parts = urlsplit(url.split(";", 1)[0])
    return parts.hostname or "localhost", parts.port or CONNECT_DEFAULT_PORT


def _tools() -> str | None:
    """Why this machine cannot start a Spark JVM (spark-submit, Java), or None."""
    from sluice.core.spark.session import java_problem
    from sluice.core.spark.submit import spark_submit_path

    try:
        if not spark_submit_path().is_file():
            return "spark-submit not found (is PySpark installed?)"
    except ImportError:
        return "PySpark is not installed, so there is no spark-submit"
    # Unauthenticated: say what is missing, not where this machine keeps it (no path).
    return "Java not found (set JAVA_HOME or install a JDK)" if java_problem() else None


def _listening(address: tuple[str, int]) -> bool:
    return connect.listening(*address)


def server_counts(servers: list[connect.PooledServer]) -> dict[str, int]:
    """How many of the pool's ``servers`` are in each state (``stopped``: by the pool, or
    never started; ``busy``: running a job), and the pool's bound (``most``, 0: none)."""
    counts = dict.fromkeys(("running", "starting", "busy", "down", "stopped"), 0)
    for server in servers:
        state = server.state
        counts["stopped" if state in ("not started", "stopping") else state] += 1
        counts["busy"] += server.jobs > 0
    counts["most"] = connect.pool_bound()
    return counts


class SparkHealth:
    """Spark's health as ``/healthz`` reports it: ``{"mode", "ok", "detail"}``.

    Args:
        settings: The service's Spark settings (mode, remote).
        root: The service's Spark root (``<workdir>/spark``), whose Connect server is the
            service's own.
        tools: Why Spark cannot start here, or None (default: spark-submit and Java).
        listening: Whether ``(host, port)`` takes a connection.
        clock: Seconds, for the cache.
    """

    def __init__(
        self,
        settings: SparkSettings,
        root: Path,
        *,
        tools: Callable[[], str | None] | None = None,
        listening: Callable[[tuple[str, int]], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings, self.root, self.clock = settings, root, clock
        self.tools = tools or _tools
        self.listening = listening or _listening
        self._lock = threading.Lock()
        self._cached: tuple[float, dict[str, Any]] | None = None
        self._servers: list[connect.PooledServer] = []  # the pool as the last look saw it
        self.checks = 0  # how many times Spark was actually looked at

    @property
    def own_servers(self) -> bool:
        """Whether the service runs its own Spark Connect servers (connect mode, no
        remote endpoint)."""
        return self.settings.mode == "connect" and not self.settings.remote

    def check(self) -> dict[str, Any]:
        """The answer, at most :data:`CACHE_SECONDS` old (blocking: a TCP connect of up to
        a second; call it off the event loop)."""
        with self._lock:
            now = self.clock()
            if self._cached is not None and now - self._cached[0] < CACHE_SECONDS:
                return self._cached[1]
            self.checks += 1
            ok, detail = self._look()
            answer: dict[str, Any] = {"mode": self.settings.mode, "ok": ok, "detail": detail}
            if self.own_servers:
                answer["servers"] = server_counts(self._servers)
            self._cached = (now, answer)
            return answer

    def servers(self) -> dict[str, int]:
        """:func:`server_counts` as the latest answer has them (for ``/metrics``; at most
        :data:`CACHE_SECONDS` old); empty when the service runs no server of its own."""
        counts: dict[str, int] = self.check().get("servers", {})
        return counts

    def _look(self) -> tuple[bool, str]:
        if self.settings.mode == "connect" and self.settings.remote:
            if self.listening(remote_address(self.settings.remote)):
                return True, "the Spark Connect endpoint (SLUICE_SPARK_REMOTE) answers"
            return False, "the Spark Connect endpoint (SLUICE_SPARK_REMOTE) does not answer"
        if self.settings.mode == "connect":
            return self._look_at_pool()
        problem = self.tools()
        if problem is not None:
            return False, f"no job can start: {problem}"
        return True, "spark-submit and Java found"

    def _look_at_pool(self) -> tuple[bool, str]:
        """The service's own servers (never one started here: a job starts its root's with
        its own Spark settings)."""
        servers = self._servers = connect.pool_status()
        counts = server_counts(servers)
        only_own = [s.root for s in servers] == [self.root.resolve()]
        if counts["down"]:
            if only_own:
                return False, (
                    "the service's Spark Connect server does not answer (the next job starts "
                    "it again)"
                )
            return False, (
                f"{counts['down']} of the {len(servers)} Spark Connect servers do not answer "
                "(the next job of each one's repository starts it again)"
            )
        problem = self.tools()
        live = counts["running"] + counts["starting"]
        if problem is not None:
            if live:
                return False, (
                    f"{live} Spark Connect server(s) run, but no other can start: {problem}"
                )
            return False, f"the Spark Connect server cannot start: {problem}"
        if not live:
            if any(s.state == "stopped" for s in servers):
                return True, (
                    "no Spark Connect server runs: the pool stopped them (idle, or for "
                    "another's place); the next job starts its repository's"
                )
            return True, "the Spark Connect server is not running yet (the first job starts it)"
        if only_own:
            if counts["running"]:
                return True, "the service's Spark Connect server answers"
            return True, "the service's Spark Connect server is starting"
        said = [f"{counts['running']} Spark Connect server(s) answer"]
        if counts["starting"]:
            said.append(f"{counts['starting']} starting")
        if counts["stopped"]:
            said.append(f"{counts['stopped']} stopped (the next job of its repository starts it)")
        return True, ", ".join(said)
