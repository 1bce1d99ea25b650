"""What the Python macro process writes is checked before the service uses it.

Macro code runs in the child, so it can write any bytes to the pipe the service reads its
answers from (``os.write(1, ...)``, ``print``). Each hostile macro below does, while the
project loads: the load fails with a :class:`ModelError` naming the macro file, the child
is ended, and what the service kept stays within the protocol's limits (asserted through
the error and the parent's state, not timings). Controls: normal macros, large answers
and the reading ahead still work.
"""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path

import pytest

from sluice.core.errors import ModelError, SluiceError
from sluice.core.model.loader import load_project
from sluice.core.model.macro.registry import MacroError
from sluice.core.model.pycode import macros as pycode_macros
from sluice.core.model.pycode.child import call_key
from sluice.core.model.pycode.macros import PythonMacros

NOT_PROTOCOL = "wrote something that is not its protocol"
TOO_MUCH = "wrote more than its protocol allows"


def _project(root: Path, macro: str, models: dict[str, str] | None = None) -> Path:
    (root / "models").mkdir(parents=True)
    (root / "macros").mkdir()
    (root / "macros" / "p.py").write_text(textwrap.dedent(macro))
    (root / "config.yaml").write_text("model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n")
    for name, body in (models or {"a": "SELECT @bad() AS x"}).items():
        (root / "models" / f"{name}.sql").write_text(
            f"MODEL (name shop.{name}, kind FULL);\n{body}"
        )
    return root


def _writes(data: bytes) -> str:
    """A macro file whose @bad writes ``data`` to the protocol's pipe, then returns SQL."""
    return f"""\
        import os
        from sqlmesh import macro

        @macro()
        def bad(evaluator):
            os.write(1, {data!r})
            return "1"
        """


def _refused(root: Path, expected: str) -> ModelError:
    with pytest.raises(SluiceError) as caught:
        load_project(root, use_cache=False)
    error = caught.value
    assert type(error) is ModelError, repr(error)
    assert error.path == str((root / "macros" / "p.py").resolve())
    assert expected in error.message and "macros/p.py" in error.message, error.message
    assert error.hint is not None and "not write to standard output" in error.hint
    return error


_KEY = call_key("bad", [], {}, "spark")


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"<not json>\n", "not JSON"),
        (b"\xff\xfe\n", "not JSON"),  # not UTF-8
        (b"[" * 100_000 + b"\n", "not JSON"),  # nested past the decoder's recursion
        (b"[]\n", "not a JSON object"),
        (b'"x"\n', "not a JSON object"),
        (b'{"error": "x"}\n', "none of its messages"),
        (b'{"id": 1, "error": "x"}\n', "none of its messages"),
        (b'{"id": 1, "error": {"message": 1, "path": null, "line": null}}\n', "none of"),
        (b'{"id": "1", "sql": ["1"]}\n', "none of its messages"),
        (b'{"id": 1, "sql": [1]}\n', "none of its messages"),
        (b'{"id": 1, "sql": ["1"], "more": 1}\n', "none of its messages"),
        (b'{"ahead": 5}\n', "none of its messages"),
        (b'{"ahead": [[1]]}\n', "none of its messages"),
        (b'{"ahead": [["k", {"sql": [1]}]]}\n', "none of its messages"),
        (b'{"ahead": [["k", "x"]]}\n', "none of its messages"),
        (b'{"ahead": [["k", {"sql": ["1"]}]]}\n', "a call no model file can make"),
        (  # a call of a macro the child never listed
            json.dumps({"ahead": [[call_key("other", [], {}, "spark"), {"sql": ["1"]}]]}).encode()
            + b"\n",
            "a call no model file can make",
        ),
        (  # another dialect than the load's
            json.dumps({"ahead": [[call_key("bad", [], {}, "duckdb"), {"sql": ["1"]}]]}).encode()
            + b"\n",
            "a call no model file can make",
        ),
        (b'{"id": 999, "sql": ["1"]}\n', "an answer to a call that was not asked"),
        (b'{"id": 999, "columns": "t"}\n', "an answer to a call that was not asked"),
        (b'{"macros": ["bad"], "errors": []}\n', "a second list of macros"),
    ],
)
def test_a_line_that_is_not_the_protocol_fails_the_load_naming_the_macro(
    tmp_path: Path, data: bytes, why: str
) -> None:
    error = _refused(_project(tmp_path / "p", _writes(data)), NOT_PROTOCOL)
    assert why in error.message
    # The line is written during @bad's call; the service may read it while it drains the
    # answers made ahead of that call (which comes first is the scheduler's).
    assert any(
        where in error.message
        for where in ("while running @bad", "while reading the answers made ahead")
    ), error.message


def test_an_answer_of_another_kind_than_the_call_asked_is_refused(tmp_path: Path) -> None:
    # A Python model's value ({"value": ...}, issue 41) as the answer to a macro call: the
    # call's argument holds a macro, so it is asked (id 1), never answered ahead.
    macro = """\
        import os
        from sqlmesh import macro

        @macro()
        def bad(evaluator, x):
            os.write(1, b'{"id": 1, "value": ["1"]}\\n')
            return "1"
        """
    root = _project(tmp_path / "p", macro, {"a": "SELECT @bad(@VAR('v', 1)) AS x"})
    error = _refused(root, NOT_PROTOCOL)
    assert "an answer of another kind than the call asked" in error.message


def test_a_line_that_never_ends_is_cut_at_the_line_limit(tmp_path: Path) -> None:
    macro = """\
        import os
        from sqlmesh import macro

        @macro()
        def bad(evaluator):
            while True:
                os.write(1, b"x" * 65536)
        """
    error = _refused(_project(tmp_path / "p", macro), TOO_MUCH)
    assert "a line longer than 4 MiB" in error.message


def test_a_flood_of_answers_ahead_at_import_is_refused_before_it_is_kept(tmp_path: Path) -> None:
    # The red team's probe: distinct keys, 64 KiB a line, for as long as it may.
    macro = """\
        import os
        from sqlmesh import macro

        blob = "A" * 4000
        for i in range(100_000):
            items = ",".join('["k%d_%d", {"sql": ["%s"]}]' % (i, j, blob) for j in range(16))
            os.write(1, ('{"ahead": [' + items + ']}\\n').encode())

        @macro()
        def bad(evaluator):
            return "1"
        """
    error = _refused(_project(tmp_path / "p", macro), NOT_PROTOCOL)
    assert "a line before the list of macros" in error.message
    assert "while importing macros/*.py" in error.message


def test_a_flood_of_well_formed_answers_ahead_during_a_call_is_cut(tmp_path: Path) -> None:
    # Keys the service could expect (a listed macro, the load's dialect): still at most
    # one line of them per file read ahead.
    macro = """\
        import json, os
        from sqlmesh import macro

        @macro()
        def bad(evaluator):
            for i in range(100_000):
                key = json.dumps(["bad", [str(i)], {}, "spark"], sort_keys=True)
                os.write(1, (json.dumps({"ahead": [[key, {"sql": ["1"]}]]}) + "\\n").encode())
            return "1"
        """
    error = _refused(_project(tmp_path / "p", macro), TOO_MUCH)
    assert "more lines of answers made ahead than files read ahead" in error.message


def test_the_parent_keeps_nothing_more_after_a_breach_and_the_child_is_ended(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path / "p", _writes(b'{"ahead": [["k", {"sql": ["1"]}]]}\n' * 1000))
    macros = PythonMacros(root)
    try:
        macros.start([root / "macros" / "p.py"], {}, read_ahead=[])
        assert macros.names == {"bad"}
        with pytest.raises(MacroError, match=TOO_MUCH):  # no file is read ahead
            macros.call("bad", [], {}, "spark")
        assert macros._process.poll() is not None
        assert macros._memo == {} and not macros._buffer
        # Every later call gives the same error at once, and so does the end of the load.
        with pytest.raises(MacroError, match=TOO_MUCH):
            macros.call("bad", ["1"], {}, "spark")
        with pytest.raises(ModelError, match=TOO_MUCH):
            macros.check()
    finally:
        macros.close()


GOOD = """\
    from sqlmesh import macro

    @macro()
    def cents(evaluator, column):
        return f"({column.sql()}) * 100"

    @macro()
    def wide(evaluator):
        return [f"{i} AS a_rather_long_column_name_to_make_a_large_answer_{i}" for i in range(5000)]
    """


def _good(root: Path, files: int) -> Path:
    models = {f"m{i:02}": f"SELECT @cents(v + {i}) AS v FROM raw.t" for i in range(files)}
    models["wide"] = "SELECT @wide()"
    root = _project(root, GOOD, models)
    (root / "external_models.yaml").write_text("- name: raw.t\n  columns:\n    v: int\n")
    return root


def test_normal_macros_large_answers_and_the_reading_ahead_still_work(tmp_path: Path) -> None:
    project = load_project(_good(tmp_path / "p", 20), use_cache=False)
    assert project.models["shop.m07"].query_sql == "SELECT (v + 7) * 100 AS v FROM raw.t"
    assert "4999 AS a_rather_long_column_name_to_make_a_large_answer_4999" in (
        project.models["shop.wide"].query_sql or ""
    )
    root = _good(tmp_path / "q", 3)
    macros = PythonMacros(root)
    try:
        macros.start([root / "macros" / "p.py"], {}, read_ahead=sorted(root.glob("models/*.sql")))
        assert macros.names == {"cents", "wide"}
        for i in range(3):
            assert macros.call("cents", [f"v + {i}"], {}, "spark") == [f"(v + {i}) * 100"]
        assert macros._next_id <= 3  # answered ahead, for the most part
    finally:
        macros.close()


@pytest.mark.parametrize(
    ("limit", "value", "why"),
    [
        ("AHEAD_ITEMS", 5, "answers made ahead or"),
        ("AHEAD_BYTES", 200, "answers made ahead or"),
        ("READ_BYTES", 2000, "more than 2000 bytes in all"),
    ],
)
def test_the_limits_on_what_is_kept_and_read_hold_for_well_formed_answers_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: str, value: int, why: str
) -> None:
    monkeypatch.setattr(pycode_macros, limit, value)
    root = _good(tmp_path / "p", 30)
    macros = PythonMacros(root)
    try:
        macros.start([root / "macros" / "p.py"], {}, read_ahead=sorted(root.glob("models/*.sql")))
        assert macros.names
        time.sleep(1.5)  # the child reads the files ahead (it has nothing else to do)
        with pytest.raises((MacroError, SluiceError), match=TOO_MUCH) as caught:
            for i in range(30):
                macros.call("cents", [f"v + {i}"], {}, "spark")
            macros.call("wide", [], {}, "spark")
            macros.check()
        assert why in str(caught.value)
        assert len(macros._memo) <= 30 and macros._process.poll() is not None
    finally:
        macros.close()
