"""docs/install.md's uninstall, run literally, in the order written: `helm uninstall`, then the commands that
remove every BrokerGroup, the claims and the CRD. Before the operator stopped using kopf daemons and timers,
the second command hung forever on kopf's finalizer once the operator was gone.

It runs on a control plane of its own: uninstalling the chart and deleting the CRD would pull the ground
from under the session's other tests (the shared `operator_login` token belongs to the chart's
ServiceAccount). The group is installed the documented way (`helm install …`, `kubectl apply -n apps -f
examples/minimal.yaml`) and reconciled by an operator logged in as the chart's ServiceAccount; the chart's
own operator pod does not run (no kubelet in its namespace), which is what `helm uninstall` leaves anyway.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e import helmchart
from tests.e2e.installdocs import run_literally, section_commands
from tests.e2e.kubeenv import PROJECT_CRDS, Binaries, ControlPlane, eventually
from tests.e2e.operator.conftest import UNREACHABLE_CONTROLLER, OperatorProcess
from tests.needs import missing

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def own_plane(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ControlPlane]:
    binaries = Binaries.discover()
    lacking = binaries.missing(helm=True)
    if lacking:
        missing(f"the e2e tier needs {', '.join(str(p) for p in lacking)}: build them with `bash scripts/k8s-bins`")
    monkeypatch.chdir(ROOT)  # the docs' paths (charts/brokergroup, examples/…) are relative to the checkout
    with ControlPlane(binaries, tmp_path / "k8s", crds=PROJECT_CRDS) as plane:
        yield plane


def kinds_left(plane: ControlPlane, selector: str) -> str:
    kinds = "statefulsets,services,configmaps,poddisruptionbudgets,networkpolicies,serviceaccounts,roles,rolebindings"
    return plane.kubectl("get", kinds, "--all-namespaces", "-l", selector, "-o", "name").stdout.strip()


@pytest.mark.timeout(600)
def test_documented_uninstall_removes_everything(own_plane: ControlPlane, tmp_path: Path) -> None:
    plane = own_plane
    install = section_commands("Install")
    run_literally(plane, install[0])  # helm install … --create-namespace (rollout status needs a running pod)
    plane.kubectl("create", "namespace", "apps")
    run_literally(plane, next(line for line in install if "examples/minimal.yaml" in line))
    login = helmchart.service_account_login(plane, "brokergroup-system", "brokergroup", tmp_path / "sa")
    operator = OperatorProcess(login, "apps", tmp_path, UNREACHABLE_CONTROLLER)
    operator.start()
    try:
        eventually(
            "the operator made the group's children",
            lambda: "statefulset.apps/demo-broker-0" in kinds_left(plane, "app.kubernetes.io/instance=demo"),
            timeout=60,
        )
        bg = plane.kubectl("get", "bg", "demo", "-n", "apps", "-o", "jsonpath={.metadata.finalizers}").stdout
        assert bg.strip() in ("", "[]"), f"BrokerGroups must carry no finalizer: {bg}"
    finally:
        operator.stop()  # `helm uninstall` removes the Deployment: no operator runs from here on

    uninstall = section_commands("Uninstall")
    assert uninstall[0].startswith("helm uninstall brokergroup"), uninstall
    assert any(line.startswith("kubectl delete brokergroups") for line in uninstall), uninstall
    for line in uninstall:
        run_literally(plane, line)

    crds = plane.kubectl("get", "crd", "-o", "name").stdout
    assert "brokergroups.brokergroup.io" not in crds
    eventually(
        "the garbage collector removed every child of the group",
        lambda: kinds_left(plane, "app.kubernetes.io/name=brokergroup") == "",
        timeout=120,
    )
    claims = plane.kubectl("get", "pvc", "--all-namespaces", "-l", "app.kubernetes.io/name=brokergroup", "-o", "name")
    assert claims.stdout.strip() == ""
    leftovers = plane.kubectl(
        "get", "all,serviceaccounts,clusterroles,clusterrolebindings", "--all-namespaces", "-l",
        "app.kubernetes.io/instance=brokergroup", "-o", "name",
    )  # fmt: skip
    assert leftovers.stdout.strip() == "", leftovers.stdout
