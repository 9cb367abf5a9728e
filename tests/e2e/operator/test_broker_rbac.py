"""The broker pods' identity, as the operator makes it: the API server's own SubjectAccessReviews say the
ServiceAccount `<bg>-broker` may patch the group's broker pods and nothing else (other pods, other verbs,
status, Secrets, other namespaces: all refused). The operator creates the Role and its binding with the chart's
RBAC (the `start_operator` fixture fails on any refusal), without `escalate` or `bind`."""

from __future__ import annotations

import kubernetes
import pytest
from kubernetes.dynamic import DynamicClient

from tests.e2e.kubeenv import ControlPlane, eventually
from tests.e2e.operator.conftest import StartOperator
from tests.e2e.operator.helpers import apply, get, manifest

BG = "rbac"


def allowed(
    api: kubernetes.client.ApiClient,
    namespace: str,
    *,
    verb: str,
    resource: str,
    name: str = "",
    subresource: str = "",
    in_namespace: str | None = None,
) -> bool:
    user = f"system:serviceaccount:{namespace}:{BG}-broker"
    review = kubernetes.client.AuthorizationV1Api(api).create_subject_access_review(
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user,
                "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"],
                "resourceAttributes": {
                    "namespace": in_namespace or namespace,
                    "verb": verb,
                    "group": "",
                    "resource": resource,
                    "name": name,
                    "subresource": subresource,
                },
            },
        }
    )
    return bool(review.status.allowed)


@pytest.mark.timeout(180)
def test_the_broker_identity_may_patch_its_groups_broker_pods_and_nothing_else(
    control_plane: ControlPlane,
    namespace: str,
    start_operator: StartOperator,
    dyn: DynamicClient,
    kube_api: kubernetes.client.ApiClient,
) -> None:
    start_operator()
    apply(control_plane, namespace, manifest(BG, {"brokers": {"sets": 2, "replicas": 2}}))
    eventually(
        "the broker RoleBinding exists",
        lambda: get(dyn, "rbac.authorization.k8s.io/v1", "RoleBinding", namespace, f"{BG}-broker"),
        timeout=60,
    )
    account = get(dyn, "v1", "ServiceAccount", namespace, f"{BG}-broker")
    assert account is not None
    # The operator creates the RoleBinding before the second set's StatefulSet.
    sts = eventually(
        "the second set's StatefulSet exists",
        lambda: get(dyn, "apps/v1", "StatefulSet", namespace, f"{BG}-broker-1"),
        timeout=60,
    )
    assert sts["spec"]["template"]["spec"]["serviceAccountName"] == f"{BG}-broker"

    # RBAC takes effect once the API server's authorizer cache (a watch) has the Role and the RoleBinding, a
    # moment after they exist: ask until it answers yes, then ask for everything else.
    for pod in (f"{BG}-broker-0-0", f"{BG}-broker-0-1", f"{BG}-broker-1-0", f"{BG}-broker-1-1"):
        eventually(
            f"{pod} may patch itself",
            lambda pod=pod: allowed(kube_api, namespace, verb="patch", resource="pods", name=pod),
            timeout=30,
        )

    refused = [
        {"verb": "patch", "resource": "pods", "name": f"{BG}-controller-0"},
        {"verb": "patch", "resource": "pods", "name": f"{BG}-broker-0-2"},  # beyond the spec's replicas
        {"verb": "patch", "resource": "pods", "name": "some-other-pod"},
        {"verb": "patch", "resource": "pods", "name": f"{BG}-broker-0-0", "in_namespace": "default"},
        {"verb": "patch", "resource": "pods", "name": f"{BG}-broker-0-0", "subresource": "status"},
        {"verb": "get", "resource": "pods", "name": f"{BG}-broker-0-0"},
        {"verb": "list", "resource": "pods"},
        {"verb": "watch", "resource": "pods"},
        {"verb": "update", "resource": "pods", "name": f"{BG}-broker-0-0"},
        {"verb": "delete", "resource": "pods", "name": f"{BG}-broker-0-0"},
        {"verb": "create", "resource": "pods"},
        {"verb": "get", "resource": "secrets", "name": f"{BG}-controller-auth"},
        {"verb": "list", "resource": "secrets"},
        {"verb": "patch", "resource": "services", "name": f"{BG}-broker-0-master"},
        {"verb": "patch", "resource": "serviceaccounts", "name": f"{BG}-broker"},
    ]
    granted = [r for r in refused if allowed(kube_api, namespace, **r)]  # type: ignore[arg-type]
    assert granted == [], granted

    # Growing the group grows the Role: a new pod may patch its own label.
    dyn.resources.get(api_version="brokergroup.io/v1alpha1", kind="BrokerGroup").patch(
        name=BG,
        namespace=namespace,
        body={"spec": {"brokers": {"replicas": 3}}},
        content_type="application/merge-patch+json",
    )
    eventually(
        "the Role covers the new pods",
        lambda: allowed(kube_api, namespace, verb="patch", resource="pods", name=f"{BG}-broker-1-2"),
        timeout=60,
    )
