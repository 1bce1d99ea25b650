"""The driver's event lines as typed values: each kind round-trips, and a line a hostile
driver (or a pull request's code printing to its stdout) writes is refused, or cut, with a
message saying why, without stopping the runner; a new kind of event the driver emits
without a typed definition fails here."""

from __future__ import annotations

import ast
import json
import sys
import typing
from pathlib import Path
from typing import Any

import pytest

from sluice.core.config import SparkSettings
from sluice.core.errors import ExecutionError
from sluice.core.spark import events, submit
from sluice.core.spark.events import BadEvent, decode, encode, parse
from sluice.core.spark.scripted import Script, Warehouse
from sluice.core.spark.session import SparkPaths
from sluice.core.spark.submit import SubmitRunner, run_recorded
from sluice.core.spark.writes import WriteRefused

SLUICE = Path(__file__).resolve().parents[3] / "sluice"

# One event of every kind, every optional key given.
FULL: list[dict[str, Any]] = [
    {"event": "job_start", "job_id": "j1", "steps": 3},
    {"event": "session_ready", "session_id": "7a0c"},
    {"event": "session_opened", "session_id": "7a0d"},
    {"event": "step_start", "index": 0, "type": "build", "label": "build s.a", "model": "s.a",
     "source": "models/a.sql:1", "worker": 2},
    {"event": "step_done", "index": 0, "label": "build s.a", "seconds": 1.25,
     "result": {"step": "query", "columns": ["i", "s", "n", "m"],
                "types": ["int", "string", "int", "map<string,array<double>>"],
                "rows": [[1, "x", None, {"k": [1.5, True]}]]},
     "model": "s.a", "source": "models/a.sql:1", "worker": 2},
    {"event": "step_failed", "index": 1, "type": "audit", "label": "audit s.a: not_null",
     "error": "AuditFailed: 3 row(s)", "error_class": "AuditFailed", "model": "s.a",
     "source": "models/a.sql:1", "worker": 0},
    {"event": "log", "message": "s.a: batch 1/2 written", "model": "s.a"},
    {"event": "write", "op": "add_intervals", "model": "s.a", "version": "v1",
     "intervals": [[0, 10], [10, 20]]},
    {"event": "write", "op": "remove_intervals", "model": "s.a", "version": "v1",
     "start": 0, "end": 20},
    {"event": "write", "op": "save_result", "kind": "audit", "name": "s.a:not_null",
     "passed": False, "payload": {"violations": 3}, "batch": [0, 10], "job_id": "j1",
     "plan_id": "p1"},
    {"event": "write", "op": "table_size", "model": "s.a", "version": "v1", "bytes": 4096,
     "rows": 12},
    {"event": "job_done", "job_id": "j1", "results": {
        "0": {"step": "build", "model": "s.a", "version": "v1", "table": "t_a", "batches": 2},
        "test:t": {"step": "unit_test", "name": "t", "passed": True, "diff": "", "notes": []}}},
    {"event": "job_failed", "error": "cannot read the job spec"},
]  # fmt: skip


def _minimal(event: dict[str, Any]) -> dict[str, Any]:
    """``event`` with only the keys its kind requires."""
    cls = _typed(event)
    return {key: value for key, value in event.items() if key in cls.__required_keys__}


def _typed(event: dict[str, Any]) -> Any:
    if event["event"] == events.WRITE:
        return events.WRITE_OPS[event["op"]]
    return events.KINDS[event["event"]]


def test_every_kind_of_event_has_a_sample_here() -> None:
    kinds = {e["event"] for e in FULL}
    ops = {e["op"] for e in FULL if e["event"] == events.WRITE}
    assert kinds == {*events.KINDS, events.WRITE}
    assert ops == set(events.WRITE_OPS)


@pytest.mark.parametrize("event", FULL, ids=lambda e: e.get("op", e["event"]))
def test_every_kind_of_event_round_trips_with_and_without_its_optional_keys(
    event: dict[str, Any],
) -> None:
    for sample in (event, _minimal(event)):
        line = encode(sample)  # type: ignore[arg-type]
        assert line.startswith(events.PREFIX) and "\n" not in line
        assert decode(line) == sample
        assert json.loads(line.removeprefix(events.PREFIX)) == sample  # the wire as ever


def test_the_parser_knows_the_keys_of_each_typed_definition_and_no_other() -> None:
    members = set(typing.get_args(events.Event))
    assert members == {*events.KINDS.values(), *events.WRITE_OPS.values()}
    tables = [(events.FIELDS[k], cls) for k, cls in events.KINDS.items()]
    tables += [(events.WRITE_FIELDS[op], cls) for op, cls in events.WRITE_OPS.items()]
    for (required, optional), cls in tables:
        assert set(required) == cls.__required_keys__, cls.__name__
        assert set(optional) == cls.__optional_keys__, cls.__name__


def test_ordinary_output_is_not_an_event() -> None:
    assert decode("25/01/01 10:00:00 WARN NativeCodeLoader: no native hadoop") is None
    assert decode("sluice {}") is None


def _nested(depth: int) -> Any:
    """``[[[...[0]...]]]``, ``depth`` lists deep."""
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


STEP_START = {"event": "step_start", "index": 0, "type": "build", "label": "build s.a"}

HOSTILE: list[tuple[str, str]] = [
    ("not json at all", "not JSON"),
    ('["job_done"]', "not a JSON object but a list"),
    ('"job_done"', "not a JSON object but a string"),
    ('{"event": "job_finished", "job_id": "j"}', "unknown kind 'job_finished'"),
    ('{"event": 3}', "unknown kind 3"),
    ('{"steps": 3}', "unknown kind None"),
    (json.dumps({**STEP_START, "index": "0"}), "'step_start' event: index is a string, not an integer"),
    (json.dumps({**STEP_START, "index": True}), "index is a boolean, not an integer"),
    (json.dumps({**STEP_START, "index": -1}), "index is -1, not a count"),
    (json.dumps({**STEP_START, "label": ["build"]}), "label is a list, not a string"),
    (json.dumps({**STEP_START, "worker": 1.5}), "worker is a number, not an integer"),
    (json.dumps({**STEP_START, "label": "x" * (events.MAX_NAME_CHARS + 1)}),
     f"label is longer than {events.MAX_NAME_CHARS} characters"),
    (json.dumps({**STEP_START, "shell": "rm -rf /"}), "unknown key 'shell'"),
    (json.dumps({k: v for k, v in STEP_START.items() if k != "label"}), "without label"),
    (json.dumps({"event": "job_start", "job_id": "j", "steps": 2, "event2": 1}),
     "unknown key 'event2'"),
    (json.dumps({"event": "step_done", "index": 0, "label": "x", "seconds": "fast",
                 "result": None}), "seconds is 'fast', not a number of seconds"),
    ('{"event": "step_done", "index": 0, "label": "x", "seconds": NaN, "result": null}',
     "not a number of seconds"),
    (json.dumps({"event": "step_done", "index": 0, "label": "x", "seconds": 1,
                 "result": [1, 2]}), "result is a list, not an object"),
    (json.dumps({"event": "job_done", "job_id": "j", "results": {"0": "passed"}}),
     "results of step '0' is a string, not an object"),
    (json.dumps({"event": "job_done", "job_id": "j",
                 "results": {"0": {"step": "query", "columns": ["a"], "types": ["x"],
                                   "rows": [[_nested(events.MAX_DEPTH + 5)]]}}}),
     f"nests deeper than {events.MAX_DEPTH} levels"),
    ('{"event": "log", "message": ' + "[" * 100_000 + "]" * 100_000 + "}", "deeper than"),
    (json.dumps({"event": "session_opened", "session_id": {"$(id)": 1}}),
     "session_id is an object, not a string"),
    (json.dumps({"event": "write", "op": "save_plan", "plan_id": "evil"}),
     "unknown write 'save_plan'"),
    (json.dumps({"event": "write", "op": "commit", "record": {}}),
     "the driver writes no environment"),
    (json.dumps({"event": "write", "op": "table_size", "model": "s.a", "version": "v",
                 "bytes": "1 GB"}), "a write 'table_size': bytes is a string, not an integer"),
    (json.dumps({"event": "write", "op": "add_intervals", "model": "s.a", "version": "v",
                 "intervals": "all"}), "intervals is a string, not a list of [start, end] pairs"),
    (json.dumps({"event": "write", "op": "add_intervals", "model": "s.a", "version": "v",
                 "intervals": [[0, 1, 2]]}), "intervals holds [0, 1, 2], not a [start, end] pair"),
    (json.dumps({"event": "write", "op": "save_result", "kind": "audit", "name": "a",
                 "passed": "yes", "payload": {}}), "passed is a string, not true or false"),
    (json.dumps({"event": "write", "op": "save_result", "kind": "audit", "name": "a",
                 "passed": True, "payload": {}, "environment": "prod"}),
     "unknown key 'environment'"),
]  # fmt: skip


@pytest.mark.parametrize(("body", "problem"), HOSTILE)
def test_a_malformed_or_hostile_event_is_refused_saying_why(body: str, problem: str) -> None:
    with pytest.raises(BadEvent) as caught:
        decode(events.PREFIX + body)
    assert problem in str(caught.value)
    raw = json.loads(body) if body.startswith("{") and len(body) < 10_000 else None
    if isinstance(raw, dict) and raw.get("event") == events.WRITE:
        assert caught.value.kind == events.WRITE  # the runner stops the job for these


def test_an_event_line_past_the_limit_is_refused_unread() -> None:
    line = encode({"event": "job_done", "job_id": "j", "results": {
        "0": {"step": "sql", "rows": [{"a": "x" * events.MAX_LINE_CHARS}]}}})  # fmt: skip
    with pytest.raises(BadEvent, match=f"longer than {events.MAX_LINE_CHARS} characters"):
        decode(line)


def test_only_a_line_carrying_results_may_be_longer_than_the_shorter_limit() -> None:
    text = "x" * events.MAX_EVENT_CHARS
    long_log = encode({"event": "log", "message": text})
    with pytest.raises(BadEvent, match=f"longer than {events.MAX_EVENT_CHARS} characters"):
        decode(long_log)
    # Spaced as json.dumps spaces by default: still known by how it begins.
    chunk = "y" * (events.MAX_EVENT_CHARS // 2)  # each value kept whole, the line longer
    row = {"step": "query", "columns": ["a", "b", "c"], "types": ["string"] * 3,
           "rows": [[chunk, chunk, chunk]]}  # fmt: skip
    for event in ({"event": "step_done", "index": 0, "label": "q", "seconds": 1, "result": row},
                  {"event": "job_done", "job_id": "j", "results": {"0": row}}):  # fmt: skip
        assert decode(events.PREFIX + json.dumps(event)) == event
    write = {"event": "write", "op": "save_result", "kind": "audit", "name": "a",
             "passed": True, "payload": {"pad": text}}  # fmt: skip
    with pytest.raises(BadEvent, match="only a step_done or a job_done line") as caught:
        decode(events.PREFIX + json.dumps(write))
    assert caught.value.kind == events.WRITE  # the runner stops the job for these


def test_a_huge_message_or_error_is_cut_saying_how_much() -> None:
    extra = 1234
    text = "y" * (events.MAX_TEXT_CHARS + extra)
    for raw in ({"event": "log", "message": text}, {"event": "job_failed", "error": text}):
        event = parse(raw)
        kept = str(next(v for k, v in event.items() if k in ("message", "error")))
        assert kept.startswith("y" * events.MAX_TEXT_CHARS)
        assert kept.endswith(f"... ({extra} more characters)")
        assert len(kept) < events.MAX_TEXT_CHARS + 40


# --- every event the driver emits is one of the typed kinds -----------------------------


def _emitted() -> list[tuple[str, int, str, str | None]]:
    """Each event dict literal in the package: (file, line, its kind, its write op)."""
    found = []
    for path in sorted(SLUICE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Dict):
                continue
            fields = {
                key.value: value
                for key, value in zip(node.keys, node.values, strict=True)
                if isinstance(key, ast.Constant) and isinstance(key.value, str)
            }
            kind, op = fields.get("event"), fields.get("op")
            if not isinstance(kind, ast.Constant) or not isinstance(kind.value, str):
                continue
            where = str(path.relative_to(SLUICE.parent))
            if where.startswith("sluice/bot/"):
                continue  # the forges' webhook events, another protocol
            opname = op.value if isinstance(op, ast.Constant) else None
            found.append((where, node.lineno, kind.value, opname))
    return found


def test_every_event_the_package_emits_has_a_typed_definition() -> None:
    emitted = _emitted()
    kinds = {kind for _, _, kind, _ in emitted}
    # The scan sees the driver's events (it would miss them all if they moved out of
    # dict literals: then this fails, and the scan needs updating).
    assert {"job_start", "step_start", "step_done", "step_failed", "job_done"} <= kinds
    untyped = [
        f"{where}:{line}: {kind}{f' {op}' if op else ''}"
        for where, line, kind, op in emitted
        if (kind not in events.KINDS and kind != events.WRITE)
        or (kind == events.WRITE and op not in events.WRITE_OPS)
    ]
    assert untyped == [], "events without a typed definition in sluice.core.spark.events"


def test_an_untyped_event_emitted_by_a_step_fails_the_scripted_job() -> None:
    # The scripted runner reads its driver's events as the real runners read lines.
    warehouse = Warehouse(Script())
    runner = warehouse.runner()
    original = runner._handlers

    def handlers() -> Any:
        table = original()
        sql = table["sql"]

        def chatty(spark: Any, step: Any, ctx: Any) -> Any:
            ctx.emit({"event": "progress", "percent": 50})
            return sql(spark, step, ctx)

        return {**table, "sql": chatty}

    runner._handlers = handlers  # type: ignore[method-assign]
    spec = {"job_id": "j", "kind": "test",
            "steps": [{"type": "sql", "label": "one", "statements": ["SELECT 1"]}]}  # fmt: skip
    with pytest.raises(ExecutionError, match="unknown kind 'progress'"):
        runner.run(spec)  # type: ignore[arg-type]


def test_a_scripted_job_s_events_are_the_typed_kinds_read_back() -> None:
    seen: list[Any] = []
    warehouse = Warehouse(Script())
    runner = warehouse.runner(on_event=seen.append)
    spec = {"job_id": "j", "kind": "test",
            "steps": [{"type": "sql", "label": "one", "statements": ["SELECT 1"]}]}  # fmt: skip
    result = runner.run(spec)  # type: ignore[arg-type]
    assert [e["event"] for e in seen] == ["job_start", "step_start", "step_done", "job_done"]
    assert seen == result.events and all(decode(encode(e)) == e for e in seen)


# --- a runner reading a hostile driver's lines over a real pipe -----------------------------

_DRIVER = """
import json, sys
spec = json.load(open(sys.argv[1]))
def say(line):
    print(line, flush=True)
say("@@sluice " + json.dumps({"event": "job_start", "job_id": spec["job_id"], "steps": 1}))
for line in json.loads(sys.argv[2]):
    say(line)
say("@@sluice " + json.dumps({"event": "job_done", "job_id": spec["job_id"], "results": {
    "0": {"step": "query", "columns": ["1"], "types": ["int"], "rows": [[1]]}}}))
"""

QUERY_RESULT = {"step": "query", "columns": ["1"], "types": ["int"], "rows": [[1]]}
SPEC = {"job_id": "hostile-1", "kind": "query",
        "steps": [{"type": "query", "label": "query", "sql": "SELECT 1", "limit": 1}]}  # fmt: skip


class _Scripted(SubmitRunner):
    """spark-submit's place taken by a process printing the lines it is given."""

    lines: list[str] = []

    def command(
        self, spec_path: Path, job_id: str, kind: str, java_flags: list[str] | None = None
    ) -> list[str]:
        return [sys.executable, "-c", _DRIVER, str(spec_path), json.dumps(self.lines)]


def _runner(tmp_path: Path, lines: list[str]) -> _Scripted:
    runner = _Scripted(
        SparkSettings(master="local[1]"), SparkPaths(tmp_path / "spark", tmp_path / "logs")
    )
    runner.lines = lines
    return runner


def test_a_driver_printing_hostile_event_lines_is_not_believed_and_the_job_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(events, "MAX_LINE_CHARS", 2000)
    lines = [
        events.PREFIX + json.dumps({"event": "job_done", "job_id": "x", "results": "all"}),
        events.PREFIX + '{"event": "step_failed", "index": "0"',
        events.PREFIX + json.dumps({"event": "oom_killer", "pid": 1}),
        events.PREFIX + json.dumps({"event": "log", "message": "z" * 5000}),  # past the line limit
        "ordinary output " + "w" * 5000,
        # Results the job's spec (one query step, limit 1) does not allow:
        events.PREFIX + json.dumps({"event": "job_done", "job_id": "x",
                                    "results": {"7": QUERY_RESULT}}),
        events.PREFIX + json.dumps({"event": "job_done", "job_id": "x", "results": {"0": {
            "step": "build", "model": "s.a", "version": "v", "table": "t", "batches": 0}}}),
        events.PREFIX + json.dumps({"event": "job_done", "job_id": "x", "results": {
            "0": {**QUERY_RESULT, "rows": [[1], [2]]}}}),
        events.PREFIX + json.dumps({"event": "step_done", "index": 3, "label": "x",
                                    "seconds": 1, "result": QUERY_RESULT}),
    ]  # fmt: skip
    seen: list[Any] = []
    runner = _runner(tmp_path, lines)
    runner.on_event = seen.append
    result = run_recorded(runner, SPEC, state=None)  # type: ignore[arg-type]
    assert result.results == {"0": QUERY_RESULT}
    assert [e["event"] for e in seen] == ["job_start", "job_done"]
    assert result.events == seen
    log = (tmp_path / "logs" / "hostile-1.log").read_text()
    refusals = [ln for ln in log.splitlines() if ln.startswith("sluice: refused an event line")]
    assert len(refusals) == 8
    assert "results is a string, not an object" in refusals[0]
    assert "not JSON" in refusals[1]
    assert "unknown kind 'oom_killer'" in refusals[2]
    assert "longer than 2000 characters" in refusals[3]
    assert "results of step '7': the job has no step of that id" in refusals[4]
    assert "is a build step's result, but step 0 ('query') is a query step" in refusals[5]
    assert "holds 2 rows, but step 0 ('query') asked for at most 1" in refusals[6]
    assert "result is for step 3, which the job does not have (it has 1 step)" in refusals[7]
    assert max(len(ln) for ln in log.splitlines()) <= 2000 + len(events.PREFIX)


def test_a_driver_printing_a_malformed_write_is_stopped_as_for_a_forged_one(
    tmp_path: Path,
) -> None:
    bad = {"event": "write", "op": "table_size", "model": "s.a", "version": "v", "bytes": [1]}
    runner = _runner(tmp_path, [events.PREFIX + json.dumps(bad)])
    with pytest.raises(WriteRefused) as caught:
        run_recorded(runner, SPEC, state=None)  # type: ignore[arg-type]
    assert "refused a write from the Spark driver of job hostile-1" in str(caught.value)
    assert "bytes is a list, not an integer" in str(caught.value)


def test_a_driver_printing_events_without_end_keeps_a_bounded_number_and_its_outcome(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(submit, "MAX_KEPT_EVENTS", 50)
    log = events.PREFIX + json.dumps({"event": "log", "message": "again"})
    seen: list[Any] = []
    runner = _runner(tmp_path, [log] * 500)
    runner.on_event = seen.append
    result = run_recorded(runner, SPEC, state=None)  # type: ignore[arg-type]
    assert len(seen) == 502  # every event is still passed on as it comes
    assert len(result.events) == 51 and result.events[-1]["event"] == "job_done"
    assert result.results == {"0": QUERY_RESULT}
