"""Rewriting a table whole: its replacement is built beside it under a scratch name, then
swapped in (drop, rename), so a reader sees the old table or the new one. A job killed
between the drop and the rename leaves only the replacement; the next rewrite finds it and
finishes the swap before anything else.

Used by the rewrites of models incremental by unique key and of SCD type 2 histories
(:mod:`sluice.core.spark.steps.build`, :mod:`sluice.core.spark.steps.scd`).

Which tables a build writes into, the rule (:func:`check_mark`, its one place): every
physical table Sluice creates carries :data:`MARK` = ``model@version``, and before a build
overwrites, appends to, rewrites or swaps in a table that exists (or a replacement a
killed swap left) it reads the mark:

- this version's mark: written into;
- no mark, and the build step says ``adopt_unmarked``: the table is marked (``ALTER TABLE
  ... SET TBLPROPERTIES``), then written into. The service sets that flag from state
  alone, for a version state records a build of (recorded intervals, which only a job's
  build of that version writes: :func:`sluice.core.jobs.recorded_builds`): a table an
  earlier Sluice built before it marked its tables, so an upgrade needs no ALTER TABLE by
  hand;
- no mark and no recorded build (a table made ahead under the version's name, by a
  person or a project's statement): refused (:class:`NotSluices`);
- another mark (another model or version): refused, whatever the step says.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sluice.core.spark.spec import BuildStep


MARK = "sluice.created_by"
"""The table property Sluice gives every physical table it creates (``model@version``),
and looks for before it writes into a table that exists: a table without it (made ahead
under the same name, by hand or by a project's statement) is never adopted. A model may
not set ``sluice.*`` properties itself (:mod:`sluice.core.model.properties`)."""


class NotSluices(RuntimeError):
    """A table Sluice would write into exists, and Sluice did not create it."""


def mark_of(step: BuildStep) -> str:
    """The value of :data:`MARK` on the tables of ``step``'s model version."""
    return f"{step['model']}@{step['version']}"


def check_mark(spark: SparkSession, table: str, step: BuildStep) -> None:
    """Refuse to write into ``table`` (which exists) unless Sluice created it for
    ``step``'s model version; an unmarked table of a version state records a build of
    (``step["adopt_unmarked"]``) is marked first. The rule: this module's docstring.

    Raises:
        NotSluices: what was found, where, and how to go on.
    """
    rows = spark.sql(f"SHOW TBLPROPERTIES {table}").collect()
    found = {str(r[0]): str(r[1]) for r in rows if len(r) > 1}
    want = mark_of(step)
    has = found.get(MARK)
    if has == want:
        return
    if has is None and step.get("adopt_unmarked") is True:
        spark.sql(
            f"ALTER TABLE {table} SET TBLPROPERTIES ({sql_string(MARK)} = {sql_string(want)})"
        )
        return
    raise NotSluices(
        f"{step['model']}: the table {table} exists but Sluice did not create it for this "
        f"version ({MARK} is "
        + (f"'{has}', not '{want}'" if has is not None else "not set")
        + "): it is not written into. hint: if a statement or a person made it ahead, drop "
        f"it (DROP TABLE {table}) and apply again; if it is a table an earlier Sluice built "
        "before tables were marked (state records no build of it, or Sluice would have "
        f"marked it), mark it: ALTER TABLE {table} SET TBLPROPERTIES ('{MARK}' = '{want}')"
    )


def sql_string(text: str) -> str:
    """``text`` as a Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def begin(spark: SparkSession, table: str, step: BuildStep | None = None) -> tuple[str, str]:
    """The names of ``table``'s replacement and of a scratch table (for a query's rows
    kept once), both dropped; a swap a killed job left half done is finished first (with
    ``step``, only when the replacement carries the version's :data:`MARK`)."""
    staging, fresh = f"{table}__sluice_next", f"{table}__sluice_new"
    if not spark.catalog.tableExists(table) and spark.catalog.tableExists(staging):
        if step is not None:
            check_mark(spark, staging, step)
        clear_location(spark, table)
        spark.sql(f"ALTER TABLE {staging} RENAME TO {table}")
    for scratch in (staging, fresh):
        spark.sql(f"DROP TABLE IF EXISTS {scratch}")
        clear_location(spark, scratch)
    return staging, fresh


def clear_location(spark: SparkSession, table: str) -> None:
    """Delete the files at the location of ``table``, which the catalog does not have.

    ``CREATE TABLE ... AS`` writes the table's files before it registers the table, so a
    driver killed in between leaves files that no table owns, and creating the table again
    fails (LOCATION_ALREADY_EXISTS). Table names are unique per model version, so files at
    the location of a table that does not exist are such remains.
    """
    database, name = table.rsplit(".", 1)  # the database may be catalog.schema
    root = spark.catalog.getDatabase(database).locationUri.rstrip("/")
    location = f"{root}/{name.lower()}"
    where = urlsplit(location)
    if where.scheme in ("", "file"):
        # A local warehouse (the embedded default, in both modes): this process sees the
        # files the driver or the Spark Connect server wrote.
        path = Path(unquote(where.path))
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
        return
    if is_connect(spark):
        # A Spark Connect client has no Hadoop FileSystem of the server's: a create that
        # finds such remains fails with LOCATION_ALREADY_EXISTS, naming the location.
        return
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hadoop_path = jvm.org.apache.hadoop.fs.Path(location)
    files = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if files.exists(hadoop_path):
        files.delete(hadoop_path, True)


def is_connect(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect session (it has no JVM in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")
