"""kopf wiring: thin handlers that hand every trigger to the one `Reconciler`.

Handlers are registered on a registry made by `build_registry`, never on kopf's global one, so the
operator is a value that tests can build twice.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf
import kubernetes
from aiohttp import web

from brokergroup.operator import labels, names
from brokergroup.operator.follower import Follower
from brokergroup.operator.groups import Groups
from brokergroup.operator.kube import Kube, client_configuration
from brokergroup.operator.metrics import OperatorMetrics, metrics_app
from brokergroup.operator.reconcile import Outcome, Reconciler
from brokergroup.operator.settings import OperatorSettings, configure_kopf

logger = logging.getLogger(__name__)

BROKERGROUP = (names.GROUP, names.VERSION, names.PLURAL)
MANAGED = {"app.kubernetes.io/managed-by": labels.MANAGED_BY}
BROKER_PODS = {**MANAGED, "app.kubernetes.io/component": labels.COMPONENT_BROKER}
CHILD_KINDS = (
    ("apps", "v1", "statefulsets"),
    ("", "v1", "services"),
    ("", "v1", "configmaps"),
    ("", "v1", "secrets"),
    ("policy", "v1", "poddisruptionbudgets"),
    ("networking.k8s.io", "v1", "networkpolicies"),
    ("", "v1", "serviceaccounts"),
    ("rbac.authorization.k8s.io", "v1", "roles"),
    ("rbac.authorization.k8s.io", "v1", "rolebindings"),
)


def connection_info(configuration: kubernetes.client.Configuration) -> kopf.ConnectionInfo:
    """kopf credentials from a kubernetes client configuration (kubeconfig or in-cluster)."""
    header = configuration.get_api_key_with_prefix("BearerToken") or configuration.get_api_key_with_prefix(
        "authorization"
    )
    parts = header.split(" ", 1) if header else []
    scheme, token = (None, None) if not parts else (None, parts[0]) if len(parts) == 1 else (parts[0], parts[1])
    return kopf.ConnectionInfo(
        server=configuration.host,
        ca_path=configuration.ssl_ca_cert,
        insecure=not configuration.verify_ssl,
        scheme=scheme,
        token=token,
        certificate_path=configuration.cert_file,
        private_key_path=configuration.key_file,
    )


class Operator:
    """The operator's long-lived objects, made once at startup."""

    def __init__(self, settings: OperatorSettings, metrics: OperatorMetrics | None = None) -> None:
        self.settings = settings
        self.metrics = metrics or OperatorMetrics()
        self.configuration = client_configuration(settings.kubeconfig)
        self.api_client = kubernetes.client.ApiClient(self.configuration)
        self.kube = Kube(self.api_client, self.metrics)
        self.reconciler = Reconciler(self.kube, settings, self.metrics)
        self.follower = Follower(self.reconciler)
        self.groups = Groups(self.follower, self.reconciler)
        self._metrics_runner: web.AppRunner | None = None

    async def start_metrics(self) -> None:
        if not self.settings.metrics_port:
            return
        self._metrics_runner = web.AppRunner(metrics_app(self.metrics))
        await self._metrics_runner.setup()
        site = web.TCPSite(self._metrics_runner, self.settings.metrics_host, self.settings.metrics_port)
        await site.start()
        logger.info("metrics on http://%s:%d/metrics", self.settings.metrics_host, self.settings.metrics_port)

    async def stop(self) -> None:
        await self.groups.close()
        if self._metrics_runner is not None:
            await self._metrics_runner.cleanup()
        self.api_client.close()  # type: ignore[no-untyped-call]

    async def run(self, namespace: str, name: str, trigger: str, *, raise_retry: bool) -> None:
        outcome: Outcome = await self.reconciler.reconcile(namespace, name, trigger=trigger)
        if outcome.retry and raise_retry:
            raise kopf.TemporaryError(outcome.summary, delay=self.settings.retry_seconds)


def build_registry(operator: Operator) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    @kopf.on.startup(registry=registry)
    async def startup(settings: kopf.OperatorSettings, **_: Any) -> None:
        configure_kopf(settings, operator.settings)
        await operator.start_metrics()

    @kopf.on.cleanup(registry=registry)
    async def cleanup(**_: Any) -> None:
        await operator.stop()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return connection_info(client_configuration(operator.settings.kubeconfig))

    @kopf.on.resume(*BROKERGROUP, registry=registry)
    @kopf.on.create(*BROKERGROUP, registry=registry)
    @kopf.on.update(*BROKERGROUP, registry=registry)
    async def brokergroup_changed(namespace: str | None, name: str, reason: str, **_: Any) -> None:
        await operator.run(namespace or "", name, str(reason), raise_retry=True)

    @kopf.on.event(*BROKERGROUP, registry=registry)
    async def brokergroup_event(
        event: kopf.RawEvent, namespace: str | None, name: str, meta: kopf.Meta, **_: Any
    ) -> None:
        """One follower and one resync loop per BrokerGroup (`groups`): started and stopped from watch events,
        so no finalizer is needed and a BrokerGroup can be deleted while no operator runs."""
        if event.get("type") == "DELETED" or meta.get("deletionTimestamp"):
            await operator.groups.forget(namespace or "", name)
        else:
            operator.groups.ensure(namespace or "", name)

    @kopf.on.event("", "v1", "pods", labels=BROKER_PODS, registry=registry)
    async def broker_pod_changed(event: kopf.RawEvent, namespace: str | None, meta: kopf.Meta, **_: Any) -> None:
        """A broker pod changed (readiness, labels, deletion): the follower looks now, so a roll moves on as
        soon as the pod it waits for is back, not at the next resync."""
        owner = (meta.get("labels") or {}).get("app.kubernetes.io/instance")
        if owner and event.get("type") is not None:
            operator.groups.wake(namespace or "", owner)

    for group, version, plural in CHILD_KINDS:

        @kopf.on.event(group, version, plural, labels=MANAGED, registry=registry)
        async def child_changed(event: kopf.RawEvent, namespace: str | None, meta: kopf.Meta, **_: Any) -> None:
            owner = (meta.get("labels") or {}).get("app.kubernetes.io/instance")
            kind = (event.get("object") or {}).get("kind", "")
            # A StatefulSet's status tells readiness; any other child matters only when deleted.
            if not owner or (kind != "StatefulSet" and event.get("type") != "DELETED"):
                return
            if event.get("type") is None:  # the initial listing: the resume handler covers it
                return
            if kind == "StatefulSet":  # a new revision to roll, or a pod's readiness counted
                operator.groups.wake(namespace or "", owner)
            await operator.run(namespace or "", owner, "child", raise_retry=False)

    return registry
