"""Prometheus text exposition (format 0.0.4), checked line by line."""

from __future__ import annotations

import threading

import pytest

from sluice.bot.present.metrics import ACK_BUCKETS, JOB_BUCKETS, Registry


def test_an_empty_registry_renders_nothing() -> None:
    assert Registry(service_metrics=False).render() == ""


def test_counter_with_labels() -> None:
    registry = Registry(service_metrics=False)
    registry.counter("app_deliveries_total", "Deliveries.", ("event", "outcome"))
    assert registry.render() == (
        "# HELP app_deliveries_total Deliveries.\n# TYPE app_deliveries_total counter\n"
    )
    registry.inc("app_deliveries_total", event="push", outcome="queued")
    registry.inc("app_deliveries_total", event="pull_request", outcome="queued")
    registry.inc("app_deliveries_total", 2, outcome="queued", event="push")
    assert registry.render() == (
        "# HELP app_deliveries_total Deliveries.\n"
        "# TYPE app_deliveries_total counter\n"
        'app_deliveries_total{event="pull_request",outcome="queued"} 1.0\n'
        'app_deliveries_total{event="push",outcome="queued"} 3.0\n'
    )


def test_a_counter_without_labels_starts_at_zero() -> None:
    registry = Registry(service_metrics=False)
    registry.counter("app_restarts_total", "Restarts.")
    assert registry.render().splitlines()[-1] == "app_restarts_total 0.0"
    registry.inc("app_restarts_total", 0.5)
    assert registry.render().splitlines()[-1] == "app_restarts_total 0.5"


def test_label_values_and_help_are_escaped() -> None:
    registry = Registry(service_metrics=False)
    registry.counter("app_x_total", 'Help with \\ and "quotes"\nand a second line.', ("v",))
    registry.inc("app_x_total", v='a\\b"c"\nd')
    assert registry.render() == (
        '# HELP app_x_total Help with \\\\ and "quotes"\\nand a second line.\n'
        "# TYPE app_x_total counter\n"
        'app_x_total{v="a\\\\b\\"c\\"\\nd"} 1.0\n'
    )


def test_histogram_buckets_are_cumulative_and_le_inclusive() -> None:
    registry = Registry(service_metrics=False)
    registry.histogram("app_seconds", "Durations.", ("kind",), buckets=(0.1, 1, 10))
    for value in (0.05, 0.1, 0.5, 1.0, 20.0):
        registry.observe("app_seconds", value, kind="plan")
    registry.observe("app_seconds", 3, kind="apply")
    assert registry.render() == (
        "# HELP app_seconds Durations.\n"
        "# TYPE app_seconds histogram\n"
        'app_seconds_bucket{kind="apply",le="0.1"} 0\n'
        'app_seconds_bucket{kind="apply",le="1.0"} 0\n'
        'app_seconds_bucket{kind="apply",le="10.0"} 1\n'
        'app_seconds_bucket{kind="apply",le="+Inf"} 1\n'
        'app_seconds_sum{kind="apply"} 3.0\n'
        'app_seconds_count{kind="apply"} 1\n'
        'app_seconds_bucket{kind="plan",le="0.1"} 2\n'
        'app_seconds_bucket{kind="plan",le="1.0"} 4\n'
        'app_seconds_bucket{kind="plan",le="10.0"} 4\n'
        'app_seconds_bucket{kind="plan",le="+Inf"} 5\n'
        'app_seconds_sum{kind="plan"} 21.65\n'
        'app_seconds_count{kind="plan"} 5\n'
    )


def test_a_histogram_without_labels_starts_empty_but_present() -> None:
    registry = Registry(service_metrics=False)
    registry.histogram("app_ack_seconds", "Ack.", buckets=(0.5,))
    assert registry.render() == (
        "# HELP app_ack_seconds Ack.\n"
        "# TYPE app_ack_seconds histogram\n"
        'app_ack_seconds_bucket{le="0.5"} 0\n'
        'app_ack_seconds_bucket{le="+Inf"} 0\n'
        "app_ack_seconds_sum 0.0\n"
        "app_ack_seconds_count 0\n"
    )


def test_a_gauge_is_read_at_scrape_time() -> None:
    registry = Registry(service_metrics=False)
    depth = [3]
    registry.gauge("app_queue_depth", "Jobs waiting.", lambda: depth[0])
    assert registry.render() == (
        "# HELP app_queue_depth Jobs waiting.\n# TYPE app_queue_depth gauge\napp_queue_depth 3.0\n"
    )
    depth[0] = 0
    assert registry.render().endswith("app_queue_depth 0.0\n")
    registry.gauge("app_queue_depth", "Jobs waiting.", lambda: float("inf"))  # rebinds
    assert registry.render().endswith("app_queue_depth +Inf\n")


def test_a_failing_gauge_is_left_out_of_the_scrape() -> None:
    registry = Registry(service_metrics=False)

    def broken() -> float:
        raise RuntimeError("database down")

    registry.gauge("app_queue_depth", "Jobs waiting.", broken)
    registry.counter("app_total", "Things.")
    assert registry.render() == (
        "# HELP app_queue_depth Jobs waiting.\n"
        "# TYPE app_queue_depth gauge\n"
        "# HELP app_total Things.\n"
        "# TYPE app_total counter\n"
        "app_total 0.0\n"
    )


def test_service_metrics_are_declared_by_default() -> None:
    registry = Registry()
    registry.inc("sluice_deliveries_total", event="pull_request", outcome="queued")
    registry.observe("sluice_ack_seconds", 0.003)
    registry.observe("sluice_job_duration_seconds", 42.0, kind="pull_request", outcome="done")
    lines = registry.render().splitlines()
    assert "# TYPE sluice_deliveries_total counter" in lines
    assert 'sluice_deliveries_total{event="pull_request",outcome="queued"} 1.0' in lines
    assert "# TYPE sluice_ack_seconds histogram" in lines
    assert 'sluice_ack_seconds_bucket{le="0.005"} 1' in lines
    assert "sluice_ack_seconds_count 1" in lines
    job = 'sluice_job_duration_seconds_bucket{kind="pull_request",outcome="done",'
    assert job + 'le="30.0"} 0' in lines
    assert job + 'le="60.0"} 1' in lines
    assert 'sluice_job_duration_seconds_sum{kind="pull_request",outcome="done"} 42.0' in lines
    buckets = [line for line in lines if line.startswith("sluice_ack_seconds_bucket")]
    assert len(buckets) == len(ACK_BUCKETS) + 1
    assert len(JOB_BUCKETS) == len(set(JOB_BUCKETS))


def test_misuse_is_refused() -> None:
    registry = Registry(service_metrics=False)
    registry.counter("app_total", "Things.", ("a",))
    registry.counter("app_total", "Things.", ("a",))  # the same again: fine
    with pytest.raises(ValueError, match="already declared"):
        registry.counter("app_total", "Things.", ("b",))
    with pytest.raises(ValueError, match="already declared"):
        registry.gauge("app_total", "Things.", lambda: 1.0)
    with pytest.raises(ValueError, match="takes labels"):
        registry.inc("app_total", b="x")
    with pytest.raises(ValueError, match="cannot decrease"):
        registry.inc("app_total", -1, a="x")
    with pytest.raises(KeyError):
        registry.inc("app_unknown_total")
    with pytest.raises(TypeError):
        registry.observe("app_total", 1.0, a="x")
    with pytest.raises(ValueError, match="metric name"):
        registry.counter("app-total", "Bad name.")
    with pytest.raises(ValueError, match="label name"):
        registry.counter("app_other_total", "Bad label.", ("__reserved",))
    with pytest.raises(ValueError, match="reserved"):
        registry.histogram("app_seconds", "Bad label.", ("le",), buckets=(1.0,))
    with pytest.raises(ValueError, match="ascending"):
        registry.histogram("app_seconds", "Bad buckets.", buckets=(2.0, 1.0))


def test_concurrent_updates_are_all_counted() -> None:
    registry = Registry(service_metrics=False)
    registry.counter("app_total", "Things.", ("t",))
    registry.histogram("app_seconds", "Durations.", buckets=(1.0,))

    def work(name: str) -> None:
        for _ in range(2000):
            registry.inc("app_total", t="all")
            registry.observe("app_seconds", 0.5)
            if name == "0":
                registry.render()

    threads = [threading.Thread(target=work, args=(str(i),)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    lines = registry.render().splitlines()
    assert 'app_total{t="all"} 16000.0' in lines
    assert "app_seconds_count 16000" in lines
    assert "app_seconds_sum 8000.0" in lines
