"""The service's metrics (prometheus_client underneath): what they hold, read back with
prometheus_client's own parser of the text exposition."""

from __future__ import annotations

import threading

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sluice.bot.present.metrics import ACK_BUCKETS, JOB_BUCKETS, Registry

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _samples(registry: Registry) -> Samples:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(registry.render())
        for s in family.samples
    }


def _types(registry: Registry) -> dict[str, str]:
    return {f.name: f.type for f in text_string_to_metric_families(registry.render())}


def test_an_empty_registry_renders_nothing() -> None:
    assert Registry(service_metrics=False).render() == ""


def test_counter_with_labels() -> None:
    registry = Registry(service_metrics=False)
    registry.counter("app_deliveries_total", "Deliveries.", ("event", "outcome"))
    assert _samples(registry) == {}  # declared, no series yet
    assert "# HELP app_deliveries_total Deliveries." in registry.render()
    registry.inc("app_deliveries_total", event="push", outcome="queued")
    registry.inc("app_deliveries_total", event="pull_request", outcome="queued")
    registry.inc("app_deliveries_total", 2, outcome="queued", event="push")
    assert _samples(registry) == {
        ("app_deliveries_total", (("event", "pull_request"), ("outcome", "queued"))): 1.0,
        ("app_deliveries_total", (("event", "push"), ("outcome", "queued"))): 3.0,
    }
    assert _types(registry) == {"app_deliveries": "counter"}


def test_a_counter_without_labels_starts_at_zero() -> None:
    registry = Registry(service_metrics=False)
    registry.counter("app_restarts_total", "Restarts.")
    assert _samples(registry) == {("app_restarts_total", ()): 0.0}
    registry.inc("app_restarts_total", 0.5)
    assert _samples(registry) == {("app_restarts_total", ()): 0.5}


def test_label_values_and_help_are_escaped() -> None:
    registry = Registry(service_metrics=False)
    registry.counter("app_x_total", 'Help with \\ and "quotes"\nand a second line.', ("v",))
    registry.inc("app_x_total", v='a\\b"c"\nd')
    text = registry.render()
    assert '# HELP app_x_total Help with \\\\ and "quotes"\\nand a second line.\n' in text
    assert _samples(registry) == {("app_x_total", (("v", 'a\\b"c"\nd'),)): 1.0}


def test_histogram_buckets_are_cumulative_and_le_inclusive() -> None:
    registry = Registry(service_metrics=False)
    registry.histogram("app_seconds", "Durations.", ("kind",), buckets=(0.1, 1, 10))
    for value in (0.05, 0.1, 0.5, 1.0, 20.0):
        registry.observe("app_seconds", value, kind="plan")
    registry.observe("app_seconds", 3, kind="apply")
    samples = _samples(registry)

    def bucket(kind: str, le: str) -> float:
        return samples[("app_seconds_bucket", (("kind", kind), ("le", le)))]

    assert [bucket("plan", le) for le in ("0.1", "1.0", "10.0", "+Inf")] == [2, 4, 4, 5]
    assert [bucket("apply", le) for le in ("0.1", "1.0", "10.0", "+Inf")] == [0, 0, 1, 1]
    assert samples[("app_seconds_sum", (("kind", "plan"),))] == pytest.approx(21.65)
    assert samples[("app_seconds_count", (("kind", "plan"),))] == 5
    assert samples[("app_seconds_count", (("kind", "apply"),))] == 1


def test_a_histogram_without_labels_starts_empty_but_present() -> None:
    registry = Registry(service_metrics=False)
    registry.histogram("app_ack_seconds", "Ack.", buckets=(0.5,))
    assert _samples(registry) == {
        ("app_ack_seconds_bucket", (("le", "0.5"),)): 0.0,
        ("app_ack_seconds_bucket", (("le", "+Inf"),)): 0.0,
        ("app_ack_seconds_count", ()): 0.0,
        ("app_ack_seconds_sum", ()): 0.0,
    }


def test_a_gauge_is_read_at_scrape_time() -> None:
    registry = Registry(service_metrics=False)
    depth = [3]
    registry.gauge("app_queue_depth", "Jobs waiting.", lambda: depth[0])
    assert _samples(registry) == {("app_queue_depth", ()): 3.0}
    assert _types(registry) == {"app_queue_depth": "gauge"}
    depth[0] = 0
    assert _samples(registry) == {("app_queue_depth", ()): 0.0}
    registry.gauge("app_queue_depth", "Jobs waiting.", lambda: float("inf"))  # rebinds
    assert registry.render().endswith("app_queue_depth +Inf\n")


def test_a_failing_gauge_is_left_out_of_the_scrape() -> None:
    registry = Registry(service_metrics=False)

    def broken() -> float:
        raise RuntimeError("database down")

    registry.gauge("app_queue_depth", "Jobs waiting.", broken)
    registry.counter("app_total", "Things.")
    assert _samples(registry) == {("app_total", ()): 0.0}


def test_service_metrics_and_the_process_collectors_are_there_by_default() -> None:
    registry = Registry()
    registry.inc("sluice_deliveries_total", event="pull_request", outcome="queued")
    registry.observe("sluice_ack_seconds", 0.003)
    registry.observe("sluice_job_duration_seconds", 42.0, kind="pull_request", outcome="done")
    samples = _samples(registry)
    delivered = (("event", "pull_request"), ("outcome", "queued"))
    assert samples[("sluice_deliveries_total", delivered)] == 1
    assert samples[("sluice_ack_seconds_bucket", (("le", "0.005"),))] == 1
    assert samples[("sluice_ack_seconds_count", ())] == 1
    job = (("kind", "pull_request"), ("le", "30.0"), ("outcome", "done"))
    assert samples[("sluice_job_duration_seconds_bucket", job)] == 0
    job = (("kind", "pull_request"), ("le", "60.0"), ("outcome", "done"))
    assert samples[("sluice_job_duration_seconds_bucket", job)] == 1
    buckets = [k for k in samples if k[0] == "sluice_ack_seconds_bucket"]
    assert len(buckets) == len(ACK_BUCKETS) + 1
    assert len(JOB_BUCKETS) == len(set(JOB_BUCKETS))
    assert samples[("process_resident_memory_bytes", ())] > 0
    assert any(name == "python_gc_collections_total" for name, _ in samples)
    assert not any(name.endswith("_created") for name, _ in samples)


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
    with pytest.raises(ValueError, match="label"):
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
    samples = _samples(registry)
    assert samples[("app_total", (("t", "all"),))] == 16000
    assert samples[("app_seconds_count", ())] == 16000
    assert samples[("app_seconds_sum", ())] == 8000
