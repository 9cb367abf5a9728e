"""Helpers of the builder tests: a fixed owner, and children by (kind, name). Container env is resolved
by the test kubelet's own `tests.e2e.kubelet.env.resolve_env`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from brokergroup.operator.builders import Owner, desired_children
from brokergroup.operator.spec import BrokerGroupSpec, parse_spec

OWNER = Owner(name="demo", namespace="mq", uid="0b7f6c1e-uid")


def spec(**fields: Any) -> BrokerGroupSpec:
    """A spec as the CR would hold it (camelCase keys), defaults for the rest."""
    return parse_spec(fields)


def children(bg_spec: BrokerGroupSpec | None = None, owner: Owner = OWNER) -> dict[tuple[str, str], dict[str, Any]]:
    """desired_children keyed by (kind, name); fails on a duplicate key."""
    built = desired_children(owner, bg_spec or spec())
    keyed = {(c["kind"], c["metadata"]["name"]): c for c in built}
    assert len(keyed) == len(built), "two children share a kind and a name"
    return keyed


def pod_spec(statefulset: Mapping[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = statefulset["spec"]["template"]["spec"]
    return result


def only_container(statefulset: Mapping[str, Any]) -> dict[str, Any]:
    (container,) = pod_spec(statefulset)["containers"]
    result: dict[str, Any] = container
    return result
