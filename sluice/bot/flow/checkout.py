"""The service's working folder: a commit's files on disk, fetched from the forge once and
kept while they are used (commits do not change), and the Spark jobs' logs.

Layout: ``trees/<repository>/<sha>`` (checkouts), ``logs/<root>/`` (each job's log and
spec, in a folder of its Spark root's: ``logs/spark/``, ``logs/<name>/``),
``spark/`` (the embedded metastore and warehouse) and ``spark.sluice/`` (the Connect
server's folder); with repositories isolated, each but the state owner has a Spark root
of its own, ``spark-repositories/<name>`` and ``spark-repositories/<name>.sluice``
(:mod:`sluice.bot.flow.tenancy` names it; :func:`job_spark` says which one a job uses). The janitor prunes trees and job logs (:meth:`Checkout.prune`): a tree
or log not used for ``SLUICE_WORKDIR_KEEP_DAYS`` goes, and a tree is fetched again if it
is needed again. It also rotates the log files long-lived Spark processes append to
(:meth:`Checkout.rotate_logs`); a job's own log is bounded by its runner
(``core/spark/submit.py``, 64 MiB) and goes with age.

>>> safe_repo_name("octo/ware house")
'octo_ware_house'
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from sluice.bot.forge.base import Forge
from sluice.core import logs
from sluice.core.errors import SluiceError
from sluice.core.spark.session import SparkPaths


@dataclass(frozen=True)
class Checkout:
    """Trees of commits under ``workdir/trees/<repository>/<sha>``; job logs under
    ``workdir/logs/<root>`` (:meth:`spark_at`)."""

    workdir: Path

    @property
    def logs(self) -> Path:
        """The folder of the Spark roots' job log folders (each root's jobs write their
        logs and specs in its own: :meth:`spark_at`)."""
        return self.workdir.resolve() / "logs"

    @property
    def spark(self) -> SparkPaths:
        """The service's Spark folders: metastore and warehouse, and the job logs."""
        return self.spark_at(OWN_SPARK)

    def spark_at(self, root: str) -> SparkPaths:
        """The Spark folders of the root ``root`` (relative to the workdir: ``spark``, or
        a repository's own, :attr:`sluice.bot.flow.tenancy.Namespace.spark`)."""
        parts = root.split("/")
        if not root or root.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise SluiceError(f"'{root}' is not a Spark root under the workdir")
        # Its jobs' logs, specs and homes: its own folder, never another root's (issue 46).
        paths = SparkPaths(root=self.workdir.resolve() / root, logs=self.logs / parts[-1])
        if root == OWN_SPARK:
            return paths  # the machine's class archive, as it always had
        # A repository's own JVM class archive: its prod jobs write it, its JVMs alone map it.
        return SparkPaths(paths.root, paths.logs, class_archives=paths.service / "jvm")

    def spark_roots(self) -> list[SparkPaths]:
        """Every Spark root in the workdir: the owner's and each repository's own."""
        names: set[str] = set()
        with contextlib.suppress(FileNotFoundError):
            for entry in (self.workdir.resolve() / SPARK_ROOTS).iterdir():
                name = entry.name.removesuffix(".sluice")  # a root, or its service folder
                if entry.is_dir() and not entry.is_symlink() and re.fullmatch(r"\w+", name):
                    names.add(name)
        return [self.spark, *(self.spark_at(f"{SPARK_ROOTS}/{n}") for n in sorted(names))]

    def rotate_logs(self, max_bytes: int, backups: int) -> list[Path]:
        """Rotate (:func:`sluice.core.logs.rotate`) the log files of the workdir's Spark
        roots that a long-lived process appends to: each Connect server's (``server.log``)
        and Derby's (``derby.log``, every JVM of an embedded metastore). The ones rotated.

        The root is a folder every sandboxed driver of its repository writes: there only
        ``derby.log`` is rotated (what the long-lived server's Derby appends to), never
        another file a driver left, and :func:`~sluice.core.logs.rotate` follows no link."""
        rotated = []
        for spark in self.spark_roots():
            found: list[Path] = [spark.root / "derby.log"]
            with contextlib.suppress(FileNotFoundError):
                found += sorted(spark.connect.glob("*.log"))
            for path in found:
                if logs.rotate(path, max_bytes, backups):
                    rotated.append(path)
        return rotated

    def tree(self, forge: Forge, sha: str, folder: str | None = None) -> Path:
        """The repository at ``sha``; fetched into a partial folder first, so a crash
        mid-fetch never leaves a half tree that looks whole. ``folder``: the repository's
        under ``trees/`` (its namespace's, :mod:`sluice.bot.flow.tenancy`; None: its name)."""
        if not re.fullmatch(r"[0-9a-fA-F]{7,64}", sha):
            raise SluiceError(f"'{sha}' is not a commit sha")
        tree = (self.workdir / "trees" / (folder or safe_repo_name(forge.repo)) / sha).resolve()
        if tree.is_dir():
            with contextlib.suppress(OSError):
                os.utime(tree)  # its last use: what pruning goes by
            return tree
        partial = tree.with_name(f"{sha}.partial-{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        forge.fetch_tree(sha, partial)
        partial.rename(tree)
        return tree

    def prune(
        self,
        repo: str,
        keep_days: float,
        now: float | None = None,
        folder: str | None = None,
        spark: str | None = None,
    ) -> tuple[int, int]:
        """Remove ``repo``'s trees, and job logs (its Spark root ``spark``'s, and those an
        older service left in the logs folder itself), last used more than ``keep_days``
        ago (0: keep everything); ``(trees, logs)`` removed. A tree in use was touched when
        its job took it, and a running job's log is being written, so neither goes."""
        if keep_days <= 0:
            return 0, 0
        before = (time.time() if now is None else now) - keep_days * 86_400
        trees = _remove_older(
            self.workdir.resolve() / "trees" / (folder or safe_repo_name(repo)), before
        )
        logs = _remove_older(self.spark_at(spark or OWN_SPARK).logs, before)
        return trees, logs + _remove_older(self.logs, before, folders=False)


OWN_SPARK = "spark"
"""The state owner's Spark root under the workdir (the one it always had)."""
SPARK_ROOTS = "spark-repositories"
"""Where the other repositories' Spark roots are (:func:`sluice.bot.flow.tenancy.spark_root`):
beside the owner's, never inside it (its sandboxed driver writes its whole root)."""

_JOB_SPARK: ContextVar[str | None] = ContextVar("sluice_job_spark", default=None)


@contextlib.contextmanager
def job_spark(root: str) -> Iterator[None]:
    """The Spark root (relative to the workdir) of the job that runs inside: every runner
    the service makes for it works there (:func:`sluice.bot.flow.deps.make_deps`). A
    context variable, so one thread's job never gets another's root."""
    token = _JOB_SPARK.set(root)
    try:
        yield
    finally:
        _JOB_SPARK.reset(token)


def current_spark() -> str | None:
    """The root :func:`job_spark` set (None outside one)."""
    return _JOB_SPARK.get()


def _remove_older(folder: Path, before: float, *, folders: bool = True) -> int:
    """Remove the entries of ``folder`` last modified before ``before`` (its folders too
    unless ``folders`` is False); how many."""
    removed = 0
    with contextlib.suppress(FileNotFoundError):
        for entry in list(folder.iterdir()):
            try:
                if entry.lstat().st_mtime >= before:
                    continue
                if not folders and entry.is_dir() and not entry.is_symlink():
                    continue
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
                removed += 1
            except OSError:
                continue  # gone meanwhile, or not ours to remove: the next run tries again
    return removed


def safe_repo_name(repo: str) -> str:
    """``repo`` as one folder name."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", repo)
