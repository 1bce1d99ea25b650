"""Schemathesis against the webhook endpoints, in-process: no 5xx, no hang, and every answer
is one the service's OpenAPI schema documents (status, content type, body).

Requests come from the schema (Schemathesis, positive and negative data), from the real
payloads with fields damaged, and as raw bodies (not JSON, nested 100 000 deep, over
``max_body_bytes``, streamed without a length). Most are signed (GitHub) or carry the token
(GitLab), so they get past authentication into the parsers and the queue; the rest must be
refused with 401. For the signed ones, the status is also checked against what the parser
says of the same body (``expected_status``), and a 200 "duplicate" only ever follows a 202
that stored the same delivery id.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import pytest
import schemathesis
from hypothesis import event as note_outcome
from hypothesis import given
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.core.transport import Response
from schemathesis.python.asgi import shutdown_lifespans

from sluice.bot.entry.app import create_app
from sluice.bot.entry.settings import ServiceSettings
from sluice.bot.events.github import parse_github
from sluice.bot.events.gitlab import parse_gitlab
from sluice.bot.events.neutral import Event
from sluice.bot.events.payload import PayloadError
from sluice.bot.intake.verify import gitlab_project_of, gitlab_project_token
from tests.fuzz.common import fuzz
from tests.fuzz.strategies import GITHUB_EVENTS, GITLAB_EVENTS, real_payloads

pytestmark = pytest.mark.slow  # fuzzing: thousands of examples

SECRET = "fuzz-webhook-secret"
TOKEN = "fuzz-gitlab-token"
MAX_BODY = 64 * 1024
TIMEOUT = 10.0  # seconds per request: a hang fails the test instead of stalling it
# Hypothesis draws the first of several choices more often than the others.
MOSTLY = st.sampled_from([True, True, False])
SOMETIMES = st.sampled_from([False, False, False, True])
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


@dataclass
class Service:
    """The app under test, its schema, and the delivery ids it answered 202 for."""

    schema: Any
    stored: set[str] = field(default_factory=set)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    root = tmp_path_factory.mktemp("fuzz-service")
    settings = ServiceSettings(
        webhook_secret=SECRET, gitlab_webhook_secret=TOKEN, workdir=root / "work",
        database_url=f"sqlite:///{root / 'state.db'}", max_body_bytes=MAX_BODY,
    )  # fmt: skip
    app = create_app(settings, start_workers=False)
    try:
        # Schemathesis starts the app's lifespan (queue, intake) once, for every request.
        yield Service(schemathesis.openapi.from_asgi("/openapi.json", app))
    finally:
        shutdown_lifespans()


def test_the_schema_documents_the_webhooks(service: Service) -> None:
    paths = service.schema.raw_schema["paths"]
    for path, headers in (
        ("/webhooks/github", {"X-GitHub-Event", "X-GitHub-Delivery", "X-Hub-Signature-256"}),
        ("/webhooks/gitlab", {"X-Gitlab-Event", "X-Gitlab-Token", "Idempotency-Key"}),
    ):
        post = paths[path]["post"]
        assert {p["name"] for p in post["parameters"] if p["in"] == "header"} == headers
        assert post["requestBody"]["content"]["application/json"]["schema"]["type"] == "object"
        assert set(post["responses"]) == {"200", "202", "204", "400", "401", "403", "413", "503"}


# --- bodies ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Raw:
    """A body sent as these bytes, or streamed in chunks without a Content-Length."""

    data: bytes
    streamed: bool = False

    def __repr__(self) -> str:  # Hypothesis prints failing examples
        more = "..." if len(self.data) > 40 else ""
        return f"Raw({self.data[:40]!r}{more}, {len(self.data)} bytes, streamed={self.streamed})"


raw_bodies = st.one_of(
    st.builds(Raw, st.binary(max_size=200)),
    st.builds(Raw, st.sampled_from([b"", b"{", b"null", b"[]", b'"x"', b"NaN", b'{"a": 1e999}'])),
    st.builds(lambda n: Raw(b"[" * n + b"]" * n), st.integers(10_000, 100_000)),  # deep
    st.builds(lambda n: Raw(b'{"a": ' * n + b"1" + b"}" * n), st.integers(1_000, 20_000)),
    st.builds(
        lambda n: Raw(b'{"x": "' + b"y" * n + b'"}'), st.integers(MAX_BODY - 20, MAX_BODY + 20)
    ),
    st.builds(lambda n: Raw(b" " * n + b"{}", streamed=True), st.integers(0, 2 * MAX_BODY)),
)


def _real_bodies(pattern: str) -> st.SearchStrategy[tuple[str, bytes]]:
    """(header, body) of real payloads with fields damaged (not nested past json.dumps)."""
    return real_payloads(pattern, deep=False).map(
        lambda case: (case.header, json.dumps(case.payload).encode())
    )


def _body_of(case: schemathesis.Case[Any]) -> bytes:
    """The bytes Schemathesis would send for the generated body."""
    kwargs = case.as_transport_kwargs()
    if "json" in kwargs:
        return json.dumps(kwargs["json"]).encode()
    data = kwargs.get("data")
    if data is None:
        return b""
    return data.encode() if isinstance(data, str) else bytes(data)


# --- what the service must answer -----------------------------------------------------------


def _sign(body: bytes) -> str:
    return "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()


def _gitlab_token(body: bytes) -> str | None:
    """The webhook token of the GitLab project ``body`` names, None when it names none."""
    try:
        project = gitlab_project_of(json.loads(body))
    except (ValueError, RecursionError):
        return None
    return None if project is None else gitlab_project_token(TOKEN, project)


def expected_status(
    parse: Callable[[str, Any], Event | None], event: str, body: bytes
) -> int | tuple[int, ...]:
    """What an authenticated delivery of ``body`` must get, by the parser's own verdict."""
    try:
        payload = json.loads(body)
    except ValueError:
        return 400
    except RecursionError:
        # Nested near Python's recursion limit: whether it parses depends on the stack
        # depth of the thread parsing it; refused (400) or parsed and judged, never a 500.
        return (400, 200, 202, 204)
    if not isinstance(payload, dict):
        return 400
    try:
        parsed = parse(event, payload)
    except PayloadError:
        return 400
    return 204 if parsed is None else (200, 202)


def check(
    service: Service, case: schemathesis.Case[Any], response: Response, expected: Any
) -> None:
    note_outcome(f"{case.operation.path} {response.status_code}")
    case.validate_response(response, checks=CHECKS)
    allowed = expected if isinstance(expected, tuple) else (expected,)
    assert response.status_code in allowed, (response.status_code, response.content[:300])
    if response.status_code in (200, 202) and response.content:
        answer = response.json()
        if answer["status"] == "queued":
            assert answer["delivery"] not in service.stored, "stored twice"
            service.stored.add(answer["delivery"])
        elif answer["status"] == "duplicate":
            assert answer["delivery"] in service.stored, "a duplicate of nothing stored"


def _call(case: schemathesis.Case[Any], body: bytes | Raw) -> Response:
    raw = body if isinstance(body, Raw) else Raw(body)
    data: Any = raw.data
    if raw.streamed:
        chunks = [raw.data[i : i + 8192] for i in range(0, len(raw.data), 8192)]
        data = (chunk for chunk in chunks)
    return case.call(data=data, timeout=TIMEOUT)


def _sent(response: Response, name: str) -> str:
    """A header of the request as the service read it ("" when it was not sent)."""
    value: str | bytes = response.request.headers.get(name, "")
    return value.decode("latin-1") if isinstance(value, bytes) else value


def _headers(case: schemathesis.Case[Any]) -> MutableMapping[str, Any]:
    if case.headers is None:
        case.headers = {}
    return case.headers


def _body_strategy(pattern: str) -> st.SearchStrategy[Any]:
    """A real payload damaged, None (the body Schemathesis generated), or raw bytes."""
    kinds = {"real": _real_bodies(pattern), "generated": st.none(), "raw": raw_bodies}
    # Hypothesis draws the first choices more often: real payloads reach the parsers.
    return st.sampled_from(["real", "generated", "real", "raw"]).flatmap(kinds.__getitem__)


# --- the tests ------------------------------------------------------------------------------


@fuzz(250)
@given(data=st.data())
def test_github_webhook(service: Service, data: st.DataObject) -> None:
    mode = data.draw(st.sampled_from([GenerationMode.POSITIVE, GenerationMode.NEGATIVE]))
    case = data.draw(service.schema["/webhooks/github"]["POST"].as_strategy(mode))
    headers = _headers(case)
    source = data.draw(_body_strategy("github/*/*.json"))
    if isinstance(source, tuple):  # a real payload, under its own event most of the time
        own, body = source
        headers["X-GitHub-Event"] = data.draw(st.sampled_from([own, own, *GITHUB_EVENTS]))
    else:
        body = source or _body_of(case)
        if data.draw(st.booleans()):
            headers["X-GitHub-Event"] = data.draw(st.sampled_from(GITHUB_EVENTS))
    raw = body if isinstance(body, Raw) else Raw(body)
    signed = data.draw(MOSTLY)
    if signed:
        headers["X-Hub-Signature-256"] = _sign(raw.data)
        if data.draw(SOMETIMES):  # a retry of a delivery seen before
            headers["X-GitHub-Delivery"] = data.draw(st.sampled_from(["d-1", "d-2"]))
    response = _call(case, raw)
    delivery, event = _sent(response, "X-GitHub-Delivery"), _sent(response, "X-GitHub-Event")
    if len(raw.data) > MAX_BODY:
        expected: Any = 413
    elif not signed:
        expected = 401
    elif not event or not delivery or len(delivery) > 200:
        expected = 400
    elif event == "ping":
        expected = 200
    else:
        expected = expected_status(parse_github, event, raw.data)
    check(service, case, response, expected)


@fuzz(250)
@given(data=st.data())
def test_gitlab_webhook(service: Service, data: st.DataObject) -> None:
    mode = data.draw(st.sampled_from([GenerationMode.POSITIVE, GenerationMode.NEGATIVE]))
    case = data.draw(service.schema["/webhooks/gitlab"]["POST"].as_strategy(mode))
    headers = _headers(case)
    source = data.draw(_body_strategy("gitlab/*.json"))
    body = source[1] if isinstance(source, tuple) else source or _body_of(case)
    if isinstance(source, tuple) or data.draw(st.booleans()):
        headers["X-Gitlab-Event"] = data.draw(st.sampled_from(GITLAB_EVENTS))
    raw = body if isinstance(body, Raw) else Raw(body)
    authentic = data.draw(MOSTLY)
    token = _gitlab_token(raw.data)  # None: the body names no project to sign it for
    if authentic:
        headers["X-Gitlab-Token"] = token or TOKEN
        if data.draw(SOMETIMES):  # a retry of a delivery seen before
            headers["Idempotency-Key"] = data.draw(st.sampled_from(["k-1", "k-2"]))
    response = _call(case, raw)
    declared = response.request.headers.get("Content-Length")
    if declared is not None and int(declared) > MAX_BODY:
        expected: Any = 413  # refused before the token is even looked at
    elif not authentic or token is None:  # the bare secret: refused before the body is read
        expected = 401
    elif len(raw.data) > MAX_BODY:
        expected = 413
    else:
        expected = expected_status(parse_gitlab, "", raw.data)
    check(service, case, response, expected)
