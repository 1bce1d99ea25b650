"""Policies evaluated on a plan's facts: one :class:`Verdict` each.

>>> from sluice.core.policy.load import parse_policy
>>> soft = parse_policy("policies/s.yaml", "name: s\\ndescription: d\\nlevel: soft\\n"
...                     "override_by: [octo/leads]\\nrule: plan.added.size() < 2\\n")
>>> [v.blocks for v in evaluate([soft], {"plan": {"added": ["a", "b"]}})]
[True]
>>> [v.summary for v in evaluate([soft], {"plan": {"added": ["a", "b"]}}, {"s": "ann"})]
['overridden by ann']
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from sluice.core.errors import SluiceError
from sluice.core.policy.facts import repair_facts
from sluice.core.policy.load import Policy

if TYPE_CHECKING:
    from sluice.core.model.definition import Model
    from sluice.core.plan.plan import Plan

Outcome = Literal["pass", "fail", "error"]


@dataclass(frozen=True)
class Verdict:
    """What one policy says of a plan."""

    policy: Policy
    outcome: Outcome
    error: str = ""  # the evaluation error (outcome "error"), with file:line and hint
    overridden_by: str | None = None  # a soft failure lifted for this plan by this person

    @property
    def blocks(self) -> bool:
        """Whether it stops the merge: an error (fail closed), a hard failure, or a soft
        one nobody allowed has overridden."""
        if self.outcome == "error":
            return True
        if self.outcome == "fail":
            return self.policy.level == "hard" or (
                self.policy.level == "soft" and self.overridden_by is None
            )
        return False

    @property
    def summary(self) -> str:
        """The verdict in a few words."""
        if self.outcome == "pass":
            return "passed"
        if self.outcome == "error":
            return "could not be evaluated (blocks)"
        if self.overridden_by is not None:
            return f"overridden by {self.overridden_by}"
        return {
            "advisory": "failed (advisory: does not block)",
            "soft": "failed (blocks until overridden)",
            "hard": "failed (blocks)",
        }[self.policy.level]


def evaluate(
    policies: Sequence[Policy],
    facts: dict[str, Any],
    overrides: Mapping[str, str] | None = None,
) -> list[Verdict]:
    """Each policy on ``facts``; ``overrides``: policy name -> who overrode it for this
    plan (the caller checked they may: a soft policy's ``override_by``)."""
    overrides = overrides or {}
    verdicts = []
    for policy in policies:
        try:
            ok = policy.rule.evaluate(facts)
        except SluiceError as exc:
            verdicts.append(Verdict(policy, "error", error=str(exc)))
            continue
        who = overrides.get(policy.name) if policy.level == "soft" else None
        verdicts.append(
            Verdict(policy, "pass" if ok else "fail", overridden_by=None if ok else who)
        )
    return verdicts


def blocking(verdicts: Sequence[Verdict]) -> list[Verdict]:
    """The verdicts that stop the merge."""
    return [v for v in verdicts if v.blocks]


_WORSE = {"pass": 0, "fail": 1, "error": 2}


def repair_verdicts(
    policies: Sequence[Policy],
    plan: Plan,
    models: Mapping[str, Model],
    prod: Mapping[str, Model],
    requesters: Sequence[str],
    now: dt.datetime,
) -> list[Verdict]:
    """The policies on a drift repair's ``plan`` (issue 47), each of ``requesters`` as
    ``author`` in turn (none: ``""``), the worst outcome of each policy counting: the
    service's repair gate (``sluice.bot.flow.repair_gate``) and ``sluice drift --repair``
    judge a repair with this, on the same facts (:func:`~.facts.repair_facts`)."""
    people = list(dict.fromkeys(requesters)) or [""]
    worst: dict[str, Verdict] = {}
    for person in people:
        facts = repair_facts(plan, models, prod, author=person, requesters=people, now=now)
        for verdict in evaluate(policies, facts):
            held = worst.get(verdict.policy.name)
            if held is None or _WORSE[verdict.outcome] > _WORSE[held.outcome]:
                worst[verdict.policy.name] = verdict
    return [worst[p.name] for p in policies if p.name in worst]
