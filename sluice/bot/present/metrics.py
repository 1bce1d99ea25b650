"""The service's Prometheus metrics, with prometheus_client (this module is its only user).

A :class:`Registry` is one service's metrics: counters and histograms (with labels) that
the service updates as it goes, gauges whose value a callback reads at scrape time (the
queue's depth and the wait of its oldest job are database queries, so they are asked for
only when someone looks), and the client's process and Python collectors (CPU, memory,
open files, garbage collections). :meth:`Registry.render` is the body of ``GET /metrics``
in the text exposition format 0.0.4. Every method is thread-safe.

``Registry()`` comes with the service's own metrics declared (:data:`SERVICE_METRICS`), so
callers can ``inc`` and ``observe`` them by name; ``Registry(service_metrics=False)``
holds only what is declared on it (no process metrics either).
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import prometheus_client
from prometheus_client import (
    CollectorRegistry,
    Counter,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

logger = logging.getLogger(__name__)

# Counters get no `<name>_created` companion series: nothing here reads them.
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The Content-Type of :meth:`Registry.render`'s output."""

ACK_BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Webhook acknowledgement: milliseconds are normal, a second is already slow."""

JOB_BUCKETS: tuple[float, ...] = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
"""A job runs Spark: seconds for a no-op, up to an hour for a backfill."""

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


@dataclass(frozen=True)
class _Declared:
    """What a counter or histogram was declared as (declaring it again must match)."""

    kind: str
    help: str
    labels: tuple[str, ...]
    buckets: tuple[float, ...] = ()


class _Gauges(Collector):
    """The gauges read at scrape time; a callback that raises leaves its gauge out."""

    def __init__(self) -> None:
        self.read: dict[str, tuple[str, Callable[[], float]]] = {}

    def collect(self) -> Iterator[Metric]:
        for name, (help_text, read) in list(self.read.items()):
            try:
                value = float(read())
            except Exception as exc:
                logger.warning("metric %s left out of this scrape: %s", name, exc)
                continue
            yield GaugeMetricFamily(name, help_text, value=value)


class Registry:
    """Metrics of one service, rendered together.

    Args:
        service_metrics: Declare :data:`SERVICE_METRICS` and the process collectors up
            front (the default).
    """

    def __init__(self, *, service_metrics: bool = True) -> None:
        self._lock = threading.Lock()
        self._registry = CollectorRegistry()
        self._gauges = _Gauges()
        self._registry.register(self._gauges)
        self._declared: dict[str, _Declared] = {}
        self._metrics: dict[str, Counter | Histogram] = {}
        if service_metrics:
            ProcessCollector(registry=self._registry)
            PlatformCollector(registry=self._registry)
            GCCollector(registry=self._registry)
            for declare in SERVICE_METRICS:
                declare(self)

    # -- declaring --------------------------------------------------------------------------

    def counter(self, name: str, help: str, labels: Sequence[str] = ()) -> None:
        """Declare a counter (declaring it again the same way is harmless)."""
        spec = _Declared("counter", help, tuple(labels))
        self._declare(name, spec, lambda: Counter(name, help, spec.labels, registry=None))

    def histogram(
        self, name: str, help: str, labels: Sequence[str] = (), buckets: Sequence[float] = ()
    ) -> None:
        """Declare a histogram with the given bucket upper bounds (+Inf is implied)."""
        bounds = tuple(float(b) for b in buckets if not math.isinf(b))
        if not bounds or list(bounds) != sorted(set(bounds)):
            raise ValueError(f"histogram {name}: buckets must be ascending and distinct")
        if "le" in labels:
            raise ValueError(f"histogram {name}: 'le' is reserved for buckets")
        spec = _Declared("histogram", help, tuple(labels), bounds)
        self._declare(
            name, spec, lambda: Histogram(name, help, spec.labels, registry=None, buckets=bounds)
        )

    def gauge(self, name: str, help: str, read: Callable[[], float]) -> None:
        """Declare a gauge whose value ``read`` returns at each scrape.

        Declaring it again replaces the callback (a restarted app binds a new queue). When
        the callback raises, the scrape leaves the gauge's sample out and logs why.
        """
        _check_name(name)
        with self._lock:
            if name in self._declared:
                raise ValueError(
                    f"metric {name} is already declared as a {self._declared[name].kind}"
                )
            self._gauges.read[name] = (help, read)

    def _declare(self, name: str, spec: _Declared, make: Callable[[], Counter | Histogram]) -> None:
        _check_name(name)
        with self._lock:
            existing = self._declared.get(name)
            if existing is not None or name in self._gauges.read:
                if existing != spec:
                    raise ValueError(f"metric {name} is already declared differently")
                return
            metric = make()  # prometheus_client checks the label names
            self._registry.register(metric)
            self._declared[name] = spec
            self._metrics[name] = metric

    # -- updating ---------------------------------------------------------------------------

    def inc(self, name: str, amount: float = 1.0, **labels: str) -> None:
        """Add ``amount`` (not negative) to a counter's series for ``labels``."""
        if amount < 0:
            raise ValueError(f"counter {name} cannot decrease (amount {amount})")
        counter = self._get(name, "counter")
        assert isinstance(counter, Counter)
        self._series(name, counter, labels).inc(amount)

    def observe(self, name: str, value: float, **labels: str) -> None:
        """Record one observation in a histogram's series for ``labels``."""
        histogram = self._get(name, "histogram")
        assert isinstance(histogram, Histogram)
        self._series(name, histogram, labels).observe(value)

    def _get(self, name: str, kind: str) -> Counter | Histogram:
        with self._lock:
            declared, metric = self._declared.get(name), self._metrics.get(name)
        if declared is None or metric is None:
            raise KeyError(f"metric {name} is not declared")
        if declared.kind != kind:
            raise TypeError(f"metric {name} is a {declared.kind}, not a {kind}")
        return metric

    def _series(self, name: str, metric: Counter | Histogram, labels: dict[str, str]) -> Any:
        declared = self._declared[name].labels
        if set(labels) != set(declared):
            raise ValueError(f"metric {name} takes labels {sorted(declared)}, not {sorted(labels)}")
        return metric.labels(**{k: str(v) for k, v in labels.items()}) if declared else metric

    # -- rendering --------------------------------------------------------------------------

    def render(self) -> str:
        """Every metric in the text exposition format 0.0.4 (ends with a newline)."""
        return generate_latest(self._registry).decode()


def _check_name(name: str) -> None:
    if not _NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not a valid metric name")


def _service_deliveries(registry: Registry) -> None:
    registry.counter(
        "sluice_deliveries_total",
        "Webhook deliveries received, by event and by what became of them.",
        ("event", "outcome"),
    )


def _service_ack(registry: Registry) -> None:
    registry.histogram(
        "sluice_ack_seconds",
        "Time from receiving a webhook delivery to answering it.",
        buckets=ACK_BUCKETS,
    )


def _service_jobs(registry: Registry) -> None:
    registry.histogram(
        "sluice_job_duration_seconds",
        "Time a worker spent on a job, by job kind and outcome (done or error).",
        ("kind", "outcome"),
        JOB_BUCKETS,
    )


SERVICE_METRICS: tuple[Callable[[Registry], None], ...] = (
    _service_deliveries,
    _service_ack,
    _service_jobs,
)
"""The service's counters and histograms, declared by ``Registry()``. The queue's gauges
(depth, oldest wait) are declared by the app, which has the queue."""
