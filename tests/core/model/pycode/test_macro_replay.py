"""A load of a tree answered before (the same folder with the same bytes, macro files,
variables and dialect) replays that load's answers instead of starting the macro process
(sluice.core.model.pycode.macros.REPLAYS); anything else starts it, as does anything the
earlier load did not answer, or answered with an error."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from sluice.core.errors import SluiceError
from sluice.core.model.loader import load_project
from sluice.core.model.pycode import macros as pycode_macros

MACROS = """\
from sqlglot import exp
from sqlmesh import macro


@macro()
def cents(evaluator, column):
    return exp.Mul(this=exp.Paren(this=column), expression=exp.Literal.number(100))


@macro()
def fee(evaluator):
    with open("fee.txt") as handle:  # a file of the project, read by the macro
        return exp.Literal.number(int(handle.read()))


@macro()
def typed(evaluator, table):
    return [exp.column(c).as_(f"{c}_seen") for c in evaluator.columns_to_types(table.sql())]
"""


def _project(root: Path, models: dict[str, str], variables: str = "") -> Path:
    (root / "models").mkdir(parents=True)
    (root / "macros").mkdir()
    (root / "macros" / "m.py").write_text(MACROS)
    (root / "fee.txt").write_text("7")
    (root / "external_models.yaml").write_text("- name: raw.s\n  columns:\n    a: int\n")
    (root / "config.yaml").write_text(
        "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n" + variables
    )
    for name, body in models.items():
        (root / "models" / f"{name}.sql").write_text(
            f"MODEL (name shop.{name}, kind FULL);\n\n{textwrap.dedent(body)}"
        )
    return root


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The macro processes started (their sandbox profiles' names), in order."""
    names: list[str] = []
    wrap = pycode_macros.sandbox.wrap

    def counted(argv: list[str], profile: pycode_macros.sandbox.Profile) -> object:
        names.append(profile.name)
        return wrap(argv, profile)

    monkeypatch.setattr(pycode_macros.sandbox, "wrap", counted)
    return names


def _queries(root: Path) -> dict[str, str]:
    project = load_project(root, use_cache=False)
    return {
        name: model.query.sql("spark")
        for name, model in project.models.items()
        if name.startswith("shop.")
    }


def test_a_tree_loaded_again_replays_its_answers_and_starts_no_process(
    tmp_path: Path, started: list[str]
) -> None:
    root = _project(tmp_path / "p", {"a": "SELECT @cents(a) AS a, @fee() AS f FROM raw.s"})
    first = _queries(root)
    assert started == ["macros"]
    assert "(a) * 100" in first["shop.a"] and "7" in first["shop.a"], first
    assert _queries(root) == first
    assert started == ["macros"]  # the second load started none


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda root: (root / "fee.txt").write_text("8"), id="a file a macro reads"),
        pytest.param(lambda root: (root / "notes.md").write_text("x"), id="a file added"),
        pytest.param(lambda root: (root / "fee.txt").unlink(), id="a file removed"),
        pytest.param(
            lambda root: (root / "config.yaml").write_text(
                (root / "config.yaml").read_text() + "variables:\n  v: 1\n"
            ),
            id="the variables",
        ),
    ],
)
def test_any_change_to_the_tree_starts_the_process_again(
    tmp_path: Path, started: list[str], change: Callable[[Path], object]
) -> None:
    root = _project(tmp_path / "p", {"a": "SELECT @cents(a) AS a, @fee() AS f FROM raw.s"})
    _queries(root)
    change(root)
    try:
        again = _queries(root)
    except SluiceError as exc:  # the file the macro reads is gone: its own error
        assert "fee.txt" in str(exc)
        again = {}
    assert started == ["macros", "macros"]
    if (root / "fee.txt").exists() and (root / "fee.txt").read_text() == "8":
        assert "8" in again["shop.a"] and "7" not in again["shop.a"], again


def test_the_same_bytes_in_another_folder_are_not_replayed(
    tmp_path: Path, started: list[str]
) -> None:
    models = {"a": "SELECT @cents(a) AS a FROM raw.s"}
    one = _queries(_project(tmp_path / "one", models))
    two = _queries(_project(tmp_path / "two", models))
    assert one == two
    assert started == ["macros", "macros"]


def test_an_error_is_never_replayed(tmp_path: Path, started: list[str]) -> None:
    root = _project(tmp_path / "p", {"a": "SELECT @fee() AS f, a FROM raw.s"})
    (root / "fee.txt").write_text("seven")
    for _ in range(2):
        with pytest.raises(SluiceError, match="seven"):
            load_project(root, use_cache=False)
    assert started == ["macros", "macros"]


def test_a_call_that_asked_for_columns_is_asked_again_of_a_process_started_for_it(
    tmp_path: Path, started: list[str]
) -> None:
    root = _project(
        tmp_path / "p",
        {"a": "SELECT @cents(a) AS a FROM raw.s", "b": "SELECT @typed(raw.s) FROM raw.s"},
    )
    first = _queries(root)
    assert "a AS a_seen" in first["shop.b"].replace("`", ""), first
    assert _queries(root) == first
    # The second load replayed @cents, and started a process for @typed alone.
    assert started == ["macros", "macros"]


def test_answers_are_replayed_only_for_the_time_kept(
    tmp_path: Path, started: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _project(tmp_path / "p", {"a": "SELECT @cents(a) AS a FROM raw.s"})
    monkeypatch.setattr(pycode_macros, "REPLAYS", pycode_macros.Replays(seconds=0.0))
    first = _queries(root)
    assert _queries(root) == first
    assert started == ["macros", "macros"]


def test_tree_key_names_every_entry_and_gives_up_past_its_bounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _project(tmp_path / "p", {"a": "SELECT 1 AS a"})
    key = pycode_macros.tree_key(root)
    assert key is not None and pycode_macros.tree_key(root) == key
    (root / "empty").mkdir()
    with_folder = pycode_macros.tree_key(root)
    assert with_folder not in (None, key)
    (root / "link").symlink_to("fee.txt")
    assert pycode_macros.tree_key(root) not in (None, key, with_folder)
    monkeypatch.setattr(pycode_macros, "TREE_FILES", 3)
    assert pycode_macros.tree_key(root) is None


def test_replays_keep_at_most_their_trees_and_bytes_and_hand_out_copies() -> None:
    kept = pycode_macros.Replays(trees=2, size=100)
    answers = {"k": {"sql": ["1"]}}
    for tree in ("a", "b", "c"):
        kept.put(tree, "s", frozenset({"m"}), answers, 10)
    assert [kept.has(t) for t in "abc"] == [False, True, True]
    kept.put("d", "s", frozenset({"m"}), answers, 95)  # past the bytes: b and c go
    assert [kept.has(t) for t in "bcd"] == [False, False, True]
    found = kept.get("d", "s")
    assert found == (frozenset({"m"}), answers)
    assert found is not None
    found[1]["other"] = {"sql": ["2"]}
    assert kept.get("d", "s") == (frozenset({"m"}), answers)
    assert kept.get("d", "another setting") is None
