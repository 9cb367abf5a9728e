"""The controller's StatefulSet `<bg>-controller`, its headless Service and the API Service.

One pod per Raft node; the node id is the pod name, so the peer list in controller.toml names the
pods' stable DNS names behind the headless Service. Readiness (`/readyz`) means "knows a leader";
the API Service therefore routes only to nodes of a working quorum (a follower forwards to the
leader itself).
"""

from __future__ import annotations

from typing import Any, Final

from brokergroup.operator import labels, names
from brokergroup.operator.builders.config import CONFIG_DIR, CONTROLLER_TOML, controller_env
from brokergroup.operator.builders.meta import Owner
from brokergroup.operator.builders.pods import Port, Process, stateful_set
from brokergroup.operator.builders.services import service
from brokergroup.operator.spec import BrokerGroupSpec

CONTAINER: Final = "controller"
RAFT: Final = Port("raft", names.CONTROLLER_RAFT_PORT)
API: Final = Port("api", names.CONTROLLER_API_PORT)
GRACE_SECONDS: Final = 30
STARTUP_SECONDS: Final = 300


def controller_labels(bg: str) -> dict[str, str]:
    """Labels of every controller object (the pods add the selector, which adds nothing new)."""
    return labels.common(bg, labels.COMPONENT_CONTROLLER)


def controller_process(bg: str, spec: BrokerGroupSpec) -> Process:
    return Process(
        container=CONTAINER,
        command=("brokergroup", "controller", "--config", f"{CONFIG_DIR}/{CONTROLLER_TOML}"),
        config_file=CONTROLLER_TOML,
        ports=(RAFT, API),
        probe_port=API.name,
        env=tuple(controller_env(bg)),
        resources=spec.controller.resources,
        storage=spec.controller.storage,
        startup_seconds=STARTUP_SECONDS,
        grace_seconds=GRACE_SECONDS,
    )


def controller_stateful_set(owner: Owner, spec: BrokerGroupSpec, config_hash: str) -> dict[str, Any]:
    """`config_hash`: hash of controller.toml (`config.config_hash(cm, CONTROLLER_TOML)`)."""
    bg = owner.name
    return stateful_set(
        owner,
        spec,
        controller_process(bg, spec),
        name=names.controller(bg),
        object_labels=controller_labels(bg),
        selector=labels.controller_selector(bg),
        replicas=spec.controller.replicas,
        config_hash=config_hash,
    )


def controller_headless_service(owner: Owner) -> dict[str, Any]:
    """Stable DNS names of the Raft peers, published before they are ready: a node becomes ready
    only after it has reached a quorum of the others by these names."""
    bg = owner.name
    return service(
        owner, names.controller(bg), controller_labels(bg), labels.controller_selector(bg), (RAFT, API), headless=True
    )


def controller_api_service(owner: Owner) -> dict[str, Any]:
    """What the operator and clients call: any ready controller's HTTP API."""
    bg = owner.name
    return service(
        owner, names.controller_api(bg), controller_labels(bg), labels.controller_selector(bg), (API,), headless=False
    )
