"""A job's log followed live, as server-sent events: each line of the file the job's
runner writes (``<workdir>/logs/<job id>.log``) is one ``data:`` event whose ``id`` is the
byte offset after it, from the start (or from the offset a reconnecting browser sends as
``Last-Event-ID``); new lines follow as they are written; an ``end`` event closes the
stream once the driver's last event (``job_done`` or ``job_failed``) is read, or when the
file was not written for ``idle`` seconds (a job killed without its last line).

One response follows for at most ``span`` seconds, then ends without ``end``: the
browser's ``EventSource`` reconnects by itself (``retry``) and goes on from the last id. So
no response outlives a few seconds of a server's shutdown (uvicorn waits for the responses
in flight before the service drains its workers), however long the job runs.

Lines are cut to :data:`LINE_CHARS`; the file itself is bounded by the runner
(``MAX_LOG_BYTES``)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

from sluice.core.spark.events import PREFIX

LINE_CHARS = 4000
ENDS = frozenset({"job_done", "job_failed"})
SPAN = 20.0
RETRY_MS = 500


def _last(line: str) -> bool:
    if not line.startswith(PREFIX):
        return False
    try:
        event = json.loads(line[len(PREFIX) :])
    except ValueError:
        return False
    return isinstance(event, dict) and event.get("event") in ENDS


def _sse(line: str, *, event: str | None = None, at: int | None = None) -> str:
    text = line.replace("\r", "")[:LINE_CHARS]
    head = (f"event: {event}\n" if event else "") + (f"id: {at}\n" if at is not None else "")
    return f"{head}data: {text}\n\n"


def start_of(last_event_id: str | None, path: Path) -> int:
    """Where to go on from: the offset a browser's ``Last-Event-ID`` names when it is one
    of this file's (a whole number within it), else the start."""
    if last_event_id is None or not last_event_id.isascii() or not last_event_id.isdigit():
        return 0
    offset = int(last_event_id[:20])
    return offset if offset <= path.stat().st_size else 0


async def follow(
    path: Path,
    *,
    start: int = 0,
    poll: float = 0.25,
    idle: float = 600.0,
    span: float | None = None,
) -> AsyncIterator[str]:
    """The server-sent events of the log at ``path`` from byte ``start``, as above
    (``span``: :data:`SPAN` as it is when the response starts)."""
    span = SPAN if span is None else span
    yield f"retry: {RETRY_MS}\n\n"
    began = time.monotonic()
    offset = start
    partial = b""
    with open(path, "rb") as log:
        log.seek(start)
        while True:
            chunk = log.read(1 << 16)
            if chunk:
                lines = (partial + chunk).split(b"\n")
                partial = lines.pop()
                for raw in lines:
                    offset += len(raw) + 1
                    line = raw.decode("utf-8", "replace")
                    yield _sse(line, at=offset)
                    if _last(line):
                        yield _sse("the job's last event was written", event="end")
                        return
                continue
            quiet = time.time() - path.stat().st_mtime
            if quiet >= idle:
                if partial:
                    yield _sse(partial.decode("utf-8", "replace"), at=offset + len(partial))
                yield _sse(f"nothing was written to the log for {idle:.0f} s", event="end")
                return
            if time.monotonic() - began >= span:
                return  # the browser reconnects and goes on from the last id
            await asyncio.sleep(poll)
