"""What ``GET /healthz`` says of Spark, cheaply: no JVM or Spark session starts for a poll.

``connect`` mode: whether the Spark Connect server takes a TCP connection (the service's
own server on 127.0.0.1, once a job started it; ``SLUICE_SPARK_REMOTE``'s endpoint),
and, for the service's own server, whether it could start (spark-submit and Java found).
``submit`` mode: whether ``spark-submit`` and Java are found. An answer is kept for
:data:`CACHE_SECONDS`, so polls in a burst ask once.

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


def _own_server(root: Path) -> connect.ConnectServer | None:
    """This process's Spark Connect server for the metastore ``root``, if a job made one
    (never made here: the first job makes it with its own Spark settings)."""
    with connect._SERVERS_GUARD:
        return connect._SERVERS.get(root.resolve())


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
        self.checks = 0  # how many times Spark was actually looked at

    def check(self) -> dict[str, Any]:
        """The answer, at most :data:`CACHE_SECONDS` old (blocking: a TCP connect of up to
        a second; call it off the event loop)."""
        with self._lock:
            now = self.clock()
            if self._cached is not None and now - self._cached[0] < CACHE_SECONDS:
                return self._cached[1]
            self.checks += 1
            ok, detail = self._look()
            answer = {"mode": self.settings.mode, "ok": ok, "detail": detail}
            self._cached = (now, answer)
            return answer

    def _look(self) -> tuple[bool, str]:
        if self.settings.mode == "connect" and self.settings.remote:
            if self.listening(remote_address(self.settings.remote)):
                return True, "the Spark Connect endpoint (SLUICE_SPARK_REMOTE) answers"
            return False, "the Spark Connect endpoint (SLUICE_SPARK_REMOTE) does not answer"
        if self.settings.mode == "connect":
            server = _own_server(self.root)
            if server is not None and server.pid is not None:  # a job started it
                if server.running():  # its process lives and its port takes a connection
                    return True, "the service's Spark Connect server answers"
                return False, (
                    "the service's Spark Connect server does not answer (the next job starts "
                    "it again)"
                )
            problem = self.tools()
            if problem is not None:
                return False, f"the Spark Connect server cannot start: {problem}"
            return True, "the Spark Connect server is not running yet (the first job starts it)"
        problem = self.tools()
        if problem is not None:
            return False, f"no job can start: {problem}"
        return True, "spark-submit and Java found"
