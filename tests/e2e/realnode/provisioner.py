"""A hostPath provisioner for the real node's default StorageClass, in a thread of the process holding the node.

kube-controller-manager marks a claim of an out-of-tree class with `volume.kubernetes.io/storage-provisioner`,
and once the scheduler has picked the node (WaitForFirstConsumer) with `volume.kubernetes.io/selected-node`.
This makes a folder for each such claim and a PersistentVolume bound to it; when a volume of ours is Released
(reclaim policy Delete), it removes the folder and the volume. It is the class's resizer too (the class allows
expansion): a bound claim that asks for more gets it at once, as from a CSI driver that grows volumes online.

Folders are mode 0777: hostPath volumes get no fsGroup ownership (real Kubernetes behaviour), and the
project's pods run as uid 10001.
"""

from __future__ import annotations

import logging
import shutil
import threading
from pathlib import Path
from typing import Any

import kubernetes
from kubernetes.client.exceptions import ApiException
from kubernetes.utils import parse_quantity

from tests.e2e.realnode.config import NODE_NAME, PROVISIONER, STORAGE_CLASS

logger = logging.getLogger(__name__)
PROVISIONER_ANNOTATION = "volume.kubernetes.io/storage-provisioner"
SELECTED_NODE = "volume.kubernetes.io/selected-node"


class HostPathProvisioner:
    def __init__(self, api: kubernetes.client.ApiClient, root: Path, interval: float = 0.3) -> None:
        self.core = kubernetes.client.CoreV1Api(api)
        self.root = root
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors: list[str] = []

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self._thread = threading.Thread(target=self._loop, name="realnode-provisioner", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.sync()
            except Exception as exc:  # the apiserver restarting, say: try again next round
                self.errors.append(repr(exc))
                del self.errors[:-20]
                logger.warning("provisioner: %r", exc)

    def sync(self) -> None:
        for claim in self.core.list_persistent_volume_claim_for_all_namespaces().items:
            annotations = claim.metadata.annotations or {}
            if claim.spec.volume_name and claim.spec.storage_class_name == STORAGE_CLASS:
                self._resize(claim)
                continue
            if (
                claim.spec.volume_name
                or annotations.get(PROVISIONER_ANNOTATION) != PROVISIONER
                or annotations.get(SELECTED_NODE) != NODE_NAME
            ):
                continue
            self._provision(claim)
        for volume in self.core.list_persistent_volume().items:
            if volume.spec.storage_class_name == STORAGE_CLASS and volume.status.phase in ("Released", "Failed"):
                self._delete(volume)

    def _provision(self, claim: Any) -> None:
        name = f"pvc-{claim.metadata.uid}"
        folder = self.root / name
        folder.mkdir(exist_ok=True)
        folder.chmod(0o777)
        volume = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER}},
            "spec": {
                "capacity": {"storage": claim.spec.resources.requests["storage"]},
                "accessModes": claim.spec.access_modes,
                "persistentVolumeReclaimPolicy": "Delete",
                "storageClassName": STORAGE_CLASS,
                "claimRef": {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "namespace": claim.metadata.namespace,
                    "name": claim.metadata.name,
                    "uid": claim.metadata.uid,
                },
                "hostPath": {"path": str(folder), "type": "Directory"},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [NODE_NAME]}
                                ]
                            }
                        ]
                    }
                },
            },
        }
        try:
            self.core.create_persistent_volume(volume)
        except ApiException as exc:
            if exc.status != 409:  # made in an earlier round, not yet bound
                raise

    def _resize(self, claim: Any) -> None:
        """What an external resizer does for a volume whose filesystem needs no node step (a folder has no
        size): a bound claim asks for more than its capacity, so the volume's capacity becomes the request,
        then the claim's status says so."""
        want = claim.spec.resources.requests["storage"]
        have = (claim.status.capacity or {}).get("storage") if claim.status else None
        if have is None or parse_quantity(want) <= parse_quantity(have):
            return
        self.core.patch_persistent_volume(claim.spec.volume_name, {"spec": {"capacity": {"storage": want}}})
        self.core.patch_namespaced_persistent_volume_claim_status(
            claim.metadata.name,
            claim.metadata.namespace,
            {"status": {"capacity": {"storage": want}, "conditions": None, "allocatedResourceStatuses": None}},
        )
        logger.info("provisioner: grew %s/%s to %s", claim.metadata.namespace, claim.metadata.name, want)

    def _delete(self, volume: Any) -> None:
        path = Path(volume.spec.host_path.path)
        if path.parent == self.root:
            shutil.rmtree(path, ignore_errors=True)
        try:
            self.core.delete_persistent_volume(volume.metadata.name)
        except ApiException as exc:
            if exc.status != 404:
                raise
