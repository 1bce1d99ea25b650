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

Series are bounded: a label declared with its values (``values={"outcome": (...)}``)
records any other value as ``other``, and a label declared without them keeps its first
:data:`MAX_LABEL_VALUES` values, recording the rest as ``other``. So no request, signed
or not, can add series without end (a label value an attacker chooses would otherwise be
a new series each time, kept until the service restarts).
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, get_args

import prometheus_client
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from sluice.bot.events.neutral import Event
from sluice.bot.present.notify_text import EVENTS as NOTIFY_EVENTS

logger = logging.getLogger(__name__)

# Counters get no `<name>_created` companion series: nothing here reads them.
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The Content-Type of :meth:`Registry.render`'s output."""

ACK_BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Webhook acknowledgement: milliseconds are normal, a second is already slow."""

JOB_BUCKETS: tuple[float, ...] = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
WAIT_BUCKETS: tuple[float, ...] = (0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0)
JOB_CLASSES: tuple[str, ...] = ("promotion", "build", "background")
"""The queue's job classes (``sluice.bot.queue.fairness.JobClass``; a test keeps them equal)."""
"""A job runs Spark: seconds for a no-op, up to an hour for a backfill."""

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")

OTHER = "other"
"""The label value recorded for a value outside a label's declared values, or past
:data:`MAX_LABEL_VALUES`."""

MAX_LABEL_VALUES = 64
"""The most distinct values a label declared without its values keeps (then ``other``)."""

GAUGE_WARNING_SECONDS = 60.0
"""A gauge whose callback fails is logged at most once in this many seconds (every scrape
would log it otherwise, and anyone who can reach ``/metrics`` can scrape)."""

DELIVERY_OUTCOMES: tuple[str, ...] = (
    "queued",
    "duplicate",
    "ping",
    "ignored",
    "bad_request",
    "unauthorized",
    "forbidden",
    "too_large",
    "disconnected",
    "unavailable",
)
"""What becomes of a webhook delivery (the ``outcome`` label of ``sluice_deliveries_total``)."""

JOB_KINDS: tuple[str, ...] = tuple(sorted(kind.kind for kind in get_args(Event)))
"""The kinds of job (their events' kinds): the ``kind`` label of ``sluice_job_retries_total``."""


@dataclass(frozen=True)
class _Declared:
    """What a counter or histogram was declared as (declaring it again must match)."""

    kind: str
    help: str
    labels: tuple[str, ...]
    buckets: tuple[float, ...] = ()
    values: tuple[tuple[str, frozenset[str]], ...] = ()
    """The values each label named here may take (any other is ``other``)."""


class _Gauges(Collector):
    """The gauges read at scrape time; a callback that raises leaves its gauge out."""

    def __init__(self) -> None:
        self.read: dict[str, tuple[str, Callable[[], float]]] = {}
        self._warned: dict[str, float] = {}  # gauge name -> when its failure was last logged

    def collect(self) -> Iterator[Metric]:
        for name, (help_text, read) in list(self.read.items()):
            try:
                value = float(read())
            except Exception as exc:
                now = time.monotonic()
                last = self._warned.get(name)
                if last is None or now - last >= GAUGE_WARNING_SECONDS:
                    self._warned[name] = now
                    logger.warning(
                        "metric %s left out of this scrape (logged at most once a minute): %s",
                        name,
                        str(exc)[:500],
                    )
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
        self._metrics: dict[str, Counter | Histogram | Gauge] = {}
        self._seen: dict[tuple[str, str], set[str]] = {}  # (metric, label) -> values kept
        if service_metrics:
            ProcessCollector(registry=self._registry)
            PlatformCollector(registry=self._registry)
            GCCollector(registry=self._registry)
            for declare in SERVICE_METRICS:
                declare(self)

    # -- declaring --------------------------------------------------------------------------

    def counter(
        self,
        name: str,
        help: str,
        labels: Sequence[str] = (),
        values: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        """Declare a counter (declaring it again the same way is harmless). ``values``: the
        values a label may take; any other is recorded as ``other``."""
        spec = _Declared("counter", help, tuple(labels), values=_values(name, labels, values))
        self._declare(name, spec, lambda: Counter(name, help, spec.labels, registry=None))

    def histogram(
        self,
        name: str,
        help: str,
        labels: Sequence[str] = (),
        buckets: Sequence[float] = (),
        values: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        """Declare a histogram with the given bucket upper bounds (+Inf is implied)."""
        bounds = tuple(float(b) for b in buckets if not math.isinf(b))
        if not bounds or list(bounds) != sorted(set(bounds)):
            raise ValueError(f"histogram {name}: buckets must be ascending and distinct")
        if "le" in labels:
            raise ValueError(f"histogram {name}: 'le' is reserved for buckets")
        spec = _Declared(
            "histogram", help, tuple(labels), bounds, values=_values(name, labels, values)
        )
        self._declare(
            name, spec, lambda: Histogram(name, help, spec.labels, registry=None, buckets=bounds)
        )

    def settable(
        self,
        name: str,
        help: str,
        labels: Sequence[str] = (),
        values: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        """Declare a gauge whose series the service sets (:meth:`set`), by labels
        (bounded as a counter's)."""
        spec = _Declared("settable", help, tuple(labels), values=_values(name, labels, values))
        self._declare(name, spec, lambda: Gauge(name, help, spec.labels, registry=None))

    def set(self, name: str, value: float, **labels: str) -> None:
        """Set a settable gauge's series for ``labels`` to ``value``."""
        gauge = self._get(name, "settable")
        assert isinstance(gauge, Gauge)
        self._series(name, gauge, labels).set(value)

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

    def _declare(
        self, name: str, spec: _Declared, make: Callable[[], Counter | Histogram | Gauge]
    ) -> None:
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

    def _get(self, name: str, kind: str) -> Counter | Histogram | Gauge:
        with self._lock:
            declared, metric = self._declared.get(name), self._metrics.get(name)
        if declared is None or metric is None:
            raise KeyError(f"metric {name} is not declared")
        if declared.kind != kind:
            raise TypeError(f"metric {name} is a {declared.kind}, not a {kind}")
        return metric

    def _series(
        self, name: str, metric: Counter | Histogram | Gauge, labels: dict[str, str]
    ) -> Any:
        spec = self._declared[name]
        declared = spec.labels
        if set(labels) != set(declared):
            raise ValueError(f"metric {name} takes labels {sorted(declared)}, not {sorted(labels)}")
        if not declared:
            return metric
        allowed = dict(spec.values)
        return metric.labels(
            **{k: self._bounded(name, k, str(v), allowed.get(k)) for k, v in labels.items()}
        )

    def _bounded(self, name: str, label: str, value: str, allowed: frozenset[str] | None) -> str:
        """``value``, or ``other`` when the label may not take it (not among its declared
        values, or past :data:`MAX_LABEL_VALUES` distinct ones)."""
        if allowed is not None:
            return value if value in allowed else OTHER
        with self._lock:
            seen = self._seen.setdefault((name, label), set())
            if value in seen:
                return value
            if len(seen) < MAX_LABEL_VALUES:
                seen.add(value)
                return value
        return OTHER

    # -- rendering --------------------------------------------------------------------------

    def render(self) -> str:
        """Every metric in the text exposition format 0.0.4 (ends with a newline)."""
        return generate_latest(self._registry).decode()


def _check_name(name: str) -> None:
    if not _NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not a valid metric name")


def _values(
    name: str, labels: Sequence[str], values: Mapping[str, Iterable[str]] | None
) -> tuple[tuple[str, frozenset[str]], ...]:
    """The declared values of labels, checked against the labels (sorted, comparable)."""
    out = {label: frozenset(str(v) for v in given) for label, given in (values or {}).items()}
    unknown = set(out) - set(labels)
    if unknown:
        raise ValueError(f"metric {name}: values given for labels it lacks: {sorted(unknown)}")
    return tuple(sorted(out.items()))


def _service_deliveries(registry: Registry) -> None:
    registry.counter(
        "sluice_deliveries_total",
        "Webhook deliveries received, by event (those Sluice knows; any other is 'other') "
        "and by what became of them.",
        ("event", "outcome"),
        values={"outcome": DELIVERY_OUTCOMES},
    )


def _service_unlogged(registry: Registry) -> None:
    registry.counter(
        "sluice_refusals_unlogged_total",
        "Refused requests (a wrong signature or token, a failed endpoint) not logged one by "
        "one, past the service's limit of warnings a minute.",
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


def _service_waits(registry: Registry) -> None:
    registry.histogram(
        "sluice_queue_wait_seconds",
        "Time a job waited in the queue, from its delivery to its first start, by class "
        "(promotion, build, background: the queue's fairness rule).",
        ("class",),
        WAIT_BUCKETS,
        values={"class": JOB_CLASSES},
    )


def _service_retries(registry: Registry) -> None:
    registry.counter(
        "sluice_job_retries_total",
        "Failed job attempts put back in the queue to be tried again (after a backoff), by "
        "job kind; an attempt that was the job's last is not counted.",
        ("kind",),
        values={"kind": JOB_KINDS},
    )


def _service_notifications(registry: Registry) -> None:
    registry.counter(
        "sluice_notifications_total",
        "Chat notifications (SLUICE_NOTIFY) by event and outcome: sent, or failed (after "
        "the retries; never sent again).",
        ("event", "outcome"),
        values={"event": NOTIFY_EVENTS, "outcome": ("sent", "failed")},
    )


def _service_drift(registry: Registry) -> None:
    registry.counter(
        "sluice_drift_checks_total",
        "Scheduled drift checks of prod (SLUICE_DRIFT_INTERVAL_SECONDS) by outcome: clean, "
        "drift (some model differs from what Sluice recorded), or failed (not checked).",
        ("outcome",),
        values={"outcome": ("clean", "drift", "failed")},
    )
    registry.settable(
        "sluice_drift_models",
        "The models of prod that differ from what Sluice recorded, at the repository's last "
        "drift check (0: none).",
        ("repository",),
    )


SERVICE_METRICS: tuple[Callable[[Registry], None], ...] = (
    _service_deliveries,
    _service_unlogged,
    _service_ack,
    _service_jobs,
    _service_waits,
    _service_retries,
    _service_notifications,
    _service_drift,
)
"""The service's counters and histograms, declared by ``Registry()``. The queue's gauges
(depth, oldest wait) are declared by the app, which has the queue."""
