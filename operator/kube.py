"""The operator's one door to the Kubernetes API (I/O shell around `kubernetes.dynamic`).

Every write goes through `Kube` so that it is counted (`brokergroup_operator_api_writes_total`)
and logged once. Reads return plain dicts.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError

from brokergroup.operator import labels, names
from brokergroup.operator.metrics import OperatorMetrics

logger = logging.getLogger(__name__)

FIELD_MANAGER = "brokergroup-operator"

# Kinds the operator owns and prunes by label. The Secret is never pruned (made once, kept).
PRUNABLE: tuple[tuple[str, str], ...] = (
    ("apps/v1", "StatefulSet"),
    ("v1", "Service"),
    ("v1", "ConfigMap"),
    ("policy/v1", "PodDisruptionBudget"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
    ("v1", "ServiceAccount"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
)


class KubeError(RuntimeError):
    """A Kubernetes API call failed; the message names the object and the call."""


def client_configuration(kubeconfig: Path | None) -> kubernetes.client.Configuration:
    """In-cluster credentials when running in a pod and no kubeconfig is given, else the kubeconfig
    (`kubeconfig`, then $KUBECONFIG, then ~/.kube/config)."""
    configuration = kubernetes.client.Configuration()
    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        kubernetes.config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    else:
        kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(kubeconfig) if kubeconfig else None, client_configuration=configuration
        )
    return configuration


@dataclass(frozen=True)
class Applied:
    """What `Kube.apply` did to one object: 'created', 'updated' or 'unchanged', and the live object."""

    action: str
    obj: dict[str, Any]

    @property
    def wrote(self) -> bool:
        return self.action != "unchanged"


def api_message(exc: ApiException) -> str:
    """The API server's own sentence from a refused call (its Status `message`), else the HTTP reason."""
    try:
        message = json.loads(exc.body or "{}").get("message")
    except (ValueError, AttributeError):
        message = None
    return f"HTTP {exc.status} {message or exc.reason}"


def describe(obj: dict[str, Any]) -> str:
    return f"{obj['kind']} {obj['metadata']['name']}"


class Kube:
    def __init__(self, api_client: kubernetes.client.ApiClient, metrics: OperatorMetrics) -> None:
        self.api_client = api_client
        self.dynamic = DynamicClient(api_client)  # type: ignore[no-untyped-call]
        self.metrics = metrics

    def _resource(self, api_version: str, kind: str) -> Any:
        return self.dynamic.resources.get(api_version=api_version, kind=kind)

    def _wrote(self, verb: str, obj: dict[str, Any]) -> None:
        self.metrics.api_writes.labels(verb, obj.get("kind", "?")).inc()
        logger.info("%s %s/%s", verb, obj.get("kind"), obj.get("metadata", {}).get("name"))

    # -- reads ---------------------------------------------------------------------------------

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = self._resource(api_version, kind).get(name=name, namespace=namespace).to_dict()
        except NotFoundError:
            return None
        return found

    def find(self, api_version: str, kind: str, namespace: str, selector: str) -> list[dict[str, Any]]:
        found = self._resource(api_version, kind).get(namespace=namespace, label_selector=selector)
        return [item.to_dict() for item in found.items]

    # -- writes --------------------------------------------------------------------------------

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        resource = self._resource(obj["apiVersion"], obj["kind"])
        created: dict[str, Any] = resource.create(body=obj, namespace=obj["metadata"]["namespace"]).to_dict()
        self._wrote("create", obj)
        return created

    def apply(self, obj: dict[str, Any], live: dict[str, Any] | None) -> Applied:
        """Create `obj` or bring `live` (the object as last read; None when there is none) to it,
        unless `live` already carries `obj`'s spec hash: then nothing is written, so a restart with
        nothing changed writes nothing."""
        meta = obj["metadata"]
        want = meta.get("annotations", {}).get(labels.SPEC_HASH_ANNOTATION)
        if live is not None:
            have = (live.get("metadata", {}).get("annotations") or {}).get(labels.SPEC_HASH_ANNOTATION)
            if want is not None and have == want:
                return Applied("unchanged", live)
        # Server-side apply creates or updates, and owns exactly the fields in `obj`: a field we
        # stop setting is removed from the live object.
        resource = self._resource(obj["apiVersion"], obj["kind"])
        result: dict[str, Any] = resource.server_side_apply(
            body=obj, namespace=meta["namespace"], field_manager=FIELD_MANAGER, force_conflicts=True
        ).to_dict()
        action = "created" if live is None else "updated"
        self._wrote("create" if live is None else "apply", obj)
        return Applied(action, result)

    def delete(self, obj: dict[str, Any], *, orphan: bool = False) -> bool:
        """Delete `obj`; with `orphan`, its dependents (a StatefulSet's pods) stay, unowned. False when gone."""
        meta = obj["metadata"]
        resource = self._resource(obj["apiVersion"], obj["kind"])
        try:
            resource.delete(
                name=meta["name"], namespace=meta["namespace"], propagation_policy="Orphan" if orphan else "Background"
            )
        except NotFoundError:
            return False
        self._wrote("delete", obj)
        return True

    def merge_patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> dict[str, Any]:
        resource = self._resource(f"{names.GROUP}/{names.VERSION}", names.KIND)
        patched: dict[str, Any] = resource.status.patch(
            body={"status": status},
            name=name,
            namespace=namespace,
            content_type="application/merge-patch+json",
            field_manager=FIELD_MANAGER,
        ).to_dict()
        self._wrote("patch-status", {"kind": names.KIND, "metadata": {"name": name}})
        return patched

    def merge_patch(self, api_version: str, kind: str, namespace: str, name: str, patch: dict[str, Any]) -> bool:
        """A JSON merge patch of the main resource (pod labels, a BrokerGroup's annotations); False when
        the object is gone."""
        resource = self._resource(api_version, kind)
        try:
            resource.patch(
                body=patch,
                name=name,
                namespace=namespace,
                content_type="application/merge-patch+json",
                field_manager=FIELD_MANAGER,
            )
        except NotFoundError:
            return False
        self._wrote("patch", {"kind": kind, "metadata": {"name": name}})
        return True

    def get_brokergroup(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.get(f"{names.GROUP}/{names.VERSION}", names.KIND, namespace, name)

    def owned(self, namespace: str, bg: str, kinds: Iterable[tuple[str, str]] = PRUNABLE) -> list[dict[str, Any]]:
        """Every child of `bg` of the prunable kinds, found by label."""
        out: list[dict[str, Any]] = []
        for api_version, kind in kinds:
            for item in self.find(api_version, kind, namespace, labels.children_selector(bg)):
                item.setdefault("apiVersion", api_version)
                item.setdefault("kind", kind)
                out.append(item)
        return out

    def claims(self, namespace: str, bg: str) -> list[dict[str, Any]]:
        """The PersistentVolumeClaims of `bg`'s pods (claim templates carry the children's labels)."""
        return self.find("v1", "PersistentVolumeClaim", namespace, labels.children_selector(bg))

    def post_event(self, event: dict[str, Any]) -> None:
        """Create a Kubernetes Event (events.k8s.io/v1) built by `brokergroup.operator.events`."""
        self.create(event)
