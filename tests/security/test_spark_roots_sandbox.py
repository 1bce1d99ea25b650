"""Hostile: an approved Python model of repository A runs in A's Spark driver, and Spark
has no authorization between schemas, so what keeps B's data from it is that A's driver
is shown A's Spark root alone (issue 46: each repository's own metastore and warehouse,
:func:`sluice.bot.flow.tenancy.spark_root`). Its sandbox (spark-submit's driver, the
Connect server of A's root, a Connect job's child) writes A's root and its own home, and
shows no other root: writing into B's warehouse folder by path, or reading B's files,
fails."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sluice.bot.flow import tenancy
from sluice.bot.flow.checkout import Checkout
from sluice.core import sandbox
from sluice.core.config import SparkSettings
from sluice.core.spark import jvm
from sluice.core.spark.connect import ConnectRunner, ConnectServer
from sluice.core.spark.session import SparkPaths
from sluice.core.spark.submit import SubmitRunner

A, B = "github:acme/a", "github:mallory/b"
SETTINGS = SparkSettings(master="local[2]")


def _roots(tmp_path: Path) -> tuple[SparkPaths, SparkPaths]:
    work = Checkout(tmp_path / "work")
    a, b = (work.spark_at(tenancy.spark_root(repo)) for repo in (A, B))
    for paths in (a, b):
        (paths.warehouse / "sluice_r_x__db.db" / "t").mkdir(parents=True)
        (paths.warehouse / "sluice_r_x__db.db" / "t" / "part-0.parquet").write_text("rows")
        paths.logs.mkdir(parents=True, exist_ok=True)
    return a, b


def _driver_profile(paths: SparkPaths, home: Path) -> sandbox.Profile:
    spec_path = paths.logs / "job.json"
    spec_path.write_text("{}")
    runner = SubmitRunner(SETTINGS, paths)
    return runner.profile({"steps": []}, spec_path, home, jvm.ArchiveUse([]))  # type: ignore[typeddict-item]


def test_each_spark_process_of_a_root_writes_that_root_alone(tmp_path: Path) -> None:
    a, b = _roots(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    driver = _driver_profile(a, home)
    server = ConnectServer(SETTINGS.model_copy(update={"mode": "connect"}), a).profile(home)
    for profile in (driver, server):
        assert {home, a.root} <= set(profile.write), profile.write
        assert all(p in (home, a.root) or a.root in p.parents for p in profile.write)
        shown = [Path(p) for p in (*profile.write, *profile.read)]
        # Nothing of B's, nor a folder holding it (the workdir, the roots' folder).
        assert not any(p == b.root or p in b.root.parents or b.root in p.parents for p in shown)
    spec_path = a.logs / "job.json"
    child = ConnectRunner(SETTINGS.model_copy(update={"mode": "connect"}), a).profile(
        {"steps": [], "job_id": "j"},  # type: ignore[typeddict-item]
        spec_path,
        home,
        jvm.ArchiveUse([]),
    )
    assert set(child.write) == {home}  # no warehouse, no metastore: the server has them


_HOSTILE = """
import os, sys
mine, theirs = sys.argv[1], sys.argv[2]
out = []
with open(os.path.join(mine, "planted.parquet"), "w") as f:
    f.write("mine")
out.append("wrote mine")
for what, act in (("write theirs", lambda: open(os.path.join(theirs, "planted.parquet"), "w")),
                  ("read theirs", lambda: open(os.path.join(theirs, "part-0.parquet")).read()),
                  ("list theirs", lambda: os.listdir(theirs))):
    try:
        act()
        out.append(what)
    except OSError as exc:
        out.append(f"refused {what}: {type(exc).__name__}")
print("|".join(out))
"""


@pytest.mark.skipif(sandbox.isolation() != "bwrap", reason="needs bubblewrap")
def test_a_python_model_of_a_cannot_write_or_read_b_s_warehouse_by_path(tmp_path: Path) -> None:
    a, b = _roots(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    mine = a.warehouse / "sluice_r_x__db.db" / "t"
    theirs = b.warehouse / "sluice_r_x__db.db" / "t"
    # What A's approved model's code does in A's driver, in that driver's sandbox.
    argv = [sys.executable, "-I", "-c", _HOSTILE, str(mine), str(theirs)]
    launch = sandbox.wrap(argv, _driver_profile(a, home))
    done = subprocess.run(launch.argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    said = done.stdout.strip().split("|")
    assert said[0] == "wrote mine"  # its own warehouse: written
    assert all(s.startswith("refused ") for s in said[1:]), said
    assert not (theirs / "planted.parquet").exists()
    assert (theirs / "part-0.parquet").read_text() == "rows"
    assert (mine / "planted.parquet").read_text() == "mine"


def test_a_repository_s_prod_job_writes_a_class_archive_only_its_own_root_maps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A prod job's driver writes the JVM class archive later JVMs map (jvm.py): with one
    # archive per machine, A's approved model could plant one B's drivers would map.
    monkeypatch.delenv(jvm.CACHE_ENV, raising=False)
    a, b = _roots(tmp_path)
    assert a.class_archives is not None and b.class_archives is not None
    assert a.class_archives != b.class_archives
    assert a.class_archives.parent == a.service  # beside A's root, never in it
    assert Checkout(tmp_path / "work").spark.class_archives is None  # the owner's: as it was
    runner = SubmitRunner(SETTINGS, a)
    spec: Any = {"environment": "prod", "steps": []}
    with runner._class_archive(dict(os.environ), spec) as use:
        if use.folder is None:
            pytest.skip("no Java here: no class archive is written")
        assert use.folder == a.class_archives
        (a.logs / "job.json").write_text("{}")
        home = tmp_path / "home"
        home.mkdir()
        profile = runner.profile(spec, a.logs / "job.json", home, use)
    written = [Path(p) for p in profile.write]
    assert a.class_archives in written
    machine = Path.home() / ".cache/sluice/jvm"
    assert b.class_archives not in written and machine not in written
    # B's Connect server maps its own root's archive, never A's.
    server = ConnectServer(SETTINGS.model_copy(update={"mode": "connect"}), b)
    read = [Path(p) for p in server.profile(home).read]
    assert not any(a.class_archives == p or a.class_archives in p.parents for p in read)


def test_a_link_at_a_root_s_class_archive_is_never_shown_to_its_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A's prod driver writes the archive's folder: a link it leaves where the archive
    goes (to B's warehouse file) is neither mapped nor bound into A's Connect server."""
    monkeypatch.delenv(jvm.CACHE_ENV, raising=False)
    a, b = _roots(tmp_path)
    archive = jvm.ClassArchive.for_spark(jvm.spark_home(), dict(os.environ), a.class_archives)
    if archive is None:
        pytest.skip("no Java here: no class archive")
    secret = b.warehouse / "t" / "part-0.parquet"
    secret.parent.mkdir(parents=True)
    secret.write_text("B's rows")
    archive.folder.mkdir(parents=True)
    archive.path.symlink_to(secret)
    assert archive.mapped({}) == []
    home = tmp_path / "home"
    home.mkdir()
    server = ConnectServer(SETTINGS.model_copy(update={"mode": "connect"}), a)
    read = [Path(p) for p in server.profile(home).read]
    assert archive.path not in read and secret not in read
