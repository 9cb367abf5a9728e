"""The e2e control plane is a real one: version, RBAC, controllers, garbage collection, audit log."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from pathlib import Path

import kubernetes
import pytest
import yaml
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from tests.e2e.kubeenv import ADMIN_USER, KCM_USER, PROJECT_CRDS, ControlPlane, eventually

CRD_LIST = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def _pods(api: ApiClient, namespace: str, selector: str) -> list[kubernetes.client.V1Pod]:
    return kubernetes.client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=selector).items


def _as_new_user(
    control_plane: ControlPlane, make_api_client: Callable[[Path], ApiClient], prefix: str, groups: list[str]
) -> tuple[str, kubernetes.client.CoreV1Api]:
    """A fresh user `<prefix>-<hex>` in `groups`, and a CoreV1Api authenticated as that user."""
    user = f"{prefix}-{secrets.token_hex(3)}"
    return user, kubernetes.client.CoreV1Api(make_api_client(control_plane.user_kubeconfig(user, groups)))


def _bind(api: ApiClient, namespace: str, user: str, cluster_role: str) -> None:
    kubernetes.client.RbacAuthorizationV1Api(api).create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": f"{user}-{cluster_role}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        },
    )


def test_apiserver_and_kubectl_report_v1_33(kube_api: ApiClient, kubectl: Callable[..., object]) -> None:
    assert kubernetes.client.VersionApi(kube_api).get_code().git_version.startswith("v1.33.")
    versions = json.loads(kubectl("version", "--output=json").stdout)
    assert versions["serverVersion"]["gitVersion"].startswith("v1.33.")
    assert versions["clientVersion"]["gitVersion"].startswith("v1.33.")


def test_rbac_denies_a_user_until_a_role_binding_allows_it(
    control_plane: ControlPlane,
    kube_api: ApiClient,
    make_api_client: Callable[[Path], ApiClient],
    namespace: str,
) -> None:
    user, as_user = _as_new_user(control_plane, make_api_client, "reader", ["readers"])
    with pytest.raises(ApiException) as denied:
        as_user.list_namespaced_pod(namespace)
    assert denied.value.status == 403

    _bind(kube_api, namespace, user, "view")

    eventually(f"{user} may list pods in {namespace}", lambda: as_user.list_namespaced_pod(namespace) is not None)
    with pytest.raises(ApiException) as elsewhere:
        as_user.list_namespaced_pod("default")
    assert elsewhere.value.status == 403


def test_statefulset_controller_creates_pods_and_garbage_collector_removes_them(
    control_plane: ControlPlane, kube_api: ApiClient, namespace: str
) -> None:
    apps = kubernetes.client.AppsV1Api(kube_api)
    mark = control_plane.mark()
    labels = {"app": "sts-probe"}
    statefulset = apps.create_namespaced_stateful_set(
        namespace,
        {
            "metadata": {"name": "probe"},
            "spec": {
                "replicas": 2,
                "serviceName": "probe",
                # OrderedReady would wait for pod 0 to be Ready, which never happens without a kubelet.
                "podManagementPolicy": "Parallel",
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "main", "image": "registry.invalid/never-pulled:1"}]},
                },
            },
        },
    )

    def two_pods() -> list[kubernetes.client.V1Pod]:
        pods = _pods(kube_api, namespace, "app=sts-probe")
        return pods if len(pods) == 2 else []

    pods = eventually("the StatefulSet controller creates 2 pods", two_pods)
    assert sorted(pod.metadata.name for pod in pods) == ["probe-0", "probe-1"]
    for pod in pods:
        assert [ref.uid for ref in pod.metadata.owner_references] == [statefulset.metadata.uid]
        assert pod.spec.node_name is None
        assert pod.status.phase == "Pending"
        # ServiceAccount admission is on: the default SA and its projected token volume are filled in.
        assert pod.spec.service_account_name == "default"
        assert any(volume.name.startswith("kube-api-access-") for volume in pod.spec.volumes)
    creators = {
        event["user"]["username"]
        for event in control_plane.audit_events(mark)
        if event.get("verb") == "create"
        and event.get("objectRef", {}).get("resource") == "pods"
        and event["objectRef"].get("namespace") == namespace
    }
    assert creators == {KCM_USER}

    apps.delete_namespaced_stateful_set("probe", namespace)

    eventually("the garbage collector deletes the pods", lambda: not _pods(kube_api, namespace, "app=sts-probe"))


def test_namespace_deletion_completes(kube_api: ApiClient, kubectl: Callable[..., object]) -> None:
    core = kubernetes.client.CoreV1Api(kube_api)
    name = f"t-gone-{secrets.token_hex(3)}"
    core.create_namespace({"metadata": {"name": name}})
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "content", "namespace": name}}
    kubectl("apply", "-f", "-", input=json.dumps(configmap))
    assert core.read_namespaced_config_map("content", name).metadata.name == "content"

    core.delete_namespace(name)

    def gone() -> bool:
        try:
            core.read_namespace(name)
        except ApiException as exc:
            return exc.status == 404
        return False

    eventually(f"namespace {name} is deleted", gone)


def test_audit_log_attributes_writes_to_their_user(
    control_plane: ControlPlane,
    kube_api: ApiClient,
    make_api_client: Callable[[Path], ApiClient],
    namespace: str,
) -> None:
    writer, as_writer = _as_new_user(control_plane, make_api_client, "writer", [])
    _bind(kube_api, namespace, writer, "edit")
    eventually(f"{writer} may list configmaps", lambda: as_writer.list_namespaced_config_map(namespace) is not None)
    mark = control_plane.mark()

    as_writer.create_namespaced_config_map(namespace, {"metadata": {"name": "by-writer"}})
    kubernetes.client.CoreV1Api(kube_api).create_namespaced_config_map(namespace, {"metadata": {"name": "by-admin"}})

    def summary(user: str) -> list[tuple[str, str, str, str, int]]:
        return [
            (
                event["verb"],
                event["objectRef"]["resource"],
                event["objectRef"].get("namespace", ""),
                event["objectRef"].get("name", ""),
                event["responseStatus"]["code"],
            )
            for event in control_plane.audit_writes(user, after=mark)
        ]

    assert summary(writer) == [("create", "configmaps", namespace, "by-writer", 201)]
    assert summary(ADMIN_USER) == [("create", "configmaps", namespace, "by-admin", 201)]
    assert summary(f"nobody-{secrets.token_hex(3)}") == []


def test_project_crds_are_installed_before_the_controllers_start(control_plane: ControlPlane) -> None:
    names = [
        doc["metadata"]["name"]
        for path in PROJECT_CRDS
        for doc in yaml.safe_load_all(path.read_text())
        if doc and doc.get("kind") == "CustomResourceDefinition"
    ]
    assert names, "crds/ holds no CustomResourceDefinition"
    served = {crd["metadata"]["name"]: crd for crd in control_plane.get(CRD_LIST)["items"]}
    for name in names:
        conditions = {c["type"]: c["status"] for c in served[name]["status"]["conditions"]}
        assert conditions["Established"] == "True", name
    order = list(control_plane.timings)
    assert order.index("crds") < order.index("kube-controller-manager")
