"""A job's log followed live, as server-sent events: each line of the file the job's
runner writes (``<workdir>/logs/<job id>.log``) is one ``data:`` event, from the start;
new lines follow as they are written; an ``end`` event closes the stream once the
driver's last event (``job_done`` or ``job_failed``) is read, or when nothing was written
for ``idle`` seconds (a job killed without its last line). Lines are cut to
:data:`LINE_CHARS`; the file itself is bounded by the runner (``MAX_LOG_BYTES``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

from sluice.core.spark.events import PREFIX

LINE_CHARS = 4000
ENDS = frozenset({"job_done", "job_failed"})


def _last(line: str) -> bool:
    if not line.startswith(PREFIX):
        return False
    try:
        event = json.loads(line[len(PREFIX) :])
    except ValueError:
        return False
    return isinstance(event, dict) and event.get("event") in ENDS


def _sse(line: str, event: str | None = None) -> str:
    text = line.replace("\r", "")[:LINE_CHARS]
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n"


async def follow(path: Path, *, poll: float = 0.25, idle: float = 600.0) -> AsyncIterator[str]:
    """The server-sent events of the log at ``path``, as described above."""
    waited = 0.0
    partial = ""
    with open(path, encoding="utf-8", errors="replace") as log:
        while True:
            chunk = log.read(1 << 16)
            if chunk:
                waited = 0.0
                lines = (partial + chunk).split("\n")
                partial = lines.pop()
                for line in lines:
                    yield _sse(line)
                    if _last(line):
                        yield _sse("the job's last event was written", "end")
                        return
                continue
            if waited >= idle:
                if partial:
                    yield _sse(partial)
                yield _sse(f"nothing was written to the log for {idle:.0f} s", "end")
                return
            await asyncio.sleep(poll)
            waited += poll
