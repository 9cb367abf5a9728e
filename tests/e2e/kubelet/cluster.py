"""The test kubelet's calls to the apiserver: its Node, pod binding and final deletion, and the objects that
env and volumes read (ConfigMaps, Secrets, PVCs, service account tokens)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import kubernetes
from kubernetes.client.exceptions import ApiException

from tests.e2e.kubelet.informer import Informer
from tests.e2e.kubelet.status import EventRecorder, node_object, node_status
from tests.e2e.kubelet.volumes import VolumeError

logger = logging.getLogger(__name__)


def api_client(kubeconfig: Path) -> kubernetes.client.ApiClient:
    """An ApiClient with a connection pool big enough for every pod worker at once."""
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = 32
    return kubernetes.client.ApiClient(configuration)


class Cluster:
    def __init__(
        self,
        core: kubernetes.client.CoreV1Api,
        namespace: str,
        node_name: str,
        host_ip: str,
        informers: Mapping[str, Informer],
    ) -> None:
        self.core = core
        self.namespace = namespace
        self.node_name = node_name
        self.host_ip = host_ip
        self.informers = informers
        self.events = EventRecorder(core, node_name)

    def ensure_node(self) -> None:
        """Create the Node if absent, and (re)write its status: Ready, with the bridge address as InternalIP.
        Nothing heartbeats it; node-lifecycle-controller is off in the e2e control plane."""
        try:
            self.core.create_node(node_object(self.node_name), _preload_content=False)
        except ApiException as exc:
            if exc.status != 409:
                raise
        self.core.patch_node_status(
            self.node_name, {"status": node_status(self.host_ip, self.node_name)}, _preload_content=False
        )

    def bind(self, pod: Mapping[str, Any]) -> bool:
        """Bind `pod` to the Node (the scheduler's job); False when it is gone or already bound."""
        meta = pod["metadata"]
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": meta["name"], "uid": meta["uid"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": self.node_name},
        }
        try:
            # _preload_content=False: the client fails to decode the answer (kubernetes-client/python#547).
            self.core.create_namespaced_pod_binding(meta["name"], self.namespace, body, _preload_content=False)
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise
            return False
        message = f"Successfully assigned {self.namespace}/{meta['name']} to {self.node_name}"
        self.events.emit(pod, "Normal", "Scheduled", message)
        return True

    def delete_pod(self, name: str, uid: str) -> None:
        """The kubelet's last word on a pod whose containers are gone: delete it now, only if it is still
        the same pod (uid precondition)."""
        try:
            # Everything in the body: with a body, the apiserver ignores the query's gracePeriodSeconds.
            body = {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}}
            self.core.delete_namespaced_pod(name, self.namespace, body=body, _preload_content=False)
        except ApiException as exc:
            if exc.status not in (404, 409):
                logger.warning("deleting pod %s: %s", name, exc)

    def lookup(self, kind: str, name: str) -> Mapping[str, Any] | None:
        """ConfigMap and Secret from the informers' stores (then the API, for one created a moment ago), a
        PersistentVolumeClaim from the API; None when it does not exist."""
        informer = self.informers.get(kind)
        if informer is not None:
            found = informer.get(name)
            if found is not None:
                return found
        read = {
            "ConfigMap": self.core.read_namespaced_config_map,
            "Secret": self.core.read_namespaced_secret,
            "PersistentVolumeClaim": self.core.read_namespaced_persistent_volume_claim,
        }[kind]
        try:
            response = read(name, self.namespace, _preload_content=False)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        result: dict[str, Any] = json.loads(response.data)
        return result

    def token(self, pod: Mapping[str, Any], ref: Mapping[str, Any]) -> str:
        """A service account token bound to the pod (TokenRequest), for a projected serviceAccountToken."""
        meta = pod["metadata"]
        account = (pod.get("spec") or {}).get("serviceAccountName") or "default"
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "audiences": [ref["audience"]] if ref.get("audience") else [],
                "expirationSeconds": int(ref.get("expirationSeconds") or 3600),
                "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"]},
            },
        }
        try:
            response = self.core.create_namespaced_service_account_token(
                account, self.namespace, body, _preload_content=False
            )
        except ApiException as exc:
            raise VolumeError(f"token for serviceaccount {account}: {exc.status} {exc.reason}") from exc
        return str(json.loads(response.data)["status"]["token"])
