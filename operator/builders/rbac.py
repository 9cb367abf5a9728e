"""The broker pods' identity: a ServiceAccount, a Role and a RoleBinding per BrokerGroup.

Each broker patches its own Pod's role label (`brokergroup.broker.podlabels`), so the master Service follows
elections while the operator is stopped, paused or uninstalled. The Role grants exactly that: `patch` on the
group's broker Pods, named one by one (`resourceNames`), and nothing else: no get, no list, no other Pods, no
Secrets. The operator holds `patch` on Pods itself, so it may grant it without the `escalate` or `bind` verbs.
"""

from __future__ import annotations

from typing import Any

from brokergroup.operator import labels, names
from brokergroup.operator.builders.meta import Owner, object_meta
from brokergroup.operator.spec import BrokerGroupSpec

RBAC_API: str = "rbac.authorization.k8s.io/v1"


def broker_pods(bg: str, spec: BrokerGroupSpec) -> list[str]:
    """Every broker Pod name the spec asks for, set by set."""
    return [
        names.broker_pod(bg, index, ordinal)
        for index in range(spec.brokers.sets)
        for ordinal in range(spec.brokers.replicas)
    ]


def broker_service_account(owner: Owner) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": object_meta(
            owner, names.broker_account(owner.name), labels.common(owner.name, labels.COMPONENT_BROKER)
        ),
        "automountServiceAccountToken": False,
    }


def broker_role(owner: Owner, spec: BrokerGroupSpec) -> dict[str, Any]:
    return {
        "apiVersion": RBAC_API,
        "kind": "Role",
        "metadata": object_meta(
            owner, names.broker_account(owner.name), labels.common(owner.name, labels.COMPONENT_BROKER)
        ),
        "rules": [
            {
                "apiGroups": [""],
                "resources": ["pods"],
                "verbs": ["patch"],
                "resourceNames": broker_pods(owner.name, spec),
            }
        ],
    }


def broker_role_binding(owner: Owner) -> dict[str, Any]:
    account = names.broker_account(owner.name)
    return {
        "apiVersion": RBAC_API,
        "kind": "RoleBinding",
        "metadata": object_meta(owner, account, labels.common(owner.name, labels.COMPONENT_BROKER)),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": owner.namespace}],
    }
