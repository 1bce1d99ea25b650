"""Writing a commit's files from a tar archive without letting it reach outside the tree,
or grow past the service's limits.

Every forge fetches a commit as a tar archive (GitHub's tarball, GitLab's archive,
``git archive`` for the local forge) and extracts it here, one member at a time as the
archive streams in: each member's header is checked before its data is read (absolute
paths, ``..``, special files, links leaving the tree, and the :class:`TreeLimits`), then
tarfile's ``data`` filter checks again on disk (a link that escapes through another
link). The first member over a limit stops the extraction: a gzip bomb (a small archive
of a huge file) is refused at the huge file's header, having decompressed a few blocks.
Members are written to a staging folder beside ``dest`` and moved into ``dest`` only once
the whole archive passed, so a refused archive leaves nothing.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import posixpath
import re
import shutil
import stat
import tarfile
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import IO, Any, cast

from sluice.bot.forge.base import ForgeError, UnusableTree

_ABSOLUTE = re.compile(r"^(?:[/\\]|[A-Za-z]:)")
MIB = 1024 * 1024
HEADER_LIMIT = 64 * 1024
"""The largest extended header (pax, GNU long name) read: tarfile holds one in memory."""
HEADER_RUN = 8
"""The most extended headers in a row (a member needs two or three)."""


@dataclass(frozen=True)
class TreeLimits:
    """How large the files of one commit may be: settings of the Sluice service (never of
    a repository), checked on each member's header as the archive streams in.

    Attributes:
        total_bytes: The regular files together.
        file_bytes: One regular file.
        files: Members (files, folders and links).
        depth: Folders a path may go down, its file included (``a/b/c.sql``: 3).
        path_chars: Characters in a path.
    """

    total_bytes: int = 200 * MIB
    file_bytes: int = 50 * MIB
    files: int = 50_000
    depth: int = 32
    path_chars: int = 1024


TREE_LIMITS = TreeLimits()
"""The defaults (a SQL project's repository is far smaller)."""

_WHAT = {
    "total_bytes": "bytes of all files together",
    "file_bytes": "bytes per file",
    "files": "files, folders and links",
    "depth": "folders deep",
    "path_chars": "characters per path",
}
assert set(_WHAT) == {f.name for f in fields(TreeLimits)}


class _Refused(Exception):
    """A member tarfile was asked to read is refused (raised from inside tarfile)."""


class _SafeTarInfo(tarfile.TarInfo):
    """tarfile's member, refusing before they are read the headers tarfile would hold in
    memory whole (a pax or GNU long-name header of any declared size) and sparse files
    (whose maps it reads whole, and whose size is not what they write)."""

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type == tarfile.GNUTYPE_SPARSE:
            raise _Refused(f"{self.name!r} is a sparse file")
        special = (
            tarfile.GNUTYPE_LONGNAME,
            tarfile.GNUTYPE_LONGLINK,
            tarfile.XHDTYPE,
            tarfile.XGLTYPE,
            tarfile.SOLARIS_XHDTYPE,
        )
        if self.type in special:
            if self.size > HEADER_LIMIT:
                raise _Refused(
                    f"an extended header of {self.size:,} bytes (at most {HEADER_LIMIT:,} are read)"
                )
            # tarfile reads a run of them recursively, one frame each.
            run = getattr(tarfile_, "_sluice_run", 0) + 1
            if run > HEADER_RUN:
                raise _Refused(f"more than {HEADER_RUN} extended headers in a row")
            setattr(tarfile_, "_sluice_run", run)  # noqa: B010
        else:
            setattr(tarfile_, "_sluice_run", 0)  # noqa: B010
        return super()._proc_member(tarfile_)  # type: ignore[misc,no-any-return]

    def _proc_gnusparse_00(self, *args: Any) -> None:
        raise _Refused("a sparse file")

    def _proc_gnusparse_01(self, *args: Any) -> None:
        raise _Refused("a sparse file")

    def _proc_gnusparse_10(self, *args: Any) -> None:
        raise _Refused("a sparse file")


class _Budget:
    """The uncompressed archive, read through a ceiling: what any archive within the
    limits needs (its files, and a header and padding per member), and no more."""

    def __init__(self, raw: IO[bytes], ceiling: int) -> None:
        self.raw, self.left = raw, ceiling

    def read(self, size: int = -1) -> bytes:
        if size < 0 or size > self.left + 1:
            size = self.left + 1
        data = self.raw.read(size)
        self.left -= len(data)
        if self.left < 0:
            raise _Refused("the archive holds more than its files (headers, padding) allow")
        return data


class _Head:
    """``raw`` with its first bytes read already (to tell its compression)."""

    def __init__(self, head: bytes, raw: IO[bytes]) -> None:
        self.head, self.raw = head, raw

    def read(self, size: int = -1) -> bytes:
        if self.head:
            data = self.head if size < 0 else self.head[:size]
            self.head = self.head[len(data) :]
            if size < 0:
                return data + self.raw.read()
            return data
        return self.raw.read(size)


def _uncompressed(archive: IO[bytes]) -> IO[bytes]:
    """``archive`` decompressed as it is read (gzip, bzip2, xz or none)."""
    head = archive.read(6)
    raw: Any = _Head(head, archive)
    if head.startswith(b"\x1f\x8b"):
        return cast(IO[bytes], gzip.GzipFile(fileobj=raw, mode="rb"))
    if head.startswith(b"BZh"):
        return bz2.BZ2File(raw, mode="rb")
    if head.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(raw, mode="rb")
    return cast(IO[bytes], raw)


def extract(
    archive: IO[bytes],
    dest: Path,
    *,
    forge: str,
    sha: str,
    strip_top: bool = False,
    limits: TreeLimits = TREE_LIMITS,
) -> None:
    """Write the files of commit ``sha`` from ``archive`` (read once, front to back: a pipe
    will do) into ``dest``.

    Args:
        forge: Starts every message (``GitHub``, ``local``).
        strip_top: Every member lies under one top directory (GitHub's tarball), which is
            dropped.
        limits: The service's limits on the files; the first member over one stops it.

    Raises:
        UnusableTree: a member is unsafe, or over a limit; nothing is left in ``dest``.
        ForgeError: the archive cannot be read or written.
    """
    what = f"{forge}: the archive of {sha}"
    check = _Check(forge=forge, sha=sha, strip_top=strip_top, limits=limits)
    dest.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".partial", dir=dest.parent))
    ceiling = limits.total_bytes + (limits.files + 2) * 3 * tarfile.BLOCKSIZE + 2 * HEADER_LIMIT
    try:
        stream = cast(IO[bytes], _Budget(_uncompressed(archive), ceiling))
        with tarfile.open(fileobj=stream, mode="r|", tarinfo=_SafeTarInfo) as tar:
            for member in tar:
                kept = check.member(member)
                if kept is not None:  # folders' modes are not kept: they stay writable
                    tar.extract(kept, stage, set_attrs=not kept.isdir(), filter="data")
        for entry in stage.iterdir():
            os.replace(entry, dest / entry.name)
    except _Refused as refused:
        raise UnusableTree(f"{what} is refused: {refused}") from None
    except tarfile.FilterError as error:
        bad = getattr(error, "tarinfo", None)
        named = bad.name if bad is not None else "?"
        raise UnusableTree(f"{what} has an unsafe member {named!r}: {error}") from None
    except (tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError) as error:
        raise ForgeError(f"{what} cannot be read or written: {error}") from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)


class _Check:
    """Each member's checks, in the archive's order; see :func:`checked_members`."""

    def __init__(self, *, forge: str, sha: str, strip_top: bool, limits: TreeLimits) -> None:
        self.forge, self.sha, self.strip_top, self.limits = forge, sha, strip_top, limits
        self.top: str | None = None
        self.count = 0
        self.total = 0

    def refuse(self, member: tarfile.TarInfo, why: str) -> UnusableTree:
        return UnusableTree(
            f"{self.forge}: the archive of {self.sha} has an unsafe member {member.name!r}: {why}"
        )

    def over(self, limit: str, said: str) -> UnusableTree:
        value = getattr(self.limits, limit)
        return UnusableTree(
            f"{self.forge}: the files of {self.sha} are over a limit of this Sluice service: "
            f"{said}; the limit is {value:,} {_WHAT[limit]} (SLUICE_TREE_{limit.upper()}, a "
            "setting of the service, not of the repository)",
            hint="keep large or generated files out of the repository, or ask the operator of "
            "the Sluice service to raise the limit",
        )

    def member(self, member: tarfile.TarInfo) -> tarfile.TarInfo | None:
        """``member`` renamed as it is written (without the top directory with
        ``strip_top``), or None when nothing is written for it (the top directory).

        Raises:
            UnusableTree: the member is unsafe, or over a limit.
        """
        name = member.name
        if _ABSOLUTE.match(name):
            raise self.refuse(member, "absolute path")
        if ".." in re.split(r"[/\\]", name):
            raise self.refuse(member, "'..' in the path")
        parts = [p for p in name.split("/") if p not in ("", ".")]
        if self.strip_top:
            if not parts:
                raise self.refuse(member, "empty path")
            if self.top is None:
                self.top = parts[0]
            elif parts[0] != self.top:
                raise self.refuse(
                    member, f"outside the archive's single top directory {self.top!r}"
                )
            parts = parts[1:]
            if not parts:
                return None  # the top directory itself
        if not (member.isreg() or member.isdir() or member.issym() or member.islnk()):
            raise self.refuse(member, "device, fifo or other special file")
        relative = "/".join(parts)
        self.counted(relative, len(parts))
        if member.issym() or member.islnk():
            target = member.linkname
            if _ABSOLUTE.match(target):
                raise self.refuse(member, f"link to the absolute path {target!r}")
            if member.issym():  # relative to the link's folder
                resolved = posixpath.normpath(posixpath.join(posixpath.dirname(relative), target))
            else:  # a hard link names a member of the archive
                target_parts = [p for p in target.split("/") if p not in ("", ".")]
                if self.strip_top:
                    if not target_parts or target_parts[0] != self.top:
                        raise self.refuse(member, f"link {target!r} points outside the tree")
                    target_parts = target_parts[1:]
                    member.linkname = "/".join(target_parts)
                resolved = posixpath.normpath("/".join(target_parts) or ".")
            if resolved == ".." or resolved.startswith("../"):
                raise self.refuse(member, f"link {target!r} points outside the tree")
        if member.isreg():
            self.sized(relative, max(member.size, 0))
        member.name = relative
        return member

    def counted(self, relative: str, depth: int) -> None:
        """One more member, at ``relative`` (``depth`` parts): within the limits?"""
        limits = self.limits
        self.count += 1
        if self.count > limits.files:
            raise self.over(
                "files", f"it holds more than {limits.files:,} files, folders and links"
            )
        if len(relative) > limits.path_chars:
            raise self.over(
                "path_chars", f"a path is {len(relative):,} characters ({relative[:60]!r}...)"
            )
        if depth > limits.depth:
            raise self.over("depth", f"{relative[:200]!r} is {depth} folders deep")

    def sized(self, relative: str, size: int) -> None:
        """A regular file of ``size`` bytes: within the limits, alone and with the rest?"""
        if size > self.limits.file_bytes:
            raise self.over("file_bytes", f"{relative[:200]!r} is {size:,} bytes")
        self.total += size
        if self.total > self.limits.total_bytes:
            raise self.over(
                "total_bytes", f"the files reach {self.total:,} bytes at {relative[:200]!r}"
            )


def checked_members(
    members: list[tarfile.TarInfo],
    *,
    forge: str,
    sha: str,
    strip_top: bool = False,
    limits: TreeLimits = TREE_LIMITS,
) -> list[tarfile.TarInfo]:
    """The members to write (renamed without the top directory with ``strip_top``); the
    first unsafe one, or the first over a limit, raises :class:`UnusableTree`."""
    check = _Check(forge=forge, sha=sha, strip_top=strip_top, limits=limits)
    return [kept for member in members if (kept := check.member(member)) is not None]


def check_folder(
    root: Path,
    *,
    forge: str,
    sha: str,
    limits: TreeLimits = TREE_LIMITS,
    skip: Callable[[str], bool] = lambda _name: False,
) -> None:
    """Hold the files of a checked-out folder (the Action's workspace) to the limits an
    archive of them would be held to; folders and files whose name ``skip`` accepts are
    left out. Links are counted, not followed.

    Raises:
        UnusableTree: the first limit reached, named as for an archive.
    """
    check = _Check(forge=forge, sha=sha, strip_top=False, limits=limits)
    for folder, folders, files in os.walk(root):
        folders[:] = sorted(name for name in folders if not skip(name))
        here = Path(folder).relative_to(root)
        for name in folders + sorted(name for name in files if not skip(name)):
            relative = (here / name).as_posix()
            check.counted(relative, len(Path(relative).parts))
            info = os.lstat(Path(folder, name))
            if stat.S_ISREG(info.st_mode):
                check.sized(relative, info.st_size)
