"""The Spark driver program: ``spark-submit driver.py JOB.json`` runs one job spec.

A job spec is a JSON object ``{"job_id", "kind", "steps": [...]}``; each step is
``{"type", "label", ...}`` and is run by the handler registered for its type. The driver
runs SQL from pull requests, so it holds no credential: it gets no state URL and opens no
state store, and its environment is an allow-list (:mod:`sluice.core.spark.submit`). It
reports through :mod:`sluice.core.spark.events` lines on stdout, progress and what it
computed alike: a batch's interval, an audit's, a unit test's or a table diff's result is
a ``write`` event, which the runner checks against the spec and applies to state
(:mod:`sluice.core.spark.writes`); the environment record is committed by the service
once the job has succeeded. It exits non-zero when a step fails. ``run_job`` is the same
code for ``--in-process`` runs; ``--connect`` runs it as a Spark Connect client
(:mod:`sluice.core.spark.connect`).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sluice.core.spark import events
from sluice.core.spark.spec import JobSpec, Step
from sluice.core.spark.steps.context import Handler, StepContext, spark_error

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Emit = Callable[[dict[str, Any]], None]


class StepFailed(Exception):
    """A step failed; the event naming it has been emitted."""

    def __init__(self, step: Step, message: str) -> None:
        super().__init__(f"{step.get('label', step.get('type'))}: {message}")
        self.step = step
        self.message = message


def handlers() -> dict[str, Handler]:
    """Every step type the driver knows (imported lazily: they need pyspark)."""
    from sluice.core.spark.steps import registry

    return registry.HANDLERS


def run_job(spec: JobSpec, spark: SparkSession, emit: Emit) -> dict[str, Any]:
    """Run every step of ``spec`` in order; stop at the first failure.

    Raises:
        StepFailed: naming the step, after emitting a ``step_failed`` event.
    """
    ctx = StepContext(job=spec, emit=emit)
    table = handlers()
    for index, step in enumerate(spec["steps"]):
        label = step.get("label", step["type"])
        emit({"event": "step_start", "index": index, "type": step["type"], "label": label})
        began = time.monotonic()
        try:
            handler = table.get(step["type"])
            if handler is None:
                raise ValueError(f"the driver has no step of type {step['type']!r}")
            result = handler(spark, step, ctx)
        except Exception as exc:
            message = spark_error(exc)
            emit(
                {
                    "event": "step_failed",
                    "index": index,
                    "type": step["type"],
                    "label": label,
                    "error": message,
                    "error_class": exc.__class__.__name__,
                }
            )
            raise StepFailed(step, message) from exc
        if result is not None:
            ctx.results[step.get("id", str(index))] = result
            if step["type"] == "unit_test":
                ctx.write(
                    "save_result",
                    kind="unit_test",
                    name=str(result.get("name")),
                    passed=bool(result.get("passed")),
                    payload=result,
                )
        emit(
            {
                "event": "step_done",
                "index": index,
                "label": label,
                "seconds": round(time.monotonic() - began, 3),
                "result": result,
            }
        )
    return ctx.results


def _print(event: dict[str, Any]) -> None:
    print(events.encode(event), flush=True)


def _connect_session(conf_path: str) -> SparkSession:
    """A new Spark Connect session on ``$SPARK_REMOTE`` (one per job: its temporary views
    and settings end with it), with the job's SQL settings from ``conf_path``."""
    from pyspark.sql import SparkSession

    with open(conf_path, encoding="utf-8") as handle:
        conf: dict[str, str] = json.load(handle)
    spark = SparkSession.builder.remote(os.environ["SPARK_REMOTE"]).create()
    for key, value in conf.items():
        # The server's static settings (warehouse, catalog) were set when it started.
        if spark.conf.isModifiable(key):
            spark.conf.set(key, value)
    return spark


def main(argv: list[str]) -> int:
    """Entry point: ``driver.py JOB.json`` under spark-submit, or ``driver.py --connect
    JOB.json SESSION_CONF.json`` as a Spark Connect client of ``$SPARK_REMOTE``."""
    connect = len(argv) > 1 and argv[1] == "--connect"
    args = argv[2:] if connect else argv[1:]
    try:
        with open(args[0], encoding="utf-8") as handle:
            spec = json.load(handle)
        spec["steps"]
    except (IndexError, OSError, ValueError, KeyError) as exc:
        _print({"event": "job_failed", "error": f"cannot read the job spec: {exc}"})
        return events.BAD_SPEC
    from pyspark.sql import SparkSession

    _print({"event": "job_start", "job_id": spec.get("job_id"), "steps": len(spec["steps"])})
    ready: dict[str, Any] = {"event": "session_ready"}
    if connect:
        try:
            spark = _connect_session(args[1])
        except Exception as exc:
            _print(
                {
                    "event": "job_failed",
                    "error": f"cannot open a Spark Connect session: {spark_error(exc)}",
                }
            )
            return 1
        # The runner interrupts this session's work if this process dies.
        ready["session_id"] = getattr(spark, "session_id", None)
    else:
        spark = SparkSession.builder.enableHiveSupport().getOrCreate()
        # After start-up (whose lines, the master's URL among them, stay in the log); a
        # Connect client has no SparkContext: the server's log level is its own.
        spark.sparkContext.setLogLevel("WARN")
    # Connect to the metastore now (the first catalog call boots it), so step timings
    # measure the steps, and a metastore problem is reported as such.
    spark.sql("SHOW DATABASES").collect()
    _print(ready)
    try:
        results = run_job(spec, spark, _print)
    except StepFailed:
        return events.STEP_FAILED
    except Exception as exc:  # a bug or an environment problem outside any step
        _print({"event": "job_failed", "error": spark_error(exc)})
        traceback.print_exc()
        return 1
    finally:
        spark.stop()
    _print({"event": "job_done", "job_id": spec.get("job_id"), "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
