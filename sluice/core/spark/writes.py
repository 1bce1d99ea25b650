"""The driver's writes to state, checked against its job's spec and applied service-side.

The Spark driver runs SQL from pull requests, so it holds no state URL and opens no state
store: what it used to write itself (a batch's interval, an audit's, a unit test's or a
table diff's result) it reports as a ``write`` event on its stdout line protocol
(:mod:`sluice.core.spark.events`)::

    {"event": "write", "op": "add_intervals", "model", "version", "intervals": [[s, e], ...]}
    {"event": "write", "op": "remove_intervals", "model", "version", "start", "end"}
    {"event": "write", "op": "save_result", "kind", "name", "passed", "payload"}
    {"event": "write", "op": "table_size", "model", "version", "bytes", "rows"}

Both runners hand every such event to one :class:`JobWrites`, built from the spec the
service issued, which applies it to the state store as it arrives (so a batch's interval
is recorded right after its data is written, and a job killed mid-backfill is finished by
applying again), after checking it asks for nothing the spec did not. An interval is
recorded only once the blocking audits it waits for passed in this job: those of its
batch (a build batch's ``audits``, run right after the batch is written, as SQLMesh
audits each batch) and those of the whole build (``audit`` steps naming no batch: a VIEW
model's). Until then it is held back, so a batch whose audit failed (or never ran, the
driver having died first) is not recorded as filled, and the next run builds and audits
it again instead of skipping both; a backfill killed after some batches keeps those
batches, audited, and the next run builds only the rest.
The checks:

- intervals only of the (model, version) pairs the spec's ``build`` steps build, and only
  within the batches those steps asked for (a view's marker only for a view);
- interval removals only of the ranges the spec's steps restate;
- a table size only of a (model, version) the spec's ``build`` steps build, as a
  non-negative integer of bytes and of rows (rows may be absent);
- results only of the spec's audits, unit tests and table diffs, stored under this job's
  id and plan id (a write naming another job or plan is refused, not re-labelled); an
  audit's result names the batch it audited exactly when the spec's audit does; one
  result per (kind, name, batch) in a job: the first stands, a second is refused (a
  failed audit's result cannot be overridden by a later "passed", nor the state database
  filled by repeating one); a payload of at most :data:`MAX_PAYLOAD_CHARS` characters of
  JSON;
- no environment write at all: the service commits the environment record (a
  compare-and-swap) itself once the job has succeeded.

Anything else is refused with :class:`WriteRefused`; the runner then stops the job.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, NoReturn

from sluice.core.errors import ExecutionError
from sluice.core.plan.plan import VIEW_MARKER
from sluice.core.spark.events import (
    ENVIRONMENT_OPS,
    WRITE,
    WRITE_OPS,
    AddIntervals,
    RemoveIntervals,
    SaveResult,
    TableSizeWrite,
    WriteEvent,
)
from sluice.core.spark.spec import AuditStep, BuildStep, JobSpec
from sluice.core.state.records import JobResult, TableSize
from sluice.core.state.store import StateStore

WRITE_EVENT = WRITE
RESULT_KINDS = {"audit": "audit", "unit_test": "unit test", "table_diff": "table diff"}


TESTED_MODEL = "model"
"""The key of a stored unit test result's payload naming the model it tests."""

MAX_PAYLOAD_CHARS = 1024 * 1024
"""The most characters a result's payload may have, as JSON."""

Scope = tuple[int, int] | None
"""What an audit covers: one build batch ``(start, end)``, or None: the whole build."""


class WriteRefused(ExecutionError):
    """The driver asked for a write its job's spec does not allow."""


def _clock() -> int:
    return int(time.time() * 1000)


def _is_int(value: Any) -> bool:
    return type(value) is int


class JobWrites:
    """The writes one job may make, and the store they go to (None: checked, not kept).

    Attributes:
        refused: The first refusal, once there was one (a runner raises it even when the
            driver's own error handling swallowed it).
    """

    def __init__(
        self, spec: JobSpec, state: StateStore | None, *, clock: Callable[[], int] = _clock
    ) -> None:
        self.job_id = str(spec["job_id"])
        self.plan_id: str | None = spec.get("plan_id")
        self.state = state
        self.clock = clock
        self.refused: WriteRefused | None = None
        self._builds: dict[tuple[str, str], BuildStep] = {}
        self._results: dict[str, set[str]] = {kind: set() for kind in RESULT_KINDS}
        # A unit test's name -> the model it tests (the spec's: kept with its result).
        self._tested: dict[str, str] = {}
        # An audit's name -> the scopes it runs in: a batch (start, end), or None (the
        # whole build); a result must name one of them.
        self._scopes: dict[str, set[Scope]] = {}
        # (model, scope) -> the names of the blocking audits its intervals wait for.
        self._blocking: dict[tuple[str, Scope], set[str]] = {}
        self._passed: set[tuple[str, Scope]] = set()
        # The results this job saved, by (kind, name, scope): one each.
        self._saved: set[tuple[str, str, Scope]] = set()
        # Intervals waiting for their audits, per (model, version), in arrival order.
        self._held: dict[tuple[str, str], list[tuple[int, int]]] = {}
        for step in spec.get("steps", []):
            if "type" not in step:  # a hand-written spec's: the driver fails on it
                continue
            if step["type"] == "build":
                self._builds[(str(step["model"]), str(step["version"]))] = step
                for batch in step.get("batches", []):
                    for audit in batch.get("audits", []):
                        self._audit(audit, (batch["start"], batch["end"]))
            elif step["type"] == "audit":
                self._audit(step, _scope(step.get("batch")))
            elif step["type"] in ("unit_test", "table_diff"):
                self._results[step["type"]].add(str(step["name"]))
                if step["type"] == "unit_test":
                    self._tested[str(step["name"])] = str(step["model"])

    def _audit(self, step: AuditStep, scope: Scope) -> None:
        name = f"{step['model']}:{step['audit']}"
        self._results["audit"].add(name)
        self._scopes.setdefault(name, set()).add(scope)
        if step.get("blocking", True):
            self._blocking.setdefault((str(step["model"]), scope), set()).add(name)

    def apply(self, event: WriteEvent) -> None:
        """Check one ``write`` event against the spec, then apply it to the store.

        The event's keys are of their types when it was read from the driver's output
        (:func:`~sluice.core.spark.events.decode`); they are checked again here all the
        same, since an in-process driver's events are not read from a line.

        Raises:
            WriteRefused: the write is not one the spec asked for; nothing was written.
        """
        op: object = event.get("op")
        if not isinstance(op, str) or op not in WRITE_OPS:
            if isinstance(op, str) and op in ENVIRONMENT_OPS:
                self._refuse(
                    f"'{op}': the driver writes no environment (the service commits the "
                    "environment record itself once the job has succeeded)"
                )
            self._refuse(f"unknown write {op!r}")
        elif event["op"] == "add_intervals":
            self._add_intervals(event)
        elif event["op"] == "remove_intervals":
            self._remove_intervals(event)
        elif event["op"] == "save_result":
            self._save_result(event)
        else:
            self._table_size(event)

    def refuse(self, problem: str) -> NoReturn:
        """Refuse a write the runner could not even read (``problem``: why); the job is
        then stopped, as for any other refused write.

        Raises:
            WriteRefused: always.
        """
        self._refuse(problem)

    # --- the writes ---------------------------------------------------------------

    def _built(
        self, event: AddIntervals | RemoveIntervals | TableSizeWrite, what: str
    ) -> tuple[str, str, BuildStep]:
        model, version = event.get("model"), event.get("version")
        step = (
            self._builds.get((model, version))
            if isinstance(model, str) and isinstance(version, str)
            else None
        )
        if step is None:
            self._refuse(f"{what} of {model}@{version}: this job builds no such model version")
        return str(model), str(version), step

    def _add_intervals(self, event: AddIntervals) -> None:
        model, version, step = self._built(event, "intervals")
        raw: object = event.get("intervals")
        spans: list[tuple[int, int]] = []
        for item in raw if isinstance(raw, list) else [raw]:
            pair = item if isinstance(item, list | tuple) else ()
            if len(pair) != 2 or not all(map(_is_int, pair)) or pair[0] >= pair[1]:
                self._refuse(
                    f"intervals of {model}@{version}: {item!r} is not a range [start, end) "
                    "of integers"
                )
            spans.append((pair[0], pair[1]))
        allowed = [(b["start"], b["end"]) for b in step.get("batches", [])]
        for start, end in spans:
            if (start, end) == VIEW_MARKER and step.get("view_sql"):
                continue
            if not any(lo <= start and end <= hi for lo, hi in allowed):
                self._refuse(
                    f"intervals of {model}@{version}: [{start}, {end}) is outside the batches "
                    "this job asked for"
                )
        ready = [span for span in spans if self._audited(model, step, span)]
        held = [span for span in spans if span not in ready]
        if held:
            self._held.setdefault((model, version), []).extend(held)
        if self.state is not None and ready:
            self.state.add_intervals(model, version, ready)

    def _audited(self, model: str, step: BuildStep, span: tuple[int, int]) -> bool:
        """Whether every blocking audit ``span`` waits for passed: its batch's and the
        whole build's."""
        batch = next(
            (
                (b["start"], b["end"])
                for b in step.get("batches", [])
                if b["start"] <= span[0] and span[1] <= b["end"]
            ),
            None,
        )
        scopes: list[Scope] = [None] if batch is None else [None, batch]
        return all(
            (name, scope) in self._passed
            for scope in scopes
            for name in self._blocking.get((model, scope), ())
        )

    def _remove_intervals(self, event: RemoveIntervals) -> None:
        model, version, step = self._built(event, "removing intervals")
        start, end = event.get("start"), event.get("end")
        restated = [tuple(r) for r in step.get("restate", [])]
        if not (_is_int(start) and _is_int(end)) or (start, end) not in restated:
            self._refuse(
                f"removing intervals of {model}@{version}: [{start}, {end}) is not a range "
                "this job restates"
            )
        assert isinstance(start, int) and isinstance(end, int)  # for mypy: checked above
        if self.state is not None:
            self.state.remove_intervals(model, version, start, end)

    def _table_size(self, event: TableSizeWrite) -> None:
        model, version, _ = self._built(event, "the size")
        size, rows = event.get("bytes"), event.get("rows")
        if not _count(size):
            self._refuse(f"the size of {model}@{version}: {size!r} is not a number of bytes")
        if rows is not None and not _count(rows):
            self._refuse(f"the rows of {model}@{version}: {rows!r} is not a number of rows")
        assert isinstance(size, int)  # for mypy: checked above
        if self.state is not None:
            self.state.set_table_size(model, version, TableSize(size, self.clock(), rows))

    def _save_result(self, event: SaveResult) -> None:
        kind, name, passed = event.get("kind"), event.get("name"), event.get("passed")
        job_id, plan_id = event.get("job_id", self.job_id), event.get("plan_id", self.plan_id)
        if job_id != self.job_id:
            self._refuse(f"results of job {job_id!r}: this is job {self.job_id!r}")
        if plan_id != self.plan_id:
            self._refuse(f"results of plan {plan_id!r}: this job is for plan {self.plan_id!r}")
        if not isinstance(kind, str) or kind not in RESULT_KINDS:
            self._refuse(
                f"a result of kind {kind!r}: a job stores {', '.join(RESULT_KINDS)} results only"
            )
        if not isinstance(name, str) or name not in self._results[kind]:
            self._refuse(f"{kind} result {name!r}: this job runs no such {RESULT_KINDS[kind]}")
        if not isinstance(passed, bool):
            self._refuse(f"{kind} result {name!r}: passed must be true or false")
        payload = event.get("payload")
        if not isinstance(payload, dict):
            self._refuse(f"{kind} result {name!r}: its payload is not an object")
        scope: Scope = None
        if kind == "audit":
            scope = self._audit_scope(name, event.get("batch"))
        elif "batch" in event:
            self._refuse(f"{kind} result {name!r}: only an audit's result names a batch")
        if (kind, name, scope) in self._saved:
            where = "" if scope is None else f" of batch [{scope[0]}, {scope[1]})"
            self._refuse(
                f"{kind} result {name!r}{where} again: a job saves one result of each, and "
                "the first stands"
            )
        size = len(json.dumps(payload, separators=(",", ":"), default=str))
        if size > MAX_PAYLOAD_CHARS:
            self._refuse(
                f"{kind} result {name!r}: its payload is {size} characters of JSON, more than "
                f"the {MAX_PAYLOAD_CHARS} a result may keep"
            )
        self._saved.add((kind, name, scope))
        if kind == "unit_test":  # which model it tests, as the spec says (never the driver)
            payload = {**payload, TESTED_MODEL: self._tested[name]}
        if self.state is not None:
            record = JobResult(self.job_id, self.plan_id, kind, name, passed, payload, self.clock())
            self.state.save_results([record])
        if kind == "audit" and passed:
            self._passed.add((name, scope))
            self._release(name.split(":", 1)[0])

    def _audit_scope(self, name: str, batch: object) -> Scope:
        """The scope an audit's result names (a batch, or None: the whole build), checked
        against the spec's audits of that name."""
        scope: Scope = None
        if batch is not None:
            pair = batch if isinstance(batch, list) else []
            if len(pair) != 2 or not all(map(_is_int, pair)):
                self._refuse(f"audit result {name!r}: batch {batch!r} is not [start, end]")
            scope = (pair[0], pair[1])
        if scope not in self._scopes.get(name, set()):
            where = "the whole build" if scope is None else f"batch [{scope[0]}, {scope[1]})"
            self._refuse(f"audit result {name!r}: this job runs no such audit of {where}")
        return scope

    def _release(self, model: str) -> None:
        """Record the held intervals of ``model`` whose blocking audits have all passed."""
        for (held_model, version), spans in list(self._held.items()):
            if held_model != model:
                continue
            step = self._builds[(model, version)]
            ready = [span for span in spans if self._audited(model, step, span)]
            if not ready:
                continue
            left = [span for span in spans if span not in ready]
            if left:
                self._held[(model, version)] = left
            else:
                del self._held[(model, version)]
            if self.state is not None:
                self.state.add_intervals(model, version, ready)

    def _refuse(self, problem: str) -> NoReturn:
        error = WriteRefused(
            f"refused a write from the Spark driver of job {self.job_id}: {problem}",
            hint="the job's spec (written by the service) does not allow this write; nothing "
            "of it was written and the job was stopped. A pull request's SQL may be trying "
            "to change state it may not: review the change; if the SQL is harmless, this is "
            "a bug in Sluice (report it with the job's log)",
        )
        if self.refused is None:
            self.refused = error
        raise error


def _scope(batch: list[int] | None) -> Scope:
    return None if batch is None else (batch[0], batch[1])


def _count(value: object) -> bool:
    """Whether ``value`` is a count: a non-negative integer (JSON's true is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
