"""Pure builders: a BrokerGroup spec -> the Kubernetes objects it owns, as JSON-ready dicts.

No Kubernetes client, no I/O, no clock: the reconcile shell applies what these return. Every child
carries the common labels, an owner reference to the BrokerGroup and `brokergroup.io/spec-hash`,
the hash of the object as built, so the shell writes only children whose hash differs from the
live one. The auth Secret is apart (`secret.new_auth_secret`): it is created once and never
rebuilt.
"""

from __future__ import annotations

from typing import Any

from brokergroup.operator.builders.brokers import broker_headless_service, broker_master_service, broker_stateful_set
from brokergroup.operator.builders.config import BROKER_TOML, CONTROLLER_TOML, config_hash, config_map
from brokergroup.operator.builders.controller import (
    controller_api_service,
    controller_headless_service,
    controller_stateful_set,
)
from brokergroup.operator.builders.meta import Owner, live_spec_hash, owner_reference, spec_hash, with_spec_hash
from brokergroup.operator.builders.policy import disruption_budgets, network_policy
from brokergroup.operator.builders.rbac import broker_role, broker_role_binding, broker_service_account
from brokergroup.operator.builders.secret import auth_secret_problems, new_auth_secret
from brokergroup.operator.spec import BrokerGroupSpec

__all__ = [
    "Owner",
    "auth_secret_problems",
    "desired_children",
    "live_spec_hash",
    "new_auth_secret",
    "owner_reference",
    "spec_hash",
    "with_spec_hash",
]


def desired_children(owner: Owner, spec: BrokerGroupSpec) -> list[dict[str, Any]]:
    """Every child but the auth Secret, in apply order: the ConfigMap, the Services, the brokers'
    ServiceAccount, Role and RoleBinding, the StatefulSets (whose pods need them), the
    PodDisruptionBudgets, the NetworkPolicy."""
    sets = range(spec.brokers.sets)
    configmap = config_map(owner, spec)
    children = [configmap, controller_headless_service(owner), controller_api_service(owner)]
    for i in sets:
        children += [broker_headless_service(owner, i), broker_master_service(owner, i)]
    children += [broker_service_account(owner), broker_role(owner, spec), broker_role_binding(owner)]
    children.append(controller_stateful_set(owner, spec, config_hash(configmap, CONTROLLER_TOML)))
    children += [broker_stateful_set(owner, spec, i, config_hash(configmap, BROKER_TOML)) for i in sets]
    children += disruption_budgets(owner, spec)
    children.append(network_policy(owner))
    return [with_spec_hash(child) for child in children]
