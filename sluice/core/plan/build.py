"""Build a plan: compare the local project with an environment (pure).

No clock, no state, no Spark: the caller passes the environment's snapshots, the
intervals already computed for every version the plan may use, and the times.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from sluice.core.errors import PlanError
from sluice.core.intervals import (
    WARN_INTERVALS,
    Interval,
    batches,
    cron_intervals,
    interval_floor,
    merge,
    missing,
)
from sluice.core.model.definition import KindName, Model
from sluice.core.plan import destructive, statements
from sluice.core.plan.categorize import categorize_direct
from sluice.core.plan.column_types import ColumnTypes
from sluice.core.plan.lineage import Impacts
from sluice.core.plan.narrowing import reshaped_by, reshaped_category, unaffected
from sluice.core.plan.plan import Backfill, ModelChange, Plan
from sluice.core.plan.sqldiff import unified_diff
from sluice.core.snapshot.fingerprint import Fingerprint
from sluice.core.snapshot.naming import PROD, check_environment_name
from sluice.core.snapshot.snapshot import RANK, Category, Snapshot
from sluice.core.timeutil import to_ts

TableKey = tuple[str, str]

_REFRESHED = frozenset({KindName.FULL, KindName.INCREMENTAL_BY_UNIQUE_KEY})
"""Kinds a scheduled run rebuilds once built, on each new interval of their cron."""


@dataclass(frozen=True)
class PlanRequest:
    """Everything a plan is computed from."""

    environment: str
    models: Mapping[str, Model]  # in topological order
    fingerprints: Mapping[str, Fingerprint]
    base: Mapping[str, Snapshot]  # the environment's snapshots (prod's for a new one)
    base_plan_id: str | None  # the environment's current plan; None: it does not exist
    end: int
    execution_time: int
    start: int | None = None
    forward_only: bool = False
    intervals: Mapping[TableKey, list[Interval]] = field(default_factory=dict)
    restate: frozenset[str] = frozenset()  # models whose data in [start, end) is recomputed
    # config.yaml's before_all / after_all (Spark SQL): the job runs them, so the plan's id
    # covers them (a project without them keeps the ids it had).
    before_all: tuple[str, ...] = ()
    after_all: tuple[str, ...] = ()
    # A scheduled run's plan: a FULL or INCREMENTAL_BY_UNIQUE_KEY table already built is
    # rebuilt for each new interval of its cron (as SQLMesh runs them); the run may skip
    # the rebuild when nothing it reads changed (sluice/core/skip.py).
    refresh: bool = False


def candidate_versions(
    request_models: Mapping[str, Fingerprint], base: Mapping[str, Snapshot]
) -> set[TableKey]:
    """The (name, version) tables whose intervals a plan may need, for the caller to fetch."""
    keys = {(name, fp.version) for name, fp in request_models.items()}
    keys |= {(name, snap.version) for name, snap in base.items()}
    return keys


def build_plan(request: PlanRequest) -> Plan:
    """Compare ``request.models`` with ``request.base`` and compute what must be built."""
    check_environment_name(request.environment)
    snapshots: list[Snapshot] = []
    added: list[str] = []
    direct: list[ModelChange] = []
    indirect: list[ModelChange] = []
    metadata: list[str] = []
    upstream: dict[str, int] = {}  # most conservative change rank among a model's ancestors
    own: dict[str, int] = {}  # rank of each directly modified model's own change
    unaffected_models: list[str] = []
    impacts = Impacts(request.models, {n: s.model for n, s in request.base.items()})
    old_columns, new_columns = impacts.outputs[True], impacts.outputs[False]
    categories: dict[str, Category] = {}  # directly modified (or reshaped) model -> category
    # Changed model -> the direct changes that reach it: all of them (to decide narrowing),
    # and those reaching through a model whose data they change (to show).
    reach: dict[str, frozenset[str]] = {}
    shown: dict[str, frozenset[str]] = {}
    warnings: list[str] = []
    forward: list[tuple[Model, Model]] = []  # forward-only changes: (before, after)
    for name, model in request.models.items():
        fp = request.fingerprints[name]
        old = request.base.get(name)
        inherited = max(
            (max(upstream.get(p, 0), own.get(p, 0)) for p in model.depends_on), default=0
        )
        upstream[name] = inherited
        forward_only = request.forward_only or model.forward_only
        if old is None:
            added.append(name)
            snapshots.append(Snapshot(model, fp, fp.version, None))
            continue
        if old.fingerprint == fp:
            snapshots.append(old)
            continue
        changed_data = old.fingerprint.data_hash != fp.data_hash
        # Rule 1 of narrowing.py: a parent's change that reshapes what its query renders
        # to (a star taking its columns...) makes it directly modified, with a new version.
        reshaping = (
            reshaped_by(model, categories, old_columns, new_columns)
            if changed_data or old.fingerprint.parent_data_hash != fp.parent_data_hash
            else ()
        )
        if changed_data or reshaping:
            impact = impacts.direct(name, old.model, model)
            if forward_only and model.kind.materialized:
                category = Category.FORWARD_ONLY
            elif reshaping:
                category = reshaped_category(
                    impacts.own[name],
                    None if changed_data else [categories[p] for p in reshaping],
                    materialized=model.kind.materialized,
                )
            elif categorize_direct(old.model, model) or impacts.only_adds_columns(name):
                # Added projections, or columns added where lineage proves the rows stay
                # (inside a CTE, under a SELECT * of one): SQLMesh's non-breaking.
                category = Category.NON_BREAKING
            else:
                category = Category.BREAKING
            version = old.version if category == Category.FORWARD_ONLY else fp.version
            if category == Category.FORWARD_ONLY:
                forward.append((old.model, model))  # checked once its readers are known
            snapshots.append(Snapshot(model, fp, version, category))
            # Reported as reshaped only when its own definition is the same (its diff then
            # shows what its stars take); a reshape besides its own change decides only
            # its category.
            shape = () if changed_data else reshaping
            direct.append(
                ModelChange(
                    name,
                    category,
                    version,
                    old.version,
                    unified_diff(
                        old.model, model, [(p, old_columns(p), new_columns(p)) for p in shape]
                    ),
                    columns=impact,
                    reshaped_by=shape,
                )
            )
            own[name] = RANK[category]
            categories[name] = category
            reach[name] = frozenset({name}).union(*(reach.get(p, ()) for p in model.depends_on))
            shown[name] = frozenset({name}).union(*(shown.get(p, ()) for p in model.depends_on))
        elif old.fingerprint.parent_data_hash != fp.parent_data_hash:
            category = _category_of_rank(inherited)
            if forward_only and model.kind.materialized:
                category = Category.FORWARD_ONLY
            # Rule 2: its columns are the same. A view reads its parents' physical tables,
            # so it is re-pointed (a new, dataless version) whenever a parent moves; tables
            # keep their data unless the change upstream is breaking.
            rebuild = category == Category.BREAKING or not model.kind.materialized
            version = fp.version if rebuild else old.version
            snapshots.append(Snapshot(model, fp, version, category))
            impact = impacts.downstream(name, model)
            reach[name] = frozenset().union(*(reach.get(p, ()) for p in model.depends_on))
            if unaffected(category, (categories[r] for r in reach[name]), impact):
                # Rule 3, narrowed: its snapshot and version are exactly as above; it is
                # only not reported as indirectly modified.
                unaffected_models.append(name)
                continue
            shown[name] = frozenset().union(*(shown.get(p, ()) for p in model.depends_on))
            indirect.append(
                ModelChange(
                    name,
                    category,
                    version,
                    old.version,
                    reached_by=tuple(sorted(shown[name])),
                    columns=impact,
                )
            )
        else:
            metadata.append(name)
            snapshots.append(Snapshot(model, fp, old.version, Category.METADATA))
    # Types are inferred on demand: only a forward-only change's check asks (for its
    # model and, through them, its ancestors), and only when they may differ; a cold
    # plan asks for none.
    old_types = ColumnTypes({n: s.model for n, s in request.base.items()})
    new_types = ColumnTypes(request.models)
    retyping = destructive.Retyping(request.models, request.fingerprints, request.base)
    destructive_models: list[str] = []
    for before, after in forward:
        readers = _readers(after.name, [*direct, *indirect])
        typed = retyping(after.name)
        old_typed = old_types(after.name) if typed else None
        new_typed = new_types(after.name) if typed else None
        old_out, new_out = old_columns(after.name), new_columns(after.name)
        found = destructive.destructive_columns(
            before, after, old_out, new_out, old_typed, new_typed
        )
        if found:  # whatever its on_destructive_change (allow silences the warning only)
            destructive_models.append(after.name)
        note = destructive.check(
            before, after, old_out, new_out, readers, old_typed, new_typed, found=found
        )
        warnings += [note] if note else []
    removed = sorted(set(request.base) - set(request.models))
    backfill = _backfill(request, snapshots, warnings)
    create_views = _views_to_create(request, snapshots)
    new_environment = request.base_plan_id is None
    content_hash = _sha(
        [
            request.environment,
            sorted((s.name, s.identifier) for s in snapshots),
            request.forward_only,
        ]
    )
    plan_id = _sha(
        [
            content_hash,
            request.base_plan_id,
            request.start,
            request.end,
            sorted(request.restate),
            [(b.name, b.version, list(b.intervals)) for b in backfill],
            *_present(statements.digest(request.before_all, request.after_all)),
        ]
    )[:32]
    starts = [b.start for b in backfill]
    return Plan(
        environment=request.environment,
        plan_id=plan_id,
        content_hash=content_hash,
        base_plan_id=request.base_plan_id,
        start=request.start if request.start is not None else (min(starts) if starts else None),
        end=request.end,
        execution_time=request.execution_time,
        forward_only=request.forward_only,
        snapshots=tuple(snapshots),
        added=tuple(added),
        removed=tuple(removed),
        directly_modified=tuple(direct),
        indirectly_modified=tuple(indirect),
        metadata_only=tuple(metadata),
        backfill=backfill,
        new_environment=new_environment,
        restated=tuple(b.name for b in backfill if b.name in request.restate),
        create_views=create_views,
        warnings=tuple(warnings),
        unaffected=tuple(unaffected_models),
        destructive=tuple(sorted(destructive_models)),
    )


def _readers(name: str, changes: list[ModelChange]) -> dict[str, list[str]]:
    """Model downstream -> the columns of ``name`` its lineage says it reads."""
    prefix = f"{name}."
    found: dict[str, list[str]] = {}
    for change in changes:
        reads = change.columns.reads if change.columns is not None else ()
        columns = [r.removeprefix(prefix) for r in reads if r.startswith(prefix)]
        if columns and change.name != name:
            found[change.name] = columns
    return found


def _category_of_rank(rank: int) -> Category:
    if rank >= RANK[Category.BREAKING] or rank == 0:
        return Category.BREAKING  # unknown cause: be conservative
    if rank == RANK[Category.NON_BREAKING]:
        return Category.NON_BREAKING
    return Category.FORWARD_ONLY


def _backfill(
    request: PlanRequest, snapshots: list[Snapshot], warnings: list[str]
) -> tuple[Backfill, ...]:
    base_versions = {(s.name, s.version) for s in request.base.values()}
    starts: dict[str, int] = {}  # inferred starts (inferred_start), one cache for all
    result = []
    for snap in snapshots:
        model = snap.model
        if not model.kind.materialized:
            continue
        try:
            backfill = _backfill_one(request, snap, base_versions, starts)
        except PlanError as exc:
            raise PlanError(
                f"model {snap.name}: {exc.message}",
                path=model.path or None,
                line=model.line if model.path else None,
                hint=exc.hint,
            ) from None
        if backfill is not None:
            result.append(backfill)
            if len(backfill.intervals) > WARN_INTERVALS:
                where = f"{model.path}:{model.line}: " if model.path else ""
                warnings.append(
                    f"{where}model {snap.name}: cron '{model.cron}' makes "
                    f"{len(backfill.intervals)} intervals from {to_ts(backfill.start)} to "
                    f"{to_ts(backfill.end)}; planned, but the backfill is long\n"
                    "  hint: set a later start (the model's `start`, or --start) or a "
                    "coarser cron"
                )
    return tuple(result)


def _backfill_one(
    request: PlanRequest,
    snap: Snapshot,
    base_versions: set[tuple[str, str]],
    starts: dict[str, int],
) -> Backfill | None:
    """What one materialized model needs filled (None: nothing)."""
    model = snap.model
    key = (snap.name, snap.version)
    # Outside prod, only tables this plan creates are filled: existing versions are
    # prod's (or another environment's) to fill, never a PR's.
    if request.environment != PROD and key in base_versions:
        return None  # restating such a table would rewrite prod's data: done in prod only
    done = merge(request.intervals.get(key, []))
    end = min(request.end, model.end) if model.end is not None else request.end
    if snap.name in request.restate:
        done = _without(done, request.start if request.start is not None else model.start, end)
    if model.kind.name == KindName.INCREMENTAL_BY_TIME_RANGE:
        first = (
            model.start
            if model.start is not None
            else inferred_start(snap.name, request.models, request.end, starts)
        )
        start = max(first, request.start) if request.start is not None else first
        if request.start is not None and request.environment != PROD and start >= end:
            # The recent window lies past the model's end: a virtual environment gets
            # the model's last window of that length instead of an empty version.
            start = max(first, end - (request.end - request.start))
        todo = missing(cron_intervals(model.cron, start, end), done)
        chunks = batches(todo, model.kind.batch_size)
    elif model.kind.is_scd_type_2:
        todo, chunks = _scd_intervals(model, done, end)
    elif done:
        last = interval_floor(model.cron, end)
        if not (request.refresh and model.kind.name in _REFRESHED) or last <= done[-1][1]:
            return None
        todo = [(done[-1][1], last)]  # its next cron interval(s): one rebuild
        chunks = todo
    else:
        last = interval_floor(model.cron, end)
        start = (
            model.start
            if model.start is not None and model.start < last
            else interval_floor(model.cron, last - 1)
        )
        todo = [(start, last)] if start < last else []
        chunks = todo
    if not todo:
        return None
    return Backfill(snap.name, snap.version, snap.table, tuple(todo), tuple(chunks))


def inferred_start(
    name: str, models: Mapping[str, Model], now: int, cache: dict[str, int] | None = None
) -> int:
    """Where the backfill of a model without ``start`` begins, as SQLMesh 0.236.4 infers
    it (``snapshot.definition.start_date``): its own start if set, else the earliest of
    its parents' (inferred the same way), else (no parent) the start of its cron's last
    complete interval before ``now``.

    Without recursion (a chain of thousands of models is a plan like any other): the
    ancestors are inferred parents first, each once, into ``cache`` (give one cache for
    every model of a plan). A model met again before its parents are inferred (a cycle,
    which the loader refuses) takes the earliest of those that are.
    """
    cache = {} if cache is None else cache
    stack = [name]
    expanded: set[str] = set()
    while stack:
        current = stack[-1]
        if current in cache:
            stack.pop()
            continue
        model = models[current]
        if model.start is not None:
            cache[current] = model.start
            stack.pop()
            continue
        parents = [p for p in model.depends_on if p in models]
        waiting = [p for p in parents if p not in cache]
        if waiting and current not in expanded:
            expanded.add(current)
            stack.extend(waiting)
            continue
        starts = [cache[p] for p in parents if p in cache]
        cache[current] = (
            min(starts)
            if starts
            else interval_floor(model.cron, interval_floor(model.cron, now) - 1)
        )
        stack.pop()
    return cache[name]


def _scd_intervals(
    model: Model, done: list[Interval], end: int
) -> tuple[list[Interval], list[Interval]]:
    """An SCD type 2 model's due intervals, and its batches: each batch merges what the
    query returns then into the history, so every missing interval is one batch unless
    ``batch_size`` says otherwise. They run from the first interval ever built (from its
    ``start``, or else the last complete interval when first planned)."""
    last = interval_floor(model.cron, end)
    if done:
        first = done[0][0]
    elif model.start is not None and model.start < last:
        first = model.start
    else:
        first = interval_floor(model.cron, last - 1)
    todo = missing(cron_intervals(model.cron, first, last), done) if first < last else []
    return todo, batches(todo, model.kind.batch_size)


def _views_to_create(request: PlanRequest, snapshots: list[Snapshot]) -> tuple[str, ...]:
    """VIEW models whose physical view (of this version) does not exist yet.

    A created view records the marker interval VIEW_MARKER, so a version a PR created is
    not created again when prod takes it.
    """
    base_versions = {(s.name, s.version) for s in request.base.values()}
    return tuple(
        s.name
        for s in snapshots
        if s.model.kind.name == KindName.VIEW
        and not request.intervals.get((s.name, s.version))
        and (request.environment == PROD or (s.name, s.version) not in base_versions)
    )


def _without(done: list[Interval], start: int | None, end: int) -> list[Interval]:
    """``done`` minus [start, end): what a restatement leaves standing."""
    low = start if start is not None else -(2**62)
    kept: list[Interval] = []
    for s, e in done:
        if e <= low or s >= end:
            kept.append((s, e))
            continue
        if s < low:
            kept.append((s, low))
        if e > end:
            kept.append((end, e))
    return kept


def _present(value: str | None) -> list[str]:
    """``[value]``, or nothing for None: an id's inputs grow only when it is given."""
    return [value] if value is not None else []


def _sha(value: object) -> str:
    return hashlib.sha256(
        json.dumps(value, separators=(",", ":"), default=str).encode()
    ).hexdigest()
