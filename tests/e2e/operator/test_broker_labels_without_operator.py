"""With the operator gone, the brokers alone keep the master Service on the elected master.

The operator makes a BrokerGroup's objects (the StatefulSet's pods, the master Service, the brokers'
ServiceAccount, Role and RoleBinding) and is stopped. Real brokers then run as local processes on 127.0.0.1,
one per pod and logged in exactly as that pod would be: its ServiceAccount token at the in-cluster path and
`KUBERNETES_SERVICE_HOST`, so every label patch goes through the real API server with the group's Role (and
nothing else). A small prober stands in for the kubelet's readiness: it reports each pod Ready, with a fixed
pod IP, exactly while its broker's `/readyz` says so (a killed broker is not Ready at once, as a kubelet sees
the container die). kube-controller-manager's EndpointSlice controller then does what it does on any cluster.

The master is killed with SIGKILL twice and restarted as soon as it is seen down (the controller may elect it
again: it is the most up-to-date replica). Checked, from watches of
the pods and of the master Service's EndpointSlices against the controller's elections: the Service never
selects a non-master for longer than one heartbeat interval, selects the new master within 1 s of the
election's commit, and the restarted old master is never Ready with `role=master`.

`test_master_service_without_operator.py` runs the same on the test kubelet, with the operator running,
paused and stopped, and a producer's history; this one needs no network namespaces.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest
from kubernetes.dynamic import DynamicClient

from brokergroup.local import profiles
from brokergroup.local.brokers import BrokerProcess, BrokerSet
from brokergroup.local.controllers import ControllerGroup
from tests.e2e import helmchart
from tests.e2e.helmchart import InCluster
from tests.e2e.kubeenv import ControlPlane, eventually
from tests.e2e.operator.conftest import StartOperator
from tests.e2e.operator.convergence import (
    Phase,
    Record,
    came_back,
    check_phases,
    elections,
    judge,
    recording,
    restarted_as_master,
    service_caught_up,
)
from tests.e2e.operator.helpers import apply, get, manifest

BG = "alone"
STS = f"{BG}-broker-0"
HEARTBEAT_INTERVAL = 1.0


class PodBrokers(BrokerSet):
    """A BrokerSet whose replica i runs as pod `<set>-i`: in-cluster login as the pod's ServiceAccount."""

    def __init__(self, base: Path, login: InCluster, namespace: str, controllers: list[str]) -> None:
        super().__init__(
            base,
            controllers=controllers,
            broker_name=STS,
            cluster_name=BG,
            extra_args=["--log-level", "INFO", *profiles.FAST.broker_args()],
        )
        self.login = login
        self.namespace = namespace

    def start(self, index: int) -> None:
        node = self.nodes[index]
        argv = [
            *self.command(node),
            "--kubernetes-pod-labels",
            "--pod-name",
            node.name,
            "--pod-namespace",
            self.namespace,
        ]
        node.spawn(self.login.command(argv), self.login.env())

    def pod_of(self, address: str) -> str | None:
        return next((n.name for n in self.nodes if n.api == address), None)


def ready(node: BrokerProcess) -> bool:
    if not node.running:
        return False
    try:
        with urllib.request.urlopen(f"http://{node.api}/readyz", timeout=1) as response:
            return bool(json.loads(response.read()).get("ready"))
    except (OSError, ValueError):
        return False


def probe(core: kubernetes.client.CoreV1Api, namespace: str, brokers: PodBrokers, stop: threading.Event) -> None:
    """The kubelet's part: each pod Running with a fixed IP, Ready exactly while its broker's /readyz says so."""
    reported: dict[str, bool] = {}
    while not stop.wait(0.1):
        for index, node in enumerate(brokers.nodes):
            now = ready(node)
            if reported.get(node.name) == now:
                continue
            flag = "True" if now else "False"
            status = {
                "phase": "Running",
                "podIP": f"10.89.0.{10 + index}",
                "podIPs": [{"ip": f"10.89.0.{10 + index}"}],
                "conditions": [{"type": t, "status": flag} for t in ("Ready", "ContainersReady")],
            }
            core.patch_namespaced_pod_status(node.name, namespace, {"status": status})
            reported[node.name] = now


@pytest.fixture
def node(kube_api: kubernetes.client.ApiClient, namespace: str) -> Iterator[str]:
    """A Node for the pods (the EndpointSlice controller skips pods whose Node does not exist); nothing runs it."""
    core = kubernetes.client.CoreV1Api(kube_api)
    name = f"{namespace}-node"
    core.create_node({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}})
    yield name
    core.delete_node(name)


def bind_to_a_node(core: kubernetes.client.CoreV1Api, namespace: str, node: str) -> None:
    """The scheduler's part: bind the set's pods to `node` (pods/binding, as the test kubelet does)."""
    for i in range(3):
        binding = {"metadata": {"name": f"{STS}-{i}"}, "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        core.create_namespaced_pod_binding(f"{STS}-{i}", namespace, binding, _preload_content=False)


@pytest.fixture
def record(kube_api: kubernetes.client.ApiClient, namespace: str) -> Iterator[Record]:
    with recording(kube_api, namespace, STS) as rec:
        yield rec


def failover(name: str, brokers: PodBrokers, controllers: ControllerGroup, record: Record) -> Phase:
    """kill -9 of the master, restarted as soon as it is seen down; judged against the controller's elections."""
    history = elections(controllers.api_addresses, STS, brokers.pod_of)
    killed = history[-1][1]
    index = next(i for i, n in enumerate(brokers.nodes) if n.name == killed)
    killed_at = time.time()
    brokers.kill(index)
    eventually(f"{name}: {killed} seen not Ready", lambda: not ready(brokers.nodes[index]), timeout=10)
    brokers.start(index)

    def elected() -> bool:
        after = elections(controllers.api_addresses, STS, brokers.pod_of)
        return bool(after) and after[-1][0] > killed_at  # any replica, the restarted one included

    eventually(f"{name}: a new master elected", elected, timeout=60)
    eventually(f"{name}: {killed} back and Ready", lambda: came_back(record, killed, killed_at), timeout=60)
    eventually(
        f"{name}: the watch saw the master Service select the new master",
        lambda: service_caught_up(record, elections(controllers.api_addresses, STS, brokers.pod_of), killed_at),
        timeout=60,
        interval=0.5,
    )
    history = elections(controllers.api_addresses, STS, brokers.pod_of)
    stale = restarted_as_master(record, history, killed, killed_at)
    assert stale == [], f"{name}: {killed} was Ready with role=master while not the master: {stale[:3]}"
    return judge(f"operator gone ({name})", record, history, killed, killed_at, time.time())


@pytest.mark.timeout(600)
def test_brokers_keep_the_master_service_on_the_master_with_no_operator(
    control_plane: ControlPlane,
    namespace: str,
    start_operator: StartOperator,
    controllers: ControllerGroup,
    dyn: DynamicClient,
    kube_api: kubernetes.client.ApiClient,
    record: Record,
    node: str,
    tmp_path: Path,
) -> None:
    operator = start_operator()
    apply(control_plane, namespace, manifest(BG, {"brokers": {"sets": 1, "replicas": 3}}))
    for i in range(3):
        eventually(f"pod {STS}-{i} exists", lambda i=i: get(dyn, "v1", "Pod", namespace, f"{STS}-{i}"), timeout=60)
    eventually(
        "the brokers' RoleBinding",
        lambda: get(dyn, "rbac.authorization.k8s.io/v1", "RoleBinding", namespace, f"{BG}-broker"),
    )
    operator.stop()  # from here on no operator runs

    core = kubernetes.client.CoreV1Api(kube_api)
    bind_to_a_node(core, namespace, node)
    login = helmchart.service_account_login(control_plane, namespace, f"{BG}-broker", tmp_path / "broker-sa")
    brokers = PodBrokers(tmp_path / "brokers", login, namespace, controllers.api_addresses)
    stop = threading.Event()
    prober = threading.Thread(target=probe, args=(core, namespace, brokers, stop), daemon=True)
    brokers.start_all()
    prober.start()
    phases: list[Phase] = []
    try:
        master = asyncio.run(brokers.master(timeout=60))
        eventually(
            "the master Service selects the elected master",
            lambda: record.selected and record.selected[-1][1] == frozenset({brokers.nodes[master].name}),
            timeout=30,
        )
        for round_ in ("first", "second"):
            phases.append(failover(round_, brokers, controllers, record))
    except AssertionError:
        print("selected:", record.selected[-5:], "\npods:", record.pods[-10:])
        for node in brokers.nodes:
            print(f"--- {node.name}\n" + "\n".join(node.log_path.read_text().splitlines()[-20:]))
        raise
    finally:
        stop.set()
        prober.join(timeout=5)
        brokers.stop_all()
    for phase in phases:
        print(
            f"\n{phase.name}: kill -9 {phase.killed} -> Service on {phase.elected} {phase.new_master_seconds:.3f} s "
            f"after the election; longest non-master selection {phase.wrong_seconds:.3f} s"
        )
    check_phases(phases, HEARTBEAT_INTERVAL)
