"""Helpers of the builder tests: a fixed owner, children by (kind, name), and a tiny "kubelet" that
resolves a container's env the way Kubernetes does (downward API, Secret keys, `$(VAR)`)."""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import Any

from brokergroup.operator.builders import Owner, desired_children
from brokergroup.operator.spec import BrokerGroupSpec, parse_spec

OWNER = Owner(name="demo", namespace="mq", uid="0b7f6c1e-uid")
_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


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


def resolve_env(env: list[dict[str, Any]], *, pod: str, secrets: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """The environment the kubelet would give the container of `pod`.

    Supports what the builders use: literal values with `$(VAR)` references to variables defined
    earlier (an unknown reference stays as written, as in Kubernetes), `fieldRef` metadata.name,
    and `secretKeyRef` into `secrets` (Secret objects by name, base64 `data`).
    """
    out: dict[str, str] = {}
    for item in env:
        name = item["name"]
        if "value" in item:
            out[name] = _REF.sub(lambda m: out.get(m.group(1), m.group(0)), item["value"])
            continue
        source = item["valueFrom"]
        if "fieldRef" in source:
            assert source["fieldRef"]["fieldPath"] == "metadata.name", source
            out[name] = pod
        elif "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            out[name] = base64.b64decode(secrets[ref["name"]]["data"][ref["key"]]).decode("utf-8")
        else:
            raise AssertionError(f"unsupported env source {source}")
    return out
