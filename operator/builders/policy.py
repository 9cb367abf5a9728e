"""Disruption budgets and the controller's NetworkPolicy.

PodDisruptionBudgets (when `spec.podDisruptionBudget.enabled`): at most one pod of the controller
and one pod of each broker set evicted at a time. One controller of 3 (or more) keeps the Raft
quorum; one replica of a set keeps a master or a slave to elect. With a single replica the same
`maxUnavailable: 1` still lets a node drain: a budget of zero would block it forever.

The NetworkPolicy: pysyncobj unpickles what reaches the Raft port, so only controller pods may
reach 9877; the HTTP API on 9878 is open to all (brokers, the operator, clients), and its writes
that matter need the admin token.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from brokergroup.operator import labels, names
from brokergroup.operator.builders.brokers import broker_set_labels
from brokergroup.operator.builders.controller import controller_labels
from brokergroup.operator.builders.meta import Owner, object_meta
from brokergroup.operator.spec import BrokerGroupSpec

MAX_UNAVAILABLE: Final = 1


def _pdb(owner: Owner, name: str, object_labels: Mapping[str, str], selector: Mapping[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": object_meta(owner, name, object_labels),
        "spec": {"maxUnavailable": MAX_UNAVAILABLE, "selector": {"matchLabels": dict(selector)}},
    }


def disruption_budgets(owner: Owner, spec: BrokerGroupSpec) -> list[dict[str, Any]]:
    """The controller's budget, then one per broker set; none when disabled."""
    if not spec.pod_disruption_budget.enabled:
        return []
    bg = owner.name
    out = [_pdb(owner, names.controller_pdb(bg), controller_labels(bg), labels.controller_selector(bg))]
    out += [
        _pdb(owner, names.broker_set(bg, i), broker_set_labels(bg, i), labels.broker_set_selector(bg, i))
        for i in range(spec.brokers.sets)
    ]
    return out


def _tcp(port: int) -> dict[str, Any]:
    return {"protocol": "TCP", "port": port}


def network_policy(owner: Owner) -> dict[str, Any]:
    """Ingress to controller pods: Raft from controller pods of this group only, the API from anywhere."""
    bg = owner.name
    selector = labels.controller_selector(bg)
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": object_meta(owner, names.network_policy(bg), controller_labels(bg)),
        "spec": {
            "podSelector": {"matchLabels": dict(selector)},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [{"podSelector": {"matchLabels": dict(selector)}}],
                    "ports": [_tcp(names.CONTROLLER_RAFT_PORT)],
                },
                {"ports": [_tcp(names.CONTROLLER_API_PORT)]},
            ],
        },
    }
