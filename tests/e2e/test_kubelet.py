"""The test kubelet against the real control plane: StatefulSet pods run as processes, resolve each other,
reach Services through the proxy, restart, keep their PVC data, and go away with their StatefulSet."""

from __future__ import annotations

import base64
import json
import signal
import time
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from brokergroup.chaos.netns import namespaces
from tests.e2e.helmchart import InCluster
from tests.e2e.kubeenv import ControlPlane, eventually
from tests.e2e.kubelet import NODE_NAME, Kubelet
from tests.e2e.kubelet.env import expand
from tests.e2e.kubelet.network import NETNS_PREFIX, dns_lines
from tests.e2e.kubelet.workloads import (
    PORT,
    Kubectl,
    alive,
    apply,
    fetch_in_pod,
    get,
    run_web,
    service,
    starts,
    statefulset_ready,
    store_statefulset,
)
from tests.e2e.operator.conftest import OperatorProcess


@pytest.fixture
def core(kube_api: kubernetes.client.ApiClient) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(kube_api)


@pytest.fixture
def apps(kube_api: kubernetes.client.ApiClient) -> kubernetes.client.AppsV1Api:
    return kubernetes.client.AppsV1Api(kube_api)


def test_statefulset_pods_run_and_become_ready(
    kubelet: Kubelet, kubectl: Kubectl, namespace: str, core: kubernetes.client.CoreV1Api, apps: Any
) -> None:
    run_web(kubectl, apps, namespace)
    for name in ("web-0", "web-1"):
        pod = core.read_namespaced_pod(name, namespace)
        assert pod.spec.node_name == NODE_NAME
        assert pod.status.phase == "Running"
        assert pod.status.pod_ip == kubelet.pod_ip(name)
        (status,) = pod.status.container_statuses
        assert status.ready and status.started and status.restart_count == 0
        assert get(f"http://{kubelet.pod_ip(name)}:{PORT}/name") == name
        assert kubelet.pid(name) is not None
        events = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
        assert {"Scheduled", "Started"} <= {event.reason for event in events}
    print("pod timings (s from binding):", json.dumps(kubelet.timings))


def test_pods_resolve_pod_and_service_names(
    kubelet: Kubelet, kubectl: Kubectl, namespace: str, apps: Any, core: kubernetes.client.CoreV1Api
) -> None:
    run_web(kubectl, apps, namespace, service("front", {"app": "web", "role": "x"}))
    # Pod names as the StatefulSet's headless Service gives them (the EndpointSlice carries the hostname).
    for short in ("web-1.web", f"web-1.web.{namespace}", f"web-1.web.{namespace}.svc"):
        assert fetch_in_pod(kubelet, "web-0", f"http://{short}:{PORT}/name") == "web-1"
    assert fetch_in_pod(kubelet, "web-1", f"http://web-0.web.{namespace}.svc.cluster.local:{PORT}/name") == "web-0"
    hosts = kubelet.hosts("web-0")
    assert f"{kubelet.pod_ip('web-0')}\tweb-0.web.{namespace}.svc.cluster.local\tweb-0" in hosts
    # A ClusterIP Service by name, through the proxy; `front` selects role=x, which only web-1 gets.
    core.patch_namespaced_pod("web-1", namespace, {"metadata": {"labels": {"role": "x"}}})
    eventually(
        "front.<ns>.svc answers from web-1 inside web-0",
        lambda: fetch_in_pod(kubelet, "web-0", f"http://front.{namespace}.svc/name") == "web-1",
        timeout=30,
    )
    assert fetch_in_pod(kubelet, "web-0", "http://front/name") == "web-1"
    # Hairpin: web-1 reaches itself through its own Service.
    assert fetch_in_pod(kubelet, "web-1", f"http://front.{namespace}.svc/name") == "web-1"
    # An unknown name fails fast (no DNS server is asked), as NXDOMAIN would.
    started = time.monotonic()
    done = kubelet.exec("web-0", ["getent", "hosts", f"nothing.{namespace}.svc"])
    assert done.returncode != 0 and time.monotonic() - started < 5


def test_root_namespace_reaches_cluster_ip_and_follows_relabel(
    kubelet: Kubelet, kubectl: Kubectl, namespace: str, apps: Any, core: kubernetes.client.CoreV1Api
) -> None:
    run_web(kubectl, apps, namespace, service("master", {"app": "web", "role": "x"}))
    cluster_ip = core.read_namespaced_service("master", namespace).spec.cluster_ip
    url = f"http://{cluster_ip}/name"
    # No endpoint yet: refused at once by the proxy, not routed anywhere.
    with pytest.raises(OSError, match="refused"):
        get(url)
    for first, second in (("web-0", "web-1"), ("web-1", "web-0")):
        # As the operator moves its master label: demote first, then label the new one.
        core.patch_namespaced_pod(second, namespace, {"metadata": {"labels": {"role": None}}})
        core.patch_namespaced_pod(first, namespace, {"metadata": {"labels": {"role": "x"}}})
        eventually(
            f"every new connection to {url} lands on {first}",
            lambda first=first: {get(url) for _ in range(10)} == {first},
            timeout=30,
        )
    # Both selected: connections are spread over both endpoints.
    core.patch_namespaced_pod("web-0", namespace, {"metadata": {"labels": {"role": "x"}}})
    eventually("both pods answer", lambda: {get(url) for _ in range(20)} == {"web-0", "web-1"}, timeout=30)


def test_killed_container_restarts_and_becomes_ready_again(
    kubelet: Kubelet, kubectl: Kubectl, namespace: str, apps: Any, core: kubernetes.client.CoreV1Api
) -> None:
    run_web(kubectl, apps, namespace, replicas=1)
    ip_before = kubelet.pod_ip("web-0")
    pid = kubelet.kill("web-0", signal.SIGKILL)
    killed = time.monotonic()
    eventually(
        "web-0 is not ready",
        lambda: not core.read_namespaced_pod("web-0", namespace).status.container_statuses[0].ready,
    )

    def restarted_and_ready() -> Any:
        pod = core.read_namespaced_pod("web-0", namespace)
        (status,) = pod.status.container_statuses
        return pod if status.restart_count == 1 and status.ready else None

    pod = eventually("web-0 restarted once and is ready again", restarted_and_ready, timeout=30)
    print(f"kill -9 -> restarted and Ready in {time.monotonic() - killed:.2f} s")
    (status,) = pod.status.container_statuses
    assert status.last_state.terminated.exit_code == 128 + signal.SIGKILL
    assert kubelet.pid("web-0") not in (None, pid)
    assert kubelet.pod_ip("web-0") == ip_before == pod.status.pod_ip
    assert get(f"http://{ip_before}:{PORT}/name") == "web-0"
    assert "start 2 of web" in kubelet.logs("web-0")
    eventually("StatefulSet web is 1/1 ready again", lambda: statefulset_ready(apps, namespace, "web", 1))


def test_failing_liveness_probe_restarts_the_container(
    kubelet: Kubelet, kubectl: Kubectl, namespace: str, core: kubernetes.client.CoreV1Api
) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "lively"},
        "spec": {
            "terminationGracePeriodSeconds": 2,
            "containers": [
                {
                    "name": "main",
                    "image": "x",
                    "command": ["sh", "-c", "touch /tmp/alive; while true; do sleep 0.1; done"],
                    "startupProbe": {"exec": {"command": ["test", "-f", "/tmp/alive"]}, "periodSeconds": 1},
                    "livenessProbe": {
                        "exec": {"command": ["test", "-f", "/tmp/alive"]},
                        "periodSeconds": 1,
                        "failureThreshold": 2,
                    },
                    "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                }
            ],
            "volumes": [{"name": "tmp", "emptyDir": {}}],
        },
    }
    apply(kubectl, namespace, pod)

    def container() -> Any:
        statuses = core.read_namespaced_pod("lively", namespace).status.container_statuses or []
        return statuses[0] if statuses else None

    eventually("lively started", lambda: (c := container()) is not None and c.started and c.ready, timeout=30)
    assert kubelet.exec("lively", ["rm", "/tmp/alive"]).returncode == 0
    eventually("lively restarted by its liveness probe", lambda: container().restart_count == 1, timeout=30)
    eventually("lively started again", lambda: container().started and container().ready, timeout=30)
    events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=lively").items
    killing = [event.message for event in events if event.reason == "Killing"]
    assert killing == ["Container main failed liveness probe, will be restarted"], killing


def test_env_volumes_and_pvc_data_survive_pod_recreation(
    kubelet: Kubelet, kubectl: Kubectl, namespace: str, apps: Any, core: kubernetes.client.CoreV1Api
) -> None:
    token = base64.b64encode(b"s3cret").decode()
    apply(
        kubectl,
        namespace,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cfg"},
            "data": {"greeting": "hello", "other": "x"},
        },
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "auth"}, "data": {"token": token}},
        service("store", {"app": "store"}, headless=True),
        store_statefulset(),
    )
    eventually("StatefulSet store is 1/1 ready", lambda: statefulset_ready(apps, namespace, "store", 1), timeout=60)
    (first,) = starts(kubelet)
    assert first == {
        "pod": "store-0",
        "hostname": "store-0",
        "greeting": "hello",
        "mode": "0o440",
        "files": ["greet.txt"],
        # readOnly volume and readOnlyRootFilesystem: only the PVC and the pod's own /dev/shm are writable.
        "writable": ["/var/lib/bgtest/x", "/dev/shm/bgtest"],
        "token": "s3cret",
        "for": f"store-0@{namespace}",
        "escaped": "$(POD_NAME)",
        "cwd": "/var/lib/bgtest",
        # The service account volume that admission added (projected: TokenRequest, kube-root-ca.crt, namespace).
        "sa_namespace": namespace,
        "sa_token": 2,
        "sa_ca": True,
    }
    # The pod's mounts stay in its mount namespace: the host sees empty mount points, no bind mounts.
    mountinfo = Path("/proc/self/mountinfo").read_text()
    assert str(kubelet.work_dir) not in mountinfo and "/etc/bgtest" not in mountinfo
    assert list(Path("/etc/bgtest").iterdir()) == [] and list(Path("/var/lib/bgtest").iterdir()) == []
    assert not Path("/dev/shm/bgtest").exists()  # the pod's /dev/shm is its own tmpfs
    # A ConfigMap change reaches the mounted file (atomically, through the ..data symlink).
    core.patch_namespaced_config_map("cfg", namespace, {"data": {"greeting": "hola"}})
    eventually(
        "the pod sees the new greeting",
        lambda: kubelet.exec("store-0", ["cat", "/etc/bgtest/greet.txt"]).stdout == "hola",
        timeout=20,
    )
    old_uid = core.read_namespaced_pod("store-0", namespace).metadata.uid
    core.delete_namespaced_pod("store-0", namespace)
    eventually("store-0 was re-created and wrote again", lambda: len(starts(kubelet)) == 2, timeout=60)
    assert core.read_namespaced_pod("store-0", namespace).metadata.uid != old_uid
    second = starts(kubelet)[1]
    assert second["greeting"] == "hola" and second["token"] == "s3cret" and second["pod"] == "store-0"
    claim = core.read_namespaced_persistent_volume_claim("data-store-0", namespace)
    assert claim.status.phase == "Pending"  # no provisioner: the kubelet uses its folder all the same
    eventually("StatefulSet store is 1/1 ready again", lambda: statefulset_ready(apps, namespace, "store", 1))


def test_deleting_the_statefulset_removes_processes_and_namespaces(
    kubelet: Kubelet, kubectl: Kubectl, namespace: str, apps: Any, core: kubernetes.client.CoreV1Api
) -> None:
    run_web(kubectl, apps, namespace)
    pids = {name: kubelet.pid(name) for name in ("web-0", "web-1")}
    netns = {kubelet.netns(name) for name in ("web-0", "web-1")}
    assert all(pid and alive(pid, "http.server") for pid in pids.values())
    assert netns <= set(namespaces())
    started = time.monotonic()
    kubectl("delete", "-n", namespace, "statefulset", "web", "--wait=false")
    eventually("the pods are gone", lambda: not core.list_namespaced_pod(namespace).items, timeout=60)
    took = time.monotonic() - started
    assert not any(alive(pid, "http.server") for pid in pids.values() if pid)
    assert not netns & set(namespaces())
    assert not [name for name in namespaces() if name.startswith(NETNS_PREFIX)]
    assert not list(Path("/etc/netns").glob(NETNS_PREFIX + "*"))
    assert took < 15, f"deleting took {took:.1f} s: SIGTERM should end http.server at once"


def test_grace_period_then_sigkill(kubelet: Kubelet, kubectl: Kubectl, namespace: str, core: Any) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "stubborn"},
        "spec": {
            "terminationGracePeriodSeconds": 2,
            "containers": [
                {
                    "name": "main",
                    "image": "x",
                    "command": ["sh", "-c", "trap '' TERM; echo trap-$((6 * 7)); while true; do sleep 0.1; done"],
                }
            ],
        },
    }
    apply(kubectl, namespace, pod)
    eventually("stubborn runs", lambda: core.read_namespaced_pod("stubborn", namespace).status.phase == "Running")
    # Running means the shell was started, not that it has reached its trap: a SIGTERM before the trap ends it at once
    # (exit 143, the CI failure at 0.2 s). The shell says when the trap is set; the kubelet's log header holds the
    # command line, so the shell prints a value it computes, not one written in its command.
    eventually("stubborn ignores SIGTERM", lambda: "trap-42" in kubelet.logs("stubborn"))
    started = time.monotonic()
    core.delete_namespaced_pod("stubborn", namespace)
    eventually("stubborn is gone", lambda: not core.list_namespaced_pod(namespace).items, timeout=30)
    took = time.monotonic() - started
    # Not before the pod's 2 s grace period, and under the test kubelet's 10 s cap on any grace period (what a
    # kubelet ignoring the pod's would take). The margin above 2 s is the kubelet's watch, the kill, the pod's
    # deletion and this test's polling, each slower on a loaded machine.
    assert 2 <= took < 9, f"SIGTERM ignored: SIGKILL after the 2 s grace period, took {took:.1f} s"
    assert "exited with 137" in kubelet.work_dir.joinpath("kubelet.log").read_text()


def test_operator_pod_templates_run_a_brokergroup(
    kubelet: Kubelet,
    control_plane: ControlPlane,
    namespace: str,
    kubectl: Kubectl,
    apps: Any,
    core: kubernetes.client.CoreV1Api,
    tmp_path: Path,
    operator_login: InCluster,
) -> None:
    """The operator's own StatefulSets, run by the kubelet: 3 controllers elect a Raft leader (their /readyz
    answers 200, so the StatefulSet counts 3 ready) and 3 brokers register and become ready. The operator runs
    in the root namespace, where `<bg>-controller-api.<ns>.svc` does not resolve: it reaches the controllers
    through the Service's ClusterIP and the kubelet's proxy (`{cluster_ip}` in --controller-url)."""
    # The BrokerGroup CRD is one of crds/, installed by the control_plane fixture.
    operator = OperatorProcess(
        operator_login,
        namespace,
        tmp_path,
        "http://{cluster_ip}:9878",
    )
    operator.start()
    try:
        bg = {
            "apiVersion": "brokergroup.io/v1alpha1",
            "kind": "BrokerGroup",
            "metadata": {"name": "demo"},
            "spec": {"controller": {"replicas": 3}, "brokers": {"sets": 1, "replicas": 3}},
        }
        started = time.monotonic()
        apply(kubectl, namespace, bg)

        def ready(name: str) -> bool:
            try:
                return statefulset_ready(apps, namespace, name, 3)
            except kubernetes.client.ApiException:
                return False

        try:
            eventually("3 controllers ready", lambda: ready("demo-controller"), timeout=180, interval=0.5)
            controllers_ready = time.monotonic() - started
            eventually("3 brokers ready", lambda: ready("demo-broker-0"), timeout=180, interval=0.5)
        except AssertionError:
            for pod in core.list_namespaced_pod(namespace).items:
                print(f"--- {pod.metadata.name}: {pod.status.phase}\n{kubelet.logs(pod.metadata.name)[-3000:]}")
            print("--- operator\n" + operator.log())
            raise
        print(
            f"\ncontrollers ready {controllers_ready:.1f} s, brokers ready {time.monotonic() - started:.1f} s after "
            f"the BrokerGroup was applied; per pod (s from binding): {json.dumps(kubelet.timings)}"
        )
        # From a broker pod, through the controller-api Service by its short name: a leader and 3 live brokers.
        url = "http://demo-controller-api:9878/v1/status"
        status = eventually(
            "the controller sees 3 live brokers",
            lambda: (s := json.loads(fetch_in_pod(kubelet, "demo-broker-0-0", url)))["activeBrokers"] == 3 and s,
            timeout=30,
        )
        assert status["leaderId"] in {"demo-controller-0", "demo-controller-1", "demo-controller-2"}, status
        # The brokers were given the headless Service's name (controller.dns_lookup): it resolves to every
        # controller pod, so each node hears each broker (issue 23).
        for k in range(3):
            node = f"http://demo-controller-{k}.demo-controller:9878/v1/status"
            eventually(
                f"controller {k} hears 3 brokers",
                lambda node=node: json.loads(fetch_in_pod(kubelet, "demo-broker-0-0", node))["activeBrokers"] == 3,
                timeout=30,
            )
    finally:
        operator.stop()


def test_env_expansion_follows_kubernetes_rules() -> None:
    env = {"A": "1", "B": "two"}
    assert expand("$(A)-$(B)", env) == "1-two"
    assert expand("$(MISSING)", env) == "$(MISSING)"  # unknown references stay as written
    assert expand("$$(A) $$ $x $", env) == "$(A) $ $x $"
    assert expand("$(A", env) == "$(A"


def test_hosts_records_follow_cluster_dns() -> None:
    services = [
        {"metadata": {"name": "api"}, "spec": {"clusterIP": "10.0.0.7"}},
        {"metadata": {"name": "peers"}, "spec": {"clusterIP": "None"}},
    ]
    endpoints = [
        {"addresses": ["10.88.0.10"], "hostname": "p-0", "conditions": {"ready": True}},
        {"addresses": ["10.88.0.11"], "hostname": "p-1", "conditions": {"ready": False}},
        {"addresses": ["10.88.0.12"]},
    ]
    slices = [
        {
            "metadata": {"labels": {"kubernetes.io/service-name": "peers"}},
            "addressType": "IPv4",
            "endpoints": endpoints,
        }
    ]
    lines = dns_lines("ns", services, slices)
    assert "10.0.0.7\tapi.ns.svc.cluster.local\tapi.ns.svc\tapi.ns\tapi" in lines
    assert "10.88.0.10\tp-0.peers.ns.svc.cluster.local\tp-0.peers.ns.svc\tp-0.peers.ns\tp-0.peers" in lines
    assert not [line for line in lines if "p-1" in line or "10.88.0.11" in line]
    # The headless Service's own name: one line per ready endpoint, with or without a hostname (issue 23).
    assert "10.88.0.10\tpeers.ns.svc.cluster.local\tpeers.ns.svc\tpeers.ns\tpeers" in lines
    assert "10.88.0.12\tpeers.ns.svc.cluster.local\tpeers.ns.svc\tpeers.ns\tpeers" in lines
