"""Logging, set up once for every entry point (the CLI, the service, the Action).

``SLUICE_LOG_LEVEL`` (DEBUG, INFO, WARNING, ERROR) overrides the entry point's default
(WARNING for commands, INFO for the service and the Action; ``-v`` makes it INFO);
``SLUICE_LOG_FORMAT`` is ``text`` (a timestamp, the level, the logger, the message) or
``json`` (one object a line, for log shippers). The JSON formatter is the standard
library's ``logging.Formatter`` with ``json.dumps``: a dozen lines do not justify a
dependency, and every library that logs through ``logging`` comes out the same way.

The service itself logs to stderr (its service manager keeps that); the files its Spark
writes beside it, which a long-lived process appends to (the Connect server's log,
Derby's), are kept bounded by :func:`rotate`, which the janitor runs
(``SLUICE_LOG_MAX_BYTES``, ``SLUICE_LOG_BACKUPS``).

>>> # SLUICE_LOG_FORMAT=json sluice serve
>>> # {"time": "2026-11-26T23:50:01.123Z", "level": "INFO", "logger": "sluice.bot.queue",
>>> #  "message": "job 12 done"}
"""

from __future__ import annotations

import contextlib
import glob
import json
import logging
import os
import shutil
import stat
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from sluice.core.errors import ConfigError

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
MAX_BYTES = 16 * 1024 * 1024
"""A log file's size past which :func:`rotate` rotates it (``SLUICE_LOG_MAX_BYTES``)."""
BACKUPS = 4
"""How many rotated copies of a log file :func:`rotate` keeps (``SLUICE_LOG_BACKUPS``)."""


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time (UTC, ms), level, logger, message, and the traceback
    as ``exception`` when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        moment = datetime.fromtimestamp(record.created, tz=UTC)
        document = {
            "time": moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        return json.dumps(document, ensure_ascii=False)


def setup(
    default: str = "WARNING", *, verbose: bool = False, env: Mapping[str, str] | None = None
) -> None:
    """Point the root logger at stderr with the level and format the settings name
    (called again, as ``serve`` does after the CLI group, it replaces the first setup).

    Raises:
        ConfigError: ``SLUICE_LOG_LEVEL`` or ``SLUICE_LOG_FORMAT`` is not a known value.
    """
    env = os.environ if env is None else env
    level = (env.get("SLUICE_LOG_LEVEL") or ("INFO" if verbose else default)).upper()
    if level not in LEVELS:
        raise ConfigError(
            f"SLUICE_LOG_LEVEL is {level!r}, not a log level",
            hint=f"use one of {', '.join(LEVELS)}",
        )
    style = (env.get("SLUICE_LOG_FORMAT") or "text").lower()
    if style not in FORMATS:
        raise ConfigError(
            f"SLUICE_LOG_FORMAT is {style!r}, not a log format", hint="use text or json"
        )
    handler = logging.StreamHandler(sys.stderr)
    formatter = JsonFormatter() if style == "json" else logging.Formatter(TEXT_FORMAT)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def rotate(path: Path, max_bytes: int = MAX_BYTES, backups: int = BACKUPS) -> bool:
    """Rotate ``path`` when it holds more than ``max_bytes``: its content becomes
    ``path.1`` (``path.1`` becomes ``path.2``, and so on; past ``path.<backups>`` the
    oldest goes; ``backups`` 0 keeps none) and ``path`` starts again empty. Whether it was
    rotated.

    The file is copied, then emptied in place, not renamed: a process that appends to it
    (the Connect server's JVM, which holds it open from its start) goes on writing into
    ``path``, at its new start. What it writes between the copy and the emptying is lost
    (a moment's lines, once per rotation). On disk: at most about ``max_bytes`` times
    ``backups + 1``, plus what is written between two rotations.

    No link is ever followed (the folder may be one a sandboxed Spark process writes): a
    ``path`` that is not a regular file of one link is left alone (a warning), a backup
    that is a link is removed, never written through, and the new ``path.1`` is created
    afresh (a file found there meanwhile stops the rotation).
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return False
    except OSError as exc:  # a link (ELOOP), a folder, unreadable
        logging.getLogger(__name__).warning("not rotating %s: %s", path, exc)
        return False
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            logging.getLogger(__name__).warning(
                "not rotating %s: not a regular file of one link", path
            )
            return False
        if info.st_size <= max_bytes:
            return False
        for copy in path.parent.glob(f"{glob.escape(path.name)}.*"):
            number = copy.name[len(path.name) + 1 :]
            if not number.isdigit():
                continue
            if int(number) >= max(backups, 1) or copy.is_symlink() or not copy.is_file():
                with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                    copy.unlink()  # the oldest, past the count, or not ours to move
        for n in range(backups - 1, 0, -1):
            older = path.with_name(f"{path.name}.{n}")
            with contextlib.suppress(FileNotFoundError):
                os.replace(older, path.with_name(f"{path.name}.{n + 1}"))  # links not followed
        if backups:
            _copy_new(fd, path.with_name(f"{path.name}.1"))
        os.ftruncate(fd, 0)
    except OSError as exc:
        logging.getLogger(__name__).warning("not rotating %s: %s", path, exc)
        return False
    finally:
        os.close(fd)
    return True


def _copy_new(source: int, target: Path) -> None:
    """Copy the open file ``source`` (from its start) into ``target``, a file this call
    creates, never through a link."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    out = os.open(target, flags, 0o600)
    with os.fdopen(out, "wb") as handle, os.fdopen(os.dup(source), "rb") as reading:
        reading.seek(0)
        shutil.copyfileobj(reading, handle)
