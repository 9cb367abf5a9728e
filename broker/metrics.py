"""Prometheus metrics of one broker replica, on a registry owned by the process (no globals)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


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
        self.lease_remaining = Gauge(
            "brokergroup_broker_write_lease_remaining_seconds", "Master write lease left.", registry=registry
        )
