"""docs/operator.md's 'Install and run' block, literally, from a workstation: `brokergroup operator --kubeconfig
~/.kube/config --namespace mq` outside the cluster (no KUBERNETES_SERVICE_HOST, no `--controller-url`) reaches the
controllers of `examples/minimal.yaml` through the API server's service proxy, on pods the test kubelet runs. The
root namespace resolves no cluster names, so the old default (the Service's DNS name) never labelled a master.

The user is a ServiceAccount token in ~/.kube/config (a bearer credential: the API server takes `Authorization`
for itself, so the admin token of a forced election travels in `X-Brokergroup-Token`); then the same operator
line with a client-certificate kubeconfig (TLS client auth, no `Authorization` at all) asks a second election.
No broker reaches the API server here (no `pod_api`): every role label is the operator's doing."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest
import yaml
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from brokergroup.local.ports import free_ports
from brokergroup.local.processes import LocalProcess, tail
from tests.e2e.helmchart import InCluster
from tests.e2e.kubeenv import ControlPlane, eventually
from tests.e2e.kubelet import Kubelet
from tests.e2e.operator.helpers import condition, roles, set_status

ROOT = Path(__file__).resolve().parents[3]
OPERATOR_MD = ROOT / "docs" / "operator.md"
NAMESPACE = "mq"  # the docs' namespace
BG = "demo"  # examples/minimal.yaml
SET = f"{BG}-broker-0"
OPERATOR_LINE = "brokergroup operator --kubeconfig ~/.kube/config --namespace mq"


def install_block() -> list[str]:
    """The command lines of the first ```bash block under '## Install and run' in docs/operator.md."""
    text = OPERATOR_MD.read_text()
    start = text.index("## Install and run")
    match = re.search(r"```bash\n(.*?)```", text[start:], flags=re.S)
    assert match, "docs/operator.md: no bash block under '## Install and run'"
    return [line for line in match.group(1).splitlines() if line.split("#", 1)[0].strip()]


@pytest.fixture
def namespace(kube_api: kubernetes.client.ApiClient) -> Iterator[str]:
    """The docs' namespace `mq` (this file's override of the e2e `namespace`, so the kubelet runs its pods)."""
    core = kubernetes.client.CoreV1Api(kube_api)
    core.create_namespace({"metadata": {"name": NAMESPACE, "labels": {"brokergroup.test/e2e": "true"}}})
    try:
        eventually(
            f"ServiceAccount {NAMESPACE}/default exists",
            lambda: core.list_namespaced_service_account(NAMESPACE, field_selector="metadata.name=default").items,
            timeout=30,
        )
        yield NAMESPACE
    finally:
        try:
            core.delete_namespace(NAMESPACE)
        except ApiException as exc:
            if exc.status != 404:
                raise


@pytest.fixture
def token_user(control_plane: ControlPlane, namespace: str, tmp_path: Path) -> Iterator[Path]:
    """A kubeconfig with a bearer token (a ServiceAccount bound to cluster-admin, as a developer's own cluster
    login would be), the token written inline as `kubectl config` would."""
    name = f"workstation-{secrets.token_hex(3)}"
    control_plane.kubectl("create", "serviceaccount", name, "-n", namespace)
    binding = f"{name}-cluster-admin"
    control_plane.kubectl(
        "create", "clusterrolebinding", binding, "--clusterrole=cluster-admin", f"--serviceaccount={namespace}:{name}"
    )
    try:
        token = control_plane.kubectl("create", "token", name, "-n", namespace, "--duration=3600s").stdout.strip()
        login = InCluster(tmp_path, "127.0.0.1", control_plane.port, namespace, name)
        path = login.kubeconfig(tmp_path / "token.kubeconfig")
        config = yaml.safe_load(path.read_text())
        config["clusters"][0]["cluster"]["certificate-authority"] = str(control_plane.ca_cert)
        config["users"][0]["user"] = {"token": token}
        path.write_text(yaml.safe_dump(config))
        yield path
    finally:
        control_plane.kubectl("delete", "clusterrolebinding", binding, "--ignore-not-found")


class Workstation:
    """Runs docs lines as a user at a workstation would: HOME holds ~/.kube/config, the control plane's kubectl
    and `brokergroup` on PATH, no in-cluster variables, the repository as working directory."""

    def __init__(self, plane: ControlPlane, home: Path) -> None:
        self.plane = plane
        self.home = home
        self.metrics_port, self.liveness_port = free_ports(2)  # the docs' defaults (8080/8081) may be taken
        self.package_path = home / "site"
        self.package_path.mkdir(parents=True, exist_ok=True)
        (self.package_path / "brokergroup").symlink_to(ROOT / "brokergroup")

    def login(self, kubeconfig: Path) -> None:
        (self.home / ".kube").mkdir(parents=True, exist_ok=True)
        (self.home / ".kube" / "config").write_text(kubeconfig.read_text())

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_") and k != "KUBECONFIG"}
        return {
            **env,
            "HOME": str(self.home),
            "PATH": f"{self.plane.binaries.kubectl.parent}{os.pathsep}{os.environ['PATH']}",
            "BG_OPERATOR_METRICS_PORT": str(self.metrics_port),
            "BG_OPERATOR_LIVENESS_PORT": str(self.liveness_port),
            "BG_OPERATOR_RETRY_SECONDS": "1",
            # The console script imports the package as installed; this makes it this checkout's even where the
            # editable install points elsewhere (the repository root itself cannot go on the path: its
            # `operator/` would shadow the standard library's `operator`).
            "PYTHONPATH": str(self.package_path),
        }

    def run(self, line: str) -> str:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", line],
            capture_output=True,
            text=True,
            env=self.env(),
            cwd=ROOT,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, f"{line!r} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def start(self, line: str, log: Path) -> LocalProcess:
        """`line` as a process (bash execs its one command, so stopping the process stops the operator)."""
        process = LocalProcess(name="operator", data_dir=log.parent / "operator", log_path=log)
        # LocalProcess adds os.environ under `env`: `env -i` keeps exactly ours.
        process.spawn(["env", "-i", *(f"{k}={v}" for k, v in self.env().items()), "bash", "-c", line], {})
        return process


def running(operator: LocalProcess) -> None:
    if not operator.running:
        raise AssertionError("operator exited:\n" + tail(operator.log_path, 40))


def master(dyn: DynamicClient) -> str | None:
    """The set's master once the operator's status and the role labels agree on one pod."""
    entry = set_status(dyn, NAMESPACE, BG, SET)
    labelled = sorted(p for p, r in roles(dyn, NAMESPACE, SET).items() if r == "master")
    return str(entry["masterPod"]) if entry.get("masterPod") and labelled == [entry["masterPod"]] else None


def other_in_sync(dyn: DynamicClient, current: str) -> str | None:
    members = [p for p in set_status(dyn, NAMESPACE, BG, SET).get("syncStateSet") or [] if p != current]
    return members[0] if members else None


def force_election(plane: ControlPlane, dyn: DynamicClient, operator: LocalProcess) -> str:
    """Annotate for a forced election of another in-sync replica; the operator's result must be Elected."""
    current = eventually("a master", lambda: master(dyn), timeout=60)
    target = eventually("another replica in sync", lambda: other_in_sync(dyn, current), timeout=120)
    plane.kubectl("annotate", "-n", NAMESPACE, "bg", BG, f"brokergroup.io/elect-master={target}")

    def elected() -> bool:
        running(operator)
        record = set_status(dyn, NAMESPACE, BG, SET).get("lastElection") or {}
        if record.get("target") != target or record.get("result") == "Pending":
            return False
        assert record.get("result") == "Elected", f"{record}\noperator log:\n{tail(operator.log_path, 40)}"
        return master(dyn) == target

    eventually(f"{target} elected and labelled master", elected, timeout=90)
    return target


def proxied(plane: ControlPlane, user: str, after: int) -> list[tuple[str, int]]:
    """(verb, HTTP code) of each completed service-proxy request of `user` to the controller API since `after`."""
    out = []
    for event in plane.audit_events(after):
        ref = event.get("objectRef") or {}
        if (
            event.get("stage") == "ResponseComplete"
            and event.get("user", {}).get("username") == user
            and (ref.get("resource"), ref.get("subresource")) == ("services", "proxy")
            and f"{BG}-controller-api" in str(ref.get("name"))
        ):
            out.append((str(event.get("verb")), int(event.get("responseStatus", {}).get("code", 0))))
    return out


@pytest.mark.timeout(900)  # a group of 3 controllers and 3 brokers on the test kubelet, on a shared machine
def test_install_block_from_a_workstation_reaches_the_controllers_through_the_service_proxy(
    control_plane: ControlPlane,
    namespace: str,
    kubelet: Kubelet,
    token_user: Path,
    dyn: DynamicClient,
    tmp_path: Path,
) -> None:
    lines = install_block()
    assert OPERATOR_LINE in [line.split("#", 1)[0].strip() for line in lines], lines
    station = Workstation(control_plane, tmp_path / "home")
    station.login(token_user)
    user = str(yaml.safe_load(token_user.read_text())["users"][0]["name"])  # system:serviceaccount:mq:<name>
    mark = control_plane.mark()

    operator: LocalProcess | None = None
    try:
        for line in lines:  # literally and in order; the operator line keeps running
            if line.split("#", 1)[0].strip() == OPERATOR_LINE:
                operator = station.start(line, tmp_path / "operator-token.log")
            else:
                out = station.run(line)
                if line.startswith("kubectl get bg"):
                    assert out.split()[:5] == ["NAME", "READY", "MASTERS", "SETS", "AGE"], out
        assert operator is not None

        op = operator

        def masters_elected() -> bool:
            running(op)
            return condition(dyn, NAMESPACE, BG, "MastersElected").get("status") == "True"

        eventually("MastersElected (the operator read the controller through the proxy)", masters_elected, timeout=300)
        first = eventually("the master labelled by the operator", lambda: master(dyn), timeout=60)
        print(f"\nmaster {first} labelled")
        second = force_election(control_plane, dyn, operator)
        print(f"forced election (token login): {second}")
        calls = proxied(control_plane, user, mark)
        assert ("create", 200) in calls, calls  # elect-master and sync-state-data are POSTs
        assert ("get", 200) in calls, calls  # the event feed's long poll and the metadata
        # 503s come while no controller pod is Ready (no endpoints); a refused credential would be a 401 or 403.
        assert not [c for c in calls if c[1] in (401, 403)], calls
    finally:
        if operator is not None:
            operator.stop(timeout=20)
    assert "Traceback" not in operator.log_path.read_text(), tail(operator.log_path, 60)

    # The same line with a client-certificate login: no Authorization header at all, TLS client auth.
    station.login(control_plane.user_kubeconfig("workstation-cert", groups=["system:masters"]))
    mark = control_plane.mark()
    operator = station.start(OPERATOR_LINE, tmp_path / "operator-cert.log")
    try:
        third = force_election(control_plane, dyn, operator)
        print(f"forced election (certificate login): {third}")
        calls = proxied(control_plane, "workstation-cert", mark)
        assert ("create", 200) in calls and not [c for c in calls if c[1] in (401, 403)], calls
    finally:
        operator.stop(timeout=20)
