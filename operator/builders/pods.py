"""What the controller and broker pods share: security, volumes, probes, placement, the StatefulSet.

Both kinds of process run the one image as uid 10001 on a read-only root file system, with their
data on a per-pod claim at /var/lib/brokergroup, their settings file from the ConfigMap at
/etc/brokergroup and a small writable /tmp. The pod template carries the hash of the settings file
it reads, so changing the settings rolls the pods.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final

from brokergroup.operator import labels, names
from brokergroup.operator.builders.config import CONFIG_DIR, DATA_MOUNT
from brokergroup.operator.builders.meta import Owner, object_meta
from brokergroup.operator.spec import BrokerGroupSpec, Resources, Storage

RUN_AS: Final = 10001
DATA_VOLUME: Final = "data"
CONFIG_VOLUME: Final = "config"
TMP_VOLUME: Final = "tmp"
TMP_MOUNT: Final = "/tmp"  # noqa: S108 (an emptyDir of its own, not a shared /tmp)
TMP_SIZE: Final = "64Mi"
CONFIG_FILE_MODE: Final = 0o444
PROBE_PERIOD_SECONDS: Final = 5
HOSTNAME_TOPOLOGY: Final = "kubernetes.io/hostname"


@dataclasses.dataclass(frozen=True)
class Port:
    name: str
    number: int


@dataclasses.dataclass(frozen=True)
class Process:
    """One kind of pod: what differs between the controller's and a broker set's StatefulSet."""

    container: str
    """Container name (`controller` or `broker`)."""
    command: tuple[str, ...]
    config_file: str
    """Key of the ConfigMap the process reads (mounted alone under /etc/brokergroup)."""
    ports: tuple[Port, ...]
    probe_port: str
    """Name of the port serving /healthz and /readyz."""
    env: tuple[Mapping[str, Any], ...]
    resources: Resources
    storage: Storage
    startup_seconds: int
    """How long the first /healthz may take (journal or commit-log recovery) before liveness counts."""
    grace_seconds: int
    """terminationGracePeriodSeconds."""
    service_account: str | None = None
    """The pods' ServiceAccount, with its token mounted; None: no ServiceAccount token at all."""


def container_security_context() -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS,
        "runAsGroup": RUN_AS,
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def pod_security_context() -> dict[str, Any]:
    """fsGroup makes the data claim writable by uid 10001; OnRootMismatch skips the recursive chown
    of a large commit log on every restart."""
    return {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS,
        "runAsGroup": RUN_AS,
        "fsGroup": RUN_AS,
        "fsGroupChangePolicy": "OnRootMismatch",
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def http_probes(port: str, startup_seconds: int) -> dict[str, Any]:
    """Readiness on /readyz (the process's own notion of ready), a generous liveness on /healthz (a
    minute of failures before a restart), and a startup probe that holds liveness off meanwhile."""

    def probe(path: str, period: int, timeout: int, failures: int) -> dict[str, Any]:
        return {
            "httpGet": {"path": path, "port": port, "scheme": "HTTP"},
            "periodSeconds": period,
            "timeoutSeconds": timeout,
            "failureThreshold": failures,
            "successThreshold": 1,
        }

    return {
        "startupProbe": probe("/healthz", PROBE_PERIOD_SECONDS, 2, max(1, startup_seconds // PROBE_PERIOD_SECONDS)),
        "readinessProbe": probe("/readyz", PROBE_PERIOD_SECONDS, 2, 3),
        "livenessProbe": probe("/healthz", 10, 5, 6),
    }


def anti_affinity(selector: Mapping[str, str]) -> dict[str, Any]:
    """Prefer one pod of a group per node (preferred: a small cluster must still schedule them)."""
    return {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": dict(selector)},
                        "topologyKey": HOSTNAME_TOPOLOGY,
                    },
                }
            ]
        }
    }


def volume_claim_template(storage: Storage, claim_labels: Mapping[str, str]) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage.size}}}
    if storage.storage_class_name is not None:
        spec["storageClassName"] = storage.storage_class_name
    return {"metadata": {"name": DATA_VOLUME, "labels": dict(claim_labels)}, "spec": spec}


def container(spec: BrokerGroupSpec, process: Process) -> dict[str, Any]:
    return {
        "name": process.container,
        "image": spec.image,
        "imagePullPolicy": spec.image_pull_policy.value,
        "command": list(process.command),
        "ports": [{"name": p.name, "containerPort": p.number, "protocol": "TCP"} for p in process.ports],
        "env": [dict(e) for e in process.env],
        "resources": process.resources.to_k8s(),
        **http_probes(process.probe_port, process.startup_seconds),
        "volumeMounts": [
            {"name": DATA_VOLUME, "mountPath": DATA_MOUNT},
            {"name": CONFIG_VOLUME, "mountPath": CONFIG_DIR, "readOnly": True},
            {"name": TMP_VOLUME, "mountPath": TMP_MOUNT},
        ],
        "securityContext": container_security_context(),
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }


def volumes(bg: str, config_file: str) -> list[dict[str, Any]]:
    """The process's settings file alone (not the other kind's), and the writable /tmp."""
    return [
        {
            "name": CONFIG_VOLUME,
            "configMap": {
                "name": names.config(bg),
                "items": [{"key": config_file, "path": config_file}],
                "defaultMode": CONFIG_FILE_MODE,
            },
        },
        {"name": TMP_VOLUME, "emptyDir": {"sizeLimit": TMP_SIZE}},
    ]


def service_account(account: str | None) -> dict[str, Any]:
    """Pod spec fields for the ServiceAccount: a named one with its token, or no token at all."""
    if account is None:
        return {"automountServiceAccountToken": False}
    return {"serviceAccountName": account, "automountServiceAccountToken": True}


def stateful_set(
    owner: Owner,
    spec: BrokerGroupSpec,
    process: Process,
    *,
    name: str,
    object_labels: Mapping[str, str],
    selector: Mapping[str, str],
    replicas: int,
    config_hash: str,
    update_strategy: str = "RollingUpdate",
) -> dict[str, Any]:
    """A StatefulSet of `process` behind the headless Service `name`.

    Parallel pod management: a Raft group (and a broker set waiting for its controller-elected
    master) is ready only when enough peers run, so OrderedReady would wait for pod 0 to be ready
    before starting pod 1 and never get there. The pod labels are the object labels plus the
    selector and nothing else: the role and broker-id labels the operator puts on pods are absent
    from the template, so the StatefulSet never fights them.
    """
    pod_labels = {**object_labels, **selector}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": object_meta(owner, name, object_labels),
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": update_strategy},
            "selector": {"matchLabels": dict(selector)},
            "template": {
                "metadata": {"labels": pod_labels, "annotations": {labels.CONFIG_HASH_ANNOTATION: config_hash}},
                "spec": {
                    "securityContext": pod_security_context(),
                    "terminationGracePeriodSeconds": process.grace_seconds,
                    "enableServiceLinks": False,
                    **service_account(process.service_account),
                    "affinity": anti_affinity(selector),
                    "containers": [container(spec, process)],
                    "volumes": volumes(owner.name, process.config_file),
                },
            },
            "volumeClaimTemplates": [volume_claim_template(process.storage, object_labels)],
        },
    }
