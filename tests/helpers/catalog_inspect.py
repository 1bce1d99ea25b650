"""The Spark catalog as the crash bench checks it: every schema's tables and view texts,
and the answers of some queries, written as JSON.

Run as ``python -m tests.helpers.catalog_inspect REQUEST OUT``: a Spark Connect client of
the server ``SPARK_REMOTE`` names (``tests/helpers/service_child.py`` runs it on the
service's own warm server, with its token), or under spark-submit through
``bench/chaos.py --inspect`` (a session of its own on the embedded metastore). REQUEST is
``{"queries": {name: sql}}``; a query that fails is answered ``{"error": ...}``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def inspect(spark: Any, queries: dict[str, str]) -> dict[str, Any]:
    """The catalog (schema -> table -> type and, for a view outside Sluice's schemas, its
    text) and each query's rows. One ``SHOW TABLE EXTENDED`` a schema (not a ``DESCRIBE``
    a view: a PR environment has a dozen, and the trials leave many environments)."""
    catalog: dict[str, dict[str, Any]] = {}
    for (db,) in spark.sql("SHOW DATABASES").collect():
        tables: dict[str, Any] = {}
        try:
            rows = spark.sql(f"SHOW TABLE EXTENDED IN {db} LIKE '*'").collect()
        except Exception:  # a table it cannot describe: one at a time, as views
            catalog[db] = _one_by_one(spark, db)
            continue
        for row in rows:
            if row["isTemporary"]:
                continue
            kind, text = _described(row["information"])
            bare = kind != "VIEW" or db.startswith("sluice__")
            tables[row["tableName"]] = {"type": kind, "text": None if bare else text}
        catalog[db] = tables
    answers: dict[str, Any] = {}
    for name, sql in queries.items():
        try:
            answers[name] = [list(r) for r in spark.sql(sql).collect()]
        except Exception as exc:  # a missing table is a finding, not a crash
            answers[name] = {"error": str(exc).splitlines()[0][:300]}
    return {"catalog": catalog, "queries": answers}


def _one_by_one(spark: Any, db: str) -> dict[str, Any]:
    views = {r["viewName"] for r in spark.sql(f"SHOW VIEWS IN {db}").collect()}
    tables: dict[str, Any] = {}
    for row in spark.sql(f"SHOW TABLES IN {db}").collect():
        if row["isTemporary"]:
            continue
        name, text = row["tableName"], None
        if name in views and not db.startswith("sluice__"):
            rows = spark.sql(f"DESCRIBE TABLE EXTENDED {db}.{name}").collect()
            text = next((r["data_type"] for r in rows if r["col_name"] == "View Text"), "")
        tables[name] = {"type": "VIEW" if name in views else "TABLE", "text": text}
    return tables


def _described(information: str) -> tuple[str, str]:
    """A table's type (VIEW or TABLE) and view text from ``SHOW TABLE EXTENDED``'s
    ``information`` ("Key: value" lines; a view's text may span lines, up to the next
    line of the view's own keys)."""
    kind, text, lines = "TABLE", "", information.splitlines()
    for index, line in enumerate(lines):
        if line == "Type: VIEW":
            kind = "VIEW"
        elif line.startswith("View Text: "):
            body = [line.removeprefix("View Text: ")]
            for more in lines[index + 1 :]:
                if more.startswith("View "):
                    break
                body.append(more)
            text = "\n".join(body)
    return kind, text


def main(request: str, out: str) -> None:
    from pyspark.sql import SparkSession

    remote = os.environ.get("SPARK_REMOTE")
    if remote:
        spark = SparkSession.builder.remote(remote).getOrCreate()
    else:
        spark = SparkSession.builder.enableHiveSupport().getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
    try:
        found = inspect(spark, json.loads(Path(request).read_text())["queries"])
    finally:
        spark.stop()
    Path(out).write_text(json.dumps(found, default=str))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
