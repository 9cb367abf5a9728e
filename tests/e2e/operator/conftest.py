"""Operator e2e fixtures: `brokergroup operator` as a real process watching one test namespace, logged in
as the Helm chart's ServiceAccount through the in-cluster path (`operator_login`), so that every test runs
with the chart's RBAC, and its API writes and refusals can be counted in the audit log (the `control_plane`
fixture installs the CRD)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import sys
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes.dynamic import DynamicClient

from brokergroup.local import profiles
from brokergroup.local.controllers import ControllerGroup, running_group
from brokergroup.local.ports import free_ports
from brokergroup.local.processes import LocalProcess, tail
from tests.e2e import helmchart
from tests.e2e.helmchart import InCluster
from tests.e2e.kubeenv import ControlPlane, eventually
from tests.e2e.operator import helpers

ROOT = Path(__file__).resolve().parents[3]
UNREACHABLE_CONTROLLER = "http://127.0.0.1:9"


class OperatorProcess:
    """`brokergroup operator` for one namespace, restartable, logged in in-cluster as a ServiceAccount
    (`InCluster`: no kubeconfig, KUBERNETES_SERVICE_HOST and the mounted token)."""

    def __init__(
        self, login: InCluster, namespace: str, work: Path, controller_url: str, resync_seconds: float = 2
    ) -> None:
        self.login = login
        self.namespace = namespace
        self.controller_url = controller_url
        self.resync_seconds = resync_seconds
        """2 by default (fast tests); the chart's default (values.yaml) where a test measures it."""
        self.metrics_port, self.liveness_port = free_ports(2)
        self.process = LocalProcess(name="operator", data_dir=work / "operator", log_path=work / "operator.log")

    def start(self) -> None:
        argv = [
            sys.executable,
            "-m",
            "brokergroup.cli",
            "operator",
            "--namespace",
            self.namespace,
            "--metrics-host",
            "127.0.0.1",
            "--metrics-port",
            str(self.metrics_port),
            "--liveness-port",
            str(self.liveness_port),
            "--resync-seconds",
            f"{self.resync_seconds:g}",
            "--controller-url",
            self.controller_url,
            "--set",
            "retry_seconds=0.5",
            "--log-level",
            "INFO",
        ]
        self.process.spawn(self.login.command(argv), self.login.env())
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


StartOperator = Callable[..., OperatorProcess]


@pytest.fixture
def start_operator(
    control_plane: ControlPlane, namespace: str, operator_login: InCluster, tmp_path: Path
) -> Iterator[StartOperator]:
    """`start_operator(controller_url)`: a running operator for the test's namespace, stopped after the
    test (also when its start failed halfway, and whatever another stop raised). After the test, no request
    of the operator may have been refused: the chart's RBAC is enough for everything the test made it do."""
    mark = control_plane.mark()
    with contextlib.ExitStack() as stack:

        def start(controller_url: str = UNREACHABLE_CONTROLLER, resync_seconds: float = 2) -> OperatorProcess:
            op = OperatorProcess(operator_login, namespace, tmp_path, controller_url, resync_seconds)
            stack.callback(op.stop)
            op.start()
            return op

        yield start
    refused = helmchart.denied(control_plane, operator_login.user, mark)
    assert not refused, "the chart's RBAC refused the operator:\n" + "\n".join(refused)


@pytest.fixture
def operator(start_operator: StartOperator) -> OperatorProcess:
    op: OperatorProcess = start_operator()
    return op


ADMIN_TOKEN = "e2e-admin-token"


@pytest.fixture
def controllers(tmp_path: Path) -> Iterator[ControllerGroup]:
    """A real 3-node controller group on 127.0.0.1 standing in for the BrokerGroup's controller pods
    (the test kubelet that runs pods arrives with the operator's part 2)."""
    extra = ["--log-level", "INFO", *profiles.FAST.controller_args()]
    with running_group(tmp_path / "controllers", admin_token=ADMIN_TOKEN, extra_args=extra) as group:
        yield group


@dataclass(frozen=True)
class ControlledGroup:
    """A BrokerGroup whose operator talks to the real `controllers`, with set 0's three replicas
    registered under their pod DNS names (`helpers.register_set`)."""

    name: str
    operator: OperatorProcess
    ids: dict[int, int]
    """ordinal -> the controller's broker id."""


@pytest.fixture
def controlled_group(
    control_plane: ControlPlane,
    namespace: str,
    start_operator: StartOperator,
    dyn: DynamicClient,
    controllers: ControllerGroup,
) -> Callable[..., ControlledGroup]:
    """`controlled_group(name, master_ordinal=…)`: the Secret with the controllers' password and admin
    token, an operator pointed at them, the BrokerGroup (1 set x 3) reconciled, and the replicas
    registered with `master_ordinal` as master."""

    def make(name: str, *, master_ordinal: int) -> ControlledGroup:
        helpers.apply(control_plane, namespace, auth_secret(name, namespace, controllers.password, ADMIN_TOKEN))
        operator = start_operator(f"http://{controllers.api_addresses[0]}")
        helpers.apply(control_plane, namespace, helpers.manifest(name, {"brokers": {"replicas": 3}}))
        eventually("first reconcile", lambda: helpers.observed(dyn, namespace, name), timeout=60)
        ids = asyncio.run(helpers.register_set(controllers, name, namespace, master_ordinal=master_ordinal))
        return ControlledGroup(name=name, operator=operator, ids=ids)

    return make


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
