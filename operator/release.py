"""`brokergroup.io/release-set=<set>`: let a broker set that held messages be removed (pure core).

`spec.brokers.sets` cannot shrink below `status.setsHoldingData` (a CEL rule), so a set that ever ran cannot
be removed by mistake. Releasing it is the deliberate step in between: the administrator (normally
`kubectl brokergroup remove-set`, after the set's writes were stopped and its consumers drained) asks for it,
and the operator marks the set's status entry `released` and no longer `holdsData`. The set can then leave
the spec; its StatefulSet is deleted, and its PersistentVolumeClaims stay until deleted by hand.

Sets shrink from the top, so only the last set of the spec can be released, and never the only one. A
released set that is still in the spec keeps serving; `released` goes with its status entry when it leaves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from brokergroup.operator import names


@dataclass(frozen=True)
class Released:
    broker_set: str
    message: str


@dataclass(frozen=True)
class Refused:
    message: str


def decide(bg: str, spec_sets: int, request: str) -> Released | Refused:
    """Whether `request` (the annotation's value) names a set that may be released."""
    wanted = request.strip()
    last = names.broker_set(bg, spec_sets - 1)
    if spec_sets <= 1:
        return Refused(f"release-set={request!r}: {bg} has one broker set, and a BrokerGroup keeps at least one")
    if wanted != last:
        index = names.set_index(bg, wanted)
        why = "names no broker set of this group" if index is None or index >= spec_sets else "is not the last set"
        return Refused(f"release-set={request!r} {why}: sets are removed from the top, so only {last} can be released")
    return Released(
        last,
        f"{last} released: spec.brokers.sets may now go down to {spec_sets - 1}; its PersistentVolumeClaims are "
        "kept until deleted by hand",
    )


def apply(previous: dict[str, Any], broker_set: str) -> dict[str, Any]:
    """The status with `broker_set`'s entry released (and no longer holding data)."""
    entries = [dict(e) for e in previous.get("brokerSets") or [] if isinstance(e, dict)]
    for entry in entries:
        if entry.get("name") == broker_set:
            entry.update({"released": True, "holdsData": False})
            break
    else:
        entries.append({"name": broker_set, "released": True, "holdsData": False})
    return {**previous, "brokerSets": entries}
