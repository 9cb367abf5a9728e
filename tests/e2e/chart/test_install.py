"""`helm install`, `helm upgrade` and `helm uninstall` on the real apiserver, and the chart's RBAC: enough for
the operator (every operator e2e test runs as the chart's ServiceAccount and fails on any refusal), and no
more (verbs the chart does not grant are refused)."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
from kubernetes.dynamic import DynamicClient

from tests.e2e import helmchart
from tests.e2e.helmchart import CHART, InCluster
from tests.e2e.kubeenv import ControlPlane, Kubectl, eventually
from tests.e2e.operator.conftest import UNREACHABLE_CONTROLLER, OperatorProcess
from tests.e2e.operator.helpers import apply, get, manifest, observed, wait_granted

# Every kind the chart can create, namespaced or not, and what the cluster makes from them.
NAMESPACED_KINDS = [
    ("v1", "ServiceAccount"),
    ("v1", "Service"),
    ("v1", "Pod"),
    ("v1", "Secret"),
    ("v1", "ConfigMap"),
    ("apps/v1", "Deployment"),
    ("apps/v1", "ReplicaSet"),
    ("batch/v1", "CronJob"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
]
CLUSTER_KINDS = [
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
]


def release_objects(dyn: DynamicClient, namespace: str, release: str) -> list[tuple[str, str]]:
    """(kind, name) of everything labelled as the release's, plus Helm's own release Secrets."""
    selector = f"app.kubernetes.io/instance={release}"
    found = []
    for api_version, kind in NAMESPACED_KINDS:
        resource = dyn.resources.get(api_version=api_version, kind=kind)
        for item in resource.get(namespace=namespace, label_selector=selector).items:
            found.append((kind, item.metadata.name))
    for api_version, kind in CLUSTER_KINDS:
        for item in dyn.resources.get(api_version=api_version, kind=kind).get(label_selector=selector).items:
            found.append((kind, item.metadata.name))
    secrets_ = dyn.resources.get(api_version="v1", kind="Secret").get(namespace=namespace, label_selector="owner=helm")
    found += [("Secret", s.metadata.name) for s in secrets_.items if s.metadata.labels.get("name") == release]
    return sorted(found)


def test_install_upgrade_uninstall(
    control_plane: ControlPlane, helm: Kubectl, namespace: str, dyn: DynamicClient
) -> None:
    release = f"r{secrets.token_hex(3)}"
    full = f"{release}-brokergroup"
    # Pod Security admission refuses any pod of this namespace that is not "restricted".
    control_plane.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
    helm(
        "install", release, str(CHART), "--namespace", namespace, "--wait=false",
        "--set", "audit.cronJob.enabled=true", "--set", "audit.cronJob.brokerGroup=demo",
    )  # fmt: skip
    assert {k for k in release_objects(dyn, namespace, release) if k[0] != "Secret"} >= {
        ("ServiceAccount", full),
        ("ClusterRole", full),
        ("ClusterRoleBinding", full),
        ("Service", f"{full}-metrics"),
        ("Deployment", full),
    }
    status = helm("status", release, "--namespace", namespace).stdout
    assert "STATUS: deployed" in status and "kubectl apply -n <namespace>" in status  # NOTES.txt
    # kube-controller-manager makes the ReplicaSet and the Pod (Pending: no kubelet in this namespace).
    pod = eventually(
        "the operator pod exists",
        lambda: (
            dyn.resources.get(api_version="v1", kind="Pod")
            .get(namespace=namespace, label_selector=f"app.kubernetes.io/instance={release}")
            .items
        ),
        timeout=30,
    )[0]
    assert pod.spec.serviceAccountName == full
    assert pod.spec.containers[0].securityContext.readOnlyRootFilesystem is True
    # ServiceAccount admission mounted the token (the pod sets automountServiceAccountToken).
    assert any(v.name.startswith("kube-api-access-") for v in pod.spec.volumes)
    # The audit CronJob's pod passes the same admission (a Job made from it now).
    control_plane.kubectl("create", "job", "audit-now", f"--from=cronjob/{full}-audit-demo", "--namespace", namespace)
    audit_pod = eventually(
        "the audit pod exists",
        lambda: (
            dyn.resources.get(api_version="v1", kind="Pod")
            .get(namespace=namespace, label_selector="job-name=audit-now")
            .items
        ),
        timeout=30,
    )[0]
    assert audit_pod.spec.automountServiceAccountToken is False
    control_plane.kubectl("delete", "job", "audit-now", "--namespace", namespace, "--cascade=foreground")

    helm(
        "upgrade", release, str(CHART), "--namespace", namespace, "--wait=false",
        "--set", "operator.resyncSeconds=30", "--set", "watch.scope=Namespaced",
    )  # fmt: skip
    deployment = get(dyn, "apps/v1", "Deployment", namespace, full)
    assert deployment is not None
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["BG_OPERATOR_RESYNC_SECONDS"] == "30"
    assert env["BG_OPERATOR_NAMESPACES"] == namespace
    after = release_objects(dyn, namespace, release)
    assert ("Role", full) in after and ("RoleBinding", full) in after
    assert ("ClusterRole", full) not in after and ("ClusterRoleBinding", full) not in after

    helm("uninstall", release, "--namespace", namespace, "--wait")
    eventually("nothing of the release is left", lambda: not release_objects(dyn, namespace, release), timeout=60)
    assert release_objects(dyn, namespace, release) == []
    # Kept, as docs/install.md says: the CRD (Helm never deletes crds/), so BrokerGroups and their data live on.
    assert get(dyn, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "brokergroups.brokergroup.io")


FORBIDDEN = [
    (["create", "deployment", "x", "--image=busybox"], 'cannot create resource "deployments"'),
    (["run", "x", "--image=busybox", "--restart=Never"], 'cannot create resource "pods"'),
    (["delete", "brokergroup", "anything"], 'cannot delete resource "brokergroups"'),
    (["delete", "persistentvolumeclaims", "data-x-0"], 'cannot delete resource "persistentvolumeclaims"'),
    (["get", "persistentvolumeclaims", "data-x-0"], 'cannot get resource "persistentvolumeclaims"'),
    (["get", "nodes"], 'cannot list resource "nodes"'),
    (["create", "clusterrolebinding", "x", "--clusterrole=cluster-admin", "--user=me"], "clusterrolebindings"),
    (["delete", "crd", "brokergroups.brokergroup.io"], 'cannot delete resource "customresourcedefinitions"'),
    (["create", "token", "default"], 'cannot create resource "serviceaccounts/token"'),
]


@pytest.mark.parametrize(("argv", "message"), FORBIDDEN, ids=[" ".join(a[:2]) for a, _ in FORBIDDEN])
def test_verbs_the_chart_does_not_grant_are_refused(
    argv: list[str],
    message: str,
    control_plane: ControlPlane,
    namespace: str,
    operator_login: InCluster,
    tmp_path: Path,
) -> None:
    kubeconfig = operator_login.kubeconfig(tmp_path / "sa.kubeconfig")
    result = control_plane.kubectl(*argv, "--namespace", namespace, kubeconfig=kubeconfig, check=False)
    assert result.returncode != 0
    assert "Forbidden" in result.stderr or "forbidden" in result.stderr, result.stderr
    assert message in result.stderr, result.stderr
    assert operator_login.user in result.stderr


def test_granted_verbs_are_exactly_the_rules(
    control_plane: ControlPlane, namespace: str, operator_login: InCluster, tmp_path: Path
) -> None:
    """The apiserver's own view of the ServiceAccount's rights in a namespace equals the chart's rules plus
    what every authenticated user may do (self-reviews, discovery)."""
    kubeconfig = operator_login.kubeconfig(tmp_path / "sa.kubeconfig")
    listing = control_plane.kubectl("auth", "can-i", "--list", "--namespace", namespace, kubeconfig=kubeconfig).stdout
    rows = {line.split()[0]: line for line in listing.splitlines()[1:] if line.strip() and not line.startswith(" ")}
    ours = {
        "brokergroups.brokergroup.io", "brokergroups.brokergroup.io/status", "statefulsets.apps", "services",
        "configmaps", "secrets", "poddisruptionbudgets.policy", "networkpolicies.networking.k8s.io", "pods",
        "persistentvolumeclaims",
        "events.events.k8s.io", "serviceaccounts", "roles.rbac.authorization.k8s.io",
        "rolebindings.rbac.authorization.k8s.io",
    }  # fmt: skip
    everyone = {
        "selfsubjectreviews.authentication.k8s.io", "selfsubjectaccessreviews.authorization.k8s.io",
        "selfsubjectrulesreviews.authorization.k8s.io",
    }  # fmt: skip
    resources = {r for r in rows if not r.startswith("/") and r != "Resources"}
    assert resources == ours | everyone, listing


def test_namespaced_scope_operator_runs_with_only_its_roles(
    control_plane: ControlPlane, helm: Kubectl, namespace: str, dyn: DynamicClient, tmp_path: Path
) -> None:
    """A second release in Namespaced scope, watching the test namespace only: its operator (logged in as
    that release's ServiceAccount, in-cluster) reconciles a BrokerGroup there with no refusal, the pods of
    its StatefulSets pass "restricted" Pod Security admission, and it cannot read Secrets in any other
    namespace."""
    home = f"ops-{secrets.token_hex(3)}"
    release = "nsop"
    control_plane.kubectl("create", "namespace", home)
    try:
        helm(
            "install", release, str(CHART), "--namespace", home, "--wait=false",
            "--set", "watch.scope=Namespaced", "--set", f"watch.namespaces={{{namespace}}}",
        )  # fmt: skip
        login = helmchart.service_account_login(control_plane, home, f"{release}-brokergroup", tmp_path / "sa")
        # Every pod the operator's StatefulSets make must pass the "restricted" Pod Security Standard.
        control_plane.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
        # The release's Role and RoleBinding count once the authorizer's cache has them, a moment after helm
        # returned: a refusal before that would be counted below as the chart's.
        wait_granted(control_plane, login.user, "watch", "brokergroups.brokergroup.io", namespace)
        mark = control_plane.mark()
        operator = OperatorProcess(login, namespace, tmp_path, UNREACHABLE_CONTROLLER)
        operator.start()
        try:
            apply(control_plane, namespace, manifest("scoped", {"brokers": {"replicas": 1, "minInSyncReplicas": 1}}))
            eventually("reconciled", lambda: observed(dyn, namespace, "scoped"), timeout=60)
            assert get(dyn, "apps/v1", "StatefulSet", namespace, "scoped-broker-0") is not None
            for pod in ("scoped-controller-0", "scoped-broker-0-0"):
                eventually(f"pod {pod} admitted", lambda p=pod: get(dyn, "v1", "Pod", namespace, p), timeout=30)
        finally:
            operator.stop()
        assert helmchart.denied(control_plane, login.user, mark) == []
        kubeconfig = login.kubeconfig(tmp_path / "nsop.kubeconfig")
        for argv in (["get", "secrets", "--namespace", "default"], ["get", "brokergroups", "--all-namespaces"]):
            result = control_plane.kubectl(*argv, kubeconfig=kubeconfig, check=False)
            assert result.returncode != 0 and "forbidden" in result.stderr, (argv, result.stderr)
    finally:
        helm("uninstall", release, "--namespace", home, check=False)
        control_plane.kubectl("delete", "namespace", home, "--wait=false", check=False)
