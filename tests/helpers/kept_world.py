"""A flow's world built once per test module, each test given a fresh copy of it.

The merge queue's and the merge train's flow modules start every test from the same
world: prod built from the example and three pull requests built and approved, which took
most of each test's time (four project loads, each starting the sandboxed Python child);
the rollback command's module, prod recorded twice.
:func:`keep` saves such a world once it is built: its folder (the state database, the
trees the flow checked out), its in-memory forge and its scripted warehouse. Each test
then :func:`restore` s it: the folder is put back as it was built, at the same path (the
state database records paths under it), and the test gets copies of the forge and the
warehouse of its own, so nothing a test writes reaches the next one.
"""

from __future__ import annotations

import copy
import dataclasses
import shutil
from pathlib import Path

from sluice.bot.forge.memory import MemoryForge
from sluice.core.spark.scripted import Warehouse


@dataclasses.dataclass(frozen=True)
class Kept:
    """A world as it was built: ``folder`` (where each test's copy is put), ``saved``
    (the folder's copy), and the forge and warehouse (never handed out themselves)."""

    folder: Path
    saved: Path
    forge: MemoryForge
    warehouse: Warehouse


def copy_warehouse(warehouse: Warehouse) -> Warehouse:
    """A copy of ``warehouse`` sharing nothing with it (its ``holding`` event is new)."""
    fields = dataclasses.fields(warehouse)
    return Warehouse(
        **{f.name: copy.deepcopy(getattr(warehouse, f.name)) for f in fields if f.name != "holding"}
    )


def keep(folder: Path, forge: MemoryForge, warehouse: Warehouse) -> Kept:
    """Save the world built in ``folder`` (every database in it closed) with its forge
    and warehouse."""
    saved = folder.with_name(folder.name + "-built")
    shutil.copytree(folder, saved, symlinks=True)
    return Kept(folder, saved, copy.deepcopy(forge), copy_warehouse(warehouse))


@dataclasses.dataclass(frozen=True)
class KeptFolder:
    """A world kept without a warehouse (one recorded as built, no runner): its folder,
    the folder's copy and its in-memory forge."""

    folder: Path
    saved: Path
    forge: MemoryForge


def keep_folder(folder: Path, forge: MemoryForge) -> KeptFolder:
    """Save the world built in ``folder`` (every database in it closed) with its forge."""
    saved = folder.with_name(folder.name + "-built")
    shutil.copytree(folder, saved, symlinks=True)
    return KeptFolder(folder, saved, copy.deepcopy(forge))


def restore_folder(kept: KeptFolder) -> tuple[Path, MemoryForge]:
    """The world as :func:`keep_folder` saved it: its folder put back, a new copy of its
    forge."""
    shutil.rmtree(kept.folder, ignore_errors=True)
    shutil.copytree(kept.saved, kept.folder, symlinks=True)
    return kept.folder, copy.deepcopy(kept.forge)


def restore(kept: Kept) -> tuple[Path, MemoryForge, Warehouse]:
    """The world as :func:`keep` saved it: its folder put back (whatever the last test
    left there is removed), and a new copy of its forge and of its warehouse."""
    shutil.rmtree(kept.folder, ignore_errors=True)
    shutil.copytree(kept.saved, kept.folder, symlinks=True)
    return kept.folder, copy.deepcopy(kept.forge), copy_warehouse(kept.warehouse)


@dataclasses.dataclass(frozen=True)
class KeptForges:
    """A world kept with several repositories' in-memory forges (by repository) and its
    warehouse: its folder, the folder's copy, the forges and the warehouse."""

    folder: Path
    saved: Path
    forges: dict[str, MemoryForge]
    warehouse: Warehouse


def keep_forges(folder: Path, forges: dict[str, MemoryForge], warehouse: Warehouse) -> KeptForges:
    """Save the world built in ``folder`` (every database in it closed) with its forges
    (copied together: what they share stays shared in each copy) and its warehouse."""
    saved = folder.with_name(folder.name + "-built")
    shutil.copytree(folder, saved, symlinks=True)
    return KeptForges(folder, saved, copy.deepcopy(forges), copy_warehouse(warehouse))


def restore_forges(kept: KeptForges) -> tuple[Path, dict[str, MemoryForge], Warehouse]:
    """The world as :func:`keep_forges` saved it: its folder put back, a new copy of its
    forges and of its warehouse."""
    shutil.rmtree(kept.folder, ignore_errors=True)
    shutil.copytree(kept.saved, kept.folder, symlinks=True)
    return kept.folder, copy.deepcopy(kept.forges), copy_warehouse(kept.warehouse)
