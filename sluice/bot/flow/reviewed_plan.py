"""What a reviewer approves when they approve a plan, and what a promotion must find approved.

A plan's *review* names the model changes a person has to look at: each added, removed,
directly modified or metadata-changed model, keyed by the content of that model alone
(its own query and properties, not its parents'). Indirect changes follow from those, so
they need no approval of their own, and two PRs changing different models approve keys
that stay valid when both are merged. The project's Python is an item like a model when
it differs from prod's (:func:`python_item`). The review's fingerprint is what an approval
is bound to: a push that leaves it unchanged keeps approvals, one that changes it needs new
ones.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sluice.core.model.definition import Project
from sluice.core.model.graph import descendants
from sluice.core.model.pycode import files
from sluice.core.plan import statements
from sluice.core.plan.plan import Plan
from sluice.core.snapshot.naming import PROD
from sluice.core.snapshot.snapshot import Category, Snapshot
from sluice.core.state import StateStore

REMOVED = "removed"
PYTHON_ITEM = "project Python (*.py)"
"""The review item standing for the project's Python (its content: their digest)."""
STATEMENTS_ITEM = "project statements (before_all, after_all)"
"""The item standing for config.yaml's ``before_all`` / ``after_all`` when they differ
from prod's: a job runs them, so an approval covers them."""
PROJECT_ITEMS = frozenset({PYTHON_ITEM, STATEMENTS_ITEM})
"""Items of the whole project, no one model's."""

Item = tuple[str, str]
"""(model name, key of its own content; :data:`REMOVED` for a removed model)."""


@dataclass(frozen=True)
class PlanReview:
    """The approvable content of a plan."""

    fingerprint: str
    items: tuple[Item, ...]
    direct_owners: dict[str, str | None]  # directly modified or added model -> owner
    breaking_owners: dict[str, str | None]  # every model a breaking change reaches -> owner
    merge_intervals: int = 0  # what merging would backfill in prod (sluice.gate.backfill)
    merge_bytes: int | None = None  # and about how many bytes that backfill reads
    # The settings in force it was made under (trust.Settings.generation): who it asks
    # (owners, budget) follows them, so under other settings it is planned again. "": a
    # review recorded before this was kept.
    generation: str = ""
    # What each policy in force said of the plan when it was made (policy name, outcome:
    # pass, fail or error, the error's text): what an override lifts
    # (:mod:`sluice.bot.flow.policies`).
    policies: tuple[tuple[str, str, str], ...] = ()
    # Every owner prod records when it was made: under a gate of owners only, the approval
    # more a bot's push asks comes from them (gate_rules), never
    # from an owner a new model's header names.
    prod_owners: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "fingerprint": self.fingerprint,
            "items": [list(item) for item in self.items],
            "direct_owners": self.direct_owners,
            "breaking_owners": self.breaking_owners,
            "merge_intervals": self.merge_intervals,
            "merge_bytes": self.merge_bytes,
            "generation": self.generation,
            "policies": [list(verdict) for verdict in self.policies],
            "prod_owners": list(self.prod_owners),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PlanReview:
        return cls(
            fingerprint=data["fingerprint"],
            items=tuple((str(n), str(k)) for n, k in data["items"]),
            direct_owners=dict(data["direct_owners"]),
            breaking_owners=dict(data["breaking_owners"]),
            merge_intervals=int(data.get("merge_intervals", 0)),  # recorded before: none
            merge_bytes=data.get("merge_bytes"),
            generation=str(data.get("generation") or ""),
            policies=tuple(
                (str(name), str(outcome), str(error))
                for name, outcome, error in data.get("policies") or ()
            ),
            prod_owners=tuple(str(owner) for owner in data.get("prod_owners") or ()),
        )


def own_key(snapshot: Snapshot) -> str:
    """A key for a model's own content (query, properties, metadata), not its parents'."""
    fp = snapshot.fingerprint
    return hashlib.sha256(f"{fp.data_hash}:{fp.metadata_hash}".encode()).hexdigest()[:32]


def review_of(
    plan: Plan,
    project: Project,
    *,
    prod_python: str | None,
    prod_statements: str | None = None,
    owners: Mapping[str, str | None] | None = None,
    extra: Item | None = None,
    owners_only: bool = True,
) -> PlanReview:
    """The review of ``plan`` (a PR environment's plan, or prod's at promotion).

    ``prod_python``: the digest of prod's Python (None: prod has none; see
    :func:`sluice.bot.flow.trust.prod_python_digest`), so the project's Python is an item
    only when it differs.
    ``prod_statements``: the digest of prod's ``before_all`` / ``after_all`` (None: prod
    has none; :func:`sluice.bot.flow.trust.prod_statements_digest`), so the project's are
    an item only when they differ.
    ``owners``: model -> owner as prod has it; a model prod has is owned by that owner
    whatever the PR's header says (only a model new to prod takes its header's owner).
    ``extra``: one more item to approve with the plan (a change of trusted settings).
    ``owners_only``: the gate has no required approvers (``owners_must_approve`` alone):
    then a change of the whole project (``extra``, its Python, its statements) is every
    prod owner's to approve, as no one model's owner speaks for the rest.

    Every model item has an owner to ask: an added or changed model its owner (prod's for
    a model prod has), a metadata change (an owner moved, an audit, a cron) and a removal
    prod's owner of that model.
    """
    items: list[Item] = [extra] if extra is not None else []
    python = python_item(project, prod_python)
    if python is not None:
        items.append(python)
    ours = statements.digest(project.before_all, project.after_all)
    if ours != prod_statements:  # added, changed or removed: what a job runs changes
        items.append((STATEMENTS_ITEM, ours or "none"))
    direct: dict[str, str | None] = {}
    breaking: dict[str, str | None] = {}
    categories: dict[str, str] = {}
    trusted = owners or {}

    def owner(name: str) -> str | None:
        if name in trusted:
            return trusted[name]
        model = project.models.get(name)
        return model.owner if model is not None else None

    for name in plan.added:
        items.append((name, own_key(plan.snapshot(name))))
        direct[name] = owner(name)
        categories[name] = "added"
    for change in plan.directly_modified:
        items.append((change.name, own_key(plan.snapshot(change.name))))
        direct[change.name] = owner(change.name)
        categories[change.name] = change.category.value
    for name in plan.metadata_only:
        items.append((name, own_key(plan.snapshot(name))))
        direct[name] = owner(name)  # prod's: a PR moving the owner asks the one it moves from
        categories[name] = "metadata"
    for name in plan.removed:
        items.append((name, REMOVED))
        direct[name] = trusted.get(name)
        categories[name] = REMOVED
    for change in plan.indirectly_modified:
        categories[change.name] = f"indirect {change.category.value}"
    roots = [c.name for c in plan.directly_modified if c.category == Category.BREAKING]
    for name in sorted(set(roots) | descendants(project.models, roots)):
        breaking[name] = owner(name)
    whole_project = extra is not None or any(name in PROJECT_ITEMS for name, _ in items)
    if owners_only and whole_project:
        direct.update({name: who for name, who in sorted(trusted.items()) if who})
    items.sort()
    fingerprint = hashlib.sha256(
        json.dumps([items, sorted(categories.items())], separators=(",", ":")).encode()
    ).hexdigest()
    # As the gate reads an owner: ``@bob`` is bob, ``@org/team`` the team org/team.
    prod_owners = tuple(sorted({w.strip().removeprefix("@") for w in trusted.values() if w}))
    return PlanReview(fingerprint, tuple(items), direct, breaking, prod_owners=prod_owners)


def python_item(project: Project, prod_python: str | None) -> Item | None:
    """The item standing for the project's Python (every file Python could load, see
    :mod:`sluice.core.model.pycode.files`) when it differs from prod's (digest
    ``prod_python``), its content the project's digest: approved with the plan, so a push
    that changes any of it (a helper's module-level code, a new module) needs new
    approvals, and a promotion finds it approved. None when the project's Python is
    prod's, or it has none: like an unchanged model, nothing to approve (and a push that
    leaves Python alone leaves the review's fingerprint alone)."""
    found = files.digest(files.sources(Path(project.path)))
    return (PYTHON_ITEM, found) if found is not None and found != prod_python else None


def prod_owners(store: StateStore) -> dict[str, str | None]:
    """Model -> owner as prod has it: the owners a PR's own headers cannot change."""
    record = store.get_environment(PROD)
    if record is None:
        return {}
    stored = store.get_snapshots(ref.id for ref in record.snapshots).values()
    return {s.name: (s.payload.get("model") or {}).get("owner") for s in stored}
