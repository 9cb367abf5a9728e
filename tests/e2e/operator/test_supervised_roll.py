"""`masterUpdateStrategy: Supervised`: the master-last roll does the slaves by itself, stops before the master
with `rollout.step: WaitingForApproval`, and goes on after `brokergroup.io/approve-master-update=<set>`.

Real controllers (three replicas registered under the set's pod names, `controlled_group`), the operator, and
a stand-in for the kubelet that reports every pod of the set Ready (the pods are never scheduled, so a
deleted pod goes at once and the StatefulSet controller re-creates it at the new revision). Pod events wake
the follower: each step follows the previous one without waiting for the resync.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator

import kubernetes
import pytest
from kubernetes.dynamic import DynamicClient

from brokergroup.controller import protocol
from brokergroup.controller.client import ControllerClient
from brokergroup.local.controllers import ControllerGroup
from tests.e2e.kubeenv import ControlPlane, eventually
from tests.e2e.operator.conftest import ControlledGroup
from tests.e2e.operator.helpers import event_reasons, get, set_status

BG = "superv"
STS = f"{BG}-broker-0"


def report_ready(core: kubernetes.client.CoreV1Api, namespace: str, stop: threading.Event) -> None:
    """The kubelet's part, reduced: every pod of the set Running and Ready, once per pod object (uid)."""
    done: set[str] = set()
    while not stop.wait(0.2):
        for pod in core.list_namespaced_pod(namespace, label_selector=f"brokergroup.io/broker-set={STS}").items:
            if pod.metadata.uid in done or pod.metadata.deletion_timestamp:
                continue
            status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
            try:
                core.patch_namespaced_pod_status(pod.metadata.name, namespace, {"status": status})
            except kubernetes.client.exceptions.ApiException as exc:
                if exc.status != 404:
                    raise
                continue
            done.add(pod.metadata.uid)


@pytest.fixture
def ready_pods(kube_api: kubernetes.client.ApiClient, namespace: str) -> Iterator[None]:
    stop = threading.Event()
    thread = threading.Thread(
        target=report_ready, args=(kubernetes.client.CoreV1Api(kube_api), namespace, stop), daemon=True
    )
    thread.start()
    yield
    stop.set()
    thread.join(timeout=10)


async def rejoin(controllers: ControllerGroup, ids: set[int]) -> None:
    """alter-sync-state-set back to every replica, as the new master does once its slaves caught up."""
    async with ControllerClient(controllers.api_addresses) as client:
        info = await client.replica_info(STS)
        assert info.master_broker_id is not None
        await client.alter_sync_state_set(
            protocol.AlterSyncStateSetRequest(
                broker_name=STS,
                master_broker_id=info.master_broker_id,
                master_epoch=info.master_epoch or 0,
                sync_state_set=sorted(ids),
                sync_state_set_epoch=info.sync_state_set_epoch or 0,
            )
        )


def revisions(dyn: DynamicClient, namespace: str) -> dict[str, str | None]:
    pods = dyn.resources.get(api_version="v1", kind="Pod").get(
        namespace=namespace, label_selector=f"brokergroup.io/broker-set={STS}"
    )
    return {p.metadata.name: (p.metadata.labels or {}).get("controller-revision-hash") for p in pods.items}


@pytest.mark.timeout(400)
def test_a_supervised_roll_waits_before_the_master_and_goes_on_when_approved(
    control_plane: ControlPlane,
    namespace: str,
    controlled_group: Callable[..., ControlledGroup],
    controllers: ControllerGroup,
    dyn: DynamicClient,
    ready_pods: None,
) -> None:
    group = controlled_group(BG, master_ordinal=0)
    master = f"{STS}-0"
    eventually("pods labelled", lambda: set_status(dyn, namespace, BG, STS).get("masterPod") == master, timeout=60)

    def settled() -> str | None:
        """The revision every pod runs, once the StatefulSet controller reports it as its update revision too
        (read earlier, a lagging status named an older revision, and the pods' current one then passed for
        the new one: a CI failure)."""
        status = ((get(dyn, "apps/v1", "StatefulSet", namespace, STS) or {}).get("status") or {}).get("updateRevision")
        running = set(revisions(dyn, namespace).values())
        return status if status and running == {status} else None

    before = eventually("the pods and the StatefulSet agree on one revision", settled, timeout=60)
    spec = {"brokers": {"masterUpdateStrategy": "Supervised", "resources": {"requests": {"cpu": "300m"}}}}
    control_plane.kubectl("patch", "-n", namespace, "bg", BG, "--type=merge", "-p", json.dumps({"spec": spec}))

    def new_revision() -> str | None:
        revision = ((get(dyn, "apps/v1", "StatefulSet", namespace, STS) or {}).get("status") or {}).get(
            "updateRevision"
        )
        return revision if revision and revision != before else None

    revision = eventually("a new update revision", new_revision, timeout=60)
    try:
        waiting = eventually(
            "the roll waits for approval",
            lambda: (
                (r := set_status(dyn, namespace, BG, STS).get("rollout") or {}).get("step") == "WaitingForApproval"
                and r
            ),
            timeout=120,
        )
    except AssertionError:
        print(revisions(dyn, namespace), set_status(dyn, namespace, BG, STS), "\n", group.operator.log())
        raise
    assert waiting["pod"] == master and waiting["updatedReplicas"] == 2, waiting
    now = revisions(dyn, namespace)
    assert now[master] != revision, "the master rolled before the approval"
    assert [p for p, r in now.items() if p != master and r != revision] == [], now
    assert set_status(dyn, namespace, BG, STS)["masterPod"] == master

    control_plane.kubectl("annotate", "-n", namespace, "bg", BG, f"brokergroup.io/approve-master-update={STS}")
    new_master = eventually(
        "the controller elected an updated replica",
        lambda: (m := set_status(dyn, namespace, BG, STS).get("masterPod")) != master and m,
        timeout=60,
    )
    # The stand-in replicas do not replicate: do what the new master does once its slaves caught up.
    asyncio.run(rejoin(controllers, set(group.ids.values())))
    eventually(
        "every pod at the new revision, the roll done",
        lambda: (
            set(revisions(dyn, namespace).values()) == {revision}
            and "rollout" not in set_status(dyn, namespace, BG, STS)
        ),
        timeout=120,
    )
    assert set_status(dyn, namespace, BG, STS)["masterPod"] == new_master, "the master changed again"
    eventually("an ElectedForRollout Event", lambda: "ElectedForRollout" in event_reasons(dyn, namespace, BG))
    annotations = (get(dyn, "brokergroup.io/v1alpha1", "BrokerGroup", namespace, BG) or {})["metadata"].get(
        "annotations"
    ) or {}
    assert "brokergroup.io/approve-master-update" not in annotations
