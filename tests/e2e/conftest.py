"""E2e tier: a real etcd, kube-apiserver and kube-controller-manager, started once per session.

Without the binaries (`bash scripts/k8s-bins` builds them) the tier is skipped, or fails under CI=true.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from tests.e2e import helmchart
from tests.e2e.kubeenv import PROJECT_CRDS, Binaries, ControlPlane, Kubectl, eventually
from tests.e2e.kubelet import Kubelet, missing_requirements
from tests.needs import missing

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # This hook sees the whole session's items, not only this folder's.
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.e2e)
            # The kubernetes client's urllib3 pools sometimes drop an idle TLS socket at teardown.
            item.add_marker(pytest.mark.filterwarnings("ignore:unclosed <ssl.SSLSocket:ResourceWarning"))


def _no_binaries(what: str) -> NoReturn:
    missing(f"the e2e tier needs {what}: build them with `bash scripts/k8s-bins`")


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """The running control plane; its work dir (logs, audit log, kubeconfigs) is kept under pytest's tmp dir.

    The CRDs in crds/ are installed before kube-controller-manager starts, so that its garbage collector
    follows owner references to BrokerGroups from the first test on (a CRD applied later: up to ~40 s)."""
    binaries = Binaries.discover()
    lacking = binaries.missing()
    if lacking:
        _no_binaries(", ".join(str(path) for path in lacking))
    with ControlPlane(binaries, tmp_path_factory.mktemp("k8s"), crds=PROJECT_CRDS) as plane:
        yield plane


@pytest.fixture(scope="session")
def kube_api(control_plane: ControlPlane) -> Iterator[kubernetes.client.ApiClient]:
    """An ApiClient authenticated as admin (system:masters); the global default configuration is untouched."""
    with kubernetes.config.new_client_from_config(config_file=str(control_plane.admin_kubeconfig)) as api:
        yield api


@pytest.fixture(scope="session")
def dyn(kube_api: kubernetes.client.ApiClient) -> DynamicClient:
    """The dynamic client over `kube_api` (discovery is cached, and refreshed when a kind is not found)."""
    return DynamicClient(kube_api)


@pytest.fixture
def make_api_client() -> Iterator[Callable[[Path], kubernetes.client.ApiClient]]:
    """Build an ApiClient from a kubeconfig (e.g. `control_plane.user_kubeconfig(...)`); closed after the test."""
    with contextlib.ExitStack() as made:

        def make(kubeconfig: Path) -> kubernetes.client.ApiClient:
            return made.enter_context(kubernetes.config.new_client_from_config(config_file=str(kubeconfig)))

        yield make


@pytest.fixture
def namespace(kube_api: kubernetes.client.ApiClient) -> Iterator[str]:
    """A fresh namespace `t-<hex>` whose `default` ServiceAccount exists; deleted (not awaited) after the test."""
    core = kubernetes.client.CoreV1Api(kube_api)
    name = f"t-{secrets.token_hex(4)}"
    core.create_namespace({"metadata": {"name": name, "labels": {"brokergroup.test/e2e": "true"}}})
    try:
        # ServiceAccount admission rejects pods until the serviceaccount controller has made `default`.
        eventually(
            f"ServiceAccount {name}/default exists",
            lambda: core.list_namespaced_service_account(name, field_selector="metadata.name=default").items,
            timeout=30,
        )
        yield name
    finally:
        try:
            core.delete_namespace(name)
        except ApiException as exc:
            if exc.status != 404:
                raise


@pytest.fixture
def kubectl(control_plane: ControlPlane) -> Kubectl:
    """`kubectl("apply", "-f", "-", input=yaml)`: the cached kubectl as admin; raises on failure unless
    `check=False`; `kubeconfig=` runs it as another user."""
    return control_plane.kubectl


@pytest.fixture(scope="session")
def helm(control_plane: ControlPlane) -> Kubectl:
    """`helm("install", ...)` against the control plane as admin; skipped (failed under CI=true) without helm."""
    if control_plane.binaries.missing(helm=True):
        _no_binaries(str(control_plane.binaries.helm))
    return control_plane.helm


@pytest.fixture
def kubelet(control_plane: ControlPlane, namespace: str, tmp_path: Path) -> Iterator[Kubelet]:
    """The test kubelet (tests/e2e/kubelet) running the pods of `namespace` as local processes, each in its own
    network namespace on 10.88.0.0/16, with a service proxy for ClusterIPs. Stopped after the test, even a
    failed one: every pod process is killed, the pods' objects are deleted, and every network namespace,
    link, nftables table and hosts file it made is removed. Needs root, `ip` and `nft` (skipped without them,
    failed under CI=true)."""
    lacking = missing_requirements()
    if lacking:
        missing("the test kubelet needs " + ", ".join(lacking))
    with Kubelet(control_plane.admin_kubeconfig, namespace, tmp_path / "kubelet") as running:
        yield running


OPERATOR_NAMESPACE = "brokergroup-system"
OPERATOR_RELEASE = "brokergroup"


@pytest.fixture(scope="session")
def operator_login(
    control_plane: ControlPlane, helm: Kubectl, tmp_path_factory: pytest.TempPathFactory
) -> helmchart.InCluster:
    """The chart installed once (`helm install brokergroup charts/brokergroup -n brokergroup-system`, cluster
    scope) and a token of its ServiceAccount where a pod has it: every operator in the e2e tier runs with the
    chart's RBAC and nothing more. The chart's Deployment stays Pending (no kubelet in that namespace); the
    tests run the operator process themselves, logged in exactly as that pod would be."""
    control_plane.kubectl("create", "namespace", OPERATOR_NAMESPACE)
    helm("install", OPERATOR_RELEASE, str(helmchart.CHART), "--namespace", OPERATOR_NAMESPACE, "--wait=false")
    # The release name contains the chart's name, so every object, the ServiceAccount included, is named after it.
    return helmchart.service_account_login(
        control_plane, OPERATOR_NAMESPACE, OPERATOR_RELEASE, tmp_path_factory.mktemp("operator-sa")
    )
