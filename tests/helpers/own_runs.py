"""Clicks on Sluice's own check runs, for flow tests on the in-memory forge.

A button is taken only on a check run Sluice made (:mod:`sluice.bot.flow.own_checks`), so
a test's click names that run's id, as GitHub's webhook does. :func:`sluices_run` gives
it, having Sluice set the check first (GitHub's "Re-run" of it, ``rerequested``) when it
has not yet: nobody clicks a button Sluice never showed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sluice.bot.forge.memory import MemoryForge
from tests.helpers.cases import realcase

APPROVAL = "sluice/approval"


def sluices_run(
    deliver: Callable[[str, dict[str, Any]], None],
    forge: MemoryForge,
    head: str,
    *,
    number: int = 7,
    name: str = APPROVAL,
) -> int:
    """The id of Sluice's check run ``name`` on ``head`` (of pull request ``number``)."""
    made = forge.run_id(head, name)
    if made is None:
        rerun = realcase("github/check_run/rerequested.payload.json", forge.repo, **{
            "check_run.name": name, "check_run.head_sha": head,
        })  # fmt: skip
        rerun["check_run"]["pull_requests"] = [{"number": number, "id": number}]
        deliver("check_run", rerun)
        made = forge.run_id(head, name)
    assert made is not None, f"Sluice made no {name} check on {head}"
    return made
