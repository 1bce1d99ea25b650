"""The audit hook of processes that run project Python holds what it decides with itself:
rebinding the guard module's sets changes nothing, ``gc`` cannot lead to the hook's
function (and so its cells), and a traceback's frame of the hook shows only immutable
values. (Defence in depth: the boundary is the sandboxed process, docs/security.md.)"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parents[2])

PROBE = """\
import gc, json, os, sys
sys.path.insert(0, sys.argv[1])
from sluice.core.model.pycode import guard

guard.install([sys.argv[2]])
# Rebinding the module's names afterwards: what the hook holds stays.
guard._REFUSED_EVENTS = frozenset()
guard._REFUSED_IMPORTS = frozenset()
guard._WRITE_FLAGS = 0
found = {}

def attempt(name, do):
    try:
        do()
        found[name] = "done"
    except PermissionError as exc:
        found[name] = "refused"
        return exc

attempt("os.kill", lambda: os.kill(os.getpid(), 0))
attempt("gc.get_objects", gc.get_objects)
attempt("gc.get_referrers", lambda: gc.get_referrers(guard))
attempt("gc.get_referents", lambda: gc.get_referents(guard))
error = attempt("read", lambda: open("/etc/hostname", "rb"))
tb, cells = error.__traceback__, []
while tb is not None:
    if tb.tb_frame.f_code.co_name == "hook":
        for value in tb.tb_frame.f_locals.values():
            if getattr(value, "__closure__", None):
                cells.append(repr(value))
    tb = tb.tb_next
found["functions with cells"] = cells
print(json.dumps(found))
"""


def test_the_hook_holds_its_refusals_and_cannot_be_reached_to_rewrite(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-I", "-c", textwrap.dedent(PROBE), ROOT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(done.stdout) == {
        "os.kill": "refused",
        "gc.get_objects": "refused",
        "gc.get_referrers": "refused",
        "gc.get_referents": "refused",
        "read": "refused",
        "functions with cells": [],
    }


_DIR_FD = textwrap.dedent("""
    import os
    here = os.getcwd()
    root = os.open(here, os.O_RDONLY)
    up = "../" * len([p for p in here.split("/") if p])
    try:
        os.chdir(os.path.join(here, *["d"] * 12))
        moved = "moved"
    except PermissionError as exc:
        moved = str(exc)
    try:
        fd = os.open(up + "etc/passwd", os.O_RDONLY, dir_fd=root)
        read = os.read(fd, 5).decode()
    except PermissionError as exc:
        read = str(exc)
    raise ValueError(moved + " | " + read)
""")


def test_a_path_relative_to_an_open_folder_cannot_leave_the_project(tmp_path: Path) -> None:
    # Red team, round 3: the hook resolves a path against the current folder, os.open's
    # dir_fd reads relative to another: config.py moved deep into the project and read
    # '../'*n + 'etc/passwd' relative to the project's root, whose text came back in its
    # error (the PR's comment). Moving is refused, and so is '..' in a relative path.
    from sluice.core.errors import ConfigError
    from sluice.core.model.pycode import config_file

    root = tmp_path / "p"
    (root / "models").mkdir(parents=True)
    (root / "models" / "a.sql").write_text("MODEL (name s.a, kind FULL);\nSELECT 1 AS id\n")
    root.joinpath(*["d"] * 12).mkdir(parents=True)
    (root / "config.py").write_text(_DIR_FD)
    with pytest.raises(ConfigError) as caught:
        config_file.read(root)
    text = str(caught.value)
    assert "may not do os.chdir" in text and "(a path with ..)" in text, text
    assert "root:" not in text
