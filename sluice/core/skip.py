"""Whether a scheduled run may skip a model it would rebuild: the rule (pure).

A run (``sluice run``, the service's scheduled run) rebuilds a FULL or
INCREMENTAL_BY_UNIQUE_KEY model each time a new interval of its cron is due
(:func:`sluice.core.plan.build.build_plan` with ``refresh``). Such a rebuild is skipped
when it would compute what the table already holds: the same query text, over inputs
whose data did not change since the build that made the table. Concretely a rebuild is
skipped only when all of these hold:

- the model is FULL or INCREMENTAL_BY_UNIQUE_KEY, a SQL model (a Python model's function
  may read what no parent shows: an API, a file), whose query calls no function that
  answers differently each run (``current_date()``, ``rand()``, ...: :data:`VOLATILE`) and
  does not read its own table;
- a run of this very version recorded what it read (:class:`Seen`);
- the query the run would send is the recorded run's, character for character
  (:func:`query_key`: its definition and the dates it renders; a query that uses
  ``@start_ds`` renders differently for each new interval, so it always runs);
- every input's version reads now as it read then (:func:`decide`). The inputs are the
  tables the query reads (:func:`input_tables`): a model parent's physical table, an
  external table by its name, through VIEW and EMBEDDED models to what they read. A
  version that cannot be read (a view as a source, a format Sluice reads no version of,
  an error) is ``None``, and then the model runs.

Never skipped: the missing intervals of INCREMENTAL_BY_TIME_RANGE and SCD type 2 models.
A new interval of those was never computed, and an unchanged parent can still hold rows
for it (loaded ahead, or late data already there at the last run), so skipping it could
leave it empty for good. A skipped rebuild records its interval as done, so the next run
asks again only at the next cron tick; its audits do not run (they would read the same
rows as the last time).

The versions themselves are read in the Spark driver (:mod:`sluice.core.spark.steps.inputs`),
right before the model's build, so a parent rebuilt earlier in the same job is read as it
now is. The driver's answer is checked against this rule by the service
(:func:`sluice.core.spark.results.check`).

Example::

    >>> seen = Seen("k1", {"raw.orders": "files:3:1200:9:77"}, 0)
    >>> decide("k1", seen, {"raw.orders": "files:3:1200:9:77"}).ran
    False
    >>> decide("k1", seen, {"raw.orders": "files:4:1500:12:5"}).code
    'input'
    >>> decide("k1", seen, {"raw.orders": None}).code
    'unknown'
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from sluice.core.model.definition import KindName, Model
from sluice.core.plan.plan import Plan
from sluice.core.skip_rule import MAX_INPUTS, Decision, decide, seen_of
from sluice.core.snapshot.snapshot import Snapshot
from sluice.core.spark.results import StepResult, result_key
from sluice.core.spark.spec import SkipCheck, Step
from sluice.core.state.records import Seen, TableKey

SKIPPABLE = frozenset({KindName.FULL, KindName.INCREMENTAL_BY_UNIQUE_KEY})
"""The kinds a run rebuilds on each cron tick, and so may skip."""

VOLATILE = frozenset(
    {
        "current_date",
        "current_timestamp",
        "current_time",
        "curdate",
        "now",
        "localtimestamp",
        "unix_timestamp",
        "rand",
        "randn",
        "random",
        "uuid",
        "shuffle",
        "monotonically_increasing_id",
        "spark_partition_id",
        "input_file_name",
        "input_file_block_start",
        "input_file_block_length",
        "reflect",
        "java_method",
        "try_reflect",
    }
)
"""Spark functions whose answer changes from one run to the next with the same inputs
(names in lower case): a query calling one is never skipped."""


def never_skipped(model: Model, sqls: Sequence[str | None], own_table: str) -> str | None:
    """Why a rebuild of ``model`` always runs (None: it may be skipped). ``sqls``: the
    queries of its build's batches, rendered; ``own_table``: its physical table."""
    if model.kind.name not in SKIPPABLE:
        return f"a {model.kind.name.value} model's due intervals are always computed"
    if model.python_code is not None:
        return "a Python model always runs (its function may read more than its parents)"
    called: set[str] = set()
    reads_itself = False
    for sql in sqls:
        if sql is None:
            return "its build has no query to compare"
        try:
            tree = sqlglot.parse_one(sql, read="spark")
        except sqlglot.errors.ParseError:
            return "its query could not be read to compare"
        for node in tree.find_all(exp.Func):
            name = node.sql_name() if not isinstance(node, exp.Anonymous) else node.name
            called.add(str(name).lower())
        for table in tree.find_all(exp.Table):
            named = ".".join(p.name for p in table.parts).lower()
            reads_itself = reads_itself or named == own_table.lower()
    volatile = sorted(called & VOLATILE)
    if volatile:
        return f"its query calls {volatile[0]}(), which may answer differently each run"
    if reads_itself:
        return "its query reads its own table"
    return None


def input_tables(name: str, snapshots: Mapping[str, Snapshot]) -> list[str]:
    """The tables model ``name``'s query reads, sorted: each parent's physical table, an
    external parent (or a name no model has) as it is named, and through a VIEW or
    EMBEDDED parent what that one reads."""
    found: set[str] = set()
    stack = list(snapshots[name].model.depends_on)
    visited: set[str] = set()
    while stack:
        parent = stack.pop()
        if parent in visited:
            continue
        visited.add(parent)
        snap = snapshots.get(parent)
        if snap is None or snap.model.kind.name == KindName.EXTERNAL:
            found.add(parent)
        elif snap.model.kind.name in (KindName.VIEW, KindName.EMBEDDED):
            stack.extend(snap.model.depends_on)
        else:
            found.add(snap.table)
    return sorted(found)


def query_key(identifier: str, sqls: Iterable[str | None]) -> str:
    """A digest of what a rebuild would send: its snapshot's identifier and each batch's
    rendered query."""
    text = "\n;\n".join([identifier, *(s or "" for s in sqls)])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def attach(plan: Plan, steps: Sequence[Step], seen: Mapping[TableKey, Seen]) -> dict[str, str]:
    """Give each build step of a run's rebuild that may be skipped its check (``skip``:
    its query's key, the tables it reads, what its version's last run read from ``seen``);
    return, for every other model the run builds, why it always runs."""
    snapshots = {s.name: s for s in plan.snapshots}
    always: dict[str, str] = {}
    for step in steps:
        if step["type"] != "build" or "view_sql" in step:
            continue
        snap = snapshots[step["model"]]
        sqls = [batch["sql"] for batch in step["batches"]]
        reason = never_skipped(snap.model, sqls, step["table"])
        tables = input_tables(snap.name, snapshots) if reason is None else []
        if reason is None and len(tables) > MAX_INPUTS:
            reason = f"it reads more than {MAX_INPUTS} tables"
        if reason is not None:
            always[snap.name] = reason
            continue
        check: SkipCheck = {"key": query_key(snap.identifier, sqls), "inputs": tables}
        last = seen.get((snap.name, snap.version))
        if last is not None:
            check["last"] = {
                "key": last.key,
                "inputs": [[t, v] for t, v in last.inputs.items()],
                "at": last.at,
            }
        step["skip"] = check
    return always


def outcomes(
    steps: Sequence[Step], results: Mapping[str, StepResult], now: int
) -> tuple[dict[str, Decision], dict[TableKey, Seen]]:
    """What became of each checked rebuild of a job that ended (model -> its
    :class:`Decision`, as the rule says of the versions read), and what to record of those
    that ran (what they read, at ``now``)."""
    decided: dict[str, Decision] = {}
    record: dict[TableKey, Seen] = {}
    for index, step in enumerate(steps):
        if step["type"] != "build" or "skip" not in step:
            continue
        result = results.get(result_key(index, step))
        if result is None or result["step"] != "build" or "skip" not in result:
            continue
        check = step["skip"]
        read = {str(t): v for t, v in result["skip"]["inputs"]}
        decision = decide(check["key"], seen_of(check.get("last")), read)
        decided[step["model"]] = decision
        if decision.ran:
            record[(step["model"], step["version"])] = Seen(check["key"], read, now)
    return decided, record


@dataclass(frozen=True)
class Explanation:
    """Why one model of a run ran, was skipped, or had nothing to do."""

    name: str
    kind: str
    outcome: str  # ran | skipped | not due | nothing to run
    reason: str

    def to_json(self) -> dict[str, str]:
        return {
            "name": self.name,
            "kind": self.kind,
            "outcome": self.outcome,
            "reason": self.reason,
        }


def explain(
    plan: Plan, decided: Mapping[str, Decision], always: Mapping[str, str]
) -> list[Explanation]:
    """One line per model of a run's plan (in its order; external and embedded models,
    which a run never builds, left out)."""
    due = {b.name: b for b in plan.backfill}
    lines: list[Explanation] = []
    for snap in plan.snapshots:
        kind = snap.model.kind.name
        if kind in (KindName.EXTERNAL, KindName.EMBEDDED):
            continue
        backfill = due.get(snap.name)
        if snap.name in decided:
            decision = decided[snap.name]
            outcome = "ran" if decision.ran else "skipped"
            lines.append(Explanation(snap.name, kind.value, outcome, decision.reason))
        elif backfill is not None:
            count = len(backfill.intervals)
            why = always.get(snap.name, "its interval is due")
            lines.append(
                Explanation(
                    snap.name,
                    kind.value,
                    "ran",
                    f"{count} interval{'s' if count != 1 else ''} due: {why}",
                )
            )
        elif kind == KindName.VIEW:
            lines.append(
                Explanation(
                    snap.name, kind.value, "nothing to run", "a view reads its parents when queried"
                )
            )
        elif kind == KindName.SEED:
            lines.append(
                Explanation(
                    snap.name,
                    kind.value,
                    "nothing to run",
                    "a seed's rows are its file, built once",
                )
            )
        else:
            lines.append(
                Explanation(
                    snap.name,
                    kind.value,
                    "not due",
                    f"no new interval of its cron ('{snap.model.cron}') is due",
                )
            )
    return lines


__all__ = [
    "MAX_INPUTS",
    "SKIPPABLE",
    "VOLATILE",
    "Decision",
    "Explanation",
    "Seen",
    "attach",
    "decide",
    "explain",
    "input_tables",
    "never_skipped",
    "outcomes",
    "query_key",
    "seen_of",
]
