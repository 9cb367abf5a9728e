"""The operator as users run it, on the real node: `helm install` of the chart (the operator is a pod of the
runtime image under the chart's ServiceAccount), `examples/minimal.yaml` in a namespace that enforces the
`restricted` Pod Security Standard, then failover by SIGKILL of the master's container, a forced election,
a master-last roll, scale, pause, delete and uninstall. The tests run in file order on one group.

Timings are printed (`-s`); docs/benchmarks.md ("Operator on a real node") records them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import shlex
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import kubernetes
import pytest
import yaml
from kubernetes.dynamic import DynamicClient

from brokergroup.broker.client import MasterFinder, Producer
from tests.e2e.helmchart import CHART
from tests.e2e.installdocs import run_literally, section_commands, watch_literally
from tests.e2e.kubeenv import ControlPlane, eventually
from tests.e2e.operator import convergence
from tests.e2e.operator.convergence import (
    Phase,
    consume,
    produce,
    recording,
)
from tests.e2e.operator.helpers import apply, brokergroup, condition, get, manifest, patch_spec
from tests.e2e.operator.test_kubectl_plugin import Plugin, doc_commands
from tests.e2e.operator.test_kubectl_runbooks import run_block, runbooks
from tests.e2e.realnode.node import ROOT, RealNode

RELEASE = "brokergroup"
OPERATOR_NS = "brokergroup-system"
NS = "apps"
"""The namespace of docs/install.md's Install block."""
BG = "demo"
SET = f"{BG}-broker-0"
ROLE = "brokergroup.io/role"
SET_LABEL = "brokergroup.io/broker-set"
READY_TIMEOUT = 300
HEARTBEAT_INTERVAL = 1.0
"""The brokers' heartbeat interval (controller.heartbeat_interval_ms, default 1000)."""


def plane(node: RealNode) -> ControlPlane:
    assert node.control_plane is not None
    return node.control_plane


def phase(dyn: DynamicClient) -> str | None:
    bg = get(dyn, "brokergroup.io/v1alpha1", "BrokerGroup", NS, BG)
    return ((bg or {}).get("status") or {}).get("phase")


def pods(dyn: DynamicClient, selector: str, namespace: str = NS) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = (
        dyn.resources.get(api_version="v1", kind="Pod").get(namespace=namespace, label_selector=selector).to_dict()
    )["items"]
    return found


def ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return pod["metadata"].get("deletionTimestamp") is None and any(
        c["type"] == "Ready" and c["status"] == "True" for c in conditions
    )


def master_pod(dyn: DynamicClient) -> dict[str, Any] | None:
    masters = [p for p in pods(dyn, f"{SET_LABEL}={SET},{ROLE}=master") if ready(p)]
    return masters[0] if len(masters) == 1 else None


def master_service_ips(dyn: DynamicClient) -> set[str]:
    """Ready endpoint addresses of the set's master Service."""
    slices = (
        dyn.resources.get(api_version="discovery.k8s.io/v1", kind="EndpointSlice")
        .get(namespace=NS, label_selector=f"kubernetes.io/service-name={SET}-master")
        .to_dict()["items"]
    )
    return {
        address
        for s in slices
        for endpoint in s.get("endpoints") or []
        if (endpoint.get("conditions") or {}).get("ready")
        for address in endpoint["addresses"]
    }


def paused_reconciles(node: RealNode, dyn: DynamicClient) -> float:
    """brokergroup_operator_reconciles_total{result="paused"} from the operator pod's /metrics, through the
    apiserver's pod proxy."""
    (operator,) = pods(dyn, "app.kubernetes.io/name=brokergroup", OPERATOR_NS)
    text = (
        plane(node)
        .kubectl(
            "get", "--raw", f"/api/v1/namespaces/{OPERATOR_NS}/pods/{operator['metadata']['name']}:8080/proxy/metrics"
        )
        .stdout
    )
    return sum(
        float(line.rpartition(" ")[2])
        for line in text.splitlines()
        if line.startswith("brokergroup_operator_reconciles_total{") and 'result="paused"' in line
    )


def wait_ready(dyn: DynamicClient, replicas: int = 3) -> None:
    def all_ready() -> bool:
        return (
            phase(dyn) == "Ready"
            and len([p for p in pods(dyn, f"{SET_LABEL}={SET}") if ready(p)]) == replicas
            and master_pod(dyn) is not None
        )

    eventually("BrokerGroup demo Ready with every broker Ready and one master", all_ready, timeout=READY_TIMEOUT)


@pytest.fixture(scope="module")
def release(real_node: RealNode) -> Iterator[float]:
    """docs/install.md's Install block, its first two lines run literally (`helm install …`, `kubectl rollout
    status …`): the seconds until the operator's Deployment rolled out."""
    cp = plane(real_node)
    install = section_commands("Install")
    assert install[0].startswith(f"helm install {RELEASE} ") and f"--namespace {OPERATOR_NS}" in install[0], install
    started = time.monotonic()
    with contextlib.chdir(ROOT):  # the docs' paths are relative to the checkout
        run_literally(cp, install[0], timeout=330)
        run_literally(cp, install[1], timeout=330)
    yield time.monotonic() - started
    cp.helm("uninstall", RELEASE, "--namespace", OPERATOR_NS, "--wait", check=False)


@pytest.fixture(scope="module")
def group(real_node: RealNode, release: float, node_dyn: DynamicClient) -> float:
    """The rest of docs/install.md's Install block, literally: `kubectl create namespace apps`,
    `kubectl apply -n apps -f examples/minimal.yaml`, then `kubectl get brokergroups -n apps -w` read until it
    shows the group Ready. One step of the test's own between the first two: the namespace enforces the
    `restricted` Pod Security Standard. Returns the seconds from the apply to Ready."""
    cp = plane(real_node)
    create, apply, watch = section_commands("Install")[2:5]
    with contextlib.chdir(ROOT):
        run_literally(cp, create)
        cp.kubectl("label", "namespace", NS, "pod-security.kubernetes.io/enforce=restricted")
        started = time.monotonic()
        run_literally(cp, apply)
        seen = watch_literally(cp, watch, lambda line: line.split()[:2] == [BG, "True"], timeout=READY_TIMEOUT)
    print("\n" + "\n".join(seen))
    wait_ready(node_dyn)
    return time.monotonic() - started


def test_the_chart_runs_the_operator_as_a_pod_of_the_runtime_image(
    real_node: RealNode, release: float, node_dyn: DynamicClient
) -> None:
    print(f"\nnode start: {real_node.timings}\nhelm install --wait: {release:.1f} s")
    (operator,) = pods(node_dyn, "app.kubernetes.io/name=brokergroup", OPERATOR_NS)
    assert ready(operator)
    assert operator["spec"]["serviceAccountName"] == RELEASE
    container = operator["status"]["containerStatuses"][0]
    assert container["image"] == "ghcr.io/brokergroup/brokergroup:0.1.0" and container["restartCount"] == 0
    uid = plane(real_node).kubectl("exec", "-n", OPERATOR_NS, operator["metadata"]["name"], "--", "id", "-u").stdout
    assert uid.strip() == "10001"


def test_minimal_example_is_ready_under_restricted_pod_security(
    real_node: RealNode, group: float, node_dyn: DynamicClient
) -> None:
    print(f"\nexamples/minimal.yaml applied -> phase Ready: {group:.1f} s")
    cp = plane(real_node)
    broker = master_pod(node_dyn)
    assert broker is not None
    name = broker["metadata"]["name"]
    # What the runtime applied, seen from inside the container.
    probe = "id -u; grep CapEff /proc/self/status; grep Seccomp: /proc/self/status; touch /x 2>&1 || true"
    seen = cp.kubectl("exec", "-n", NS, name, "--", "sh", "-c", probe).stdout
    assert seen.splitlines()[0] == "10001", seen
    assert "CapEff:\t0000000000000000" in seen, seen
    assert "Seccomp:\t2" in seen, seen  # RuntimeDefault: a filter is installed
    assert "Read-only file system" in seen, seen
    # The namespace enforces `restricted` for real: a root pod is refused at admission.
    refused = cp.kubectl(
        "run",
        "-n",
        NS,
        "root",
        "--image=localhost/brokergroup-base:bookworm",
        "--image-pull-policy=Never",
        "--restart=Never",
        "--",
        "sleep",
        "60",
        check=False,
    )
    assert refused.returncode != 0 and "violates PodSecurity" in refused.stderr, refused.stderr


def test_kill_9_of_the_master_container_moves_the_master_service(
    real_node: RealNode, group: float, node_dyn: DynamicClient
) -> None:
    old = master_pod(node_dyn)
    assert old is not None
    old_ip = old["status"]["podIP"]
    eventually("the master Service selects the master", lambda: master_service_ips(node_dyn) == {old_ip}, timeout=60)
    container = old["spec"]["containers"][0]["name"]
    started = time.monotonic()
    real_node.kill_container(NS, old["metadata"]["name"], container)

    def elsewhere() -> set[str] | None:
        ips = master_service_ips(node_dyn)
        return ips if ips and old_ip not in ips else None

    moved = eventually(
        "the master Service selects another pod",
        elsewhere,
        timeout=120,
        interval=0.05,
    )
    print(f"\nkill -9 of {old['metadata']['name']} -> master Service on {moved}: {time.monotonic() - started:.1f} s")
    assert len(moved) == 1
    wait_ready(node_dyn)  # the killed container restarts and rejoins as a slave


def test_elect_master_annotation_elects_the_named_slave(
    real_node: RealNode, group: float, node_dyn: DynamicClient
) -> None:
    wait_ready(node_dyn)

    def in_sync_slave() -> str | None:
        """A slave the controller may elect: alive and in the sync-state-set (the one killed just before may
        still be catching up), as the operator's status reports it. The status is read only once it names the
        master that the pod labels name: right after the kill above, it may still show the new master as a
        slave for a moment."""
        entry = next(s for s in brokergroup(node_dyn, NS, BG)["status"]["brokerSets"] if s["name"] == SET)
        labelled = master_pod(node_dyn)
        if labelled is None or entry.get("masterPod") != labelled["metadata"]["name"]:
            return None
        names = [
            r["pod"]
            for r in entry.get("replicas") or []
            if r["role"] == "slave" and r["inSync"] and r["alive"] and r["pod"] != entry["masterPod"]
        ]
        return names[0] if names else None

    slave = eventually("a slave in the sync-state-set", in_sync_slave, timeout=120)
    started = time.monotonic()
    plane(real_node).kubectl("annotate", "-n", NS, "bg", BG, f"brokergroup.io/elect-master={slave}")
    eventually(
        f"{slave} is the labelled master",
        lambda: (m := master_pod(node_dyn)) is not None and m["metadata"]["name"] == slave,
        timeout=120,
    )
    print(f"\nelect-master={slave} -> labelled master: {time.monotonic() - started:.1f} s")

    def recorded() -> dict[str, Any] | None:
        entry = next(s for s in brokergroup(node_dyn, NS, BG)["status"]["brokerSets"] if s["name"] == SET)
        election: dict[str, Any] | None = entry.get("lastElection")
        return election if election and election.get("target") == slave else None

    election = eventually("status.brokerSets[0].lastElection names the target", recorded, timeout=60)
    assert election["result"] == "Elected", election


def test_a_resources_change_rolls_the_set_master_last(
    real_node: RealNode, group: float, node_dyn: DynamicClient
) -> None:
    wait_ready(node_dyn)
    master = master_pod(node_dyn)
    assert master is not None
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods(node_dyn, f"{SET_LABEL}={SET}")}
    replaced: list[str] = []

    def rolled() -> bool:
        for pod in pods(node_dyn, f"{SET_LABEL}={SET}"):
            name = pod["metadata"]["name"]
            if pod["metadata"]["uid"] != uids[name] and name not in replaced:
                replaced.append(name)
        return len(replaced) == len(uids)

    started = time.monotonic()
    patch_spec(node_dyn, NS, BG, {"brokers": {"resources": {"requests": {"cpu": "60m", "memory": "96Mi"}}}})
    eventually("every broker pod re-created", rolled, timeout=READY_TIMEOUT, interval=0.2)
    wait_ready(node_dyn)
    print(f"\nmaster-last roll of 3 replicas: {time.monotonic() - started:.1f} s (order {replaced})")
    assert replaced[-1] == master["metadata"]["name"], replaced


def test_scale_up_and_pause(real_node: RealNode, group: float, node_dyn: DynamicClient) -> None:
    cp = plane(real_node)
    wait_ready(node_dyn)
    patch_spec(node_dyn, NS, BG, {"brokers": {"replicas": 4}})
    wait_ready(node_dyn, replicas=4)
    cp.kubectl("annotate", "-n", NS, "bg", BG, "brokergroup.io/pause-reconciliation=true")
    eventually("phase Paused", lambda: phase(node_dyn) == "Paused", timeout=60)
    before = paused_reconciles(real_node, node_dyn)
    patch_spec(node_dyn, NS, BG, {"brokers": {"replicas": 3}})
    # The operator handles the change at once (a paused reconcile), and must leave the StatefulSet alone.
    eventually("a paused reconcile of the change", lambda: paused_reconciles(real_node, node_dyn) > before, timeout=60)
    sts = get(node_dyn, "apps/v1", "StatefulSet", NS, SET)
    assert sts is not None and sts["spec"]["replicas"] == 4
    cp.kubectl("annotate", "-n", NS, "bg", BG, "brokergroup.io/pause-reconciliation-")
    wait_ready(node_dyn, replicas=3)


def operator_pods(dyn: DynamicClient) -> list[dict[str, Any]]:
    return pods(dyn, "app.kubernetes.io/name=brokergroup", OPERATOR_NS)


@pytest.mark.timeout(1500)
def test_master_service_follows_failover_with_the_operator_running_paused_stopped_and_uninstalled(
    real_node: RealNode, group: float, node_api: kubernetes.client.ApiClient, node_dyn: DynamicClient
) -> None:
    """Issue 15 on the real node: kubelet, containerd, kube-proxy and the EndpointSlice controller are the real
    ones. Per phase, kill -9 of the master's container; two watches record every pod change and every
    EndpointSlice of the master Service; the controller's event feed dates each election (convergence.py)."""
    cp = plane(real_node)
    wait_ready(node_dyn)
    service = get(node_dyn, "v1", "Service", NS, f"{BG}-controller-api") or {}
    controller = f"{service['spec']['clusterIP']}:9878"
    master_service = get(node_dyn, "v1", "Service", NS, f"{SET}-master") or {}
    address = f"{master_service['spec']['clusterIP']}:10911"
    phases: list[Phase] = []
    acked: list[bytes] = []
    stop_producing = threading.Event()
    with recording(node_api, NS, SET) as record:
        producer = threading.Thread(
            target=lambda: asyncio.run(produce(address, SET, acked, stop_producing, "rn")), daemon=True
        )
        producer.start()
        eventually("the producer is acknowledged", lambda: len(acked) >= 5, timeout=60)

        def failover(name: str) -> None:
            kill = lambda pod: real_node.kill_container(NS, pod, "broker")  # noqa: E731
            phases.append(
                convergence.failover(name, controller=controller, sts=SET, kill=kill, record=record, acked=acked)
            )

        failover("running")
        cp.kubectl("annotate", "-n", NS, "bg", BG, "brokergroup.io/pause-reconciliation=true")
        eventually("phase Paused", lambda: phase(node_dyn) == "Paused", timeout=60)
        failover("paused")
        cp.kubectl("scale", "-n", OPERATOR_NS, f"deployment/{RELEASE}", "--replicas=0")
        eventually("the operator pod gone", lambda: not operator_pods(node_dyn), timeout=120)
        failover("stopped")
        cp.helm("uninstall", RELEASE, "--namespace", OPERATOR_NS, "--wait", "--timeout", "120s", timeout=150)
        left = cp.kubectl("get", "deployment", RELEASE, "-n", OPERATOR_NS, "--ignore-not-found", "-o", "name")
        assert left.stdout.strip() == "", left.stdout
        failover("uninstalled")
        stop_producing.set()
        producer.join(timeout=90)
        # An acknowledgement still on its way would be appended after the consumer's read: a false loss.
        assert not producer.is_alive(), "the producer did not stop within 90 s"
    consumed = asyncio.run(consume(address, SET))
    lost = sorted(set(acked) - set(consumed))
    assert lost == [], f"acknowledged and lost: {lost[:5]} ({len(lost)})"
    assert len(consumed) == len(set(consumed)), "duplicates in the log"
    for done in phases:
        print(
            f"\n{done.name}: kill -9 {done.killed} -> Service on {done.elected} {done.new_master_seconds:.3f} s "
            f"after the election; longest non-master selection {done.wrong_seconds:.3f} s"
        )
    print(f"history: {len(acked)} acknowledged, {len(consumed)} consumed, none lost")
    # The operator back, as the next test expects it (it deletes the group through the operator's finalizer).
    cp.helm(
        "install", RELEASE, str(CHART), "--namespace", OPERATOR_NS, "--wait", "--timeout", "300s", timeout=330
    )  # fmt: skip
    cp.kubectl("annotate", "-n", NS, "bg", BG, "brokergroup.io/pause-reconciliation-")
    wait_ready(node_dyn)
    convergence.check_phases(phases, HEARTBEAT_INTERVAL)


async def send_one(address: str, sts: str, body: bytes) -> None:
    async with aiohttp.ClientSession() as session:
        producer = Producer(MasterFinder(broker_name=sts, master_address=address), session=session, deadline_s=60)
        await producer.send("orders", [body])


def lose_every_volume(cp: ControlPlane, dyn: DynamicClient, bg: str, sts: str) -> None:
    """The disaster the recovery runbook is for: with reconciliation paused, the set scaled to 0, its claims
    deleted (the provisioner deletes the volumes' folders), then the set back at its size, empty."""
    selector = f"brokergroup.io/broker-set={sts}"
    replicas = len(pods(dyn, selector))
    cp.kubectl("annotate", "-n", NS, "bg", bg, "brokergroup.io/pause-reconciliation=true")
    cp.kubectl("scale", "-n", NS, f"statefulset/{sts}", "--replicas=0")
    eventually(f"{sts}'s pods gone", lambda: not pods(dyn, selector), timeout=120)
    cp.kubectl("delete", "pvc", "-n", NS, "-l", selector, "--wait=true", "--timeout=120s", timeout=150)
    cp.kubectl("scale", "-n", NS, f"statefulset/{sts}", f"--replicas={replicas}")
    cp.kubectl("annotate", "-n", NS, "bg", bg, "brokergroup.io/pause-reconciliation-")


@pytest.mark.timeout(3000)
def test_grow_the_data_volumes_and_recover_a_lost_set_runbooks(
    real_node: RealNode, group: float, node_dyn: DynamicClient, tmp_path: Path
) -> None:
    """docs/operations.md's "Grow the data volumes", run literally on a second group named `bg` (the runbooks'
    name) in a namespace set as the context's: every broker claim grows (the node's StorageClass allows
    expansion, its provisioner grows volumes), the StatefulSet carries the new template, and no pod restarts.
    Then "Recover a set whose replicas are all gone" on the same group (its volumes deleted), and the kubectl
    plugin's documented blocks (docs/operator.md) on it."""
    cp = plane(real_node)
    small = {"requests": {"cpu": "50m", "memory": "96Mi"}}
    brokers = {"replicas": 2, "storage": {"size": "1Gi"}, "resources": small}
    spec = {"controller": {"resources": small}, "brokers": brokers}
    apply(cp, NS, manifest("bg", spec))

    def bg_ready() -> bool:
        return condition(node_dyn, NS, "bg", "Ready").get("status") == "True"

    try:
        grow_and_recover(cp, node_dyn, tmp_path, bg_ready)
    finally:
        cp.kubectl("delete", "-n", NS, "bg", "bg", "--wait=true", "--timeout=120s", timeout=150, check=False)
        eventually("bg's pods gone", lambda: not pods(node_dyn, "app.kubernetes.io/instance=bg"), timeout=180)


def grow_and_recover(cp: ControlPlane, node_dyn: DynamicClient, tmp_path: Path, bg_ready: Callable[[], bool]) -> None:
    eventually("BrokerGroup bg Ready", bg_ready, timeout=READY_TIMEOUT)
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods(node_dyn, "app.kubernetes.io/instance=bg")}
    assert len(uids) == 5, uids
    (block,) = runbooks()["Grow the data volumes"]
    out = run_block(Plugin(cp, cp.admin_kubeconfig, NS, tmp_path), block, timeout=700).splitlines()
    print("\n" + "\n".join(out))
    assert any(line.split() == ["realnode-hostpath", "true"] for line in out), out
    assert "brokergroup.brokergroup.io/bg patched" in out and "brokergroup.brokergroup.io/bg condition met" in out, out
    table = {line.split()[0]: line.split()[1:] for line in out if line.startswith("data-")}
    assert table == {
        "data-bg-broker-0-0": ["20Gi", "20Gi"],
        "data-bg-broker-0-1": ["20Gi", "20Gi"],
        **{f"data-bg-controller-{i}": ["1Gi", "1Gi"] for i in range(3)},
    }, out
    sts = get(node_dyn, "apps/v1", "StatefulSet", NS, "bg-broker-0")
    assert sts is not None and sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"] == {
        "storage": "20Gi"
    }
    now = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods(node_dyn, "app.kubernetes.io/instance=bg")}
    assert now == uids, "a pod was re-created"
    eventually("BrokerGroup bg Ready after the resize", bg_ready, timeout=READY_TIMEOUT)

    # -- Recover a set whose replicas are all gone ---------------------------------------------------------
    service = get(node_dyn, "v1", "Service", NS, "bg-broker-0-master") or {}
    address = f"{service['spec']['clusterIP']}:10911"
    asyncio.run(send_one(address, "bg-broker-0", b"before-the-loss"))
    assert asyncio.run(consume(address, "bg-broker-0")) == [b"before-the-loss"]
    lose_every_volume(cp, node_dyn, "bg", "bg-broker-0")

    def no_master() -> bool:
        cond = condition(node_dyn, NS, "bg", "MastersElected")
        return cond.get("status") == "False" and len(pods(node_dyn, "brokergroup.io/broker-set=bg-broker-0")) == 2

    eventually("the empty replicas up and no master elected", no_master, timeout=READY_TIMEOUT)
    (recover,) = runbooks()["Recover a set whose replicas are all gone"]
    started = time.monotonic()
    out = run_block(Plugin(cp, cp.admin_kubeconfig, NS, tmp_path), recover, timeout=2400).splitlines()
    print("\n" + "\n".join(out) + f"\nrecovered in {time.monotonic() - started:.0f} s")
    assert out.count("brokergroup.brokergroup.io/bg patched") == 2, out
    assert out.count("brokergroup.brokergroup.io/bg condition met") == 2, out
    assert any(line.startswith("Set bg-broker-0  master -") for line in out), out  # status: no master
    assert brokergroup(node_dyn, NS, "bg")["spec"]["controller"]["electUncleanMaster"] is False
    config = get(node_dyn, "v1", "ConfigMap", NS, "bg-config") or {}
    assert "enable_elect_unclean_master = false" in config["data"]["controller.toml"]
    # The set serves again, from an empty log: the message written before the loss is gone, as the runbook says.
    asyncio.run(send_one(address, "bg-broker-0", b"after-the-loss"))
    assert asyncio.run(consume(address, "bg-broker-0")) == [b"after-the-loss"]
    client_block(cp, tmp_path)
    plugin_blocks(cp, node_dyn, tmp_path)


def client_block(cp: ControlPlane, tmp_path: Path) -> None:
    """docs/operator.md's "Sending and reading messages" block, literally, on the real node's group `bg`: the
    CLI in a broker pod finds the master through the controllers' Service and speaks the binary protocol to the
    master's fixed binary port (10909) over the pod network."""
    text = (ROOT / "docs" / "operator.md").read_text()
    section = text[text.index("## Sending and reading messages") :]
    block = re.search(r"```bash\n(.*?)```", section, flags=re.S)
    assert block is not None, "docs/operator.md: no bash block under 'Sending and reading messages'"
    produce, consume_line = block.group(1).strip().splitlines()
    kubeconfig = Plugin(cp, cp.admin_kubeconfig, NS, tmp_path).kubeconfig  # the context's namespace is NS
    sent = [
        json.loads(line)
        for line in cp.kubectl(*shlex.split(produce)[1:], kubeconfig=kubeconfig, timeout=120).stdout.splitlines()
    ]
    print("\n".join(map(str, sent)))
    assert [(m["status"], m["queueOffset"], m["duplicate"]) for m in sent] == [
        ("PUT_OK", 0, False),
        ("PUT_OK", 1, False),
    ]
    read = [
        json.loads(line)
        for line in cp.kubectl(*shlex.split(consume_line)[1:], kubeconfig=kubeconfig, timeout=120).stdout.splitlines()
    ]
    assert [(m["queueOffset"], m["body"]) for m in read] == [(0, "payment-1"), (1, "payment-2")], read
    again = cp.kubectl(*shlex.split(consume_line)[1:], kubeconfig=kubeconfig, timeout=120).stdout
    assert again.strip() == "", f"the group's offset was not committed: {again}"


def plugin_blocks(cp: ControlPlane, node_dyn: DynamicClient, tmp_path: Path) -> None:
    """docs/operator.md's `kubectl brokergroup` blocks, literally and in order, on the real node's group `bg`
    (the docs' name; the test kubelet runs them too, in test_kubectl_plugin.py)."""
    admin = Plugin(cp, cp.admin_kubeconfig, NS, tmp_path)
    lines = doc_commands(ROOT / "docs" / "operator.md", "## kubectl plugin", "\n## ")
    status, status_json, switchover, pause, resume, report = lines[:6]
    fence, restart_fenced, unfence, restart_master = lines[6:]

    def both_in_sync() -> bool:
        replicas = json.loads(admin.ok(status_json))["sets"][0]["replicas"]
        return len(replicas) == 2 and all(r["in_sync"] and r["lag"] is not None for r in replicas)

    eventually("both replicas in the sync-state set", both_in_sync, timeout=180, interval=1)
    masters = json.loads(admin.ok(status_json))["sets"][0]["master"]
    if masters == "bg-broker-0-1":  # the block's switchover names it: make it a slave first
        admin.ok("kubectl brokergroup switchover bg bg-broker-0-0")
        eventually("both replicas in the sync-state set", both_in_sync, timeout=180, interval=1)
    assert "bg-broker-0" in admin.ok(status)
    assert "switchover done" in admin.ok(switchover)
    assert json.loads(admin.ok(status_json))["sets"][0]["master"] == "bg-broker-0-1"
    assert "paused" in admin.ok(pause) and "resumed" in admin.ok(resume)
    assert admin.ok(report).startswith("wrote bg-report.tar.gz")
    assert (tmp_path / "bg-report.tar.gz").stat().st_size > 0
    eventually("both replicas in the sync-state set", both_in_sync, timeout=180, interval=1)
    admin.ok("kubectl brokergroup switchover bg bg-broker-0-0")  # the fencing block fences a slave
    eventually("both replicas in the sync-state set", both_in_sync, timeout=180, interval=1)
    out = admin.ok(fence)
    assert "bg-broker-0-1 (slave) fenced" in out and "bg-broker-0-1 is out of the sync-state-set" in out, out
    assert "running again (fenced" in admin.ok(restart_fenced)
    out = admin.ok(unfence)
    assert "bg-broker-0-1 (slave) unfenced" in out and "back in the sync-state-set" in out, out
    eventually("both replicas in the sync-state set", both_in_sync, timeout=180, interval=1)
    eventually(  # restart refuses while the operator counts a replica of the set not ready
        "the operator counts both ready",
        lambda: brokergroup(node_dyn, NS, "bg")["status"]["brokerSets"][0].get("readyReplicas") == 2,
        timeout=120,
    )
    out = admin.ok(restart_master)
    assert "switching over to bg-broker-0-1 first" in out and "Ready again: restart done" in out, out


def test_delete_removes_the_group_and_uninstall_the_operator(
    real_node: RealNode, group: float, node_dyn: DynamicClient
) -> None:
    cp = plane(real_node)
    cp.kubectl("delete", "-n", NS, "bg", BG, "--wait=true", "--timeout=120s", timeout=150)
    eventually(
        "every pod of the group gone", lambda: not pods(node_dyn, f"app.kubernetes.io/instance={BG}"), timeout=180
    )
    leftovers = yaml.safe_load(cp.kubectl("get", "-n", NS, "statefulsets,services,configmaps", "-o", "yaml").stdout)
    assert [i["metadata"]["name"] for i in leftovers["items"] if i["kind"] != "ConfigMap"] == []
    cp.helm("uninstall", RELEASE, "--namespace", OPERATOR_NS, "--wait", "--timeout", "120s", timeout=150)
    eventually(
        "the operator pod gone",
        lambda: not pods(node_dyn, "app.kubernetes.io/name=brokergroup", OPERATOR_NS),
        timeout=120,
    )
