"""A job's log as server-sent events (:mod:`sluice.bot.web.logs`), on files: lines with
the offset after each as their id, the driver's last event ending the stream, a response
that follows no longer than its span (the browser reconnects from the last id), a line
cut in the middle kept until its end is written, and what a browser's Last-Event-ID may
name."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from sluice.bot.web.logs import LINE_CHARS, follow, start_of

DONE = '@@sluice {"event": "job_failed", "error": "boom"}\n'


def _events(path: Path, **options: float | int) -> list[str]:
    async def run() -> list[str]:
        return [event async for event in follow(path, poll=0.01, **options)]  # type: ignore[arg-type]

    return asyncio.run(run())


def test_a_finished_log_streams_to_its_last_event_and_ends(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text("é one\n" + DONE + "never sent\n")
    events = _events(log)
    assert events[1] == "id: 7\ndata: é one\n\n"  # the offset in bytes, not characters
    assert events[2].startswith("id: 57\ndata: @@sluice")
    assert events[3].startswith("event: end\n") and len(events) == 4


def test_a_running_log_is_followed_for_its_span_then_the_browser_goes_on(
    tmp_path: Path,
) -> None:
    log = tmp_path / "job.log"
    log.write_text("one\ntw")  # the second line is being written
    first = _events(log, span=0)
    assert first == ["retry: 500\n\n", "id: 4\ndata: one\n\n"]  # no end: it goes on
    with log.open("a") as file:
        file.write("o\n" + DONE)
    then = _events(log, start=start_of("4", log), span=0)
    assert then[1] == "id: 8\ndata: two\n\n" and then[-1].startswith("event: end")


def test_a_log_nobody_writes_any_more_ends(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text("killed mid-line")
    old = log.stat().st_mtime - 3600
    os.utime(log, (old, old))
    events = _events(log, idle=600)
    assert events[1] == "id: 15\ndata: killed mid-line\n\n"
    assert events[2] == "event: end\ndata: nothing was written to the log for 600 s\n\n"


def test_long_lines_are_cut_and_carriage_returns_dropped(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text("x" * (LINE_CHARS + 10) + "\nspinner\r\n" + DONE)
    events = _events(log)
    assert events[1] == f"id: {LINE_CHARS + 11}\ndata: {'x' * LINE_CHARS}\n\n"
    assert events[2].endswith("data: spinner\n\n")


def test_only_an_offset_within_the_file_is_gone_on_from(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text("0123456789")
    assert start_of("4", log) == 4 and start_of("10", log) == 10
    for wrong in (None, "", "11", "-1", "1e3", "٣", "4 ", "99999999999999999999"):
        assert start_of(wrong, log) == 0, wrong
