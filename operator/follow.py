"""Projecting the controller's view onto pods (pure): role labels, broker ids, master epochs.

`plan_set` compares one broker set's view with its pods' metadata and yields the label patches
that make them agree, **demotions first**: a pod loses `role=master` before another gains it, so
the master Service never selects two pods. A view whose master epoch is older than what a pod
already carries is stale (a lagging controller node) and is ignored. Without a view (no
controller quorum) nothing changes: the last known labels stay.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from brokergroup.operator import labels
from brokergroup.operator.roles import SetView

MASTER = "master"
SLAVE = "slave"


@dataclass(frozen=True)
class PodMeta:
    name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    terminating: bool = False
    resource_version: str | None = None
    """As read: the patch carries it, so a broker's own newer label patch in between wins (409, re-planned)."""

    @classmethod
    def of(cls, pod: Mapping[str, Any]) -> PodMeta:
        meta = pod.get("metadata") or {}
        return cls(
            name=str(meta.get("name", "")),
            labels=dict(meta.get("labels") or {}),
            annotations=dict(meta.get("annotations") or {}),
            terminating=bool(meta.get("deletionTimestamp")),
            resource_version=meta.get("resourceVersion"),
        )

    @property
    def epoch(self) -> int | None:
        raw = self.annotations.get(labels.MASTER_EPOCH_ANNOTATION)
        return int(raw) if raw is not None and raw.isascii() and raw.isdigit() else None


@dataclass(frozen=True)
class LabelStep:
    """One metadata patch of one pod; a None value removes the key."""

    pod: str
    labels: dict[str, str | None] = field(default_factory=dict)
    annotations: dict[str, str | None] = field(default_factory=dict)
    why: str = ""
    resource_version: str | None = None

    def patch(self) -> dict[str, Any]:
        meta: dict[str, Any] = {}
        if self.resource_version:
            meta["resourceVersion"] = self.resource_version
        if self.labels:
            meta["labels"] = dict(self.labels)
        if self.annotations:
            meta["annotations"] = dict(self.annotations)
        return {"metadata": meta}


def wanted(view: SetView, pod: str) -> tuple[str | None, str | None]:
    """(role, broker id) the controller's view gives `pod`; (None, None) for a pod it does not know."""
    member = view.member(pod)
    if pod == view.master_pod:
        broker_id = view.master_broker_id if view.master_broker_id is not None else None
        if broker_id is None and member is not None:
            broker_id = member.broker_id
        return MASTER, None if broker_id is None else str(broker_id)
    if member is not None:
        return SLAVE, str(member.broker_id)
    return None, None


def is_stale(view: SetView, pods: list[PodMeta]) -> bool:
    """A pod already carries a newer master epoch than this view: the view lags."""
    return any(p.epoch is not None and p.epoch > view.master_epoch for p in pods)


def plan_set(view: SetView | None, pods: list[PodMeta]) -> list[LabelStep]:
    if view is None or is_stale(view, pods):
        return []
    demotions: list[LabelStep] = []
    updates: list[LabelStep] = []
    promotions: list[LabelStep] = []
    epoch = str(view.master_epoch)
    for pod in sorted(pods, key=lambda p: p.name):
        role, broker_id = wanted(view, pod.name)
        have_role = pod.labels.get(labels.ROLE_LABEL)
        label_changes: dict[str, str | None] = {}
        if have_role != role:
            label_changes[labels.ROLE_LABEL] = role
        if pod.labels.get(labels.BROKER_ID_LABEL) != broker_id and (broker_id or labels.BROKER_ID_LABEL in pod.labels):
            label_changes[labels.BROKER_ID_LABEL] = broker_id or None
        annotation_changes: dict[str, str | None] = {}
        if pod.annotations.get(labels.MASTER_EPOCH_ANNOTATION) != epoch:
            annotation_changes[labels.MASTER_EPOCH_ANNOTATION] = epoch
        if not label_changes and not annotation_changes:
            continue
        if have_role == MASTER and role != MASTER:
            why = f"demote {pod.name}: the controller's master is {view.master_pod or 'none'} (epoch {epoch})"
            demotions.append(LabelStep(pod.name, label_changes, annotation_changes, why, pod.resource_version))
        elif role == MASTER and have_role != MASTER:
            why = f"promote {pod.name}: master of {view.name} at epoch {epoch}"
            promotions.append(LabelStep(pod.name, label_changes, annotation_changes, why, pod.resource_version))
        else:
            updates.append(
                LabelStep(pod.name, label_changes, annotation_changes, f"update {pod.name}", pod.resource_version)
            )
    return demotions + updates + promotions


def stale_pods(view: SetView | None, pods: list[PodMeta]) -> int:
    """Pods whose labels differ from the view (the `stale_role_labels` gauge); 0 without a view."""
    return len(plan_set(view, pods)) if view is not None else 0


def set_status(view: SetView) -> dict[str, Any]:
    """The controller-owned fields of one `status.brokerSets[]` entry."""
    in_sync = [m.pod for m in view.members if m.in_sync]
    entry = {
        "masterPod": view.master_pod,
        "masterBrokerId": view.master_broker_id,
        "masterEpoch": view.master_epoch,
        "syncStateSet": in_sync,
        "syncStateSetEpoch": view.sync_state_set_epoch,
        "replicas": [
            {
                "pod": m.pod,
                "brokerId": m.broker_id,
                "role": MASTER if m.pod == view.master_pod else SLAVE,
                "inSync": m.in_sync,
                "alive": m.alive,
            }
            for m in view.members
        ],
    }
    # Absent rather than null: the stored status drops nulls, and equal dicts mean no write.
    return {k: v for k, v in entry.items() if v is not None}
