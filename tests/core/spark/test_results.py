"""Each step's result as a typed value: every step type's result round-trips through an
event line; a result the driver (or a pull request's code printing to its stdout) makes
up is refused, saying why: of the wrong shape, out of bounds, for a step the job does not
have, or not of its step."""

from __future__ import annotations

import json
import typing
from typing import Any

import pytest

from sluice.core.errors import ExecutionError
from sluice.core.spark import events, results
from sluice.core.spark.events import BadEvent, decode, encode
from sluice.core.spark.results import result_of, table_diff_result
from sluice.core.spark.scripted import Script, Warehouse
from sluice.core.spark.spec import Step
from sluice.core.tablediff.result import (
    ColumnStats,
    Samples,
    SchemaDiff,
    Sides,
    TableDiffResult,
    TypeChange,
)

# One step of each type (a job's spec), and a result of each (every optional key given).
STEPS: list[dict[str, Any]] = [
    {"type": "sql", "label": "sql", "statements": ["SELECT 1"], "limit": 2},
    {"type": "build", "label": "build s.a", "model": "s.a", "version": "v1", "table": "t_a",
     "kind": "FULL", "format": "parquet", "time_column": None, "unique_key": [],
     "columns": None, "partitioned_by": [], "restate": [], "clustered_by": [],
     "table_properties": [], "session_properties": [],
     "batches": [{"start": 0, "end": 10, "sql": "SELECT 1"}]},
    {"type": "audit", "label": "audit s.a: not_null", "model": "s.a", "version": "v1",
     "audit": "not_null", "blocking": False, "sql": "SELECT 1", "batch": [0, 10]},
    {"type": "views", "label": "views", "environment": "pr_1", "schemas": ["s__pr_1"],
     "views": [{"view": "s__pr_1.a", "sql": "SELECT * FROM t_a", "properties": []}],
     "drop": []},
    {"type": "drop", "label": "drop", "views": ["s__old.a"], "schemas": ["s__old"],
     "tables": ["t_old"]},
    {"type": "unit_test", "id": "test:t", "label": "test t", "name": "t", "model": "s.a",
     "path": "tests/t.yaml", "line": 1, "inputs": [], "query": "SELECT 1", "expected": [],
     "ctes": [], "grain": [], "notes": ["a note"]},
    {"type": "query", "label": "query", "sql": "SELECT 1", "limit": 10},
    {"type": "table_diff", "id": "diff:s.a", "label": "table diff s.a", "name": "s.a",
     "source": "t_old", "target": "t_a", "source_label": "prod", "target_label": "pr_1",
     "keys": ["id"], "options": {}},
    {"type": "audit", "label": "audit s.a: unique", "model": "s.a", "version": "v1",
     "audit": "unique", "blocking": True, "sql": "SELECT 1"},
    {"type": "inspect", "id": "inspect", "label": "inspect", "views": ["s.a"],
     "tables": [{"table": "t_a", "query": "SELECT 1 AS id", "time_column": None}]},
]  # fmt: skip
SPEC_STEPS: list[Step] = typing.cast(list[Step], STEPS)

DIFF = TableDiffResult(
    name="s.a", source="prod", target="pr_1", source_table="t_old", target_table="t_a",
    keys=("id",), decimals=3, tolerance=0.5, where="id > 0", skipped=("ts",),
    identical=False, source_rows=3, target_rows=4, joined=3, source_only=0, target_only=1,
    differing_rows=1, null_keys=Sides(0, 0), duplicate_keys=Sides(0, 1),
    duplicate_rows=Sides(0, 2),
    schema=SchemaDiff(added=(("c", "int"),), removed=(("d", "string"),),
                      changed=(TypeChange("b", "int", "bigint"),)),
    columns={"b": ColumnStats(2, 1)},
    samples=Samples(target_only=({"id": 4},), differing=({"id": 1, "b": {"source": 1, "target": 2}},)),
    note="compared the rows of id > 0",
)  # fmt: skip

SAMPLES: dict[str, dict[str, Any]] = {
    "0": {"step": "sql", "rows": [{"a": 1, "b": "x"}, {"a": None, "b": {"k": [1.5, True]}}]},
    "1": {"step": "build", "model": "s.a", "version": "v1", "table": "t_a", "batches": 1},
    "2": {"step": "audit", "model": "s.a", "audit": "not_null", "passed": False,
          "violations": 7, "sample": [{"id": None}], "blocking": False, "batch": [0, 10]},
    "3": {"step": "views", "environment": "pr_1", "swapped": 1, "dropped": 0},
    "4": {"step": "drop", "views": 1, "schemas": ["s__old"], "tables": 1},
    "test:t": {"step": "unit_test", "name": "t", "passed": False,
               "diff": "t (tests/t.yaml:1) FAILED\n  - 3\n  + 2", "notes": ["a note"]},
    "6": {"step": "query", "columns": ["id", "ts"], "types": ["int", "timestamp"],
          "rows": [[1, "2024-01-01 00:00:00"], [None, None]]},
    "diff:s.a": dict(table_diff_result(DIFF.to_json())),
    "8": {"step": "audit", "model": "s.a", "audit": "unique", "passed": True,
          "violations": 0, "sample": [], "blocking": True},  # no batch: of the whole build
    "inspect": {"step": "inspect",
                "views": [{"name": "s.a", "exists": True, "type": "VIEW",
                           "text": "SELECT * FROM t_a", "ddl_ms": 1_700_000_000_000,
                           "error": None}],
                "tables": [{"name": "t_a", "exists": True, "type": "MANAGED",
                            "provider": "parquet", "mark": "sluice", "columns": [["id", "int"]],
                            "expected": [["id", "int"]], "rows": 3, "bytes": 1024, "files": 1,
                            "newest_ms": 1_700_000_000_000, "ddl_ms": 1_700_000_000_000,
                            "source": "files", "partitions": None, "error": None}]},
}  # fmt: skip
REFUSED = {"step": "table_diff", "error": {"message": "id is not a column", "hint": None}}


def _index(key: str) -> int:
    return next(i for i, s in enumerate(STEPS) if s.get("id", str(i)) == key)


def _done(found: dict[str, Any]) -> dict[str, Any]:
    """A job_done with ``found`` and, for the other steps, their sample results (a job
    that ran to its end reports every step's)."""
    return {"event": "job_done", "job_id": "j", "results": {**SAMPLES, **found}}


def _step_done(index: int, result: Any) -> dict[str, Any]:
    return {"event": "step_done", "index": index, "label": "x", "seconds": 1, "result": result}


def test_every_step_type_has_a_typed_result_a_parser_and_a_sample_here() -> None:
    step_types = {typing.get_args(cls.__annotations__["type"])[0] for cls in typing.get_args(Step)}
    assert set(results.KEYS) == set(results.TYPES) == step_types
    assert {r["step"] for r in SAMPLES.values()} == step_types
    members = set(typing.get_args(results.StepResult))
    assert members == {*results.TYPES.values(), results.TableDiffRefused}
    for kind, cls in results.TYPES.items():
        required, optional = results.KEYS[kind]
        assert set(required) == cls.__required_keys__, kind
        assert set(optional) == cls.__optional_keys__, kind
    assert set(results.REFUSED_KEYS) == results.TableDiffRefused.__required_keys__


@pytest.mark.parametrize("key", [*SAMPLES, "refused"])
def test_every_step_type_s_result_round_trips_through_an_event_line(key: str) -> None:
    result = REFUSED if key == "refused" else SAMPLES[key]
    key = "diff:s.a" if key == "refused" else key
    for event in (_done({key: result}), _step_done(_index(key), result)):
        line = encode(event)  # type: ignore[arg-type]
        assert decode(line, SPEC_STEPS) == event
        assert json.loads(line.removeprefix(events.PREFIX)) == event  # the wire: JSON


def test_every_step_s_result_together_in_one_job_done() -> None:
    event = _done(SAMPLES)
    assert decode(encode(event), SPEC_STEPS) == event  # type: ignore[arg-type]


def test_the_scripted_double_answers_every_step_type_with_its_typed_result() -> None:
    # The scripted runner reads its driver's events back as lines, checked against the
    # spec: a result of the wrong shape, or not its step's, would fail the job.
    warehouse = Warehouse(Script(rows={"s.a": 4}))
    spec = {"job_id": "j", "kind": "apply", "plan_id": "p", "steps": STEPS}
    job = warehouse.runner().run(spec)  # type: ignore[arg-type]
    assert {key: r["step"] for key, r in job.results.items()} == {
        step.get("id", str(i)): step["type"] for i, step in enumerate(STEPS)
    }
    assert result_of(job.results, "6", "query") == {
        "step": "query", "columns": [], "types": [], "rows": []}  # fmt: skip
    done = [e for e in job.events if e["event"] == "job_done"]
    assert done == [{"event": "job_done", "job_id": "j", "results": job.results}]


def _rows(count: int) -> list[list[int]]:
    return [[1]] * count


def _deep(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


QUERY = SAMPLES["6"]
BUILD = SAMPLES["1"]
DIFF_JSON = SAMPLES["diff:s.a"]

HOSTILE: list[tuple[str, dict[str, Any], str]] = [
    # of the wrong shape
    ("untagged", {"0": {"rows": []}}, "results of step '0' is of no known step type (its step is None)"),
    ("unknown tag", {"0": {"step": "shell", "rows": []}}, "of no known step type (its step is 'shell')"),
    ("not an object", {"1": ["build"]}, "results of step '1' is a list, not an object"),
    ("wrong type", {"1": {**BUILD, "batches": "1"}},
     "of step '1': a build step's result: batches is a string, not an integer"),
    ("boolean count", {"1": {**BUILD, "batches": True}}, "batches is a boolean, not an integer"),
    ("negative count", {"2": {**SAMPLES["2"], "violations": -1}}, "violations is -1, not a count"),
    ("unknown key", {"6": {**QUERY, "shell": "rm -rf /"}},
     "a query step's result with an unknown key 'shell'"),
    ("missing key", {"test:t": {k: v for k, v in SAMPLES["test:t"].items() if k != "diff"}},
     "a unit_test step's result without diff"),
    ("unit test diff as a list", {"test:t": {**SAMPLES["test:t"], "diff": ["- 3", "+ 2"]}},
     "diff is a list, not a string"),
    ("nested key", {"diff:s.a": {**DIFF_JSON, "schema": {**DIFF_JSON["schema"], "added": [{"name": "c"}]}}},
     "a table_diff step's result: schema: added without type"),
    ("not a number", {"diff:s.a": {**DIFF_JSON, "tolerance": float("nan")}},
     "tolerance is nan, not a number"),
    ("refusal's shape", {"diff:s.a": {"step": "table_diff", "error": "no"}},
     "error is a string, not an object"),
    # out of bounds
    ("too many rows", {"6": {**QUERY, "rows": _rows(results.MAX_ROWS + 1)}},
     f"rows holds {results.MAX_ROWS + 1} rows, more than {results.MAX_ROWS}"),
    ("too wide a row", {"6": {**QUERY, "rows": [[0] * (results.MAX_COLUMNS + 1)]}},
     f"holds a row of {results.MAX_COLUMNS + 1} values, more than {results.MAX_COLUMNS}"),
    ("too deep a row", {"6": {**QUERY, "rows": [[_deep(results.MAX_DEPTH + 2)]]}},
     f"nests deeper than {results.MAX_DEPTH} levels"),
    ("a sql row not an object", {"0": {"step": "sql", "rows": [[1]]}},
     "holds a row that is a list, not an object"),
    ("too long a name", {"1": {**BUILD, "model": "m" * (results.MAX_NAME_CHARS + 1)}},
     f"model is longer than {results.MAX_NAME_CHARS} characters"),
    # not the job's, or not its step's
    ("no such step", {"9": QUERY}, "results of step '9': the job has no step of that id"),
    ("wrong kind", {"1": QUERY},
     "is a query step's result, but step 1 ('build s.a') is a build step"),
    ("another model", {"1": {**BUILD, "model": "s.b"}},
     "names model 's.b', but step 1 ('build s.a') has 's.a'"),
    ("another batch", {"2": {**SAMPLES["2"], "batch": [10, 20]}}, "names batch [10, 20]"),
    ("no batch", {"2": {k: v for k, v in SAMPLES["2"].items() if k != "batch"}},
     "names batch None, but step 2 ('audit s.a: not_null') has [0, 10]"),
    ("another test", {"test:t": {**SAMPLES["test:t"], "name": "u"}}, "names name 'u'"),
    ("more views", {"3": {**SAMPLES["3"], "swapped": 5}}, "names swapped 5, but step 3"),
    ("a schema not asked", {"4": {**SAMPLES["4"], "schemas": ["prod_schema"]}},
     "names schemas ['prod_schema']"),
    ("more rows than asked", {"0": {"step": "sql", "rows": [{"a": 1}] * 3}},
     "holds 3 rows, but step 0 ('sql') asked for at most 2"),
    ("a diff of other tables", {"diff:s.a": {**DIFF_JSON, "target_table": "t_prod"}},
     "names target_table 't_prod', but step 7 ('table diff s.a') has 't_a'"),
    ("a diff of another source", {"diff:s.a": {**DIFF_JSON, "source_table": "t_a"}},
     "names source_table 't_a', but step 7 ('table diff s.a') has 't_old'"),
    ("a diff of other labels", {"diff:s.a": {**DIFF_JSON, "source": "pr_1", "target": "prod"}},
     "names source 'pr_1', but step 7 ('table diff s.a') has 'prod'"),
    ("a diff on other keys", {"diff:s.a": {**DIFF_JSON, "keys": ["id", "b"]}},
     "names keys ['id', 'b'], but step 7 ('table diff s.a') has ['id']"),
]  # fmt: skip


@pytest.mark.parametrize(("found", "problem"), [(f, p) for _, f, p in HOSTILE],
                         ids=[name for name, _, _ in HOSTILE])  # fmt: skip
def test_a_hostile_job_done_result_is_refused_saying_why(
    found: dict[str, Any], problem: str
) -> None:
    with pytest.raises(BadEvent) as caught:
        decode(encode(_done(found)), SPEC_STEPS)  # type: ignore[arg-type]
    assert str(caught.value).startswith("a 'job_done' event: results")
    assert problem in str(caught.value)
    assert caught.value.kind == "job_done"


@pytest.mark.parametrize(
    ("index", "result", "problem"),
    [
        (10, QUERY, "result is for step 10, which the job does not have (it has 10 steps)"),
        (1, QUERY, "result is a query step's result, but step 1 ('build s.a') is a build step"),
        (6, {**QUERY, "rows": _rows(11)}, "holds 11 rows, but step 6 ('query') asked for at most 10"),
        (6, {**QUERY, "types": "int"}, "result: a query step's result: types is a string"),
    ],
)  # fmt: skip
def test_a_hostile_step_done_result_is_refused_saying_why(
    index: int, result: dict[str, Any], problem: str
) -> None:
    with pytest.raises(BadEvent, match="a 'step_done' event: result") as caught:
        decode(encode(_step_done(index, result)), SPEC_STEPS)  # type: ignore[arg-type]
    assert problem in str(caught.value)


@pytest.mark.parametrize("key", list(SAMPLES))
def test_a_job_done_without_the_result_of_one_of_its_steps_is_refused(key: str) -> None:
    # The driver reports its end once every step ran, each with a result: a report leaving
    # one out (a failed unit test, say) is not the driver's.
    found = {k: v for k, v in SAMPLES.items() if k != key}
    event = {"event": "job_done", "job_id": "j", "results": found}
    with pytest.raises(BadEvent) as caught:
        decode(encode(event), SPEC_STEPS)  # type: ignore[arg-type]
    assert f"results without a result of step {key!r}" in str(caught.value)
    assert caught.value.kind == "job_done"
    assert decode(encode(event)) == event  # without the spec, nothing to hold it to


def test_a_table_diff_s_result_names_its_step_s_keys_as_the_diff_does() -> None:
    # The diff lower-cases its keys and names each once; its labels default to the tables.
    steps = [{**STEPS[7], "keys": ["ID", "id"], "source_label": "", "target_label": ""}]
    found = {**DIFF_JSON, "source": "t_old", "target": "t_a"}
    event = {"event": "job_done", "job_id": "j", "results": {"diff:s.a": found}}
    assert decode(encode(event), typing.cast(list[Step], steps)) == event  # type: ignore[arg-type]


def test_a_huge_value_in_a_row_is_cut_saying_how_much() -> None:
    extra = 77
    big = "v" * (results.MAX_VALUE_CHARS + extra)
    found = {"6": {**QUERY, "rows": [[1, big]]},
             "0": {"step": "sql", "rows": [{"a": {"k": [big]}}]},
             "2": {**SAMPLES["2"], "sample": [{"id": big}]}}  # fmt: skip
    event = decode(encode(_done(found)), SPEC_STEPS)  # type: ignore[arg-type]
    assert event is not None and event["event"] == "job_done"
    read: Any = event["results"]
    cut = [read["6"]["rows"][0][1], read["0"]["rows"][0]["a"]["k"][0], read["2"]["sample"][0]["id"]]
    for value in cut:
        assert value == "v" * results.MAX_VALUE_CHARS + f"... ({extra} more characters)"
    assert read["6"]["rows"][0][0] == 1


def test_without_the_spec_a_result_is_read_as_the_kind_it_claims_only() -> None:
    # Who reads a line without its job (no spec at hand) still gets typed results only.
    assert decode(encode(_done({"9": QUERY}))) == _done({"9": QUERY})  # type: ignore[arg-type]
    with pytest.raises(BadEvent, match="a query step's result with an unknown key 'x'"):
        decode(encode(_done({"9": {**QUERY, "x": 1}})))  # type: ignore[arg-type]


def test_a_huge_diff_is_cut_saying_how_much() -> None:
    extra = 321
    huge = {**SAMPLES["test:t"], "diff": "d" * (results.MAX_TEXT_CHARS + extra)}
    event = decode(encode(_done({"test:t": huge})), SPEC_STEPS)  # type: ignore[arg-type]
    assert event is not None and event["event"] == "job_done"
    read = event["results"]["test:t"]
    assert read["step"] == "unit_test"
    assert read["diff"].endswith(f"... ({extra} more characters)")
    assert len(read["diff"]) < results.MAX_TEXT_CHARS + 40


def test_result_of_gives_a_step_s_result_of_its_kind_or_says_what_it_got() -> None:
    found: dict[str, Any] = {"6": QUERY, "diff:s.a": REFUSED}
    assert result_of(found, "6", "query") == QUERY
    assert result_of(found, "diff:s.a", "table_diff") == REFUSED
    with pytest.raises(ExecutionError, match="reported no result for its step '0'"):
        result_of(found, "0", "query")
    with pytest.raises(ExecutionError, match="a query result for its unit_test step '6'"):
        result_of(found, "6", "unit_test")


def test_a_table_diff_s_result_reads_back_as_the_diff_it_was() -> None:
    event = decode(encode(_done({"diff:s.a": DIFF_JSON})), SPEC_STEPS)  # type: ignore[arg-type]
    assert event is not None and event["event"] == "job_done"
    read = result_of(event["results"], "diff:s.a", "table_diff")
    assert "error" not in read
    assert TableDiffResult.from_json(read) == DIFF
