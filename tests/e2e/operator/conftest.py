"""Operator e2e fixtures: the CRD installed once, and `brokergroup operator` as a real process
watching one test namespace, logged in as its own user so that its API writes can be counted."""

from __future__ import annotations

import base64
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from kubernetes.dynamic import DynamicClient

from brokergroup.local import profiles
from brokergroup.local.controllers import ControllerGroup, running_group
from brokergroup.local.ports import free_ports
from brokergroup.local.processes import LocalProcess, tail
from tests.e2e.kubeenv import ControlPlane, eventually

ROOT = Path(__file__).resolve().parents[3]
CRD = ROOT / "crds" / "brokergroup.io_brokergroups.yaml"
OPERATOR_USER = "brokergroup-operator"
UNREACHABLE_CONTROLLER = "http://127.0.0.1:9"


@pytest.fixture(scope="session")
def crd(control_plane: ControlPlane) -> str:
    control_plane.kubectl("apply", "--server-side", "-f", str(CRD))
    control_plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/brokergroups.brokergroup.io")
    return "brokergroups.brokergroup.io"


@pytest.fixture(scope="session")
def operator_kubeconfig(control_plane: ControlPlane) -> Path:
    # Issue 7 narrows this identity to the chart's RBAC; here it is an admin with its own name.
    return control_plane.user_kubeconfig(OPERATOR_USER, ["system:masters"])


class OperatorProcess:
    """`brokergroup operator` for one namespace, restartable."""

    def __init__(self, kubeconfig: Path, namespace: str, work: Path, controller_url: str) -> None:
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self.controller_url = controller_url
        self.metrics_port, self.liveness_port = free_ports(2)
        self.process = LocalProcess(name="operator", data_dir=work / "operator", log_path=work / "operator.log")
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        self.process.spawn(
            [
                sys.executable,
                "-m",
                "brokergroup.cli",
                "operator",
                "--kubeconfig",
                str(self.kubeconfig),
                "--namespace",
                self.namespace,
                "--metrics-host",
                "127.0.0.1",
                "--metrics-port",
                str(self.metrics_port),
                "--liveness-port",
                str(self.liveness_port),
                "--resync-seconds",
                "2",
                "--controller-url",
                self.controller_url,
                "--set",
                "retry_seconds=0.5",
                "--log-level",
                "INFO",
            ],
            {},
        )
        eventually("operator serves /metrics", self._metrics_up, timeout=30)

    def _metrics_up(self) -> bool:
        if not self.process.running:
            raise AssertionError("operator exited:\n" + tail(self.process.log_path, 40))
        try:
            self.metrics()
        except OSError:
            return False
        return True

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as response:
            return str(response.read().decode())

    def metric(self, name: str, **labels: str) -> float:
        total = 0.0
        for line in self.metrics().splitlines():
            if line.startswith("#") or not line.startswith(name):
                continue
            key, _, value = line.rpartition(" ")
            if key == name or (key.startswith(name + "{") and all(f'{k}="{v}"' in key for k, v in labels.items())):
                total += float(value)
        return total

    def stop(self) -> None:
        self.process.stop(timeout=20)

    def log(self) -> str:
        return tail(self.process.log_path, 60)


@pytest.fixture
def start_operator(
    control_plane: ControlPlane, crd: str, namespace: str, operator_kubeconfig: Path, tmp_path: Path
) -> Iterator[Any]:
    started: list[OperatorProcess] = []

    def start(controller_url: str = UNREACHABLE_CONTROLLER) -> OperatorProcess:
        op = OperatorProcess(operator_kubeconfig, namespace, tmp_path, controller_url)
        op.start()
        started.append(op)
        return op

    yield start
    for op in started:
        op.stop()


@pytest.fixture
def operator(start_operator: Any) -> OperatorProcess:
    op: OperatorProcess = start_operator()
    return op


@pytest.fixture
def dyn(kube_api: kubernetes.client.ApiClient) -> DynamicClient:
    return DynamicClient(kube_api)


ADMIN_TOKEN = "e2e-admin-token"


@pytest.fixture
def controllers(tmp_path: Path) -> Iterator[ControllerGroup]:
    """A real 3-node controller group on 127.0.0.1 standing in for the BrokerGroup's controller pods
    (the test kubelet that runs pods arrives with the operator's part 2)."""
    extra = ["--log-level", "INFO", *profiles.FAST.controller_args()]
    with running_group(tmp_path / "controllers", admin_token=ADMIN_TOKEN, extra_args=extra) as group:
        yield group


def auth_secret(bg: str, namespace: str, password: str, token: str) -> dict[str, Any]:
    def b64(value: str) -> str:
        return base64.b64encode(value.encode()).decode()

    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"{bg}-controller-auth", "namespace": namespace},
        "type": "Opaque",
        "data": {"raftPassword": b64(password), "adminToken": b64(token)},
    }
