"""Broker set `i`: the StatefulSet `<bg>-broker-<i>`, its headless Service and its master Service.

The StatefulSet name is also the set's RocketMQ brokerName (BG_BROKER_BROKER_NAME), and each pod
advertises its own stable DNS name behind the headless Service (BG_BROKER_ADVERTISE_HOST), which
is what the controller hands out as the master's address and what slaves replicate from.

Readiness (`/readyz`) means the broker is not fenced: the controller has told it its role. The
master Service selects the set's pod that the operator labelled `role=master` from the
controller's view; it exposes the ports producers and consumers use: the HTTP API (10911) and the
binary client port (10909, fixed so that a Service, a port-forward or a firewall rule can name it).
Slaves never go through it: they replicate from the HA address the master advertises, so the HA port
(10912) is on the headless Service only.
"""

from __future__ import annotations

from typing import Any, Final

from brokergroup.operator import labels, names
from brokergroup.operator.builders.config import BROKER_TOML, CONFIG_DIR, broker_env
from brokergroup.operator.builders.meta import Owner
from brokergroup.operator.builders.pods import Port, Process, stateful_set
from brokergroup.operator.builders.services import service
from brokergroup.operator.spec import BrokerGroupSpec

CONTAINER: Final = "broker"
HTTP: Final = Port("http", names.BROKER_PORT)
HA: Final = Port("ha", names.BROKER_HA_PORT)
BINARY: Final = Port("binary", names.BROKER_BINARY_PORT)
GRACE_SECONDS: Final = 60
STARTUP_SECONDS: Final = 600
"""Commit-log recovery of a large store happens before the HTTP port answers."""


def broker_set_labels(bg: str, index: int) -> dict[str, str]:
    """Labels of every object of set `index` (no role, no broker id: those are per pod, set later)."""
    return {**labels.common(bg, labels.COMPONENT_BROKER), labels.BROKER_SET_LABEL: names.broker_set(bg, index)}


def broker_process(owner: Owner, spec: BrokerGroupSpec, index: int) -> Process:
    return Process(
        container=CONTAINER,
        command=("brokergroup", "broker", "--config", f"{CONFIG_DIR}/{BROKER_TOML}"),
        config_file=BROKER_TOML,
        ports=(HTTP, HA, BINARY),
        probe_port=HTTP.name,
        env=tuple(broker_env(owner.name, index, owner.namespace)),
        resources=spec.brokers.resources,
        storage=spec.brokers.storage,
        startup_seconds=STARTUP_SECONDS,
        grace_seconds=GRACE_SECONDS,
        # Each broker patches its own Pod's role label (builders.rbac: patch on the group's broker pods only).
        service_account=names.broker_account(owner.name),
    )


def broker_stateful_set(owner: Owner, spec: BrokerGroupSpec, index: int, config_hash: str) -> dict[str, Any]:
    """`config_hash`: hash of broker.toml (`config.config_hash(cm, BROKER_TOML)`)."""
    bg = owner.name
    return stateful_set(
        owner,
        spec,
        broker_process(owner, spec, index),
        name=names.broker_set(bg, index),
        object_labels=broker_set_labels(bg, index),
        selector=labels.broker_set_selector(bg, index),
        replicas=spec.brokers.replicas,
        config_hash=config_hash,
        # The operator rolls broker pods itself, slaves first and the master last after an
        # election (brokergroup.operator.rollout); the StatefulSet controller only recreates them.
        update_strategy="OnDelete",
    )


def broker_headless_service(owner: Owner, index: int) -> dict[str, Any]:
    """Stable pod DNS names (the advertised addresses), published before the pods are ready: a
    broker is ready only after the controller has reached it and the slaves their master."""
    bg = owner.name
    return service(
        owner,
        names.broker_set(bg, index),
        broker_set_labels(bg, index),
        labels.broker_set_selector(bg, index),
        (HTTP, HA, BINARY),
        headless=True,
    )


def broker_master_service(owner: Owner, index: int) -> dict[str, Any]:
    """The set's master for clients. Selects nothing until the operator labels a master."""
    bg = owner.name
    return service(
        owner,
        names.broker_master_service(bg, index),
        broker_set_labels(bg, index),
        labels.broker_master_selector(bg, index),
        (HTTP, BINARY),
        headless=False,
    )
