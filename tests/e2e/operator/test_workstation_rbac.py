"""docs/operator.md's workstation paragraph: a kubeconfig user running the operator needs `get` and `create` on
`services/proxy`. A user with the chart's ClusterRole alone (everything the in-cluster operator needs) is refused
by the API server at the proxy, and the operator's log says so in one line naming the missing grant; once a Role
grants `services/proxy` get and create, the API server lets every call through (the controller pods are Pending
here, no kubelet: the answer is then the proxy's 503, no endpoints, never a 403)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes.dynamic import DynamicClient

from brokergroup.local.processes import LocalProcess, tail
from tests.e2e.helmchart import InCluster
from tests.e2e.kubeenv import ControlPlane, eventually
from tests.e2e.operator.helpers import apply, condition, manifest, wait_granted
from tests.e2e.operator.test_workstation import Workstation

BG = "demo"
CHART_CLUSTER_ROLE = "brokergroup"  # the release's fullname (tests/e2e/conftest.py installs it as `brokergroup`)


@pytest.fixture
def chart_role_user(control_plane: ControlPlane, operator_login: InCluster) -> Iterator[tuple[str, Path]]:
    """A client-certificate user bound to the chart's ClusterRole only."""
    user = f"ws-rbac-{secrets.token_hex(3)}"
    control_plane.kubectl("get", "clusterrole", CHART_CLUSTER_ROLE)  # the chart's, installed by operator_login
    control_plane.kubectl("create", "clusterrolebinding", user, f"--clusterrole={CHART_CLUSTER_ROLE}", f"--user={user}")
    try:
        # Before the operator starts: any 403 it logs must be the missing services/proxy, not a binding not yet seen.
        wait_granted(control_plane, user, "list", "brokergroups.brokergroup.io", "default")
        yield user, control_plane.user_kubeconfig(user)
    finally:
        control_plane.kubectl("delete", "clusterrolebinding", user, "--ignore-not-found")


def proxy_codes(plane: ControlPlane, user: str, after: int) -> list[int]:
    return [
        int(e.get("responseStatus", {}).get("code", 0))
        for e in plane.audit_events(after)
        if e.get("stage") == "ResponseComplete"
        and e.get("user", {}).get("username") == user
        and ((e.get("objectRef") or {}).get("resource"), (e.get("objectRef") or {}).get("subresource"))
        == ("services", "proxy")
    ]


@pytest.mark.timeout(600)
def test_a_workstation_user_needs_get_and_create_on_services_proxy(
    control_plane: ControlPlane,
    namespace: str,
    chart_role_user: tuple[str, Path],
    dyn: DynamicClient,
    tmp_path: Path,
) -> None:
    user, kubeconfig = chart_role_user
    station = Workstation(control_plane, tmp_path / "home")
    station.login(kubeconfig)
    operator: LocalProcess = station.start(
        f"brokergroup operator --kubeconfig ~/.kube/config --namespace {namespace}", tmp_path / "operator.log"
    )
    try:
        apply(control_plane, namespace, manifest(BG, {}))

        def refused_in_the_log() -> bool:
            if not operator.running:
                raise AssertionError("operator exited:\n" + tail(operator.log_path, 40))
            return "HTTP 403 from the Kubernetes API server" in operator.log_path.read_text()

        eventually("the API server's 403 in the operator's log", refused_in_the_log, timeout=120)
        line = next(x for x in operator.log_path.read_text().splitlines() if "HTTP 403 from the Kubernetes" in x)
        assert f'User "{user}" cannot' in line and 'resource "services/proxy"' in line, line
        assert "Traceback" not in operator.log_path.read_text()

        # The status patch follows the log line: poll for it rather than read it once.
        def unreachable() -> tuple[object, object]:
            c = condition(dyn, namespace, BG, "ControllerQuorumAvailable")
            return c.get("status"), c.get("reason")

        eventually(
            "ControllerQuorumAvailable=False (ControllerUnreachable)",
            lambda: unreachable() == ("False", "ControllerUnreachable"),
            timeout=60,
        )

        # The grant the docs name, and nothing else: from then on the API server refuses nothing.
        grant = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "controller-proxy", "namespace": namespace},
            "rules": [{"apiGroups": [""], "resources": ["services/proxy"], "verbs": ["get", "create"]}],
        }
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "controller-proxy", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "controller-proxy"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        }
        apply(control_plane, namespace, yaml.safe_dump(grant))
        apply(control_plane, namespace, yaml.safe_dump(binding))
        # The grant is in force once the authorizer has it, not when `kubectl apply` returned: a call in between
        # would still be refused, and counted below.
        wait_granted(control_plane, user, "create", "services", namespace, subresource="proxy")
        mark = control_plane.mark()

        # (Only the sync-state read, a POST, is tried while no controller answers: `get` is shown passing in
        # test_workstation.py's audit, with a broader login.)
        codes = eventually(
            "services/proxy calls after the grant",
            lambda: (lambda c: c if len(c) >= 3 else None)(proxy_codes(control_plane, user, mark)),
            timeout=60,
            interval=1,
        )
        assert set(codes) == {503}, codes  # the proxy's "no endpoints" (the controller pods are Pending), no 403
        print(f"\nbefore the grant: {line.split(': ', 1)[-1]}\nafter the grant, the API server's answers: {codes}")
    finally:
        operator.stop(timeout=20)
