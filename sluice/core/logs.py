"""Logging, set up once for every entry point (the CLI, the service, the Action).

``SLUICE_LOG_LEVEL`` (DEBUG, INFO, WARNING, ERROR) overrides the entry point's default
(WARNING for commands, INFO for the service and the Action; ``-v`` makes it INFO);
``SLUICE_LOG_FORMAT`` is ``text`` (a timestamp, the level, the logger, the message) or
``json`` (one object a line, for log shippers). The JSON formatter is the standard
library's ``logging.Formatter`` with ``json.dumps``: a dozen lines do not justify a
dependency, and every library that logs through ``logging`` comes out the same way.

>>> # SLUICE_LOG_FORMAT=json sluice serve
>>> # {"time": "2026-11-26T23:50:01.123Z", "level": "INFO", "logger": "sluice.bot.queue",
>>> #  "message": "job 12 done"}
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Mapping
from datetime import UTC, datetime

from sluice.core.errors import ConfigError

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


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
