"""The controller's view of a broker set, mapped onto pods, and the scale-down guard (pure).

The controller is the one authority on who is master. The operator reads its sync-state data,
maps broker addresses (`<pod>.<set>.<ns>.svc:<port>`) to pods, and decides from that view only.
"""

from __future__ import annotations

from dataclasses import dataclass

from brokergroup.controller.protocol import ReplicasInfo
from brokergroup.operator import names


@dataclass(frozen=True)
class Member:
    pod: str
    broker_id: int
    alive: bool
    in_sync: bool


@dataclass(frozen=True)
class SetView:
    """One broker set as the controller sees it. `master_pod` is None when there is no master, or
    when the master's address is not a pod of this set."""

    name: str
    master_pod: str | None
    master_broker_id: int | None
    master_epoch: int
    sync_state_set_epoch: int
    members: tuple[Member, ...]

    def member(self, pod: str) -> Member | None:
        return next((m for m in self.members if m.pod == pod), None)


def pod_of_address(statefulset: str, address: str | None) -> str | None:
    """`bg-broker-0-2.bg-broker-0.ns.svc:10911` -> `bg-broker-0-2` when it belongs to `statefulset`."""
    if not address:
        return None
    host = address.rsplit(":", 1)[0]
    pod, _, rest = host.partition(".")
    if names.pod_ordinal(statefulset, pod) is None or not rest.startswith(f"{statefulset}."):
        return None
    return pod


def set_view(statefulset: str, info: ReplicasInfo) -> SetView:
    """The controller's replicas of `statefulset`, one per pod. A pod whose volume was lost comes back empty and
    registers under a new broker id at the same address, and the controller keeps the old id until it is
    cleaned: the pod is the id the controller made master, else its alive id, else its newest one."""
    by_pod: dict[str, Member] = {}
    for in_sync, replicas in ((True, info.in_sync_replicas), (False, info.not_in_sync_replicas)):
        for replica in replicas:
            pod = pod_of_address(statefulset, replica.broker_address)
            if pod is None:
                continue
            member = Member(pod=pod, broker_id=replica.broker_id, alive=replica.alive, in_sync=in_sync)
            if pod not in by_pod or _rank(member, info.master_broker_id) > _rank(by_pod[pod], info.master_broker_id):
                by_pod[pod] = member
    members = list(by_pod.values())
    return SetView(
        name=statefulset,
        master_pod=pod_of_address(statefulset, info.master_address),
        master_broker_id=info.master_broker_id,
        master_epoch=info.master_epoch,
        sync_state_set_epoch=info.sync_state_set_epoch,
        members=tuple(sorted(members, key=lambda m: names.pod_ordinal(statefulset, m.pod) or 0)),
    )


def _rank(member: Member, master_broker_id: int | None) -> tuple[bool, bool, int]:
    return member.broker_id == master_broker_id, member.alive, member.broker_id


@dataclass(frozen=True)
class Proceed:
    reason: str


@dataclass(frozen=True)
class ElectAway:
    """Ask the controller to elect `target` before the StatefulSet shrinks past the master."""

    master_pod: str
    target_pod: str
    target_broker_id: int


@dataclass(frozen=True)
class Blocked:
    reason: str


ScaleDecision = Proceed | ElectAway | Blocked


def guard_scale_down(statefulset: str, live: int, desired: int, view: SetView | None) -> ScaleDecision:
    """May the StatefulSet go from `live` to `desired` replicas now?

    Shrinking removes the highest ordinals. If the master is one of them, the operator first asks
    the controller to elect an alive, in-sync replica that stays; without a view of the set it
    waits rather than guess."""
    if desired >= live:
        return Proceed("not shrinking")
    if view is None:
        return Blocked(f"{statefulset}: the controller's view of the set is unavailable; not removing pods blind")
    if view.master_pod is None and view.master_broker_id is not None:
        return Blocked(
            f"{statefulset}: the controller's master (broker {view.master_broker_id}) is at an address that is not "
            "one of this StatefulSet's pods; not removing pods blind"
        )
    if view.master_pod is None:
        return Proceed("the set has no master")
    ordinal = names.pod_ordinal(statefulset, view.master_pod)
    if ordinal is not None and ordinal < desired:
        return Proceed(f"master {view.master_pod} stays")
    for member in view.members:
        member_ordinal = names.pod_ordinal(statefulset, member.pod)
        if member_ordinal is not None and member_ordinal < desired and member.alive and member.in_sync:
            return ElectAway(master_pod=view.master_pod, target_pod=member.pod, target_broker_id=member.broker_id)
    return Blocked(
        f"{statefulset}: master {view.master_pod} would be removed and no alive in-sync replica among the "
        f"first {desired} pods can take over; waiting"
    )
