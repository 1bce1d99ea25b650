"""Finding the processes a test or a bench kills: a process's descendants, a JVM among them."""

from __future__ import annotations

import os
from pathlib import Path


def _parents() -> dict[int, int]:
    """Every process's parent (from /proc)."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses
        found[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])
    return found


def descendants(pid: int) -> list[int]:
    """The processes under ``pid`` (children, theirs, ...), nearest first."""
    parents = _parents()
    found: list[int] = []
    level = [pid]
    while level:
        level = [child for child, parent in parents.items() if parent in level]
        found += level
    return found


def jvms_under(pid: int) -> list[int]:
    """The Java processes under ``pid`` (a Connect server's JVM under its sandbox)."""
    found = []
    for child in descendants(pid):
        try:
            program = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if program.endswith(b"/java") or program == b"java":
            found.append(child)
    return found
