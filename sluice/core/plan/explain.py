"""Why each model is in a plan, in one line per model (``sluice plan --explain``).

A plan says what changes; this says why, model by model, from what the plan already
holds: its category and the columns behind it, the upstream change that reaches an
indirect one, what is missing from a table that is built. Nothing is computed again.

>>> from sluice.core.plan.plan import Category, ModelChange
>>> change = ModelChange("s.orders", Category.NON_BREAKING, "v2", "v1")
>>> directly(change)
'its definition changed; non-breaking: models downstream keep their tables'
"""

from __future__ import annotations

from dataclasses import dataclass

from sluice.core.plan.lineage import ColumnImpact
from sluice.core.plan.plan import Backfill, ModelChange, Plan
from sluice.core.timeutil import format_range
from sluice.core.words import plural

_CATEGORY = {
    "breaking": "breaking: models downstream are rebuilt",
    "non-breaking": "non-breaking: models downstream keep their tables",
    "forward-only": "forward-only: its table is kept, new data follows the new definition",
    "metadata": "metadata only: no data changes",
}


@dataclass(frozen=True)
class Reason:
    """One model's line: its name, what the plan does to it, and why."""

    model: str
    does: str
    why: str

    def to_json(self) -> dict[str, str]:
        return {"model": self.model, "does": self.does, "why": self.why}


def explain(plan: Plan) -> list[Reason]:
    """A :class:`Reason` for every model the plan adds, removes, changes or builds, in the
    order a reviewer reads them: removals and breaking changes first."""
    reasons: list[Reason] = [
        Reason(name, "removed", f"in {plan.environment}, no longer in the project")
        for name in plan.removed
    ]
    direct = sorted(plan.directly_modified, key=lambda c: c.category.value != "breaking")
    reasons += [Reason(c.name, "directly modified", directly(c)) for c in direct]
    reasons += [
        Reason(c.name, "indirectly modified", indirectly(c)) for c in plan.indirectly_modified
    ]
    reasons += [
        Reason(name, "added", f"new in the project: {plan.environment} has no such model")
        for name in plan.added
    ]
    reasons += [
        Reason(name, "metadata only", "only its description, owner or other metadata changed")
        for name in plan.metadata_only
    ]
    reasons += [
        Reason(name, "new snapshot", "a non-breaking change upstream, of columns it does not read")
        for name in plan.unaffected
    ]
    changed = {r.model for r in reasons}
    for item in plan.backfill:
        why = built(plan, item)
        if item.name in changed:
            reasons = [
                Reason(r.model, r.does, f"{r.why}; {why}") if r.model == item.name else r
                for r in reasons
            ]
        else:
            reasons.append(Reason(item.name, "built", why))
    return reasons


def directly(change: ModelChange) -> str:
    """Why a directly modified model is in the plan, with its category's meaning.

    >>> from sluice.core.plan.plan import Category
    >>> directly(ModelChange("s.c", Category.NON_BREAKING, "v2", "v1", reshaped_by=("s.p",)))
    'its query reads the changed columns of s.p; non-breaking: models downstream keep their tables'
    """
    columns = _columns(change.columns)
    what = (
        f"its query reads the changed columns of {', '.join(change.reshaped_by)}"
        if change.reshaped_by
        else "its definition changed"
    ) + (f" ({columns})" if columns else "")
    return f"{what}; {_CATEGORY.get(change.category.value, change.category.value)}"


def indirectly(change: ModelChange) -> str:
    """Why an indirectly modified model is in the plan: the change that reaches it."""
    via = ", ".join(change.reached_by) or "a model upstream"
    impact = change.columns
    reads = ""
    if impact is not None and not impact.unknown and impact.reads:
        read = [f"the rows of {r[:-2]}" if r.endswith(".*") else r for r in impact.reads]
        reads = f"; it reads {', '.join(read)}"
    category = _CATEGORY.get(change.category.value, change.category.value)
    return f"a change upstream reaches it: {via}{reads}; {category}"


def built(plan: Plan, item: Backfill) -> str:
    """What building the model's table computes, and why it must."""
    snapshot = plan.snapshot(item.name)
    if snapshot.model.kind.is_scd_type_2:
        due = plural(len(item.intervals), "interval")
        return f"its query's rows now are merged into its history ({due} due)"
    if not snapshot.model.kind.is_incremental_by_time:
        return "its table is computed in full (a full-refresh model)"
    count = plural(len(item.intervals), "interval")
    span = format_range(item.start, item.end)
    if item.name in plan.restated:
        return f"restated: {count} computed again ({span})"
    return f"its table is missing {count} ({span})"


def _columns(impact: ColumnImpact | None) -> str:
    if impact is None:
        return ""
    if impact.unknown:
        return f"columns not known: {impact.reason}" if impact.reason else ""
    verbs = {"added": "adds", "changed": "changes", "removed": "removes"}
    parts = [f"{verbs[what]} {', '.join(names)}" for what, names in impact.own_changes()]
    if impact.rows_changed:
        parts.append("its rows change")
    return "; ".join(parts)
