"""An audit hook for processes that run project Python: read the project and Python's
own files, write nothing, start nothing, reach no network.

This is defence in depth, not the boundary: Python's audit hooks are not a sandbox (a
determined author can get around them). The boundary is the process: it starts with an
empty environment and limits, and the service keeps its secrets and state elsewhere
(``docs/security.md``). The hook makes the casual and the accidental fail loudly: a macro
that opens the state database, the App key or ``/proc/self/environ``, spawns a shell or
opens a socket gets :class:`PermissionError` naming what it tried (an import it refuses,
``ctypes`` or ``_sqlite3``, an :class:`ImportError`, as a missing module would). Libraries
may import ``subprocess`` and ``socket`` (they are imported before the hook, the one way
to start a process that raises no event taken away); using them stays refused.

What the hook decides with is bound at :func:`install` into its own closure, immutable
values only (the module's sets can be rebound, not what the hook holds), and the ways to
the hook's function object and its cells are refused (``gc.get_objects``,
``gc.get_referrers``, ``gc.get_referents``): a traceback's frame of the hook shows its
values, never a function whose cells could be rewritten.
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
        # The folder a relative path is read from stays the project's: with another one,
        # a path relative to an open folder (dir_fd) reads elsewhere than the hook checks.
        "os.chdir",
        "sys.settrace",
        "sys.setprofile",
        "sys._current_frames",
        "shutil.rmtree",
        "urllib.Request",
        "sqlite3.connect",
        "pty.spawn",
        "webbrowser.open",
        # A new interpreter starts without this hook (hooks are per interpreter).
        "cpython.PyInterpreterState_New",
        # Bytecode written by hand reads and writes memory past the hook (compile() is
        # how Python code is made; a code object built field by field is not needed; the
        # hook lets types.coroutine through, which only sets a flag: asyncio uses it).
        "code.__new__",
        # The way to the hook's function, and so its closure's cells, from its code.
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
    }
)
_REFUSED_IMPORTS = frozenset(
    {
        "ctypes",
        "_ctypes",
        "_posixsubprocess",
        "_socket",
        "_sqlite3",
        "_xxsubinterpreters",
        "_testcapi",
        "_testinternalcapi",
    }
)
_REFUSED_NATIVE = frozenset(
    {
        "_ctypes_test",
        "_testbuffer",
        "_testmultiphase",
        "_testimportmultiple",
        "_testclinic",
        "_xxtestfuzz",
        "xxsubtype",
        "xxlimited",
        "xxlimited_35",
        "_posixshmem",
        "_dbm",
        "_gdbm",
        "_tkinter",
        "readline",
        "_curses",
        "_curses_panel",
    }
)
"""Python's own compiled modules a project has no use for (tests of the C API, shared
memory, databases on disk, terminals), refused besides :data:`_REFUSED_IMPORTS`."""
_PRELOADED = ("subprocess", "socket")
"""Imported before the hook: libraries import them when they are imported (ibis does,
through ``webbrowser`` and ``email.utils``), and what they do is refused by its events."""


def _refused_fork_exec(*args: object, **kwargs: object) -> None:
    raise PermissionError("project Python may not do subprocess.Popen")


def _preload() -> None:
    """Import :data:`_PRELOADED` now, and take away ``_posixsubprocess.fork_exec``, the one
    way to start a process that raises no audit event of its own: from then on the module
    held in ``sys.modules`` has a refusal in its place, and making the module again is an
    import the hook refuses."""
    import importlib

    for name in _PRELOADED:
        importlib.import_module(name)
    import _posixsubprocess
    import subprocess

    _posixsubprocess.fork_exec = _refused_fork_exec  # type: ignore[assignment]
    subprocess._fork_exec = _refused_fork_exec  # type: ignore[attr-defined]


def install(readable: Iterable[str], native: Iterable[str] = ()) -> None:
    """From now on, this process may read only under ``readable`` (and Python's own
    install), may load compiled modules only from Python's own ``lib-dynload`` and the
    folders ``native`` names, and may not do any of the refused events. Cannot be undone.

    Compiled code is not bound by the hook (a library's C calls ``fork``, ``connect`` or
    writes memory without an event: uvloop, cffi, numpy with pyarrow can switch the hook
    off), so a compiled module from anywhere else is an :class:`ImportError`, as a missing
    one: a library that only tries it goes on without it."""
    _preload()
    import _posixsubprocess
    import importlib.machinery

    dynload = os.path.dirname(os.path.realpath(str(_posixsubprocess.__file__)))
    native_roots = tuple(os.path.realpath(p) + os.sep for p in (dynload, *native))
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    refused_native = frozenset(_REFUSED_NATIVE)
    import types

    coroutine_code, getframe = types.coroutine.__code__, sys._getframe
    types_globals = types.__dict__
    roots = tuple(
        os.path.realpath(p) + os.sep
        for p in {*readable, sys.prefix, sys.base_prefix, sys.exec_prefix, *sys.path}
        if p and os.path.isabs(p) and p not in ("/",)
    )
    # Locals, bound now: rebinding the module's names later changes nothing here.
    refused_events = frozenset(_REFUSED_EVENTS)
    refused_imports = frozenset(_REFUSED_IMPORTS)
    write_flags = _WRITE_FLAGS
    realpath, isabs, sep = os.path.realpath, os.path.isabs, os.sep
    import pathlib

    path_types = (pathlib.PosixPath, pathlib.PurePosixPath, os.DirEntry)

    # One function, no helper: a helper would be a closure a frame of the hook shows.
    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "open" or event in ("os.listdir", "os.scandir", "glob.glob"):
            if event == "open":
                path, mode, flags = ([*list(args), None, None, None])[:3]
                if (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                    isinstance(flags, int) and flags & write_flags
                ):
                    raise PermissionError(f"project Python may not write files (it opened {path})")
            else:
                path = args[0] if args else "."
                if path is None:
                    return
                path = path or "."
            if type(path) is int:
                return  # an already open descriptor (stdin, stdout)
            if type(path) not in (str, bytes):
                # never the object's own __str__/__fspath__: what it says may not be what
                # the call uses (a str subclass's data, a path-like's second answer)
                if type(path) in path_types:
                    path = os.fspath(path)
                else:
                    raise PermissionError(
                        f"project Python may not open {type(path).__name__} paths"
                    )
            if isinstance(path, bytes):
                path = path.decode("utf-8", "replace")
            path = str(path)
            if not isabs(path) and (sep + ".." + sep) in (sep + path + sep):
                # ``..`` in a relative path: relative to an open folder (``dir_fd``), it
                # leaves what the hook resolves against (the current folder).
                raise PermissionError(f"project Python may not open {path} (a path with ..)")
            real = realpath(path)
            if real in ("/dev/null", "/dev/urandom") or any(
                real.startswith(r) or real + sep == r for r in roots
            ):
                return
            if event == "open":
                raise PermissionError(
                    f"project Python may read only the project's files (it opened {path})"
                )
            raise PermissionError(
                f"project Python may list only the project's folders (it listed {path})"
            )
        if event in refused_events:
            caller = getframe(1) if event == "code.__new__" else None
            if (
                caller is not None
                and caller.f_code is coroutine_code
                and caller.f_globals is types_globals
            ):
                return  # @types.coroutine: the function's own code, one flag set
            raise PermissionError(f"project Python may not do {event}")
        if event == "import" and args:
            name = str(args[0])
            parts = name.split(".")
            top = parts[0]
            # the first part names the package, the last the PyInit_ a compiled module has
            if top in refused_imports or parts[-1] in refused_imports:
                # An ImportError, as where the module is missing: a library that imports it
                # only if it can (dateutil's Windows zones, which ibis loads) goes on.
                raise ImportError(f"project Python may not import {name}", name=name)
            # A compiled module's file is the event's second argument (_imp.create_dynamic).
            file = args[1] if len(args) > 1 else None
            if file is not None:
                # every file this event names is compiled code (_imp.create_dynamic); a plain
                # str only (a subclass's methods are the author's), resolved as dlopen will
                real = realpath(file) if type(file) is str else ""
                if (
                    real != file  # a path dlopen resolves as the hook did: no link, no /proc
                    or top in refused_native
                    or parts[-1] in refused_native
                    or not real.endswith(suffixes)
                    or not real.startswith(native_roots)
                ):
                    raise ImportError(
                        f"project Python may not load compiled code ({name}, {file})", name=name
                    )

    sys.addaudithook(hook)
