"""metav1.Condition bookkeeping: `lastTransitionTime` moves only when `status` really changes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Status = Literal["True", "False", "Unknown"]

READY = "Ready"
RECONCILIATION_PAUSED = "ReconciliationPaused"
CONTROLLER_QUORUM = "ControllerQuorumAvailable"
MASTERS_ELECTED = "MastersElected"
ROLE_LABELS_CONVERGED = "RoleLabelsConverged"
MASTER_SERVICES_READY = "MasterServicesReady"
"""Every set has an elected master, labelled so, and Ready: its master Service selects it (the follower)."""


@dataclass(frozen=True)
class Condition:
    type: str
    status: Status
    reason: str
    message: str


def merge(
    previous: list[dict[str, Any]] | None, updates: list[Condition], *, now: str, generation: int
) -> list[dict[str, Any]]:
    """The condition list after `updates`, keeping other types as they were and sorted by type.

    A condition whose status is unchanged keeps its `lastTransitionTime`; reason, message and
    observedGeneration follow the update. Equal inputs give an equal list, so an unchanged world
    produces no status write."""
    by_type = {c["type"]: dict(c) for c in previous or [] if "type" in c}
    for update in updates:
        old = by_type.get(update.type)
        changed = old is None or old.get("status") != update.status
        by_type[update.type] = {
            "type": update.type,
            "status": update.status,
            "reason": update.reason,
            "message": update.message,
            "observedGeneration": generation,
            "lastTransitionTime": now if changed or old is None else old.get("lastTransitionTime", now),
        }
    return [by_type[t] for t in sorted(by_type)]


def find(conditions: list[dict[str, Any]] | None, type_: str) -> dict[str, Any] | None:
    return next((c for c in conditions or [] if c.get("type") == type_), None)


def transitioned(before: list[dict[str, Any]] | None, after: list[dict[str, Any]], type_: str) -> bool:
    """True when condition `type_` is new or its status differs between the two lists."""
    old, new = find(before, type_), find(after, type_)
    return new is not None and (old is None or old.get("status") != new.get("status"))
