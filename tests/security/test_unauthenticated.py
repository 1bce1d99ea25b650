"""Nothing an unauthenticated request sends creates lasting state (issue 40 §6).

Thousands of unsigned and badly signed deliveries, with random event names, delivery ids,
repositories, paths and headers, go to the running app: afterwards the state database
holds no row, the metrics hold the same series as after the first few, and the log holds a
few lines (the rest are counted). The control: one signed delivery does store its row.
"""

from __future__ import annotations

import json
import logging
import random
import sqlite3
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from sluice.bot.entry.app import GITHUB_EVENTS, GITLAB_EVENTS, RefusalLog, create_app
from sluice.bot.entry.settings import ServiceSettings
from sluice.bot.present.metrics import MAX_LABEL_VALUES, OTHER, Registry
from tests.helpers.cases import load_case
from tests.helpers.github_service import SECRET, sign

GITLAB_SECRET = "gitlab-webhook-token-value"
FLOOD = 2000


def _word(rng: random.Random, size: int) -> str:
    return "".join(rng.choice(string.ascii_letters + string.digits + "_-./ ") for _ in range(size))


@pytest.fixture
def app_state(tmp_path: Path) -> Iterator[tuple[TestClient, Path]]:
    db = tmp_path / "state.db"
    settings = ServiceSettings(
        webhook_secret=SECRET, gitlab_webhook_secret=GITLAB_SECRET, workdir=tmp_path / "work",
        database_url=f"sqlite:///{db}",
    )  # fmt: skip
    # No workers: a stored job stays in the queue, where the count sees it.
    with TestClient(create_app(settings, start_workers=False)) as client:
        yield client, db


def _rows(db: Path) -> dict[str, int]:
    """Rows of every table of the state database but the migrations' own."""
    with sqlite3.connect(db) as conn:
        tables = [
            name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        return {
            t: conn.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0]
            for t in tables
            if t != "sluice_migrations"
        }


def _ours(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """The service's records (not the test client's own request lines)."""
    return [r for r in caplog.records if r.name.startswith("sluice")]


def _series(text: str) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    return {
        (s.name, tuple(sorted(s.labels.items())))
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _hostile_requests(client: TestClient, rng: random.Random, count: int) -> None:
    payload = load_case("github/pull_request/opened.payload.json")
    for i in range(count):
        payload["repository"]["full_name"] = f"{_word(rng, 12)}/{_word(rng, 12)}"
        body = json.dumps(payload).encode()
        headers = {
            f"X-{_word(rng, 8).replace(' ', '').replace('/', '')}": _word(rng, 30),
            "Content-Type": "application/json",
        }
        kind = i % 5
        if kind == 0:  # no signature
            headers |= {"X-GitHub-Event": _word(rng, 20), "X-GitHub-Delivery": _word(rng, 40)}
            response = client.post("/webhooks/github", content=body, headers=headers)
        elif kind == 1:  # signed with another secret, a real event name
            headers |= {
                "X-GitHub-Event": rng.choice(sorted(GITHUB_EVENTS)),
                "X-GitHub-Delivery": _word(rng, 40),
                "X-Hub-Signature-256": sign(body, "not-the-secret"),
            }
            response = client.post("/webhooks/github", content=body, headers=headers)
        elif kind == 2:  # a malformed signature, an enormous event name
            headers |= {
                "X-GitHub-Event": _word(rng, 2000),
                "X-GitHub-Delivery": _word(rng, 400),
                "X-Hub-Signature-256": "sha256=" + _word(rng, 64),
            }
            response = client.post("/webhooks/github", content=body, headers=headers)
        elif kind == 3:  # GitLab with a wrong token
            headers |= {
                "X-Gitlab-Event": _word(rng, 30),
                "X-Gitlab-Token": _word(rng, 20),
                "Idempotency-Key": _word(rng, 30),
            }
            response = client.post("/webhooks/gitlab", content=body, headers=headers)
        else:  # a path of its own, any method
            path = "/" + _word(rng, 40).replace(" ", "").replace(".", "x")
            method = rng.choice(["GET", "POST", "PUT", "DELETE"])
            response = client.request(method, path, content=body, headers=headers)
            assert response.status_code in (404, 405), (path, response.status_code)
            continue
        assert response.status_code == 401, (kind, response.status_code, response.text)


@pytest.mark.slow  # 2,100 requests
def test_a_flood_of_unsigned_deliveries_stores_nothing_and_adds_no_series(
    app_state: tuple[TestClient, Path], caplog: pytest.LogCaptureFixture
) -> None:
    client, db = app_state
    rng = random.Random(40)
    caplog.set_level(logging.DEBUG)
    _hostile_requests(client, rng, 100)
    before = _series(client.get("/metrics").text)
    logged_before = len(_ours(caplog))
    rows_before = _rows(db)

    _hostile_requests(client, rng, FLOOD)
    text = client.get("/metrics").text
    after = _series(text)
    # Every other series is as it was; the deliveries' take a fixed set of values.
    deliveries = {(n, labels) for n, labels in after if n == "sluice_deliveries_total"}
    assert after - deliveries == before - deliveries, sorted((after ^ before) - deliveries)
    events = {dict(labels)["event"] for _, labels in deliveries}
    assert events <= GITHUB_EVENTS | GITLAB_EVENTS | {OTHER}, events
    assert {dict(labels)["outcome"] for _, labels in deliveries} == {"unauthorized"}
    unlogged = [
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "sluice_refusals_unlogged_total"
    ]
    assert unlogged and unlogged[0] > FLOOD * 0.5, unlogged

    # Nothing stored: no queue row, no delivery, no ledger row (only the schema's version,
    # written at start-up).
    assert _rows(db) == rows_before
    assert sum(n for table, n in rows_before.items() if "version" not in table) == 0, rows_before

    # The log: a few lines, each short, for thousands of refusals (one client address).
    ours = _ours(caplog)
    assert len(ours[logged_before:]) <= 40, len(ours[logged_before:])
    assert all(len(r.getMessage()) < 400 for r in ours), max(len(r.getMessage()) for r in ours)
    assert sum(len(r.getMessage()) for r in ours) < 20_000

    # The control: a signed delivery is stored (so the counts above could have moved).
    payload = load_case("github/pull_request/opened.payload.json")
    body = json.dumps(payload).encode()
    response = client.post(
        "/webhooks/github",
        content=body,
        headers={
            "X-GitHub-Event": "pull_request",
            "X-GitHub-Delivery": "the-signed-one",
            "X-Hub-Signature-256": sign(body),
        },
    )
    assert response.status_code == 202, response.text
    assert sum(_rows(db).values()) > sum(rows_before.values())


def test_signed_deliveries_of_unknown_events_are_counted_as_other(
    app_state: tuple[TestClient, Path],
) -> None:
    client, _ = app_state
    for i in range(300):
        body = b"{}"
        name = f"invented_event_{i}"
        response = client.post(
            "/webhooks/github",
            content=body,
            headers={
                "X-GitHub-Event": name,
                "X-GitHub-Delivery": f"d-{i}",
                "X-Hub-Signature-256": sign(body),
            },
        )
        assert response.status_code == 204
    text = client.get("/metrics").text
    assert "invented_event" not in text
    assert 'sluice_deliveries_total{event="other",outcome="ignored"} 300.0' in text


def test_the_log_says_how_many_refusals_it_left_out(
    app_state: tuple[TestClient, Path], caplog: pytest.LogCaptureFixture
) -> None:
    client, _ = app_state
    caplog.set_level(logging.WARNING)
    for i in range(50):
        client.post("/webhooks/github", content=b"{}", headers={"X-GitHub-Event": f"e{i}"})
    rejected = [r.getMessage() for r in _ours(caplog) if "missing or wrong signature" in r.message]
    assert 1 <= len(rejected) <= 5, rejected
    assert "'e0'" in rejected[0] and "testclient" in rejected[0]


def test_a_client_gone_before_its_body_leaves_no_log_line(
    app_state: tuple[TestClient, Path], caplog: pytest.LogCaptureFixture
) -> None:
    import asyncio

    client, _ = app_state
    app: Any = client.app
    caplog.set_level(logging.DEBUG)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def many() -> None:
        for _ in range(200):
            scope = {
                "type": "http", "method": "POST", "path": "/webhooks/github", "headers": [],
                "query_string": b"", "client": ("203.0.113.9", 1), "server": ("x", 80),
                "scheme": "http", "http_version": "1.1", "root_path": "",
            }  # fmt: skip
            await app(scope, receive, send)

    asyncio.run(many())
    assert not [r for r in _ours(caplog) if r.levelno >= logging.WARNING], caplog.text
    assert 'outcome="disconnected"} 200.0' in client.get("/metrics").text


def test_refusals_are_bounded_per_source_and_overall() -> None:
    now = [0.0]
    unlogged: list[int] = []
    refusals = RefusalLog(
        per_source=3, total=10, window=60.0, sources=100, clock=lambda: now[0],
        on_unlogged=lambda: unlogged.append(1),
    )  # fmt: skip
    # One source: 3 a minute.
    assert [refusals.allow("a")[0] for _ in range(5)] == [True] * 3 + [False] * 2
    # Thousands of sources: 10 a minute in all, and only 100 buckets kept.
    logged = sum(refusals.allow(f"10.0.{i // 256}.{i % 256}")[0] for i in range(5000))
    assert logged == 7  # the overall bucket had 10, "a" took 3
    assert len(refusals._buckets) == 100
    assert len(unlogged) == 5000 - 7 + 2
    # A minute later the buckets are full again, and the first line says what it left out.
    now[0] = 60.0
    ok, skipped = refusals.allow("a")
    assert ok and skipped == 5000 - 7  # since the last line logged (the 7th source's)
    assert refusals.allow("a")[0] and refusals.allow("a")[0] and not refusals.allow("a")[0]


def test_label_values_are_bounded_by_the_registry_itself() -> None:
    registry = Registry(service_metrics=False)
    registry.counter("app_total", "Things.", ("path", "outcome"), values={"outcome": ("ok",)})
    for i in range(1000):
        registry.inc("app_total", path=f"/p{i}", outcome="ok" if i % 2 else f"bad{i}")
    series = _series(registry.render())
    paths = {dict(labels)["path"] for _, labels in series}
    outcomes = {dict(labels)["outcome"] for _, labels in series}
    assert len(paths) == MAX_LABEL_VALUES + 1 and OTHER in paths
    assert outcomes == {"ok", OTHER}
    with pytest.raises(ValueError, match="lacks"):
        registry.counter("app2_total", "x", ("a",), values={"b": ("1",)})


def test_every_event_sluice_acts_on_keeps_its_own_label() -> None:
    from sluice.bot.events import github

    assert set(github._PARSERS) <= GITHUB_EVENTS, set(github._PARSERS) - GITHUB_EVENTS
    assert {"Merge Request Hook", "Note Hook", "Tag Push Hook"} <= GITLAB_EVENTS
