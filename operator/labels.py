"""Labels and annotations of a BrokerGroup's children (DESIGN §2.4)."""

from __future__ import annotations

from typing import Final

from brokergroup.operator import names

APP: Final = "brokergroup"
MANAGED_BY: Final = "brokergroup-operator"

GROUP_LABEL: Final = f"{names.GROUP}/group"
BROKER_SET_LABEL: Final = f"{names.GROUP}/broker-set"
BROKER_ID_LABEL: Final = f"{names.GROUP}/broker-id"
ROLE_LABEL: Final = f"{names.GROUP}/role"

MASTER_EPOCH_ANNOTATION: Final = f"{names.GROUP}/master-epoch"
ELECT_MASTER_ANNOTATION: Final = f"{names.GROUP}/elect-master"
PAUSE_ANNOTATION: Final = f"{names.GROUP}/pause-reconciliation"
RELEASE_SET_ANNOTATION: Final = f"{names.GROUP}/release-set"
SPEC_HASH_ANNOTATION: Final = f"{names.GROUP}/spec-hash"
"""On every child: hash of the object as the operator built it; equal hash = nothing to write."""
CONFIG_HASH_ANNOTATION: Final = f"{names.GROUP}/config-hash"
"""On pod templates: hash of the settings files, so a settings change rolls the pods."""

COMPONENT_CONTROLLER: Final = "controller"
COMPONENT_BROKER: Final = "broker"


def common(bg: str, component: str | None = None) -> dict[str, str]:
    """`app.kubernetes.io/*` plus the group label: on every child."""
    out = {
        "app.kubernetes.io/name": APP,
        "app.kubernetes.io/instance": bg,
        "app.kubernetes.io/managed-by": MANAGED_BY,
        GROUP_LABEL: bg,
    }
    if component is not None:
        out["app.kubernetes.io/component"] = component
    return out


def controller_selector(bg: str) -> dict[str, str]:
    """Selects the controller pods of `bg` (StatefulSet selector: never changes)."""
    return {
        "app.kubernetes.io/name": APP,
        "app.kubernetes.io/instance": bg,
        "app.kubernetes.io/component": COMPONENT_CONTROLLER,
    }


def broker_set_selector(bg: str, index: int) -> dict[str, str]:
    """Selects the pods of broker set `index` (StatefulSet selector: never changes)."""
    return {
        "app.kubernetes.io/name": APP,
        "app.kubernetes.io/instance": bg,
        "app.kubernetes.io/component": COMPONENT_BROKER,
        BROKER_SET_LABEL: names.broker_set(bg, index),
    }


def broker_master_selector(bg: str, index: int) -> dict[str, str]:
    """The master Service's selector: the set's pods that the operator labelled master."""
    return {BROKER_SET_LABEL: names.broker_set(bg, index), ROLE_LABEL: "master"}


def children_selector(bg: str) -> str:
    """Label selector (string form) of everything the operator made for `bg`."""
    return f"app.kubernetes.io/name={APP},app.kubernetes.io/instance={bg},app.kubernetes.io/managed-by={MANAGED_BY}"
