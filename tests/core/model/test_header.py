import pytest

from sluice.core.errors import ModelError
from sluice.core.model.header import MAX_DEPTH, parse_header


def props(text: str) -> dict[str, str]:
    header = parse_header(text, "m.sql", "MODEL")
    assert header is not None
    return {key: node.text(text) for key, node in header.properties.items()}


def test_lists_as_tuples_or_arrays_with_trailing_commas_and_any_case() -> None:
    text = "model (\n  NAME s.t,\n  Kind full,\n  grain (a, b,),\n  TAGS [x, y,],\n);\nSELECT 1"
    assert props(text) == {"name": "s.t", "kind": "full", "grain": "(a, b,)", "tags": "[x, y,]"}


def test_body_starts_after_header_and_semicolon() -> None:
    text = "-- leading comment\nMODEL (name s.t /* ) inside comment */, description 'a ) b');\nSELECT 1"
    header = parse_header(text, "m.sql", "MODEL")
    assert header is not None
    assert text[header.body_start :].strip() == "SELECT 1"
    assert header.line == 2
    assert header.properties["description"].value == "a ) b"


def test_nested_kind_and_calls() -> None:
    text = "MODEL (name s.t, kind INCREMENTAL_BY_TIME_RANGE (time_column (ds, '%Y'), batch_size 3), audits (not_null(columns := [a])))"
    header = parse_header(text, "m.sql", "MODEL")
    assert header is not None
    kind = header.properties["kind"]
    assert kind.type == "call" and kind.value == "INCREMENTAL_BY_TIME_RANGE"
    assert [i.value for i in kind.items] == ["time_column", "batch_size"]


def test_not_a_model_file_returns_none() -> None:
    assert parse_header("SELECT 1", "m.sql", "MODEL") is None


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("MODEL (\n  name s.t,\n  kind FULL\n", 1, "never closed"),
        ("MODEL (\n  name s.t\n  kind FULL\n);", 3, "expected ','"),
        ("MODEL (\n  name s.t,\n  name s.u\n);", 3, "set twice"),
        ("MODEL (\n  name s.t,\n  'oops'\n);", 3, "not a property"),
        ("MODEL name s.t", 1, "expected '('"),
    ],
)
def test_header_errors_say_where(text: str, line: int, fragment: str) -> None:
    with pytest.raises(ModelError) as info:
        parse_header(text, "models/t.sql", "MODEL")
    assert info.value.path == "models/t.sql"
    assert info.value.line == line
    assert fragment in str(info.value)


def test_brackets_nested_past_the_limit_are_an_error_not_a_crash() -> None:
    # Found by tests/fuzz: the parser recursed once per level until RecursionError.
    inner = MAX_DEPTH - 1  # the header's own parentheses are the first level
    text = f"MODEL (name s.t, tags {'[' * inner}a{']' * inner})"
    header = parse_header(text, "m.sql", "MODEL")
    assert header is not None and header.properties["tags"].type == "list"
    for deep in (inner + 1, 5_000):
        text = f"MODEL (name s.t,\n tags {'[' * deep}a{']' * deep})"
        with pytest.raises(ModelError, match=f"nests brackets more than {MAX_DEPTH} deep") as info:
            parse_header(text, "models/t.sql", "MODEL")
        assert (info.value.path, info.value.line) == ("models/t.sql", 2)
