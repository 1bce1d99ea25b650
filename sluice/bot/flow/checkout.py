"""A commit's files on disk, fetched from the forge once and kept (commits do not change).

>>> safe_repo_name("octo/ware house")
'octo_ware_house'
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from sluice.bot.forge.base import Forge
from sluice.core.errors import SluiceError


@dataclass(frozen=True)
class Checkout:
    """Trees of commits under ``workdir/trees/<repository>/<sha>``."""

    workdir: Path

    def tree(self, forge: Forge, sha: str) -> Path:
        """The repository at ``sha``; fetched into a partial folder first, so a crash
        mid-fetch never leaves a half tree that looks whole."""
        if not re.fullmatch(r"[0-9a-fA-F]{7,64}", sha):
            raise SluiceError(f"'{sha}' is not a commit sha")
        tree = (self.workdir / "trees" / safe_repo_name(forge.repo) / sha).resolve()
        if tree.is_dir():
            return tree
        partial = tree.with_name(f"{sha}.partial-{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        forge.fetch_tree(sha, partial)
        partial.rename(tree)
        return tree


def safe_repo_name(repo: str) -> str:
    """``repo`` as one folder name."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", repo)
