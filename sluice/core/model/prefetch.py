"""A cold load parses on two cores: a forked child parses the second half of the model
files the parse cache does not answer, and hands back the cache entries it made; the
loader parses the first half meanwhile, takes the child's entries when it reaches the
second half, and reads those files from the cache (issue 21: parsing is most of a cold
plan, and SQLMesh loads on every core).

The child only ever adds cache entries, which the loader checks as it checks any
(keyed by each file's text), so a child that fails, dies or is slow changes nothing but
the time: a file it did not hand back is parsed by the loader, which reports its errors.
Nothing is forked on one core, with other threads running (a fork copies only the
calling thread, and a lock one of them held would stay held), without a cache, with a
project's Python macros running (their process's pipes are the loader's), or for fewer
than :data:`MIN_FILES` files.

>>> made = {}
>>> files = [Path(f"models/m{i}.sql") for i in range(4)]
>>> def parse(file):  # what the loader does: the cache keeps an entry per file
...     made[str(file)] = {"key": f"k-{file.name}"}
>>> child = start(files, parse, made, minimum=2)  # None on one core
>>> handed = child.join(made) if child is not None else 0
>>> sorted(made) == (["models/m2.sql", "models/m3.sql"] if child else []), handed in (0, 2)
(True, True)
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import threading
from collections.abc import Callable, MutableMapping, Sequence
from pathlib import Path
from typing import Any

from sluice.core import sandbox

log = logging.getLogger(__name__)

MIN_FILES = 50
"""Fewer files than this parse in the loader alone. Parsing a model took about 2 ms of
CPU here and reading one back from the cache about 0.2 ms (1,000 generated models: 2.0 s
cold, 0.2 s warm); at 100 models the fork cut a whole cold load from 0.51 s to 0.43 s of
wall clock for the same CPU (medians of 7). Below 50 there is little to gain, and one
process is simpler to follow when something goes wrong."""


class Child:
    """A forked child parsing :attr:`files` (their display names) into its copy of the
    cache; :meth:`join` takes what it made."""

    def __init__(self, pid: int, pipe: int, files: frozenset[str]) -> None:
        self.pid = pid
        self.pipe = pipe
        self.files = files

    def join(self, entries: MutableMapping[str, Any]) -> int:
        """Wait for the child and add its entries to ``entries``; how many it handed back
        (none if it failed: the loader then parses those files itself)."""
        with os.fdopen(self.pipe, "rb") as pipe:
            data = pipe.read()  # to the end: the child exits once it has written it all
        _, status = os.waitpid(self.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            log.debug("the parsing child exited with %s; parsing its files here", status)
            return 0
        try:
            made = json.loads(data)
        except ValueError:
            return 0
        made = {k: v for k, v in made.items() if k in self.files and isinstance(v, dict)}
        entries.update(made)
        return len(made)

    def stop(self) -> None:
        """Kill the child (the load ended without reaching its files)."""
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        with contextlib.suppress(OSError):
            os.close(self.pipe)


def start(
    files: Sequence[Path],
    parse: Callable[[Path], object],
    entries: MutableMapping[str, Any],
    *,
    minimum: int | None = None,
) -> Child | None:
    """Fork a child that calls ``parse`` on the second half of ``files`` (each call adds
    the file's entry to ``entries``, the cache's, when the cache keeps it) and writes
    those entries back; None where nothing is forked (see the module's docstring)."""
    if len(files) < (MIN_FILES if minimum is None else minimum) or not _may_fork():
        return None
    half = list(files[len(files) // 2 :])
    read, write = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read)
        os.close(write)
        return None
    if pid == 0:  # the child: parse, hand back, and leave without running any cleanup
        code = 1
        try:
            os.close(read)
            sandbox.confine_fork()
            for file in half:
                try:
                    parse(file)
                except Exception:  # the loader parses it again and reports it
                    continue
            made = {str(f): entries[str(f)] for f in half if str(f) in entries}
            with os.fdopen(write, "wb") as pipe:
                pipe.write(json.dumps(made, separators=(",", ":")).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    return Child(pid, read, frozenset(str(f) for f in half))


def _may_fork() -> bool:
    if not hasattr(os, "fork") or threading.active_count() > 1:
        return False
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (cores or 1) > 1
