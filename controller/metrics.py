"""Prometheus metrics of one controller node, on a registry owned by the node (no globals)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


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
