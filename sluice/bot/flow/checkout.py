"""The service's working folder: a commit's files on disk, fetched from the forge once and
kept while they are used (commits do not change), and the Spark jobs' logs.

Layout: ``trees/<repository>/<sha>`` (checkouts), ``logs/`` (each job's log and spec),
``spark/`` (the embedded metastore and warehouse) and ``spark.sluice/`` (the Connect
server's folder). The janitor prunes trees and job logs (:meth:`Checkout.prune`): a tree
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
from dataclasses import dataclass
from pathlib import Path

from sluice.bot.forge.base import Forge
from sluice.core import logs
from sluice.core.errors import SluiceError
from sluice.core.spark.session import SparkPaths


@dataclass(frozen=True)
class Checkout:
    """Trees of commits under ``workdir/trees/<repository>/<sha>``; job logs under
    ``workdir/logs``."""

    workdir: Path

    @property
    def logs(self) -> Path:
        """Where the Spark jobs write their logs and specs."""
        return self.workdir.resolve() / "logs"

    @property
    def spark(self) -> SparkPaths:
        """The service's Spark folders: metastore and warehouse, and the job logs."""
        return SparkPaths(root=self.workdir.resolve() / "spark", logs=self.logs)

    def rotate_logs(self, max_bytes: int, backups: int) -> list[Path]:
        """Rotate (:func:`sluice.core.logs.rotate`) the log files of the workdir's Spark
        that a long-lived process appends to: the Connect server's (``server.log``) and
        Derby's (``derby.log``, every JVM of the embedded metastore). The ones rotated."""
        spark = self.spark
        rotated = []
        for folder in (spark.connect, spark.root):
            with contextlib.suppress(FileNotFoundError):
                for path in sorted(folder.glob("*.log")):
                    own = path.is_file() and not path.is_symlink()
                    if own and logs.rotate(path, max_bytes, backups):
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
        self, repo: str, keep_days: float, now: float | None = None, folder: str | None = None
    ) -> tuple[int, int]:
        """Remove ``repo``'s trees, and job logs, last used more than ``keep_days`` ago
        (0: keep everything); ``(trees, logs)`` removed. A tree in use was touched when
        its job took it, and a running job's log is being written, so neither goes."""
        if keep_days <= 0:
            return 0, 0
        before = (time.time() if now is None else now) - keep_days * 86_400
        trees = _remove_older(
            self.workdir.resolve() / "trees" / (folder or safe_repo_name(repo)), before
        )
        return trees, _remove_older(self.logs, before)


def _remove_older(folder: Path, before: float) -> int:
    """Remove the entries of ``folder`` last modified before ``before``; how many."""
    removed = 0
    with contextlib.suppress(FileNotFoundError):
        for entry in list(folder.iterdir()):
            try:
                if entry.lstat().st_mtime >= before:
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
