"""Which of a project's files Python can import, and the clean copy it imports them from.

A pull request controls every file of its tree, not only the ``*.py`` a reviewer reads:
Python's import system also loads bytecode (``__pycache__/*.pyc``, or a ``.pyc`` with no
source), extension modules (``.so``, ``.pyd``, which win over a ``.py`` of the same
name), and follows symbolic links. So:

- :func:`check_tree` refuses, on load, the kinds Python imports that are not source
  (bytecode, ``__pycache__/``, ``.pth``, extension modules) wherever an ``import`` could
  reach them, and every symbolic link that leaves the project or points into
  ``.sluice/``, each with its path and what to do.
- :func:`sources` is the project's Python: every ``*.py`` an ``import`` could reach from
  the project's folder (each folder on the way named like a package), and every one
  under models/ and macros/ (loaded by path). Their
  :func:`digest` is part of what a plan's review covers (``bot/flow/reviewed_plan.py``).
- The macro process and the Spark driver import nothing from the project's folder: a
  :class:`SourceImporter` holds exactly those sources (a clean copy, in memory) and is
  the only way they import the project's modules or load its macro and model files; no
  project folder is on their ``sys.path``, and no bytecode is read or written for them
  (the only bytecode these processes read is Python's and its installed packages' own).

>>> sorted(_IMPORTABLE_KINDS)
['.pth', '.pyc', '.pyd', '.pyo', '.so']
"""

from __future__ import annotations

import base64
import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sluice.core.errors import ModelError

STATE_FOLDER = ".sluice"
"""Sluice's own folder in a project (its caches): no link may point into it."""
_IMPORTABLE_KINDS = frozenset({".pyc", ".pyo", ".pth", ".so", ".pyd"})
_BYTECODE_FOLDER = "__pycache__"
# The folders the loader reads every file of: walked whatever their contents.
_BY_PATH = frozenset({"models", "macros"})
_LOADER_FOLDERS = frozenset({"models", "macros", "audits", "tests", "seeds", "external_models"})


def _importable(parts: tuple[str, ...]) -> bool:
    """Whether Python can load a folder's files (its path under the project, as parts):
    ``import`` when each part is a package name; by path anywhere under models/ and
    macros/ (the macro process and the driver load those files themselves)."""
    return (bool(parts) and parts[0] in _BY_PATH) or all(p.isidentifier() for p in parts)


def _skipped(parts: tuple[str, ...], path: str) -> bool:
    """Folders the loader never reads and Python never imports from: hidden ones
    (``.git``, ``.sluice``, ``.venv``) and a virtual environment at the top level."""
    if parts[-1].startswith("."):
        return True
    return (
        len(parts) == 1
        and parts[0] not in _LOADER_FOLDERS
        and os.path.exists(os.path.join(path, "pyvenv.cfg"))
    )


def _walk(root: Path) -> list[tuple[tuple[str, ...], str, list[str], list[str]]]:
    """(folder parts, folder path, sub-folders, files) of the project, symbolic links to
    folders listed with the files (never entered)."""
    found = []
    base = str(root)
    for folder, dirs, names in os.walk(base):
        rel = os.path.relpath(folder, base)
        parts = () if rel == "." else tuple(Path(rel).parts)
        linked = [d for d in dirs if os.path.islink(os.path.join(folder, d))]
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in linked and not _skipped((*parts, d), os.path.join(folder, d))
        )
        found.append((parts, folder, list(dirs), sorted([*names, *linked])))
    return found


def check_tree(root: Path) -> list[ModelError]:
    """What in the project Python could import without it being read as source, and the
    symbolic links that lead out of it (or into ``.sluice/``): one error each."""
    real = os.path.realpath(root)
    state = os.path.join(real, STATE_FOLDER)
    errors: list[ModelError] = []
    for parts, folder, dirs, names in _walk(root):
        importable = _importable(parts)
        for name in [*dirs, *names]:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                target = os.path.realpath(path)
                inside = target == real or target.startswith(real + os.sep)
                if not inside or target == state or target.startswith(state + os.sep):
                    where = "outside the project" if not inside else "into .sluice/"
                    errors.append(
                        ModelError(
                            f"the symbolic link {name} points {where} ({os.readlink(path)})",
                            path=path,
                            hint="replace the link with the file itself: Sluice reads only "
                            "the project's own files",
                        )
                    )
                    continue
            if not importable:
                continue
            if name == _BYTECODE_FOLDER:
                errors.append(
                    ModelError(
                        "a __pycache__ folder is in the project: Python would run the "
                        "bytecode in it instead of the reviewed source",
                        path=path,
                        hint="delete it and add `__pycache__/` to .gitignore (Sluice runs "
                        "only a project's .py files)",
                    )
                )
            elif Path(name).suffix.lower() in _IMPORTABLE_KINDS:
                kind = Path(name).suffix.lower()
                what = {".pth": "a path configuration file"}.get(
                    kind, "bytecode" if kind in (".pyc", ".pyo") else "an extension module"
                )
                errors.append(
                    ModelError(
                        f"{name} is {what} ({kind}), which Python could import instead of "
                        "reviewed source",
                        path=path,
                        hint="delete it: Sluice runs only a project's .py files (put "
                        "compiled code in a package the service's operator installs)",
                    )
                )
    return errors


def sources(root: Path) -> dict[str, bytes]:
    """The project's Python (relative POSIX path -> content): every ``*.py`` file that an
    ``import`` could reach from the project's folder or that is loaded by path (under
    models/ and macros/), read through links inside the project."""
    found: dict[str, bytes] = {}
    for parts, folder, _dirs, names in _walk(root):
        if not _importable(parts):
            continue
        for name in names:
            path = os.path.join(folder, name)
            if name.endswith(".py") and os.path.isfile(path):
                with open(path, "rb") as handle:
                    found["/".join((*parts, name))] = handle.read()
    return found


def digest(files: Mapping[str, bytes]) -> str | None:
    """One hash of ``files`` (path -> content); None for none."""
    if not files:
        return None
    hasher = hashlib.sha256()
    for rel in sorted(files):
        data = files[rel]
        hasher.update(f"{rel}\0{len(data)}\0".encode())
        hasher.update(data)
    return hasher.hexdigest()[:32]


class SourceImporter(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports a project's modules from ``files`` (relative path -> source), held in
    memory: no project folder is on ``sys.path``, and no bytecode is read or written for
    them. Code is compiled with the project's paths as file names, so tracebacks name
    the project's files and lines. ``sqlmesh`` (the shim) and ``sluice`` are never
    served from the project."""

    RESERVED = frozenset({"sqlmesh", "sluice"})

    def __init__(self, root: str, files: Mapping[str, bytes]) -> None:
        self.root = root
        self.files = dict(files)
        self.folders = {
            "/".join(rel.split("/")[:i]) for rel in self.files for i in range(1, rel.count("/") + 1)
        }
        self._rel: dict[str, str | None] = {}

    def install(self) -> None:
        """Put this importer before the one that searches ``sys.path`` (as the project's
        folder was: first on ``sys.path``, after the shim)."""
        at = next(
            (i for i, f in enumerate(sys.meta_path) if f is importlib.machinery.PathFinder),
            len(sys.meta_path),
        )
        sys.meta_path.insert(at, self)

    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.split(".", maxsplit=1)[0] in self.RESERVED:
            return None
        rel = fullname.replace(".", "/")
        for candidate, package in ((f"{rel}/__init__.py", True), (f"{rel}.py", False)):
            if candidate in self.files:
                return self._spec(fullname, candidate, package)
        if rel in self.folders:  # a folder without __init__.py: a namespace package
            return self._spec(fullname, None, True)
        return None

    def _spec(self, name: str, rel: str | None, package: bool) -> importlib.machinery.ModuleSpec:
        self._rel[name] = rel
        origin = os.path.join(self.root, rel) if rel is not None else None
        spec = importlib.machinery.ModuleSpec(name, self, origin=origin, is_package=package)
        if package:
            spec.submodule_search_locations = []
        spec.has_location = origin is not None
        return spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # the default module

    def exec_module(self, module: types.ModuleType) -> None:
        rel = self._rel.get(module.__name__)
        if rel is None:
            return  # a namespace package: nothing to run
        path = os.path.join(self.root, rel)
        exec(compile(self.files[rel], path, "exec", dont_inherit=True), module.__dict__)

    def load(self, rel: str, name: str) -> types.ModuleType:
        """Run the project file ``rel`` as module ``name`` (a macro or model file, which
        is loaded by path), registered in ``sys.modules`` first.

        Raises:
            FileNotFoundError: ``rel`` is not one of the files (e.g. behind a link to a
                folder, which is not followed).
        """
        if rel not in self.files:
            raise FileNotFoundError(
                f"{os.path.join(self.root, rel)} is not among the project's Python sources "
                "(a file behind a symbolic link to a folder, or in a hidden folder?)"
            )
        spec = self._spec(name, rel, False)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        self.exec_module(module)
        return module


def encode(files: Mapping[str, bytes]) -> dict[str, str]:
    """``files`` as JSON can carry them (base64)."""
    return {rel: base64.b64encode(data).decode("ascii") for rel, data in files.items()}


def decode(files: Mapping[str, str]) -> dict[str, bytes]:
    return {rel: base64.b64decode(data) for rel, data in files.items()}


def no_bytecode() -> None:
    """Make this process write no bytecode (it imports a project's modules from memory,
    and reads only Python's and its packages' own bytecode)."""
    sys.dont_write_bytecode = True
