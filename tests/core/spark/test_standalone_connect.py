"""The service's default Spark (``connect``: its own Spark Connect server, each job a
client child) on a real standalone master and worker: the server is started with the
master's URL and its jobs' work runs on the worker (README, "The service's Spark on a
cluster"). ``test_submit.py`` runs ``spark-submit`` on the same cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sluice.core.config import SparkSettings
from sluice.core.spark.connect import ConnectRunner, ConnectServer
from sluice.core.spark.session import SparkPaths

pytestmark = pytest.mark.spark


def test_the_service_s_own_connect_server_runs_jobs_on_a_standalone_master(
    spark_cluster: str, tmp_path: Path
) -> None:
    root = tmp_path / "spark"
    paths = SparkPaths(root=root, logs=root / "logs")
    settings = SparkSettings(master=spark_cluster, mode="connect")
    server = ConnectServer(settings, paths)
    seen: list[dict[str, Any]] = []
    try:
        runner = ConnectRunner(settings, paths, server=server, on_event=seen.append)
        spec = {
            "job_id": "standalone-connect",
            "kind": "test",
            "steps": [
                {
                    "type": "sql",
                    "label": "create t_standalone_connect.numbers",
                    "statements": [
                        "CREATE DATABASE IF NOT EXISTS t_standalone_connect",
                        "CREATE TABLE t_standalone_connect.numbers USING parquet AS "
                        "SELECT id, id * 2 AS twice FROM range(3)",
                    ],
                },
                {
                    "type": "sql",
                    "label": "count",
                    "statements": [
                        "SELECT count(*) AS n, sum(twice) AS s FROM t_standalone_connect.numbers"
                    ],
                },
                {"type": "sql", "label": "master", "statements": ["SET spark.master"]},
            ],
        }
        result = runner.run(spec)  # type: ignore[arg-type]
        assert result.results["1"] == {"step": "sql", "rows": [{"n": 3, "s": 6}]}
        assert [e["event"] for e in seen][-1] == "job_done"
        # The server is an application of the standalone master (so the table's files were
        # written by tasks on its worker: a standalone application has no executor of its
        # own), not of a local one.
        assert result.results["2"] == {
            "step": "sql",
            "rows": [{"key": "spark.master", "value": spark_cluster}],
        }
    finally:
        server.stop()
