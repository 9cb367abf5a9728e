"""Prometheus metrics of one broker replica, on a registry owned by the process (no globals)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector


class BrokerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.puts = Counter(
            "brokergroup_broker_put_total", "Produce requests by put status.", ["status"], registry=registry
        )
        self.put_messages = Counter(
            "brokergroup_broker_put_messages_total", "Messages written (duplicates excluded).", registry=registry
        )
        self.duplicates = Counter(
            "brokergroup_broker_duplicate_messages_total",
            "Messages dropped as idempotent-producer retries.",
            registry=registry,
        )
        self.put_seconds = Histogram(
            "brokergroup_broker_put_seconds",
            "Produce latency: write, flush and replica acks.",
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 3, 5),
            registry=registry,
        )
        self.consumed = Counter(
            "brokergroup_broker_consumed_messages_total", "Messages returned to consumers.", registry=registry
        )
        self.is_master = Gauge("brokergroup_broker_is_master", "1 while this replica is master.", registry=registry)
        self.master_epoch = Gauge(
            "brokergroup_broker_master_epoch", "Master epoch this replica follows.", registry=registry
        )
        self.max_offset = Gauge("brokergroup_broker_max_offset", "Commit-log end offset.", registry=registry)
        self.confirm_offset = Gauge("brokergroup_broker_confirm_offset", "Commit point.", registry=registry)
        self.pod_label_patches = Counter(
            "brokergroup_broker_pod_label_patches_total",
            "Patches of this broker's own Pod role label, by result (ok, refused, timeout, error).",
            ["result"],
            registry=registry,
        )
        self.pod_label_in_sync = Gauge(
            "brokergroup_broker_pod_label_in_sync",
            "1 when this broker's Pod role label says its current role (always 1 when Kubernetes access is off).",
            registry=registry,
        )
        self.lease_remaining = Gauge(
            "brokergroup_broker_write_lease_remaining_seconds", "Master write lease left.", registry=registry
        )
        self.writable = Gauge(
            "brokergroup_broker_writable",
            "1 unless this replica's write permission is wiped (read-only: produces refused with NO_PERMISSION).",
            registry=registry,
        )
        self.binary_connections = Gauge(
            "brokergroup_broker_binary_connections", "Open connections on the binary client port.", registry=registry
        )
        self.binary_requests = Counter(
            "brokergroup_broker_binary_requests_total",
            "Frames received on the binary client port, by type (PRODUCE, CONSUME, ..., or 0x.. when unknown).",
            ["type"],
            registry=registry,
        )
        self.binary_rejected = Counter(
            "brokergroup_broker_binary_rejected_total",
            "Bad input on the binary client port, by reason (oversized, malformed, unknown_type, truncated, "
            "slow_frame, reply_stalled, too_many_connections).",
            ["reason"],
            registry=registry,
        )

    def track_flushes(self, *, flushed_offset: Callable[[], int], flushes: Callable[[], int]) -> None:
        """Expose the store's fsynced offset and the flusher's fsync count, read at scrape time."""
        self.registry.register(_FlushCollector(flushed_offset, flushes))


class _FlushCollector(Collector):
    def __init__(self, flushed_offset: Callable[[], int], flushes: Callable[[], int]) -> None:
        self._flushed_offset = flushed_offset
        self._flushes = flushes

    def collect(self) -> Iterable[Metric]:
        yield GaugeMetricFamily(
            "brokergroup_broker_flushed_offset",
            "Commit-log offset up to which this replica has fsynced (under SYNC flush, what it acknowledges).",
            value=self._flushed_offset(),
        )
        yield CounterMetricFamily(
            "brokergroup_broker_flushes",
            "Flushes (fsync rounds of the commit log, group commit) run by this replica.",
            value=self._flushes(),
        )
