"""A plan as policies see it: plain values (strings, numbers, booleans, lists, maps).

Every fact below is always present (an empty list, 0 or false when it does not apply), so
a rule that names one never fails for its absence; a misspelt fact is an error.

- ``author``: who proposes the plan (the PR's author; ``sluice plan``: the user or
  ``--author``); ``pushers``: who pushed to the PR or authored or committed its commits
  (case-folded, as the approval gate counts them; empty outside the service): a rule
  naming ``author`` is evaluated once more with each of them as ``author`` and fails if
  any evaluation does; ``environment``: the environment planned (``prod``, ``pr_12``...);
  ``files``: the paths the change touches (sorted; empty when not known);
- ``today``: ``weekday`` (``Monday``...), ``date`` (``YYYY-MM-DD``), ``hour`` (0-23), UTC;
- ``plan.added``, ``plan.removed``, ``plan.modified`` (directly), ``plan.indirect``,
  ``plan.destructive``: model names;
- ``plan.backfill``: ``intervals``, ``bytes`` (estimated read), ``bytes_measured`` (false
  when a parent's size is unknown, or the plan's backfill was never estimated: ``bytes``
  is then 0 whatever it reads), ``models``;
- ``plan.models``: one map per model the plan adds, removes or changes: ``name``,
  ``change`` (``added``, ``removed``, ``breaking``, ``non-breaking``, ``forward-only``,
  ``metadata``, ``indirect-breaking``, ``indirect-non-breaking``; a drift repair's plan:
  ``rebuild``, a table dropped and built again, which is ``destructive``, and
  ``repoint``, a view made again), ``direct``, ``kind``
  (``FULL``, ``INCREMENTAL_BY_TIME_RANGE``...), ``tags``, ``owner`` (``""``: none),
  ``grain``, ``columns_added``, ``columns_removed``, ``columns_changed``,
  ``backfill_intervals``, ``estimated_bytes`` (what its backfill reads), ``bytes_measured``,
  ``destructive`` (a forward-only change that drops or retypes a column of its table),
  ``reads_tags`` (the tags of every model upstream of it).

>>> from sluice.core.policy.facts import FACT_NAMES
>>> "reads_tags" in FACT_NAMES["plan.models[]"]
True
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from sluice.core.model.definition import Model
from sluice.core.plan.plan import Plan

FACT_NAMES: dict[str, tuple[str, ...]] = {
    "": ("author", "pushers", "environment", "files", "today", "plan"),
    "today": ("weekday", "date", "hour"),
    "plan": ("added", "removed", "modified", "indirect", "destructive", "backfill", "models"),
    "plan.backfill": ("intervals", "bytes", "bytes_measured", "models"),
    "plan.models[]": (
        "name",
        "change",
        "direct",
        "kind",
        "tags",
        "owner",
        "grain",
        "columns_added",
        "columns_removed",
        "columns_changed",
        "backfill_intervals",
        "estimated_bytes",
        "bytes_measured",
        "destructive",
        "reads_tags",
    ),
}
"""Every fact, by where it is (``plan.models[]``: each model's map): ``sluice policy facts``."""


def plan_facts(
    plan: Plan,
    models: Mapping[str, Model],
    base: Mapping[str, Model] | None = None,
    *,
    author: str = "",
    pushers: Iterable[str] = (),
    files: Iterable[str] = (),
    now: dt.datetime | None = None,
) -> dict[str, Any]:
    """The facts of ``plan`` of the project whose models are ``models``; ``base``: the
    models of the environment it was planned against (for what it removes)."""
    base = base or {}
    now = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
    intervals = {b.name: len(b.intervals) for b in plan.backfill}
    scan = plan.scan
    read = dict(scan.bytes) if scan is not None else {}
    unmeasured = {n for n, parents in (scan.unmeasured.items() if scan else ()) if parents}
    # No estimate of a backfill is no measure (bytes 0): a rule can refuse the unknown.
    measured = scan.complete if scan is not None else not plan.backfill_intervals
    destructive = sorted(
        {
            c.name
            for c in plan.directly_modified
            if c.name in plan.destructive
            or any(f"forward-only change to {c.name} " in w for w in plan.warnings)
        }
        | set(plan.rebuild)  # a drift repair drops the table first
    )
    entries: list[dict[str, Any]] = []

    def entry(name: str, change: str, direct: bool, model: Model | None) -> dict[str, Any]:
        impact = None
        for c in (*plan.directly_modified, *plan.indirectly_modified):
            if c.name == name:
                impact = c.columns
        return {
            "name": name,
            "change": change,
            "direct": direct,
            "kind": str(model.kind.name) if model is not None else "",
            "tags": sorted(model.tags) if model is not None else [],
            "owner": (model.owner or "") if model is not None else "",
            "grain": list(model.grain) if model is not None else [],
            "columns_added": list(impact.added) if impact else [],
            "columns_removed": list(impact.removed) if impact else [],
            "columns_changed": list(impact.changed) if impact else [],
            "backfill_intervals": intervals.get(name, 0),
            "estimated_bytes": int(read.get(name, 0)),
            "bytes_measured": name not in unmeasured
            and (scan is not None or not intervals.get(name)),
            "destructive": name in destructive,
            "reads_tags": sorted(_upstream_tags(name, models if model is not None else base)),
        }

    for name in plan.added:
        entries.append(entry(name, "added", True, models.get(name)))
    for name in plan.removed:
        entries.append(entry(name, "removed", True, base.get(name)))
    for change in plan.directly_modified:
        entries.append(entry(change.name, str(change.category), True, models.get(change.name)))
    for change in plan.indirectly_modified:
        kind = f"indirect-{change.category}"
        entries.append(entry(change.name, kind, False, models.get(change.name)))
    for name in plan.metadata_only:
        entries.append(entry(name, "metadata", True, models.get(name)))
    # A drift repair changes no model: what it does to prod's objects is its change.
    for name in plan.rebuild:
        entries.append(entry(name, "rebuild", True, models.get(name)))
    for name in sorted(set(plan.repoint) - set(plan.rebuild)):
        entries.append(entry(name, "repoint", True, models.get(name)))
    entries.sort(key=lambda e: e["name"])
    return {
        "author": author,
        "pushers": sorted(set(pushers)),
        "environment": plan.environment,
        "files": sorted(set(files)),
        "today": {"weekday": now.strftime("%A"), "date": now.date().isoformat(), "hour": now.hour},
        "plan": {
            "added": sorted(plan.added),
            "removed": sorted(plan.removed),
            "modified": sorted(c.name for c in plan.directly_modified),
            "indirect": sorted(c.name for c in plan.indirectly_modified),
            "destructive": destructive,
            "backfill": {
                "intervals": plan.backfill_intervals,
                "bytes": int(scan.total) if scan is not None else 0,
                "bytes_measured": measured,
                "models": sorted(intervals),
            },
            "models": entries,
        },
    }


def with_prods(
    facts: dict[str, Any], models: Mapping[str, Model], prod: Mapping[str, Model]
) -> dict[str, Any]:
    """``facts`` with what prod says of its models kept: a PR's header cannot untag or
    re-own a model to walk past a policy (red team). A model prod has: its ``tags`` are
    the PR's and prod's, its ``owner`` prod's (as the gate asks prod's owner); every
    model's ``reads_tags`` are the tags of its upstream models as the PR and prod tag
    them. The service's facts are these (``sluice.bot.flow.policies``), and so are those
    of ``sluice drift --repair`` (:func:`repair_facts`)."""
    for entry in facts["plan"]["models"]:
        name = entry["name"]
        held = prod.get(name)
        if held is not None:
            entry["tags"] = sorted(set(entry["tags"]) | set(held.tags))
            if held.owner:
                entry["owner"] = held.owner
        entry["reads_tags"] = sorted(set(entry["reads_tags"]) | _both_upstream(name, models, prod))
        # Destructive whatever the PR's own `on_destructive_change` says of it (`allow`
        # silences the planner's warning, not the change): a forward-only change that
        # drops a column of its table (a retype: the plan's `destructive`, in the facts).
        if entry["change"] == "forward-only" and entry["columns_removed"]:
            entry["destructive"] = True
    destructive = {e["name"] for e in facts["plan"]["models"] if e["destructive"]}
    facts["plan"]["destructive"] = sorted(set(facts["plan"]["destructive"]) | destructive)
    return facts


def repair_facts(
    plan: Plan,
    models: Mapping[str, Model],
    prod: Mapping[str, Model],
    *,
    author: str,
    requesters: Iterable[str],
    now: dt.datetime,
) -> dict[str, Any]:
    """The facts of a drift repair's ``plan`` (issue 47), as the service's repair gate
    and ``sluice drift --repair`` both judge it: no file changed, ``author`` one who asked
    for it, ``pushers`` all who asked (case-folded), prod's say kept (:func:`with_prods`)."""
    pushers = [p.casefold() for p in requesters]
    facts = plan_facts(plan, models, prod, author=author, pushers=pushers, files=(), now=now)
    return with_prods(facts, models, prod)


def _both_upstream(name: str, models: Mapping[str, Model], prod: Mapping[str, Model]) -> set[str]:
    """The tags, as the PR or prod has them, of every model upstream of ``name`` (through
    either one's dependencies)."""
    tags: set[str] = set()
    seen: set[str] = set()

    def parents(of: str) -> list[str]:
        ours = models[of].depends_on if of in models else ()
        return [*ours, *(prod[of].depends_on if of in prod else ())]

    stack = parents(name)
    while stack:
        parent = stack.pop()
        if parent in seen:
            continue
        seen.add(parent)
        for side in (models, prod):
            if parent in side:
                tags.update(side[parent].tags)
        stack.extend(parents(parent))
    return tags


def _upstream_tags(name: str, models: Mapping[str, Model]) -> set[str]:
    """The tags of every model upstream of ``name``."""
    tags: set[str] = set()
    seen: set[str] = set()
    stack = list(models[name].depends_on) if name in models else []
    while stack:
        parent = stack.pop()
        if parent in seen or parent not in models:
            continue
        seen.add(parent)
        tags.update(models[parent].tags)
        stack.extend(models[parent].depends_on)
    return tags
