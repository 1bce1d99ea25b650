"""How a job's driver JVM starts: a class-data-sharing archive, and the operator's flags.

A cold Sluice job spends most of its start-up loading and verifying the classes of Spark,
Hive and DataNucleus (about 20 s of a 27 s ``count(*)`` on this repository's 2-core CI
machine). Java can write the classes a JVM loaded into an archive when it exits
(``-XX:ArchiveClassesAtExit``, JDK 13+) and map that archive into later JVMs
(``-XX:SharedArchiveFile``): the same job then starts in about half the time.
:class:`ClassArchive` keeps one archive per Java installation and Spark build in a cache
folder: the first job of a machine writes it (a few seconds more, once), every later
``spark-submit`` driver in client mode maps it. The JVM checks an archive against its own
version and class path and ignores one that does not match (``-Xshare:auto``), so a stale
archive costs speed, never correctness.

>>> archive = ClassArchive(Path("/tmp/cache"), key="0123abcd")
>>> archive.path.name
'spark-0123abcd.jsa'

``$SLUICE_JVM_CACHE`` names the cache folder (default ``~/.cache/sluice/jvm``; ``off``:
no archive); ``$SLUICE_DRIVER_JAVA_OPTIONS`` adds the operator's JVM flags to every
driver before the settings' own (e.g. ``-XX:TieredStopAtLevel=1``, which halves the CPU of
short jobs on small data and slows long ones; the test suite sets it). Both are read by
the process that starts jobs: a job's own environment never carries them.

Trust: the archive holds the same classes as Spark's jar files and is as trusted as they
are; it is written only by a job this process started and published by a rename in a
folder of the service's user. Processes of that user could replace it as they could the
jars, which is why docs/security.md asks for a separate user for drivers that run a
PR's Python. A prod driver writes the archive's folder while it dumps, so a JVM that maps
the archive is shown the file checked and held open (:meth:`ClassArchive.held`: a
regular file of one link, this user's, opened without following a link), bound into its
sandbox by that descriptor: a link renamed over the path after the check is never what
a sandbox shows.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import stat
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

CACHE_ENV = "SLUICE_JVM_CACHE"
OPTIONS_ENV = "SLUICE_DRIVER_JAVA_OPTIONS"
DRIVER_OPTIONS = "spark.driver.extraJavaOptions"

# Unified logging writes CDS notes ("Pre JDK 6 class not supported") to stdout, where the
# driver's events are: keep the JVM quiet about the archive.
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
# A dump that has not finished in this long was abandoned (its JVM killed).
_DUMP_STALE_S = 30 * 60
# Flags of the user's that choose class sharing themselves: theirs win.
_USER_SHARING = ("SharedArchiveFile", "ArchiveClassesAtExit", "-Xshare")


def operator_options(env: dict[str, str] | None = None) -> str:
    """The operator's JVM flags for every driver (``$SLUICE_DRIVER_JAVA_OPTIONS``)."""
    env = dict(os.environ) if env is None else env
    return " ".join(env.get(OPTIONS_ENV, "").split())


def add_options(conf: dict[str, str], flags: str) -> None:
    """Put ``flags`` before the driver JVM options already in ``conf``."""
    if not flags:
        return
    current = conf.get(DRIVER_OPTIONS, "").strip()
    conf[DRIVER_OPTIONS] = f"{flags} {current}".strip()


@dataclass
class ArchiveUse:
    """The flags one job's driver gets, and whether its JVM exited cleanly."""

    flags: list[str]
    clean: bool = False
    folder: Path | None = None
    """The archive's folder when the JVM writes the archive (a sandbox shows it writable)."""
    held: int | None = None
    """A descriptor of the archive the flags map, opened and checked (:func:`_hold`) while
    the flags were made: what a sandbox shows at :attr:`reads`, never the path looked up
    again (a prod driver writes the archive's folder and could rename a link there)."""

    @property
    def reads(self) -> list[Path]:
        """The archive file the flags map, if any (where a sandbox shows :attr:`held`)."""
        prefix = "-XX:SharedArchiveFile="
        return [Path(f[len(prefix) :]) for f in self.flags if f.startswith(prefix)]

    @property
    def binds(self) -> tuple[tuple[int, Path], ...]:
        """(descriptor, path) of the archive a sandbox shows read-only: the checked open
        file alone; nothing without one (the JVM then maps no archive: slower, same
        results)."""
        if self.held is None or not self.reads:
            return ()
        return ((self.held, self.reads[0]),)

    def changed(self) -> bool:
        """Whether the archive held (:attr:`held`, still open) is no longer the file at
        its path: removed, or another file or a link put there (a prod job publishing a
        new archive renames it over the old one). A sandbox binding it then does not
        start. False when nothing is held."""
        if self.held is None or not self.reads:
            return False
        try:
            held = os.fstat(self.held)
        except OSError:
            return False  # closed: nothing to say
        try:
            now = os.lstat(self.reads[0])
        except OSError:
            return True  # gone
        return held.st_nlink == 0 or (held.st_dev, held.st_ino) != (now.st_dev, now.st_ino)


@dataclass(frozen=True)
class ClassArchive:
    """One Java installation's and Spark build's class archive in ``folder``."""

    folder: Path
    key: str

    @classmethod
    def for_spark(
        cls, spark_home: Path, env: dict[str, str], folder: Path | None = None
    ) -> ClassArchive | None:
        """The archive for the Java that ``env`` starts and the jars under ``spark_home``,
        in ``folder`` (None: the cache's); None when the cache is off or Java cannot be
        found."""
        setting = os.environ.get(CACHE_ENV, "")
        if setting.strip().lower() == "off":
            return None
        java = _java(env)
        if java is None:
            return None
        if folder is None:
            folder = Path(setting).expanduser() if setting else Path.home() / ".cache/sluice/jvm"
        return cls(folder, _key(java, spark_home / "jars"))

    @property
    def path(self) -> Path:
        return self.folder / f"spark-{self.key}.jsa"

    @property
    def _claim(self) -> Path:
        return self.folder / f"spark-{self.key}.dumping"

    @contextlib.contextmanager
    def use(self, conf: dict[str, str]) -> Iterator[ArchiveUse]:
        """The driver flags that map the archive, or that write it when there is none yet.

        Yields an :class:`ArchiveUse` (no flags when the user's own options choose class
        sharing, or another job is writing the archive); the caller sets its ``clean``
        when the JVM exited by itself with status 0, and only then is a newly written
        archive published.
        """
        if self._users_own(conf) or _regular(self.path):
            with self.held(conf) as use:
                yield use
            return
        dump = self._start_dump()
        if dump is None:
            yield ArchiveUse([])
            return
        use = ArchiveUse([f"-XX:ArchiveClassesAtExit={dump}", *_QUIET.split()])
        try:
            yield use
            if use.clean:
                self._publish(dump)
        finally:
            with contextlib.suppress(OSError):
                dump.unlink()
            with contextlib.suppress(OSError):
                self._claim.unlink()

    def mapped(self, conf: dict[str, str]) -> list[str]:
        """The flags that map the archive when there is one, never writing it: for a JVM
        whose exit this process does not wait on (a Connect server, an in-process
        session)."""
        if self._users_own(conf):
            return []
        fd = _hold(self.path)
        if fd is None:
            return []  # none, or a link where the archive goes: never mapped
        os.close(fd)
        return self._map_flags()

    @contextlib.contextmanager
    def held(self, conf: dict[str, str]) -> Iterator[ArchiveUse]:
        """:meth:`mapped`'s flags with the archive held open while the context lasts
        (:attr:`ArchiveUse.held`), for a sandbox to bind that very file: the archive's
        folder is one a prod driver writes, so its path, checked now, could name a link
        by the time a sandbox is made."""
        fd = None if self._users_own(conf) else _hold(self.path)
        try:
            yield ArchiveUse(self._map_flags() if fd is not None else [], held=fd)
        finally:
            if fd is not None:
                os.close(fd)

    def _map_flags(self) -> list[str]:
        return [f"-XX:SharedArchiveFile={self.path}", *_QUIET.split()]

    @staticmethod
    def _users_own(conf: dict[str, str]) -> bool:
        """Whether the user's own driver options choose class sharing (theirs win)."""
        return any(word in conf.get(DRIVER_OPTIONS, "") for word in _USER_SHARING)

    def _start_dump(self) -> Path | None:
        """Claim the writing of the archive; None when a live claim is someone else's."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            try:
                fd = os.open(self._claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            except FileExistsError:
                age = time.time() - self._claim.stat().st_mtime
                if age < _DUMP_STALE_S:
                    return None
                self._claim.unlink()
                fd = os.open(self._claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            os.close(fd)
        except OSError as exc:
            logger.debug("no class archive in %s: %s", self.folder, exc)
            return None
        return self.folder / f"spark-{self.key}.{uuid.uuid4().hex}.tmp"

    def _publish(self, dump: Path) -> None:
        """Publish the file the JVM wrote at ``dump``, never what a link there names: the
        folder is one the driver may write (a sandbox shows it writable), so only a
        regular file of one link, owned by this process's user, is made read-only (on
        its descriptor) and renamed into place; anything else is discarded."""
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(dump, flags)
        except FileNotFoundError:  # no archive written (a JVM too old)
            return
        except OSError as exc:  # a link (ELOOP), or unreadable
            logger.warning("discarded the class archive dump %s: %s", dump, exc)
            return
        try:
            info = os.fstat(fd)
            own = stat.S_ISREG(info.st_mode) and info.st_nlink == 1
            if not own or info.st_uid != os.geteuid():
                logger.warning(
                    "discarded the class archive dump %s: not a regular file of one link "
                    "owned by this service's user",
                    dump,
                )
                return
            if info.st_size == 0:
                return
            os.fchmod(fd, 0o444)
            os.replace(dump, self.path)
            published = os.lstat(self.path)
            if (published.st_dev, published.st_ino) != (info.st_dev, info.st_ino):
                os.unlink(self.path)  # swapped between the check and the rename
                logger.warning("discarded the class archive dump %s: it changed", dump)
                return
            logger.info("wrote the driver JVM's class archive %s", self.path)
        except OSError as exc:  # a full disk
            logger.debug("no class archive published: %s", exc)
        finally:
            os.close(fd)


# A descriptor naming a file without opening it for reading (a FIFO never blocks); where
# Linux's O_PATH is missing, a non-blocking read.
_PATH_ONLY = getattr(os, "O_PATH", os.O_RDONLY | os.O_NONBLOCK)


def _hold(path: Path) -> int | None:
    """A descriptor of the archive at ``path`` if it is one this service may map: a
    regular file itself (opened without following a link, in a folder opened the same
    way), of one link (no hard link to a file another folder holds), this user's, not
    empty. None otherwise. The caller closes it."""
    nofollow = _PATH_ONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        folder = os.open(path.parent, nofollow | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return None
    try:
        fd = os.open(path.name, nofollow, dir_fd=folder)
    except OSError:
        return None
    finally:
        os.close(folder)
    try:
        info = os.fstat(fd)
    except OSError:
        info = None
    if (
        info is not None
        and stat.S_ISREG(info.st_mode)
        and info.st_nlink == 1
        and info.st_uid == os.geteuid()
        and info.st_size > 0
    ):
        return fd
    os.close(fd)
    return None


def _regular(path: Path) -> bool:
    """Whether ``path`` is a regular file itself (not a link to one)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def spark_home() -> Path:
    """The installed PySpark's Spark (``bin/spark-submit``, ``jars/``); no JVM starts."""
    import pyspark

    return Path(pyspark.__file__).parent


def map_existing(conf: dict[str, str], env: dict[str, str], folder: Path | None = None) -> None:
    """Add to ``conf`` the driver flags mapping the archive (in ``folder``, None: the
    cache's), if one was written already."""
    archive = ClassArchive.for_spark(spark_home(), env, folder)
    if archive is not None:
        add_options(conf, " ".join(archive.mapped(conf)))


def _java(env: dict[str, str]) -> Path | None:
    home = env.get("JAVA_HOME")
    if home:
        java = Path(home) / "bin" / "java"
        return java.resolve() if java.is_file() else None
    found = shutil.which("java", path=env.get("PATH", os.defpath))
    return Path(found).resolve() if found else None


def _key(java: Path, jars: Path) -> str:
    """What the archive depends on: the Java binary and Spark's jar files (name, size,
    time), so a new Java or Spark gets an archive of its own."""
    digest = hashlib.sha256()
    for path in [java, *sorted(jars.glob("*.jar"))]:
        with contextlib.suppress(OSError):
            stat = path.stat()
            digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]
