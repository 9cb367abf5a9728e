"""`kubectl brokergroup` against the real kube-apiserver: docs/operator.md's plugin commands and README's line run
literally through kubectl's plugin mechanism (the console script on PATH), a switchover that waits for the
operator's election and the master Service, bad input and users without RBAC refused with one line and nothing
changed. Real controllers on 127.0.0.1 stand in for the controller pods (`controlled_group`): the pods exist
(Pending, no kubelet), so the pod proxy to a controller is refused and `status` says so per node."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.dynamic import DynamicClient

from brokergroup.local.controllers import ControllerGroup
from tests.e2e.kubeenv import ControlPlane, eventually
from tests.e2e.kubelet import Kubelet
from tests.e2e.operator.conftest import ADMIN_TOKEN, ControlledGroup, StartOperator
from tests.e2e.operator.helpers import (
    apply,
    brokergroup,
    condition,
    manifest,
    master_id,
    roles,
    set_status,
    wait_granted,
)
from tests.needs import missing

ROOT = Path(__file__).resolve().parents[3]
BG = "bg"
SET = f"{BG}-broker-0"
FENCING_COMMANDS = ["fence", "restart", "unfence", "restart"]
"""docs/operator.md's 'Fencing a broker' block, after the plugin block's six (run on running pods below)."""


def doc_commands(path: Path, start: str, end: str) -> list[str]:
    """The `kubectl brokergroup` lines of the ```bash blocks between `start` and `end` in `path`."""
    text = path.read_text()
    first = text.index(start)
    last = text.find(end, first + len(start))
    body = text[first : last if last != -1 else None]
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", body, flags=re.S):
        for line in block.splitlines():
            command = line.split("#", 1)[0].strip()
            if command.startswith("kubectl brokergroup"):
                lines.append(command)
    return lines


class Plugin:
    """Runs command lines as a user would: kubectl (the control plane's) finds `kubectl-brokergroup` on PATH;
    the user's kubeconfig comes from KUBECONFIG, with its context's namespace set to the test's."""

    def __init__(self, plane: ControlPlane, kubeconfig: Path, namespace: str, cwd: Path) -> None:
        self.plane = plane
        self.cwd = cwd
        self.kubeconfig = cwd / f"{kubeconfig.stem}.{namespace}.kubeconfig"
        shutil.copy(kubeconfig, self.kubeconfig)
        plane.kubectl("config", "set-context", "--current", f"--namespace={namespace}", kubeconfig=self.kubeconfig)

    def run(self, line: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        argv = shlex.split(line)
        assert argv[:2] == ["kubectl", "brokergroup"], line
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        return subprocess.run(
            [str(self.plane.binaries.kubectl), *argv[1:]],
            capture_output=True,
            text=True,
            env=env,
            cwd=self.cwd,
            timeout=timeout,
            check=False,
        )

    def ok(self, line: str) -> str:
        run = self.run(line)
        assert run.returncode == 0, f"{line!r} failed ({run.returncode}):\n{run.stdout}\n{run.stderr}"
        return run.stdout

    def refused(self, line: str, *words: str) -> str:
        run = self.run(line, timeout=60)
        assert run.returncode == 1, f"{line!r} exited {run.returncode}:\n{run.stdout}\n{run.stderr}"
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), f"{line!r} stderr:\n{run.stderr}"
        assert "Traceback" not in run.stderr + run.stdout
        for word in words:
            assert word in lines[0], f"{line!r}: {word!r} not in {lines[0]!r}"
        return lines[0]


@pytest.fixture
def plugin_on_path() -> None:
    if shutil.which("kubectl-brokergroup") is None:
        missing("kubectl-brokergroup is not on PATH: `python3 -m pip install -e .` installs the console script")


def snapshot_of(dyn: DynamicClient, namespace: str) -> tuple[dict[str, str], dict[str, str | None]]:
    """What a refused command must not change: the group's annotations and the set's role labels."""
    annotations = dict(brokergroup(dyn, namespace, BG)["metadata"].get("annotations") or {})
    mine = {k: v for k, v in annotations.items() if not k.startswith(("operator.brokergroup.io/", "kopf."))}
    return mine, roles(dyn, namespace, SET)


def viewer_role(namespace: str, name: str, user: str, verbs_on_groups: list[str]) -> list[dict[str, object]]:
    rules = [
        {"apiGroups": ["brokergroup.io"], "resources": ["brokergroups"], "verbs": verbs_on_groups},
        {
            "apiGroups": [""],
            "resources": ["pods", "services", "events", "persistentvolumeclaims", "configmaps"],
            "verbs": ["get", "list"],
        },
        {"apiGroups": [""], "resources": ["pods/log", "pods/proxy"], "verbs": ["get"]},
        {"apiGroups": ["apps"], "resources": ["statefulsets"], "verbs": ["get", "list"]},
    ]
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": name, "namespace": namespace},
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        },
    ]


@pytest.mark.timeout(600)  # many plugin processes, each a Python start, on a shared machine
def test_documented_commands_bad_input_and_rbac(
    control_plane: ControlPlane,
    namespace: str,
    dyn: DynamicClient,
    controllers: ControllerGroup,
    controlled_group: Callable[..., ControlledGroup],
    tmp_path: Path,
    plugin_on_path: None,
) -> None:
    group = controlled_group(BG, master_ordinal=0)
    ids = group.ids
    eventually(
        "the operator labels the master", lambda: roles(dyn, namespace, SET).get(f"{SET}-0") == "master", timeout=60
    )
    # `status` shows the BrokerGroup's status, which the operator writes after the labels, and the controller's
    # feed may bring the election and the sync-state-set of three in separate cycles: wait for both there too.
    eventually(
        "status names the master and three replicas in sync",
        lambda: (
            (e := set_status(dyn, namespace, BG, SET)).get("masterPod") == f"{SET}-0"
            and len(e.get("syncStateSet") or []) == 3
        ),
        timeout=60,
    )
    admin = Plugin(control_plane, control_plane.admin_kubeconfig, namespace, tmp_path)

    # README's line and docs/operator.md's block, literally and in order.
    readme = doc_commands(ROOT / "README.md", "## Commands", "\n## ")
    documented = doc_commands(ROOT / "docs" / "operator.md", "## kubectl plugin", "\n## ")
    assert readme == ["kubectl brokergroup status bg"], readme
    assert [c.split()[2] for c in documented] == [
        "status",
        "status",
        "switchover",
        "pause",
        "resume",
        "report",
        *FENCING_COMMANDS,
    ]
    for line in readme:
        admin.ok(line)

    status_line, json_line, switch_line, pause_line, resume_line, report_line = documented[:6]
    text = admin.ok(status_line)
    assert f"BrokerGroup {namespace}/{BG}" in text
    assert f"Set {SET}  master {SET}-0" in text, text
    assert re.search(rf"{SET}-2\s+3\s+slave\s+yes\s+yes", text), text
    assert re.search(r"bg-controller-0\s+-\s+unreachable", text), text  # Pending pods: the proxy has nowhere to go
    assert "\x1b[" not in text  # not a terminal: plain
    data = json.loads(admin.ok(json_line))
    first = data["sets"][0]
    assert first["master"] == f"{SET}-0" and sorted(first["sync_state_set"]) == [f"{SET}-{i}" for i in range(3)]
    assert [n["pod"] for n in data["controllers"]] == [f"bg-controller-{i}" for i in range(3)]

    # Bad input: one line, exit 1, nothing changed.
    before = snapshot_of(dyn, namespace)
    admin.refused("kubectl brokergroup status nosuch", "brokergroup nosuch not found in namespace")
    admin.refused("kubectl brokergroup switchover nosuch bg-broker-0-1", "brokergroup nosuch not found")
    admin.refused("kubectl brokergroup pause nosuch", "not found")
    admin.refused("kubectl brokergroup report nosuch", "not found")
    admin.refused("kubectl brokergroup switchover bg bg-broker-0-7", "has 3 replicas")
    admin.refused("kubectl brokergroup switchover bg bg-controller-0", "not a broker pod of brokergroup")
    admin.refused("kubectl brokergroup switchover bg other-broker-0-1", "not a broker pod of brokergroup")
    admin.refused("kubectl brokergroup switchover bg bg-broker-1-0", "not a broker pod", "sets: bg-broker-0")
    admin.refused("kubectl brokergroup switchover bg bg-broker-0-0", "already the master of bg-broker-0")
    assert snapshot_of(dyn, namespace) == before
    assert master_id(controllers, SET) == ids[0]

    # A viewer without Secrets and without patch: status and report work, changes are refused.
    user = "viewer@example.com"
    for doc in viewer_role(namespace, "bg-viewer", user, ["get", "list"]):
        apply(control_plane, namespace, doc)
    wait_granted(control_plane, user, "get", "brokergroups.brokergroup.io", namespace)  # the Role is in force
    viewer = Plugin(control_plane, control_plane.user_kubeconfig(user), namespace, tmp_path)
    can = control_plane.kubectl(
        "auth", "can-i", "get", "secrets", "-n", namespace, kubeconfig=viewer.kubeconfig, check=False
    )
    assert can.stdout.strip() == "no"
    assert f"master {SET}-0" in viewer.ok(status_line)
    viewer.refused(switch_line, "cannot annotate brokergroup", "forbidden (RBAC)", "patch")
    viewer.refused(pause_line, "forbidden (RBAC)", "patch")
    viewer.ok("kubectl brokergroup report bg -f viewer-report.tar.gz")
    # Nobody: no RoleBinding at all.
    nobody = Plugin(control_plane, control_plane.user_kubeconfig("nobody@example.com"), namespace, tmp_path)
    nobody.refused(status_line, "cannot read brokergroup", "forbidden (RBAC)", "nobody@example.com")
    assert snapshot_of(dyn, namespace) == before

    # The switchover: the operator elects, relabels, and the master Service selects the new master.
    out = admin.ok(switch_line)
    steps = out.strip().splitlines()
    assert "requested: brokergroup.io/elect-master=bg-broker-0-1" in steps[0], out
    assert "operator answered: Elected" in steps[1], out
    assert "service bg-broker-0-master selects bg-broker-0-1: switchover done" in steps[-1], out
    assert master_id(controllers, SET) == ids[1]
    assert roles(dyn, namespace, SET)[f"{SET}-1"] == "master"
    # The switchover is done once the label moved; the operator's follower writes status.masterPod (which
    # `status` shows) just after it relabels: poll for it rather than read it once.
    eventually(
        "status shows the new master", lambda: f"master {SET}-1" in admin.ok(status_line), timeout=60, interval=1
    )

    # Pause and resume, as the condition shows; a switchover while paused is refused.
    assert "paused" in admin.ok(pause_line)
    eventually(
        "paused", lambda: condition(dyn, namespace, BG, "ReconciliationPaused").get("status") == "True", timeout=30
    )
    admin.refused("kubectl brokergroup switchover bg bg-broker-0-0", "is paused", "resume")
    assert "paused yes" in admin.ok(status_line)
    admin.ok(resume_line)
    eventually(
        "resumed", lambda: condition(dyn, namespace, BG, "ReconciliationPaused").get("status") == "False", timeout=30
    )

    # The support bundle.
    assert "wrote bg-report.tar.gz" in admin.ok(report_line)
    with tarfile.open(tmp_path / "bg-report.tar.gz") as tar:
        files = {m.name.split("/", 1)[1]: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    for name in ("brokergroup.yaml", "statefulsets.yaml", "services.yaml", "pods.yaml", "pvcs.yaml", "events.yaml"):
        assert name in files, sorted(files)
    assert yaml.safe_load(files["brokergroup.yaml"])["metadata"]["name"] == BG
    pods = yaml.safe_load(files["pods.yaml"])
    assert f"{SET}-1" in {p["metadata"]["name"] for p in pods["items"]}
    events = yaml.safe_load(files["events.yaml"])
    assert events["items"], "no Events in the bundle"
    assert b"bg-controller-0" in files["errors.txt"]  # the controllers' pods do not run here: said, not hidden
    assert not any(ADMIN_TOKEN.encode() in data for data in files.values())


def test_status_and_report_reach_running_controllers_through_the_pod_proxy(
    control_plane: ControlPlane,
    namespace: str,
    kubelet: Kubelet,
    start_operator: StartOperator,
    dyn: DynamicClient,
    tmp_path: Path,
    plugin_on_path: None,
) -> None:
    """The test kubelet runs the controller and broker pods: `status` asks each controller node through the API
    server's pod proxy (no pod network from here, no token) and names the one Raft leader; `report` carries
    each node's status, metrics and event-log files."""
    start_operator("http://{cluster_ip}:9878")
    apply(control_plane, namespace, manifest(BG, {"brokers": {"replicas": 2}}))
    eventually("every pod Ready", lambda: condition(dyn, namespace, BG, "Ready").get("status") == "True", timeout=240)
    admin = Plugin(control_plane, control_plane.admin_kubeconfig, namespace, tmp_path)

    def one_leader() -> dict[str, Any] | None:
        data = json.loads(admin.ok("kubectl brokergroup status bg -o json"))
        nodes = data["controllers"]
        leaders = [n for n in nodes if n["raft_leader"]]
        fine = len(nodes) == 3 and all(n["error"] is None for n in nodes) and len(leaders) == 1
        return data if fine and {n["leader_id"] for n in nodes} == {leaders[0]["node_id"]} else None

    data = eventually("three controller nodes, one Raft leader", one_leader, timeout=60, interval=1)
    assert data["sets"][0]["master"] in {f"{SET}-0", f"{SET}-1"}
    text = admin.ok("kubectl brokergroup status bg")
    assert len(re.findall(r"bg-controller-\d\s+\S+\s+leader\s", text)) == 1, text
    assert "unreachable" not in text, text

    admin.ok("kubectl brokergroup report bg -f bg-report.tar.gz")
    with tarfile.open(tmp_path / "bg-report.tar.gz") as tar:
        names = {m.name.split("/", 1)[1] for m in tar.getmembers() if m.isfile()}
        status = json.loads(tar.extractfile("bg-report/controllers/bg-controller-0/status.json").read())  # type: ignore[union-attr]
        metrics = tar.extractfile("bg-report/controllers/bg-controller-0/metrics.txt").read()  # type: ignore[union-attr]
    assert status["nodeId"] and "raftLeader" in status
    assert b"# TYPE" in metrics
    for ordinal in range(3):
        assert f"controllers/bg-controller-{ordinal}/eventlog.json" in names, sorted(names)
    assert any(n.startswith("controllers/bg-controller-0/eventlog/") for n in names), sorted(names)


@pytest.mark.timeout(900)  # many plugin processes, each a Python start, on a shared machine
def test_fence_restart_unfence_on_running_pods(
    control_plane: ControlPlane,
    namespace: str,
    kubelet: Kubelet,
    start_operator: StartOperator,
    dyn: DynamicClient,
    tmp_path: Path,
    plugin_on_path: None,
) -> None:
    """docs/operator.md's fencing block, literally, on pods the test kubelet runs: the fenced slave leaves its
    master's sync-state-set and shows FENCED, stays fenced across a restart, rejoins once unfenced; restarting
    the master switches over first. Bad input to fence, unfence and restart (an unknown group or pod, a pod of
    another set or of no set, a user without Secrets or without delete) is one line, exit 1, nothing changed."""
    start_operator("http://{cluster_ip}:9878")
    apply(control_plane, namespace, manifest(BG, {"brokers": {"replicas": 2}}))
    eventually("every pod Ready", lambda: condition(dyn, namespace, BG, "Ready").get("status") == "True", timeout=240)
    admin = Plugin(control_plane, control_plane.admin_kubeconfig, namespace, tmp_path)

    def replicas() -> dict[str, dict[str, Any]]:
        data = json.loads(admin.ok("kubectl brokergroup status bg -o json"))
        return {r["pod"]: {**r, "master": data["sets"][0]["master"]} for r in data["sets"][0]["replicas"]}

    def settled() -> dict[str, dict[str, Any]] | None:
        now = replicas()
        fine = len(now) == 2 and all(
            r["lag"] is not None and r["fenced"] is False and r["in_sync"] for r in now.values()
        )
        return now if fine else None

    now = eventually("both brokers answer through the pod proxy, in sync", settled, timeout=120, interval=1)
    if now[f"{SET}-0"]["master"] != f"{SET}-0":
        admin.ok(f"kubectl brokergroup switchover bg {SET}-0")
        eventually(
            "bg-broker-0-0 is master",
            lambda: (settled() or {}).get(f"{SET}-0", {}).get("master") == f"{SET}-0",
            timeout=120,
            interval=1,
        )
    text = admin.ok("kubectl brokergroup status bg")
    assert re.search(rf"{SET}-0\s+\d+\s+master\s+yes\s+yes\s+0\s+no", text), text

    def uids() -> dict[str, str]:
        pods = control_plane.kubectl("get", "pods", "-n", namespace, "-o", "json").stdout
        return {p["metadata"]["name"]: p["metadata"]["uid"] for p in json.loads(pods)["items"]}

    # Bad input: one line, exit 1, nothing changed (no pod restarted, nobody fenced).
    before = uids()
    admin.refused(f"kubectl brokergroup fence nosuch {SET}-1", "brokergroup nosuch not found")
    admin.refused("kubectl brokergroup fence bg bg-broker-0-7", "has 2 replicas")
    admin.refused("kubectl brokergroup unfence bg bg-controller-0", "not a broker pod of brokergroup")
    admin.refused("kubectl brokergroup fence bg bg-broker-1-0", "not a broker pod", "sets: bg-broker-0")
    admin.refused("kubectl brokergroup unfence bg other-broker-0-1", "not a broker pod of brokergroup")
    admin.refused(f"kubectl brokergroup restart nosuch {SET}-1", "brokergroup nosuch not found")
    admin.refused("kubectl brokergroup restart bg bg-broker-0-5", "has 2 replicas")
    admin.refused("kubectl brokergroup restart bg nosuch-pod", "not a broker pod of brokergroup")
    admin.refused("kubectl brokergroup restart bg bg-controller-7", "pod bg-controller-7 not found")
    user = "viewer@example.com"
    for doc in viewer_role(namespace, "bg-viewer", user, ["get", "list", "patch"]):
        apply(control_plane, namespace, doc)
    wait_granted(control_plane, user, "get", "brokergroups.brokergroup.io", namespace)  # the Role is in force
    viewer = Plugin(control_plane, control_plane.user_kubeconfig(user), namespace, tmp_path)
    viewer.refused(
        f"kubectl brokergroup fence bg {SET}-1", "cannot read secret", "bg-controller-auth", "forbidden (RBAC)"
    )
    viewer.refused(f"kubectl brokergroup restart bg {SET}-1", "cannot delete pod", "forbidden (RBAC)")
    assert uids() == before
    assert not any(r["fenced"] for r in replicas().values())

    # docs/operator.md's block, literally and in order.
    fence_line, restart_fenced_line, unfence_line, restart_master_line = doc_commands(
        ROOT / "docs" / "operator.md", "## kubectl plugin", "\n## "
    )[6:]
    out = admin.ok(fence_line)
    assert f"{SET}-1 (slave) fenced" in out and f"{SET}-1 is out of the sync-state-set of {SET}" in out, out
    fenced = eventually("status shows the fence", lambda: replicas()[f"{SET}-1"]["fenced"], timeout=60, interval=1)
    assert fenced
    assert re.search(rf"{SET}-1\s+\d+\s+slave\s+\S+\s+\S+\s+\S+\s+yes", admin.ok("kubectl brokergroup status bg"))

    out = admin.ok(restart_fenced_line)
    assert f"deleted pod {SET}-1" in out and "running again (fenced" in out, out
    assert uids()[f"{SET}-1"] != before[f"{SET}-1"]
    eventually(
        "the restarted broker is still fenced",
        lambda: replicas()[f"{SET}-1"]["fenced"] is True,
        timeout=120,
        interval=1,
    )

    out = admin.ok(unfence_line)
    assert f"{SET}-1 (slave) unfenced" in out and f"{SET}-1 is back in the sync-state-set of {SET}" in out, out
    eventually("all ready and in sync", settled, timeout=120, interval=1)
    eventually(
        "the operator counts both ready",
        lambda: brokergroup(dyn, namespace, BG)["status"]["brokerSets"][0].get("readyReplicas") == 2,
        timeout=60,
    )

    out = admin.ok(restart_master_line)
    steps = out.strip().splitlines()
    assert f"{SET}-0 is the master of {SET}: switching over to {SET}-1 first" in steps[0], out
    assert any("operator answered: Elected" in s for s in steps), out
    assert f"deleted pod {SET}-0" in out and "Ready again: restart done" in steps[-1], out
    assert roles(dyn, namespace, SET)[f"{SET}-1"] == "master"
