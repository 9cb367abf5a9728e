"""Pod status and Events as the test kubelet reports them."""

from __future__ import annotations

import datetime
import logging
import secrets
import threading
from collections.abc import Mapping
from typing import Any

import kubernetes

logger = logging.getLogger(__name__)
COMPONENT = "test-kubelet"


def rfc3339() -> str:
    """Now, as the API's timestamps are written."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Conditions:
    """Pod conditions with `lastTransitionTime` moved only when a condition's status changes."""

    ORDER = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")

    def __init__(self) -> None:
        self._state: dict[str, tuple[str, str, str | None]] = {}

    def set(self, kind: str, value: bool, reason: str | None = None) -> None:
        status = "True" if value else "False"
        previous = self._state.get(kind)
        when = previous[1] if previous is not None and previous[0] == status else rfc3339()
        self._state[kind] = (status, when, reason)

    def render(self) -> list[dict[str, Any]]:
        result = []
        for kind in self.ORDER:
            if kind in self._state:
                status, when, reason = self._state[kind]
                condition: dict[str, Any] = {"type": kind, "status": status, "lastTransitionTime": when}
                condition["lastProbeTime"] = None
                if reason:
                    condition["reason"] = reason
                result.append(condition)
        return result


class EventRecorder:
    """core/v1 Events from `test-kubelet` on node `node`, best effort; a repeated (object, reason, message)
    bumps the count of its Event as the real recorder's aggregation does."""

    def __init__(self, core: kubernetes.client.CoreV1Api, node: str) -> None:
        self.core = core
        self.node = node
        self._seen: dict[tuple[str, str, str], tuple[str, int]] = {}
        self._lock = threading.Lock()

    def emit(self, pod: Mapping[str, Any], kind: str, reason: str, message: str, field_path: str = "") -> None:
        meta = pod["metadata"]
        key = (meta["uid"], reason, message)
        now = rfc3339()
        try:
            with self._lock:
                seen = self._seen.get(key)
                if seen is not None:
                    name, count = seen
                    self._seen[key] = (name, count + 1)
                    self.core.patch_namespaced_event(
                        name, meta["namespace"], {"count": count + 1, "lastTimestamp": now}, _preload_content=False
                    )
                    return
                name = f"{meta['name']}.{secrets.token_hex(8)}"
                self._seen[key] = (name, 1)
            involved = {
                "kind": "Pod",
                "apiVersion": "v1",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta["uid"],
            }
            if field_path:
                involved["fieldPath"] = field_path
            body = {
                "metadata": {"name": name, "namespace": meta["namespace"]},
                "involvedObject": involved,
                "type": kind,
                "reason": reason,
                "message": message,
                "source": {"component": COMPONENT, "host": self.node},
                "reportingComponent": COMPONENT,
                "reportingInstance": self.node,
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
            }
            self.core.create_namespaced_event(meta["namespace"], body, _preload_content=False)
        except Exception as exc:  # events are best effort: never stop a pod worker
            logger.debug("event %s/%s %s not recorded: %s", meta["namespace"], meta["name"], reason, exc)


def node_object(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "brokergroup.test/test-kubelet": "true",
            },
        },
        "spec": {},
    }


def node_status(address: str, hostname: str) -> dict[str, Any]:
    now = rfc3339()

    def condition(kind: str, value: str, reason: str, message: str) -> dict[str, Any]:
        return {
            "type": kind,
            "status": value,
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }

    capacity = {"cpu": "2", "memory": "24Gi", "pods": "110", "ephemeral-storage": "50Gi"}
    return {
        "conditions": [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "test kubelet: no pressure"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "test kubelet: no pressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID", "test kubelet: no pressure"),
            condition("Ready", "True", "KubeletReady", "test kubelet (tests/e2e/kubelet) is posting ready status"),
        ],
        "addresses": [{"type": "InternalIP", "address": address}, {"type": "Hostname", "address": hostname}],
        "capacity": capacity,
        "allocatable": capacity,
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
        "nodeInfo": {
            "machineID": "",
            "systemUUID": "",
            "bootID": "",
            "kernelVersion": "",
            "osImage": "test kubelet: local processes",
            "containerRuntimeVersion": "testkubelet://0.1",
            "kubeletVersion": "v1.33.13",
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    }
