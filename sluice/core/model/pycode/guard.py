"""An audit hook for processes that run project Python: read the project and Python's
own files, write nothing, start nothing, reach no network.

This is defence in depth, not the boundary: Python's audit hooks are not a sandbox (a
determined author can get around them). The boundary is the process: it starts with an
empty environment and limits, and the service keeps its secrets and state elsewhere
(``docs/security.md``). The hook makes the casual and the accidental fail loudly: a macro
that opens the state database, the App key or ``/proc/self/environ``, spawns a shell or
opens a socket gets :class:`PermissionError` naming what it tried.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_REFUSED_EVENTS = frozenset(
    {
        "subprocess.Popen",
        "os.system",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.fork",
        "os.forkpty",
        "os.kill",
        "os.killpg",
        "socket.connect",
        "socket.bind",
        "socket.sendto",
        "socket.sendmsg",
        "socket.getaddrinfo",
        "ctypes.dlopen",
        "ctypes.dlsym",
        "ctypes.cdata",
        "ctypes.call_function",
        "os.remove",
        "os.rename",
        "os.rmdir",
        "os.mkdir",
        "os.symlink",
        "os.link",
        "os.truncate",
        "os.chmod",
        "os.chown",
        "os.putenv",
        "os.unsetenv",
        "sys.settrace",
        "sys.setprofile",
        "sys._current_frames",
        "shutil.rmtree",
        "urllib.Request",
        "sqlite3.connect",
        "pty.spawn",
        "webbrowser.open",
    }
)
_REFUSED_IMPORTS = frozenset({"ctypes", "_ctypes", "_posixsubprocess", "_socket", "_sqlite3"})


def install(readable: Iterable[str]) -> None:
    """From now on, this process may read only under ``readable`` (and Python's own
    install), and may not do any of the refused events. Cannot be undone."""
    roots = tuple(
        os.path.realpath(p) + os.sep
        for p in {*readable, sys.prefix, sys.base_prefix, sys.exec_prefix, *sys.path}
        if p and os.path.isabs(p) and p not in ("/",)
    )

    def allowed(path: Any) -> bool:
        if isinstance(path, int):
            return True  # an already open descriptor (stdin, stdout)
        if isinstance(path, bytes):
            path = path.decode("utf-8", "replace")
        real = os.path.realpath(str(path))
        return real in ("/dev/null", "/dev/urandom") or any(
            real.startswith(r) or real + os.sep == r for r in roots
        )

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            path, mode, flags = ([*list(args), None, None, None])[:3]
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITE_FLAGS
            )
            if writes:
                raise PermissionError(f"project Python may not write files (it opened {path})")
            if not allowed(path):
                raise PermissionError(
                    f"project Python may read only the project's files (it opened {path})"
                )
        elif event in ("os.listdir", "os.scandir", "glob.glob"):
            path = args[0] if args else "."
            if path is not None and not allowed(path or "."):
                raise PermissionError(
                    f"project Python may list only the project's folders (it listed {path})"
                )
        elif event in _REFUSED_EVENTS:
            raise PermissionError(f"project Python may not do {event}")
        elif event == "import" and args and str(args[0]).split(".")[0] in _REFUSED_IMPORTS:
            raise PermissionError(f"project Python may not import {args[0]}")

    sys.addaudithook(hook)
