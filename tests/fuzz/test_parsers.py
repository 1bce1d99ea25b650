"""Property tests: the parsers of untrusted input raise only Sluice's own errors.

Whatever a forge (or someone who has the webhook secret) sends, whatever a user writes in a
comment or a model file, the parsers either return their result or raise a subclass of
:class:`~sluice.core.errors.SluiceError` that the service and the CLI turn into a message;
never ``KeyError``, ``TypeError``, ``RecursionError`` and friends, which the service would
answer with a 500 and the CLI with a traceback. What they return keeps its invariants:
events are well typed, storable (text without NUL or lone surrogates, 64-bit integers) and
survive the queue's JSON; commands are well formed; headers point inside their text.

Inputs: arbitrary JSON, JSON shaped like the forges' payloads, the real payloads under
``tests/fixtures/webhooks`` with fields deleted, nulled, retyped, corrupted, made huge or deeply
nested (``strategies.py``); comments around ``/sluice`` lines; model and audit files built
from header and SQL fragments, nested deeply, or arbitrary text and bytes. See
``common.py`` for the example counts and how to explore with more.
"""

from __future__ import annotations

import dataclasses
import json
import re
import types
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event as note_outcome
from hypothesis import given
from hypothesis import strategies as st

from sluice.bot.events.commands import USAGE, WHERE_LIMIT, Command, CommandError, parse_command
from sluice.bot.events.github import parse_github
from sluice.bot.events.gitlab import parse_gitlab
from sluice.bot.events.neutral import Event, event_from_json, pr_key, supersedes
from sluice.bot.events.payload import PayloadError
from sluice.core.errors import SluiceError
from sluice.core.model.header import Header, Node, parse_header
from sluice.core.model.loader import load_project
from tests.fuzz.common import fuzz
from tests.fuzz.strategies import (
    GITHUB_EVENTS,
    GITHUB_KEYS,
    GITLAB_EVENTS,
    GITLAB_KEYS,
    json_values,
    real_payloads,
    shaped_json,
)

pytestmark = pytest.mark.slow  # fuzzing: thousands of examples

# --- what a parsed event must be -----------------------------------------------------------


def _conforms(value: Any, hint: Any) -> bool:
    """Whether ``value`` has the type of a field annotated ``hint`` (JSON's int: no bool),
    and can be stored: text as UTF-8 without NUL (PostgreSQL), integers in a BIGINT."""
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        return any(_conforms(value, h) for h in typing.get_args(hint))
    if origin is tuple:
        item = typing.get_args(hint)[0]
        return isinstance(value, tuple) and all(_conforms(v, item) for v in value)
    if hint is type(None):
        return value is None
    if hint is int:
        return type(value) is int and -(2**63) <= value < 2**63
    if hint is str:
        return isinstance(value, str) and "\x00" not in value and _utf8_ok(value)
    return isinstance(value, hint)


def _utf8_ok(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_event(event: Event | None, forge: str) -> None:
    """The invariants of a parsed event, as the service and the queue rely on them."""
    if event is None:
        return
    assert event.forge == forge
    hints = typing.get_type_hints(type(event))
    for field in dataclasses.fields(event):
        value = getattr(event, field.name)
        assert _conforms(value, hints[field.name]), (field.name, value)
    document = event.to_json()
    assert event_from_json(document) == event
    # The queue stores the document as JSON text; a worker reads it back.
    assert event_from_json(json.loads(json.dumps(document))) == event
    assert isinstance(pr_key(event), str)
    assert isinstance(supersedes(event), bool)


def parses_or_refuses(parse: Callable[[str, Any], Event | None], header: str, payload: Any,
                      forge: str) -> None:  # fmt: skip
    try:
        event = parse(header, payload)
    except PayloadError as exc:
        assert exc.message
        note_outcome("refused")
        return
    note_outcome(f"event {event.kind}" if event is not None else "no work")
    check_event(event, forge)


# --- GitHub ----------------------------------------------------------------------------------


@fuzz(300)
@given(st.sampled_from(GITHUB_EVENTS) | st.text(max_size=20), json_values)
def test_github_any_json(event: str, payload: Any) -> None:
    parses_or_refuses(parse_github, event, payload, "github")


@fuzz(200)
@given(st.sampled_from(GITHUB_EVENTS), shaped_json(GITHUB_KEYS))
def test_github_payload_shaped_json(event: str, payload: dict[str, Any]) -> None:
    parses_or_refuses(parse_github, event, payload, "github")


@fuzz(300)
@given(st.data())
def test_github_damaged_real_payloads(data: st.DataObject) -> None:
    case = data.draw(real_payloads("github/*/*.json"))
    header = case.header
    if data.draw(st.integers(0, 9)) == 0:  # now and then under another event's name
        header = data.draw(st.sampled_from(GITHUB_EVENTS))
    parses_or_refuses(parse_github, header, case.payload, "github")


# --- GitLab ----------------------------------------------------------------------------------


@fuzz(300)
@given(st.sampled_from(GITLAB_EVENTS) | st.text(max_size=20), json_values)
def test_gitlab_any_json(event: str, payload: Any) -> None:
    parses_or_refuses(parse_gitlab, event, payload, "gitlab")


@fuzz(200)
@given(
    st.sampled_from(GITLAB_EVENTS),
    st.sampled_from(["merge_request", "note", "tag_push"]),
    shaped_json(GITLAB_KEYS),
)
def test_gitlab_payload_shaped_json(event: str, kind: str, payload: dict[str, Any]) -> None:
    parses_or_refuses(parse_gitlab, event, {"object_kind": kind, **payload}, "gitlab")


@fuzz(300)
@given(st.data())
def test_gitlab_damaged_real_payloads(data: st.DataObject) -> None:
    case = data.draw(real_payloads("gitlab/*.json"))
    header = data.draw(st.sampled_from(GITLAB_EVENTS))
    parses_or_refuses(parse_gitlab, header, case.payload, "gitlab")


# --- comment commands ------------------------------------------------------------------------

_MODEL = re.compile(r"^[a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*$")
odd_text = st.text(
    st.characters(codec="utf-8")
    | st.sampled_from(["\x00", "\r", "\n", "\t", "\u2028", "\x85", "\x1c", "'", '"', "`", "\\"])
)
command_words = st.sampled_from(
    [
        "/sluice", "/SLUICE", "/Sluice", " ", "\t", "\n", "\r\n", "\x00", "plan", "deploy",
        "help", "diff", "DIFF", "a.b", "Sales.Orders", "_x.y_1", "a.b.c", "--where",
        "--where=", "--where ", "-x", "'", '"', "`", "```", "~~~", ">", "<!--", "-->", "=",
        "x = 'y'", "'a' = 'b'", "é", "\u00a0", "\u2003", "\u200b", "\U0001f600", "\\",
    ]
)  # fmt: skip
command_lines = st.builds(
    lambda lead, sub, args: f"{lead}/sluice {sub} {args}",
    st.sampled_from(["", " ", "   ", "\t", "text\n", "```\nx\n```\n", "<!-- x -->\n", "> q\n"]),
    st.sampled_from(["plan", "deploy", "help", "diff", "Diff", "nope", ""]),
    st.lists(command_words | st.text(max_size=4), max_size=8).map(" ".join),
)
comment_bodies = (
    odd_text
    | command_lines
    | st.builds("/sluice".__add__, odd_text)
    | st.lists(command_words | odd_text, max_size=12).map("".join)
    | st.builds(
        lambda where, n: f"/sluice diff a.b --where {where * n}",
        st.sampled_from(["x", "'", "é"]),
        st.integers(WHERE_LIMIT - 3, WHERE_LIMIT + 3),
    )
)


def check_command(body: str) -> Command | None:
    try:
        command = parse_command(body)
    except CommandError as exc:
        assert exc.message in USAGE.values() and exc.hint
        note_outcome("refused")
        return None
    note_outcome(command.name if command is not None else "no command")
    if command is None:
        return None
    assert command.name in USAGE
    if command.name == "diff":
        assert command.model is not None and _MODEL.match(command.model)
        assert command.where is None or 0 < len(command.where) <= WHERE_LIMIT
        assert command.unknown is None
    else:
        assert command.model is None and command.where is None
    if command.unknown is not None:
        assert command.name == "help"
    return command


@fuzz(300)
@given(comment_bodies)
def test_comment_commands(body: str) -> None:
    check_command(body)


@fuzz(200)
@given(comment_bodies, comment_bodies)
def test_first_command_line_decides(first: str, later: str) -> None:
    """Text after a comment's command never changes what the command is."""
    try:
        command = parse_command(first)
    except CommandError as exc:
        with pytest.raises(CommandError) as again:
            parse_command(f"{first}\n{later}")
        assert (again.value.message, again.value.hint) == (exc.message, exc.hint)
        return
    if command is not None:
        assert parse_command(f"{first}\n{later}") == command


@fuzz(200)
@given(comment_bodies)
def test_quoted_comments_hold_no_command(body: str) -> None:
    """Quoting every line of a comment (as a reply does) makes it hold no command."""
    quoted = "\n".join("> " + line for line in body.splitlines())
    assert parse_command(quoted) is None


# --- model headers and files ----------------------------------------------------------------

header_words = st.sampled_from(
    [
        "MODEL", "model", "AUDIT", " ", "\n", "(", ")", "[", "]", ",", ";", "=", ":=", ".",
        "name", "s.t", "kind", "FULL", "VIEW", "INCREMENTAL_BY_TIME_RANGE", "SEED",
        "INCREMENTAL_BY_UNIQUE_KEY", "EXTERNAL", "time_column", "ds", "'%Y-%m-%d'",
        "batch_size", "lookback", "unique_key", "path", "'../x.csv'", "csv_settings",
        "columns", "id INT", "TIMESTAMP WITH TIME ZONE", "DECIMAL(10, 2)", "audits",
        "not_null", "columns := [a]", "blocking", "start", "'2024-01-01'", "'9999-99-99'",
        "end", "cron", "'@daily'", "dialect", "duckdb", "nope", "grain", "grains", "tags",
        "owner", "description", "column_descriptions", "enabled", "true", "false", "null",
        "forward_only", "on_destructive_change", "partitioned_by", "stamp", "depends_on",
        "0", "1", "-1", "1.5", "1e400", "99999999999999999999999", "'", '"', "`", "''",
        '"x"', "`x`", "--", "/*", "*/", "\x00", "é", "\u00a0", "@start_ds", "@VAR('v')",
        "@VAR('nope')", "@VAR(", "@{this_model}", "@this_model", "@nope", "SELECT", "*",
        "FROM", "WHERE", "a.b", "c.d.e", "s.t", "WITH", "x AS (SELECT 1)", "JOIN", "ON",
        "range(10)", "UNION ALL", "INSERT INTO", "{{", "}}", "$$", "\\",
    ]
)  # fmt: skip


def _join(parts: list[str]) -> str:
    return ", ".join(parts)


def _noisy(text: str, noise: list[tuple[int, str]]) -> str:
    """``text`` with words inserted at some offsets (as fractions of its length)."""
    for where, word in noise:
        at = where * len(text) // 100
        text = text[:at] + word + text[at:]
    return text


kinds = st.sampled_from(
    [
        "FULL", "VIEW", "VIEW (materialized true)", "SEED (path '../seeds/x.csv')",
        "INCREMENTAL_BY_TIME_RANGE (time_column ds)",
        "INCREMENTAL_BY_TIME_RANGE (time_column (ds, '%Y-%m-%d'), batch_size 7, lookback 2)",
        "INCREMENTAL_BY_TIME_RANGE (time_column (ds, 1, 2))",
        "INCREMENTAL_BY_UNIQUE_KEY (unique_key (id, k), forward_only true)",
        "INCREMENTAL_BY_UNIQUE_KEY (unique_key id, on_destructive_change warn)",
        "EXTERNAL", "nope", "FULL (x 1)", "'FULL'", "[FULL]",
    ]
)  # fmt: skip
properties = st.sampled_from(
    [
        "dialect duckdb", "dialect 'bigquery'", "dialect nope", "cron '@hourly'", "cron 5",
        "start '2024-01-01'", "start '2024-13-45'", "start 99999999999999999999",
        "end '2024-02-01'", "grain (id, k)", "grains [id]", "owner me", "tags [a, 'b']",
        "description 'a ) b'", "column_descriptions (id = 'the id', k = x)",
        "audits (not_null(columns := [id]), unique_values_non_blocking(columns := (id), blocking := false))",
        "audits x", "audits (1)", "forward_only true", "on_destructive_change allow",
        "on_destructive_change maybe", "batch_size 0", "batch_size 3",
        "columns (id INT, ds DATE, t TIMESTAMP WITH TIME ZONE, d DECIMAL(10, 2))",
        "columns (id NOTATYPE)", "columns id", "partitioned_by ds", "stamp v2",
        "depends_on [s.other]", "enabled false", "enabled 'maybe'", "unknown_prop 1",
    ]
)  # fmt: skip
queries = st.sampled_from(
    [
        "SELECT 1 AS id",
        "SELECT id, ds FROM s.src WHERE ds BETWEEN @start_ds AND @end_ds",
        "SELECT @VAR('v') AS v, @VAR('missing', 0) AS w",
        "SELECT @VAR('missing') AS v",
        "SELECT * FROM @this_model",
        "WITH c AS (SELECT 1 AS id) SELECT id FROM c",
        "SELECT id FROM nope",
        "SELECT id FROM a.b.c",
        "SELECT * FROM range(10)",
        "SELECT 1; SELECT 2",
        "INSERT INTO s.t SELECT 1",
        "SELECT @nope",
        "SELECT {{ x }}",
        "SELECT 'unterminated",
        "SELECT (((((1",
        "SELECT id FROM s.x",
        "",
    ]
)
structured_models = st.builds(
    lambda name, kind, props, query, noise: _noisy(
        f"MODEL ({_join([name, 'kind ' + kind, *props])});\n{query}", noise
    ),
    st.sampled_from(["name s.x"] * 6 + ["name S.X", "name 's.x'", "name x", "name a.b.c"]),
    kinds,
    st.lists(properties, max_size=4, unique_by=lambda prop: prop.split()[0]),
    queries,
    st.lists(st.tuples(st.integers(0, 100), header_words), max_size=2).filter(
        lambda noise: len(noise) < 2
    ),
)


def _deep(opener: str, closer: str, n: int, inner: str = "1") -> str:
    return opener * n + inner + closer * n


deep_headers = st.builds(
    lambda pair, n: f"MODEL (name s.x, kind FULL, tags {_deep(pair[0], pair[1], n)});\nSELECT 1",
    st.sampled_from([("[", "]"), ("(", ")"), ("f(", ")"), ("a = [", "]")]),
    st.integers(1, 3_000),
)
deep_queries = st.builds(
    lambda pair, n: f"MODEL (name s.x, kind FULL);\nSELECT {_deep(pair[0], pair[1], n)} AS x",
    st.sampled_from(
        [
            ("(", ")"),
            ("NOT ", ""),
            ("-", ""),
            ("ABS(", ")"),
            ("(SELECT ", ")"),
            ("CASE WHEN TRUE THEN ", " END"),
        ]
    ),
    st.integers(1, 3_000),
)
model_texts = (
    st.text()
    | structured_models
    | deep_headers
    | deep_queries
    | structured_models
    | st.lists(header_words, max_size=40).map(" ".join)
    | st.lists(header_words | st.text(max_size=3), max_size=40).map("".join)
    | st.builds(
        lambda props, body: f"MODEL ({props});\n{body}",
        st.lists(header_words, max_size=20).map(" ".join),
        st.lists(header_words, max_size=20).map(" ".join),
    )
)


def _nodes(node: Node) -> Iterator[Node]:
    yield node
    for item in node.items:
        yield from _nodes(item)


def check_header(header: Header | None, text: str, keyword: str) -> None:
    if header is None:
        return
    assert header.keyword == keyword
    assert 0 <= header.body_start <= len(text)
    assert header.properties.keys() == header.keys.keys()
    for key, value in header.properties.items():
        assert key == key.lower()
        for node in _nodes(value):
            assert 0 <= node.start <= node.end <= len(text), (key, node)


@fuzz(300)
@given(model_texts, st.sampled_from(["MODEL", "AUDIT"]))
def test_model_header(text: str, keyword: str) -> None:
    try:
        header = parse_header(text, "models/x.sql", keyword)
    except SluiceError as exc:
        assert exc.path == "models/x.sql"
        note_outcome("refused")
        return
    note_outcome("no header" if header is None else "parsed")
    check_header(header, text, keyword)


CONFIG = """\
model_defaults:
  dialect: spark
  start: '2024-01-01'
variables:
  v: 3
"""
EXTERNAL = """\
- name: s.src
  columns:
    id: int
    ds: date
"""


audit_texts = model_texts.map(lambda text: re.sub("(?i)model", "AUDIT", text, count=1)) | st.builds(
    lambda n, query: f"AUDIT (name a{n});\nSELECT * FROM @this_model WHERE {query}",
    st.integers(0, 3),
    st.sampled_from(
        ["@column IS NULL", "id < @threshold", "(((", "TRUE; AUDIT (name b); SELECT 1"]
    ),
)


def _project(root: Path) -> Path:
    (root / "models").mkdir()
    (root / "audits").mkdir()
    (root / "seeds").mkdir()
    (root / "config.yaml").write_text(CONFIG, encoding="utf-8")
    (root / "external_models.yaml").write_text(EXTERNAL, encoding="utf-8")
    (root / "seeds" / "x.csv").write_text("id,ds\n1,2024-01-01\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def model_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project whose one file, models/x.sql, each example writes."""
    return _project(tmp_path_factory.mktemp("fuzz-model"))


@pytest.fixture(scope="module")
def audit_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project with one good model; each example writes audits/x.sql."""
    root = _project(tmp_path_factory.mktemp("fuzz-audit"))
    model = "MODEL (name s.x, kind FULL);\nSELECT 1 AS id"
    (root / "models" / "x.sql").write_text(model, encoding="utf-8")
    return root


def check_load(root: Path, file: str, data: bytes) -> None:
    (root / file).write_bytes(data)
    try:
        project = load_project(root, use_cache=False)
    except SluiceError as exc:
        assert str(exc)
        note_outcome(type(exc).__name__)
        return
    note_outcome("loaded")
    for model in project.models.values():
        assert model.query_sql is None or isinstance(model.query_sql, str)


def _utf8(text: str) -> bytes:
    return text.encode("utf-8")


@fuzz(250)
@given(model_texts.map(_utf8) | st.binary())
def test_model_file(model_project: Path, data: bytes) -> None:
    check_load(model_project, "models/x.sql", data)


@fuzz(150)
@given(audit_texts.map(_utf8) | st.binary())
def test_audit_file(audit_project: Path, data: bytes) -> None:
    check_load(audit_project, "audits/x.sql", data)
