"""Writing a commit's files from a tar archive without letting it reach outside the tree.

Every forge fetches a commit as a tar archive (GitHub's tarball, ``git archive`` for the
local forge) and extracts it here: each member is checked before anything is written
(absolute paths, ``..``, special files, links leaving the tree, a size limit), then
tarfile's ``data`` filter checks again on disk (a link that escapes through another link).
"""

from __future__ import annotations

import posixpath
import re
import tarfile
from pathlib import Path
from typing import IO

from sluice.bot.forge.base import ForgeError, UnusableTree

_ABSOLUTE = re.compile(r"^(?:[/\\]|[A-Za-z]:)")


def extract(
    archive: IO[bytes], dest: Path, *, forge: str, sha: str, strip_top: bool = False,
    limit: int | None = None,
) -> None:  # fmt: skip
    """Write the files of commit ``sha`` from ``archive`` into ``dest``.

    Args:
        forge: Starts every message (``GitHub``, ``local``).
        strip_top: Every member lies under one top directory (GitHub's tarball), which is
            dropped.
        limit: The most bytes the regular files may hold together.

    Raises:
        UnusableTree: a member is unsafe, or the files are over ``limit``; nothing written.
        ForgeError: the archive cannot be read or written.
    """
    what = f"{forge}: the archive of {sha}"
    try:
        with tarfile.open(fileobj=archive, mode="r:*") as tar:
            members = checked_members(tar.getmembers(), forge=forge, sha=sha,
                                      strip_top=strip_top, limit=limit)  # fmt: skip
            tar.extractall(dest, members=members, filter="data")
    except tarfile.FilterError as error:
        member = getattr(error, "tarinfo", None)
        named = member.name if member is not None else "?"
        raise UnusableTree(f"{what} has an unsafe member {named!r}: {error}") from None
    except (tarfile.TarError, EOFError, OSError) as error:
        raise ForgeError(f"{what} cannot be read or written: {error}") from None


def checked_members(
    members: list[tarfile.TarInfo], *, forge: str, sha: str, strip_top: bool = False,
    limit: int | None = None,
) -> list[tarfile.TarInfo]:  # fmt: skip
    """The members to write (renamed without the top directory with ``strip_top``); the
    first unsafe one raises :class:`UnusableTree`."""
    what = f"{forge}: the archive of {sha}"

    def refuse(member: tarfile.TarInfo, why: str) -> UnusableTree:
        return UnusableTree(f"{what} has an unsafe member {member.name!r}: {why}")

    top: str | None = None
    kept: list[tarfile.TarInfo] = []
    total = 0
    for member in members:
        name = member.name
        if _ABSOLUTE.match(name):
            raise refuse(member, "absolute path")
        if ".." in re.split(r"[/\\]", name):
            raise refuse(member, "'..' in the path")
        parts = [p for p in name.split("/") if p not in ("", ".")]
        if strip_top:
            if not parts:
                raise refuse(member, "empty path")
            if top is None:
                top = parts[0]
            elif parts[0] != top:
                raise refuse(member, f"outside the archive's single top directory {top!r}")
            parts = parts[1:]
            if not parts:
                continue  # the top directory itself
        if not (member.isreg() or member.isdir() or member.issym() or member.islnk()):
            raise refuse(member, "device, fifo or other special file")
        relative = "/".join(parts)
        if member.issym() or member.islnk():
            target = member.linkname
            if _ABSOLUTE.match(target):
                raise refuse(member, f"link to the absolute path {target!r}")
            if member.issym():  # relative to the link's folder
                resolved = posixpath.normpath(posixpath.join(posixpath.dirname(relative), target))
            else:  # a hard link names a member of the archive
                target_parts = [p for p in target.split("/") if p not in ("", ".")]
                if strip_top:
                    if not target_parts or target_parts[0] != top:
                        raise refuse(member, f"link {target!r} points outside the tree")
                    target_parts = target_parts[1:]
                    member.linkname = "/".join(target_parts)
                resolved = posixpath.normpath("/".join(target_parts) or ".")
            if resolved == ".." or resolved.startswith("../"):
                raise refuse(member, f"link {target!r} points outside the tree")
        total += max(member.size, 0) if member.isreg() else 0
        if limit is not None and total > limit:
            raise UnusableTree(
                f"{forge}: the files of {sha} are larger than the limit of {limit} bytes",
                hint="raise the work directory limit, or keep large files out of the repository",
            )
        member.name = relative
        kept.append(member)
    return kept
