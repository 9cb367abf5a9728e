"""The Helm chart in the e2e tier: render it, install it, and log in as its ServiceAccount.

`InCluster` is what a pod of the chart's Deployment gets: the ServiceAccount's token and the cluster CA
at the in-cluster path, and the apiserver in KUBERNETES_SERVICE_HOST/PORT. `in_cluster_command` runs a
command with exactly that, in a private mount namespace, so `brokergroup operator` takes its in-cluster
login path (no kubeconfig) as the chart's ServiceAccount, with the chart's RBAC and nothing more.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.kubeenv import CACHE, ControlPlane
from tests.needs import missing

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "brokergroup"
SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TOKEN_SECONDS = 4 * 3600


def render(
    control_plane: ControlPlane,
    values: Mapping[str, Any] | None = None,
    *,
    release: str = "bg",
    namespace: str = "ops",
    work: Path,
) -> list[dict[str, Any]]:
    """`helm template` with `values` (a values file, as users pass them); the rendered objects."""
    result = control_plane.helm(
        "template",
        release,
        str(CHART),
        "--namespace",
        namespace,
        *values_args(values, work),
    )
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def values_args(values: Mapping[str, Any] | None, work: Path) -> list[str]:
    if not values:
        return []
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=work, prefix="values-", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(dict(values), f)
    return ["--values", f.name]


@dataclasses.dataclass(frozen=True)
class InCluster:
    """A pod's view of its ServiceAccount: `folder` holds token, ca.crt and namespace."""

    folder: Path
    host: str
    port: int
    namespace: str
    service_account: str

    @property
    def user(self) -> str:
        """The name the apiserver (and its audit log) gives this identity."""
        return f"system:serviceaccount:{self.namespace}:{self.service_account}"

    def env(self) -> dict[str, str]:
        return {"KUBERNETES_SERVICE_HOST": self.host, "KUBERNETES_SERVICE_PORT": str(self.port)}

    def command(self, argv: list[str]) -> list[str]:
        """`argv` in its own mount namespace with `folder` bind-mounted at the in-cluster path (as the
        kubelet mounts the kube-api-access volume), read-only. Needs root, as the test kubelet does."""
        script = 'mount --bind -o ro "$1" "$2" && shift 2 && exec "$@"'
        return [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--",
            "sh",
            "-c",
            script,
            "sh",
            str(self.folder),
            str(SA_DIR),
            *argv,
        ]

    def kubeconfig(self, path: Path) -> Path:
        """The same identity as a kubeconfig (for kubectl as the ServiceAccount)."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "e2e",
                    "cluster": {
                        "server": f"https://{self.host}:{self.port}",
                        "certificate-authority": str(self.folder / "ca.crt"),
                    },
                }
            ],
            "users": [{"name": self.user, "user": {"tokenFile": str(self.folder / "token")}}],
            "contexts": [{"name": "sa", "context": {"cluster": "e2e", "user": self.user}}],
            "current-context": "sa",
        }
        path.write_text(json.dumps(config))
        path.chmod(0o600)
        return path


def service_account_login(control_plane: ControlPlane, namespace: str, service_account: str, folder: Path) -> InCluster:
    """A TokenRequest token for the ServiceAccount (`kubectl create token`), written where a pod has it.
    Needs root and `unshare` (skipped without them, failed under CI=true): `InCluster.command` bind-mounts it."""
    lacking = ["root"] if os.geteuid() != 0 else []
    if shutil.which("unshare") is None:
        lacking.append("`unshare` on PATH")
    if lacking:
        missing("the ServiceAccount's in-cluster login needs " + " and ".join(lacking))
    token = control_plane.kubectl(
        "create", "token", service_account, "--namespace", namespace, f"--duration={TOKEN_SECONDS}s"
    ).stdout.strip()
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in (("token", token), ("ca.crt", control_plane.ca_cert.read_text()), ("namespace", namespace)):
        (folder / name).write_text(text)
        (folder / name).chmod(0o600)
    # The bind mount needs a mount point; like the kubelet's, it stays empty on the host.
    SA_DIR.mkdir(parents=True, exist_ok=True)
    return InCluster(folder, "127.0.0.1", control_plane.port, namespace, service_account)


def denied(control_plane: ControlPlane, user: str, after: int) -> list[str]:
    """Every request of `user` since the audit mark `after` that RBAC refused, as `verb resource`."""
    out = []
    for event in control_plane.audit_events(after):
        if event.get("stage") != "ResponseComplete" or (event.get("user") or {}).get("username") != user:
            continue
        if (event.get("responseStatus") or {}).get("code") == 403:
            ref = event.get("objectRef") or {}
            out.append(
                f"{event['verb']} {ref.get('apiGroup', '')}/{ref.get('resource', '')} "
                f"ns={ref.get('namespace', '')} {event.get('requestURI', '')}"
            )
    return out


def kinds(objects: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return sorted((o["kind"], o["metadata"]["name"]) for o in objects)


def pod_specs(objects: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(kind/name, pod spec) of every workload among `objects` (Deployment and CronJob here)."""
    out = []
    for o in objects:
        spec: dict[str, Any] | None = None
        if o["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            spec = o["spec"]["template"]["spec"]
        elif o["kind"] == "CronJob":
            spec = o["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        if spec is not None:
            out.append((f"{o['kind']}/{o['metadata']['name']}", spec))
    return out


def third_party_crd(plural: str) -> Path:
    """A CRD `scripts/k8s-bins` copied out of its Go module (BROKERGROUP_K8S_CRDS, or the default cache)."""
    folder = Path(os.environ.get("BROKERGROUP_K8S_CRDS") or CACHE / "crds")
    found = sorted(folder.glob(f"*_{plural}.yaml"))
    if not found:
        raise FileNotFoundError(f"no CRD for {plural} in {folder}: run `bash scripts/k8s-bins`")
    return found[0]
