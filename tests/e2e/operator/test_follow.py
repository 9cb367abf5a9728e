"""The operator following real elections: a BrokerGroup of 3 controllers and 2 sets x 3 brokers,
every process started by the test kubelet from the pod specs the operator wrote, the operator with the
chart's default resync (values.yaml `operator.resyncSeconds`): only events wake it.

One test, in phases over the same group (it takes a minute to come up): election, forced
election through the annotation with messages produced through the master Service before and
after, kill -9 of a master's process, and a master-last rolling update (wall time, each pod's own
restart time and the order recorded). A watch records every pod change; at no point may two pods of
a set carry `role=master` (the brokers label their own pods too: a new master demotes the master it
followed before it labels itself).

The failover follows the controller's election, whatever it elects: the test kubelet restarts a killed
container after 0.5 s, and a master killed while it is the only member of its sync-state-set is the
only electable replica, so the controller elects it again once it is back (it did, in the runs that
once made this test a strict xfail: the set's status then named the restarted pod, correctly). The
test waits for a full sync-state-set before the kill, so another replica is normally elected.
"""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import aiohttp
import kubernetes
import pytest
import yaml
from kubernetes.dynamic import DynamicClient

from brokergroup.broker.client import Consumer, MasterFinder, Producer
from tests.e2e import helmchart
from tests.e2e.kubeenv import ControlPlane, eventually
from tests.e2e.kubelet import Kubelet
from tests.e2e.operator.conftest import StartOperator
from tests.e2e.operator.convergence import elections, pod_of_dns_address
from tests.e2e.operator.helpers import (
    ROLE,
    SET,
    apply,
    brokergroup,
    condition,
    event_reasons,
    get,
    manifest,
    roles,
    set_status,
)
from tests.e2e.operator.podapi import pod_api  # noqa: F401 (a fixture)

BG = "follow"
SETS = (f"{BG}-broker-0", f"{BG}-broker-1")
CHART_RESYNC_SECONDS = float(yaml.safe_load((helmchart.CHART / "values.yaml").read_text())["operator"]["resyncSeconds"])


@dataclass
class LabelLog:
    """Every role-label change of the group's broker pods, in the API server's order."""

    changes: list[tuple[float, str, str, str | None]] = field(default_factory=list)
    """(monotonic time, set, pod, role)."""
    states: list[tuple[float, str, str, str, bool, bool]] = field(default_factory=list)
    """(monotonic time, set, pod, uid, Ready, terminating or deleted) on every change of either."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)

    def masters_over_time(self) -> list[tuple[float, str, list[str]]]:
        roles: dict[str, tuple[str, str | None]] = {}
        out = []
        with self.lock:
            for at, sts, pod, role in self.changes:
                roles[pod] = (sts, role)
                for s in SETS:
                    out.append((at, s, sorted(p for p, (ps, r) in roles.items() if ps == s and r == "master")))
        return out

    def first_master_since(self, sts: str, since: float, other_than: str) -> float | None:
        with self.lock:
            for at, s, pod, role in self.changes:
                if at >= since and s == sts and role == "master" and pod != other_than:
                    return at
        return None


def watch_labels(api: kubernetes.client.ApiClient, namespace: str, log: LabelLog) -> None:
    core = kubernetes.client.CoreV1Api(api)
    seen: dict[str, str | None] = {}
    states: dict[str, tuple[str, bool, bool]] = {}
    version = None
    while not log.stop.is_set():
        stream = kubernetes.watch.Watch()
        try:
            for event in stream.stream(
                core.list_namespaced_pod,
                namespace,
                label_selector="app.kubernetes.io/component=broker",
                resource_version=version,
                timeout_seconds=5,
            ):
                pod = event["object"]
                version = pod.metadata.resource_version
                name = pod.metadata.name
                role = (pod.metadata.labels or {}).get(ROLE) if event["type"] != "DELETED" else None
                sts = (pod.metadata.labels or {}).get(SET, "")
                if seen.get(name, "unset") != role:
                    seen[name] = role
                    with log.lock:
                        log.changes.append((time.monotonic(), sts, name, role))
                ready = event["type"] != "DELETED" and any(
                    c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or [])
                )
                state = (pod.metadata.uid, ready, event["type"] == "DELETED" or bool(pod.metadata.deletion_timestamp))
                if states.get(name) != state:
                    states[name] = state
                    with log.lock:
                        log.states.append((time.monotonic(), sts, name, *state))
                if log.stop.is_set():
                    break
        except kubernetes.client.exceptions.ApiException as exc:
            if exc.status == 410:
                version = None
                continue
            raise
        finally:
            stream.stop()


@pytest.fixture
def label_log(kube_api: kubernetes.client.ApiClient, namespace: str) -> Iterator[LabelLog]:
    log = LabelLog()
    thread = threading.Thread(target=watch_labels, args=(kube_api, namespace, log), daemon=True)
    thread.start()
    yield log
    log.stop.set()
    thread.join(timeout=10)


def labelled_masters(dyn: DynamicClient, namespace: str, sts: str) -> list[str]:
    return sorted(pod for pod, role in roles(dyn, namespace, sts).items() if role == "master")


def master_service_ip(dyn: DynamicClient, namespace: str, sts: str) -> str:
    svc = get(dyn, "v1", "Service", namespace, f"{sts}-master")
    assert svc is not None
    return str(svc["spec"]["clusterIP"])


def master_slice_ips(dyn: DynamicClient, namespace: str, sts: str) -> list[str]:
    slices = dyn.resources.get(api_version="discovery.k8s.io/v1", kind="EndpointSlice").get(
        namespace=namespace, label_selector=f"kubernetes.io/service-name={sts}-master"
    )
    return [a for s in slices.items for e in (s.endpoints or []) for a in e.addresses]


async def produce(address: str, sts: str, bodies: list[bytes]) -> None:
    async with aiohttp.ClientSession() as session:
        producer = Producer(MasterFinder(broker_name=sts, master_address=address), session=session, deadline_s=60)
        for body in bodies:
            await producer.send("orders", [body])


async def consume_all(address: str, sts: str) -> list[bytes]:
    async with aiohttp.ClientSession() as session:
        consumer = Consumer(MasterFinder(broker_name=sts, master_address=address), group="e2e", session=session)
        out: list[bytes] = []
        while batch := await consumer.poll("orders", max_count=256):
            out.extend(m.body for m in batch)
        return out


def rollout_state(dyn: DynamicClient, namespace: str) -> str:
    lines = [f"events: {event_reasons(dyn, namespace, BG)}"]
    for s in SETS:
        live = get(dyn, "apps/v1", "StatefulSet", namespace, s) or {}
        lines.append(f"{s}: update {(live.get('status') or {}).get('updateRevision')} status {live.get('status')}")
        for p in (
            dyn.resources.get(api_version="v1", kind="Pod").get(namespace=namespace, label_selector=f"{SET}={s}").items
        ):
            ready = [c.status for c in (p.status.conditions or []) if c.type == "Ready"]
            lines.append(
                f"  {p.metadata.name} {(p.metadata.labels or {}).get('controller-revision-hash')} "
                f"role={(p.metadata.labels or {}).get(ROLE)} ready={ready} del={p.metadata.deletionTimestamp}"
            )
    lines.append(json.dumps(brokergroup(dyn, namespace, BG).get("status"), indent=1)[:3000])
    return "\n".join(lines)


@dataclass(frozen=True)
class PodRoll:
    pod: str
    deleted: float
    """Monotonic time the old pod was seen terminating."""
    ready: float
    """Monotonic time its replacement (another uid) was seen Ready."""
    was_master: bool
    """The old pod carried `role=master` when the roll began."""
    labelled_master_when_deleted: bool


def rolls(log: LabelLog, sts: str, since: float, masters: dict[str, str | None]) -> list[PodRoll]:
    """Each pod of `sts` deleted after `since` and its replacement's first Ready, in deletion order."""
    with log.lock:
        states = [s for s in log.states if s[1] == sts]
        changes = [c for c in log.changes if c[1] == sts]
    out = []
    for name in sorted({s[2] for s in states}):
        mine = [(t, uid, ready, gone) for t, _, pod, uid, ready, gone in states if pod == name]
        old_uid = next((uid for t, uid, _, _ in reversed(mine) if t < since), None)
        deleted = next((t for t, uid, _, gone in mine if t >= since and uid == old_uid and gone), None)
        if deleted is None:
            continue
        ready = next((t for t, uid, ok, _ in mine if t > deleted and uid != old_uid and ok), None)
        assert ready is not None, f"{name}: deleted at {deleted:.1f} and never back Ready"
        role_then = next((r for t, _, pod, r in reversed(changes) if pod == name and t <= deleted), None)
        out.append(PodRoll(name, deleted, ready, masters.get(sts) == name, role_then == "master"))
    return sorted(out, key=lambda r: r.deleted)


def converged(dyn: DynamicClient, namespace: str, sts: str) -> str | None:
    """The master pod once status, labels and the controller's view agree on exactly one."""
    entry = set_status(dyn, namespace, BG, sts)
    masters = labelled_masters(dyn, namespace, sts)
    if entry.get("masterPod") and masters == [entry["masterPod"]]:
        return str(entry["masterPod"])
    return None


@pytest.mark.timeout(900)
def test_labels_and_master_services_follow_elections_failover_and_a_master_last_roll(
    control_plane: ControlPlane,
    namespace: str,
    kubelet: Kubelet,
    start_operator: StartOperator,
    dyn: DynamicClient,
    label_log: LabelLog,
    pod_api: str,  # noqa: F811 (brokers reach the API server and label their own pods, as on a real node)
) -> None:
    operator = start_operator("http://{cluster_ip}:9878", resync_seconds=CHART_RESYNC_SECONDS)
    apply(
        control_plane,
        namespace,
        manifest(
            BG,
            {
                "controller": {"replicas": 3, "heartbeatTimeoutSeconds": 10},
                "brokers": {"sets": 2, "replicas": 3, "replication": "Sync", "minInSyncReplicas": 2},
            },
        ),
    )
    started = time.monotonic()

    # -- election --------------------------------------------------------------------------------
    eventually("every pod Ready", lambda: condition(dyn, namespace, BG, "Ready").get("status") == "True", timeout=240)
    eventually(
        "MastersElected", lambda: condition(dyn, namespace, BG, "MastersElected").get("status") == "True", timeout=60
    )
    masters = {
        sts: eventually(f"{sts} converged", lambda s=sts: converged(dyn, namespace, s), timeout=60) for sts in SETS
    }
    print(f"\ngroup up and labelled in {time.monotonic() - started:.1f} s: {masters}")
    for sts in SETS:
        # kube-controller-manager updates the EndpointSlice a moment after the role label moves.
        eventually(
            f"{sts}-master selects {masters[sts]}",
            lambda s=sts: master_slice_ips(dyn, namespace, s) == [kubelet.pod_ip(masters[s])],
        )
    assert brokergroup(dyn, namespace, BG)["status"]["masters"] == "2/2"

    # -- forced election, with messages through the master Service before and after ------------------
    sts = SETS[0]
    address = f"{master_service_ip(dyn, namespace, sts)}:10911"
    before = [f"before-{i}".encode() for i in range(20)]
    asyncio.run(produce(address, sts, before))
    # The slaves join the sync-state-set once they caught up, which Ready does not wait for: poll for one.
    target = eventually(
        "another replica in the sync-state-set",
        lambda: next(
            (p for p in set_status(dyn, namespace, BG, sts).get("syncStateSet") or [] if p != masters[sts]), None
        ),
        timeout=120,
    )
    control_plane.kubectl("annotate", "-n", namespace, "bg", BG, f"brokergroup.io/elect-master={target}")
    asked = time.monotonic()
    eventually("label moved to the target", lambda: converged(dyn, namespace, sts) == target, timeout=60)
    print(f"forced election: label on {target} {time.monotonic() - asked:.2f} s after the annotation")
    # The follower moves masterPod and the labels from the controller's feed; the reconcile that asked for the
    # election writes lastElection in its own status write, which may come after: poll for it.
    record = eventually(
        "lastElection records the forced election",
        lambda: (r := set_status(dyn, namespace, BG, sts).get("lastElection") or {}).get("target") == target and r,
        timeout=30,
    )
    assert record["target"] == target and record["result"] == "Elected", record
    assert record["masterEpoch"] == set_status(dyn, namespace, BG, sts)["masterEpoch"]
    annotations = brokergroup(dyn, namespace, BG)["metadata"].get("annotations") or {}
    assert "brokergroup.io/elect-master" not in annotations
    after = [f"after-{i}".encode() for i in range(20)]
    asyncio.run(produce(address, sts, after))
    assert asyncio.run(consume_all(address, sts)) == before + after

    # -- failover: kill -9 of the master's process ------------------------------------------------
    api_service = get(dyn, "v1", "Service", namespace, f"{BG}-controller-api")
    assert api_service is not None
    controller = [f"{api_service['spec']['clusterIP']}:9878"]
    old = converged(dyn, namespace, sts)
    assert old == target
    # A master alone in its sync-state-set is the only electable replica: it would be elected again.
    eventually(
        "the new master's sync-state-set holds every replica",
        lambda: len(set_status(dyn, namespace, BG, sts).get("syncStateSet") or []) == 3,
        timeout=120,
    )
    epoch = set_status(dyn, namespace, BG, sts)["masterEpoch"]
    killed, killed_wall = time.monotonic(), time.time()
    kubelet.kill(old, signal.SIGKILL)

    def elected() -> str | None:
        after = [pod for ts, pod in elections(controller, sts, pod_of_dns_address) if ts > killed_wall]
        return after[-1] if after else None

    try:
        new = eventually("the controller elected a master after the kill", elected, timeout=60)
        eventually(
            f"status and labels name the elected master only ({new})",
            lambda: (
                converged(dyn, namespace, sts) == elected()
                and set_status(dyn, namespace, BG, sts)["masterEpoch"] > epoch
            ),
            timeout=60,
        )
    except AssertionError:
        print(f"killed {old} at {killed:.3f}; status {json.dumps(set_status(dyn, namespace, BG, sts), indent=1)}")
        print("elections:", elections(controller, sts, pod_of_dns_address), f"kill at {killed_wall:.3f}")
        with label_log.lock:
            print("label changes since the kill:", [c for c in label_log.changes if c[0] >= killed - 1])
        for i in range(3):
            print(f"--- {sts}-{i}\n" + "\n".join(kubelet.logs(f"{sts}-{i}").splitlines()[-40:]))
        print("--- operator\n" + operator.log())
        raise
    new = str(converged(dyn, namespace, sts))
    if new == old:
        print(f"failover: kill -9 {old} -> the controller elected {old} again once it was back")
    else:
        # The label log is filled by a watch thread, which may see the change after `converged` did.
        labelled_at = eventually(
            "the watch saw the new master label", lambda: label_log.first_master_since(sts, killed, other_than=old)
        )
        print(f"failover: kill -9 {old} -> role=master on {new} in {labelled_at - killed:.3f} s")
    eventually("a MasterElected Event", lambda: "MasterElected" in event_reasons(dyn, namespace, BG))

    # -- master-last rolling update ------------------------------------------------------------------
    masters = {s: eventually(f"{s} converged", lambda s=s: converged(dyn, namespace, s), timeout=60) for s in SETS}
    before = {
        s: ((get(dyn, "apps/v1", "StatefulSet", namespace, s) or {}).get("status") or {}).get("updateRevision")
        for s in SETS
    }
    rolled = time.monotonic()
    control_plane.kubectl(
        "patch",
        "-n",
        namespace,
        "bg",
        BG,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"brokers": {"resources": {"requests": {"cpu": "260m", "memory": "512Mi"}}}}}),
    )

    def all_updated() -> bool:
        for s in SETS:
            live = get(dyn, "apps/v1", "StatefulSet", namespace, s) or {}
            revision = (live.get("status") or {}).get("updateRevision")
            pods = dyn.resources.get(api_version="v1", kind="Pod").get(namespace=namespace, label_selector=f"{SET}={s}")
            # The operator has not applied the new template yet while the revision is the old one.
            if not revision or revision == before[s] or len(pods.items) != 3:
                return False
            if any((p.metadata.labels or {}).get("controller-revision-hash") != revision for p in pods.items):
                return False
        return condition(dyn, namespace, BG, "Ready").get("status") == "True"

    try:
        eventually("both sets rolled", all_updated, timeout=300)
    except AssertionError:
        print(rollout_state(dyn, namespace), "\n", operator.log())
        for s in SETS:
            for i in range(3):
                print(f"--- {s}-{i}\n" + "\n".join(kubelet.logs(f"{s}-{i}").splitlines()[-15:]))
        raise
    wall = time.monotonic() - rolled
    print(f"master-last roll of 2 sets x 3 replicas, resync {CHART_RESYNC_SECONDS:g} s: {wall:.1f} s")
    # Events are posted after the status write of the cycle that made them: poll rather than read once.
    reasons = eventually(
        "an ElectedForRollout Event per set",
        lambda: (r := event_reasons(dyn, namespace, BG)).count("ElectedForRollout") >= 2 and r,
    )
    assert reasons.count("ElectedForRollout") >= 2, reasons
    for s in SETS:
        # Status (masterPod) and the labels are written one after the other: wait until they agree on one pod.
        now = eventually(f"{s}: status and labels agree", lambda s=s: converged(dyn, namespace, s), timeout=60)
        assert now not in (None, masters[s]), f"{s}: the master did not hand over"
        steps = eventually(
            f"{s}: the watch saw 3 pods rolled", lambda s=s: len(r := rolls(label_log, s, rolled, masters)) == 3 and r
        )
        # Master last: the pod that was master is deleted after the others, no longer labelled master.
        assert steps[-1].was_master and not steps[-1].labelled_master_when_deleted, steps
        restarts = [r.ready - r.deleted for r in steps]
        set_wall = steps[-1].ready - rolled
        print(
            f"  {s}: order {[r.pod for r in steps]}; each pod deleted -> replacement Ready "
            f"{', '.join(f'{x:.1f}' for x in restarts)} s; set rolled in {set_wall:.1f} s, "
            f"{set_wall - sum(restarts):.1f} s of it beyond the pods' own restarts "
            f"({(set_wall - sum(restarts)) / 3:.1f} s per replica)"
        )

    # -- never two masters ------------------------------------------------------------------------
    doubles = [(at, s, pods) for at, s, pods in label_log.masters_over_time() if len(pods) > 1]
    if doubles:
        with label_log.lock:
            near = [c for c in label_log.changes if abs(c[0] - doubles[0][0]) < 5]
        print("label changes around the first double:", near)
    assert doubles == [], doubles[:3]
    convergence = operator.metric("brokergroup_role_label_convergence_seconds_sum")
    count = operator.metric("brokergroup_role_label_convergence_seconds_count")
    print(
        f"label convergence from the controller's commit: {count:.0f} elections, "
        f"mean {convergence / max(count, 1):.3f} s"
    )
    assert count >= 1
