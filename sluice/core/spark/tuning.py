"""The Spark settings a repository may choose: tuning that sizes work and cannot run code
(pure; the one owner of the list).

Two readers use it: the prod branch's ``sluice.spark.conf`` (:mod:`sluice.bot.flow.trust`
keeps only these keys of it) and a model's ``session_properties``
(:mod:`sluice.core.model.properties`, applied around the model's build). Everything else
is the service's to set: a setting that loads a class, a file or a program, or that
changes how Spark reads SQL text, names or finds tables (``spark.sql.variable.substitute``,
``spark.sql.parser.*``, ``spark.sql.ansi.doubleQuotedIdentifiers``, catalogs,
extensions, the warehouse, locations) is on no list.

>>> is_tuning("spark.sql.shuffle.partitions"), is_tuning("spark.sql.variable.substitute")
(True, False)
>>> is_tuning("spark.sql.adaptive.customCostEvaluatorClass")
False
>>> spelled("SPARK.SQL.SHUFFLE.PARTITIONS")
'spark.sql.shuffle.partitions'
"""

from __future__ import annotations

SPARK_TUNING = (
    "spark.sql.shuffle.partitions",
    "spark.sql.adaptive.",
    "spark.sql.autoBroadcastJoinThreshold",
    "spark.sql.broadcastTimeout",
    "spark.sql.files.maxPartitionBytes",
    "spark.sql.files.openCostInBytes",
    "spark.sql.files.maxRecordsPerFile",
    "spark.sql.parquet.compression.codec",
    "spark.sql.orc.compression.codec",
    "spark.sql.cbo.",
    "spark.sql.join.preferSortMergeJoin",
    # Errors instead of NULLs on overflow and bad casts (Spark 4's default: on). It does
    # not change how the text is read: the ansi keys that do (reserved keywords, double
    # quoted identifiers) are not tuning.
    "spark.sql.ansi.enabled",
    "spark.sql.session.timeZone",
    "spark.default.parallelism",
    "spark.driver.memory",
    "spark.driver.cores",
    "spark.driver.maxResultSize",
    "spark.executor.memory",
    "spark.executor.cores",
    "spark.executor.instances",
    "spark.memory.fraction",
    "spark.memory.storageFraction",
)
"""Exact keys, or prefixes ending in ``.``; compared without regard to case."""

_EXACT = {key.lower(): key for key in SPARK_TUNING if not key.endswith(".")}
_PREFIXES = tuple(key.lower() for key in SPARK_TUNING if key.endswith("."))


def is_tuning(key: str) -> bool:
    """Whether ``key`` is a tuning setting. Under a prefix, a key naming a class (Spark's
    ``...Class`` settings, e.g. ``spark.sql.adaptive.customCostEvaluatorClass``) is not:
    it would choose code to run."""
    lowered = key.lower()
    if lowered in _EXACT:
        return True
    return lowered.startswith(_PREFIXES) and "class" not in lowered.rsplit(".", 1)[-1]


def spelled(key: str) -> str:
    """``key`` as Spark spells it (its settings are case-sensitive): the list's spelling
    for an exact key, else as written."""
    return _EXACT.get(key.lower(), key)


def split_spark_conf(conf: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """The tuning settings of ``conf`` (kept, as Spark spells them), and the keys of the
    others (refused).

    >>> split_spark_conf({"spark.sql.shuffle.partitions": "8", "spark.jars": "/tmp/x.jar"})
    ({'spark.sql.shuffle.partitions': '8'}, ['spark.jars'])
    """
    kept: dict[str, str] = {}
    refused: list[str] = []
    for key, value in conf.items():
        if is_tuning(key):
            kept[spelled(key)] = value
        else:
            refused.append(key)
    return kept, refused
