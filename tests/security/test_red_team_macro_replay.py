"""Red team on replayed macro answers (sluice.core.model.pycode.macros.Replays).

A load of a tree loaded before in the process is answered with what the earlier load's
child answered. Attacks: the service's hashing of an untrusted tree (FIFOs, links out of
the tree, huge sparse files), encodings that could make two trees hash alike, and answers
that depend on the loader's columns without asking for them in the call that is kept.
"""

from __future__ import annotations

import json
import os
import textwrap
import threading
from pathlib import Path

import pytest

from sluice.core.model.loader import load_project
from sluice.core.model.pycode import macros as pycode_macros


def _project(root: Path, macros: str, models: dict[str, str]) -> Path:
    (root / "models").mkdir(parents=True)
    (root / "macros").mkdir()
    (root / "macros" / "m.py").write_text(textwrap.dedent(macros))
    (root / "external_models.yaml").write_text("- name: raw.s\n  columns:\n    secret_col: int\n")
    (root / "config.yaml").write_text("model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n")
    for name, body in models.items():
        (root / "models" / f"{name}.sql").write_text(
            f"MODEL (name shop.{name}, kind FULL);\n\n{textwrap.dedent(body)}"
        )
    return root


def _key_in_time(root: Path, seconds: float = 10.0) -> tuple[bool, str | None]:
    """tree_key(root) run in a thread: (whether it finished within ``seconds``, its key)."""
    out: list[str | None] = []
    thread = threading.Thread(target=lambda: out.append(pycode_macros.tree_key(root)), daemon=True)
    thread.start()
    thread.join(seconds)
    return (not thread.is_alive(), out[0] if out else None)


def test_a_fifo_in_the_tree_never_hangs_the_hashing(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    (root / "a.txt").write_text("x")
    os.mkfifo(root / "pipe")
    finished, key = _key_in_time(root)
    assert finished, "tree_key opened a FIFO of the tree"
    assert key is not None


def test_a_link_to_a_fifo_out_of_the_tree_is_never_opened(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    os.mkfifo(outside / "pipe")
    (outside / "secret").write_text("one")
    root = tmp_path / "p"
    root.mkdir()
    (root / "pipe.txt").symlink_to(outside / "pipe")
    (root / "secret.txt").symlink_to(outside / "secret")
    (root / "up").symlink_to(outside, target_is_directory=True)
    finished, key = _key_in_time(root)
    assert finished, "tree_key followed a link out of the tree to a FIFO"
    # What a link out of the tree points to is not read by the service (its target's
    # bytes are not part of the key); the sandbox does not see the target either.
    (outside / "secret").write_text("two")
    assert pycode_macros.tree_key(root) == key


def test_a_huge_sparse_file_is_not_read_while_hashing(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    with open(root / "big.bin", "wb") as handle:
        handle.truncate(1 << 40)  # 1 TiB, no blocks
    finished, key = _key_in_time(root, 5.0)
    assert finished, "tree_key read a sparse file past TREE_BYTES"
    assert key is None  # past TREE_BYTES: never replayed


def test_too_many_entries_are_not_replayed(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    for i in range(pycode_macros.TREE_FILES + 1):
        (root / f"f{i}").touch()
    assert pycode_macros.tree_key(root) is None


@pytest.mark.parametrize(
    ("left", "right"),
    [
        pytest.param({"a/b": "x"}, {"a\nb": "x"}, id="separator vs newline"),
        pytest.param({"ab": "x"}, {"a": "x", "b": ""}, id="split name"),
        pytest.param({"a": "xy"}, {"a": "x", "y": ""}, id="bytes into a name"),
        pytest.param({"a": "x"}, {"a": "x\0"}, id="trailing NUL in bytes"),
        pytest.param({"a": "x", "b": "y"}, {"a": "y", "b": "x"}, id="swapped contents"),
    ],
)
def test_two_different_trees_never_encode_the_same(
    tmp_path: Path, left: dict[str, str], right: dict[str, str]
) -> None:
    for side, files in (("l", left), ("r", right)):
        root = tmp_path / side
        root.mkdir()
        for name, text in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
    # The folders differ too (the resolved path is hashed): compare with one folder's name.
    os.rename(tmp_path / "l", tmp_path / "same")
    first = pycode_macros.tree_key(tmp_path / "same")
    os.rename(tmp_path / "same", tmp_path / "l")
    os.rename(tmp_path / "r", tmp_path / "same")
    second = pycode_macros.tree_key(tmp_path / "same")
    assert first is not None and second is not None
    assert first != second


def test_a_file_and_a_link_with_the_same_bytes_differ(tmp_path: Path) -> None:
    keys = []
    for kind in ("file", "link"):
        root = tmp_path / "same"
        root.mkdir()
        if kind == "file":
            (root / "x").write_text("target")
        else:
            (root / "x").symlink_to("target")
        keys.append(pycode_macros.tree_key(root))
        (root / "x").unlink()
        root.rmdir()
    assert keys[0] != keys[1]


STASH = """\
from sqlglot import exp
from sqlmesh import macro

SEEN = []


@macro()
def typed(evaluator, table):
    columns = list(evaluator.columns_to_types(table.sql()))
    SEEN.extend(columns)
    return [exp.column(c) for c in columns]


@macro()
def stash(evaluator):
    return exp.Literal.string(",".join(SEEN) or "none")
"""


def test_an_answer_derived_from_columns_through_child_state_is_never_kept(
    tmp_path: Path,
) -> None:
    root = _project(
        tmp_path / "p",
        STASH,
        {
            "a": "SELECT @typed(raw.s) FROM raw.s",
            "b": "SELECT @stash() AS seen FROM raw.s",
        },
    )
    project = load_project(root, use_cache=False)
    seen = project.models["shop.b"].query.sql("spark")
    assert "secret_col" in seen, seen  # the child's state carried the columns
    kept = json.dumps(
        [settings for _, _, settings in pycode_macros.REPLAYS._kept.values()],
        default=lambda v: sorted(v) if isinstance(v, frozenset) else str(v),
    )
    assert "secret_col" not in kept, "an answer derived from columns was kept for replay"


def test_a_fifo_as_a_macro_package_file_never_hangs_the_load(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (root / "models").mkdir(parents=True)
    (root / "macros").mkdir()
    (root / "models" / "a.sql").write_text("MODEL (name shop.a, kind FULL);\nSELECT 1 AS x\n")
    (root / "config.yaml").write_text("model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n")
    pipe = root / "macros" / "__init__.py"
    os.mkfifo(pipe)
    done: list[object] = []

    def load() -> None:
        try:
            done.append(load_project(root, use_cache=False))
        except Exception as exc:  # an error naming the file is a sound answer
            done.append(exc)

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    thread.join(10.0)
    hung = thread.is_alive()
    if hung:  # release the service's read: a writer that closes at once gives it EOF
        os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(30.0)
    assert not hung, "the load blocked opening a FIFO of the tree"
