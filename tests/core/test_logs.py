"""One logging setup: level and format from SLUICE_LOG_LEVEL / SLUICE_LOG_FORMAT, a
timestamp on every line, JSON for log shippers, a clear error for a bad value."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.core import logs
from sluice.core.errors import ConfigError


@pytest.fixture(autouse=True)
def _restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:], root.level = handlers, level


def test_text_lines_carry_a_timestamp_and_the_level_follows_the_setting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logs.setup("WARNING", env={})
    logging.getLogger("sluice.test").info("hidden")
    logging.getLogger("sluice.test").warning("shown")
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    assert re.match(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} WARNING sluice\.test: shown$", lines[0])
    logs.setup("WARNING", env={"SLUICE_LOG_LEVEL": "debug"})
    logging.getLogger("sluice.test").debug("now shown")
    assert "now shown" in capsys.readouterr().err
    logs.setup("WARNING", verbose=True, env={})
    assert logging.getLogger().level == logging.INFO


def test_json_is_one_object_a_line_with_the_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    logs.setup("INFO", env={"SLUICE_LOG_FORMAT": "json"})
    try:
        raise ValueError("bad value")
    except ValueError:
        logging.getLogger("sluice.queue").exception('job "7" failed\nsecond line')
    (line,) = capsys.readouterr().err.splitlines()
    document = json.loads(line)
    assert document["level"] == "ERROR" and document["logger"] == "sluice.queue"
    assert document["message"] == 'job "7" failed\nsecond line'
    assert "ValueError: bad value" in document["exception"]
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", document["time"])


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SLUICE_LOG_LEVEL": "loud"}, "SLUICE_LOG_LEVEL is 'LOUD', not a log level"),
        ({"SLUICE_LOG_FORMAT": "xml"}, "SLUICE_LOG_FORMAT is 'xml', not a log format"),
    ],
)
def test_a_bad_setting_is_a_clear_error(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        logs.setup("INFO", env=env)


def test_the_command_says_what_is_wrong_without_a_traceback() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "sluice", "plan", "--project", "/nonexistent"],
        capture_output=True,
        text=True,
        check=False,
        env={"SLUICE_LOG_LEVEL": "loud", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode != 0
    assert "SLUICE_LOG_LEVEL is 'LOUD', not a log level" in result.stderr
    assert "Traceback" not in result.stderr


def test_rotate_keeps_the_count_it_is_given_and_leaves_small_files(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    assert not logs.rotate(log, 10, 2)  # no file yet
    log.write_bytes(b"small")
    assert not logs.rotate(log, 10, 2) and log.read_bytes() == b"small"
    for old in (1, 2, 3, 7):  # left by a larger count before
        (tmp_path / f"server.log.{old}").write_bytes(b"old %d" % old)
    log.write_bytes(b"x" * 11)
    assert logs.rotate(log, 10, 2)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["server.log", "server.log.1", "server.log.2"]
    assert (tmp_path / "server.log.1").read_bytes() == b"x" * 11
    assert (tmp_path / "server.log.2").read_bytes() == b"old 1"
    assert log.read_bytes() == b""
    log.write_bytes(b"y" * 11)
    assert logs.rotate(log, 10, 0)  # none kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["server.log"]
    assert log.read_bytes() == b""


def test_rotate_never_writes_through_a_link_nor_rotates_one(tmp_path: Path) -> None:
    """The folder may be one a sandboxed driver writes: a backup that is a link (dangling,
    or to a file elsewhere) is removed, never written through; a log that is a link, or
    a second name of another file, is left alone."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    victim, planted = elsewhere / "victim", elsewhere / "planted"
    victim.write_bytes(b"theirs")
    folder = tmp_path / "root"
    folder.mkdir()
    log = folder / "x.log"
    log.write_bytes(b"mine\n" * 10)
    (folder / "x.log.1").symlink_to(planted)  # dangling: would be created by a copy
    (folder / "x.log.2").symlink_to(victim)  # would be overwritten by a rename's copy
    assert logs.rotate(log, 10, 3)
    assert not planted.exists() and victim.read_bytes() == b"theirs"
    assert not any(p.is_symlink() for p in folder.iterdir())
    assert (folder / "x.log.1").read_bytes() == b"mine\n" * 10 and log.read_bytes() == b""
    # A log that is a link to another's file, or a hard link to it: neither is touched.
    victim.write_bytes(b"theirs" * 10)
    linked = folder / "y.log"
    linked.symlink_to(victim)
    assert not logs.rotate(linked, 10, 3)
    second = folder / "z.log"
    os.link(victim, second)
    assert not logs.rotate(second, 10, 3)
    assert victim.read_bytes() == b"theirs" * 10
    assert not (folder / "y.log.1").exists() and not (folder / "z.log.1").exists()
