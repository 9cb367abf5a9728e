"""Kubernetes Events (events.k8s.io/v1) for what the operator does: pure builders."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

from brokergroup.operator import names

REPORTING_CONTROLLER: Final = "brokergroup.io/operator"
NOTE_LIMIT: Final = 1024


@dataclass(frozen=True)
class Event:
    reason: str
    """CamelCase reason, e.g. `ChildrenApplied`, `ElectedAwayFromRemovedPod`, `InvalidSpec`."""
    note: str
    action: str
    type: Literal["Normal", "Warning"] = "Normal"


def truncate_note(note: str) -> str:
    """The apiserver limits `note` to 1024 bytes (not characters): cut on a character boundary."""
    raw = note.encode()
    if len(raw) <= NOTE_LIMIT:
        return note
    return raw[: NOTE_LIMIT - 3].decode(errors="ignore") + "..."


def build(event: Event, *, bg: dict[str, Any], now: str, instance: str, suffix: str) -> dict[str, Any]:
    """The Event object regarding BrokerGroup `bg` (its metadata as read from the API).

    `now` is a MicroTime (`2026-11-21T10:00:00.000000Z`); `instance` names this operator process;
    the Event is named `<bg>.<suffix>` as kubectl and client-go name theirs (suffix: a unique
    lowercase hex string)."""
    meta = bg["metadata"]
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{meta['name']}.{suffix}", "namespace": meta["namespace"]},
        "eventTime": now,
        "reportingController": REPORTING_CONTROLLER,
        "reportingInstance": instance[:128],
        "action": event.action[:128],
        "reason": event.reason[:128],
        "type": event.type,
        "note": truncate_note(event.note),
        "regarding": {
            "apiVersion": f"{names.GROUP}/{names.VERSION}",
            "kind": names.KIND,
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
    }
