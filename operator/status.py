"""The BrokerGroup's status, computed from one snapshot of its children (pure).

`observe` reads what the StatefulSets report; `build` turns that and the previous status into the
new status; equal inputs give an equal status, so an unchanged world writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from brokergroup.operator import conditions, names
from brokergroup.operator.conditions import Condition
from brokergroup.operator.spec import BrokerGroupSpec


@dataclass(frozen=True)
class Workload:
    """What one StatefulSet reports."""

    name: str
    desired: int
    ready: int
    updated: int
    current_generation: bool
    """The StatefulSet controller has seen the StatefulSet's latest spec."""

    @property
    def settled(self) -> bool:
        return self.current_generation and self.ready == self.desired and self.updated == self.desired


def workload(sts: dict[str, Any] | None, name: str, desired: int) -> Workload:
    if sts is None:
        return Workload(name=name, desired=desired, ready=0, updated=0, current_generation=False)
    status = sts.get("status") or {}
    generation = (sts.get("metadata") or {}).get("generation")
    return Workload(
        name=name,
        desired=desired,
        ready=int(status.get("readyReplicas") or 0),
        updated=int(status.get("updatedReplicas") or 0),
        current_generation=generation is not None and status.get("observedGeneration") == generation,
    )


@dataclass(frozen=True)
class Observed:
    controller: Workload
    brokers: tuple[Workload, ...]


def sets_holding_data(bg: str, broker_sets: list[dict[str, Any]]) -> int:
    """1 + the highest index of a set that holds (or may hold) data; 0 when none does. The CRD's
    CEL rule refuses `brokers.sets` below this number. Indexes come from the set names."""
    highest = -1
    for entry in broker_sets:
        index = names.set_index(bg, str(entry.get("name", "")))
        if entry.get("holdsData") and index is not None:
            highest = max(highest, index)
    return highest + 1


def broker_set_entries(bg: str, observed: Observed, previous: dict[str, Any]) -> list[dict[str, Any]]:
    """status.brokerSets: one entry per set of the spec, plus removed sets still holding data.

    `holdsData` is sticky and conservative: a set holds data once any of its pods was Ready (a broker
    ran and may have accepted messages). Fields this module does not own (master, sync-state-set,
    replicas, lastElection: written from the controller's view) are carried over unchanged."""
    old = {e.get("name"): e for e in previous.get("brokerSets") or [] if isinstance(e, dict)}
    entries: list[dict[str, Any]] = []
    for sts in observed.brokers:
        entry = dict(old.get(sts.name) or {})
        entry.update(
            {
                "name": sts.name,
                "desiredReplicas": sts.desired,
                "readyReplicas": sts.ready,
                # Released (brokergroup.io/release-set): not holding data, whatever ran, until it leaves the spec.
                "holdsData": (bool(entry.get("holdsData")) or sts.ready > 0) and not entry.get("released"),
            }
        )
        entries.append(entry)
    kept = {e["name"] for e in entries}
    index = len(entries)
    while (name := names.broker_set(bg, index)) in old:
        if old[name].get("holdsData") and name not in kept:
            entries.append(dict(old[name]))
        index += 1
    return entries


def masters(broker_sets: list[dict[str, Any]]) -> str:
    """`<sets with a known master>/<sets>` for the printer column."""
    return f"{sum(1 for e in broker_sets if e.get('masterPod'))}/{len(broker_sets)}"


def progress(w: Workload) -> str:
    """Where a StatefulSet that is not settled stands, in words whose counts read right."""
    if w.ready > w.desired:
        return f"{w.name} scaling down to {w.desired} ({w.ready} pods still ready)"
    text = f"{w.name} {w.ready}/{w.desired} ready"
    if w.ready == w.desired and w.updated < w.desired:  # all ready, a roll still to do
        text += f", {w.updated}/{w.desired} at the new revision"
    if not w.current_generation:
        text += ", the StatefulSet controller has not seen the latest spec yet"
    return text


def readiness(observed: Observed, previous_conditions: list[dict[str, Any]] | None = None) -> Condition:
    """Ready means writable: every replica is ready **and** every set has an elected master that its master
    Service selects (the follower's `MasterServicesReady`, carried in the status)."""
    workloads = (observed.controller, *observed.brokers)
    waiting = [w for w in workloads if not w.settled]
    if waiting:
        detail = ", ".join(progress(w) for w in waiting)
        return Condition(conditions.READY, "False", "ReplicasNotReady", detail)
    served = conditions.find(previous_conditions, conditions.MASTER_SERVICES_READY)
    if served is None:
        return Condition(
            conditions.READY, "False", "WaitingForController", "replicas are ready; the masters are not known yet"
        )
    if served.get("status") != "True":
        return Condition(conditions.READY, "False", str(served.get("reason")), str(served.get("message")))
    return Condition(
        conditions.READY,
        "True",
        "AllReplicasReady",
        "every replica is ready and every master Service selects its set's elected master",
    )


def phase_of(conds: list[dict[str, Any]]) -> str:
    paused = conditions.find(conds, conditions.RECONCILIATION_PAUSED)
    if paused and paused.get("status") == "True":
        return "Paused"
    ready = conditions.find(conds, conditions.READY)
    if ready is None:
        return "Pending"
    if ready.get("status") == "True":
        return "Ready"
    return {"InvalidSpec": "Failed", "InvalidSecret": "Failed"}.get(str(ready.get("reason")), "Progressing")


def build(
    *,
    bg: str,
    spec: BrokerGroupSpec,
    generation: int,
    observed: Observed,
    previous: dict[str, Any],
    extra_conditions: list[Condition],
    now: str,
) -> dict[str, Any]:
    """The full status after a successful reconcile of `generation`."""
    updates = [readiness(observed, previous.get("conditions")), *extra_conditions]
    if any(c.type == conditions.READY for c in extra_conditions):  # e.g. a scale-down waiting
        updates = list(extra_conditions)
    conds = conditions.merge(previous.get("conditions"), updates, now=now, generation=generation)
    sets = broker_set_entries(bg, observed, previous)
    out = dict(previous)
    out.update(
        {
            "observedGeneration": generation,
            "conditions": conds,
            "phase": phase_of(conds),
            "controller": {
                **(previous.get("controller") or {}),  # the follower's `leader`
                "replicas": observed.controller.desired,
                "readyReplicas": observed.controller.ready,
            },
            "brokerSets": sets,
            "setsHoldingData": sets_holding_data(bg, sets),
            "masters": masters(sets[: spec.brokers.sets]),
        }
    )
    return out


def with_conditions(previous: dict[str, Any], updates: list[Condition], *, now: str, generation: int) -> dict[str, Any]:
    """The previous status with only conditions (and the phase) changed: for a paused or refused
    reconcile, which does not advance observedGeneration."""
    conds = conditions.merge(previous.get("conditions"), updates, now=now, generation=generation)
    out = dict(previous)
    out["conditions"] = conds
    out["phase"] = phase_of(conds)
    return out
