"""The views step re-points a view that exists in place (``ALTER VIEW ... AS``, its
``TBLPROPERTIES`` by ``SET`` / ``UNSET``) and creates those that do not, on real Spark: the
step run in this process's session (as the spark-submit driver runs it) and in a job on the
warm Spark Connect server. ``CREATE OR REPLACE VIEW`` of an existing view is a drop and a
create (a reader between them finds no view: docs/reliability.md, the promotion window);
a view kept in place keeps its creation time, which is what is checked here, beside a view
created by the same step, whose creation time moved on."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from sluice.core.spark.connect import ConnectRunner, ConnectServer
from sluice.core.spark.session import SparkPaths
from sluice.core.spark.spec import ViewsStep
from sluice.core.spark.steps.context import StepContext
from sluice.core.spark.steps.environment import run_views

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

# The Hive metastore's own keys, beside the view's.
OWN = {"transient_lastDdlTime"}


def _step(schema: str, views: list[tuple[str, str, list[list[str]]]], drop: list[str]) -> Any:
    step: ViewsStep = {
        "type": "views",
        "label": "views",
        "environment": "prod",
        "schemas": [schema],
        "views": [{"view": f"{schema}.{v}", "sql": sql, "properties": p} for v, sql, p in views],
        "drop": [f"{schema}.{v}" for v in drop],
    }
    return step


def _first(schema: str, source: str) -> Any:
    """Prod at its first version: three views, made by the step (none exists yet)."""
    return _step(
        schema,
        [
            ("a", f"SELECT ver FROM {source}.t1", [["k1", "a"], ["k2", "b"]]),
            ("b", f"SELECT ver FROM {source}.t1", []),
            # A value that does not read as plain keys in SHOW TABLE EXTENDED's text.
            ("c", f"SELECT ver FROM {source}.t1", [["note", "p=q, r"]]),
        ],
        [],
    )


def _second(schema: str, source: str) -> Any:
    """The promotion: a and c re-pointed (a's properties changed, c's removed), b dropped,
    d new."""
    return _step(
        schema,
        [
            ("a", f"SELECT ver, extra FROM {source}.t2", [["k2", "c"], ["k3", "d"]]),
            ("c", f"SELECT ver FROM {source}.t2", []),
            ("d", f"SELECT ver FROM {source}.t2", []),
        ],
        ["b"],
    )


def _tables(source: str) -> list[str]:
    return [
        f"CREATE DATABASE IF NOT EXISTS {source}",
        f"CREATE TABLE IF NOT EXISTS {source}.t1 USING parquet AS SELECT 1 AS ver",
        f"CREATE TABLE IF NOT EXISTS {source}.t2 USING parquet AS SELECT 2 AS ver, 'x' AS extra",
    ]


def _reads(schema: str) -> list[str]:
    """What is checked after each step: the views' creation times, properties, rows."""
    return [
        f"SHOW VIEWS IN {schema}",
        *(f"DESCRIBE TABLE EXTENDED {schema}.{v}" for v in "acd"),
        *(f"SHOW TBLPROPERTIES {schema}.{v}" for v in "ac"),
        f"SELECT * FROM {schema}.a",
        f"SELECT c.ver AS c_ver, d.ver AS d_ver FROM {schema}.c, {schema}.d",
    ]


def _created(rows: list[dict[str, Any]]) -> datetime:
    [created] = [r["data_type"] for r in rows if r["col_name"] == "Created Time"]
    return datetime.strptime(str(created), "%a %b %d %H:%M:%S %Z %Y")


def _props(rows: list[dict[str, Any]]) -> dict[str, str]:
    return {str(r["key"]): str(r["value"]) for r in rows if r["key"] not in OWN}


def _check(before: dict[str, list[dict[str, Any]]], after: dict[str, list[dict[str, Any]]]) -> None:
    """``before``: the reads after the first step, ``after``: after the second (each
    statement of :func:`_reads` by its index, as text)."""
    assert sorted(r["viewName"] for r in after["0"]) == ["a", "c", "d"]
    # a and c were kept in place; d was created after them (the clock moved on, so a
    # drop and a create of a or c would show).
    assert _created(after["1"]) == _created(before["1"])
    assert _created(after["2"]) == _created(before["2"])
    assert _created(after["3"]) > _created(before["1"])
    assert _props(after["4"]) == {"k2": "c", "k3": "d"}
    assert _props(after["5"]) == {}
    assert before["6"] == [{"ver": 1}] and after["6"] == [{"ver": 2, "extra": "x"}]
    assert after["7"] == [{"c_ver": 2, "d_ver": 2}]


def test_the_step_alters_existing_views_in_this_session(local_spark: SparkSession) -> None:
    def reads() -> dict[str, list[dict[str, Any]]]:
        return {
            str(i): [r.asDict() for r in local_spark.sql(s).collect()]
            for i, s in enumerate(_reads("inplace"))
        }

    for statement in _tables("inplace_src"):
        local_spark.sql(statement)
    events: list[Any] = []
    ctx = StepContext(job={}, emit=events.append)  # type: ignore[typeddict-item]
    run_views(local_spark, _first("inplace", "inplace_src"), ctx)
    # d exists before the second step only so that the first reads work; dropped again.
    local_spark.sql("CREATE VIEW inplace.d AS SELECT 0 AS ver")
    before = reads()
    assert _props(before["4"]) == {"k1": "a", "k2": "b"}
    assert _props(before["5"]) == {"note": "p=q, r"}
    local_spark.sql("DROP VIEW inplace.d")
    time.sleep(1.1)  # creation times are kept to the second
    run_views(local_spark, _second("inplace", "inplace_src"), ctx)
    after = reads()
    _check(before, after)
    assert {"event": "log", "message": "views of prod: 2 re-pointed in place, 1 created"} in events
    # Run again (a job killed in the step is run again): the same views.
    run_views(local_spark, _second("inplace", "inplace_src"), ctx)
    again = reads()
    assert [again[k] for k in "067"] == [after[k] for k in "067"]
    assert [_created(again[k]) for k in "123"] == [_created(after[k]) for k in "123"]
    assert [_props(again[k]) for k in "45"] == [_props(after[k]) for k in "45"]
    assert events[-1]["message"] == "views of prod: 3 re-pointed in place, 0 created"


def test_a_connect_job_alters_existing_views(connect_server: ConnectServer, tmp_path: Path) -> None:
    paths = SparkPaths(root=connect_server.paths.root, logs=tmp_path / "logs")
    runner = ConnectRunner(connect_server.settings, paths, server=connect_server)

    def job(job_id: str, *steps: Any) -> Any:
        return runner.run({"job_id": job_id, "kind": "test", "steps": list(steps)})

    def sql(label: str, *statements: str) -> list[Any]:
        return [{"type": "sql", "label": f"{label} {i}", "statements": [s]}
                for i, s in enumerate(statements)]  # fmt: skip

    first = job(
        "inplace-1",
        *sql("tables", *_tables("inplace_csrc")),
        _first("inplace_c", "inplace_csrc"),
        *sql("d", "CREATE VIEW inplace_c.d AS SELECT 0 AS ver"),
        *sql("reads", *_reads("inplace_c")),
        *sql("undo", "DROP VIEW inplace_c.d"),
    )
    before = {str(i): first.results[str(i + 5)]["rows"] for i in range(8)}
    assert _props(before["4"]) == {"k1": "a", "k2": "b"}
    time.sleep(1.1)  # creation times are kept to the second
    second = job(
        "inplace-2", _second("inplace_c", "inplace_csrc"), *sql("reads", *_reads("inplace_c"))
    )
    after = {str(i): second.results[str(i + 1)]["rows"] for i in range(8)}
    _check(before, after)
    logs = [e["message"] for e in second.events if e["event"] == "log"]
    assert "views of prod: 2 re-pointed in place, 1 created" in logs
