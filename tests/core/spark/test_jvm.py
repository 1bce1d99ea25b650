"""The driver JVM's class archive and the operator's JVM flags (sluice.core.spark.jvm)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from sluice.core.config import SparkSettings
from sluice.core.spark import jvm
from sluice.core.spark.session import SparkPaths, spark_conf


def _archive(tmp_path: Path) -> jvm.ClassArchive:
    return jvm.ClassArchive(tmp_path / "cache", key="k1")


def _written_by_the_jvm(flags: list[str], content: bytes = b"classes") -> Path:
    """What a JVM given ``flags`` does at exit: write the archive it was asked for."""
    (dump,) = [f.split("=", 1)[1] for f in flags if f.startswith("-XX:ArchiveClassesAtExit=")]
    Path(dump).write_bytes(content)
    return Path(dump)


def test_the_first_job_writes_the_archive_and_later_jobs_map_it(tmp_path: Path) -> None:
    archive = _archive(tmp_path)
    with archive.use({}) as first:
        dump = _written_by_the_jvm(first.flags)
        assert not archive.path.exists()  # published only once the JVM is done
        first.clean = True
    assert archive.path.read_bytes() == b"classes"
    assert not dump.exists()
    assert not (archive.path.stat().st_mode & 0o222), "the archive is read-only"
    with archive.use({}) as later:
        assert later.flags[0] == f"-XX:SharedArchiveFile={archive.path}"
        # The JVM's notes about the archive would land among the driver's events.
        assert "-Xlog:cds=off" in later.flags
    assert sorted(p.name for p in archive.folder.iterdir()) == [archive.path.name]


def test_a_failed_or_killed_job_publishes_nothing_and_leaves_nothing(tmp_path: Path) -> None:
    archive = _archive(tmp_path)
    with archive.use({}) as failed:
        _written_by_the_jvm(failed.flags)
        failed.clean = False  # exit status 1, or killed mid-dump
    assert list(archive.folder.iterdir()) == []
    with pytest.raises(RuntimeError), archive.use({}) as interrupted:
        _written_by_the_jvm(interrupted.flags)
        raise RuntimeError("Ctrl-C")
    assert list(archive.folder.iterdir()) == []
    with archive.use({}) as empty:  # a JVM that could not dump leaves an empty file
        _written_by_the_jvm(empty.flags, b"")
        empty.clean = True
    assert not archive.path.exists()


def test_a_dump_that_is_not_the_jvm_s_own_file_is_discarded_never_chmodded(
    tmp_path: Path,
) -> None:
    """The folder is one a prod driver may write: what it leaves at its dump path (a link
    to another's file, a second name of one) is never made read-only nor published."""
    other = tmp_path / "other"
    other.write_bytes(b"another's")
    other.chmod(0o600)
    archive = _archive(tmp_path)
    for plant in (os.symlink, os.link):
        with archive.use({}) as use:
            (dump,) = [f.split("=", 1)[1] for f in use.flags if "ArchiveClassesAtExit" in f]
            plant(other, dump)
            use.clean = True
        assert other.stat().st_mode & 0o777 == 0o600 and other.read_bytes() == b"another's"
        assert not os.path.lexists(archive.path)
        assert list(archive.folder.iterdir()) == []
    # A link where the archive goes is never mapped.
    archive.path.symlink_to(other)
    assert archive.mapped({}) == []


def test_one_job_writes_it_while_others_run_without(tmp_path: Path) -> None:
    archive = _archive(tmp_path)
    with archive.use({}) as writer:
        assert writer.flags[0].startswith("-XX:ArchiveClassesAtExit=")
        with archive.use({}) as other:
            assert other.flags == []
    # A claim left by a writer killed long ago is taken over.
    with archive.use({}) as killed:
        _written_by_the_jvm(killed.flags)
        claim = archive.folder / "spark-k1.dumping"
        claim_age = time.time() - 2 * 60 * 60
        with archive.use({}) as blocked:
            assert blocked.flags == []
        os.utime(claim, (claim_age, claim_age))
        with archive.use({}) as taker:
            assert taker.flags[0].startswith("-XX:ArchiveClassesAtExit=")


def test_the_users_own_class_sharing_flags_win(tmp_path: Path) -> None:
    archive = _archive(tmp_path)
    for theirs in ("-XX:SharedArchiveFile=/opt/mine.jsa", "-Xshare:off"):
        with archive.use({jvm.DRIVER_OPTIONS: f"-Xss4m {theirs}"}) as use:
            assert use.flags == []
    assert not archive.folder.exists()


def test_the_key_follows_java_and_the_spark_jars(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    java_home = tmp_path / "jdk"
    (java_home / "bin").mkdir(parents=True)
    (java_home / "bin" / "java").write_text("#!/bin/sh\n")
    spark_home = tmp_path / "spark"
    (spark_home / "jars").mkdir(parents=True)
    (spark_home / "jars" / "spark-core.jar").write_bytes(b"v1")
    env = {"JAVA_HOME": str(java_home)}
    monkeypatch.setenv(jvm.CACHE_ENV, str(tmp_path / "cache"))
    first = jvm.ClassArchive.for_spark(spark_home, env)
    assert first is not None and first.folder == tmp_path / "cache"
    assert jvm.ClassArchive.for_spark(spark_home, env) == first
    (spark_home / "jars" / "spark-core.jar").write_bytes(b"v2 longer")
    upgraded = jvm.ClassArchive.for_spark(spark_home, env)
    assert upgraded is not None and upgraded.key != first.key
    assert jvm.ClassArchive.for_spark(spark_home, {"JAVA_HOME": str(tmp_path / "none")}) is None
    monkeypatch.setenv(jvm.CACHE_ENV, "off")
    assert jvm.ClassArchive.for_spark(spark_home, env) is None


def test_the_operators_flags_go_before_the_settings_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = SparkPaths(root=tmp_path / "spark", logs=tmp_path / "logs")
    monkeypatch.setenv(jvm.OPTIONS_ENV, "  -XX:TieredStopAtLevel=1 ")
    settings = SparkSettings(conf={jvm.DRIVER_OPTIONS: "-Xss4m"})
    assert spark_conf(settings, paths)[jvm.DRIVER_OPTIONS].split() == [
        "-XX:TieredStopAtLevel=1",
        f"-Dderby.system.home={paths.root.resolve()}",
        "-Xss4m",
    ]
    monkeypatch.delenv(jvm.OPTIONS_ENV)
    assert "TieredStopAtLevel" not in spark_conf(settings, paths)[jvm.DRIVER_OPTIONS]


def test_long_lived_jvms_map_an_archive_but_never_write_one(tmp_path: Path) -> None:
    archive = _archive(tmp_path)
    assert archive.mapped({}) == []  # none yet: a Connect server does not write it
    assert not archive.folder.exists()
    archive.folder.mkdir()
    archive.path.write_bytes(b"classes")
    assert archive.mapped({})[0] == f"-XX:SharedArchiveFile={archive.path}"
    assert archive.mapped({jvm.DRIVER_OPTIONS: "-Xshare:off"}) == []
