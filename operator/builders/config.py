"""The ConfigMap `<bg>-config` and the environment that completes it, per process.

Each pod runs `brokergroup controller|broker --config /etc/brokergroup/<file>.toml`. The settings
are loaded as everywhere (file < `BG_*` environment < flags), and split between the two by what
they depend on:

- the TOML files hold what is the same for every pod of a kind (peers, ports, replication);
- the environment holds what differs per pod or is secret: the controller's node id (its pod
  name, from the downward API), the Raft password, admin token and broker token (from the auth
  Secret), the broker's set name (a literal per StatefulSet), advertise host (its pod's DNS name,
  built by the kubelet's `$(POD_NAME)` expansion) and broker token (from the auth Secret).

`config_hash` of one file goes on the pod template of the processes that read it, so a settings
change rolls exactly those pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from brokergroup.operator import labels, names
from brokergroup.operator.builders import tomlfile
from brokergroup.operator.builders.meta import Owner, object_meta, short_hash
from brokergroup.operator.builders.secret import ADMIN_TOKEN_KEY, BROKER_TOKEN_KEY, RAFT_PASSWORD_KEY
from brokergroup.operator.spec import BrokerGroupSpec, Replication, quantity_bytes

CONFIG_DIR: Final = "/etc/brokergroup"
CONTROLLER_TOML: Final = "controller.toml"
BROKER_TOML: Final = "broker.toml"
DATA_MOUNT: Final = "/var/lib/brokergroup"
CONTROLLER_DATA_DIR: Final = f"{DATA_MOUNT}/controller"
BROKER_DATA_DIR: Final = f"{DATA_MOUNT}/broker"
ALL_INTERFACES: Final = "0.0.0.0"

POD_NAME_ENV: Final = "POD_NAME"
CONTROLLER_NODE_ID_ENV: Final = "BG_CONTROLLER_NODE_ID"
CONTROLLER_RAFT_PASSWORD_ENV: Final = "BG_CONTROLLER_RAFT__PASSWORD"  # noqa: S105 (a variable name)
CONTROLLER_ADMIN_TOKEN_ENV: Final = "BG_CONTROLLER_API__ADMIN_TOKEN"  # noqa: S105 (a variable name)
CONTROLLER_BROKER_TOKEN_ENV: Final = "BG_CONTROLLER_API__BROKER_TOKEN"  # noqa: S105 (a variable name)
BROKER_TOKEN_ENV: Final = "BG_BROKER_CONTROLLER__BROKER_TOKEN"  # noqa: S105 (a variable name)
BROKER_NAME_ENV: Final = "BG_BROKER_BROKER_NAME"
BROKER_ADVERTISE_HOST_ENV: Final = "BG_BROKER_ADVERTISE_HOST"
BROKER_POD_LABELS_ENV: Final = "BG_BROKER_KUBERNETES__ENABLED"
BROKER_POD_NAME_ENV: Final = "BG_BROKER_KUBERNETES__POD_NAME"
BROKER_POD_NAMESPACE_ENV: Final = "BG_BROKER_KUBERNETES__NAMESPACE"


# ---- settings files -----------------------------------------------------------------------------------


def controller_peers(bg: str, namespace: str, replicas: int) -> list[str]:
    """`<pod>=<pod host>:<raft>,<pod host>:<api>` per controller pod; the node id is the pod name."""
    raft, api = names.CONTROLLER_RAFT_PORT, names.CONTROLLER_API_PORT
    out = []
    for ordinal in range(replicas):
        host = names.controller_peer_host(bg, ordinal, namespace)
        out.append(f"{names.controller_pod(bg, ordinal)}={host}:{raft},{host}:{api}")
    return out


BROKER_DNS_LOOKUP_INTERVAL_MS: Final = 5000
"""How often brokers resolve the controllers' headless Service again: a controller pod back with a new IP
is heard from within this, well inside the heartbeat timeout (10 s at least); CoreDNS's records live 5 s."""


def controller_service_address(bg: str, namespace: str) -> str:
    """The controllers' headless Service, `name:port`: brokers resolve it to every controller pod (it
    publishes not-ready pods too) and heartbeat each one, so a scaled or moved controller needs no broker
    change (`controller.dns_lookup`, RocketMQ's fetchControllerAddrByDnsLookup)."""
    return f"{names.controller(bg)}.{namespace}.svc:{names.CONTROLLER_API_PORT}"


def controller_settings(bg: str, namespace: str, spec: BrokerGroupSpec) -> dict[str, Any]:
    """controller.toml (ControllerSettings keys) without node_id, raft.password, api.admin_token."""
    return {
        "group": names.controller(bg),
        "peers": controller_peers(bg, namespace, spec.controller.replicas),
        "data_dir": CONTROLLER_DATA_DIR,
        "raft": {"bind_host": ALL_INTERFACES},
        "api": {"host": ALL_INTERFACES, "port": names.CONTROLLER_API_PORT},
        "rocketmq": {"enable_elect_unclean_master": spec.controller.elect_unclean_master},
    }


def replication_settings(spec: BrokerGroupSpec) -> dict[str, Any]:
    """`ha` keys of the replication mode (as `brokergroup.local.profiles` SYNC / ASYNC).

    Sync: wait for every sync-state-set member, refuse puts below minInSyncReplicas. Async: the
    master alone acknowledges (the spec model already forces minInSyncReplicas to 1).
    """
    brokers = spec.brokers
    if brokers.replication is Replication.SYNC:
        return {"all_ack_in_sync_state_set": True, "min_in_sync_replicas": brokers.min_in_sync_replicas}
    return {"all_ack_in_sync_state_set": False, "in_sync_replicas": 1, "min_in_sync_replicas": 1}


def store_retention(spec: BrokerGroupSpec) -> dict[str, Any]:
    """`store` keys of retention and the full-disk threshold: `retention_ms` from `brokers.retentionHours`,
    `retention_bytes` from `brokers.retentionSize`, `min_free_disk_bytes` from `brokers.minFreeDisk`. An
    unset field writes nothing (the broker's default: keep everything, 128 MiB free), so a group that sets
    none keeps the broker.toml, and the pods, it had."""
    brokers = spec.brokers
    out: dict[str, Any] = {}
    if brokers.retention_hours is not None:
        out["retention_ms"] = brokers.retention_hours * 3_600_000
    if brokers.retention_size is not None:
        out["retention_bytes"] = quantity_bytes(brokers.retention_size)
    if brokers.min_free_disk is not None:
        out["min_free_disk_bytes"] = quantity_bytes(brokers.min_free_disk)
    return out


def replica_seeding(spec: BrokerGroupSpec) -> dict[str, Any]:
    """`ha.sync_from_last_file` from `brokers.syncFromLastFile`, written only when on (same reason)."""
    return {"sync_from_last_file": True} if spec.brokers.sync_from_last_file else {}


def broker_settings(bg: str, namespace: str, spec: BrokerGroupSpec) -> dict[str, Any]:
    """broker.toml (BrokerSettings keys) without broker_name and advertise_host."""
    return {
        "cluster_name": bg,
        "data_dir": BROKER_DATA_DIR,
        "host": ALL_INTERFACES,
        "port": names.BROKER_PORT,
        "store": {"flush": "SYNC", **store_retention(spec)},
        "ha": {
            "host": ALL_INTERFACES,
            "port": names.BROKER_HA_PORT,
            **replication_settings(spec),
            **replica_seeding(spec),
        },
        "binary": {"host": ALL_INTERFACES, "port": names.BROKER_BINARY_PORT},
        "controller": {
            "addresses": [controller_service_address(bg, namespace)],
            "dns_lookup": True,
            "dns_lookup_interval_ms": BROKER_DNS_LOOKUP_INTERVAL_MS,
            "heartbeat_timeout_ms": spec.controller.heartbeat_timeout_seconds * 1000,
        },
    }


def config_map(owner: Owner, spec: BrokerGroupSpec) -> dict[str, Any]:
    bg, namespace = owner.name, owner.namespace
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": object_meta(owner, names.config(bg), labels.common(bg)),
        "data": {
            CONTROLLER_TOML: tomlfile.dumps(controller_settings(bg, namespace, spec)),
            BROKER_TOML: tomlfile.dumps(broker_settings(bg, namespace, spec)),
        },
    }


def config_hash(configmap: Mapping[str, Any], key: str | None = None) -> str:
    """Hash of the file `key` of the ConfigMap, or of all its data when `key` is None."""
    data = configmap.get("data") or {}
    return short_hash(data.get(key, "") if key is not None else data)


# ---- environment ----------------------------------------------------------------------------------------


def _field_env(name: str, field_path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": field_path}}}


def _secret_env(name: str, secret: str, key: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key, "optional": False}}}


def controller_env(bg: str) -> list[dict[str, Any]]:
    """The controller settings that are per pod or secret."""
    secret = names.controller_auth(bg)
    return [
        _field_env(CONTROLLER_NODE_ID_ENV, "metadata.name"),
        _secret_env(CONTROLLER_RAFT_PASSWORD_ENV, secret, RAFT_PASSWORD_KEY),
        _secret_env(CONTROLLER_ADMIN_TOKEN_ENV, secret, ADMIN_TOKEN_KEY),
        _secret_env(CONTROLLER_BROKER_TOKEN_ENV, secret, BROKER_TOKEN_KEY),
    ]


def broker_env(bg: str, index: int, namespace: str) -> list[dict[str, Any]]:
    """The broker settings that are per set or per pod. POD_NAME comes first: the kubelet expands
    `$(POD_NAME)` only from variables defined earlier in the list."""
    advertise = names.pod_host(f"$({POD_NAME_ENV})", names.broker_set(bg, index), namespace)
    return [
        _field_env(POD_NAME_ENV, "metadata.name"),
        {"name": BROKER_NAME_ENV, "value": names.broker_set(bg, index)},
        {"name": BROKER_ADVERTISE_HOST_ENV, "value": advertise},
        # The broker labels its own Pod with its role (brokergroup.broker.podlabels).
        {"name": BROKER_POD_LABELS_ENV, "value": "true"},
        _field_env(BROKER_POD_NAME_ENV, "metadata.name"),
        _field_env(BROKER_POD_NAMESPACE_ENV, "metadata.namespace"),
        # The brokers' credential at the controllers: heartbeats and sync-state-set changes carry it.
        _secret_env(BROKER_TOKEN_ENV, names.controller_auth(bg), BROKER_TOKEN_KEY),
    ]
