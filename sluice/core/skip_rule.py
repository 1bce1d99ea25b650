"""The rule of skipping a run's rebuild (pure, no import beyond the standard library's and
Sluice's records): what :mod:`sluice.core.skip` applies, the driver decides with, and the
service checks the driver's answer against (:func:`sluice.core.spark.results.check`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sluice.core.state.records import Seen

MAX_INPUTS = 1000
"""Inputs a model's check lists; past this it is never skipped (a bounded spec and record)."""

MAX_SIGNATURE = 200
"""Characters of one input's version as the driver reports it."""


@dataclass(frozen=True)
class Decision:
    """Whether a model's rebuild ran, and why, in a word (``code``) and in a sentence."""

    ran: bool
    code: str
    reason: str
    changed: tuple[str, ...] = ()


def decide(key: str, last: Seen | None, measured: Mapping[str, str | None]) -> Decision:
    """The rule: skip (``ran`` False) only when ``last`` exists, its key is ``key``, and
    every input in ``measured`` (the versions read now) reads as ``last`` recorded it,
    with no input gone or added."""
    if last is None:
        return Decision(True, "new", "no earlier run of this version recorded what it read")
    if last.key != key:
        return Decision(
            True,
            "query",
            "its query differs from its last run's (its definition or the dates it renders)",
        )
    unknown = sorted(t for t, s in measured.items() if s is None)
    if unknown:
        return Decision(
            True,
            "unknown",
            f"the version of {_names(unknown)} cannot be read (a view, or a format whose "
            "version Sluice does not read): run to be safe",
            tuple(unknown),
        )
    changed = sorted(
        t for t in set(measured) | set(last.inputs) if measured.get(t) != last.inputs.get(t)
    )
    if changed:
        return Decision(
            True, "input", f"{_names(changed)} changed since its last run", tuple(changed)
        )
    return Decision(
        False,
        "unchanged",
        f"its query and its {len(measured)} input{'s' if len(measured) != 1 else ''} are "
        "unchanged since its last run",
    )


def seen_of(last: Mapping[str, Any] | None) -> Seen | None:
    """A check's ``last`` (:class:`~sluice.core.spark.spec.SeenInputs`) as a :class:`Seen`."""
    if last is None:
        return None
    return Seen(str(last["key"]), {str(t): v for t, v in last["inputs"]}, int(last["at"]))


def _names(tables: Sequence[str]) -> str:
    shown = ", ".join(tables[:3])
    return shown + (f" and {len(tables) - 3} more" if len(tables) > 3 else "")
