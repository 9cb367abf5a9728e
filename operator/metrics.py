"""Prometheus metrics of the operator, on a registry owned by the operator (no globals), and the
small aiohttp server that serves them at `/metrics` (plus `/healthz`)."""

from __future__ import annotations

import contextlib

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest


class OperatorMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.reconciles = Counter(
            "brokergroup_operator_reconciles_total",
            "Reconciles of a BrokerGroup, by trigger (create, update, resume, timer, child) and result "
            "(ok, no_change, paused, invalid_spec, retry, error).",
            ["trigger", "result"],
            registry=self.registry,
        )
        self.reconcile_seconds = Histogram(
            "brokergroup_operator_reconcile_seconds",
            "Wall time of one reconcile, API calls included.",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry,
        )
        self.api_writes = Counter(
            "brokergroup_operator_api_writes_total",
            "Writes the operator sent to the Kubernetes API, by verb and kind.",
            ["verb", "kind"],
            registry=self.registry,
        )
        self.brokergroups = Gauge(
            "brokergroup_operator_brokergroups",
            "BrokerGroups this operator has reconciled since it started.",
            registry=self.registry,
        )
        self.ready = Gauge(
            "brokergroup_operator_brokergroup_ready",
            "1 when the BrokerGroup's Ready condition is True.",
            ["namespace", "brokergroup"],
            registry=self.registry,
        )
        self.paused = Gauge(
            "brokergroup_operator_brokergroup_paused",
            "1 while reconciliation of the BrokerGroup is paused by annotation.",
            ["namespace", "brokergroup"],
            registry=self.registry,
        )
        self.elections_requested = Counter(
            "brokergroup_operator_elections_requested_total",
            "Elections the operator asked the controller for, by reason (scale_down, annotation) and result.",
            ["reason", "result"],
            registry=self.registry,
        )

        self.elections = Counter(
            "brokergroup_elections_total",
            "Master changes the operator saw on pod labels (patched by it or by the brokers), by broker set and "
            "the controller's reason.",
            ["namespace", "set", "reason"],
            registry=self.registry,
        )
        self.label_convergence = Histogram(
            "brokergroup_role_label_convergence_seconds",
            "From the controller's commit of an election to the operator seeing the role labels agree with it.",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
            registry=self.registry,
        )
        self.stale_role_labels = Gauge(
            "brokergroup_stale_role_labels",
            "Pods whose role labels could not be brought to the controller's view in the last cycle.",
            ["namespace", "brokergroup"],
            registry=self.registry,
        )

        self.rollout_steps = Counter(
            "brokergroup_operator_rollout_steps_total",
            "Steps of master-last rolls of broker sets: delete_pod (a slave, or the old master after the "
            "election), elect (the master hands over to an up-to-date slave).",
            ["step"],
            registry=self.registry,
        )

    def forget(self, namespace: str, brokergroup: str) -> None:
        for gauge in (self.ready, self.paused, self.stale_role_labels):
            with contextlib.suppress(KeyError):
                gauge.remove(namespace, brokergroup)


def metrics_app(metrics: OperatorMetrics) -> web.Application:
    async def serve_metrics(_request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(_request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_get("/metrics", serve_metrics)
    app.router.add_get("/healthz", healthz)
    return app
