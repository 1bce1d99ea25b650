"""A batch of deliveries on its way into the queue's tables: duplicates within it, the
jobs' payloads as stored, the rows PostgreSQL's batch function takes, and each delivery's
outcome (used by both databases' paths in :mod:`sluice.bot.queue.store`)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from typing import Any

import orjson

from sluice.bot.queue.schema import Delivery

logger = logging.getLogger("sluice.bot.queue.store")


class Batch:
    """A batch of deliveries being stored: each delivery id's first copy (``unique``, in
    arrival order), their jobs' payloads serialised before any round trip (a payload that
    cannot be stored fails the batch without one), and the outcome for every copy."""

    def __init__(self, batch: Sequence[Delivery]) -> None:
        self._batch = batch
        self._first: dict[str, int] = {}  # delivery id -> index of its first copy
        for index, item in enumerate(batch):
            self._first.setdefault(item.delivery_id, index)
        self.unique = [batch[index] for index in self._first.values()]  # dicts keep order
        self.payloads = {
            d.delivery_id: payload_text(d.job.payload) for d in self.unique if d.job is not None
        }
        self.what = (
            f"delivery {self.unique[0].delivery_id!r}"
            if len(self.unique) == 1
            else f"{len(self.unique)} deliveries"
        )

    def server_rows(self) -> str:
        """The batch as the PostgreSQL function takes it (see :mod:`sluice.bot.queue.pg`)."""
        return json_rows(
            {
                "n": n,
                "d": d.delivery_id,
                "f": d.forge,
                "e": d.event,
                "t": ms(d.now),
                "k": d.job.key if d.job else None,
                "c": d.job.kind if d.job else None,
                "p": self.payloads.get(d.delivery_id),
                "h": d.job.head_sha if d.job else None,
                "s": bool(d.job and d.job.supersede),
            }
            for n, d in enumerate(self.unique)
        )

    def outcome(self, stored: Iterable[Any]) -> list[bool]:
        """Whether each delivery, in order, was fresh, from the (delivery id, job id, jobs
        superseded) of those stored."""
        fresh_ids = set()
        for delivery_id, job_id, superseded in stored:
            fresh_ids.add(delivery_id)
            if superseded:
                logger.info("job %s superseded %d queued job(s)", job_id, superseded)
        outcome = []
        for index, item in enumerate(self._batch):
            fresh = self._first[item.delivery_id] == index and item.delivery_id in fresh_ids
            if not fresh:
                logger.info(
                    "delivery %s (%s %s) seen before: ignored",
                    item.delivery_id,
                    item.forge,
                    item.event,
                )
            outcome.append(fresh)
        return outcome


def payload_text(payload: dict[str, Any]) -> str:
    """A job's payload as stored (keys sorted: the same payload, the same text)."""
    return _json_text(payload, sort_keys=True)


def json_rows(rows: Iterable[Any]) -> str:
    """A JSON array of ``rows``, for the PostgreSQL function that takes a batch as one."""
    return _json_text(list(rows), sort_keys=False)


def _json_text(value: Any, *, sort_keys: bool) -> str:
    """Compact JSON: orjson (a tenth of the json module's time), the json module for what
    orjson refuses (integers beyond 64 bits, lone surrogates)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS if sort_keys else None).decode()
    except orjson.JSONEncodeError:
        return json.dumps(value, separators=(",", ":"), sort_keys=sort_keys)


def ms(seconds: float) -> int:
    return round(seconds * 1000)
