"""Rolling a broker set to a new pod template, master last (pure planner).

Broker StatefulSets use the `OnDelete` update strategy: the operator, not the StatefulSet
controller, decides which pod goes next. One step per cycle, each from a fresh snapshot:

1. wait until every pod exists, is Ready, and every replica is alive and in the sync-state-set;
2. delete an out-of-date slave (highest ordinal first);
3. when only the master is out of date, ask the controller to elect an up-to-date in-sync slave (with
   `masterUpdateStrategy: Supervised`, only once the BrokerGroup carries the approval annotation);
4. once the old master's role label says slave (labels and the master Service have converged),
   delete it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from brokergroup.operator import labels, names
from brokergroup.operator.roles import SetView

REVISION_LABEL = "controller-revision-hash"


@dataclass(frozen=True)
class PodState:
    name: str
    revision: str | None
    ready: bool
    terminating: bool
    role: str | None

    @classmethod
    def of(cls, pod: Mapping[str, Any]) -> PodState:
        meta = pod.get("metadata") or {}
        conds = (pod.get("status") or {}).get("conditions") or []
        return cls(
            name=str(meta.get("name", "")),
            revision=(meta.get("labels") or {}).get(REVISION_LABEL),
            ready=any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds),
            terminating=bool(meta.get("deletionTimestamp")),
            role=(meta.get("labels") or {}).get(labels.ROLE_LABEL),
        )


@dataclass(frozen=True)
class Done:
    pass


@dataclass(frozen=True)
class Wait:
    reason: str


@dataclass(frozen=True)
class DeletePod:
    pod: str
    why: str


@dataclass(frozen=True)
class ElectUpdated:
    master_pod: str
    target_pod: str
    target_broker_id: int


@dataclass(frozen=True)
class AwaitApproval:
    """Supervised: every slave is rolled; the master's step waits for `brokergroup.io/approve-master-update`."""

    master_pod: str
    reason: str


Step = Done | Wait | DeletePod | ElectUpdated | AwaitApproval

APPROVE_ANNOTATION = f"{names.GROUP}/approve-master-update"


def is_approved(annotation: str | None, statefulset: str) -> bool:
    """The approval annotation names this set, or `all`."""
    return annotation is not None and annotation.strip() in (statefulset, "all")


def progress(step: Step, pods: list[PodState], update_revision: str | None) -> dict[str, object] | None:
    """`status.brokerSets[].rollout` for a step (None when the set is up to date)."""
    if isinstance(step, Done):
        return None
    updated = sum(1 for p in pods if update_revision and p.revision == update_revision)
    if isinstance(step, DeletePod):
        return {"step": "RestartingSlave", "pod": step.pod, "message": step.why, "updatedReplicas": updated}
    if isinstance(step, ElectUpdated):
        message = f"the controller elects {step.target_pod}; {step.master_pod} rolls last"
        return {"step": "SwitchingOver", "pod": step.master_pod, "message": message, "updatedReplicas": updated}
    if isinstance(step, AwaitApproval):
        return {
            "step": "WaitingForApproval",
            "pod": step.master_pod,
            "message": step.reason,
            "updatedReplicas": updated,
        }
    return {"step": "Waiting", "message": step.reason[:1024], "updatedReplicas": updated}


def plan(
    statefulset: str,
    *,
    replicas: int,
    update_revision: str | None,
    pods: list[PodState],
    view: SetView | None,
    supervised: bool = False,
    approved: bool = False,
) -> Step:
    if not update_revision:
        return Wait(f"{statefulset}: the StatefulSet controller has not computed the update revision yet")
    ordinals = {p.name: names.pod_ordinal(statefulset, p.name) for p in pods}
    ours = [p for p in pods if (ordinals[p.name] is not None and (ordinals[p.name] or 0) < replicas)]
    extra = [p.name for p in pods if ordinals[p.name] is not None and (ordinals[p.name] or 0) >= replicas]
    outdated = [p for p in ours if p.revision != update_revision]
    if not outdated:
        return Done()
    if extra:
        return Wait(f"{statefulset}: scaling down ({', '.join(sorted(extra))} still there); rolling afterwards")
    terminating = [p.name for p in ours if p.terminating]
    if terminating:
        return Wait(f"{statefulset}: waiting for {', '.join(terminating)} to finish terminating")
    if replicas == 1:
        (only,) = outdated
        return DeletePod(only.name, f"{statefulset}: single replica {only.name} restarts; the set is down meanwhile")
    busy = [p.name for p in ours if not p.ready]
    if busy or len(ours) < replicas:
        return Wait(f"{statefulset}: waiting for {', '.join(busy) or 'missing pods'} before the next pod rolls")
    if view is None:
        return Wait(f"{statefulset}: the controller's view is unavailable; not rolling pods blind")
    kept = {p.name for p in ours}
    lagging = [m.pod for m in view.members if m.pod in kept and not (m.alive and m.in_sync)]
    missing = [p.name for p in ours if view.member(p.name) is None]
    if lagging or missing:
        return Wait(f"{statefulset}: waiting for {', '.join(lagging + missing)} to rejoin the sync-state-set")
    slaves = [p for p in outdated if p.name != view.master_pod]
    if slaves:
        pod = max(slaves, key=lambda p: names.pod_ordinal(statefulset, p.name) or 0)
        if pod.role == "master":
            return Wait(f"{statefulset}: {pod.name} is still labelled master; waiting for labels to converge")
        return DeletePod(pod.name, f"{statefulset}: roll slave {pod.name} to revision {update_revision}")
    master = outdated[0]
    if supervised and not approved:
        return AwaitApproval(
            master.name,
            f"{statefulset}: every slave is rolled; annotate the BrokerGroup {APPROVE_ANNOTATION}={statefulset} "
            f"(or =all) to switch {master.name} over and roll it",
        )
    for member in view.members:
        candidate = next((p for p in ours if p.name == member.pod), None)
        if candidate is not None and candidate.revision == update_revision and member.pod != master.name:
            return ElectUpdated(master.name, member.pod, member.broker_id)
    return Wait(f"{statefulset}: no up-to-date in-sync replica can take over from {master.name}")
