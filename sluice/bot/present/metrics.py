"""Prometheus metrics in the text exposition format 0.0.4, without a client library.

A :class:`Registry` holds counters and histograms (with labels) that the service updates
as it goes, and gauges whose value a callback reads at scrape time (the queue depth is a
database query, so it is asked for only when someone looks). :meth:`Registry.render` is the
body of ``GET /metrics``. Every method is thread-safe.

``Registry()`` comes with the service's own metrics declared (:data:`SERVICE_METRICS`), so
callers can ``inc`` and ``observe`` them by name.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

logger = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The Content-Type of :meth:`Registry.render`'s output."""

ACK_BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Webhook acknowledgement: milliseconds are normal, a second is already slow."""

JOB_BUCKETS: tuple[float, ...] = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
"""A job runs Spark: seconds for a no-op, up to an hour for a backfill."""

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")

_LabelValues = tuple[str, ...]


@dataclass
class _Counter:
    name: str
    help: str
    labels: tuple[str, ...]
    values: dict[_LabelValues, float] = field(default_factory=dict)
    type: str = "counter"


@dataclass
class _Histogram:
    name: str
    help: str
    labels: tuple[str, ...]
    buckets: tuple[float, ...]  # upper bounds, ascending, without +Inf
    # Per label set: per-bucket (non-cumulative) counts, the +Inf overflow last; and sum.
    counts: dict[_LabelValues, list[int]] = field(default_factory=dict)
    sums: dict[_LabelValues, float] = field(default_factory=dict)
    type: str = "histogram"


@dataclass
class _Gauge:
    name: str
    help: str
    read: Callable[[], float]
    type: str = "gauge"


_Metric = _Counter | _Histogram | _Gauge
_M = TypeVar("_M", _Counter, _Histogram)


class Registry:
    """Metrics of one service, rendered together.

    Args:
        service_metrics: Declare :data:`SERVICE_METRICS` up front (the default).
    """

    def __init__(self, *, service_metrics: bool = True) -> None:
        self._lock = threading.Lock()
        self._metrics: dict[str, _Metric] = {}
        if service_metrics:
            for declare in SERVICE_METRICS:
                declare(self)

    # -- declaring --------------------------------------------------------------------------

    def counter(self, name: str, help: str, labels: Sequence[str] = ()) -> None:
        """Declare a counter (declaring it again the same way is harmless)."""
        self._declare(_Counter(name, help, _label_names(labels)))

    def histogram(
        self, name: str, help: str, labels: Sequence[str] = (), buckets: Sequence[float] = ()
    ) -> None:
        """Declare a histogram with the given bucket upper bounds (+Inf is implied)."""
        bounds = tuple(float(b) for b in buckets if not math.isinf(b))
        if not bounds or list(bounds) != sorted(set(bounds)):
            raise ValueError(f"histogram {name}: buckets must be ascending and distinct")
        if "le" in labels:
            raise ValueError(f"histogram {name}: 'le' is reserved for buckets")
        self._declare(_Histogram(name, help, _label_names(labels), bounds))

    def gauge(self, name: str, help: str, read: Callable[[], float]) -> None:
        """Declare a gauge whose value ``read`` returns at each scrape.

        Declaring it again replaces the callback (a restarted app binds a new queue). When
        the callback raises, the scrape leaves the gauge's sample out and logs why.
        """
        _check_name(name)
        with self._lock:
            existing = self._metrics.get(name)
            if existing is not None and not isinstance(existing, _Gauge):
                raise ValueError(f"metric {name} is already declared as a {existing.type}")
            self._metrics[name] = _Gauge(name, help, read)

    def _declare(self, metric: _Counter | _Histogram) -> None:
        _check_name(metric.name)
        with self._lock:
            existing = self._metrics.get(metric.name)
            if existing is None:
                self._metrics[metric.name] = metric
                return
            same = (
                type(existing) is type(metric)
                and existing.help == metric.help
                and getattr(existing, "labels", None) == metric.labels
                and getattr(existing, "buckets", None) == getattr(metric, "buckets", None)
            )
            if not same:
                raise ValueError(f"metric {metric.name} is already declared differently")

    # -- updating ---------------------------------------------------------------------------

    def inc(self, name: str, amount: float = 1.0, **labels: str) -> None:
        """Add ``amount`` (not negative) to a counter's series for ``labels``."""
        if amount < 0:
            raise ValueError(f"counter {name} cannot decrease (amount {amount})")
        with self._lock:
            metric = self._get(name, _Counter)
            key = _label_values(metric.name, metric.labels, labels)
            metric.values[key] = metric.values.get(key, 0.0) + amount

    def observe(self, name: str, value: float, **labels: str) -> None:
        """Record one observation in a histogram's series for ``labels``."""
        with self._lock:
            metric = self._get(name, _Histogram)
            key = _label_values(metric.name, metric.labels, labels)
            counts = metric.counts.get(key)
            if counts is None:
                counts = metric.counts[key] = [0] * (len(metric.buckets) + 1)
            # le is inclusive: a value equal to a bound falls in that bound's bucket.
            counts[bisect_left(metric.buckets, value)] += 1
            metric.sums[key] = metric.sums.get(key, 0.0) + value

    def _get(self, name: str, kind: type[_M]) -> _M:
        metric = self._metrics.get(name)
        if metric is None:
            raise KeyError(f"metric {name} is not declared")
        if not isinstance(metric, kind):
            raise TypeError(f"metric {name} is a {metric.type}, not a {kind.type}")
        return metric

    # -- rendering --------------------------------------------------------------------------

    def render(self) -> str:
        """Every metric in the text exposition format 0.0.4 (ends with a newline)."""
        with self._lock:
            # Copy the series so the (possibly slow) gauge callbacks run outside the lock.
            snapshot = [_copy(metric) for metric in self._metrics.values()]
        lines: list[str] = []
        for metric in snapshot:
            lines.append(f"# HELP {metric.name} {_escape_help(metric.help)}")
            lines.append(f"# TYPE {metric.name} {metric.type}")
            if isinstance(metric, _Counter):
                lines.extend(_counter_lines(metric))
            elif isinstance(metric, _Histogram):
                lines.extend(_histogram_lines(metric))
            else:
                lines.extend(_gauge_lines(metric))
        return "".join(line + "\n" for line in lines)


def _copy(metric: _Metric) -> _Metric:
    if isinstance(metric, _Counter):
        return replace(metric, values=dict(metric.values))
    if isinstance(metric, _Histogram):
        counts = {key: list(per_bucket) for key, per_bucket in metric.counts.items()}
        return replace(metric, counts=counts, sums=dict(metric.sums))
    return metric


def _counter_lines(metric: _Counter) -> list[str]:
    series = dict(metric.values)
    if not metric.labels and not series:
        series[()] = 0.0  # a label-less counter exists from the start
    return [
        f"{metric.name}{_labels(metric.labels, key)} {_number(value)}"
        for key, value in sorted(series.items())
    ]


def _histogram_lines(metric: _Histogram) -> list[str]:
    counts = dict(metric.counts)
    sums = dict(metric.sums)
    if not metric.labels and not counts:
        counts[()] = [0] * (len(metric.buckets) + 1)
        sums[()] = 0.0
    lines: list[str] = []
    names = (*metric.labels, "le")
    for key, per_bucket in sorted(counts.items()):
        cumulative = 0
        for bound, count in zip((*metric.buckets, math.inf), per_bucket, strict=True):
            cumulative += count
            le = _labels(names, (*key, _number(bound)))
            lines.append(f"{metric.name}_bucket{le} {cumulative}")
        lines.append(f"{metric.name}_sum{_labels(metric.labels, key)} {_number(sums[key])}")
        lines.append(f"{metric.name}_count{_labels(metric.labels, key)} {cumulative}")
    return lines


def _gauge_lines(metric: _Gauge) -> list[str]:
    try:
        value = float(metric.read())
    except Exception as exc:
        logger.warning("metric %s left out of this scrape: %s", metric.name, exc)
        return []
    return [f"{metric.name} {_number(value)}"]


def _labels(names: Sequence[str], values: Sequence[str]) -> str:
    if not names:
        return ""
    pairs = ",".join(f'{n}="{_escape_label(v)}"' for n, v in zip(names, values, strict=True))
    return "{" + pairs + "}"


def _number(value: float) -> str:
    """A sample value or bucket bound as Prometheus writes them (Go's float syntax)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _escape_label(value: str) -> str:
    return value.replace("\\", r"\\").replace('"', r"\"").replace("\n", r"\n")


def _escape_help(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n")


def _check_name(name: str) -> None:
    if not _NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not a valid metric name")


def _label_names(labels: Sequence[str]) -> tuple[str, ...]:
    names = tuple(labels)
    for label in names:
        if not _LABEL.fullmatch(label) or label.startswith("__"):
            raise ValueError(f"{label!r} is not a valid label name")
    if len(set(names)) != len(names):
        raise ValueError(f"label names repeat: {names}")
    return names


def _label_values(name: str, declared: tuple[str, ...], given: dict[str, str]) -> _LabelValues:
    if set(given) != set(declared):
        raise ValueError(f"metric {name} takes labels {sorted(declared)}, not {sorted(given)}")
    return tuple(str(given[label]) for label in declared)


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
"""The service's counters and histograms, declared by ``Registry()``. The queue depth
gauge is declared by the app, which has the queue."""
