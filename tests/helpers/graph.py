"""Commit reachability for the fake forges: which commits a branch, tag or sha reaches."""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def reachable(edges: Mapping[str, Iterable[str]], ref: str, tip: str) -> set[str]:
    """``tip`` (the commit ``ref`` names) and every commit reachable from ``ref`` or ``tip``
    through ``edges`` (a key, a branch name or a sha, to the commits it reaches directly)."""
    seen, todo = {tip}, [ref, tip]
    while todo:
        for sha in edges.get(todo.pop(), ()):
            if sha not in seen:
                seen.add(sha)
                todo.append(sha)
    return seen
