"""Which broker set a pod named on the command line belongs to, and why a switchover cannot start (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from brokergroup.operator import labels, names


class PluginError(Exception):
    """A refusal with one line for the user; nothing was changed."""


def set_of_pod(bg: Mapping[str, Any], pod: str) -> str:
    """The broker set (`<bg>-broker-<i>`) whose pod `pod` is, per the BrokerGroup's status."""
    name = str((bg.get("metadata") or {}).get("name", ""))
    namespace = str((bg.get("metadata") or {}).get("namespace", ""))
    sets = [s for s in (bg.get("status") or {}).get("brokerSets") or [] if isinstance(s, Mapping)]
    for entry in sets:
        set_name = str(entry.get("name", ""))
        ordinal = names.pod_ordinal(set_name, pod)
        if ordinal is None:
            continue
        desired = entry.get("desiredReplicas")
        if isinstance(desired, int) and ordinal >= desired:
            raise PluginError(
                f"pod {pod} is not in set {set_name}: it has {desired} replicas (ordinals 0-{desired - 1})"
            )
        return set_name
    known = ", ".join(str(s.get("name")) for s in sets) or "none in status yet"
    raise PluginError(
        f"pod {pod} is not a broker pod of brokergroup {namespace}/{name} "
        f"(its pods are named {names.broker_set(name, 0)}-<ordinal>, ...; sets: {known})"
    )


def switchover_problem(bg: Mapping[str, Any], pod: str, set_name: str) -> str | None:
    """Why a forced election of `pod` must not be requested now, or None."""
    meta = bg.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    pending = annotations.get(labels.ELECT_MASTER_ANNOTATION)
    if pending:
        return f"an election request for {pending} is still waiting for the operator; try again when it is answered"
    conditions = (bg.get("status") or {}).get("conditions") or []
    paused = annotations.get(labels.PAUSE_ANNOTATION) == "true"  # asked for, though maybe not seen yet
    if paused or any(c.get("type") == "ReconciliationPaused" and c.get("status") == "True" for c in conditions):
        return f"brokergroup {meta.get('name')} is paused; run `kubectl brokergroup resume {meta.get('name')}` first"
    for entry in (bg.get("status") or {}).get("brokerSets") or []:
        if entry.get("name") == set_name and entry.get("masterPod") == pod:
            return f"pod {pod} is already the master of {set_name} (epoch {entry.get('masterEpoch')}); nothing to do"
    return None


def election_answer(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None, pod: str) -> bool:
    """Has the operator recorded an answer to our request for `pod` (a lastElection different from before)?"""
    return after is not None and after.get("request") == pod and dict(after) != dict(before or {})


def set_entry(bg: Mapping[str, Any], set_name: str) -> Mapping[str, Any]:
    for entry in (bg.get("status") or {}).get("brokerSets") or []:
        if isinstance(entry, Mapping) and entry.get("name") == set_name:
            return entry
    return {}


def controller_pod_ordinal(bg: Mapping[str, Any], pod: str) -> int | None:
    """The ordinal of `pod` when it is one of the group's controller pods (`<bg>-controller-<i>`), else None."""
    name = str((bg.get("metadata") or {}).get("name", ""))
    return names.pod_ordinal(names.controller(name), pod)


def restart_handover(
    bg: Mapping[str, Any], pod: str, set_name: str, *, pod_ready: bool = True, force: bool = False
) -> str | None:
    """Master-last: the replica to switch over to before restarting `pod` (None: `pod` is not the master).

    Refused (PluginError) when the set has a replica down already (unless `force`), when `pod` is the master
    and no other replica is in sync and alive, or when the master must move while the group is paused.
    `pod_ready`: whether `pod` itself is Ready (a pod that is not may be restarted when all others are)."""
    entry = set_entry(bg, set_name)
    desired, ready = entry.get("desiredReplicas"), entry.get("readyReplicas")
    if isinstance(desired, int) and isinstance(ready, int) and not force:
        others_down = desired - ready - (0 if pod_ready else 1)
        if others_down > 0:
            raise PluginError(
                f"set {set_name} has {ready}/{desired} replicas ready: restarting {pod} now could leave too few "
                "in sync; wait until the others are ready, or pass --force"
            )
    if entry.get("masterPod") != pod:
        return None
    candidates = sorted(
        str(r.get("pod"))
        for r in entry.get("replicas") or []
        if isinstance(r, Mapping) and r.get("pod") != pod and r.get("inSync") and r.get("alive")
    )
    if not candidates:
        raise PluginError(
            f"pod {pod} is the master of {set_name} and no other replica is in sync and alive to take over; "
            "restarting it would stop the set's writes"
        )
    problem = switchover_problem(bg, candidates[0], set_name)
    if problem:
        raise PluginError(f"pod {pod} is the master of {set_name}: it must be switched over first, but {problem}")
    return candidates[0]
