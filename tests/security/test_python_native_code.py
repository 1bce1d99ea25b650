"""Compiled code and oversized answers from a project's Python (red team, round 5).

The macro process's audit hook sees what Python does, not what compiled code does: a
library's C can start a process (uvloop's libuv), call any C function (cffi), or read and
write memory and so switch the hook off (numpy with pyarrow). So after the guard is
installed a compiled module loads only from Python's own ``lib-dynload`` and sqlglot's
folder (``guard.install``'s ``native``), and a code object built by hand is refused. The
service keeps only bounded answers: :data:`macros.VALUE_ITEMS` JSON items of values per
load, nested no deeper than the child writes.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from sluice.core.errors import ModelError
from sluice.core.model.macro.registry import MacroError
from sluice.core.model.pycode.macros import VALUE_ITEMS, PythonMacros
from sluice.core.model.pycode.models import Evaluation

# numpy's import sets os.environ (os.putenv, a refused event): a hostile macro drops them.
_QUIET_ENV = "import os\nos.putenv = lambda k, v: None\nos.unsetenv = lambda k: None\n"


def _project(root: Path, macro_file: str) -> Path:
    (root / "macros").mkdir(parents=True)
    (root / "config.yaml").write_text("model_defaults:\n  dialect: spark\n")
    (root / "macros" / "m.py").write_text(textwrap.dedent(macro_file))
    return root


def _probe(root: Path, body: str) -> dict[str, object]:
    """Run ``body`` (it fills ``out``) in a macro, in the real sandboxed process."""
    macro = "from sqlmesh import macro\nimport json\n\n@macro()\ndef probe(evaluator):\n"
    macro += "    out = {}\n" + textwrap.indent(textwrap.dedent(body), "    ")
    macro += "\n    return json.dumps(out)\n"
    _project(root, macro)
    process = PythonMacros(root)
    try:
        process.start([root / "macros" / "m.py"], {})
        process.check()
        try:
            return dict(json.loads(process.call("probe", [], {}, "spark")[0]))
        except MacroError as exc:
            return {"refused": exc.message}
    finally:
        process.close()


@pytest.mark.parametrize(
    ("library", "use"),
    [
        # libuv starts the process: no subprocess.Popen event, no _posixsubprocess
        ("uvloop", "import asyncio\nout['ran'] = uvloop.run(asyncio.sleep(0, 'ran'))"),
        ("_cffi_backend", "out['ran'] = _cffi_backend.load_library(None) is not None"),
        ("pyarrow.fs", "out['ran'] = pyarrow.fs.LocalFileSystem().get_file_info('/').path"),
        ("numpy", "out['ran'] = int(numpy.frombuffer(b'ab', 'u1').sum())"),
    ],
)
def test_a_compiled_library_outside_python_s_own_is_refused(
    tmp_path: Path, library: str, use: str
) -> None:
    found = _probe(
        tmp_path / "p",
        f"""
        {textwrap.indent(_QUIET_ENV, "        ").strip()}
        try:
            import {library}
        except ImportError as exc:
            out["refused"] = str(exc)
        else:
            {textwrap.indent(use, "            ").strip()}
        """,
    )
    assert "ran" not in found, found
    assert "may not load compiled code" in str(found["refused"]), found


def test_python_s_own_compiled_modules_and_ibis_still_load(tmp_path: Path) -> None:
    # The control: what a project's macros and is_sql models use goes on loading.
    found = _probe(
        tmp_path / "p",
        """
        import asyncio, decimal, hashlib, zlib, csv  # asyncio: @types.coroutine
        import ibis
        from ibis.expr.operations import UnboundTable
        t = UnboundTable(name="t", schema={"a": "int32"}).to_expr()
        out["sql"] = ibis.to_sql(t.a.nunique())
        out["d"] = str(decimal.Decimal("1.5") * 2)
        """,
    )
    assert "COUNT(DISTINCT" in str(found.get("sql")), found
    assert found["d"] == "3.0"


def test_a_code_object_made_by_hand_is_refused(tmp_path: Path) -> None:
    # Bytecode written field by field reads and writes memory past the hook.
    found = _probe(tmp_path / "p", "out['ran'] = (lambda: 1).__code__.replace(co_consts=(2,))")
    assert "ran" not in found and "may not do code.__new__" in str(found["refused"]), found


def _answering(root: Path, value: str) -> PythonMacros:
    """A macro file that takes over the child's answers: every request gets ``value``."""
    _project(
        root,
        f"""
        import sys
        from sqlmesh import macro

        child = sys.modules["sluice.core.model.pycode.child"]

        def _answer(request, *args, **kwargs):
            {value}
            return {{"id": request.get("id"), "value": value}}

        child._answer = _answer

        @macro()
        def m(evaluator):
            return "1"
        """,
    )
    process = PythonMacros(root)
    process.start([root / "macros" / "m.py"], {})
    return process


def test_values_the_service_keeps_are_bounded_in_items(tmp_path: Path) -> None:
    # 4 MiB lines of `{}` are a million objects each: 64 MiB read would be ~1 GiB kept.
    process = _answering(tmp_path / "p", "value = [{}] * ((4 << 20) // 4 - 100)")
    try:
        with pytest.raises(ModelError, match=f"values of more than {VALUE_ITEMS:,} items"):
            for i in range(40):
                process.evaluate(Evaluation("models/x.py", "models.x", str(i), 1))
        # Failed once, failed for good: nothing the child answered is used after it.
        with pytest.raises(ModelError, match="items in all"):
            process.evaluate(Evaluation("models/x.py", "models.x", "0", 1))
    finally:
        process.close()


def test_a_value_nested_too_deep_is_a_model_error(tmp_path: Path) -> None:
    process = _answering(
        tmp_path / "p", "value = 0\n            for _ in range(900): value = [value]"
    )
    try:
        with pytest.raises(ModelError, match="nested deeper than"):
            process.evaluate(Evaluation("models/x.py", "models.x", "1", 1))
    finally:
        process.close()


def test_a_small_value_still_answers(tmp_path: Path) -> None:
    # The control of the two above: the same takeover, a value within the bounds.
    process = _answering(tmp_path / "p", "value = [[1, 2], {'a': [3]}]")
    try:
        assert process.evaluate(Evaluation("models/x.py", "models.x", "1", 1)) == [
            [1, 2],
            {"a": [3]},
        ]
    finally:
        process.close()


# Red team round 6: ways around the rules above, each a body that fills out["ran"] when it
# gets through. The file an import event names is compiled code whatever it looks like: a
# plain str resolved as dlopen will resolve it; a refused name is refused at either end of
# its dotted name; a path is read as the call will read it, never by its own __str__.
_AROUND = {
    # the loader takes the init symbol from the name's last part: a fresh fork_exec
    "dotted name": """
        import _imp, os, importlib.machinery as m, _posixsubprocess as held
        origin = os.path.join(os.path.dirname(held.__file__), "_posixsubprocess" + m.EXTENSION_SUFFIXES[0])
        out["ran"] = repr(_imp.create_dynamic(m.ModuleSpec("x._posixsubprocess", None, origin=origin)).fork_exec)
    """,
    # a str subclass whose endswith() says no to the suffix check
    "str subclass file": """
        import _imp, os, sys, importlib.machinery as m
        class P(str):
            def endswith(self, *a, **k):
                return False
        site = [p for p in sys.path if p.endswith("site-packages")][0]
        origin = P(os.path.join(site, "_cffi_backend" + m.EXTENSION_SUFFIXES[0]))
        out["ran"] = repr(_imp.create_dynamic(m.ModuleSpec("_cffi_backend", None, origin=origin)))
    """,
    # an open descriptor of the .so, loaded through /proc (no suffix, and swappable)
    "/proc/self/fd": """
        import _imp, os, sys, importlib.machinery as m
        site = [p for p in sys.path if p.endswith("site-packages")][0]
        fd = os.open(os.path.join(site, "_cffi_backend" + m.EXTENSION_SUFFIXES[0]), os.O_RDONLY)
        spec = m.ModuleSpec("_cffi_backend", None, origin=f"/proc/self/fd/{fd}")
        out["ran"] = repr(_imp.create_dynamic(spec))
    """,
    # types.coroutine's own code with the author's globals: replace() is theirs
    "coroutine's code": """
        import functools, types
        def victim():
            return 1
        class F:
            def __call__(self):
                pass
        f = F()
        swap = functools.partial(victim.__code__.replace, co_consts=(None, "by hand"))
        f.__code__ = types.SimpleNamespace(co_flags=0x20, replace=swap)
        g = {"__builtins__": __builtins__, "FunctionType": F, "CodeType": types.SimpleNamespace}
        types.FunctionType(types.coroutine.__code__, g)(f)
        out["ran"] = types.FunctionType(f.__code__, {})()
    """,
    # a str subclass path: its __str__ names a project file, open() reads /etc/passwd
    "str subclass path": """
        import os
        class P(str):
            def __str__(self):
                return os.path.join(os.getcwd(), "config.yaml")
        out["ran"] = open(P("/etc/passwd")).read()[:20]
    """,
}


@pytest.mark.parametrize("way", sorted(_AROUND))
def test_no_way_around_the_rules_on_compiled_code_code_objects_and_paths(
    tmp_path: Path, way: str
) -> None:
    found = _probe(tmp_path / "p", _AROUND[way])
    assert "ran" not in found, found
    assert "project Python may not" in str(found.get("refused")), found
