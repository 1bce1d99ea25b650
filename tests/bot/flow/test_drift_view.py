"""What the flow keeps of prod's drift for the web UI's ``/ui/drift`` page
(sluice.bot.flow.drift_view, written by drift_repair.show): on GitHub (the in-memory forge,
real webhook bodies), the scheduled check's view and each button's, kept as the check run
says it: the repair plan's fingerprint, who asked and approved, the verdicts of the prod
branch's policies, a refusal; prod repaired, a clean view."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sluice.bot.flow import drift_repair, drift_view
from tests.helpers.repair_red_team import KEY, ONE, RepairWorld

SOFT = """\
name: views-need-frank
description: Making a view of prod again needs frank's word.
level: soft
override_by: [frank]
rule: '!plan.models.exists(m, m.change == "repoint")'
"""
HARD = """\
name: no-drops
description: No table of prod is dropped.
level: hard
rule: plan.destructive.size() == 0
"""


def _view(world: RepairWorld) -> dict[str, Any]:
    view = drift_view.load(world.ledger, KEY)
    assert view is not None
    return view


def test_the_view_follows_the_check_from_drift_to_repaired(tmp_path: Path) -> None:
    world = RepairWorld(tmp_path, ONE, {"policies/views-need-frank.yaml": SOFT})
    try:
        assert drift_view.load(world.ledger, KEY) is None  # no check yet
        world.redefine()
        view = _view(world)
        repair = view["repair"]
        assert view["drifted"] and view["head"] == world.github.refs["main"]
        assert [d["model"] for d in view["differences"]] == ["jaffle.customers"]
        assert repair["fingerprint"] == drift_repair.fingerprint(world.repair().plan)
        assert repair["repoint"] == ["jaffle.customers"] and repair["rebuild"] == []
        assert (repair["requesters"], repair["needed"]) == ([], 1)
        [verdict] = repair["policies"]
        assert (verdict["name"], verdict["outcome"], verdict["blocks"]) == (
            "views-need-frank", "fail", True,
        )  # fmt: skip
        assert verdict["override_by"] == ["frank"] and repair["held"] == ["views-need-frank"]
        world.click("alice", world.button("Plan the repair"))
        assert _view(world)["repair"]["requesters"] == ["alice"]
        world.click("frank", world.button("Override policies"))
        lifted = _view(world)["repair"]
        assert lifted["held"] == [] and lifted["policies"][0]["overridden_by"] == "frank"
        world.click("bob", world.button("Approve the repair"))
        after = _view(world)
        assert not after["drifted"] and after["repair"] is None  # repaired, checked again
    finally:
        world.close()


def test_a_hard_policy_refusal_is_in_the_view(tmp_path: Path) -> None:
    world = RepairWorld(tmp_path, ONE, {"policies/no-drops.yaml": HARD})
    try:
        world.drop_orders()
        world.click("alice", world.button("Plan the repair"))
        repair = _view(world)["repair"]
        assert repair["refusal"].startswith("blocked by no-drops (hard, policies/no-drops.yaml:")
        assert repair["policies"][0]["blocks"] and repair["held"] == []
    finally:
        world.close()
