"""What a project's Jinja may render to all together, and how large a model file may be.

Every JINJA block is its own template, capped at ``jinja_sandbox.MAX_OUTPUT``; these caps
are the totals: per model file (``jinja_sandbox.file_cap``), per project
(``jinja_sandbox.MAX_PROJECT_OUTPUT``), the bytes the service reads from the rendering
process (``jinja.MAX_CHILD_BYTES``), and the size of a model file read from disk
(``loader.MAX_FILE_BYTES``). Each refusal names the file and line; the rendered text of a
refused file never reaches the parser.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sluice.core.errors import ModelError, ProjectErrors, SluiceError
from sluice.core.model import jinja, jinja_sandbox, loader

CONFIG = "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n"
HEADER = "MODEL (name probe.a, kind FULL);\n"


def statements(*lengths: int) -> str:
    """A model file of one statement block per length, each rendering that many
    characters: a line of ``x`` between the newlines of its template."""
    return HEADER + "".join(
        f"JINJA_STATEMENT_BEGIN;\n{{{{ 'x' * {length - 2} }}}}\nJINJA_END;\n" for length in lengths
    )


def block_line(number: int) -> int:
    """The line of the ``number``-th block of :func:`statements` (1-based): its
    ``JINJA_STATEMENT_BEGIN;``, where its template starts."""
    return 2 + 3 * (number - 1)


def test_the_red_team_flood_is_refused_at_the_block_that_goes_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # /tmp/redteam2/jinja_flood: a 24 KB model of 300 blocks of 999,000 characters each
    # rendered ~300 MB into the service, which then scanned it for minutes.
    (tmp_path / "config.yaml").write_text(CONFIG)
    (tmp_path / "models").mkdir()
    source = statements(*[999_002] * 300)
    (tmp_path / "models" / "a.sql").write_text(source)
    parsed: list[tuple[str, int]] = []
    real = loader.parse_models

    def spy(text: str, path: str, *args: Any, **kwargs: Any) -> Any:
        parsed.append((path, len(text)))
        assert len(text) <= len(source) + 1_000_000, "the rendered flood reached the parser"
        return real(text, path, *args, **kwargs)

    monkeypatch.setattr(loader, "parse_models", spy)
    with pytest.raises(ModelError) as caught:
        loader.load_project(tmp_path, use_cache=False)
    error = caught.value
    assert not isinstance(error, ProjectErrors)
    assert error.path == str(tmp_path / "models" / "a.sql")
    # The second block takes the file past 1,000,000 characters.
    assert error.line == block_line(2)
    assert "render to more than 1,000,000 characters all together" in error.message
    assert error.hint is not None and "render less" in error.hint
    assert parsed == []  # the file's rendered text was never parsed or scanned


def test_a_file_may_render_up_to_its_cap(tmp_path: Path) -> None:
    cap = jinja_sandbox.MAX_FILE_OUTPUT
    files = {"m.sql": statements(cap // 2, cap - cap // 2)}
    assert jinja_sandbox.file_cap(len(files["m.sql"])) == cap
    rendered = jinja.render_models(files, {}, {})
    assert rendered.errors == {}
    assert rendered.texts["m.sql"].count("x") == cap - 4


def test_a_file_past_its_cap_is_refused_at_the_block_that_crossed_it(tmp_path: Path) -> None:
    cap = jinja_sandbox.MAX_FILE_OUTPUT
    files = {"m.sql": statements(10, cap // 2, cap - cap // 2, 10)}
    rendered = jinja.render_models(files, {}, {})
    assert rendered.texts == {}
    error = rendered.errors["m.sql"]
    assert isinstance(error, ModelError)
    assert (error.path, error.line) == ("m.sql", block_line(3))
    assert f"more than {cap:,} characters all together" in error.message


def test_a_large_file_may_render_four_times_its_size(tmp_path: Path) -> None:
    # 400,000 characters of source: its blocks may render 1,600,000+ characters.
    padding = "-- " + "y" * 400_000 + "\n"
    under = padding + statements(800_000, 800_000)
    assert jinja_sandbox.file_cap(len(under)) >= 1_600_000 > jinja_sandbox.MAX_FILE_OUTPUT
    rendered = jinja.render_models({"m.sql": under}, {}, {})
    assert rendered.errors == {}
    assert rendered.texts["m.sql"].count("x") == 1_600_000 - 4
    over = padding + statements(800_000, 800_000, 800_000)
    error = jinja.render_models({"m.sql": over}, {}, {}).errors["m.sql"]
    assert error.line == 1 + block_line(3)
    assert "all together" in error.message


def test_a_project_may_render_up_to_its_cap() -> None:
    each = jinja_sandbox.MAX_OUTPUT
    count = jinja_sandbox.MAX_PROJECT_OUTPUT // each
    files = {f"m{i:02}.sql": statements(each) for i in range(count)}
    rendered = jinja.render_models(files, {}, {})
    assert rendered.errors == {}
    assert sum(text.count("x") for text in rendered.texts.values()) == count * (each - 2)


def test_a_project_past_its_cap_is_refused_at_the_file_and_block_that_crossed_it() -> None:
    each = jinja_sandbox.MAX_OUTPUT
    count = jinja_sandbox.MAX_PROJECT_OUTPUT // each
    files = {f"m{i:02}.sql": statements(each) for i in range(count + 2)}
    rendered = jinja.render_models(files, {}, {})
    crossed, after = f"m{count:02}.sql", f"m{count + 1:02}.sql"
    assert set(rendered.errors) == {crossed, after}
    assert crossed not in rendered.texts and after not in rendered.texts
    error = rendered.errors[crossed]
    assert (error.path, error.line) == (crossed, block_line(1))
    assert f"project render to more than {jinja_sandbox.MAX_PROJECT_OUTPUT:,}" in error.message
    assert f"{crossed}:{block_line(1)}" in rendered.errors[after].message


def test_the_service_checks_the_childs_totals_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # A child that ignores its caps (it lost its sandbox) answers 1,400,000 characters
    # for one file: refused here, before anything is spliced.
    answers = [{"text": "x" * 700_000}, {"text": "x" * 700_000}]
    output = b"".join(json.dumps(a).encode() + b"\n" for a in answers)
    monkeypatch.setattr(jinja, "_run_child", lambda argv, payload: (output, None))
    rendered = jinja.render_models({"m.sql": statements(1, 1)}, {}, {})
    assert rendered.texts == {}
    error = rendered.errors["m.sql"]
    assert (error.path, error.line) == ("m.sql", block_line(2))
    assert "all together" in error.message


def test_a_child_writing_something_else_than_answers_is_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(jinja, "_run_child", lambda argv, payload: (b"not json\n", None))
    rendered = jinja.render_models({"m.sql": statements(1)}, {}, {})
    error = rendered.errors["m.sql"]
    assert isinstance(error, SluiceError)
    assert (error.path, error.line) == ("m.sql", block_line(1))


def test_the_childs_output_is_read_up_to_a_byte_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jinja, "MAX_CHILD_BYTES", 200_000)
    rendered = jinja.render_models({"m.sql": statements(10, 500_000, 10)}, {}, {})
    assert rendered.texts == {}
    error = rendered.errors["m.sql"]
    assert (error.path, error.line) == ("m.sql", block_line(2))
    assert "more than 200,000 bytes" in error.message
    assert error.hint is not None and "render less" in error.hint


def _project(tmp_path: Path, model: bytes) -> Path:
    (tmp_path / "config.yaml").write_text(CONFIG)
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "big.sql").write_bytes(model)
    return tmp_path


def test_a_model_file_larger_than_the_cap_is_refused_unread(tmp_path: Path) -> None:
    model = (HEADER + "SELECT 1 AS a\n-- ").encode()
    model += b"z" * (loader.MAX_FILE_BYTES + 1 - len(model))
    with pytest.raises(ModelError) as caught:
        loader.load_project(_project(tmp_path, model), use_cache=False)
    error = caught.value
    assert (error.path, error.line) == (str(tmp_path / "models" / "big.sql"), 1)
    assert f"larger than {loader.MAX_FILE_BYTES:,} bytes" in error.message
    assert error.hint is not None and "split it" in error.hint


def test_a_model_file_at_the_cap_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A smaller cap, so the control does not parse 4 MiB of comment.
    monkeypatch.setattr(loader, "MAX_FILE_BYTES", 20_000)
    model = (HEADER + "SELECT 1 AS a\n-- ").encode()
    model += b"z" * (20_000 - 1 - len(model)) + b"\n"
    assert len(model) == 20_000
    project = loader.load_project(_project(tmp_path, model), use_cache=False)
    assert list(project.models) == ["probe.a"]
    (tmp_path / "models" / "big.sql").write_bytes(model + b"\n")
    with pytest.raises(ModelError, match="larger than 20,000 bytes"):
        loader.load_project(tmp_path, use_cache=False)


def test_the_read_limit_follows_the_project_cap() -> None:
    """``jinja.MAX_CHILD_BYTES`` is written as a number (``sluice plan`` imports no jinja2
    until a project has Jinja); it stays the project's cap in UTF-8 plus room."""
    from sluice.core.model import jinja, jinja_sandbox

    assert jinja.MAX_CHILD_BYTES == 4 * jinja_sandbox.MAX_PROJECT_OUTPUT + 4 * 1024 * 1024
