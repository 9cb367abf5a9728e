"""Workloads and helpers of the test kubelet's own tests (tests/e2e/test_kubelet.py): a StatefulSet of small
web servers, a StatefulSet that records its env and volumes into its PVC, and ways to reach them."""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path
from typing import Any

import kubernetes

from tests.e2e.kubeenv import Kubectl, eventually
from tests.e2e.kubelet.kubelet import Kubelet

PORT = 8080
# The pod writes its name into its emptyDir /tmp and serves that folder: GET /name says which pod answered.
WEB_COMMAND = [
    "sh",
    "-c",
    'echo "$POD_NAME" > /tmp/name && exec "$0" -m http.server "$1" --bind 0.0.0.0 --directory /tmp',
    sys.executable,
    str(PORT),
]


def apply(kubectl: Kubectl, namespace: str, *objects: dict[str, Any]) -> None:
    for obj in objects:
        kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(obj))


def web_statefulset(name: str, replicas: int = 2, **pod_spec: Any) -> dict[str, Any]:
    container = {
        "name": "web",
        "image": "ignored.example/web:1",
        "command": WEB_COMMAND,
        "ports": [{"name": "http", "containerPort": PORT}],
        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "readinessProbe": {"httpGet": {"path": "/name", "port": "http"}, "periodSeconds": 1, "failureThreshold": 1},
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "terminationGracePeriodSeconds": 5,
                    "containers": [container],
                    "volumes": [{"name": "tmp", "emptyDir": {}}],
                    **pod_spec,
                },
            },
        },
    }


def service(name: str, selector: dict[str, str], *, headless: bool = False, port: int = 80) -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": selector, "ports": [{"name": "http", "port": port, "targetPort": "http"}]}
    if headless:
        spec["clusterIP"] = "None"
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec}


def statefulset_ready(apps: kubernetes.client.AppsV1Api, namespace: str, name: str, replicas: int) -> bool:
    status = apps.read_namespaced_stateful_set_status(name, namespace).status
    return (status.ready_replicas or 0) == replicas


def run_web(
    kubectl: Kubectl,
    apps: kubernetes.client.AppsV1Api,
    namespace: str,
    *services: dict[str, Any],
    replicas: int = 2,
) -> None:
    """Apply the headless Service `web`, `services` and the StatefulSet `web`; wait until every replica is ready."""
    apply(
        kubectl, namespace, service("web", {"app": "web"}, headless=True), *services, web_statefulset("web", replicas)
    )
    eventually(
        f"StatefulSet web is {replicas}/{replicas} ready",
        lambda: statefulset_ready(apps, namespace, "web", replicas),
        timeout=60,
    )


def get(url: str, timeout: float = 3.0) -> str:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=timeout) as response:
        return str(response.read().decode().strip())


def fetch_in_pod(kubelet: Kubelet, pod: str, url: str) -> str:
    """GET `url` from inside `pod` (its hosts file, its network namespace)."""
    script = "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=3).read().decode().strip())"
    done = kubelet.exec(pod, [sys.executable, "-c", script, url], timeout=20)
    assert done.returncode == 0, f"GET {url} from {pod}: {done.stderr[-800:]}"
    return done.stdout.strip()


STORE_SCRIPT = """
import json, os, pathlib, socket, time
data, cfg = pathlib.Path("/var/lib/bgtest"), pathlib.Path("/etc/bgtest")
def writable(path):
    try:
        pathlib.Path(path).write_text("x")
        return True
    except OSError:
        return False
record = {
    "pod": os.environ["POD_NAME"],
    "hostname": socket.gethostname(),
    "greeting": (cfg / "greet.txt").read_text(),
    "mode": oct((cfg / "greet.txt").stat().st_mode & 0o777),
    "files": sorted(name for name in os.listdir(cfg) if not name.startswith("..")),
    "writable": [p for p in ("/etc/bgtest/x", "/root/x", "/etc/x", "/var/lib/bgtest/x", "/dev/shm/bgtest")
                 if writable(p)],
    "token": os.environ["TOKEN"],
    "for": os.environ["GREETING_FOR"],
    "escaped": os.environ["ESCAPED"],
    "cwd": os.getcwd(),
    "sa_namespace": pathlib.Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace").read_text(),
    "sa_token": pathlib.Path("/var/run/secrets/kubernetes.io/serviceaccount/token").read_text().count("."),
    "sa_ca": "BEGIN CERTIFICATE" in pathlib.Path("/var/run/secrets/kubernetes.io/serviceaccount/ca.crt").read_text(),
}
with open(data / "starts.jsonl", "a") as out:
    out.write(json.dumps(record) + "\\n")
while True:
    time.sleep(1)
"""


def store_statefulset() -> dict[str, Any]:
    container = {
        "name": "store",
        "image": "ignored.example/store:1",
        "command": [sys.executable, "-c", STORE_SCRIPT],
        "workingDir": "/var/lib/bgtest",
        "env": [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "auth", "key": "token"}}},
            {"name": "GREETING_FOR", "value": "$(POD_NAME)@$(POD_NAMESPACE)"},
            {"name": "ESCAPED", "value": "$$(POD_NAME)"},
        ],
        "readinessProbe": {"exec": {"command": ["test", "-s", "/var/lib/bgtest/starts.jsonl"]}, "periodSeconds": 1},
        "securityContext": {"readOnlyRootFilesystem": True},
        "volumeMounts": [
            {"name": "data", "mountPath": "/var/lib/bgtest"},
            {"name": "cfg", "mountPath": "/etc/bgtest", "readOnly": True},
        ],
    }
    statefulset = web_statefulset("store", replicas=1)
    statefulset["spec"]["template"]["spec"] = {
        "terminationGracePeriodSeconds": 5,
        "containers": [container],
        "volumes": [
            {
                "name": "cfg",
                "configMap": {"name": "cfg", "items": [{"key": "greeting", "path": "greet.txt", "mode": 0o440}]},
            }
        ],
    }
    statefulset["spec"]["volumeClaimTemplates"] = [
        {
            "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        }
    ]
    return statefulset


def starts(kubelet: Kubelet) -> list[dict[str, Any]]:
    path = kubelet.pvc_dir("data-store-0") / "starts.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def alive(pid: int, needle: str) -> bool:
    try:
        return needle in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
