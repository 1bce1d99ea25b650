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
