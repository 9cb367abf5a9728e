"""Growing the data volumes when `controller.storage.size` or `brokers.storage.size` is raised (pure core).

A StatefulSet's `volumeClaimTemplates` cannot change, so the operator does what a person would
(the Zalando and Strimzi operators do the same):

1. raise `spec.resources.requests.storage` of every existing claim of the StatefulSet. The API server
   refuses it unless the claim's StorageClass has `allowVolumeExpansion: true`; then nothing else is
   changed and the condition `StorageResized` says why;
2. delete the StatefulSet with `propagationPolicy: Orphan`: its pods keep running, unowned;
3. create it again, with the new template, on the next pass. It adopts the pods (same selector, same pod
   template, so nothing rolls), and pods created later get claims of the new size.

The volume driver then grows each volume; `StorageResized` stays `False` (reason `Resizing`) until every
claim's `status.capacity` holds its request. Volumes never shrink: the CRD refuses a smaller size, and a
smaller size that still arrives (an older CRD) keeps the StatefulSet's template as it is.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from kubernetes.utils import parse_quantity

from brokergroup.operator.builders.pods import DATA_VOLUME
from brokergroup.operator.conditions import Condition

STORAGE_RESIZED = "StorageResized"
"""Present once a size was raised: every claim of the group has the size its spec asks for."""

Step = Literal["none", "grow", "shrink"]


def template_size(sts: dict[str, Any]) -> str | None:
    """The storage request of the StatefulSet's data claim template."""
    for template in (sts.get("spec") or {}).get("volumeClaimTemplates") or []:
        if (template.get("metadata") or {}).get("name") == DATA_VOLUME:
            size = (((template.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage")
            return None if size is None else str(size)
    return None


def quantity(value: str | None) -> Decimal:
    return Decimal(0) if value is None else Decimal(parse_quantity(value))  # type: ignore[no-untyped-call]


def step(desired: dict[str, Any], live: dict[str, Any]) -> Step:
    """What a StatefulSet's claim template needs: nothing, to grow, or a refused shrink."""
    want, have = quantity(template_size(desired)), quantity(template_size(live))
    if want == have:
        return "none"
    return "grow" if want > have else "shrink"


def applied_sizes(controller: dict[str, Any] | None, brokers: Iterable[dict[str, Any] | None]) -> dict[str, str]:
    """`status.storage`: the claim size the live StatefulSets apply (the brokers': the largest set's). The CRD
    lets a spec size shrink back down to it, never below."""
    out: dict[str, str] = {}
    if controller is not None and (size := template_size(controller)):
        out["controller"] = size
    sizes = [size for sts in brokers if sts is not None and (size := template_size(sts))]
    if sizes:
        out["brokers"] = max(sizes, key=quantity)
    return out


def with_template_of(desired: dict[str, Any], live: dict[str, Any]) -> dict[str, Any]:
    """`desired` carrying `live`'s claim templates (what the API server lets an update keep)."""
    spec = dict(desired["spec"])
    spec["volumeClaimTemplates"] = (live.get("spec") or {}).get("volumeClaimTemplates") or []
    return {**desired, "spec": spec}


@dataclass(frozen=True)
class Claim:
    name: str
    request: str | None
    capacity: str | None
    waiting: tuple[str, ...] = ()
    """The claim's conditions that are True (Resizing, FileSystemResizePending, ControllerResizeError...)."""

    @classmethod
    def of(cls, pvc: dict[str, Any]) -> Claim:
        spec, state = pvc.get("spec") or {}, pvc.get("status") or {}
        request = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
        capacity = (state.get("capacity") or {}).get("storage")
        waiting = tuple(str(c.get("type")) for c in state.get("conditions") or [] if str(c.get("status")) == "True")
        return cls(pvc["metadata"]["name"], request, capacity, waiting)


def claims_of(sts_name: str, replicas: int, claims: Iterable[Claim]) -> list[Claim]:
    """The claims of the StatefulSet's pods 0..replicas-1 that exist."""
    wanted = {f"{DATA_VOLUME}-{sts_name}-{ordinal}" for ordinal in range(replicas)}
    return sorted((c for c in claims if c.name in wanted), key=lambda c: c.name)


def to_raise(size: str, claims: Iterable[Claim]) -> list[str]:
    """Names of the claims whose request is below `size`."""
    return [c.name for c in claims if quantity(c.request) < quantity(size)]


def progress(wanted: dict[str, tuple[str, int]], claims: list[Claim], recreating: Iterable[str] = ()) -> Condition:
    """`StorageResized` from every StatefulSet's (size, replicas), the group's claims, and the StatefulSets still
    being re-created with their new claim template."""
    behind = [f"StatefulSet {name} is being re-created with the new claim template" for name in recreating]
    for sts_name, (size, replicas) in sorted(wanted.items()):
        for claim in claims_of(sts_name, replicas, claims):
            if quantity(claim.request) < quantity(size):
                behind.append(f"{claim.name} requests {claim.request}, not yet {size}")
            elif quantity(claim.capacity) < quantity(size):
                why = f" ({', '.join(claim.waiting)})" if claim.waiting else ""
                behind.append(f"{claim.name} has {claim.capacity or 'no capacity'} of {size}{why}")
    if behind:
        return Condition(STORAGE_RESIZED, "False", "Resizing", "; ".join(behind))
    return Condition(STORAGE_RESIZED, "True", "Resized", "every claim has the size its spec asks for")


def refused(sts_name: str, size: str, message: str) -> Condition:
    return Condition(
        STORAGE_RESIZED,
        "False",
        "ResizeRefused",
        f"growing the claims of {sts_name} to {size} was refused: {message}. The StatefulSet and its claims "
        "are unchanged; the claims' StorageClass must have allowVolumeExpansion: true",
    )


def shrink_refused(sts_name: str, size: str, live_size: str | None) -> Condition:
    return Condition(
        STORAGE_RESIZED,
        "False",
        "ShrinkRefused",
        f"{sts_name}'s claims are {live_size} and volumes cannot shrink: the spec's {size} is not applied",
    )
