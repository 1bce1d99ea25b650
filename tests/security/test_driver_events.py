"""A pull request's code runs in the Spark driver and can print the driver's event lines
(``@@sluice {...}``) itself: what the runner believes of them, and keeps, is bounded.

The red team's cases, each now refused: outcome events printed without end (kept all,
however many, up to 32 MiB each); a second ``job_done`` printed once the driver reported
its own (an ``atexit`` hook), replacing the job's results, or leaving a failed unit test
out; a later "passed" for a failed blocking audit's batch, recording it as filled; a
result saved again and again, each with a payload of any size, and a job log without end,
filling the state database and the disk. The driver is a stand-in (a real process
printing the lines it is given over a real pipe), as in ``tests/core/spark/test_events``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.core.config import SparkSettings
from sluice.core.errors import ExecutionError
from sluice.core.preview import PreviewResult
from sluice.core.spark import events, submit, writes
from sluice.core.spark.session import SparkPaths
from sluice.core.spark.submit import SubmitRunner, run_recorded
from sluice.core.spark.writes import JobWrites, WriteRefused
from sluice.core.state import StateStore, open_state

P = events.PREFIX

# Prints job_start, the lines before, its job_done (unless results is null), the lines
# after (as an atexit hook would), and exits with the code given.
_DRIVER = """
import json, sys
spec = json.load(open(sys.argv[1]))
before, results, after, code = json.loads(sys.argv[2])
def say(line):
    sys.stdout.write(line + "\\n")
say("@@sluice " + json.dumps({"event": "job_start", "job_id": spec["job_id"], "steps": 1}))
for line in before:
    say(line)
if results is not None:
    say("@@sluice " + json.dumps({"event": "job_done", "job_id": spec["job_id"],
                                  "results": results}))
for line in after:
    say(line)
sys.stdout.flush()
sys.exit(code)
"""


class _Driver(SubmitRunner):
    """spark-submit's place taken by a process printing the lines it is given."""

    script: list[Any] = []

    def command(
        self, spec_path: Path, job_id: str, kind: str, java_flags: list[str] | None = None
    ) -> list[str]:
        return [sys.executable, "-c", _DRIVER, str(spec_path), json.dumps(self.script)]


def _runner(
    tmp_path: Path,
    before: list[str],
    results: dict[str, Any] | None,
    after: list[str] = (),  # type: ignore[assignment]
    code: int = 0,
) -> _Driver:
    runner = _Driver(
        SparkSettings(master="local[1]"), SparkPaths(tmp_path / "spark", tmp_path / "logs")
    )
    runner.script = [before, results, list(after), code]
    return runner


def _line(event: dict[str, Any]) -> str:
    return P + json.dumps(event)


def _log(tmp_path: Path, job_id: str) -> str:
    return (tmp_path / "logs" / f"{job_id}.log").read_text(encoding="utf-8")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    state = open_state(f"sqlite:///{tmp_path / 'state.db'}")
    yield state
    state.close()


QUERY = {"step": "query", "columns": ["1"], "types": ["int"], "rows": [[1]]}
QUERY_SPEC = {"job_id": "e1", "kind": "query",
              "steps": [{"type": "query", "label": "query", "sql": "SELECT 1", "limit": 1}]}  # fmt: skip
FAILED_STEP = {"event": "step_failed", "index": 0, "type": "query", "label": "q", "error": "x",
               "error_class": "E"}  # fmt: skip


# --- E1: what is kept of a driver's events is bounded ---------------------------------------


def test_an_outcome_printed_without_end_is_kept_once_and_the_job_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(submit, "MAX_KEPT_EVENTS", 50)
    lines = [_line(FAILED_STEP)] * 300 + [_line({"event": "job_failed", "error": "y"})] * 300
    result = run_recorded(_runner(tmp_path, lines, {"0": QUERY}), QUERY_SPEC, state=None)  # type: ignore[arg-type]
    kinds = [e["event"] for e in result.events]
    # The first 50 events, then of the outcomes only the first job_failed and the job_done.
    assert len(kinds) == 52
    assert kinds.count("job_failed") == 1 and kinds[-2:] == ["job_failed", "job_done"]
    assert result.results == {"0": QUERY}


def test_the_events_kept_are_bounded_by_their_lines_size_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(submit, "MAX_KEPT_CHARS", 20_000)
    log = _line({"event": "log", "message": "z" * 1000})
    seen: list[Any] = []
    runner = _runner(tmp_path, [log] * 100, {"0": QUERY})
    runner.on_event = seen.append
    result = run_recorded(runner, QUERY_SPEC, state=None)  # type: ignore[arg-type]
    assert len(seen) == 102  # every event is still passed on as it comes
    kept = [e for e in result.events if e["event"] == "log"]
    assert 10 <= len(kept) < 20 and result.events[-1]["event"] == "job_done"


def test_a_long_line_of_an_event_that_carries_no_result_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(events, "MAX_EVENT_CHARS", 1000)
    lines = [_line({**FAILED_STEP, "error": "e" * 2000}), _line(FAILED_STEP)]
    runner = _runner(tmp_path, lines, None, code=events.STEP_FAILED)
    with pytest.raises(ExecutionError, match="failed at step 'q': x"):
        run_recorded(runner, QUERY_SPEC, state=None)  # type: ignore[arg-type]
    assert "an event line longer than 1000 characters (only a step_done or a job_done" in _log(
        tmp_path, "e1"
    )
    # A write that long stops the job, as any write the runner cannot read.
    write = {"event": "write", "op": "table_size", "model": "s.a", "version": "v",
             "bytes": 1, "rows": None, "pad": "p" * 2000}  # fmt: skip
    with pytest.raises(WriteRefused, match="longer than 1000 characters"):
        run_recorded(_runner(tmp_path, [_line(write)], {"0": QUERY}), QUERY_SPEC, state=None)  # type: ignore[arg-type]


def test_a_driver_printing_refused_lines_without_end_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(submit, "MAX_REFUSED_LINES", 100)
    runner = _runner(tmp_path, [P + "not json"] * 50 + [_line(FAILED_STEP)] * 10, {"0": QUERY})
    assert run_recorded(runner, QUERY_SPEC, state=None).results == {"0": QUERY}  # type: ignore[arg-type]
    runner = _runner(tmp_path, [P + "not json"] * 95 + [_line(FAILED_STEP)] * 10, {"0": QUERY})
    with pytest.raises(ExecutionError) as caught:
        run_recorded(runner, QUERY_SPEC, state=None)  # type: ignore[arg-type]
    assert "was stopped: its driver printed more than 100 event lines the runner refused" in str(
        caught.value
    )
    assert "a 'step_failed' event again" in str(caught.value)


# --- E2: one job_done, the driver's, with a result of every step ---------------------------

TEST_STEP = {"type": "unit_test", "id": "test:t_total", "label": "test t_total",
             "name": "t_total", "model": "s.a", "path": "tests/t.yaml", "line": 1,
             "inputs": [], "query": "SELECT 1", "expected": [], "ctes": [], "grain": [],
             "notes": []}  # fmt: skip
TEST_SPEC = {"job_id": "e2", "kind": "preview", "steps": [TEST_STEP]}
FAILED_TEST = {"step": "unit_test", "name": "t_total", "passed": False,
               "diff": "t_total FAILED: expected 3 rows, got 0", "notes": []}  # fmt: skip


@pytest.mark.parametrize(
    "forged",
    [
        {"test:t_total": {**FAILED_TEST, "passed": True, "diff": ""}},  # reads passed
        {},  # the failed test left out
    ],
    ids=["passed", "left-out"],
)
def test_an_event_printed_after_the_driver_s_job_done_fails_the_job(
    tmp_path: Path, forged: dict[str, Any]
) -> None:
    after = [_line({"event": "job_done", "job_id": "e2", "results": forged})]
    runner = _runner(tmp_path, [], {"test:t_total": FAILED_TEST}, after)
    with pytest.raises(ExecutionError) as caught:
        run_recorded(runner, TEST_SPEC, state=None)  # type: ignore[arg-type]
    assert "its driver printed an event line after reporting the job's end (job_done)" in str(
        caught.value
    )
    assert "after the job's end (job_done); the job is failed" in _log(tmp_path, "e2")


def test_a_write_printed_after_the_job_done_is_not_applied(
    tmp_path: Path, store: StateStore
) -> None:
    build = {"type": "build", "label": "build s.a", "model": "s.a", "version": "v1",
             "table": "t_a", "batches": [{"start": 0, "end": 10}]}  # fmt: skip
    spec = {"job_id": "e2w", "kind": "apply", "steps": [build]}
    done = {"0": {"step": "build", "model": "s.a", "version": "v1", "table": "t_a", "batches": 1}}
    write = {"event": "write", "op": "add_intervals", "model": "s.a", "version": "v1",
             "intervals": [[0, 10]]}  # fmt: skip
    with pytest.raises(ExecutionError, match="after reporting the job's end"):
        run_recorded(_runner(tmp_path, [], done, [_line(write)]), spec, state=store)  # type: ignore[arg-type]
    assert store.get_intervals([("s.a", "v1")]) == {}


def test_a_job_done_without_a_step_s_result_fails_the_job_saying_so(tmp_path: Path) -> None:
    runner = _runner(tmp_path, [], {})
    with pytest.raises(ExecutionError) as caught:
        run_recorded(runner, TEST_SPEC, state=None)  # type: ignore[arg-type]
    message = str(caught.value)
    assert "the runner refused its driver's report of the job's results" in message
    assert "results without a result of step 'test:t_total'" in message


def test_a_unit_test_without_a_result_has_not_passed() -> None:
    passed = {**FAILED_TEST, "passed": True, "diff": ""}
    ran = PreviewResult(None, (passed,), 0, 0, {}, {}, {}, None)  # type: ignore[arg-type]
    assert ran.tests_passed
    untested = PreviewResult(None, (), 0, 0, {}, {}, {}, None, untested=("t_total",))  # type: ignore[arg-type]
    assert not untested.tests_passed


# --- E2b, E4: one result per kind, name and batch; payloads and the log bounded ------------

AUDITED = {"type": "build", "label": "build s.a", "model": "s.a", "version": "v1",
           "table": "t_a", "batches": [{"start": 0, "end": 10, "audits": [
               {"model": "s.a", "audit": "not_null", "blocking": True}]}]}  # fmt: skip
AUDIT_SPEC = {"job_id": "e2b", "kind": "apply", "steps": [AUDITED]}


def _result(passed: bool, **more: Any) -> dict[str, Any]:
    return {"event": "write", "op": "save_result", "kind": "audit", "name": "s.a:not_null",
            "passed": passed, "payload": {"violations": 0 if passed else 12}, "batch": [0, 10],
            **more}  # fmt: skip


def test_a_failed_blocking_audit_s_batch_stays_unrecorded_whatever_is_printed_after(
    tmp_path: Path, store: StateStore
) -> None:
    lines = [
        _line({"event": "write", "op": "add_intervals", "model": "s.a", "version": "v1",
               "intervals": [[0, 10]]}),
        _line(_result(False)),  # the driver's own: the batch's blocking audit failed
        _line(_result(True)),  # printed by the pull request's code
    ]  # fmt: skip
    with pytest.raises(WriteRefused) as caught:
        run_recorded(_runner(tmp_path, lines, None, code=3), AUDIT_SPEC, state=store)  # type: ignore[arg-type]
    assert "audit result 's.a:not_null' of batch [0, 10) again: a job saves one result of each" in (
        str(caught.value)
    )
    assert store.get_intervals([("s.a", "v1")]) == {}
    [kept] = store.get_results(job_id="e2b")
    assert kept.passed is False


def test_a_result_is_saved_once_per_job(store: StateStore) -> None:
    checked = JobWrites(AUDIT_SPEC, store)  # type: ignore[arg-type]
    checked.apply(_result(True))  # type: ignore[arg-type]
    for _ in range(3):
        with pytest.raises(WriteRefused, match="again: a job saves one result of each"):
            checked.apply(_result(True))  # type: ignore[arg-type]
    assert len(store.get_results(job_id="e2b")) == 1
    # Another job (a run again) saves its own.
    JobWrites({**AUDIT_SPEC, "job_id": "e2c"}, store).apply(_result(True))  # type: ignore[arg-type]
    assert len(store.get_results(job_id="e2c")) == 1


def test_a_result_s_payload_is_bounded(store: StateStore) -> None:
    checked = JobWrites(AUDIT_SPEC, store)  # type: ignore[arg-type]
    pad = "x" * writes.MAX_PAYLOAD_CHARS
    with pytest.raises(WriteRefused) as caught:
        checked.apply(_result(True, payload={"pad": pad}))  # type: ignore[arg-type]
    assert f"more than the {writes.MAX_PAYLOAD_CHARS} a result may keep" in str(caught.value)
    assert store.get_results(job_id="e2b") == []
    checked.apply(_result(True, payload={"pad": pad[:1000]}))  # type: ignore[arg-type]
    assert len(store.get_results(job_id="e2b")) == 1


def test_the_job_log_is_cut_at_its_limit_saying_how_much_was_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(submit, "MAX_LOG_BYTES", 10_000)
    noise = ["o" * 99] * 300  # 30,000 bytes of ordinary output
    result = run_recorded(_runner(tmp_path, noise, {"0": QUERY}), QUERY_SPEC, state=None)  # type: ignore[arg-type]
    assert result.results == {"0": QUERY}  # the job is not failed for it
    text = _log(tmp_path, "e1")
    *kept, last = text.splitlines()
    assert len("\n".join(kept)) <= 10_000
    assert last.startswith("sluice: the job's log was cut here, at its limit of 10000 bytes: ")
    dropped = int(last.split(": ")[2].split()[0])
    assert len(kept) + dropped >= 301  # every line is either kept or counted


def test_a_unit_test_s_result_names_the_spec_s_model_whatever_the_driver_says(
    store: StateStore,
) -> None:
    # The web UI lists a model's unit tests by the model their stored result names: the
    # spec's (what Sluice asked to test), never a model the driver's payload claims.
    forged = {**FAILED_TEST, "passed": True, "diff": "", "model": "s.other"}
    JobWrites(TEST_SPEC, store).apply(  # type: ignore[arg-type]
        {
            "event": "write",
            "op": "save_result",
            "kind": "unit_test",
            "name": "t_total",
            "passed": True,
            "payload": forged,
        }
    )
    [kept] = store.get_results(job_id="e2")
    assert kept.payload[writes.TESTED_MODEL] == "s.a" and kept.passed
