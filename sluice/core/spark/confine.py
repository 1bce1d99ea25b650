"""What a sandboxed Spark process may see and use, from the service's Spark settings.

The Spark driver (``spark-submit``), the Connect server and the Connect job child start
through :func:`sluice.core.sandbox.wrap`; their profiles take from here the files a job's
spec names (:func:`spec_files`), the local paths the service's settings name
(:func:`service_paths`), whether Spark reaches past this machine (:func:`reaches_out`), and
the processes and memory it may use (:func:`limits`).

Example::

    >>> service_paths({"spark.sql.warehouse.dir": "file:/srv/wh", "spark.app.name": "/x"})
    ([], [PosixPath('/srv/wh')])
    >>> limits({"spark.driver.memory": "512m"}).memory // 2**20
    3072
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any, cast

from sluice.core import sandbox
from sluice.core.config import SparkSettings
from sluice.core.errors import ConfigError
from sluice.core.model.pycode import files as pycode_files
from sluice.core.spark.session import uses_embedded_metastore
from sluice.core.spark.spec import JobSpec

# Settings whose value is a list of files (or folders) Spark reads.
_READS = frozenset(
    {
        "spark.jars",
        "spark.files",
        "spark.archives",
        "spark.submit.pyFiles",
        "spark.driver.extraClassPath",
        "spark.driver.extraLibraryPath",
        "spark.executor.extraClassPath",
    }
)
# Settings whose value is a folder Spark writes: ``*.dir`` and ``*.dirs`` (the warehouse,
# ``spark.local.dir``, an event log, a checkpoint folder) and the checkpoint location.
_WRITES = re.compile(r"(\.dirs?|\.checkpointLocation)$")


def reaches_out(settings: SparkSettings, conf: dict[str, str]) -> bool:
    """Whether the service's Spark settings reach past this machine's own Spark: a
    master that is not ``local``, a metastore of the user's own, or any setting whose
    value is a URL (an object store, a catalog's service). A sandboxed driver then has
    the host's network; otherwise only its own loopback."""
    if not settings.master.startswith("local") or not uses_embedded_metastore(settings):
        return True
    return any("://" in value for value in conf.values())


def shared_between_roots(settings: SparkSettings) -> str | None:
    """Why jobs given Spark roots of their own would still share Spark's data (None: they
    would not): a Spark Connect endpoint of the user's (one server and catalog for all),
    a metastore of the user's (or no embedded Hive catalog), a master that is not local
    (executors run outside the sandbox), a setting naming a service past this machine
    (reached with the host's network), or a folder the service's settings let every job
    write. A service keeping repositories apart relies on roots only where this is None."""
    if settings.mode == "connect" and settings.remote:
        return (
            "SLUICE_SPARK_REMOTE names a Spark Connect endpoint of your own: every "
            "repository's jobs run on that one server, with one catalog and warehouse"
        )
    if not uses_embedded_metastore(settings):
        return (
            "SLUICE_SPARK_CONF names a metastore of your own (or no Hive catalog): every "
            "repository's jobs see one catalog"
        )
    if not settings.master.startswith("local"):
        return (
            f"the master {settings.master!r} is not local: executors run on the cluster, "
            "outside Sluice's sandbox, with every repository's files within their reach"
        )
    for key, value in settings.conf.items():
        if "://" in value:
            return (
                f"SLUICE_SPARK_CONF's {key} names a service past this machine: every "
                "repository's drivers reach it (with the host's network), and what one "
                "writes there another can read"
            )
        if _WRITES.search(key):
            return f"SLUICE_SPARK_CONF's {key} names a folder every repository's Spark writes"
    return None


def _local_paths(value: str) -> list[Path]:
    """The absolute local paths of a comma- or colon-separated list (``/x``, ``file:/x``,
    a class path's ``/x/*``); URLs and anything else are not paths."""
    found: list[Path] = []
    for part in re.split(r",|:(?=/)", value):  # "file:/x" splits into "file" and "/x"
        word = part.strip().removesuffix("/*")
        if word.startswith("/") and not any(c.isspace() for c in word) and word != "/":
            found.append(Path(word))
    return found


def service_paths(conf: dict[str, str]) -> tuple[list[Path], list[Path]]:
    """The local paths the service's Spark settings name (its own settings, never a
    repository's), by what the setting is for: (files and folders a sandboxed Spark
    process reads, from the jar, file and class path settings; folders it writes, from
    ``*.dir`` settings such as the warehouse or ``spark.local.dir``, made when missing).
    Any other setting's value is never shown, whatever it looks like."""
    files: list[Path] = []
    folders: list[Path] = []
    for key, value in conf.items():
        if key in _READS:
            files += [p for p in _local_paths(value) if p.exists()]
        elif _WRITES.search(key):
            folders += [p for p in _local_paths(value) if not p.is_file()]
    return files, folders


def spec_files(spec: JobSpec) -> list[Path]:
    """The files and folders a job's driver reads besides its spec: a SEED model's CSV
    and a Python model's file and project folder, from those fields only (the service
    writes them; a value a pull request chose, such as a unit test's row, is never one).
    A sandbox shows them read-only."""
    found: list[str] = []
    for step in spec.get("steps", []):
        seed = step.get("seed")
        if isinstance(seed, dict):
            found.append(str(seed.get("path", "")))
        python = step.get("python")
        if isinstance(python, dict):
            model = python.get("model", python)
            if isinstance(model, dict):
                found += [str(model.get("path", "")), str(model.get("root", ""))]
    return [Path(p) for p in dict.fromkeys(found) if os.path.isabs(p) and os.path.exists(p)]


def python_sources(spec: JobSpec, into: Path) -> JobSpec:
    """``spec`` with each Python model's project folder replaced by a copy, under
    ``into``, of the project's Python sources alone (:func:`~sluice.core.model.pycode.files.sources`,
    what the review's Python item digests): the driver is shown no other file of the
    project, so a model cannot read at run time a file no review covered (a data file
    beside it, edited after approval: red team, approval round). A model that reads one
    fails with a missing file: keep such data in a seed or a model."""
    mirrors: dict[str, Path] = {}
    steps = []
    for step in spec.get("steps", []):
        python: Any = step.get("python")
        nested = isinstance(python, dict) and isinstance(python.get("model"), dict)
        model: Any = python.get("model") if nested else python
        if not isinstance(model, dict) or not model.get("root") or not model.get("path"):
            steps.append(step)
            continue
        root = str(model["root"])
        if root not in mirrors:
            mirror = into / hashlib.sha256(root.encode()).hexdigest()[:16]
            for rel, data in pycode_files.sources(Path(root)).items():
                target = mirror / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                write_new(target, data)
            mirror.mkdir(parents=True, exist_ok=True)
            mirrors[root] = mirror
        rel = os.path.relpath(str(model["path"]), root)
        moved = {**model, "root": str(mirrors[root]), "path": str(mirrors[root] / rel)}
        python = {**python, "model": moved} if nested else moved
        steps.append(cast(Any, {**step, "python": python}))
    return cast(JobSpec, {**spec, "steps": steps})


def write_new(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path``, a file this call creates: never through a link, never
    into a file that is there already (a job's home is made afresh for each run).

    Raises:
        FileExistsError: something (a file, a link) is at ``path``.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


_UNITS = {"": 2**20, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def driver_memory(conf: dict[str, str]) -> int:
    """Bytes of ``spark.driver.memory`` (Spark's default 1g; a bare number is MiB)."""
    raw = conf.get("spark.driver.memory", "1g").strip().lower()
    found = re.fullmatch(r"(\d+)\s*([kmgt]?)b?", raw)
    if found is None:
        raise ConfigError(
            f"spark.driver.memory={raw!r} is not a size Spark reads",
            hint="write it as Spark does: 512m, 2g",
        )
    return int(found.group(1)) * _UNITS[found.group(2)]


def limits(conf: dict[str, str]) -> sandbox.Limits:
    """What each process of a sandboxed Spark application may write to memory: twice the
    driver's heap (``spark.driver.memory``: a JVM's heap, off-heap buffers and stacks stay
    under it) and 2 GiB for the rest; and the host's process ceiling."""
    return sandbox.Limits.for_spark(2 * driver_memory(conf) + 2 * 2**30)
