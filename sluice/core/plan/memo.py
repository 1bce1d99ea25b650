"""The planner's caches of what a model's query gives (column types, lineage shapes, star
reads, output columns): least recently used out first, bounded in entries and in the
characters of query text their entries were made from.

An entry costs about 16 times its query's text (a 734-character query: 12 KiB over the
four caches), and each new text of a model is an entry: a service planning pull request
after pull request fills its caches to their bound and stays there (docs/reliability.md,
Soak). The count alone would not bound them: a model file may be 4 MiB of SQL
(``loader.MAX_FILE_BYTES``), and 4096 of those would be 16 GiB.
"""

from __future__ import annotations

import enum
import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterator
from typing import Generic, Literal, TypeVar

ENTRIES = 4096
"""Entries a cache holds at most."""

CHARS = 8 << 20
"""Characters of query text a cache's entries were made from, at most (twice the largest
model file a project may hold)."""

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Missing(enum.Enum):
    """What :meth:`QueryCache.get` answers for a key it does not hold."""

    MISSING = enum.auto()


MISSING: Literal[Missing.MISSING] = Missing.MISSING


class QueryCache(Generic[K, V]):
    """A bounded cache, safe to share between threads (the service plans in several)."""

    def __init__(self, entries: int = ENTRIES, chars: int = CHARS) -> None:
        self.entries = entries
        self.chars = chars
        self._kept: OrderedDict[K, tuple[int, V]] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def get(self, key: K) -> V | Literal[Missing.MISSING]:
        """The value kept for ``key`` (now the most recently used), else :data:`MISSING`."""
        with self._lock:
            kept = self._kept.get(key)
            if kept is None:
                return MISSING
            self._kept.move_to_end(key)
            return kept[1]

    def put(self, key: K, text: str, value: V) -> None:
        """Keep ``value`` for ``key``, made from query ``text``; the least recently used
        entries leave while there are more than :attr:`entries` or their texts are more
        than :attr:`chars` characters (one text longer than that is not kept)."""
        size = len(text)
        with self._lock:
            old = self._kept.pop(key, None)
            if old is not None:
                self._chars -= old[0]
            if size > self.chars:
                return
            self._kept[key] = (size, value)
            self._chars += size
            while len(self._kept) > self.entries or self._chars > self.chars:
                _, (gone, _) = self._kept.popitem(last=False)
                self._chars -= gone

    def held(self) -> int:
        """Characters of query text the entries kept were made from."""
        with self._lock:
            return self._chars

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
            self._chars = 0

    def __len__(self) -> int:
        return len(self._kept)

    def __iter__(self) -> Iterator[K]:
        with self._lock:
            return iter(list(self._kept))
