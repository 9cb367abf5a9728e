"""The master Service follows elections whatever the operator is doing: running, paused, stopped, uninstalled.

A BrokerGroup of 3 controllers and 1 set x 3 brokers runs on the test kubelet; the brokers reach the API
server as pods do (`podapi`) and label their own pods. The operator is installed by a Helm release of its own
(the chart, in a namespace of its own, its operator process logged in as that release's ServiceAccount), so the
last phase can uninstall it as docs/install.md does: its Deployment, ServiceAccount and ClusterRole are gone,
and the brokers keep their per-group Role. In each phase the master's process is killed with SIGKILL; the old
master restarts (as a slave, or as master when the controller elects it again). Two watches record every pod
change and every EndpointSlice of the master Service (no sampling), and the controller's event feed dates each
election. Checked per phase:

- the master Service never selects a pod that is not the controller's master for longer than one broker
  heartbeat interval (1 s), and selects the new master within 1 s of the election's commit;
- the restarted old master is never Ready while labelled `role=master` unless it is master again;
- a producer writing through the master Service the whole time loses nothing it was acknowledged.

The numbers go to docs/benchmarks.md ("Master Service convergence").
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest
from kubernetes.dynamic import DynamicClient

from tests.e2e import helmchart
from tests.e2e.kubeenv import ControlPlane, Kubectl, eventually
from tests.e2e.kubelet import Kubelet
from tests.e2e.operator import convergence
from tests.e2e.operator.conftest import OperatorProcess
from tests.e2e.operator.convergence import (
    Phase,
    Record,
    consume,
    produce,
    recording,
)
from tests.e2e.operator.helpers import apply, condition, get, manifest
from tests.e2e.operator.podapi import pod_api  # noqa: F401 (a fixture)

BG = "selfl"
STS = f"{BG}-broker-0"
RELEASE = f"{BG}-brokergroup"
"""The release's objects are named after it (it contains the chart's name)."""
HEARTBEAT_INTERVAL = 1.0
"""The brokers' heartbeat interval (controller.heartbeat_interval_ms, default 1000)."""


@pytest.fixture
def release(control_plane: ControlPlane, helm: Kubectl, namespace: str) -> Iterator[str]:
    """The chart installed for this test only, as release `<BG>-brokergroup` in namespace `<namespace>-op`;
    yields that namespace. Uninstalled at the end if the test did not."""
    operator_ns = f"{namespace}-op"
    control_plane.kubectl("create", "namespace", operator_ns)
    helm("install", RELEASE, str(helmchart.CHART), "--namespace", operator_ns, "--wait=false")
    try:
        yield operator_ns
    finally:
        helm("uninstall", RELEASE, "--namespace", operator_ns, "--ignore-not-found", check=False)
        control_plane.kubectl("delete", "namespace", operator_ns, "--wait=false", check=False)


@pytest.fixture
def record(kube_api: kubernetes.client.ApiClient, namespace: str) -> Iterator[Record]:
    with recording(kube_api, namespace, STS) as rec:
        yield rec


@pytest.mark.timeout(900)
def test_master_service_follows_failover_with_the_operator_running_paused_and_stopped(
    control_plane: ControlPlane,
    namespace: str,
    kubelet: Kubelet,
    pod_api: str,  # noqa: F811 (the fixture imported above)
    release: str,
    dyn: DynamicClient,
    record: Record,
    tmp_path: Path,
) -> None:
    login = helmchart.service_account_login(control_plane, release, RELEASE, tmp_path / "operator-sa")
    operator = OperatorProcess(login, namespace, tmp_path, "http://{cluster_ip}:9878")
    mark = control_plane.mark()
    operator.start()
    apply(
        control_plane,
        namespace,
        manifest(
            BG,
            {
                "controller": {"replicas": 3, "heartbeatTimeoutSeconds": 10},
                "brokers": {"sets": 1, "replicas": 3, "replication": "Sync", "minInSyncReplicas": 2},
            },
        ),
    )
    try:
        eventually(
            "Ready (writable)", lambda: condition(dyn, namespace, BG, "Ready").get("status") == "True", timeout=180
        )
    except AssertionError:
        bg = get(dyn, "brokergroup.io/v1alpha1", "BrokerGroup", namespace, BG) or {}
        print("conditions:", (bg.get("status") or {}).get("conditions"))
        for pod in (f"{STS}-{i}" for i in range(3)):
            print(f"--- {pod}\n" + "\n".join(kubelet.logs(pod).splitlines()[-25:]))
        print("--- operator\n" + operator.log())
        raise
    api_ip = str((get(dyn, "v1", "Service", namespace, f"{BG}-controller-api") or {})["spec"]["clusterIP"])
    controller = f"{api_ip}:9878"
    address = f"{(get(dyn, 'v1', 'Service', namespace, f'{STS}-master') or {})['spec']['clusterIP']}:10911"
    for pod in (f"{STS}-{i}" for i in range(3)):
        try:
            eventually(f"{pod} labelled itself", lambda p=pod: f"pod {p}: role label" in kubelet.logs(p), timeout=60)
        except AssertionError:
            print("\n".join(kubelet.logs(pod).splitlines()[-30:]))
            raise

    acked: list[bytes] = []
    stop_producing = threading.Event()
    producer = threading.Thread(
        target=lambda: asyncio.run(produce(address, STS, acked, stop_producing, "m")), daemon=True
    )
    producer.start()
    eventually("the producer is acknowledged", lambda: len(acked) >= 5, timeout=60)

    phases: list[Phase] = []

    def failover(name: str) -> None:
        kill = lambda pod: kubelet.kill(pod, signal.SIGKILL)  # noqa: E731
        phases.append(convergence.failover(name, controller=controller, sts=STS, kill=kill, record=record, acked=acked))

    failover("running")
    control_plane.kubectl("annotate", "-n", namespace, "bg", BG, "brokergroup.io/pause-reconciliation=true")
    eventually("paused", lambda: condition(dyn, namespace, BG, "ReconciliationPaused").get("status") == "True")
    failover("paused")
    operator.stop()
    refused = helmchart.denied(control_plane, login.user, mark)
    assert not refused, "the chart's RBAC refused the operator:\n" + "\n".join(refused)
    failover("stopped")
    control_plane.helm("uninstall", RELEASE, "--namespace", release, "--wait", "--timeout", "120s", timeout=150)
    for kind, where in (("deployment", release), ("serviceaccount", release), ("clusterrole", None)):
        scope = ["--namespace", where] if where else []
        left = control_plane.kubectl("get", kind, RELEASE, *scope, "--ignore-not-found", "-o", "name").stdout
        assert left.strip() == "", f"helm uninstall left {left.strip()}"
    failover("uninstalled")

    stop_producing.set()
    producer.join(timeout=90)
    # An acknowledgement still on its way would be appended after the consumer's read: a false loss.
    assert not producer.is_alive(), "the producer did not stop within 90 s"
    consumed = asyncio.run(consume(address, STS))
    lost = sorted(set(acked) - set(consumed))
    assert lost == [], f"acknowledged and lost: {lost[:5]} ({len(lost)})"
    assert len(consumed) == len(set(consumed)), "duplicates in the log"

    for phase in phases:
        print(
            f"\n{phase.name}: kill -9 {phase.killed} -> Service on {phase.elected} {phase.new_master_seconds:.3f} s "
            f"after the election; longest non-master selection {phase.wrong_seconds:.3f} s"
        )
    print(f"history: {len(acked)} acknowledged, {len(consumed)} consumed, none lost")
    convergence.check_phases(phases, HEARTBEAT_INTERVAL)
