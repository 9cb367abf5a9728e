"""The support bundle: the BrokerGroup, its children, Events, pod logs, the controllers' event logs and
metrics, as one tar.gz. What cannot be collected (RBAC, a pod not running) is listed in `errors.txt`; Secrets
are never read."""

from __future__ import annotations

import functools
import io
import json
import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from brokergroup.kubectl.kube import Kube, api_errors, group_selector
from brokergroup.kubectl.targets import PluginError
from brokergroup.operator import names

OPERATOR_SELECTOR = {"app.kubernetes.io/part-of": "brokergroup"}


def _selector(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


class Bundle:
    def __init__(self, root: str) -> None:
        self.root = root
        self.files: dict[str, bytes] = {}
        self.errors: list[str] = []

    def add(self, path: str, fetch: Callable[[], bytes | str]) -> None:
        try:
            data = fetch()
        except PluginError as exc:
            self.errors.append(f"{path}: {exc}")
            return
        self.files[path] = data.encode() if isinstance(data, str) else data

    def write(self, out: Path) -> None:
        self.files["errors.txt"] = ("\n".join(self.errors) + "\n").encode() if self.errors else b""
        with tarfile.open(out, "w:gz") as tar:
            for path, data in sorted(self.files.items()):
                info = tarfile.TarInfo(f"{self.root}/{path}")
                info.size = len(data)
                info.mtime = int(time.time())
                tar.addfile(info, io.BytesIO(data))


def _yaml(kube: Kube, obj: Any) -> str:
    return yaml.safe_dump(kube.api.sanitize_for_serialization(obj), sort_keys=False)


def write(kube: Kube, ns: str, bg: str, operator_ns: str, out: Path) -> list[str]:
    bundle = Bundle(out.name.removesuffix(".tar.gz"))
    sel = _selector(group_selector(bg))
    bundle.add("brokergroup.yaml", lambda: yaml.safe_dump(kube.group(ns, bg), sort_keys=False))

    def listed(what: str, call: Callable[[], Any]) -> Callable[[], str]:
        def fetch() -> str:
            with api_errors(f"cannot list {what} in {ns}"):
                return _yaml(kube, call())

        return fetch

    bundle.add(
        "statefulsets.yaml",
        listed("statefulsets", lambda: kube.apps.list_namespaced_stateful_set(ns, label_selector=sel)),
    )
    bundle.add("services.yaml", listed("services", lambda: kube.core.list_namespaced_service(ns, label_selector=sel)))
    bundle.add("pods.yaml", listed("pods", lambda: kube.core.list_namespaced_pod(ns, label_selector=sel)))
    bundle.add(
        "pvcs.yaml",
        listed(
            "persistentvolumeclaims", lambda: kube.core.list_namespaced_persistent_volume_claim(ns, label_selector=sel)
        ),
    )
    bundle.add(
        "configmaps.yaml", listed("configmaps", lambda: kube.core.list_namespaced_config_map(ns, label_selector=sel))
    )
    bundle.add("events.yaml", listed("events", lambda: kube.core.list_namespaced_event(ns)))

    def pod_logs(namespace: str, pods: list[dict[str, Any]], folder: str) -> None:
        for pod in pods:
            name = pod["metadata"]["name"]
            for container in (pod.get("spec") or {}).get("containers") or []:
                cname = container["name"]

                def fetch(name: str = name, cname: str = cname) -> str:
                    with api_errors(f"cannot read the log of {namespace}/{name}/{cname}"):
                        return str(kube.core.read_namespaced_pod_log(name, namespace, container=cname, tail_lines=5000))

                bundle.add(f"{folder}/{name}.{cname}.log", fetch)

    try:
        pods = kube.pods(ns, group_selector(bg))
    except PluginError as exc:
        bundle.errors.append(f"logs: {exc}")
        pods = []
    pod_logs(ns, pods, "logs")
    try:
        operators = kube.pods(operator_ns, OPERATOR_SELECTOR)
    except PluginError as exc:
        bundle.errors.append(f"operator: {exc}")
        operators = []
    if not operators:
        bundle.errors.append(f"operator: no pod labelled {_selector(OPERATOR_SELECTOR)} in namespace {operator_ns}")
    pod_logs(operator_ns, operators, "operator")

    port = names.CONTROLLER_API_PORT
    for ordinal in range(kube.controller_replicas(ns, bg)):
        pod = names.controller_pod(bg, ordinal)
        for path, url in (("status.json", "/v1/status"), ("metrics.txt", "/metrics")):
            bundle.add(f"controllers/{pod}/{path}", functools.partial(kube.pod_get, ns, pod, port, url))
        try:
            listing = json.loads(kube.pod_get(ns, pod, port, "/v1/eventlog"))
        except (PluginError, ValueError) as exc:
            bundle.errors.append(f"controllers/{pod}/eventlog: {exc}")
            continue
        bundle.files[f"controllers/{pod}/eventlog.json"] = json.dumps(listing, indent=2).encode()
        for entry in _eventlog_names(listing):
            bundle.add(
                f"controllers/{pod}/eventlog/{entry}",
                functools.partial(kube.pod_get, ns, pod, port, f"/v1/eventlog/{entry}"),
            )
    bundle.write(out)
    return bundle.errors


def _eventlog_names(listing: Any) -> list[str]:
    """File names of a `GET /v1/eventlog` reply (a list of names or of {name: ...} objects)."""
    entries = listing.get("files", []) if isinstance(listing, dict) else listing
    out = []
    for entry in entries if isinstance(entries, list) else []:
        name = entry.get("name") if isinstance(entry, dict) else entry
        if isinstance(name, str) and "/" not in name and name not in {"", ".", ".."}:
            out.append(name)
    return out
