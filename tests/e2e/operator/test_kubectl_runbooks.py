"""docs/operations.md's Kubernetes runbooks, each block run literally (bash, in a namespace set as the
context's, the plugin and the control plane's kubectl on PATH) on pods the test kubelet runs: the event logs
come out of every controller, and a rotated admin token is in force once the controllers restarted (a
switchover, which the operator asks of the controllers with the admin token, succeeds)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes.dynamic import DynamicClient

from brokergroup.broker.client import Consumer, MasterFinder, ProduceError, Producer
from tests.e2e.kubeenv import ControlPlane, eventually
from tests.e2e.kubelet import Kubelet
from tests.e2e.operator.conftest import StartOperator
from tests.e2e.operator.helpers import (
    apply,
    brokergroup,
    condition,
    event_reasons,
    get,
    manifest,
    roles,
    wait_granted,
)
from tests.e2e.operator.test_kubectl_plugin import BG, SET, Plugin, viewer_role

ROOT = Path(__file__).resolve().parents[3]
OPERATIONS_MD = ROOT / "docs" / "operations.md"


def runbooks() -> dict[str, list[str]]:
    """`### title` -> its ```bash blocks, in the section `## Kubernetes runbooks` of operations.md."""
    text = OPERATIONS_MD.read_text()
    start = text.index("## Kubernetes runbooks")
    end = text.index("\n## ", start + 1)
    out: dict[str, list[str]] = {}
    for part in re.split(r"\n### ", text[start:end])[1:]:
        title, _, body = part.partition("\n")
        out[title.strip()] = re.findall(r"```bash\n(.*?)```", body, flags=re.S)
    return out


def run_block(plugin: Plugin, block: str, timeout: float = 1500) -> str:
    env = {
        **os.environ,
        "KUBECONFIG": str(plugin.kubeconfig),
        "PATH": f"{plugin.plane.binaries.kubectl.parent}{os.pathsep}{os.environ['PATH']}",
    }
    run = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block],
        capture_output=True,
        text=True,
        env=env,
        cwd=plugin.cwd,
        timeout=timeout,
        check=False,
    )
    assert run.returncode == 0, f"{block}\nexited {run.returncode}:\n{run.stdout}\n{run.stderr}"
    return run.stdout


@pytest.mark.timeout(2100)  # a group on the test kubelet, three controller restarts, on a shared machine
def test_kubernetes_runbooks_run_as_written(
    control_plane: ControlPlane,
    namespace: str,
    kubelet: Kubelet,
    start_operator: StartOperator,
    dyn: DynamicClient,
    tmp_path: Path,
) -> None:
    books = runbooks()
    # Volumes that grow, or that are lost for good, need a real node: realnode/test_operator.py runs those two.
    assert list(books) == [
        "Get the event logs out",
        "Rotate the admin token",
        "Recover a set whose replicas are all gone",
        "Remove a broker set",
        "Grow the data volumes",
    ], list(books)
    start_operator("http://{cluster_ip}:9878")
    apply(control_plane, namespace, manifest(BG, {"brokers": {"replicas": 2}}))
    eventually("every pod Ready", lambda: condition(dyn, namespace, BG, "Ready").get("status") == "True", timeout=240)
    admin = Plugin(control_plane, control_plane.admin_kubeconfig, namespace, tmp_path)

    # Get the event logs out: every controller's files are in the bundle, as JSON lines.
    (logs,) = books["Get the event logs out"]
    out = run_block(admin, logs).splitlines()
    assert out[0].startswith("wrote bg-report.tar.gz"), out
    listed = " ".join(out[1:]).split()  # ls's output
    assert listed and all(name.startswith("events-") and name.endswith(".jsonl") for name in listed), out
    for ordinal in range(3):
        folder = tmp_path / "bg-report" / "controllers" / f"bg-controller-{ordinal}" / "eventlog"
        files = sorted(folder.iterdir())
        assert files, folder
        first = json.loads(files[0].read_text().splitlines()[0])
        assert first.get("eventId") is not None, first

    # Rotate the admin token: a new value, every controller restarted with it, and it works.
    def secret_token() -> str:
        secret = get(dyn, "v1", "Secret", namespace, f"{BG}-controller-auth") or {}
        return base64.b64decode(secret["data"]["adminToken"]).decode()

    def controller_uids() -> dict[str, str]:
        pods = json.loads(control_plane.kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)["items"]
        return {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods if "-controller-" in p["metadata"]["name"]}

    old_token, old_uids = secret_token(), controller_uids()
    (rotate,) = books["Rotate the admin token"]
    run_block(admin, rotate)
    assert secret_token() != old_token and len(secret_token()) >= 40
    new_uids = controller_uids()
    assert set(new_uids) == set(old_uids) and not set(new_uids.values()) & set(old_uids.values()), new_uids
    eventually("Ready again", lambda: condition(dyn, namespace, BG, "Ready").get("status") == "True", timeout=240)
    master = next(pod for pod, role in roles(dyn, namespace, SET).items() if role == "master")
    other = f"{SET}-1" if master == f"{SET}-0" else f"{SET}-0"
    out = admin.ok(f"kubectl brokergroup switchover bg {other}")
    assert "operator answered: Elected" in out and "switchover done" in out, out


async def produce_to(address: str, sts: str, bodies: list[bytes], topic: str = "orders") -> None:
    async with aiohttp.ClientSession() as session:
        producer = Producer(MasterFinder(broker_name=sts, master_address=address), session=session, deadline_s=30)
        await producer.send(topic, bodies)


async def read_and_commit(address: str, sts: str, group: str, count: int, topic: str = "orders") -> list[bytes]:
    """Up to `count` messages of `topic` for consumer group `group`, from its committed offset, then commit."""
    async with aiohttp.ClientSession() as session:
        consumer = Consumer(MasterFinder(broker_name=sts, master_address=address), group=group, session=session)
        batch = await consumer.poll(topic, max_count=count)
        await consumer.commit(topic)
        return [m.body for m in batch]


@pytest.mark.timeout(1200)
def test_remove_a_broker_set_runbook(
    control_plane: ControlPlane,
    namespace: str,
    kubelet: Kubelet,
    start_operator: StartOperator,
    dyn: DynamicClient,
    tmp_path: Path,
) -> None:
    """ "Remove a broker set", literally, after the refusals a user meets first: the set's writes stop, a consumer
    group still behind stops the command (it names the group; nothing is released; `--cancel` gives the writes
    back), and once the group caught up the block releases and removes the set and deletes its claims."""
    (block,) = runbooks()["Remove a broker set"]
    start_operator("http://{cluster_ip}:9878")
    apply(control_plane, namespace, manifest(BG, {"brokers": {"sets": 2, "replicas": 1, "minInSyncReplicas": 1}}))
    eventually("every pod Ready", lambda: condition(dyn, namespace, BG, "Ready").get("status") == "True", timeout=240)
    admin = Plugin(control_plane, control_plane.admin_kubeconfig, namespace, tmp_path)
    last = f"{BG}-broker-1"
    address = f"{(get(dyn, 'v1', 'Service', namespace, f'{last}-master') or {})['spec']['clusterIP']}:10911"
    asyncio.run(produce_to(address, last, [f"m{i}".encode() for i in range(5)]))
    assert asyncio.run(read_and_commit(address, last, "app", 2)) == [b"m0", b"m1"]
    asyncio.run(produce_to(address, last, [b"a0"], topic="audit"))  # a topic no group has read yet

    # Bad input first: nothing changes.
    admin.refused("kubectl brokergroup remove-set nosuch", "brokergroup nosuch not found")
    user = "viewer@example.com"
    for doc in viewer_role(namespace, "bg-viewer", user, ["get", "list", "patch"]):
        apply(control_plane, namespace, doc)
    wait_granted(control_plane, user, "get", "brokergroups.brokergroup.io", namespace)  # the Role is in force
    viewer = Plugin(control_plane, control_plane.user_kubeconfig(user), namespace, tmp_path)
    viewer.refused("kubectl brokergroup remove-set bg", "cannot read secret", "bg-controller-auth", "forbidden (RBAC)")
    control_plane.kubectl("annotate", "-n", namespace, "bg", BG, f"brokergroup.io/release-set={BG}-broker-0")
    eventually("ReleaseSetRefused", lambda: "ReleaseSetRefused" in event_reasons(dyn, namespace, BG), timeout=60)
    assert brokergroup(dyn, namespace, BG)["status"]["setsHoldingData"] == 2

    # A topic no group ever read from: the lag cannot vouch for it, so the command stops and names it.
    admin.refused("kubectl brokergroup remove-set bg", "topics no consumer group has read from (audit)")
    assert asyncio.run(read_and_commit(address, last, "auditor", 10, topic="audit")) == [b"a0"]
    # A consumer group is behind: the command stops, names it, and leaves the set read-only.
    line = admin.refused("kubectl brokergroup remove-set bg", f"{last} still holds 3 unconsumed messages")
    assert "group app topic orders queue 0: 3" in line, line
    with pytest.raises(ProduceError, match="read-only"):
        asyncio.run(produce_to(address, last, [b"refused"]))
    bg = brokergroup(dyn, namespace, BG)
    assert bg["spec"]["brokers"]["sets"] == 2 and bg["status"]["setsHoldingData"] == 2
    assert "released" not in next(e for e in bg["status"]["brokerSets"] if e["name"] == last)
    out = admin.ok("kubectl brokergroup remove-set bg --cancel")
    assert f"{last}-0 (master) takes writes again" in out, out
    asyncio.run(produce_to(address, last, [b"m5"]))
    assert asyncio.run(read_and_commit(address, last, "app", 100)) == [b"m2", b"m3", b"m4", b"m5"]

    # The runbook, literally: released, removed, its claims deleted; the other set serves on.
    out = run_block(admin, block)
    assert "every consumer group has read everything" in out and f"{last} released by the operator" in out, out
    assert "spec.brokers.sets: 2 -> 1" in out, out
    assert f"{last} removed; its PersistentVolumeClaims are kept: data-{last}-0" in out, out
    assert f'persistentvolumeclaim "data-{last}-0" deleted' in out, out
    assert get(dyn, "apps/v1", "StatefulSet", namespace, last) is None
    assert get(dyn, "v1", "PersistentVolumeClaim", namespace, f"data-{last}-0") is None
    # The command returns once the StatefulSet is gone; the operator's same cycle deletes the set's other
    # children one by one and then writes the status: poll for those rather than read them once.
    eventually(f"{last}-master pruned", lambda: get(dyn, "v1", "Service", namespace, f"{last}-master") is None)

    def one_set_in_status() -> dict[str, Any] | None:
        now = brokergroup(dyn, namespace, BG)
        listed = [e["name"] for e in (now.get("status") or {}).get("brokerSets") or []]
        return now if listed == [f"{BG}-broker-0"] else None

    bg = eventually("the status lists one set", one_set_in_status)
    assert bg["spec"]["brokers"]["sets"] == 1 and bg["status"]["setsHoldingData"] == 1
    assert [e["name"] for e in bg["status"]["brokerSets"]] == [f"{BG}-broker-0"]
    eventually("a SetReleased Event", lambda: "SetReleased" in event_reasons(dyn, namespace, BG))
    eventually(
        "Ready with one set", lambda: condition(dyn, namespace, BG, "Ready").get("status") == "True", timeout=120
    )
    admin.refused("kubectl brokergroup remove-set bg", "bg has one broker set, and a BrokerGroup keeps at least one")
