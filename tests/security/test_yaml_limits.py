"""YAML a pull request writes (config.yaml, tests/*.yaml, external models) cannot exhaust
the loader: alias bombs, self-referencing aliases, deep nesting, huge files and values
Python refuses to convert are each an error with file:line and a hint, not minutes of CPU,
gigabytes of memory or a traceback.

The bombs are parsed in a child process capped at 1 GiB of address space and a timeout,
so an unbounded loader fails the test (MemoryError or timeout) instead of the machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sluice.core.errors import ConfigError, ModelError
from sluice.core.model.loader import load_project
from sluice.core.yamlio import MAX_ALIAS_VALUES, MAX_CHARS, MAX_DEPTH, parse_yaml, read_yaml
from tests.core.helpers import BASIC, write_project

ROOT = Path(__file__).resolve().parents[2]

# Ten times ten times ... : 10**9 strings once every alias is expanded, from 10 lines.
LAUGHS = "\n".join(
    [
        'lol: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]',
        *(
            f"l{n}: &{chr(98 + n)} [{', '.join([f'*{chr(97 + n)}'] * 10)}]"
            for n in range(8)  # &b ... &i, each ten aliases of the one before
        ),
        "model_defaults: *i",
    ]
)
# The same with mappings: each level holds ten copies of the last as values.
NESTED_MAPS = "\n".join(
    [
        "m0: &m0 {a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8, i: 9, j: 10}",
        *(
            f"m{n + 1}: &m{n + 1} {{{', '.join(f'k{k}: *m{n}' for k in range(10))}}}"
            for n in range(8)
        ),
    ]
)

_CHILD = """
import json, resource, sys
from pathlib import Path
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from sluice.core import errors
from sluice.core.yamlio import read_yaml
try:
    read_yaml(Path(sys.argv[1]), getattr(errors, sys.argv[2]))
    print(json.dumps({"outcome": "parsed"}))
except errors.SluiceError as exc:
    print(json.dumps({"outcome": type(exc).__name__, "location": exc.location,
                      "message": exc.message, "hint": exc.hint}))
"""


def parse_in_child(path: Path, error: str = "ConfigError") -> dict[str, str]:
    """read_yaml(path) in a child process capped at 1 GiB and 60 s; what came of it."""
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), error],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize(("text", "line"), [(LAUGHS, 5), (NESTED_MAPS, 5)])
def test_an_alias_bomb_fails_fast_naming_the_alias(tmp_path: Path, text: str, line: int) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text + "\n")
    outcome = parse_in_child(path)
    assert outcome["outcome"] == "ConfigError", outcome
    assert outcome["location"].startswith(f"{path}:{line}:"), outcome
    assert outcome["message"].startswith(
        f"YAML aliases here repeat more than {MAX_ALIAS_VALUES:,} values"
    )
    assert "anchor" in outcome["hint"]


def test_a_bomb_in_a_unit_test_file_is_the_projects_error(tmp_path: Path) -> None:
    root = write_project(tmp_path, BASIC)
    (root / "tests").mkdir()
    bomb = root / "tests" / "test_a.yaml"
    bomb.write_text(LAUGHS.replace("model_defaults", "test_a") + "\n")
    outcome = parse_in_child(bomb, "ModelError")
    assert outcome["outcome"] == "ModelError", outcome
    assert outcome["location"].startswith(f"{bomb}:5:")


@pytest.mark.parametrize("name", ["tests/test_a.yaml", "external_models.yaml", "config.yaml"])
def test_every_project_yaml_is_bounded(tmp_path: Path, name: str) -> None:
    # Small enough to load here without a cap: about 10**5 values, five lines.
    small = "\n".join(LAUGHS.splitlines()[:5]) + "\n"
    root = write_project(tmp_path, {**BASIC, name: small})
    with pytest.raises((ConfigError, ModelError)) as info:
        load_project(root, use_cache=False)
    assert info.value.location is not None
    assert info.value.location.startswith(f"{root / name}:")
    assert "aliases here repeat more than" in info.value.message


def test_an_alias_inside_its_own_anchor_is_refused(tmp_path: Path) -> None:
    for text, line in (("a: &a [1, *a]\n", 1), ("x: 1\nb: &b\n  c: *b\n", 3)):
        with pytest.raises(ConfigError) as info:
            parse_yaml(text, "config.yaml")
        assert info.value.message.startswith("the alias *")
        assert "inside the value it names" in info.value.message
        assert info.value.line == line


@pytest.mark.parametrize(
    "text",
    [
        "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1),
        "{a: " * (MAX_DEPTH + 1) + "1" + "}" * (MAX_DEPTH + 1),
        "".join("  " * i + f"k{i}:\n" for i in range(MAX_DEPTH + 1))
        + "  " * (MAX_DEPTH + 1)
        + "v\n",
        "[" * 5000 + "]" * 5000,
    ],
)
def test_deep_nesting_is_refused_not_a_recursion_error(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_yaml(text, "config.yaml")
    assert info.value.message == f"values nested more than {MAX_DEPTH} deep"
    assert info.value.line is not None and info.value.hint


def test_a_huge_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("# " + "x" * MAX_CHARS + "\n")
    with pytest.raises(ConfigError) as info:
        read_yaml(path)
    assert info.value.message.startswith("the file is larger than")
    with pytest.raises(ModelError):
        parse_yaml("a: 1\n" + "#" * MAX_CHARS, "t.yaml", ModelError)


@pytest.mark.parametrize(
    ("text", "line", "what"),
    [
        ("model_defaults:\n  start: 2024-13-01\n", 2, "month must be in 1..12"),
        ("variables:\n  big: " + "1" * 5000 + "\n", 2, "Exceeds the limit"),
        ("? " + "1" * 5000 + "\n: x\n", 1, "Exceeds the limit"),
    ],
)
def test_a_value_python_cannot_convert_names_its_line(text: str, line: int, what: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_yaml(text, "config.yaml")
    assert info.value.line == line
    assert info.value.message.startswith("cannot read the value: ")
    assert what in info.value.message


def test_anchors_real_projects_use_keep_working() -> None:
    text = textwrap.dedent(
        """
        defaults: &defaults
          dialect: spark
          cron: '@daily'
        model_defaults:
          <<: *defaults
          start: '2024-01-01'
        rows: &rows
          - {id: 1, name: a}
          - {id: 2, name: b}
        again: *rows
        both:
          <<: [*defaults, {owner: me}]
        """
    )
    doc = parse_yaml(text, "config.yaml")
    assert doc.data["model_defaults"] == {
        "dialect": "spark",
        "cron": "@daily",
        "start": "2024-01-01",
    }
    assert doc.data["again"] == doc.data["rows"]
    assert doc.data["both"] == {"dialect": "spark", "cron": "@daily", "owner": "me"}
    assert doc.line_of(("model_defaults", "start")) == 7
    assert doc.line_of(("again",)) == 11
    assert doc.line_of(("again", 1, "name")) == 10  # an alias's values: where they are written


def test_a_list_repeated_by_aliases_up_to_the_budget_loads() -> None:
    # 1,000 rows of 10 values, repeated 9 times: about 100,000 values all told.
    row = "{" + ", ".join(f"c{i}: {i}" for i in range(4)) + "}"
    text = f"rows: &rows [{', '.join([row] * 1000)}]\n" + "".join(
        f"copy{n}: *rows\n" for n in range(9)
    )
    doc = parse_yaml(text, "tests/test_big.yaml")
    assert len(doc.data["copy8"]) == 1000


_ACTION_CHILD = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from pathlib import Path
from sluice.bot.entry.action import ActionError, override_config
text = Path(sys.argv[1]).read_text()
try:
    out = override_config(text, {"project": "overridden"})
except ActionError as exc:
    print("refused:", exc)
else:
    print("unchanged" if out == text else "rewritten")
"""


def test_the_actions_config_override_reads_a_prs_config_with_the_bounded_parser(
    tmp_path: Path,
) -> None:
    # The Action merges its override into the config.yaml of the head it was given: a
    # bomb there is refused, saying why, never expanded in the Action's process (and the
    # run never goes on without the override).
    bomb = tmp_path / "config.yaml"
    bomb.write_text(LAUGHS + "\n")
    done = subprocess.run(
        [sys.executable, "-c", _ACTION_CHILD, str(bomb)],
        check=False, capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("refused: config-override cannot be merged")
    assert "YAML aliases here repeat more than 100,000 values" in done.stdout
