"""SQLMesh 0.236.4 on the same local Spark as Sluice, for the benches that compare them.

Imported by a bench (Sluice's virtualenv):

- ``side_venv(folder, requested)``: a throwaway virtualenv with SQLMesh, our PySpark,
  DuckDB and datacompy (``requested`` when it has them; else built with uv in ``folder``);
- ``prepare(source, dest, venv)``: a copy of a Sluice project for SQLMesh: ``config.yaml``
  without Sluice's section, with a gateway of type ``spark`` whose session settings are the
  ones Sluice gives its own jobs (``sluice.core.spark.session.spark_conf``: ``local[*]``,
  Hive support on an embedded Derby metastore, the warehouse folder, 4 shuffle partitions,
  ...) and the project's ``concurrent_tasks``; state in a DuckDB file beside it;
- ``plan(venv, project, env, log)``: the seconds of ``sqlmesh plan ENV --auto-apply
  --no-prompts --skip-tests`` run as a whole process, as a user runs it (PySpark runs in
  that process: SQLMesh's Spark adapter is in-process). Audits stay on;
- ``environments(venv, project)`` and ``query(venv, project, sql)``: what SQLMesh did (its
  environments' model versions from its state; rows through its Spark settings), so a
  silent no-op cannot pass as fast; ``data_files(project)``: its warehouse's data files.

Run by the side virtualenv's python (``python sqlmesh_spark.py state|query PROJECT ...``)
for the last two.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SQLMESH = "sqlmesh==0.236.4"
SQLGLOT = "sqlglot==30.8.0"  # pure Python, the version SQLMesh 0.236.4 resolves to
STATE = "state.duckdb"
HERE = Path(__file__).resolve()


def side_venv(folder: Path, requested: Path | None = None) -> Path:
    """A virtualenv with SQLMesh on our PySpark: ``requested`` if given, else built in
    ``folder`` with uv (minutes; reused when ``folder`` already has it)."""
    if requested is not None:
        if not (requested / "bin" / "sqlmesh").exists():
            raise SystemExit(f"{requested}: no bin/sqlmesh (not a SQLMesh virtualenv)")
        return requested.resolve()
    if (folder / "bin" / "sqlmesh").exists():
        return folder.resolve()
    import pyspark

    uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    env = {**os.environ, "VIRTUAL_ENV": str(folder)}
    env.setdefault("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt")
    print(f"creating the SQLMesh virtualenv in {folder} (a few minutes) ...", flush=True)
    subprocess.run([uv, "venv", "-q", "-p", "3.11", str(folder)], check=True, env=env)
    packages = [SQLMESH, SQLGLOT, f"pyspark=={pyspark.__version__}", "duckdb", "datacompy"]
    subprocess.run([uv, "pip", "install", "-q", *packages], check=True, env=env)
    return folder.resolve()


def prepare(source: Path, dest: Path, venv: Path) -> Path:
    """Copy the Sluice project ``source`` to ``dest`` with a SQLMesh config on Spark."""
    import yaml

    from sluice.core.config import SparkSettings
    from sluice.core.spark.session import SparkPaths, spark_conf

    shutil.copytree(source, dest, ignore=shutil.ignore_patterns(".sluice", "tests"))
    config = yaml.safe_load((dest / "config.yaml").read_text(encoding="utf-8")) or {}
    sluice = config.pop("sluice", None) or {}
    settings = SparkSettings(**sluice.get("spark", {}))
    conf = spark_conf(settings, SparkPaths(root=dest / "spark", logs=dest / "logs"))
    python = str(venv / "bin" / "python")
    conf.update({"spark.master": settings.master, "spark.app.name": "sqlmesh"})
    conf.update({"spark.pyspark.python": python, "spark.pyspark.driver.python": python})
    config["gateways"] = {
        "spark": {
            "connection": {
                "type": "spark",
                "config": conf,
                "concurrent_tasks": settings.concurrent_tasks,
            },
            "state_connection": {"type": "duckdb", "database": str(dest / STATE)},
        }
    }
    config["default_gateway"] = "spark"
    (dest / "config.yaml").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return dest


def _env(venv: Path) -> dict[str, str]:
    return {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": str(venv / "bin" / "python"),
        "PATH": f"{venv / 'bin'}:{os.environ.get('PATH', '')}",
    }


def plan(venv: Path, project: Path, env: str, log: Path, *extra: str) -> float:
    """Seconds of ``sqlmesh plan ENV --auto-apply`` as a process of its own."""
    command = [str(venv / "bin" / "sqlmesh"), "-p", str(project), "plan"]
    command += [env, "--auto-apply", "--no-prompts", "--skip-tests", *extra]
    with open(log, "a", encoding="utf-8") as out:
        out.write(f"\n$ {' '.join(command)}\n")
        out.flush()
        began = time.perf_counter()
        code = subprocess.run(
            command, check=False, cwd=project, env=_env(venv), stdout=out, stderr=subprocess.STDOUT
        ).returncode
        seconds = time.perf_counter() - began
    if code != 0:
        raise SystemExit(f"sqlmesh plan {env} failed ({code}): see {log}")
    return seconds


def _side(venv: Path, *args: str) -> Any:
    proc = subprocess.run(
        [str(venv / "bin" / "python"), str(HERE), *args],
        env=_env(venv),
        capture_output=True,
        text=True,
        check=False,
    )
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"sqlmesh_spark.py {args[0]} failed:\n{proc.stderr[-2000:]}")
    return json.loads(lines[-1])


def environments(venv: Path, project: Path) -> dict[str, dict[str, str]]:
    """Each SQLMesh environment's models and their versions (fingerprints), from its state."""
    return dict(_side(venv, "state", str(project)))


def query(venv: Path, project: Path, sql: str) -> list[list[Any]]:
    """The rows of ``sql`` on SQLMesh's Spark (a fresh session with its settings)."""
    return list(_side(venv, "query", str(project), sql))


def data_files(project: Path) -> int:
    """How many data files SQLMesh's warehouse holds (a virtual update adds none)."""
    warehouse = project / "spark" / "warehouse"
    return sum(1 for p in warehouse.rglob("*") if p.is_file() and not p.name.startswith((".", "_")))


def _state(project: Path) -> dict[str, dict[str, str]]:
    import duckdb

    con = duckdb.connect(str(project / STATE), read_only=True)
    try:
        rows = con.execute("SELECT name, snapshots FROM sqlmesh._environments").fetchall()
    finally:
        con.close()
    result = {}
    for name, snapshots in rows:
        result[name] = {
            s["name"].replace("`", "").replace('"', ""): s["fingerprint"]["data_hash"]
            + "/"
            + s["fingerprint"]["metadata_hash"]
            for s in json.loads(snapshots)
        }
    return result


def _query(project: Path, sql: str) -> list[list[Any]]:
    from pyspark.sql import SparkSession

    config = json.loads((project / "config.yaml").read_text(encoding="utf-8"))
    builder = SparkSession.builder
    for key, value in config["gateways"]["spark"]["connection"]["config"].items():
        builder = builder.config(key, value)
    spark = builder.enableHiveSupport().getOrCreate()
    try:
        return [list(row) for row in spark.sql(sql).collect()]
    finally:
        spark.stop()


if __name__ == "__main__":
    what, folder = sys.argv[1], Path(sys.argv[2])
    if what == "state":
        print(json.dumps(_state(folder)))
    elif what == "query":
        print(json.dumps(_query(folder, sys.argv[3]), default=str))
    else:
        raise SystemExit(f"unknown command {what!r}: state or query")
