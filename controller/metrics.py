"""Prometheus metrics of one controller node, on a registry owned by the node (no globals)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector


class ControllerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.elections = Counter(
            "brokergroup_controller_election_total",
            "Elections computed by this node as leader, by result "
            "(new_master_elected, no_master_elected, master_still_exist, failed).",
            ["result", "trigger"],
            registry=registry,
        )
        self.requests = Counter(
            "brokergroup_controller_requests_total",
            "API requests handled by this node, by request type and RocketMQ response code name.",
            ["type", "status"],
            registry=registry,
        )
        self.request_seconds = Histogram(
            "brokergroup_controller_request_seconds",
            "API request latency on this node, forwarding and Raft commit included.",
            ["type"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=registry,
        )
        self._request_children: dict[tuple[str, str], tuple[Any, Any]] = {}
        self.active_brokers = Gauge(
            "brokergroup_controller_active_brokers",
            "Brokers whose heartbeat this node holds and that have not timed out.",
            registry=registry,
        )
        self.heartbeat_streams = Gauge(
            "brokergroup_controller_heartbeat_streams", "Open heartbeat WebSocket streams.", registry=registry
        )
        self.is_leader = Gauge(
            "brokergroup_controller_is_leader",
            "1 when this node is the serving Raft leader.",
            registry=registry,
        )
        self.term = Gauge("brokergroup_controller_raft_term", "Current Raft term of this node.", registry=registry)
        self.last_applied = Gauge(
            "brokergroup_controller_raft_last_applied",
            "Last Raft index applied on this node.",
            registry=registry,
        )
        self.role_notifications = Counter(
            "brokergroup_controller_role_notifications_total",
            "Role-change pushes to brokers, by outcome.",
            ["outcome"],
            registry=registry,
        )
        self.heartbeats_received = 0
        """Broker heartbeats received (a plain int on the hot path; exported by `_HeartbeatCount`)."""
        registry.register(_HeartbeatCount(self))
        self.scan_lateness = Histogram(
            "brokergroup_controller_scan_lateness_seconds",
            "How late a periodic liveness scan started against its schedule (event-loop lag), by scan "
            "(expiry: the heartbeat-expiry scan; inactive_master: the leader's inactive-master scan).",
            ["scan"],
            buckets=(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5),
            registry=registry,
        )

    def request_done(self, kind: str, status: str, seconds: float) -> None:
        """Count one API request and its latency. The labelled children are looked up once per
        (type, status): `labels()` validates and copies its arguments on every call."""
        children = self._request_children.get((kind, status))
        if children is None:
            children = (self.requests.labels(kind, status), self.request_seconds.labels(kind))
            self._request_children[(kind, status)] = children
        children[0].inc()
        children[1].observe(seconds)


class _HeartbeatCount(Collector):
    """`brokergroup_controller_heartbeats_total`, read from `ControllerMetrics.heartbeats_received` at
    scrape time (a prometheus `Counter.inc` takes a lock: a measurable share at 6,000 heartbeats/s)."""

    def __init__(self, metrics: ControllerMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "brokergroup_controller_heartbeats", "Broker heartbeats received by this node (POST and stream)."
        )
        family.add_metric([], self._metrics.heartbeats_received)
        yield family
