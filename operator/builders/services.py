"""Services of a BrokerGroup: headless ones give StatefulSet pods stable DNS names, ClusterIP ones
give clients one address (the controller API, each set's master)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from brokergroup.operator.builders.meta import Owner, object_meta
from brokergroup.operator.builders.pods import Port


def service(
    owner: Owner,
    name: str,
    object_labels: Mapping[str, str],
    selector: Mapping[str, str],
    ports: Sequence[Port],
    *,
    headless: bool,
) -> dict[str, Any]:
    """A Service; headless ones publish not-ready pods, whose peers must resolve them before any is
    ready (Raft peers, a slave connecting to its master)."""
    service_spec: dict[str, Any] = {
        "selector": dict(selector),
        "ports": [{"name": p.name, "port": p.number, "targetPort": p.name, "protocol": "TCP"} for p in ports],
    }
    if headless:
        service_spec.update(clusterIP="None", publishNotReadyAddresses=True)
    else:
        service_spec["type"] = "ClusterIP"
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_meta(owner, name, object_labels),
        "spec": service_spec,
    }
