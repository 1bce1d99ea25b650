"""SubmitRunner and InProcessRunner on real Spark: local[2], a standalone cluster, failures.

No doubles: every job is a real spark-submit of the real driver (or the driver code on a
real in-process session), so these tests take about ten seconds each.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from sluice.core import sandbox
from sluice.core.config import SparkSettings
from sluice.core.errors import ExecutionError
from sluice.core.spark import jvm
from sluice.core.spark.failures import error_lines
from sluice.core.spark.session import (
    SparkPaths,
    local_session,
    spark_conf,
    uses_embedded_metastore,
)
from sluice.core.spark.submit import InProcessRunner, SubmitRunner, child_environment

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def _spec(job_id: str, database: str) -> dict[str, Any]:
    return {
        "job_id": job_id,
        "kind": "test",
        "steps": [
            {
                "type": "sql",
                "label": f"create {database}.numbers",
                "statements": [
                    f"CREATE DATABASE IF NOT EXISTS {database}",
                    f"DROP TABLE IF EXISTS {database}.numbers",
                    f"CREATE TABLE {database}.numbers USING parquet AS "
                    "SELECT id, id * 2 AS twice FROM range(3)",
                ],
            },
            {
                "type": "sql",
                "label": f"count {database}.numbers",
                "statements": [f"SELECT count(*) AS n, sum(twice) AS s FROM {database}.numbers"],
            },
        ],
    }


def _paths(spark_dirs: Path, tmp_path: Path) -> SparkPaths:
    return SparkPaths(root=spark_dirs, logs=tmp_path / "logs")


def _check_ok(result: Any, seen: list[dict[str, Any]]) -> None:
    assert result.results["1"] == {"step": "sql", "rows": [{"n": 3, "s": 6}]}
    # The in-process runner has its session before the job starts: no session_ready.
    kinds = [e["event"] for e in seen if e["event"] != "session_ready"]
    assert kinds == [
        "job_start",
        "step_start",
        "step_done",
        "step_start",
        "step_done",
        "job_done",
    ]
    assert [e["label"] for e in seen if e["event"] == "step_done"] == [
        e["label"] for e in seen if e["event"] == "step_start"
    ]
    assert result.events == seen


def test_submit_local_runs_steps_streams_events_and_writes_log(
    spark_dirs: Path, tmp_path: Path
) -> None:
    seen: list[dict[str, Any]] = []
    paths = _paths(spark_dirs, tmp_path)
    runner = SubmitRunner(SparkSettings(master="local[2]"), paths, on_event=seen.append)
    result = runner.run(_spec("local-ok", "t_submit_local"))
    _check_ok(result, seen)
    assert [e["label"] for e in seen if e["event"] == "step_start"] == [
        "create t_submit_local.numbers",
        "count t_submit_local.numbers",
    ]
    assert result.job_id == "local-ok"
    assert result.log_path == paths.logs / "local-ok.log"
    log = result.log_path.read_text()
    assert "@@sluice " in log  # stdout
    assert "SparkContext" in log  # the JVM's stderr
    assert (paths.logs / "local-ok.json").exists()  # the spec, beside its log
    # The table went to the shared warehouse, through the embedded metastore.
    assert any((spark_dirs / "warehouse").glob("t_submit_local.db/numbers/*.parquet"))
    assert (spark_dirs / "metastore_db").is_dir()


def test_the_first_driver_writes_a_class_archive_the_next_one_maps(
    spark_dirs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "jvm"
    monkeypatch.setenv(jvm.CACHE_ENV, str(cache))
    runner = SubmitRunner(SparkSettings(master="local[1]"), _paths(spark_dirs, tmp_path))
    # A pull request's job never writes the archive in a sandbox (its Python could
    # replace the dump that later jobs map): its driver gets no flag that writes one, nor
    # the archive's folder (no JVM needed to see it); a job of prod (approved content) does.
    pr_job = {**_spec("cds-pr", "t_cds"), "environment": "pr_1"}
    with runner._class_archive(child_environment(tmp_path / "home"), pr_job) as use:
        if sandbox.isolation() != "none":
            assert use.folder is None
            assert not [flag for flag in use.flags if "ArchiveClassesAtExit" in flag]
    assert not cache.exists() or not any(cache.iterdir())
    runner.run({**_spec("cds-first", "t_cds"), "environment": "prod"})
    (archive,) = cache.iterdir()  # the archive alone: no claim, no partial dump left
    assert archive.suffix == ".jsa" and archive.stat().st_size > 10_000_000
    # The operator's flags reach the driver; the JVM's own record of where each class came
    # from shows the archive mapped (a class from it is "shared objects file (top)"). The
    # record goes where the sandboxed driver may write: the Spark root.
    loads = spark_dirs / "classes.txt"
    monkeypatch.setenv(jvm.OPTIONS_ENV, f"-Xlog:class+load=info:file={loads}")
    result = runner.run({**_spec("cds-second", "t_cds"), "environment": "pr_1"})
    assert result.results["1"] == {"step": "sql", "rows": [{"n": 3, "s": 6}]}
    spark_classes = [line for line in loads.read_text().splitlines() if "org.apache.spark." in line]
    mapped = [line for line in spark_classes if "shared objects file (top)" in line]
    # (not all: generated code, lambdas and classes of steps the first job did not run)
    assert len(mapped) > max(1000, len(spark_classes) // 2)


def test_submit_to_standalone_cluster(spark_cluster: str, spark_dirs: Path, tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    runner = SubmitRunner(
        SparkSettings(master=spark_cluster), _paths(spark_dirs, tmp_path), on_event=seen.append
    )
    result = runner.run(_spec("cluster-ok", "t_submit_cluster"))
    _check_ok(result, seen)
    assert result.log_path is not None
    # The driver talked to the standalone master, not to a local master.
    assert spark_cluster in result.log_path.read_text()


def test_failing_step_names_the_step_and_the_spark_error(spark_dirs: Path, tmp_path: Path) -> None:
    spec = {
        "job_id": "local-fail",
        "kind": "test",
        "steps": [
            {"type": "sql", "label": "warm up", "statements": ["SELECT 1"]},
            {
                "type": "sql",
                "label": "build jaffle.orders",
                "statements": ["SELECT * FROM t_submit_nowhere.missing_table"],
            },
        ],
    }
    runner = SubmitRunner(SparkSettings(master="local[2]"), _paths(spark_dirs, tmp_path))
    with pytest.raises(ExecutionError) as caught:
        runner.run(spec)
    text = str(caught.value)
    first = text.splitlines()[0]
    assert first.startswith("Spark job failed at step 'build jaffle.orders': AnalysisException")
    assert "TABLE_OR_VIEW_NOT_FOUND" in first
    assert "at org.apache" not in text
    assert "exit code 3" in text  # events.STEP_FAILED
    assert str(tmp_path / "logs" / "local-fail.log") in text
    assert len(text.splitlines()) <= 20


def test_missing_java_fails_fast(
    spark_dirs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no java on it
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-such-jdk"))
    runner = SubmitRunner(SparkSettings(master="local[2]"), _paths(spark_dirs, tmp_path))
    with pytest.raises(ExecutionError, match="Java not found") as caught:
        runner.run(_spec("no-java", "t_never"))
    assert "JAVA_HOME" in str(caught.value)
    monkeypatch.delenv("JAVA_HOME")
    with pytest.raises(ExecutionError, match="Java not found") as caught:
        runner.run(_spec("no-java", "t_never"))
    assert "openjdk-17-jre-headless" in str(caught.value)


def test_unreachable_master_fails_fast(spark_dirs: Path, tmp_path: Path) -> None:
    runner = SubmitRunner(
        SparkSettings(master="spark://127.0.0.1:1,127.0.0.1:2"), _paths(spark_dirs, tmp_path)
    )
    began = time.monotonic()
    with pytest.raises(ExecutionError) as caught:
        runner.run(_spec("no-master", "t_never"))
    # Spark itself would retry for a minute before giving up.
    assert time.monotonic() - began < 10
    text = str(caught.value)
    assert "spark://127.0.0.1:1,127.0.0.1:2" in text
    assert "sluice.spark.master" in text
    assert "config.yaml" in text


_HOLDER = """
import sys, time
from pathlib import Path
from sluice.core.spark.session import SparkPaths, acquire_metastore_lock
paths = SparkPaths(root=Path(sys.argv[1]), logs=Path(sys.argv[1]) / "logs")
lock = acquire_metastore_lock(paths, "holder-job", timeout=5)
print("locked", flush=True)
time.sleep(600)
"""


def test_lock_busy_names_the_holder_and_dead_holders_do_not_block(
    spark_dirs: Path, tmp_path: Path
) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(spark_dirs)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        seen: list[dict[str, Any]] = []
        runner = SubmitRunner(
            SparkSettings(master="local[2]"),
            _paths(spark_dirs, tmp_path),
            on_event=seen.append,
            lock_timeout=1,
        )
        with pytest.raises(ExecutionError) as caught:
            runner.run(_spec("lock-wait", "t_never"))
        text = str(caught.value)
        assert "the embedded Spark metastore is busy" in text
        assert f"job holder-job (pid {holder.pid})" in text
        assert any("waiting" in e.get("message", "") for e in seen)
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    # The kernel dropped the dead holder's flock; the file still names it, harmlessly.
    assert "holder-job" in _paths(spark_dirs, tmp_path).lock_file.read_text()
    quick = {
        "job_id": "after-kill",
        "steps": [{"type": "sql", "label": "one", "statements": ["SELECT 1 AS one"]}],
    }
    result = runner.run(quick)
    assert result.results == {"0": {"step": "sql", "rows": [{"one": 1}]}}


def test_in_process_runner_same_contract(
    local_spark: SparkSession, inprocess_paths: SparkPaths
) -> None:
    seen: list[dict[str, Any]] = []
    runner = InProcessRunner(
        SparkSettings(master="local[2]"), inprocess_paths, on_event=seen.append
    )
    result = runner.run(_spec("inproc-ok", "t_inproc"))
    _check_ok(result, seen)
    assert result.log_path is None
    assert local_spark.sql("SELECT count(*) AS n FROM t_inproc.numbers").collect()[0]["n"] == 3
    # The same message as the spark-submit path when a step fails.
    failing = {
        "job_id": "inproc-fail",
        "steps": [
            {
                "type": "sql",
                "label": "build jaffle.orders",
                "statements": ["SELECT * FROM nope_db.nope"],
            }
        ],
    }
    with pytest.raises(ExecutionError) as caught:
        runner.run(failing)
    first = str(caught.value).splitlines()[0]
    assert first.startswith("Spark job failed at step 'build jaffle.orders': AnalysisException")
    assert "TABLE_OR_VIEW_NOT_FOUND" in first
    assert "at org.apache" not in str(caught.value)


def test_spark_conf_user_settings_win_and_own_metastore_skips_derby(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SLUICE_DRIVER_JAVA_OPTIONS", raising=False)
    paths = SparkPaths(root=tmp_path / "spark", logs=tmp_path / "logs")
    conf = spark_conf(
        SparkSettings(
            conf={"spark.sql.shuffle.partitions": "64", "spark.driver.extraJavaOptions": "-Xss4m"}
        ),
        paths,
    )
    assert conf["spark.sql.shuffle.partitions"] == "64"
    assert conf["spark.sql.catalogImplementation"] == "hive"
    assert conf["spark.sql.warehouse.dir"] == str((tmp_path / "spark" / "warehouse").resolve())
    assert (
        f"databaseName={(tmp_path / 'spark' / 'metastore_db').resolve()};"
        in conf["spark.hadoop.javax.jdo.option.ConnectionURL"]
    )
    assert conf["spark.driver.extraJavaOptions"].split() == [
        f"-Dderby.system.home={(tmp_path / 'spark').resolve()}",
        "-Xss4m",
    ]
    assert conf["spark.pyspark.python"] == sys.executable
    shared = SparkSettings(conf={"spark.hadoop.hive.metastore.uris": "thrift://meta:9083"})
    assert not uses_embedded_metastore(shared)
    assert uses_embedded_metastore(SparkSettings())
    shared_conf = spark_conf(shared, paths)
    assert "spark.hadoop.javax.jdo.option.ConnectionURL" not in shared_conf
    assert "spark.driver.extraJavaOptions" not in shared_conf


def test_error_lines_skip_jvm_noise() -> None:
    output = [
        "26/11/21 13:28:24 INFO SparkContext: Running Spark version 4.3.0",
        "26/11/21 13:28:24 WARN NativeCodeLoader: Unable to load native-hadoop library",
        "Traceback (most recent call last):",
        '  File "driver.py", line 3, in <module>',
        "ModuleNotFoundError: No module named 'sluice'",
        "\tat org.apache.spark.deploy.SparkSubmit.main(SparkSubmit.scala:1)",
        '{"ts": "x", "level": "ERROR", "logger": "L", "msg": "boom\\nmore"}',
        '{"ts": "x", "level": "WARN", "logger": "L", "msg": "meh"}',
    ]
    assert error_lines(output) == [
        "Traceback (most recent call last):",
        "ModuleNotFoundError: No module named 'sluice'",
        "ERROR L: boom",
    ]


def test_failure_before_any_event_shows_sparks_error_lines(
    spark_dirs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # spark-submit refuses a YARN master without a Hadoop config before the driver starts.
    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    monkeypatch.delenv("YARN_CONF_DIR", raising=False)
    runner = SubmitRunner(SparkSettings(master="yarn"), _paths(spark_dirs, tmp_path))
    with pytest.raises(ExecutionError) as caught:
        runner.run(_spec("no-yarn", "t_never"))
    text = str(caught.value)
    assert text.startswith("Spark job no-yarn failed before reporting an error (exit code 1)")
    assert "HADOOP_CONF_DIR" in text
    assert str(tmp_path / "logs" / "no-yarn.log") in text


def test_in_process_session_keeps_its_metastore_from_submit_jobs(
    local_spark: SparkSession, inprocess_paths: SparkPaths, tmp_path: Path
) -> None:
    # One JVM per test process: another root still gets the active session.
    other = SparkPaths(root=tmp_path / "other", logs=tmp_path / "logs")
    assert local_session(SparkSettings(), other) is local_spark
    # The in-process JVM holds its Derby until this process exits, so a spark-submit job
    # on the same metastore is refused at once instead of waiting for ourselves.
    runner = SubmitRunner(SparkSettings(master="local[2]"), inprocess_paths, lock_timeout=600)
    began = time.monotonic()
    with pytest.raises(ExecutionError, match="in-process Spark session") as caught:
        runner.run(_spec("same-root", "t_never"))
    assert time.monotonic() - began < 5
    assert f"pid {os.getpid()}" in str(caught.value)


def test_in_process_job_past_its_limit_is_cancelled_and_says_so(
    local_spark: SparkSession, inprocess_paths: SparkPaths
) -> None:
    runner = InProcessRunner(SparkSettings(master="local[2]"), inprocess_paths, timeout=2)
    spec = {"job_id": "inproc-too-long", "steps": [{"type": "sql", "label": "sleep",
            "statements": ["SELECT java_method('java.lang.Thread', 'sleep', 20000L)"]}]}  # fmt: skip
    began = time.monotonic()
    with pytest.raises(ExecutionError) as caught:
        runner.run(spec)
    assert time.monotonic() - began < 15  # the Spark job was cancelled, not waited for
    assert caught.value.message == (
        "the Spark job ran longer than its limit of 2 s (set by the service: "
        "SLUICE_JOB_TIMEOUT_SECONDS)"
    )
    # The session still works for the next job.
    quick = {"job_id": "inproc-after", "steps": [{"type": "sql", "label": "one",
             "statements": ["SELECT 1 AS one"]}]}  # fmt: skip
    assert InProcessRunner(SparkSettings(), inprocess_paths).run(quick).results == {
        "0": {"step": "sql", "rows": [{"one": 1}]}
    }
